"""``run_sample_merge``: the generation parts of the sample step joined into its one output.

Each part (``pipeline.generation_shards``; :mod:`context_cda.items`) drew and clustered the samples of the items
whose id falls in it. The merge checks that every item the step had to sample ends in exactly one part's samples,
rejected or error rows, then writes the step's tables (input order; an item's samples in their order) and a
manifest whose summary adds up the parts' counts (items and samples drawn, judge calls) and recomputes the judge
calls per item. Error rows stay errors (exit 75 unless ``run.allow_errors``; the next run retries them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import layout as L
from .. import schemas as S
from ..io import REJECTED
from ..items import merge, write_merged
from ..steps import Counts, recorder

_TABLES = (L.SAMPLES_FILE, REJECTED, L.ERRORS_FILE)


def run_sample_merge(config: Any, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Join the sample parts in ``inputs["parts"]`` for the items of ``inputs["augmented"]``."""
    from .samples import per_item_stats, read_items

    out = Path(out_dir)
    items, rejected_input = read_items(Path(inputs["augmented"]), config.entropy.limit)
    expected = [*items[S.ID].astype(str), *(str(r[S.ID]) for r in rejected_input)]
    parts = config.pipeline.generation_shards
    m = merge(inputs["parts"], "sample-part", parts, S.ID, expected, _TABLES,
              f"sample merge of {parts} part(s)", several=(L.SAMPLES_FILE,), then="sample_idx")
    rec = recorder(out)
    written = write_merged(m, out)
    summary = m.summary
    samples = m.tables[L.SAMPLES_FILE]
    summary.update(sampled=int(samples[S.ID].nunique()) if len(samples) else 0, samples=int(len(samples)),
                   **per_item_stats(config, summary.get("judge_calls", 0), summary.get("processed_items", 0)))
    rec.finish(Counts(items_in=len(expected), out=summary["sampled"], rejected=summary.get("rejected", 0),
                      errors=summary.get("errors", 0), error_reasons=dict(summary.get("error_reasons") or {})),
               outputs=written, summary=summary)
    return summary
