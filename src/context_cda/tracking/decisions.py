"""The words of a registry decision: one vocabulary for the gate, the model registry and the report.

* **The verdict** of the promotion gate on a version, one of four states (:data:`VERDICTS`, decided by
  :func:`context_cda.tracking.gate.verdict`): :data:`PROMOTED` (every rule held), :data:`REFUSED_WORSE` (evidence
  against the version: significantly more biased than its reference, an overshoot past 50 shown, or LMS
  significantly lower than a rule allows), :data:`REFUSED_MISSING` (a rule could not be judged: per-item scores
  missing, too few shared items, a champion without evidence) or :data:`REFUSED_NOT_SHOWN` (no evidence against it,
  but an improvement was not shown: on some metric vanilla is demonstrably biased on; its note says when the
  benchmark was too small to show the observed shift). It is the
  version and run tag :data:`VERDICT_TAG` (its note :data:`NOTE_TAG`, the detectable shifts
  :data:`DETECTABLE_TAG`), the ``verdict`` of ``promotion.json``, ``ccda register``'s line and the report's.
* **The decision**, the verdict in two words: :data:`PROMOTED` (the version got the :data:`CHAMPION` alias) or
  :data:`REFUSED` (the champion stayed where it was). It is the version tag and run tag :data:`DECISION_TAG`, the
  ``decision`` of ``promotion.json`` and the report's "Decision" column; the reasons, in numbers, are the tag
  :data:`REASONS_TAG`.
* **The aliases** (MLflow's, unique per registered model): :data:`CANDIDATE` is the newest registered version
  (it moves to every new version, so an older one keeps no alias unless it is the champion); :data:`CHAMPION` is the
  version promoted last (serving loads ``models:/<target>-debiased@champion``).
"""

from __future__ import annotations

DECISION_TAG = "promotion_decision"
REASONS_TAG = "promotion_reasons"
VERDICT_TAG = "promotion_verdict"
NOTE_TAG = "promotion_note"
DETECTABLE_TAG = "promotion_detectable_shift"
PROMOTED = "promoted"
REFUSED = "refused"
REFUSED_WORSE = "refused: worse"
REFUSED_NOT_SHOWN = "refused: not shown"
REFUSED_MISSING = "refused: evidence missing"
VERDICTS = (PROMOTED, REFUSED_WORSE, REFUSED_NOT_SHOWN, REFUSED_MISSING)
CANDIDATE = "candidate"
CHAMPION = "champion"

LEGEND = (f"Decision: {PROMOTED} (every rule of the promotion gate held: the version got the alias {CHAMPION}) or "
          f"{REFUSED} (the {CHAMPION} alias stayed where it was), as the registry's {DECISION_TAG} tag says. "
          f"Verdict ({VERDICT_TAG}): {PROMOTED}; {REFUSED_WORSE} (evidence against it: significantly more biased, "
          f"an overshoot past 50 shown, or LMS significantly lower than a rule allows); {REFUSED_MISSING} (a rule "
          f"could not be judged); {REFUSED_NOT_SHOWN} (no evidence against it, but an improvement was not shown on "
          "every metric vanilla is demonstrably biased on; "
          "\"underpowered\" when the observed shift lies below what the benchmark could have shown). Aliases: as "
          f"the registry holds them now; {CANDIDATE} marks the newest registered version (it moves to each new one, "
          f"so an older version keeps no alias unless it is the {CHAMPION}), {CHAMPION} the version promoted last.")


def decision(promote: bool) -> str:
    """The decision word of a gate outcome."""
    return PROMOTED if promote else REFUSED


def verdict_line(verdict: str, note: str = "") -> str:
    """``refused: not shown (underpowered: SS vs vanilla: detectable shift ≥ 14.52 (observed +0.04))``."""
    return f"{verdict} ({note})" if note else verdict


def aliases_for(promote: bool) -> list[str]:
    """The aliases a newly registered version gets: always :data:`CANDIDATE`, :data:`CHAMPION` when promoted."""
    return [CANDIDATE, CHAMPION] if promote else [CANDIDATE]
