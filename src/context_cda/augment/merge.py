"""``run_augment_merge``: the generation parts of the augment step joined into its one output.

Each part (``pipeline.generation_shards``; :mod:`context_cda.items`) augmented the counterfactuals whose id falls
in it. The merge reads every part's accepted, rejected and error rows and checks that each counterfactual the
step had to augment ends in exactly one of them, in exactly one part; then it writes the step's tables (input
order) and a manifest whose summary adds up the parts'. A rephrasing that holds an evaluation item moves from the
augmented table to the rejected one (reason ``eval-overlap``, :mod:`context_cda.evaluate.decontam`): the generator can
reproduce a benchmark sentence, and nothing after this step trains on what the merge let through. Error rows stay errors: the merge fails like a part would
(exit 75, unless ``run.allow_errors``) and the next run retries them in their parts.
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


def _drop_eval_overlap(config: Any, merged: dict[str, Any], order: Mapping[str, int]) -> dict[str, int]:
    """Move the accepted rephrasings that hold an evaluation item (:mod:`context_cda.evaluate.decontam`) from the
    augmented table to the rejected one (reason eval-overlap, in input order); returns the count per benchmark."""
    from ..evaluate.decontam import drop_overlaps

    merged[L.AUGMENTED_FILE], merged[REJECTED], counts = drop_overlaps(
        config, merged[L.AUGMENTED_FILE], S.AUGMENTED, merged[REJECTED], lambda row: order.get(str(row[S.CDA_ID]), 0))
    return counts


def run_augment_merge(config: Any, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Join the parts in ``inputs["parts"]`` (the augment parts' fan-in folder) for ``inputs["counterfactuals"]``."""
    from .stage import eligible

    out = Path(out_dir)
    _, expected = eligible(config, {"counterfactuals": inputs["counterfactuals"]})
    parts = config.pipeline.generation_shards
    m = merge(inputs["parts"], "augment-part", parts, S.CDA_ID, list(expected[S.ID].astype(str)),
              (L.AUGMENTED_FILE, REJECTED, L.ERRORS_FILE), f"augment merge of {parts} part(s)")
    rec = recorder(out)
    order = {cid: i for i, cid in enumerate(expected[S.ID].astype(str))}
    with rec.timed("decontaminate"):
        overlaps = _drop_eval_overlap(config, m.tables, order)
    written = write_merged(m, out)
    summary = m.summary
    n = sum(overlaps.values())
    summary.update(eval_overlap=n, eval_overlap_by_benchmark=overlaps, accepted=summary.get("accepted", 0) - n,
                   rejected=summary.get("rejected", 0) + n)
    if n:
        summary["reject_reasons"] = {**summary.get("reject_reasons", {}),
                                     "eval-overlap": summary.get("reject_reasons", {}).get("eval-overlap", 0) + n}
    rec.finish(Counts(items_in=summary.get("rows_in", 0), out=summary.get("accepted", 0),
                      rejected=summary.get("rejected", 0), errors=summary.get("errors", 0),
                      error_reasons=dict(summary.get("error_reasons") or {})),
               outputs={"augmented": written[L.AUGMENTED_FILE], "rejected": written[REJECTED],
                        "errors": written[L.ERRORS_FILE]}, summary=summary)
    return summary
