"""Files between stages: atomic writes, Parquet tables, content hashes, stable ids and folder locks.

Every stage writes its tables with :func:`write_table` (temp file + rename, so a killed stage never leaves a
half-written output). The step envelope (:mod:`context_cda.steps`) writes each step's ``manifest.json`` (the
config keys it ran with, the hashes of its inputs, package versions, counts, timings) with :func:`write_json` and
:func:`package_versions`, and holds the step folder's lock (:func:`file_lock`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import xxhash

from . import __version__
from .errors import InputError, LockHeld

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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


def path_hash(path: Path | str, ignore: tuple[str, ...] = (), ignore_dirs: tuple[str, ...] = ()) -> str:
    """sha256 of a file; for a folder, sha256 of its (relative path, member hash) listing, where members above
    8 MiB (weights, optimizer states) count by size and modification time, so big folders are not read back
    each time a manifest or an up-to-date check looks at them. Files named in ``ignore``, and everything below a
    folder named in ``ignore_dirs``, are left out."""
    p = Path(path)
    if p.is_file():
        return file_sha256(p)
    if p.is_dir():
        h = hashlib.sha256()
        skip = set(ignore_dirs)
        for f in sorted(q for q in p.rglob("*") if q.is_file() and q.name not in ignore
                        and not skip.intersection(q.relative_to(p).parts[:-1])):
            st = f.stat()
            h.update(str(f.relative_to(p)).encode())
            h.update((file_sha256(f) if st.st_size <= _CONTENT_HASH_MAX else f"{st.st_size}:{st.st_mtime_ns}").encode())
        return h.hexdigest()
    raise InputError(f"{p}: no such file or folder.")


def json_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- text files

BOM = "\ufeff"
#: byte-order marks of encodings other than UTF-8 (a file starting with one is not UTF-8 text)
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
               (b"\xfe\xff", "UTF-16"))
_UTF8_BOM = b"\xef\xbb\xbf"


def open_binary(path: Path | str):
    """The file's bytes, gunzipped when its name ends in ``.gz`` (which must then start with the gzip magic)."""
    import gzip

    p = Path(path)
    if p.suffix == ".gz":
        with open(p, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                raise InputError(f"{p}: not a gzip file (no gzip header); drop the .gz from its name or compress "
                                 "it with gzip.")
        return gzip.open(p, "rb")
    return open(p, "rb")


def _damaged(path: Path, err: BaseException, line: int) -> InputError:
    return InputError(f"{path}: truncated or damaged gzip file after line {line} ({_first_line(err)}); fetch or "
                      "compress it again (gzip -t checks it).")


def _gzip_errors() -> tuple[type[BaseException], ...]:
    import gzip
    import zlib

    return (EOFError, gzip.BadGzipFile, zlib.error)


def _byte_order_mark(head: bytes, path: Path, encoding: str) -> int:
    """Bytes of a UTF-8 byte-order mark to skip (0 or 3); a UTF-16/32 mark, or a UTF-8 one under another
    encoding, is an :class:`InputError` saying what the file is."""
    import codecs

    name = codecs.lookup(encoding).name
    if head.startswith(_UTF8_BOM):
        if name in ("utf-8", "utf-8-sig"):
            return len(_UTF8_BOM)
        raise InputError(f"{path}: starts with a UTF-8 byte-order mark, but the encoding is {encoding}; pass "
                         "--encoding utf-8 (ingest.encoding) or save the file in that encoding without the mark.")
    for mark, kind in _OTHER_BOMS:
        if head.startswith(mark) and not name.startswith(kind.lower()):
            raise InputError(f"{path}: a {kind} text file (it starts with a {kind} byte-order mark); save it as "
                             f"UTF-8 (iconv -f {kind} -t UTF-8), or pass its encoding (--encoding {kind.lower()}) "
                             "where the reader takes one.")
    return 0


def _ascii_lines(encoding: str) -> bool:
    """Whether line breaks are the bytes \\n and \\r in ``encoding`` (UTF-8, Latin-1, cp1252, ...: a file can be
    split into lines before decoding)."""
    import codecs

    name = codecs.lookup(encoding).name
    return not name.startswith(("utf-16", "utf-32")) and "\r\n".encode(encoding) == b"\r\n"


def _decode_line(raw: bytes, path: Path, line: int, encoding: str, errors: str, fix: str | None) -> tuple[str, bool]:
    try:
        return raw.decode(encoding), False
    except UnicodeDecodeError as e:
        if errors == "replace":
            return raw.decode(encoding, errors="replace"), True
        raise InputError(f"{path}:{line}: bytes that are not valid {encoding} at byte {e.start} of the line. "
                         + (fix or f"Save the file as {encoding}.")) from None


class Line(NamedTuple):
    number: int  # 1-based
    text: str  # the decoded line without its line end (``too_long``: its first 200 bytes, decoded leniently)
    replaced: bool = False  # undecodable bytes were replaced by U+FFFD
    too_long: bool = False  # longer than ``max_bytes``: not decoded


def text_lines(path: Path | str, encoding: str = "utf-8", errors: str = "strict", max_bytes: int | None = None,
               fix: str | None = None, split_cr: bool = True) -> Iterator[Line]:
    """Every :class:`Line` of a text file, streamed (``.gz`` read through): a
    UTF-8 byte-order mark removed, ``\\r\\n`` and lone ``\\r`` line ends treated as ``\\n`` and stripped. Bytes
    that do not decode stop with an :class:`InputError` naming file and line (``errors="replace"``: U+FFFD,
    ``replaced`` True); a truncated ``.gz`` names the last line read. A line of more than ``max_bytes`` bytes
    comes ``too_long``, not decoded (the caller rejects it). ``fix``: what the error about
    undecodable bytes tells the user to do (default: save the file in ``encoding``). ``split_cr=False`` keeps a
    lone ``\\r`` inside a line as text (GLUE's TSV files hold some in sentences)."""
    p = Path(path)
    if not _ascii_lines(encoding):
        for n, text in enumerate(read_text(p, encoding, errors, fix).split("\n"), start=1):
            yield Line(n, text)
        return
    n = 0
    try:
        with open_binary(p) as f:
            first = True
            for raw in f:
                if first:
                    raw, first = raw[_byte_order_mark(raw[:4], p, encoding):], False
                for piece in _pieces(raw, split_cr):
                    n += 1
                    if max_bytes is not None and len(piece) > max_bytes:
                        yield Line(n, piece[:200].decode(encoding, "replace"), False, True)
                        continue
                    yield Line(n, *_decode_line(piece, p, n, encoding, errors, fix))
    except _gzip_errors() as e:
        raise _damaged(p, e, n) from None


def _pieces(raw: bytes, split_cr: bool = True) -> list[bytes]:
    """One ``\\n``-terminated line's bytes without its line end (``\\n`` or ``\\r\\n``), split at lone carriage
    returns (old Mac line ends)."""
    body = raw[:-1] if raw.endswith(b"\n") else raw
    body = body[:-1] if body.endswith(b"\r") else body
    return body.split(b"\r") if split_cr and b"\r" in body else [body]


def read_text(path: Path | str, encoding: str = "utf-8", errors: str = "strict", fix: str | None = None) -> str:
    """A whole text file (``.gz`` read through) as one string: a UTF-8 byte-order mark removed, line ends made
    ``\\n``. A missing file, undecodable bytes (naming file and line) and a truncated ``.gz`` are
    :class:`InputError`; ``errors="replace"`` substitutes U+FFFD."""
    p = Path(path)
    try:
        with open_binary(p) as f:
            data = f.read()
    except FileNotFoundError:
        raise InputError(f"{p}: file not found.") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a folder, not a text file.") from None
    except _gzip_errors() as e:
        raise _damaged(p, e, 0) from None
    data = data[_byte_order_mark(data[:4], p, encoding):]
    try:
        text = data.decode(encoding, errors="replace" if errors == "replace" else "strict")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{p}:{line}: bytes that are not valid {encoding} (byte {e.start} of the file). "
                         + (fix or f"Save the file as {encoding}.")) from None
    text = text[1:] if text.startswith(BOM) else text
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------------------------------- atomic writes


_UNWRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENOSPC,
               errno.EDQUOT, errno.ENAMETOOLONG, errno.ELOOP}


def unwritable(path: Path | str, err: OSError) -> InputError:
    """The one-line error for a folder or file that cannot be written (read-only file system, a file where a
    folder should be, no permission, disk full)."""
    why = {errno.ENOTDIR: "a part of this path is a file, not a folder",
           errno.EEXIST: "a file of that name is in the way",
           errno.ELOOP: "a symbolic link loop"}.get(err.errno or 0, err.strerror or str(err))
    if err.errno in (errno.EACCES, errno.EPERM):
        why += owner_hint(err.filename or path)
    return InputError(f"{path}: cannot write here ({why}). Choose a writable folder (--run-dir, --out or "
                      "run.run_dir), or free the space.")


def owner_hint(path: Path | str | bytes) -> str:
    """``; /x belongs to uid 0, this process runs as uid 10001`` when the nearest existing folder of ``path`` is
    someone else's: typically a folder mounted into a container whose user does not own it ("" otherwise)."""
    if not hasattr(os, "getuid"):
        return ""
    p = Path(os.fsdecode(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        owner = p.stat().st_uid
    except OSError:
        return ""
    me = os.getuid()
    return "" if owner == me else f"; {p} belongs to uid {owner}, this process runs as uid {me}"


def ensure_dir(path: Path | str) -> Path:
    """``mkdir -p`` with a clear :class:`InputError` when the folder cannot be made (see :func:`unwritable`)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise unwritable(p, e) from None
    except OSError as e:
        if e.errno in _UNWRITABLE:
            raise unwritable(p, e) from None
        raise
    return p


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds."""
    dest = Path(path)
    ensure_dir(dest.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as e:
        if e.errno in _UNWRITABLE:
            raise unwritable(dest.parent, e) from None
        raise
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
    finished the same work first) and drops this one, also when the other one's rename lands between our check
    and ours (``ENOTEMPTY``/``EEXIST``). On an error nothing of the new folder remains, and two writers never share
    a temporary folder.
    """
    import shutil

    final = Path(dest)
    ensure_dir(final.parent)
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
            _rename_dir(tmp, final, replace)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _rename_dir(tmp: Path, final: Path, replace: bool) -> None:
    """``tmp`` becomes ``final``; a sibling that got there first wins when ``replace`` is False."""
    import errno

    try:
        os.replace(tmp, final)
    except OSError as e:
        if replace or e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not final.is_dir():
            raise


def write_text(path: Path | str, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: Path | str, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str, ensure_ascii=False) + "\n")


def read_json(path: Path | str) -> Any:
    """A JSON file (:func:`read_text`: a byte-order mark removed); errors name the file and line."""
    try:
        return json.loads(read_text(path))
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
    """Read a stage table (Parquet, JSONL or CSV); a missing, unreadable or misnamed file is an
    :class:`InputError` naming the file (and, for JSONL, the line)."""
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: not found. Run the stage that produces it first (or check --run-dir).")
    if p.is_dir():
        raise InputError(f"{p}: is a folder; pass the table file (.parquet, .jsonl or .csv) inside it.")
    if p.suffix == ".parquet":
        return _read_parquet(p, columns)
    if p.suffix == ".jsonl":
        df = _read_jsonl(p)
    elif p.suffix == ".csv":
        import io as _io

        try:
            df = pd.read_csv(_io.StringIO(read_text(p)))
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
            raise InputError(f"{p}: not a readable CSV table ({_first_line(e)}); write it with "
                             "DataFrame.to_csv(index=False).") from None
    else:
        raise InputError(f"{p}: unsupported table format {p.suffix!r} (use .parquet, .jsonl or .csv).")
    if columns:
        require_columns(df, columns, p)
        return df[columns]
    return df


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def _read_parquet(p: Path, columns: list[str] | None) -> pd.DataFrame:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(p)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{p}: not a Parquet file ({_first_line(e)}). Write it with DataFrame.to_parquet, or "
                         "give a text table a .jsonl/.csv name.") from None
    if columns:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InputError(f"{p}: missing column(s) {', '.join(missing)}; found {', '.join(schema.names)}.")
    try:
        return pd.read_parquet(p, columns=columns)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{p}: unreadable Parquet file ({_first_line(e)}); write it again.") from None


def json_objects(p: Path | str, lines: Iterable[tuple[int, str]] | None = None,
                 keys: Sequence[str] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON-lines file (``lines``: its numbered lines, default
    :func:`text_lines` of ``p``), each an object holding ``keys``; an error names the file and line."""
    for n, line in ((ln.number, ln.text) for ln in text_lines(p)) if lines is None else lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{p}: line {n}: not valid JSON ({e.msg}); one JSON object per line.") from None
        if not isinstance(row, dict):
            raise InputError(f"{p}: line {n}: a JSON {type(row).__name__}, expected an object "
                             "{\"column\": value, ...} per line.")
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(f"{p}: line {n}: missing key(s) {', '.join(missing)}; expected {', '.join(keys)}.")
        yield n, row


def _read_jsonl(p: Path) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([row for _, row in json_objects(p)])


#: column kinds :func:`require_columns` checks: what the non-null values must be, and how to fix a column
_KINDS: dict[str, tuple[str, Any, str]] = {
    "text": ("text (strings)", lambda v: isinstance(v, str), "df[{c!r}] = df[{c!r}].astype(str)"),
    "id": ("ids (strings or integers)", lambda v: isinstance(v, str | int) and not isinstance(v, bool),
           "df[{c!r}] = df[{c!r}].astype(str)"),
    "number": ("numbers", lambda v: isinstance(v, int | float) and not isinstance(v, bool),
               "df[{c!r}] = pd.to_numeric(df[{c!r}])"),
    "bool": ("true/false values", lambda v: isinstance(v, bool), "df[{c!r}] = df[{c!r}].astype(bool)"),
    "terms": ("strings or lists of strings", lambda v: isinstance(v, str) or (
        hasattr(v, "__iter__") and not isinstance(v, bytes | dict) and all(isinstance(x, str) for x in v)),
        "one list of 'word->counterpart' strings per row"),
}


def require_columns(df: pd.DataFrame, columns: list[str] | Mapping[str, str], source: Path | str) -> None:
    """Every column named must be there; with a mapping ``{column: kind}`` (kinds: text, id, number, bool,
    terms) its non-null values must also be of that kind: a column of the wrong type is an :class:`InputError`
    naming the file, the column and the first bad row, instead of a failure deep inside a later step."""
    names = list(columns)
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}."
        )
    if not isinstance(columns, Mapping):
        return
    import numpy as np

    for col, kind in columns.items():
        desc, ok, fix = _KINDS[kind]
        values = df[col]
        for i, v in enumerate(values.tolist()):
            if v is None or (isinstance(v, float) and v != v):
                continue
            if isinstance(v, np.generic):
                v = v.item()
            if not ok(v):
                raise InputError(
                    f"{source}: column {col!r} must hold {desc}, but row {i} holds {v!r} ({type(v).__name__}). "
                    f"Fix that column ({fix.format(c=col)}) or pass the table this stage reads."
                )


def require_rows(df: pd.DataFrame, source: Path | str, hint: str = "") -> None:
    """An empty table is an :class:`InputError` (a stage never silently turns nothing into nothing)."""
    if len(df) == 0:
        raise InputError(f"{source}: the table has no rows. " + (hint or "Check the stage that wrote it (its "
                         "rejected/quarantine table says why every row was dropped)."))


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


# ---------------------------------------------------------------------------------------------------- locks


_HELD: dict[tuple[str, int], list[Any]] = {}  # (lock file, thread) -> [fd, depth]: re-entrant per thread


@contextlib.contextmanager
def file_lock(path: Path | str, what: str) -> Iterator[Path]:
    """Hold the exclusive lock ``path`` (a step folder's ``layout.LOCK_FILE``) for the block.

    ``what`` names the work (e.g. ``finetune[gpt2/cda/seed-13]``). The lock is an advisory ``flock`` on the
    lock file, which records the holder (pid, host, start time, command): a second process is refused with a
    :class:`~context_cda.errors.LockHeld` naming that holder. The operating system releases the lock when its
    holder dies (``kill -9`` included), so a lock file left by a dead process is stale and taken over (logged).
    The thread holding a lock may take it again (the runner locks a step, the stage function its folder); any
    other thread or process is refused. The file is removed on release.
    """
    import threading

    path = Path(path)
    ensure_dir(path.parent)
    key = (os.path.realpath(path), threading.get_ident())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield path
        finally:
            _HELD[key][1] -= 1
        return
    fd = _acquire(path, what)
    _HELD[key] = [fd, 1]
    try:
        yield path
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still holding it: a waiting opener sees another inode and starts over
        os.close(fd)


def _acquire(path: Path, what: str) -> int:
    import fcntl
    import logging

    for _ in range(20):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise unwritable(path.parent, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise _held(path, what, holder) from None
        except OSError:  # a file system without flock: the recorded holder decides (alive on this host: held)
            holder = _read_holder(fd)
            if holder and _alive_here(holder):
                os.close(fd)
                raise _held(path, what, holder) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its holder removed the file as we opened it: lock the new one
            os.close(fd)
            continue
        old = _read_holder(fd)
        if old:
            logging.getLogger("context_cda.io").warning(
                "%s: taking over a stale lock (pid %s on %s, started %s, is no longer running)",
                path.parent, old.get("pid"), old.get("host"), old.get("started"))
        _write_holder(fd, what)
        return fd
    raise LockHeld(f"{path}: could not take the lock (it kept changing hands); retry.")


def _alive_here(holder: Mapping[str, Any]) -> bool:
    import socket

    if holder.get("host") != socket.gethostname():
        return True  # another host's process: we cannot tell, so it holds the lock
    try:
        pid = int(holder.get("pid", 0))
    except (TypeError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 65536)
        rec = json.loads(data.decode("utf-8")) if data.strip() else {}
        return rec if isinstance(rec, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_holder(fd: int, what: str) -> None:
    import socket
    import sys

    rec = {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
           "started": datetime.now(tz=timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:500] if sys.argv else ""}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(rec).encode("utf-8"))
    os.fsync(fd)


def _held(path: Path, what: str, holder: Mapping[str, Any]) -> LockHeld:
    who = (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, started {holder.get('started', '?')}, "
           f"running {holder.get('what', '?')} (command: {holder.get('command') or '?'})") if holder else "unknown"
    return LockHeld(f"{path.parent}: {what} cannot start: another process is working in this folder ({who}). "
                    f"Wait for it to finish, or use another run folder (--run-dir); if that process is gone "
                    f"(another host), delete {path}.")

