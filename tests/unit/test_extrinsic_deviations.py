"""Deviations (evaluate.extrinsic.deviations): which conditions mark a benchmark's numbers, on hand-made infos."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from context_cda.evaluate.extrinsic import deviations as dv


def codes(devs):
    return [d["code"] for d in devs]


def test_chance_accuracy_is_the_majority_rate_plus_two_standard_errors():
    p0, bar = dv.chance_accuracy([0, 0, 0, 1])
    assert p0 == 0.75 and bar == pytest.approx(0.75 + 2 * math.sqrt(0.75 * 0.25 / 4))
    # 56 bios over 28 professions, 2 each: p0 = 2/56; bar = p0 + 2 sqrt(p0 (1 - p0) / 56) = 0.0853...
    labels = [i // 2 for i in range(56)]
    near, detail = dv.near_chance_accuracy(5.4, labels)
    assert near and "5.4%" in detail and "3.6%" in detail and "8.5%" in detail
    assert not dv.near_chance_accuracy(9.0, labels)[0]
    assert dv.near_chance_accuracy(float("nan"), labels)[0]  # no accuracy: nothing was learned


def test_head_deviations():
    info = {"n_train": 32, "n_eval": 48, "train_available": 2490, "eval_available": 277, "dev_holdout": 0.0,
            "freeze_body": True}
    devs = dv.head_deviations("rte", info, ["glue_rte_acc"])
    assert codes(devs) == ["small_sample", "subsample", "linear_probe"]
    assert devs[1]["detail"] == "rte: seeded sample of 32 of 2490 training examples and 48 of 277 dev examples"
    assert all(d["metrics"] == ["glue_rte_acc"] for d in devs)
    held = dv.head_deviations("qnli", {"n_train": 2732, "n_eval": 2731, "train_available": 2732,
                                       "eval_available": 2731, "dev_holdout": 0.5}, ["glue_qnli_acc"])
    assert codes(held) == ["dev_holdout"] and "50% of dev (2732 examples)" in held[0]["detail"]
    full = {"n_train": 67349, "n_eval": 872, "train_available": 67349, "eval_available": 872}
    assert dv.head_deviations("sst2", full, ["glue_sst2_acc"]) == []
    with pytest.raises(ValueError, match="unknown deviation code"):
        dv.deviation("toy", [], "")


def test_benchmark_deviations():
    rows = [{"task": "rte", "label": i % 2} for i in range(300)]
    info = {"tasks": {"rte": {"n_train": 2490, "n_eval": 300, "train_available": 2490, "eval_available": 300}}}
    near = dv.glue(rows, {"by_task": {"rte": {"acc": 52.0}}}, info)  # p0 = .5, bar = .5 + 2 x .0289 = .558
    assert codes(near) == ["near_chance"] and near[0]["metrics"] == ["glue_rte_acc", "glue_avg_acc"]
    assert dv.glue(rows, {"by_task": {"rte": {"acc": 60.0}}}, info) == []
    full = {"n_train": 5749, "n_eval": 1500, "train_available": 5749, "eval_available": 1500}
    sts = dv.stsb({"overall": {"pearson": 20.0, "dev_count": 48}}, full, 96, 16980)
    assert codes(sts) == ["small_sample", "subsample", "near_chance"]  # r = .2 < 2 / sqrt(47) = .292
    assert "r = 0.200" in sts[-1]["detail"] and set(sts[0]["metrics"]) == set(dv.STSB_METRICS)
    assert dv.stsb({"overall": {"pearson": 85.0, "dev_count": 1500}}, full, 16980, 16980) == []
    nli_info = {**full, "train_set": "mnli", "train_source": "x/train.tsv"}
    nli_rows = [{"kind": "dev", "label": i % 3} for i in range(300)]
    nli = dv.nli_bias(nli_rows, {"overall": {"count": 20000, "dev_acc": 80.0}}, nli_info, 1_936_512)
    assert codes(nli) == ["subsample", "other_train_set"]
    assert "the head trained on 5749 pairs of MNLI (x/train.tsv), not on SNLI" in nli[-1]["detail"]
    # a local folder (the demo's hand-written pairs) is named as what it is, with its README's words
    local = {**nli_info, "n_train": 150, "train_path": "configs/data/nli-demo", "train_note": "Hand-written pairs"}
    text = dv.nli_bias(nli_rows, {"overall": {"count": 20000, "dev_acc": 80.0}}, local, 1_936_512)[-1]["detail"]
    assert "150 MNLI-format pairs from the local folder configs/data/nli-demo" in text and "Hand-written pairs" in text
    snli_local = {**local, "train_set": "snli"}  # even in SNLI's format, a local folder is not SNLI
    assert "other_train_set" in codes(dv.nli_bias(nli_rows, {"overall": {"count": 20000, "dev_acc": 80.0}},
                                                  snli_local, 1_936_512))
    cfg = SimpleNamespace(max_items=120)
    assert codes(dv.next_token({"overall": {"count": 120}}, cfg)) == ["subsample"]
    assert dv.next_token({"overall": {"count": 255}}, SimpleNamespace(max_items=None)) == []
