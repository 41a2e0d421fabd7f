"""The resumable item engine: what every stage that works through items one shard at a time shares (augment,
sample, entropy). A stage keeps only its domain work; the engine keeps the books.

A stage hands the engine its items, each with a key (a hash of the item and of every setting that changes its
result), and a function that does the work for one shard of items and returns their rows. The engine

* keeps the checkpoint shards of one *fingerprint* (a hash of the settings) in ``<out>/shards/<fingerprint>/``,
  each shard one atomically written Parquet file (:class:`Checkpoints`);
* skips every item with a final row in a finished shard, ``done`` or ``rejected`` (with its reason), and works
  through the rest in shards of ``shard_size`` items (:func:`run_items`): a kill loses at most the shard in
  flight, and no item is ever written twice as final;
* an ``error`` row (the generator failed for a transient reason) is not final: the next run does the item again;
* assembles the final rows, one set per item in the input's order (the first final row wins; else its latest
  error row; :func:`final_rows`), and splits them by status (:class:`Outcome`);
* writes ``rejected.parquet`` and ``errors.parquet``; the stage reports the error items in its counts, and the
  step envelope (:mod:`context_cda.steps`) holds the step folder's lock and applies the error policy: exit code 75
  when items ended as errors, unless ``run.allow_errors`` (``--allow-errors``) lets the run go on.

Generation parts (the end of this module): which part of the items each of ``pipeline.generation_shards``
parallel tasks takes, and the one merge of their outputs (augment, sample), refused when an id is missing or doubled.

Rows are plain dicts: :data:`KEY`, :data:`STATUS` and :data:`REASON` are the engine's, every other column the
stage's. An item may have several rows (one per sample); all of an item's rows in one shard share its status.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import layout as L
from . import schemas as S
from .errors import InputError, error_kinds
from .io import stable_id, write_rejected, write_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

log = logging.getLogger(__name__)

KEY, STATUS, REASON = "item_key", "status", S.REASON
DONE, REJECTED, ERROR = "done", "rejected", "error"
FINAL = (DONE, REJECTED)
SHARDS_DIR = "shards"
_SEQ = "_shard"  # the order of the shard a row was read from (not stored)

T = TypeVar("T")


class Checkpoints:
    """The finished shards of one fingerprint: ``<out>/shards/<fingerprint>/shard-*.parquet``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._seq = 0

    @classmethod
    def of(cls, out_dir: Path | str, fingerprint: str, kind: str = SHARDS_DIR) -> Checkpoints:
        """The checkpoints of ``fingerprint`` in step folder ``out_dir`` (``kind``: a second kind of checkpoint of
        the same step, e.g. the sample step's drawn samples)."""
        return cls(Path(out_dir) / kind / fingerprint)

    def files(self) -> list[Path]:
        return sorted(self.root.glob("shard-*.parquet"))

    def read(self) -> pd.DataFrame:
        """Every finished shard's rows, in the order the shards were written (column ``_shard``: which one)."""
        import pandas as pd

        frames = [pd.read_parquet(f).assign(**{_SEQ: n}) for n, f in enumerate(self.files())]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[KEY, STATUS, REASON, _SEQ])

    def final_keys(self) -> set[str]:
        """The keys with a final row (done or rejected) in a finished shard."""
        rows = self.read()
        return set(rows.loc[rows[STATUS].isin(FINAL), KEY].astype(str)) if len(rows) else set()

    def append(self, rows: Sequence[dict[str, Any]]) -> Path | None:
        """Write ``rows`` as one new shard (atomically: the shard is there whole, or not at all)."""
        import pandas as pd

        if not rows:
            return None
        self._seq += 1
        name = f"shard-{time.time_ns():020d}-{os.getpid()}-{self._seq:05d}.parquet"
        return write_table(pd.DataFrame(list(rows)), self.root / name)

    def clean(self) -> None:
        """Remove what a killed write left (temporary files); finished shards stay."""
        self.root.mkdir(parents=True, exist_ok=True)
        for tmp in self.root.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- the pass


@dataclass
class Pass:
    """What one pass over the items did: items found finished, items worked on, shards written, seconds."""

    resumed: int = 0
    processed: int = 0
    shards: int = 0
    seconds: float = 0.0


@dataclass
class ItemRun(Generic[T]):
    """One stage's pass: ``what`` names it (messages, the progress bar), ``store`` holds its shards."""

    what: str
    store: Checkpoints
    shard_size: int
    key: Callable[[T], str]
    progress: bool = False
    unit: str = "item"


def run_items(run: ItemRun[T], items: Sequence[T], process: Callable[[list[T], Any], list[dict[str, Any]]],
              ) -> Pass:
    """Work through the items without a final row, ``run.shard_size`` at a time: ``process(chunk, bar)`` returns
    the chunk's rows (each with :data:`KEY`, :data:`STATUS`, :data:`REASON`), which are written as one shard before
    the next chunk starts. ``bar`` is the progress bar (or None); ``process`` may move it as items finish."""
    run.store.clean()
    done = run.store.final_keys()
    pending = [it for it in items if run.key(it) not in done]
    log.info("%s: %d items, %d already done, %d to do", run.what, len(items), len(items) - len(pending), len(pending))
    stats = Pass(resumed=len(items) - len(pending), processed=len(pending))
    t0 = time.perf_counter()
    bar = _bar(run, len(pending))
    try:
        for start in range(0, len(pending), run.shard_size):
            chunk = pending[start: start + run.shard_size]
            before = bar.n if bar is not None else 0
            rows = process(chunk, bar)
            _check_rows(run, chunk, rows)
            run.store.append(rows)
            stats.shards += 1
            if bar is not None:
                bar.update(max(0, before + len(chunk) - bar.n))
    finally:
        if bar is not None:
            bar.close()
    stats.seconds = time.perf_counter() - t0
    return stats


def _bar(run: ItemRun[Any], total: int) -> Any:
    """A bar on a terminal when ``run.progress``, else a progress line every interval (:mod:`context_cda.runtime.progress`:
    done, rate, ETA, the stage's postfix), so a log shows this work too."""
    if not total:
        return None
    from .runtime.progress import Progress

    return Progress(total, run.what, run.unit, bar=run.progress)


def _check_rows(run: ItemRun[Any], chunk: Sequence[Any], rows: Sequence[dict[str, Any]]) -> None:
    """Every item of the chunk has rows with a known status; no row belongs to another item."""
    want = {run.key(it) for it in chunk}
    got = {r[KEY] for r in rows}
    bad = {r[STATUS] for r in rows} - {DONE, REJECTED, ERROR}
    if got != want or bad:
        raise RuntimeError(f"{run.what}: a shard's rows do not match its items (missing {sorted(want - got)[:3]}, "
                           f"foreign {sorted(got - want)[:3]}, unknown status {sorted(bad)})")


# ---------------------------------------------------------------------------------------------- the outcome


def final_rows(rows: pd.DataFrame, keys: Sequence[str], then: str | None = None) -> tuple[pd.DataFrame, int]:
    """Each key's rows from the finished shards, in the order of ``keys`` (then by the column ``then``): the
    rows of the first shard where it is final, else of the latest shard where it is an error; keys without rows
    are left out. Also returns how many keys had final rows in more than one shard (ignored duplicates)."""
    import pandas as pd

    order = {k: i for i, k in enumerate(map(str, keys))}
    if not len(rows):
        return rows.drop(columns=[_SEQ], errors="ignore"), 0
    rows = rows[rows[KEY].astype(str).isin(order)]
    final = rows[rows[STATUS].isin(FINAL)]
    per_key = final.groupby(KEY)[_SEQ]
    duplicates = int((per_key.nunique() > 1).sum())
    first = final[final[_SEQ] == final[KEY].map(per_key.min())]
    errs = rows[(rows[STATUS] == ERROR) & ~rows[KEY].isin(set(final[KEY]))]
    last = errs[errs[_SEQ] == errs[KEY].map(errs.groupby(KEY)[_SEQ].max())]
    merged = pd.concat([first, last], ignore_index=True)
    merged = merged.assign(_order=merged[KEY].astype(str).map(order))
    sort = ["_order", then] if then is not None and then in merged.columns else ["_order"]
    merged = merged.sort_values(sort, kind="stable").drop(columns=["_order", _SEQ]).reset_index(drop=True)
    return merged, duplicates


@dataclass
class Outcome:
    """The final rows of a pass, split by status; ``items``: how many items the step had to do."""

    what: str
    items: int
    done: pd.DataFrame
    rejected: pd.DataFrame
    errors: pd.DataFrame
    duplicates: int = 0
    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, what: str, store: Checkpoints, keys: Sequence[str], then: str | None = None) -> Outcome:
        rows, duplicates = final_rows(store.read(), keys, then)
        by = rows[STATUS] if len(rows) else None
        part = (lambda s: rows[by == s].reset_index(drop=True)) if by is not None else (lambda s: rows.iloc[0:0])
        return cls(what, len(keys), part(DONE), part(REJECTED), part(ERROR), duplicates)

    def write(self, out_dir: Path | str, rejected: pd.DataFrame, errors: pd.DataFrame) -> dict[str, Path]:
        """Write the step's ``rejected.parquet`` and ``errors.parquet`` (the stage chose their columns)."""
        self.paths = {"rejected": write_rejected(rejected, out_dir),
                      "errors": write_table(errors, Path(out_dir) / L.ERRORS_FILE)}
        return self.paths

    def error_reasons(self) -> dict[str, int]:
        return error_kinds(self.errors[REASON]) if len(self.errors) else {}


def reason_kinds(reasons: Any) -> dict[str, int]:
    """How many rows name each reason kind (``"too-few-samples: 1 < 2"`` -> ``too-few-samples``; a row with
    several reasons, ``"; "``-separated, counts once for each)."""
    counts: Counter[str] = Counter()
    for r in reasons:
        if isinstance(r, str) and r:
            counts.update({part.split(":", 1)[0].strip() for part in r.split("; ")})
    return dict(counts.most_common())


# ------------------------------------------------------------------------------------------------ generation parts
# Which part of the items each of ``pipeline.generation_shards`` parallel tasks takes, and the one merge of their
# outputs (augment, sample). An item belongs to part ``stable hash of its id mod K``: the same part in every run and
# every door, whatever the input's order, so each part resumes on its own (with the engine's checkpoints above).
# :func:`merge` reads every part's tables and refuses a merge in which an item is missing or appears twice (in two
# parts, or twice in one), naming the ids; the tables come out in the input's order, the summaries added up.

def part_of(key: str, parts: int) -> int:
    """The part (0..parts-1) that item ``key`` belongs to."""
    return int(stable_id("part", key)[:8], 16) % parts if parts > 1 else 0


def part_folders(parent: Path | str, step: str, parts: int, fixed: dict[str, str] | None = None) -> list[Path]:
    """The folders of parts 0..parts-1 of ``step`` inside its fan-in folder ``parent``, refusing a missing one."""
    from .layout import discover

    found = {int(k["shard"]): d for k, d in discover(parent, step, fixed=fixed or {}) if k["shard"].isdigit()}
    missing = [i for i in range(parts) if i not in found]
    if missing:
        raise InputError(f"{parent}: generation part(s) {missing} of {parts} have not run (pipeline.generation_shards"
                         f" = {parts}); run them before the merge.")
    return [found[i] for i in range(parts)]


def merge_parts(tables: Sequence[pd.DataFrame], key: str, expected: Iterable[str], what: str) -> pd.DataFrame:
    """Concatenate the parts' rows; every ``expected`` key must appear exactly once across them."""
    import pandas as pd

    merged = pd.concat([t for t in tables if len(t)], ignore_index=True) if any(len(t) for t in tables) else (
        tables[0].iloc[0:0] if tables else pd.DataFrame(columns=[key]))
    keys = merged[key].astype(str)
    doubled = sorted(set(keys[keys.duplicated()]))
    if doubled:
        raise InputError(f"{what}: {len(doubled)} item(s) appear twice across the generation parts, e.g. "
                         f"{doubled[:3]}; rerun the merge after removing the parts' folders that hold them.")
    missing = sorted(set(map(str, expected)) - set(keys))
    if missing:
        raise InputError(f"{what}: {len(missing)} item(s) are in no generation part, e.g. {missing[:3]}; the parts "
                         "ran on another input: rerun them.")
    return merged


def read_part_table(path: Path, key: str) -> pd.DataFrame:
    """One part's table, or an empty one with the ``key`` column when the part wrote none."""
    import pandas as pd

    from .io import read_table

    return read_table(path) if path.is_file() else pd.DataFrame(columns=[key])


def concat_in_order(frames: Sequence[pd.DataFrame], key: str, order: Mapping[str, int],
                    then: str | None = None) -> pd.DataFrame:
    """The parts' rows in one table, sorted by ``order`` of their ``key`` (the input's order), then by the column
    ``then`` where the table has it (a sample index); an empty result keeps the first part's columns."""
    import pandas as pd

    full = [f for f in frames if len(f)]
    if not full:
        return frames[0].reset_index(drop=True)
    merged = pd.concat(full, ignore_index=True)
    merged["_order"] = merged[key].astype(str).map(order)
    keys = ["_order", then] if then is not None and then in merged.columns else ["_order"]
    return merged.sort_values(keys, kind="stable").drop(columns="_order").reset_index(drop=True)


def sum_summaries(summaries: Sequence[dict]) -> dict:
    """The parts' stage summaries as one: counts (and nested count maps) added up; other values taken from the
    first part; rates (``*_per_s``) left out, since parts that ran side by side have no single rate. Averages and
    medians are not counts: the caller recomputes them from the merged tables (entropy: ``score_stats``)."""
    out: dict = {}
    for summary in summaries:
        for key, value in summary.items():
            if key.endswith("_per_s"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | dict):
                out.setdefault(key, value)
            elif isinstance(value, dict):
                out[key] = sum_summaries([out.get(key, {}), value])
            else:
                out[key] = out.get(key, 0) + value
    return out


@dataclass
class Merged:
    """The parts' folders, their tables joined (input order) and their summaries added up."""

    parts: list[Path]
    tables: dict[str, pd.DataFrame]
    summary: dict


def merge(parent: Path | str, step: str, parts: int, key: str, expected: Sequence[str], names: Sequence[str],
          what: str, *, several: Sequence[str] = (), then: str | None = None,
          fixed: dict[str, str] | None = None) -> Merged:
    """Join the tables ``names`` of ``step``'s parts 0..parts-1 (in fan-in folder ``parent``) by ``key``: every
    ``expected`` key must be in exactly one part's tables (``several``: tables with several rows per key, e.g. one
    per sample), in the order of ``expected`` (then of the column ``then``)."""
    from .io import MANIFEST, read_json

    folders = part_folders(parent, step, parts, fixed)
    tables = {name: [read_part_table(p / name, key) for p in folders] for name in names}
    seen = [t[[key]].drop_duplicates() if name in several else t[[key]]
            for name, frames in tables.items() for t in frames if len(t)]
    merge_parts(seen, key, expected, what)
    order = {k: i for i, k in enumerate(map(str, expected))}
    joined = {name: concat_in_order(frames, key, order, then=then) for name, frames in tables.items()}
    summary = sum_summaries([read_json(p / MANIFEST).get("summary", {}) for p in folders])
    return Merged(folders, joined, {**summary, "parts": len(folders)})


def write_merged(merged: Merged, out: Path | str) -> dict[str, Path]:
    """Write the joined tables into the merge's folder (``rejected.parquet`` as every stage writes it)."""
    from .io import REJECTED, write_rejected, write_table

    return {name: write_rejected(frame, out) if name == REJECTED else write_table(frame, Path(out) / name)
            for name, frame in merged.tables.items()}
