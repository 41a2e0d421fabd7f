"""Files between stages: atomic writes, Parquet tables, content hashes, stable ids and stage manifests.

Every stage writes its tables with :func:`write_table` (temp file + rename, so a killed stage never leaves a
half-written output) and finishes with a :class:`StageRecorder`, which writes ``manifest.json``: the config it ran
with, the hashes of its inputs, package versions, row counts in/out/rejected and timings. The local runner uses
the manifest to skip stages whose inputs and config have not changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from . import __version__
from .errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pydantic import BaseModel

MANIFEST = "manifest.json"
REJECTED = "rejected.parquet"


# ---------------------------------------------------------------------------------------------------- ids, hashes


DEFAULT_MODEL_CACHE = "~/.cache/context-cda/models"


def model_cache_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """Where converted and downloaded models live: $CCDA_MODEL_CACHE, else ``cache``, else the default."""
    return Path(os.environ.get("CCDA_MODEL_CACHE") or cache or DEFAULT_MODEL_CACHE).expanduser()


def stable_id(*parts: object) -> str:
    """A 16-hex-digit id that depends only on ``parts`` (joined with a separator that cannot occur in text)."""
    return xxhash.xxh3_128_hexdigest("\x1f".join(map(str, parts)).encode("utf-8"))[:16]


def file_sha256(path: Path | str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


_CONTENT_HASH_MAX = 8 << 20  # folder members up to this size are hashed by content, larger ones by size + mtime


def path_hash(path: Path | str, ignore: tuple[str, ...] = ()) -> str:
    """sha256 of a file; for a folder, sha256 of its (relative path, member hash) listing, where members above
    8 MiB (weights, optimizer states) count by size and modification time, so big folders are not read back
    each time a manifest or an up-to-date check looks at them. Files named in ``ignore`` are left out."""
    p = Path(path)
    if p.is_file():
        return file_sha256(p)
    if p.is_dir():
        h = hashlib.sha256()
        for f in sorted(q for q in p.rglob("*") if q.is_file() and q.name not in ignore):
            st = f.stat()
            h.update(str(f.relative_to(p)).encode())
            h.update((file_sha256(f) if st.st_size <= _CONTENT_HASH_MAX else f"{st.st_size}:{st.st_mtime_ns}").encode())
        return h.hexdigest()
    raise InputError(f"{p}: no such file or folder.")


def json_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- atomic writes


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(dest: Path | str, replace: bool = True) -> Iterator[Path]:
    """Yield a new, empty, uniquely named folder beside ``dest``; when the block succeeds it becomes ``dest``.

    ``replace=True`` swaps out an existing ``dest``; ``replace=False`` keeps an existing ``dest`` (another process
    finished the same work first) and drops this one. On an error nothing of the new folder remains, and two
    writers never share a temporary folder.
    """
    import shutil

    final = Path(dest)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            if not replace:
                return
            old = final.with_name(f".{final.name}.old-{tmp.name}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: Path | str, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: Path | str, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str, ensure_ascii=False) + "\n")


def read_json(path: Path | str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise InputError(f"{path}: file not found.") from e
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno}: not valid JSON ({e.msg}).") from e


# ---------------------------------------------------------------------------------------------------- tables


def write_table(df: pd.DataFrame, path: Path | str) -> Path:
    """Write a DataFrame as Parquet (or JSONL for a .jsonl path), atomically."""
    p = Path(path)
    with atomic_path(p) as tmp:
        if p.suffix == ".jsonl":
            df.to_json(tmp, orient="records", lines=True, force_ascii=False)
        else:
            df.to_parquet(tmp, index=False)
    return p


def read_table(path: Path | str, columns: list[str] | None = None) -> pd.DataFrame:
    """Read a stage table (Parquet, JSONL or CSV), with a clear error when it is missing."""
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: not found. Run the stage that produces it first (or check --run-dir).")
    if p.suffix == ".parquet":
        return pd.read_parquet(p, columns=columns)
    if p.suffix == ".jsonl":
        df = pd.read_json(p, lines=True)
    elif p.suffix == ".csv":
        df = pd.read_csv(p)
    else:
        raise InputError(f"{p}: unsupported table format {p.suffix!r} (use .parquet, .jsonl or .csv).")
    return df[columns] if columns else df


def require_columns(df: pd.DataFrame, columns: list[str], source: Path | str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}."
        )


def write_rejected(rows: list[dict[str, Any]] | pd.DataFrame, out_dir: Path | str) -> Path:
    """Write rows a stage rejected, each with a ``reason``, to ``out_dir/rejected.parquet`` (always written)."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    if "reason" not in df.columns:
        df = df.assign(reason=pd.Series(dtype="string"))
    return write_table(df, Path(out_dir) / REJECTED)


# ---------------------------------------------------------------------------------------------------- manifests


def package_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    from importlib import metadata

    names = ("pandas", "pyarrow", "pydantic", *extra)
    out = {"context-cda": __version__, "python": platform.python_version()}
    for n in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[n] = metadata.version(n)
    return out


@dataclass
class StageRecorder:
    """Collects what a stage did and writes ``manifest.json`` beside its outputs when it finishes."""

    stage: str
    out_dir: Path
    config: Mapping[str, Any] | BaseModel
    inputs: Mapping[str, Path | str] = field(default_factory=dict)
    versions: tuple[str, ...] = ()
    started: float = field(default_factory=time.time)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = time.perf_counter()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - t, 4)

    def config_dict(self) -> dict[str, Any]:
        cfg = self.config
        return cfg.model_dump(mode="json") if hasattr(cfg, "model_dump") else dict(cfg)

    def input_hashes(self) -> dict[str, dict[str, str]]:
        return {k: {"path": str(v), "sha256": path_hash(v)} for k, v in self.inputs.items()}

    def finish(
        self,
        counts: Mapping[str, int],
        outputs: Mapping[str, Path | str] | None = None,
        summary: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        self.timings["total"] = round(time.perf_counter() - self._t0, 4)
        manifest = {
            "stage": self.stage,
            "config": self.config_dict(),
            "config_hash": json_hash(self.config_dict()),
            "inputs": self.input_hashes(),
            "outputs": {k: {"path": str(v), "sha256": path_hash(v)} for k, v in (outputs or {}).items()},
            "versions": package_versions(self.versions),
            "counts": dict(counts),
            "timings": self.timings,
            "started": datetime.fromtimestamp(self.started, tz=timezone.utc).isoformat(),
            "finished": datetime.now(tz=timezone.utc).isoformat(),
            "summary": dict(summary or {}),
        }
        write_json(self.out_dir / MANIFEST, manifest)
        return manifest


def is_up_to_date(
    out_dir: Path | str, config: Mapping[str, Any] | BaseModel, inputs: Mapping[str, Path | str]
) -> bool:
    """True when ``out_dir`` holds a manifest for the same config and inputs, and its outputs still exist."""
    mpath = Path(out_dir) / MANIFEST
    if not mpath.is_file():
        return False
    try:
        m = json.loads(mpath.read_text())
    except json.JSONDecodeError:
        return False
    cfg = config.model_dump(mode="json") if hasattr(config, "model_dump") else dict(config)
    if m.get("config_hash") != json_hash(cfg):
        return False
    for name, p in inputs.items():
        rec = m.get("inputs", {}).get(name)
        if rec is None or not Path(p).exists() or rec.get("sha256") != path_hash(p):
            return False
    return all(Path(o["path"]).exists() for o in m.get("outputs", {}).values())
