"""Debias fine-tuning on tiny models of every family: objectives, token budget, steps, kill-and-resume."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from context_cda.config import Config, TrainConfig  # noqa: E402
from context_cda.train.corpus import apply_token_budget, load_arm_rows, tokenize_texts  # noqa: E402
from context_cda.train.objectives import Objective, random_spans_noise_mask, sentinel_ids  # noqa: E402

FAMILIES = {"bert": "masked", "distilbert": "masked", "gpt2": "causal", "llama": "causal", "t5": "seq2seq"}
SENTENCES = [
    "The doctor said that he would help the nurse with her work.",
    "She went to the city because her brother was tired.",
    "His father wrote a letter to the teacher and the manager.",
    "The queen asked the engineer about the company.",
    "My uncle and my aunt saw the children at the house.",
    "The actress thought that the secretary was there.",
    "He gave the book to his nephew and his niece.",
    "The woman told the team that she was tired.",
]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def load_tiny(arch: str):
    from transformers import AutoConfig, AutoTokenizer

    from context_cda.models import auto_class_for, family_of_config, resolve_pretrained

    path = resolve_pretrained(f"tiny:{arch}")
    fam = family_of_config(AutoConfig.from_pretrained(path))
    return auto_class_for(fam).from_pretrained(path), AutoTokenizer.from_pretrained(path), fam, path


# ---------------------------------------------------------------------------------------------------- objectives


def test_span_corruption_input_and_target_reconstruct_the_text():
    _, tok, fam, _ = load_tiny("t5")
    assert fam == "seq2seq"
    sent = sentinel_ids(tok)
    assert len(sent) >= 2 and tok.convert_ids_to_tokens(sent[:2]) == ["<extra_id_0>", "<extra_id_1>"]
    ex = tokenize_texts(tok, SENTENCES[:2], 64, fam)
    batch = Objective(fam, tok, noise_density=0.3, mean_span_length=2).collate(ex, np.random.default_rng(0))
    for i, e in enumerate(ex):
        inp = [t for t in batch["input_ids"][i].tolist() if t != tok.pad_token_id]
        tgt = [t for t in batch["labels"][i].tolist() if t != -100]
        assert inp[-1] == tok.eos_token_id and tgt[-1] == tok.eos_token_id
        # put the hidden spans back where their sentinels are
        spans, cur = {}, None
        for t in tgt[:-1]:
            if t in sent:
                cur = t
                spans[cur] = []
            else:
                spans[cur].append(t)
        rebuilt = [x for t in inp[:-1] for x in (spans[t] if t in sent else [t])]
        assert rebuilt == [t for t in e["input_ids"] if t != tok.eos_token_id]
        assert any(t in sent for t in inp)


def test_noise_mask_density_and_spans():
    rng = np.random.default_rng(1)
    m = random_spans_noise_mask(100, 0.15, 3.0, rng)
    assert m.sum() == 15 and 0 < m.sum() < 100
    assert random_spans_noise_mask(1, 0.15, 3.0, rng).sum() == 0


def test_whole_word_masking_masks_all_pieces_of_a_word():
    _, tok, fam, _ = load_tiny("bert")
    ex = tokenize_texts(tok, ["grandmother grandfather gentleman actress niece nephew"] * 4, 64, fam)
    assert "word_ids" in ex[0]
    obj = Objective(fam, tok, mlm_probability=0.5, whole_word_mask=True)
    batch = obj.collate(ex, np.random.default_rng(3))
    for i, e in enumerate(ex):
        words = np.asarray(e["word_ids"])
        chosen = batch["labels"][i].numpy()[: len(words)] != -100
        for w in set(words[chosen].tolist()):
            assert chosen[words == w].all(), "a word was only partly masked"
        assert chosen.any()
        assert not chosen[words < 0].any(), "special tokens must never be masked"


def test_causal_labels_ignore_padding_and_end_with_eos():
    _, tok, fam, _ = load_tiny("gpt2")
    ex = tokenize_texts(tok, ["He said.", SENTENCES[0]], 64, fam)
    assert all(e["input_ids"][-1] == tok.eos_token_id for e in ex)
    batch = Objective(fam, tok).collate(ex, np.random.default_rng(0))
    assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()


# ---------------------------------------------------------------------------------------------------- corpora, budget


def test_arm_corpora_and_equal_token_budget(tmp_path):
    pd.DataFrame(
        {"original": ["he ran home .", "the sky is blue ."], "counterfactual": ["she ran home .", "the sky is blue ."]}
    ).to_parquet(tmp_path / "cda.parquet")
    two = load_arm_rows("cda", tmp_path / "cda.parquet", "two-sided")
    assert two["text"].tolist() == ["he ran home .", "the sky is blue .", "she ran home ."]
    assert two["side"].tolist() == ["original", "original", "counterfactual"]
    assert two["id"].iloc[0] == two["id"].iloc[2]  # a counterfactual keeps its row's id
    one = load_arm_rows("cda", tmp_path / "cda.parquet", "one-sided")
    assert one["text"].tolist() == ["she ran home .", "the sky is blue ."]
    pd.DataFrame({"id": ["a1", "a2"], "augmented": ["a b c", " "]}).to_parquet(tmp_path / "aug.parquet")
    rows = load_arm_rows("corpus", tmp_path / "aug.parquet")
    assert rows["text"].tolist() == ["a b c"] and rows["id"].tolist() == ["a1"]

    _, tok, fam, _ = load_tiny("gpt2")
    ex = tokenize_texts(tok, SENTENCES, 32, fam)
    kept, n = apply_token_budget(ex, 50, seed=13)
    assert n == 50 == sum(len(e["input_ids"]) for e in kept)
    again, _ = apply_token_budget(ex, 50, seed=13)
    assert again == kept  # same seed, same selection


def test_the_neutral_arms_share_a_budget_apart_from_the_swapping_arms(tmp_path):
    """A neutral table of one short row (the demo's review accepted 3 of 48) must not cut CDA, Context-CDA and
    dropout down to its size: each budget group takes the smallest corpus of its own arms."""
    from context_cda.train import shared_token_budget
    from context_cda.train.corpus import arm_token_count

    pd.DataFrame({"id": [f"r{i}" for i in range(len(SENTENCES))], "original": SENTENCES,
                  "counterfactual": [f"{s} Indeed." for s in SENTENCES]}).to_parquet(tmp_path / "cda.parquet")
    pd.DataFrame({"id": ["n1"], "augmented": ["They ran home."]}).to_parquet(tmp_path / "neutral.parquet")
    inputs = {"cda": tmp_path / "cda.parquet", "neutral": tmp_path / "neutral.parquet"}
    cfg = Config.model_validate({"run": {"targets": {"t": "tiny:gpt2"}},
                                 "train": {"arms": ["cda", "dropout", "context-neutral"]}})
    _, tok, fam, _ = load_tiny("gpt2")
    count = {kind: arm_token_count(cfg, kind, path, tok, fam)
             for kind, path in (("cda", inputs["cda"]), ("original", inputs["cda"]), ("corpus", inputs["neutral"]))}
    assert count["corpus"] < count["original"] < count["cda"]
    assert shared_token_budget(cfg, inputs, tok, fam, "cda") == count["original"]  # dropout's originals
    assert shared_token_budget(cfg, inputs, tok, fam, "dropout") == count["original"]
    assert shared_token_budget(cfg, inputs, tok, fam, "context-neutral") == count["corpus"]
    assert shared_token_budget(cfg, inputs, tok, fam) == count["corpus"]  # no arm: every trained arm


def test_a_dose_arm_trains_on_its_own_budget_which_its_corpus_must_hold(tmp_path):
    """cda-<N>k is the CDA corpus cut to its dose: its budget step writes the dose (not the swapping group's smallest
    corpus, which it leaves alone), its fine-tuning trains on exactly that many tokens, and a dose larger than the
    corpus stops with the fix instead of training on fewer tokens than the arm's name says."""
    from context_cda.errors import InputError
    from context_cda.io import read_json
    from context_cda.train import run_budget, run_finetune, shared_token_budget
    from context_cda.train.finetune import arm_token_count

    pd.DataFrame({"id": [f"r{i}" for i in range(len(SENTENCES))], "original": SENTENCES,
                  "counterfactual": [f"{s} Indeed." for s in SENTENCES]}).to_parquet(tmp_path / "cda.parquet")
    inputs = {"cda": tmp_path / "cda.parquet"}
    cfg = Config.model_validate({"run": {"targets": {"t": "tiny:gpt2"}},
                                 "train": {"arms": ["cda", "dropout", "cda-0.05k", "cda-0.15k"], "epochs": 1,
                                           "batch_size": 4, "max_seq_len": 32}})
    _, tok, fam, _ = load_tiny("gpt2")
    originals = arm_token_count(cfg, "original", inputs["cda"], tok, fam)
    assert originals < 150 < arm_token_count(cfg, "cda", inputs["cda"], tok, fam)
    assert shared_token_budget(cfg, inputs, tok, fam, "cda") == originals  # dropout's originals: the doses not in it
    summary = run_budget(cfg, inputs, tmp_path / "budget", "t", "cda-0.15k")
    assert read_json(tmp_path / "budget" / "budget.json") == {"token_budget": 150}
    assert summary["arms"] == ["cda-0.15k"] and summary["source"].startswith("the arm's dose")
    assert run_budget(cfg, inputs, tmp_path / "b2", "t", "cda")["token_budget"] == originals
    res = run_finetune(cfg, inputs, tmp_path / "ft", "t", "cda-0.05k", evaluate=False)
    assert res["tokens"] == res["token_budget"] == 50
    big = cfg.model_copy(deep=True)
    big.train.arms = ["cda", "cda-1M"]
    with pytest.raises(InputError, match=r"cda-1M: the dose asks for 1,000,000 tokens, but its corpus holds only"):
        run_budget(big, inputs, tmp_path / "b3", "t", "cda-1M")
    with pytest.raises(InputError, match="use a smaller dose"):
        run_finetune(big, inputs, tmp_path / "ft2", "t", "cda-1M", evaluate=False)


# ---------------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_two_steps_change_every_parameter_and_lower_the_loss(arch, tmp_path):
    from context_cda.train.loop import train

    model, tok, fam, _ = load_tiny(arch)
    assert fam == FAMILIES[arch]
    examples = tokenize_texts(tok, [SENTENCES[0]] * 4, 32, fam)  # one repeated batch
    obj = Objective(fam, tok)
    probe = obj.collate(examples, np.random.default_rng(0))

    def loss_now() -> float:
        model.eval()
        with torch.no_grad():
            return float(model(**probe).loss)

    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    loss0 = loss_now()
    tcfg = TrainConfig(epochs=2, batch_size=4, learning_rate=3e-3, max_steps=2)
    res = train(model, tok, examples, tcfg, tmp_path, family=fam, seed=0, device="cpu")
    assert res.global_step == 2
    unchanged = [n for n, p in res.model.named_parameters() if p.requires_grad and torch.equal(p, before[n])]
    assert not unchanged, f"parameters not updated: {unchanged}"
    assert loss_now() < loss0
    assert (tmp_path / "checkpoints" / "epoch-2" / "state.json").is_file()


def _run_cfg(tmp_path: Path, **train) -> Config:
    return Config.model_validate(
        {
            "run": {"run_dir": str(tmp_path / "run"), "targets": {"tg": "tiny:gpt2"}, "device": "cpu", "seed": 7},
            "train": {"epochs": 3, "batch_size": 2, "grad_accum": 2, "learning_rate": 1e-3, **train},
            "tracking": {"enabled": False},
        }
    )


def fake_eval(model, tokenizer, eval_config):
    """Deterministic metrics that also draw from every RNG (evaluation must not shift training's streams)."""
    torch.rand(3), np.random.rand(3), random.random()
    w = next(model.parameters()).detach().double().sum().item()
    return {"stereoset_ss": 50 + (w % 1.0), "stereoset_lms": 90.0, "stereoset_icat": 80.0, "crows_cs": 55.0}


class Killed(Exception):
    pass


def _kill_in_epoch_3(epoch: int, step: int) -> None:
    if epoch == 3:  # inside epoch 3, after the epoch-2 checkpoint
        raise Killed


_KILL_SCRIPT = """
import json, os, signal, sys
sys.path.insert(0, {tests!r})
from context_cda.config import Config
from context_cda.train import run_finetune
from test_train import fake_eval
cfg = Config.model_validate(json.loads({cfg!r}))
def on_step(epoch, step):
    if epoch == 3:
        os.kill(os.getpid(), signal.SIGKILL)
run_finetune(cfg, {{"corpus": {corpus!r}}}, {out!r}, "tg", "context-cda", token_budget=150,
             evaluate_fn=fake_eval, on_step=on_step)
"""


def _sigkill_in_epoch_3(cfg, corpus: Path, out: Path) -> None:
    script = _KILL_SCRIPT.format(
        tests=str(Path(__file__).parent), cfg=json.dumps(cfg.to_dict()), corpus=str(corpus), out=str(out)
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-3000:]


def _interrupt_in_epoch_3(cfg, corpus: Path, out: Path) -> None:
    from context_cda.train import run_finetune

    with pytest.raises(Killed):
        run_finetune(cfg, {"corpus": corpus}, out, "tg", "context-cda", token_budget=150, evaluate_fn=fake_eval,
                     on_step=_kill_in_epoch_3)


@pytest.mark.parametrize(
    "kill",
    [
        pytest.param(_interrupt_in_epoch_3, id="interrupted"),
        pytest.param(_sigkill_in_epoch_3, id="sigkill", marks=pytest.mark.slow),
    ],
)
def test_kill_and_resume_gives_the_same_weights(tmp_path, kill):
    from safetensors.torch import load_file

    from context_cda.train import run_finetune

    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": SENTENCES * 2}).to_parquet(corpus)
    cfg = _run_cfg(tmp_path)
    common = dict(token_budget=150, evaluate_fn=fake_eval)

    ref = run_finetune(cfg, {"corpus": corpus}, tmp_path / "a", "tg", "context-cda", **common)
    assert ref["steps"] >= 6 and ref["resumed_from_epoch"] is None and ref["tokens"] == 150

    out = tmp_path / "b"
    kill(cfg, corpus, out)  # a fresh model object is loaded below, as after a real restart
    assert (out / "checkpoints" / "epoch-2" / "state.json").is_file()
    assert not (out / "checkpoints" / "epoch-3").exists() and not (out / "final").exists()

    from tests.helpers.envelope import enveloped

    res = enveloped(cfg, "finetune", run_finetune, {"corpus": corpus}, out,  # as every door: with its manifest
                    {"target": "tg", "arm": "context-cda", "seed": 13}, target="tg", arm="context-cda", **common)
    assert res["resumed_from_epoch"] == 2 and res["steps"] == ref["steps"]
    a = load_file(tmp_path / "a" / "final" / "model.safetensors")
    b = load_file(out / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ from the uninterrupted run"
    ma, mb = pd.read_csv(tmp_path / "a" / "metrics.csv"), pd.read_csv(out / "metrics.csv")
    assert list(ma["epoch"]) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(ma, mb)
    assert (out / "final" / "tokenizer_config.json").is_file()
    assert json.loads((out / "manifest.json").read_text())["summary"]["tokens"] == 150


def test_lora_trains_adapters_and_saves_a_merged_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from context_cda.train import run_finetune

    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": SENTENCES}).to_parquet(corpus)
    cfg = _run_cfg(tmp_path, epochs=1, lora={"enabled": True, "r": 4, "alpha": 8})
    res = run_finetune(cfg, {"corpus": corpus}, tmp_path / "l", "tg", "context-cda", token_budget=200, evaluate=False)
    assert res["steps"] >= 1
    assert (tmp_path / "l" / "adapter" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "l" / "final")
    assert not any("lora" in n for n, _ in merged.named_parameters())


def test_checkpoints_of_other_data_are_not_resumed(tmp_path):
    from context_cda.train.loop import data_fingerprint, train

    model, tok, fam, _ = load_tiny("gpt2")
    tcfg = TrainConfig(epochs=1, batch_size=4)
    ex = tokenize_texts(tok, SENTENCES, 32, fam)
    fp = data_fingerprint(ex, tcfg, 0, fam)
    train(model, tok, ex, tcfg, tmp_path, family=fam, seed=0, device="cpu", fingerprint=fp)
    same = train(model, tok, ex, tcfg, tmp_path, family=fam, seed=0, device="cpu", fingerprint=fp)
    assert same.resumed_from == 1 and same.losses == []  # finished: nothing redone
    other = ex[:4]
    fp2 = data_fingerprint(other, tcfg, 0, fam)
    assert fp2 != fp and data_fingerprint(ex, tcfg.model_copy(update={"eval_every": 3}), 0, fam) == fp
    fresh = train(model, tok, other, tcfg, tmp_path, family=fam, seed=0, device="cpu", fingerprint=fp2)
    assert fresh.resumed_from is None and fresh.global_step == 1
