"""``run_entropy_merge``: one target's generation parts of the entropy step joined into its one output.

Each part (``pipeline.generation_shards``; :mod:`context_cda.shards`) sampled and scored the items whose id falls in
it. The merge checks that every item the step had to score ends in exactly one part's scores, rejected or error
rows, then writes the step's scores, audit, rejected and error tables (input order) and a manifest whose summary
adds up the parts' counts and recomputes the averages (SE mean and median, clusters, judge calls per item) from the
merged scores. Error rows stay errors (exit 75 unless ``run.allow_errors``; the next run retries them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import layout as L
from .. import schemas as S
from ..errors import check_item_errors
from ..io import MANIFEST, REJECTED, StageRecorder, read_json, write_rejected, write_table
from ..shards import concat_in_order, merge_parts, part_folders, read_part_table, sum_summaries

_TABLES = (L.SCORES_FILE, L.AUDIT_FILE, REJECTED, L.ERRORS_FILE)


def run_entropy_merge(config: Any, inputs: Mapping[str, Path | str], out_dir: Path | str,
                      target: str) -> dict[str, Any]:
    """Join target ``target``'s parts in ``inputs["parts"]`` for the items of ``inputs["augmented"]``."""
    from .stage import _read_items, per_item_stats, score_stats

    out = Path(out_dir)
    parts = part_folders(inputs["parts"], "entropy-part", config.pipeline.generation_shards, {"target": target})
    items, rejected_input = _read_items(Path(inputs["augmented"]), config.entropy.limit)
    expected = [*items[S.ID].astype(str), *(str(r[S.ID]) for r in rejected_input)]
    rec = StageRecorder("entropy-merge", out, {"target": target, "parts": len(parts)},
                        {"augmented": inputs["augmented"], **{f"part-{i}": p for i, p in enumerate(parts)}})
    tables = {name: [read_part_table(p / name, S.ID) for p in parts] for name in _TABLES}
    outcome = [t[[S.ID]] for name in (L.SCORES_FILE, REJECTED, L.ERRORS_FILE) for t in tables[name] if len(t)]
    merge_parts(outcome, S.ID, expected, f"entropy[{target}] merge of {len(parts)} part(s)")
    order = {i: n for n, i in enumerate(expected)}
    merged = {name: concat_in_order(frames, S.ID, order, then="sample_idx") for name, frames in tables.items()}
    written = {name: _write(name, frame, out) for name, frame in merged.items()}
    summary = sum_summaries([read_json(p / MANIFEST).get("summary", {}) for p in parts])
    scores = merged[L.SCORES_FILE]
    # averages are not summed: recomputed from the merged scores and the summed counts
    summary.update(target=target, parts=len(parts), scored=int(len(scores)), **score_stats(scores),
                   **per_item_stats(config, summary.get("judge_calls", 0), summary.get("processed_items", 0)))
    rec.finish({"in": len(expected), "out": int(len(scores)), "rejected": summary.get("rejected", 0),
                "errors": summary.get("errors", 0)}, outputs=written, summary=summary)
    check_item_errors(f"entropy[{target}]", summary.get("errors", 0), len(expected), summary.get("error_reasons", {}),
                      out / L.ERRORS_FILE, config.run.allow_errors)
    return summary



def _write(name: str, frame, out: Path) -> Path:
    if name == REJECTED:
        return write_rejected(frame, out)
    return write_table(frame, out / name)
