"""The promotion gate on constructed metric sets: promotes, refuses, first version."""

from __future__ import annotations

import pytest

from context_cda.config import PromotionConfig
from context_cda.tracking.promotion import CS, LMS, SS, PromotionPolicy, decide

VANILLA = {SS: 62.0, LMS: 88.0, CS: 58.0}
CHAMPION = {SS: 56.0, LMS: 87.0, CS: 54.0}


def test_promotes_when_bias_not_worse_and_lms_within_delta():
    d = decide({SS: 53.0, LMS: 86.5, CS: 46.5}, CHAMPION, VANILLA, PromotionConfig(lms_delta=2.0))
    assert d.promote and d.aliases == ["candidate", "champion"]
    assert any("within 2" in r for r in d.reasons)
    assert any("better than the champion" in r for r in d.reasons)


def test_equal_bias_is_not_worse_but_fails_require_improvement():
    cand = {SS: 44.0, LMS: 88.0, CS: 54.0}  # |SS-50| = 6 = champion's, CS equal
    assert decide(cand, CHAMPION, VANILLA, PromotionPolicy()).promote
    d = decide(cand, CHAMPION, VANILLA, PromotionPolicy(require_improvement=True))
    assert not d.promote and d.aliases == ["candidate"]


@pytest.mark.parametrize(
    "cand, why",
    [
        ({SS: 57.0, LMS: 88.0, CS: 50.0}, "stereoset_ss-50| = 7.00 is worse"),
        ({SS: 50.0, LMS: 88.0, CS: 45.0}, "crows_cs-50| = 5.00 is worse"),
        ({SS: 50.0, LMS: 85.9, CS: 50.0}, "more than 2 below vanilla"),
        ({SS: 50.0, CS: 50.0}, "candidate has no stereoset_lms"),
        ({SS: 50.0, LMS: 88.0}, "candidate has no crows_cs"),
    ],
)
def test_refuses(cand, why):
    d = decide(cand, CHAMPION, VANILLA, PromotionPolicy(lms_delta=2.0))
    assert not d.promote and d.aliases == ["candidate"]
    assert any(why in r for r in d.reasons), d.reasons


def test_first_version_is_promoted_by_the_lms_rule_alone():
    biased = {SS: 70.0, LMS: 87.0, CS: 70.0}  # more biased than vanilla, but there is no champion to beat
    d = decide(biased, None, VANILLA, PromotionPolicy(lms_delta=2.0))
    assert d.promote and any("no champion" in r for r in d.reasons) and d.champion is None
    d = decide({SS: 50.0, LMS: 80.0, CS: 50.0}, None, VANILLA, PromotionPolicy(lms_delta=2.0))
    assert not d.promote


def test_champion_without_cs_is_not_compared_on_cs():
    d = decide({SS: 52.0, LMS: 88.0, CS: 60.0}, {SS: 55.0}, VANILLA, PromotionPolicy())
    assert d.promote and any("champion has no value" in r for r in d.reasons)
    assert d.to_dict()["policy"] == {"lms_delta": 2.0, "require_improvement": False}
