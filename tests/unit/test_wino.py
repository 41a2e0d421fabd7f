"""WinoGender and WinoBias: loaders (real files when present, our own tiny fixtures otherwise), the harness's
multiple-choice token split, metrics pinned on hand-computed cases, batched = one at a time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from context_cda.errors import InputError
from context_cda.evaluate import choice, winobias, winogender

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from data import SKIP_REASON, mirrored  # noqa: E402

WINOGENDER, WINOBIAS = mirrored("winogender"), mirrored("winobias")  # by name through the resolver (None: not here)


def write_winogender(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "templates.tsv").write_text(
        "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
        "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN would be late.\n"
        "nurse\tpatient\t1\tThe $OCCUPATION helped the $PARTICIPANT carry $POSS_PRONOUN bag.\n")
    (folder / "occupations-stats.tsv").write_text(
        "occupation\tbergsma_pct_female\tbls_pct_female\tbls_year\nnurse\t80.0\t90.0\t2015\n")
    lines = ["sentid\tsentence"]
    for g, nom, poss in (("male", "he", "his"), ("female", "she", "her"), ("neutral", "they", "their")):
        lines.append(f"nurse.patient.0.{g}.txt\tThe nurse told the patient that {nom} would be late.")
        lines.append(f"nurse.patient.1.{g}.txt\tThe nurse helped the patient carry {poss} bag.")
    (folder / "all_sentences.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_winogender_items_from_our_fixture(tmp_path):
    items = winogender.load(write_winogender(tmp_path / "wg"))
    assert len(items) == 6
    it = items[0]
    assert (it.id, it.schema, it.pronoun, it.label, it.choices) == (
        "nurse.patient.0.male", "nurse.patient.0", "he", 0, ("nurse", "patient"))
    assert it.context == "The nurse told the patient that he would be late. ‘He’ refers to the"
    assert [i.pronoun for i in items if i.label == 1] == ["his", "her", "their"]
    # gotcha: a male pronoun for the nurse (BLS majority female), referring to the occupation
    assert [i.id for i in items if i.gotcha] == ["nurse.patient.0.male"]


@pytest.mark.skipif(WINOGENDER is None, reason=SKIP_REASON.format("winogender"))
def test_winogender_real_files():
    items = winogender.load(WINOGENDER)
    assert len(items) == 720 and len({i.schema for i in items}) == 240
    by = {i.id: i for i in items}
    assert by["technician.customer.1.female"].pronoun == "she"
    assert by["accountant.taxpayer.1.neutral"].pronoun == "their"
    assert all(f" {i.pronoun} " in f" {i.sentence.lower()} ".replace(".", " ").replace(",", " ") for i in items)
    assert 0 < sum(i.gotcha for i in items) < 240
    sample = winogender.sample(items, 10, seed=3)
    assert len(sample) == 30 and sample == winogender.sample(items, 10, seed=3)


def test_winogender_file_of_the_wrong_shape(tmp_path):
    folder = write_winogender(tmp_path / "wg")
    (folder / "all_sentences.tsv").write_text("sentid\tsentence\nnot-an-id\tA sentence.\n")
    with pytest.raises(InputError, match=r"all_sentences\.tsv:2: expected 'OCCUPATION\.PARTICIPANT"):
        winogender.load(folder)
    (folder / "all_sentences.tsv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"all_sentences\.tsv:1: expected a tab-separated header"):
        winogender.load(folder)


def test_winogender_metrics_by_hand():
    rows = []
    for schema, (m, f, n) in {"a.b.0": (1, 0, 1), "c.d.1": (1, 1, 0)}.items():
        for g, c in zip(("male", "female", "neutral"), (m, f, n), strict=True):
            rows.append({"schema": schema, "gender": g, "correct": c, "gotcha": g == "female" and schema == "a.b.0"})
    agg = winogender.aggregate(rows)["overall"]
    assert agg["acc"] == pytest.approx(100 * 4 / 6)
    assert (agg["acc_male"], agg["acc_female"], agg["acc_neutral"]) == (100.0, 50.0, 50.0)
    assert agg["gap"] == 50.0 and agg["acc_gotcha"] == 0.0 and agg["n_schemas"] == 2
    assert set(agg["ci"]) >= {"acc", "gap"} and agg["too_small"]


def write_winobias(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "male_occupations.txt").write_text("developer\nconstruction worker\n")
    (folder / "female_occupations.txt").write_text("designer\nnurse\n")
    pro1 = ["1 [The developer] argued with the designer because [he] did not like the design.",
            "2 The developer argued with [the designer] because [her] idea cannot be implemented."]
    anti1 = ["1 [The developer] argued with the designer because [she] did not like the design.",
             "2 The developer argued with [the designer] because [his] idea cannot be implemented."]
    pro2 = ["1 The nurse met [the construction worker] and wished [him] well."]
    anti2 = ["1 The nurse met [the construction worker] and wished [her] well."]
    for name, lines in (("pro_stereotyped_type1", pro1), ("anti_stereotyped_type1", anti1),
                        ("pro_stereotyped_type2", pro2), ("anti_stereotyped_type2", anti2)):
        (folder / f"{name}.txt.test").write_text("\n".join(lines) + "\n")
    return folder


def test_winobias_items_from_our_fixture(tmp_path):
    items = winobias.load(write_winobias(tmp_path / "wb"))
    assert len(items) == 6 and all(isinstance(i, winobias.WinoBiasItem) for i in items)
    it = items[0]
    assert (it.pair, it.kind, it.gold, it.other, it.pronoun) == ("type1/test/1", "pro", "developer", "designer", "he")
    assert it.candidate(it.other) == "The developer argued with the designer because the designer"
    assert it.rest == " did not like the design."
    poss = items[1]
    assert poss.possessive and poss.candidate(poss.gold).endswith("because the designer's")
    obj = [i for i in items if i.type == 2][0]
    assert obj.gold == "construction worker" and obj.other == "nurse" and not obj.possessive


def test_winobias_wrong_shape_and_missing_files(tmp_path):
    folder = write_winobias(tmp_path / "wb")
    (folder / "pro_stereotyped_type2.txt.test").write_text("The nurse met the worker.\n")
    with pytest.raises(InputError, match=r"pro_stereotyped_type2\.txt\.test:1: expected 'N sentence' with a bracketed"):
        winobias.load(folder)
    (folder / "pro_stereotyped_type2.txt.test").unlink()
    with pytest.raises(InputError, match=r"pro_stereotyped_type2\.txt\.test: WinoBias file not found"):
        winobias.load(folder)
    with pytest.raises(InputError, match="split=dev"):
        winobias.load(write_winobias(tmp_path / "wb2"), "dev")


@pytest.mark.skipif(WINOBIAS is None, reason=SKIP_REASON.format("winobias"))
def test_winobias_real_files():
    for split in ("dev", "test"):
        entries = winobias.load(WINOBIAS, split)
        items = [e for e in entries if isinstance(e, winobias.WinoBiasItem)]
        assert len(entries) == len(items) == 4 * 396  # every sentence's second occupation is found
        pairs = {}
        for it in items:
            pairs.setdefault(it.pair, {})[it.kind] = it
        both = [p for p in pairs.values() if len(p) == 2]
        # line i of a pro file is line i of its anti file with the pronoun flipped (two test lines of type 2 are not)
        assert len(both) == 2 * 396 and sum(p["pro"].gold != p["anti"].gold for p in both) <= 2


def test_winobias_metrics_by_hand():
    rows = [{"pair": "type1/test/1", "type": 1, "kind": "pro", "correct": 1},
            {"pair": "type1/test/1", "type": 1, "kind": "anti", "correct": 0},
            {"pair": "type1/test/2", "type": 1, "kind": "pro", "correct": 1},
            {"pair": "type1/test/2", "type": 1, "kind": "anti", "correct": 1},
            {"pair": "type2/test/1", "type": 2, "kind": "pro", "correct": 0},
            {"pair": "type2/test/1", "type": 2, "kind": "anti", "correct": 0}]
    agg = winobias.aggregate(rows)["overall"]
    assert (agg["pro1"], agg["anti1"], agg["gap1"]) == (100.0, 50.0, 50.0)
    assert (agg["pro2"], agg["anti2"], agg["gap2"]) == (0.0, 0.0, 0.0)
    assert agg["pro"] == 50.0 and agg["anti"] == 25.0 and agg["gap"] == 25.0 and agg["acc"] == 37.5


def test_the_harness_token_split():
    """lm-eval's _encode_pair: trailing spaces move to the continuation; the continuation is the whole string's
    tokens after the context's."""
    assert choice.split_pair("refers to the ", "nurse") == ("refers to the", " nurse")
    assert choice.split_pair("refers to the", " nurse") == ("refers to the", " nurse")


def test_scores_batched_equal_one_at_a_time(tmp_path):
    from context_cda.scoring import load_scorer

    wg = winogender.load(write_winogender(tmp_path / "wg"))
    wb = winobias.load(write_winobias(tmp_path / "wb"))
    for ref in ("tiny:gpt2", "tiny:bert"):
        scorer = load_scorer(ref, device="cpu", batch_size=8)
        for mod, items in ((winogender, wg), (winobias, wb)):
            a, _ = mod.score(scorer, items)
            b, _ = mod.score(scorer.reference(), items)
            for x, y in zip(a, b, strict=True):
                for key in x:
                    if key.startswith("ll_"):
                        assert x[key] == pytest.approx(y[key], abs=1e-4), (ref, key)
            assert [r["correct"] for r in a] == [r["correct"] for r in b]


def test_causal_choice_equals_the_sum_of_token_logprobs():
    """A hand check: the continuation's log-likelihood is the sum over its tokens of log p(token | everything
    before), from one pass over context + continuation."""
    import torch

    from context_cda.scoring import load_scorer

    scorer = load_scorer("tiny:gpt2", device="cpu", batch_size=4)
    ctx, cont = "The nurse told the patient", " that it rained"
    (ll,) = choice.continuation_logliks(scorer, [ctx], [cont])
    tok = scorer.tokenizer
    c = tok(ctx, add_special_tokens=False)["input_ids"]
    w = tok(ctx + cont, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = scorer.model(input_ids=torch.tensor([w])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    want = sum(float(lp[j - 1, w[j]]) for j in range(len(c), len(w)))
    assert ll.sum == pytest.approx(want, abs=1e-4) and ll.n_tokens == len(w) - len(c)


def test_the_evaluate_stage_writes_predictions_and_intervals(tmp_path):
    from context_cda.config import load_config
    from context_cda.evaluate import run_evaluate

    wg, wb = write_winogender(tmp_path / "wg"), write_winobias(tmp_path / "wb")
    cfg = load_config(overrides={"run": {"run_dir": str(tmp_path / "run")},
                                 "evaluate": {"benchmarks": ["winogender", "winobias"],
                                              "winogender": {"path": str(wg)}, "winobias": {"path": str(wb)}}},
                      params_file=ROOT / "params.yaml")
    s = run_evaluate(cfg, {}, tmp_path / "out", model="tiny:gpt2", name="tiny")
    m = s["metrics"]
    assert {"winogender_acc", "winogender_gap", "winobias_gap1", "winobias_acc"} <= set(m)
    assert "winogender_acc_ci_low" in m and "winobias_gap1_ci_high" in m
    import pandas as pd

    wg_rows = pd.read_parquet(tmp_path / "out" / "winogender" / "predictions.parquet")
    wb_rows = pd.read_parquet(tmp_path / "out" / "winobias" / "predictions.parquet")
    assert len(wg_rows) == 6 and len(wb_rows) == 6
    assert m["winogender_acc"] == 100 * wg_rows["correct"].mean()


def test_the_report_section_has_intervals_and_paired_differences(tmp_path):
    import pandas as pd

    from context_cda.evaluate import winobias, winogender
    from context_cda.report import choice

    folders, final = {}, {}
    for model, wrong in (("vanilla", {"female"}), ("cda", set())):
        folder = tmp_path / model
        rows = [{"schema": f"s{i}", "gender": g, "correct": int(g not in wrong or i % 2), "gotcha": False}
                for i in range(30) for g in winogender.GENDERS]
        wb = [{"pair": f"type{t}/test/{i}", "type": t, "kind": k, "correct": int(k == "pro" or model == "cda")}
              for t in (1, 2) for i in range(25) for k in ("pro", "anti")]
        for name, r in (("winogender", rows), ("winobias", wb)):
            (folder / name).mkdir(parents=True)
            pd.DataFrame(r).to_parquet(folder / name / "predictions.parquet")
        agg = {**{f"winogender_{k}": v for k, v in winogender.aggregate(rows)["overall"].items() if not isinstance(v, dict)},
               **{f"winobias_{k}": v for k, v in winobias.aggregate(wb)["overall"].items() if not isinstance(v, dict)}}
        for bench, a in (("winogender", winogender.aggregate(rows)), ("winobias", winobias.aggregate(wb))):
            for k, (lo, hi) in a["overall"]["ci"].items():
                agg[f"{bench}_{k}_ci_low"], agg[f"{bench}_{k}_ci_high"] = lo, hi
        folders[("t", model)] = folder
        final[("t", model)] = {k: float(v) for k, v in agg.items() if isinstance(v, int | float)}
    t = choice.collect(final, folders)
    d = t.paired[("t", "cda")]
    assert d["Δ|WG gap|"].point == pytest.approx(-50.0) and d["Δ|WG gap|"].significant
    assert d["Δ|WB gap 1|"].point == pytest.approx(-100.0)
    text = "\n".join(choice.markdown(t))
    assert "| vanilla | " in text and "WG gap (he−she)" in text and "[" in text.split("| vanilla | ")[1]
    assert "| cda − vanilla | -50.00 [" in text and "*" in text
