"""Generation parts: which part of the items each of ``pipeline.generation_shards`` parallel tasks takes, and the
one merge of their outputs (augment, sample).

An item belongs to part ``stable hash of its id mod K``: the same part in every run and every door, whatever the
input's order, so each part resumes on its own (with the item engine's checkpoints, :mod:`context_cda.items`).
:func:`merge` reads every part's tables and refuses a merge in which an item is missing or appears twice (in two
parts, or twice in one), naming the ids; the tables come out in the input's order, the summaries added up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError
from .io import stable_id

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


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
