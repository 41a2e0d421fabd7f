"""The dose response's sentences (report/dose.py ``trend_lines``): from the smallest to the largest dose, the items
changed, the detectable and observed shifts, whether the observed reached the detectable, and, where it did not,
whether it fell further short with the dose. Hand-built decision records, so each number can be checked."""

from __future__ import annotations

from types import SimpleNamespace

from context_cda.report.dose import Row, trend_lines


def _row(tokens: int, ss: tuple[float, float, int], cs: tuple[float, float, int], tested_cs: bool = True) -> Row:
    """ss / cs: (observed shift toward 50, detectable shift, items changed) of 255 / 262 items."""
    rec = {"stereoset_ss": {"diff": ss[0], "detectable_shift": ss[1], "discordant": ss[2], "n": 255, "tested": True},
           "crows_cs": {"diff": cs[0], "detectable_shift": cs[1], "discordant": cs[2], "n": 262,
                        "tested": tested_cs}}
    decision = SimpleNamespace(comparisons={"vs_vanilla": rec},
                               detectable_shift={"stereoset_ss": ss[1], "crows_cs": cs[1]})
    return Row(target="t", arm=f"cda-{tokens // 1000}k", decision=decision, tokens=tokens)


def test_a_shortfall_that_grows_with_the_dose_is_said():
    lines = trend_lines([_row(1000, (0.51, 3.52, 15), (1.02, 3.60, 18), tested_cs=False),
                         _row(32000, (-0.49, 6.18, 49), (2.16, 7.05, 62), tested_cs=False)])
    assert lines[0] == (
        "- SS: from 1,000 to 32,000 tokens seen, the items decided differently from vanilla went from 15 of 255 to "
        "49 of 255, the smallest shift toward 50 the gate could show from 3.52 to 6.18 points, and the observed "
        "shift from +0.51 to -0.49; at no dose did the observed shift reach the detectable shift, and it fell "
        "further short with the dose (3.01 points at the smallest, 6.67 at the largest): more tokens changed more "
        "items, in both directions, without a net shift toward 50.")
    assert lines[1].endswith("(vanilla is not demonstrably biased on CS: a non-inferiority check, no shift to show).")


def test_a_shortfall_that_narrows_and_a_dose_that_reaches_it():
    narrowing = trend_lines([_row(1000, (0.5, 4.0, 20), (0.0, 4.0, 20)), _row(16000, (3.0, 4.5, 30), (0.0, 4.0, 20))])
    assert narrowing[0].endswith("at no dose did the observed shift reach the detectable shift (it fell short by "
                                 "3.50 points at the smallest dose, 1.50 at the largest).")
    reached = trend_lines([_row(1000, (0.5, 4.0, 20), (0.0, 4.0, 20)), _row(4000, (5.0, 4.5, 30), (0.0, 4.0, 20)),
                           _row(16000, (6.0, 5.0, 40), (0.0, 4.0, 20))])
    assert reached[0].endswith("the observed shift reached the detectable shift at 4,000, 16,000.")


def test_one_dose_is_no_trend():
    assert trend_lines([_row(1000, (0.5, 4.0, 20), (0.0, 4.0, 20))]) == []
