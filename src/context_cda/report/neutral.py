"""The report's note on the neutral step (the context-neutral arm's corpus): how many gender-neutral rewrites the
generator's answers passed the review, the reasons for the rest, and a few examples of each."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .. import layout as L
from .. import schemas as S
from ..errors import InputError
from ..io import read_json

EXAMPLES = 3


def collect(run_dir: Path) -> dict[str, Any] | None:
    """The neutral step's summary, reasons and examples (None when the step did not run)."""
    import pandas as pd

    folder = Path(run_dir) / L.folder("neutral", {})
    try:
        summary = read_json(folder / "manifest.json").get("summary") or {}
    except InputError:
        return None
    accepted = pd.read_parquet(folder / L.AUGMENTED_FILE) if (folder / L.AUGMENTED_FILE).is_file() else None
    rejected = pd.read_parquet(folder / "rejected.parquet") if (folder / "rejected.parquet").is_file() else None
    reasons: Counter[str] = Counter()
    if rejected is not None:
        for r in rejected[S.REASON].dropna():
            reasons.update({part.split(":", 1)[0].strip() for part in str(r).split("; ")})
    pairs = [] if accepted is None else list(zip(accepted[S.COUNTERFACTUAL], accepted[S.AUGMENTED], strict=True))
    bad = [] if rejected is None else [(c, o, r) for c, o, r in zip(rejected[S.COUNTERFACTUAL], rejected[S.RAW_OUTPUT],
                                                                    rejected[S.REASON], strict=True) if o]
    return {"summary": summary, "reasons": dict(reasons.most_common()), "accepted": pairs[:EXAMPLES],
            "rejected": bad[:EXAMPLES]}


def markdown(info: dict[str, Any] | None) -> list[str]:
    if not info:
        return []
    s = info["summary"]
    n, ok = s.get("items", 0), s.get("accepted", 0)
    lines = ["## Gender-neutral rewrites (the context-neutral arm)", "",
             f"The neutral step asked `{s.get('gen_model')}` (prompt {s.get('prompt_version')}) for a gender-neutral "
             f"rewrite of {n} sentences: {ok} passed the review ({100 * ok / n:.0f} %: no gendered word left, nothing "
             f"else changed), {s.get('rejected', 0)} were rejected, {s.get('errors', 0)} ended as errors. The "
             "context-neutral arm trains on what validation kept; the lexicon's own rewrite is the Neutral (lexicon) "
             "arm (cda-neutral in train.arms)." if n else "The neutral step had no sentence to rewrite.", ""]
    if info["reasons"]:
        lines += ["| Reason | Rejected items |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in info["reasons"].items()] + [""]
    lines += [f"- {a} → *{b}*" for a, b in info["accepted"]]
    lines += [f"- rejected ({r.split(':', 1)[0]}): {a} → *{b}*" for a, b, r in info["rejected"]]
    return [*lines, ""]
