"""``run_augment_merge``: the generation parts of the augment step joined into its one output.

Each part (``pipeline.generation_shards``; :mod:`context_cda.shards`) augmented the counterfactuals whose id falls
in it. The merge reads every part's accepted, rejected and error rows and checks that each counterfactual the
step had to augment ends in exactly one of them, in exactly one part; then it writes the step's tables (input
order) and a manifest whose summary adds up the parts'. Error rows stay errors: the merge fails like a part would
(exit 75, unless ``run.allow_errors``) and the next run retries them in their parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import items as I
from .. import layout as L
from .. import schemas as S
from ..io import REJECTED, StageRecorder
from ..shards import merge, write_merged


def run_augment_merge(config: Any, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Join the parts in ``inputs["parts"]`` (the augment parts' fan-in folder) for ``inputs["counterfactuals"]``."""
    from .stage import eligible

    out = Path(out_dir)
    _, expected = eligible(config, {"counterfactuals": inputs["counterfactuals"]})
    parts = config.pipeline.generation_shards
    m = merge(inputs["parts"], "augment-part", parts, S.CDA_ID, list(expected[S.ID].astype(str)),
              (L.AUGMENTED_FILE, REJECTED, L.ERRORS_FILE), f"augment merge of {parts} part(s)")
    rec = StageRecorder("augment-merge", out, {"parts": len(m.parts)},
                        {"counterfactuals": inputs["counterfactuals"], **{f"part-{i}": p for i, p in enumerate(m.parts)}})
    written = write_merged(m, out)
    summary = m.summary
    rec.finish({"in": summary.get("rows_in", 0), "out": summary.get("accepted", 0),
                "rejected": summary.get("rejected", 0), "errors": summary.get("errors", 0)},
               outputs={"augmented": written[L.AUGMENTED_FILE], "rejected": written[REJECTED],
                        "errors": written[L.ERRORS_FILE]}, summary=summary)
    I.enforce("augment", summary.get("errors", 0), summary.get("items", 0), summary.get("error_reasons", {}),
              out / L.ERRORS_FILE, config.run.allow_errors)
    return summary
