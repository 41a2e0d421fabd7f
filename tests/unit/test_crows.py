"""CrowS-Pairs: loader, the three scoring modes hand-computed with a fake model, aggregation, tiny models."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.helpers import fake_lm
from tests.helpers.data import SKIP_REASON, mirrored

from context_cda.errors import ConfigError, InputError
from context_cda.evaluate import crows
from context_cda.evaluate.data import load_crows

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"
SHARED = mirrored("crows-pairs")  # by name: $CCDA_DATA_DIR or the data cache, as users find it




# ------------------------------------------------------------------------------------------------ loader


def test_loader_filters_and_parses_multiline_fields():
    pairs = load_crows(FIX / "crows_tiny.csv")
    assert [p.id for p in pairs] == ["crows-0", "crows-1", "crows-3"]
    assert [p.direction for p in pairs] == ["stereo", "antistereo", "stereo"]
    everything = load_crows(FIX / "crows_tiny.csv", bias_type="all")
    assert len(everything) == 4 and everything[2].sent_more == "the woman\nwas rude."
    race = load_crows(FIX / "crows_tiny.csv", bias_type="race")  # StereoSet spelling -> race-color
    assert [p.id for p in race] == ["crows-2"]
    assert race[0].source.endswith("crows_tiny.csv:4")
    assert everything[3].source.endswith("crows_tiny.csv:6")  # the line numbers count the embedded newline


def test_loader_errors_name_file_and_line(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text(",sent_more,sent_less,bias_type\n0,a,b,gender\n")
    with pytest.raises(InputError, match="line 1: missing column"):
        load_crows(p)
    p.write_text(",sent_more,sent_less,stereo_antistereo,bias_type\n0,a b,a c,stereo,gender\n1,a b,a c,both,gender\n")
    with pytest.raises(InputError, match=r"c.csv: line 3: stereo_antistereo must be"):
        load_crows(p)
    ok = _write(tmp_path, ",sent_more,sent_less,stereo_antistereo,bias_type\n0,a b,a c,stereo,gender\n")
    with pytest.raises(InputError, match="no pairs with bias_type 'age'; found: gender"):
        load_crows(ok, bias_type="age")


def _write(tmp_path, text):
    p = tmp_path / "ok.csv"
    p.write_text(text)
    return p


@pytest.mark.skipif(SHARED is None, reason=SKIP_REASON.format("crows-pairs"))
def test_full_file_counts():
    gender = load_crows(SHARED)
    assert len(gender) == 262
    assert sum(p.direction == "stereo" for p in gender) == 159
    assert sum(p.direction == "antistereo" for p in gender) == 103
    assert len(load_crows(SHARED, bias_type="all")) == 1508
    assert len(load_crows(SHARED, bias_type="race")) == 516


# ------------------------------------------------------------------------------------------------ pieces


def test_token_spans_use_difflib_over_ids():
    shared = crows.token_spans([1, 5, 6, 7, 2], [1, 8, 9, 6, 7, 2], equal=True)
    diff = crows.token_spans([1, 5, 6, 7, 2], [1, 8, 9, 6, 7, 2], equal=False)
    assert shared == ([0, 2, 3, 4], [0, 3, 4, 5])
    assert diff == ([1], [1, 2])


def test_mode_resolution():
    assert crows.resolve_mode("auto", "masked") == "nangia"
    assert crows.resolve_mode("auto", "causal") == "bias-bench"
    assert crows.resolve_mode("auto", "seq2seq") == "bias-bench"
    with pytest.raises(ConfigError, match="needs a masked or seq2seq LM"):
        crows.resolve_mode("nangia", "causal")
    with pytest.raises(ConfigError, match="unknown mode"):
        crows.resolve_mode("mine", "masked")


def test_aggregate_ties_stay_in_n_and_subscores_drop_them():
    rows = [
        {"bias_type": "gender", "direction": "stereo", "score_more": -1.0, "score_less": -2.0},  # win
        {"bias_type": "gender", "direction": "stereo", "score_more": -2.0, "score_less": -2.0},  # tie
        {"bias_type": "gender", "direction": "antistereo", "score_more": -3.0, "score_less": -2.0},  # loss
        {"bias_type": "race-color", "direction": "stereo", "score_more": -3.0, "score_less": -2.0},  # loss
    ]
    agg = crows.aggregate(rows)
    o = agg["overall"]
    assert o["cs"] == 25.0 and o["neutral"] == 1 and o["count"] == 4
    assert o["stereo"] == 50.0 and o["antistereo"] == 0.0
    assert agg["by_bias_type"]["gender"]["cs"] == pytest.approx(100 / 3)


# ------------------------------------------------------------------------------------------------ hand-computed


def _score(masked, mode, batch_size=4):
    fake = fake_lm
    from context_cda.scoring import scorer_for

    model, tok = fake.make(masked=masked)
    sc = scorer_for(model, tok, batch_size=batch_size)
    pairs = load_crows(FIX / "crows_tiny.csv")
    rows, rejected, used = crows.score(sc, pairs, mode)
    ref_rows, _, _ = crows.score(sc.reference(), pairs, mode)
    for a, b in zip(rows, ref_rows, strict=True):
        assert (a["score_more"], a["score_less"]) == pytest.approx((b["score_more"], b["score_less"]), abs=1e-5)
    assert not rejected
    return fake, rows, crows.aggregate(rows), used


def test_nangia_masked_hand_computed():
    fake, rows, agg, used = _score(True, "auto")
    assert used == "nangia" and agg["mode"] == "nangia"
    lp = fake.lp
    # pair 0: shared tokens "was caring ." ; "she" in sent_more lifts p(was) to 0.3
    assert rows[0]["score_more"] == round(math.log(0.3) + lp("caring") + lp("."), 3)
    assert rows[0]["score_less"] == round(lp("was") + lp("caring") + lp("."), 3)
    # pair 1: shared "is the doctor ." unaffected by "she" -> a tie after rounding; pair 2: identical contexts
    assert rows[1]["score_more"] == rows[1]["score_less"] == round(lp("is") + lp("the") + lp("doctor") + lp("."), 3)
    assert [(r["n_more"], r["n_less"]) for r in rows[:2]] == [(3, 3), (4, 4)]  # the shared tokens summed
    o = agg["overall"]
    assert (o["cs"], o["neutral"], o["count"]) == (pytest.approx(100 / 3), 2, 3)
    assert o["stereo"] == 100.0 and math.isnan(o["antistereo"])


def test_bias_bench_masked_hand_computed():
    fake, rows, agg, used = _score(True, "bias-bench")
    lp = fake.lp
    # the differing token is masked, so "she" is absent from its own masked copy: p(she)=0.02, p(he)=0.04
    assert (rows[0]["score_more"], rows[0]["score_less"]) == (round(lp("she"), 3), round(lp("he"), 3))
    assert (rows[1]["score_more"], rows[1]["score_less"]) == (round(lp("he"), 3), round(lp("she"), 3))
    o = agg["overall"]
    assert (o["cs"], o["neutral"], o["stereo"], o["antistereo"]) == (pytest.approx(100 / 3), 1, 0.0, 100.0)


def test_lm_eval_masked_is_full_pll_sum():
    fake, rows, agg, used = _score(True, "lm-eval")
    lp = fake.lp
    assert rows[0]["score_more"] == pytest.approx(lp("she") + math.log(0.3) + lp("caring") + lp("."), abs=1e-5)
    assert rows[0]["score_less"] == pytest.approx(lp("he") + lp("was") + lp("caring") + lp("."), abs=1e-5)
    assert agg["overall"]["cs"] == pytest.approx(200 / 3) and agg["overall"]["neutral"] == 1


def test_causal_modes_hand_computed():
    fake, rows, agg, used = _score(False, "auto")
    lp = fake.lp
    assert used == "bias-bench"
    # geometric-mean probability over "she was caring ." (first token from the start-token pass)
    assert rows[0]["score_more"] == pytest.approx(math.exp((lp("she") + lp("was") + lp("caring") + lp(".")) / 4), rel=1e-6)
    assert (agg["overall"]["cs"], agg["overall"]["neutral"]) == (pytest.approx(100 / 3), 1)
    fake, rows, agg, used = _score(False, "lm-eval")
    assert rows[1]["score_more"] == pytest.approx(lp("he") + lp("is") + lp("the") + lp("doctor") + lp("."), abs=1e-5)
    assert (agg["overall"]["cs"], agg["overall"]["neutral"]) == (pytest.approx(100 / 3), 1)


# ------------------------------------------------------------------------------------------------ tiny models


def _pairs(n=4):
    return load_crows(SHARED)[:n] if SHARED is not None else load_crows(FIX / "crows_tiny.csv")


@pytest.mark.parametrize(
    "arch, modes",
    [
        ("bert", ["nangia", "lm-eval"]),
        ("distilbert", ["bias-bench"]),
        ("roberta", ["nangia"]),
        ("gpt2", ["bias-bench", "lm-eval"]),
        ("llama", ["bias-bench", "lm-eval"]),
        ("t5", ["nangia", "bias-bench", "lm-eval"]),
    ],
)
def test_tiny_models_every_mode_batched_equals_one_at_a_time(arch, modes):
    from context_cda.scoring import load_scorer

    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=16)
    assert sc.family != "causal" or sc.packable  # causal: the packed prefix-tree path is the one compared
    pairs = _pairs()
    for mode in modes:
        rows, rejected, used = crows.score(sc, pairs, mode)
        ref, _, _ = crows.score(sc.reference(), pairs, mode)
        assert used == mode and len(rows) + len(rejected) == len(pairs)
        geometric = mode == "bias-bench" and sc.family == "causal"  # raw = 2^(mean log2 p), else a log-likelihood
        for a, b in zip(rows, ref, strict=True):
            assert (a["n_more"], a["n_less"]) == (b["n_more"], b["n_less"]) and min(a["n_more"], a["n_less"]) > 0
            # summed log-probabilities (nangia, lm-eval) accumulate float32 noise per token: 1e-5 per token
            n_more, n_less = (a["n_more"], a["n_less"]) if mode != "bias-bench" else (1, 1)
            assert a["raw_more"] == pytest.approx(b["raw_more"], abs=1e-5 * n_more)
            assert a["raw_less"] == pytest.approx(b["raw_less"], abs=1e-5 * n_less)
            for side in ("raw_more", "raw_less"):  # the log-likelihood itself within 1e-5, relative
                got, want = (math.log(a[side]), math.log(b[side])) if geometric else (a[side], b[side])
                assert abs(got - want) <= 1e-5 * max(1.0, abs(want))
            # the same decision, ties included
            assert (a["score_more"] > a["score_less"], a["score_more"] == a["score_less"]) == \
                (b["score_more"] > b["score_less"], b["score_more"] == b["score_less"])
        assert 0.0 <= crows.aggregate(rows)["overall"]["cs"] <= 100.0
