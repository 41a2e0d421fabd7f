"""``run_augment_merge``: the generation parts of the augment step joined into its one output.

Each part (``pipeline.generation_shards``; :mod:`context_cda.shards`) augmented the counterfactuals whose id falls
in it. The merge reads every part's accepted, rejected and error rows and checks that each counterfactual the
step had to augment ends in exactly one of them, in exactly one part; then it writes the step's tables (input
order) and a manifest whose summary adds up the parts'. A rephrasing that holds an evaluation item moves from the
augmented table to the rejected one (reason ``eval-overlap``, :mod:`context_cda.decontam`): the generator can
reproduce a benchmark sentence, and nothing after this step trains on what the merge let through. Error rows stay errors: the merge fails like a part would
(exit 75, unless ``run.allow_errors``) and the next run retries them in their parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import layout as L
from .. import schemas as S
from ..errors import check_item_errors
from ..io import REJECTED, StageRecorder, read_json, write_rejected, write_table
from ..shards import concat_in_order, merge_parts, part_folders, read_part_table, sum_summaries


def _drop_eval_overlap(config: Any, merged: dict[str, Any], order: Mapping[str, int]) -> dict[str, int]:
    """Move the accepted rephrasings that hold an evaluation item (:mod:`context_cda.decontam`) from the
    augmented table to the rejected one (reason eval-overlap); returns the count per benchmark."""
    import pandas as pd

    from ..decontam import counted, index_for

    index = index_for(config)
    aug = merged[L.AUGMENTED_FILE]
    if index is None or aug.empty:
        return {}
    matches = [index.match(t) if isinstance(t, str) else None for t in aug[S.AUGMENTED]]
    hit = pd.Series([m is not None for m in matches], index=aug.index)
    if not hit.any():
        return {}
    moved = aug[hit].assign(**{S.REASON: [m.reason for m in matches if m is not None]})
    rej = pd.concat([merged[REJECTED], moved], ignore_index=True)
    merged[REJECTED] = rej.iloc[sorted(range(len(rej)), key=lambda i: order.get(str(rej[S.CDA_ID].iloc[i]), 0))]
    merged[L.AUGMENTED_FILE] = aug[~hit].reset_index(drop=True)
    return counted(matches)


def run_augment_merge(config: Any, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Join the parts in ``inputs["parts"]`` (the augment parts' fan-in folder) for ``inputs["counterfactuals"]``."""
    from .stage import eligible

    out = Path(out_dir)
    parts = part_folders(inputs["parts"], "augment-part", config.pipeline.generation_shards)
    _, expected = eligible(config, {"counterfactuals": inputs["counterfactuals"]})
    rec = StageRecorder("augment-merge", out, {"parts": len(parts)},
                        {"counterfactuals": inputs["counterfactuals"], **{f"part-{i}": p for i, p in enumerate(parts)}})
    tables = {name: [read_part_table(p / name, S.CDA_ID) for p in parts]
              for name in (L.AUGMENTED_FILE, REJECTED, L.ERRORS_FILE)}
    every = [t[[S.CDA_ID]] for t in (*tables[L.AUGMENTED_FILE], *tables[REJECTED], *tables[L.ERRORS_FILE])
             if len(t)]
    merge_parts(every, S.CDA_ID, expected[S.ID].astype(str), f"augment merge of {len(parts)} part(s)")
    order = {cid: i for i, cid in enumerate(expected[S.ID].astype(str))}
    merged = {name: concat_in_order(frames, S.CDA_ID, order) for name, frames in tables.items()}
    with rec.timed("decontaminate"):
        overlaps = _drop_eval_overlap(config, merged, order)
    written = {name: write_rejected(df, out) if name == REJECTED else write_table(df, out / name)
               for name, df in merged.items()}
    summary = sum_summaries([read_json(p / "manifest.json").get("summary", {}) for p in parts])
    summary["parts"] = len(parts)
    n = sum(overlaps.values())
    summary.update(eval_overlap=n, eval_overlap_by_benchmark=overlaps, accepted=summary.get("accepted", 0) - n,
                   rejected=summary.get("rejected", 0) + n)
    if n:
        summary["reject_reasons"] = {**summary.get("reject_reasons", {}),
                                     "eval-overlap": summary.get("reject_reasons", {}).get("eval-overlap", 0) + n}
    rec.finish({"in": summary.get("rows_in", 0), "out": summary.get("accepted", 0),
                "rejected": summary.get("rejected", 0), "errors": summary.get("errors", 0)},
               outputs={"augmented": written[L.AUGMENTED_FILE], "rejected": written[REJECTED],
                        "errors": written[L.ERRORS_FILE]}, summary=summary)
    check_item_errors("augment", summary.get("errors", 0), summary.get("items", 0),
                      summary.get("error_reasons", {}), out / L.ERRORS_FILE, config.run.allow_errors)
    return summary

