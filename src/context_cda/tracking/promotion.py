"""The promotion gate: a pure function from metric sets to a decision with its reasons.

A newly registered version always gets the alias ``candidate``. It also becomes ``champion`` when

* its |SS-50| (StereoSet) and |CS-50| (CrowS-Pairs) are not worse than the current champion's (strictly better
  with ``require_improvement``), and
* its LMS is at most ``lms_delta`` points below the *vanilla* model's LMS (debiasing must not cost language
  modelling ability).

With no champion yet, the LMS rule alone decides. A metric the candidate lacks refuses promotion; a metric the
champion lacks is not compared (and the reasons say so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

SS = "stereoset_ss"
LMS = "stereoset_lms"
ICAT = "stereoset_icat"
CS = "crows_cs"
BIAS_METRICS = (SS, CS)  # ideal value 50
TOLERANCE = 1e-6  # metrics are percentages of item counts; float noise is far below this


@dataclass(frozen=True)
class PromotionPolicy:
    lms_delta: float = 2.0
    require_improvement: bool = False

    @classmethod
    def from_config(cls, cfg: Any) -> PromotionPolicy:
        return cls(lms_delta=float(cfg.lms_delta), require_improvement=bool(cfg.require_improvement))


@dataclass
class Decision:
    promote: bool
    aliases: list[str]
    reasons: list[str]
    candidate: dict[str, float]
    champion: dict[str, float] | None
    vanilla: dict[str, float]
    policy: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(m: Mapping[str, Any] | None, key: str) -> float | None:
    if m is None or key not in m or m[key] is None:
        return None
    try:
        v = float(m[key])
    except (TypeError, ValueError):
        return None
    return None if v != v else v  # NaN counts as missing


def decide(
    candidate: Mapping[str, Any],
    champion: Mapping[str, Any] | None,
    vanilla: Mapping[str, Any],
    policy: PromotionPolicy | Any = None,
) -> Decision:
    """Decide whether ``candidate`` replaces ``champion`` (None: there is none yet)."""
    pol = policy if isinstance(policy, PromotionPolicy) else (
        PromotionPolicy.from_config(policy) if policy is not None else PromotionPolicy()
    )
    ok = True
    reasons: list[str] = []

    lms, lms0 = _num(candidate, LMS), _num(vanilla, LMS)
    if lms is None:
        ok = False
        reasons.append(f"refused: candidate has no {LMS}")
    elif lms0 is None:
        ok = False
        reasons.append(f"refused: vanilla model has no {LMS} to compare against")
    elif lms < lms0 - pol.lms_delta - TOLERANCE:
        ok = False
        reasons.append(f"LMS {lms:.2f} is more than {pol.lms_delta:g} below vanilla's {lms0:.2f}")
    else:
        reasons.append(f"LMS {lms:.2f} is within {pol.lms_delta:g} of vanilla's {lms0:.2f}")

    if champion is None:
        reasons.append("no champion yet: the LMS rule decides")
    else:
        for key in BIAS_METRICS:
            c, h = _num(candidate, key), _num(champion, key)
            if c is None:
                ok = False
                reasons.append(f"refused: candidate has no {key}")
                continue
            if h is None:
                reasons.append(f"{key}: champion has no value; not compared")
                continue
            dc, dh = abs(c - 50.0), abs(h - 50.0)
            better = dc < dh - TOLERANCE
            not_worse = dc <= dh + TOLERANCE
            passed = better if pol.require_improvement else not_worse
            word = "better than" if better else "as good as" if not_worse else "worse than"
            reasons.append(f"|{key}-50| = {dc:.2f} is {word} the champion's {dh:.2f}")
            ok = ok and passed
    return Decision(
        promote=ok,
        aliases=["candidate", "champion"] if ok else ["candidate"],
        reasons=reasons,
        candidate={k: float(v) for k, v in candidate.items() if _num(candidate, k) is not None},
        champion=None if champion is None else {k: float(v) for k, v in champion.items() if _num(champion, k) is not None},
        vanilla={k: float(v) for k, v in vanilla.items() if _num(vanilla, k) is not None},
        policy=asdict(pol),
    )
