"""The head fine-tuning shared by the extrinsic benchmarks: every family learns a separable toy task, batched
predictions equal one-at-a-time ones, regression heads, loaded models (LoRA-free) and bad labels."""

from __future__ import annotations

import numpy as np
import pytest

from context_cda.config import HeadConfig
from context_cda.errors import ModelError
from context_cda.evaluate.extrinsic.classifier import (
    HeadFactory,
    encode,
    fine_tune,
    freeze_body,
    predict,
    softmax,
)
from context_cda.evaluate.extrinsic.data import Example

pytest.importorskip("transformers")

POS = ["a good film", "good and fine", "very good", "good good day", "so good", "a fine good story"]
NEG = ["a bad film", "bad and awful", "very bad", "bad bad day", "so bad", "an awful bad story"]


def toy(pair: bool = False) -> list[Example]:
    out = []
    for i, (p, n) in enumerate(zip(POS, NEG, strict=True)):
        out.append(Example(f"p{i}", p, "yes" if pair else None, 1, f"toy:{2 * i + 1}"))
        out.append(Example(f"n{i}", n, "no" if pair else None, 0, f"toy:{2 * i + 2}"))
    return out


FAST = HeadConfig(epochs=12, learning_rate=3e-3, warmup_ratio=0.0, batch_size=4, max_seq_len=32, seed=0)


@pytest.mark.parametrize("arch", ["distilbert", "gpt2", "llama"])
def test_every_family_learns_a_separable_task(arch):
    data = toy()
    with HeadFactory(f"tiny:{arch}", device="cpu") as f:
        model = f.new(2, seed=0)
        stats = fine_tune(model, f.tokenizer, data, FAST)
        logits = predict(model, f.tokenizer, data, 32, batch_size=8)
    assert stats.steps == 12 * 3 and stats.examples == 12
    assert stats.losses[-1] < stats.losses[0]
    acc = float((logits.argmax(1) == np.array([e.label for e in data])).mean())
    assert acc == 1.0, (arch, acc, stats.losses[::6])


@pytest.mark.parametrize("arch", ["bert", "roberta", "gpt2", "t5"])
def test_batched_predictions_equal_one_at_a_time(arch):
    data = toy(pair=True)
    with HeadFactory(f"tiny:{arch}", device="cpu") as f:
        model = f.new(3, seed=1)
        batched = predict(model, f.tokenizer, data, 32, batch_size=5)
        single = predict(model, f.tokenizer, data, 32, batch_size=1)
    assert batched.shape == (12, 3)
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_regression_head_and_seeded_heads():
    data = [Example(e.id, e.text, None, float(e.label) * 0.8 + 0.1, e.source) for e in toy()]
    with HeadFactory("tiny:gpt2", device="cpu") as f:
        a, b, c = f.new(1, seed=0), f.new(1, seed=0), f.new(1, seed=1)
        assert a.config.problem_type == "regression"
        same = predict(a, f.tokenizer, data, 32)
        np.testing.assert_array_equal(same, predict(b, f.tokenizer, data, 32))
        assert not np.allclose(same, predict(c, f.tokenizer, data, 32))
        stats = fine_tune(a, f.tokenizer, data, FAST)
        out = predict(a, f.tokenizer, data, 32)[:, 0]
    assert stats.losses[-1] < stats.losses[0]
    assert np.corrcoef(out, [e.label for e in data])[0, 1] > 0.9


def test_loaded_model_is_copied_not_changed():
    from context_cda.models import load_lm

    lm, tok, _ = load_lm("tiny:bert", device="cpu")
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    with HeadFactory(lm, tok, device="cpu") as f:
        tmp = f.path
        model = f.new(2)
        # the body is the loaded model's
        body = model.bert.embeddings.word_embeddings.weight.detach().numpy()
        assert np.array_equal(body, before["bert.embeddings.word_embeddings.weight"].numpy())
        fine_tune(model, f.tokenizer, toy(), HeadConfig(epochs=1, batch_size=4))
    after = lm.state_dict()
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)
    from pathlib import Path

    assert not Path(tmp).exists()  # the temporary copy is removed


def test_text_pairs_use_the_separator_or_a_newline():
    pairs = [Example("a", "first text", "second text", 0, "x:1")]
    with HeadFactory("tiny:bert", device="cpu") as f:
        ids = encode(f.tokenizer, pairs, 32)[0]
        assert ids.count(f.tokenizer.sep_token_id) == 2
    with HeadFactory("tiny:gpt2", device="cpu") as f:
        ids = encode(f.tokenizer, pairs, 32)[0]
        assert ids == f.tokenizer("first text\nsecond text")["input_ids"]
        assert f.tokenizer.pad_token_id is not None  # EOS stands in for the missing padding token


def test_truncation_and_bad_labels():
    long = [Example("l", "word " * 200, None, 0, "x:1")]
    with HeadFactory("tiny:distilbert", device="cpu") as f:
        assert len(encode(f.tokenizer, long, 16)[0]) == 16
        model = f.new(2)
        with pytest.raises(ModelError, match="label out of range"):
            fine_tune(model, f.tokenizer, [Example("b", "text", None, 5, "x:2")], FAST)
        with pytest.raises(ModelError, match="no training examples"):
            fine_tune(model, f.tokenizer, [], FAST)


def test_softmax_rows_sum_to_one():
    p = softmax(np.array([[0.0, 0.0], [1000.0, 0.0]], dtype=np.float32))
    np.testing.assert_allclose(p, [[0.5, 0.5], [1.0, 0.0]], atol=1e-7)


@pytest.mark.parametrize("arch", ["bert", "distilbert", "gpt2", "llama", "t5"])
def test_frozen_body_trains_only_the_head(arch):
    data = toy()
    with HeadFactory(f"tiny:{arch}", device="cpu") as f:
        model = f.new(2, seed=0)
        body = {k: v.clone() for k, v in model.base_model.state_dict().items()}
        head = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith(model.base_model_prefix)}
        assert head, "the head lives outside the body"
        n = freeze_body(model)
        assert 0 < n < sum(p.numel() for p in model.parameters()) / 10
        fine_tune(model, f.tokenizer, data, FAST.model_copy(update={"freeze_body": True, "epochs": 2}))
        after = model.base_model.state_dict()
        assert all(np.array_equal(body[k].numpy(), after[k].numpy()) for k in body)
        state = model.state_dict()
        assert any(not np.array_equal(head[k].numpy(), state[k].numpy()) for k in head)
