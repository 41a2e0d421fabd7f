"""The words of a registry decision: one vocabulary for the gate, the model registry and the report.

* **The decision** of the promotion gate on a version: :data:`PROMOTED` (every rule held: the version got the
  :data:`CHAMPION` alias) or :data:`REFUSED` (a rule failed or could not be judged: the champion stayed where it
  was). It is the version tag and run tag :data:`DECISION_TAG`, the ``decision`` of ``promotion.json`` and the
  report's "Decision" column; the reasons, in numbers, are the tag :data:`REASONS_TAG`.
* **The aliases** (MLflow's, unique per registered model): :data:`CANDIDATE` is the newest registered version
  (it moves to every new version, so an older one keeps no alias unless it is the champion); :data:`CHAMPION` is the
  version promoted last (serving loads ``models:/<target>-debiased@champion``).
"""

from __future__ import annotations

DECISION_TAG = "promotion_decision"
REASONS_TAG = "promotion_reasons"
PROMOTED = "promoted"
REFUSED = "refused"
CANDIDATE = "candidate"
CHAMPION = "champion"

LEGEND = (f"Decision: {PROMOTED} (every rule of the promotion gate held: the version got the alias {CHAMPION}) or "
          f"{REFUSED} (a rule failed; the {CHAMPION} alias stayed where it was), as the registry's "
          f"{DECISION_TAG} tag says. Aliases: as the registry holds them now; {CANDIDATE} marks the newest "
          f"registered version (it moves to each new one, so an older version keeps no alias unless it is the "
          f"{CHAMPION}), {CHAMPION} the version promoted last.")


def decision(promote: bool) -> str:
    """The decision word of a gate outcome."""
    return PROMOTED if promote else REFUSED


def aliases_for(promote: bool) -> list[str]:
    """The aliases a newly registered version gets: always :data:`CANDIDATE`, :data:`CHAMPION` when promoted."""
    return [CANDIDATE, CHAMPION] if promote else [CANDIDATE]
