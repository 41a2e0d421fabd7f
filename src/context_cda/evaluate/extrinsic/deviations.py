"""Deviations: the conditions under which a benchmark's numbers are not the published protocol's, one
machine-readable list per benchmark (``deviations`` in its ``aggregate.json``), so the report and the docs mark
every number computed under one (pure functions; no model code).

Each deviation is ``{"code", "metrics", "detail"}``: ``metrics`` are the flat metric names it affects. Codes:

* ``dev_holdout`` — a task without a train file trained its head on part of its dev set and scored the rest.
* ``small_sample`` — a set too small for the number to mean much: fewer than :data:`SMALL_TRAIN` training examples,
  :data:`SMALL_EVAL` scored examples, or :data:`SMALL_PROBES` bias probes (an accuracy on 200 items has a
  binomial standard error of up to 3.5 points).
* ``subsample`` — a seeded sample of a larger set was scored or trained on (the published numbers use all of it).
* ``near_chance`` — the head did not learn its task: accuracy within 2 binomial standard errors of always
  predicting the most frequent class (``p0 + 2 sqrt(p0 (1 - p0) / n)``), or an STS-B dev Pearson r below
  ``2 / sqrt(n - 1)`` (about 2 standard errors of r = 0). Its bias numbers then say nothing about the model: a
  classifier that predicts one profession has a TPR gap of 0.
* ``linear_probe`` — only a new head was trained on the frozen checkpoint (``evaluate.head.freeze_body``); the
  papers fine-tune every weight.
* ``other_train_set`` — the NLI head was not trained on SNLI, Dev et al.'s training set.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ...config import EvaluateConfig

SMALL_TRAIN = 1000
SMALL_EVAL = 200
SMALL_PROBES = 1000
CODES = ("dev_holdout", "small_sample", "subsample", "near_chance", "linear_probe", "other_train_set")


def deviation(code: str, metrics: Sequence[str], detail: str) -> dict[str, Any]:
    if code not in CODES:
        raise ValueError(f"unknown deviation code {code!r}; known: {', '.join(CODES)}")
    return {"code": code, "metrics": list(metrics), "detail": detail}


def chance_accuracy(labels: Sequence[Any]) -> tuple[float, float]:
    """(p0, bar): the accuracy of always predicting the most frequent label, and p0 + 2 binomial SEs."""
    n = len(labels)
    if n == 0:
        return math.nan, math.nan
    p0 = Counter(labels).most_common(1)[0][1] / n
    return p0, p0 + 2.0 * math.sqrt(p0 * (1.0 - p0) / n)


def near_chance_accuracy(acc_pct: float, labels: Sequence[Any]) -> tuple[bool, str]:
    """Whether an accuracy (%) is within 2 SEs of the majority-class rate of ``labels``, and a detail text."""
    p0, bar = chance_accuracy(labels)
    near = not (acc_pct == acc_pct) or acc_pct / 100.0 <= bar
    return near, (f"accuracy {acc_pct:.1f}% vs {100 * p0:.1f}% for always predicting the most frequent class "
                  f"(n = {len(labels)}; above {100 * bar:.1f}% would be 2 standard errors clear of it)")


def head_deviations(task: str, info: Mapping[str, Any], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """What the head's training info says (:func:`~.benchmarks.fit_and_predict`): hold-out, sizes, samples, probe."""
    out = []
    n_train, n_eval = int(info.get("n_train", 0)), int(info.get("n_eval", 0))
    if float(info.get("dev_holdout") or 0.0) > 0:
        out.append(deviation("dev_holdout", metrics, f"{task}: no train file; the head trained on "
                             f"{float(info['dev_holdout']):.0%} of dev ({n_train} examples) and scored the other "
                             f"{n_eval}"))
    small = [f"{n_train} training examples"] * (n_train < SMALL_TRAIN) + [f"{n_eval} scored"] * (n_eval < SMALL_EVAL)
    if small:
        out.append(deviation("small_sample", metrics, f"{task}: {' and '.join(small)} (small: < {SMALL_TRAIN} "
                             f"to train, < {SMALL_EVAL} to score)"))
    sampled = [f"{n} of {avail} {what}" for n, avail, what in
               ((n_train, int(info.get("train_available") or 0), "training examples"),
                (n_eval, int(info.get("eval_available") or 0), "dev examples")) if 0 < n < avail]
    if sampled:
        out.append(deviation("subsample", metrics, f"{task}: seeded sample of {' and '.join(sampled)}"))
    if info.get("freeze_body"):
        out.append(deviation("linear_probe", metrics, f"{task}: only the head was trained on the frozen model "
                             "(evaluate.head.freeze_body)"))
    return out


def probe_deviations(bench: str, n: int, total: int, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Bias probes (STS-B pairs, NLI-Bias pairs): ``n`` scored of ``total``."""
    out = []
    if n < SMALL_PROBES:
        out.append(deviation("small_sample", metrics, f"{bench}: {n} bias probes (small: < {SMALL_PROBES})"))
    if 0 < n < total:
        out.append(deviation("subsample", metrics, f"{bench}: seeded sample of {n} of {total} bias probes"))
    return out


def glue(rows: Sequence[Mapping[str, Any]], agg: Mapping[str, Any], info: Mapping[str, Any]) -> list[dict]:
    out: list[dict[str, Any]] = []
    for task, tinfo in (info.get("tasks") or {}).items():
        metrics = [f"glue_{task}_acc", "glue_avg_acc"]
        out += head_deviations(task, tinfo, metrics)
        labels = [r["label"] for r in rows if r["task"] == task]
        near, detail = near_chance_accuracy(agg["by_task"].get(task, {}).get("acc", math.nan), labels)
        if near:
            out.append(deviation("near_chance", metrics, f"{task}: {detail}"))
    return out


def biasbios(rows: Sequence[Mapping[str, Any]], agg: Mapping[str, Any], info: Mapping[str, Any]) -> list[dict]:
    metrics = ["biasbios_acc", "biasbios_tpr_gap_rms"]
    out = head_deviations("biasbios", info, metrics)
    near, detail = near_chance_accuracy(agg["overall"]["acc"], [r["label"] for r in rows])
    if near:
        out.append(deviation("near_chance", metrics, f"biasbios: {detail}; a TPR gap of a classifier that has "
                             "not learned the task says nothing about gender"))
    return out


STSB_METRICS = ("stsb_diff", "stsb_gt_0_1", "stsb_gt_0_3", "stsb_gt_0_5", "stsb_gt_0_7", "stsb_male_higher",
                "stsb_pearson")
NLI_METRICS = ("nli_bias_net_neutral", "nli_bias_fraction_neutral", "nli_bias_tau_0_5", "nli_bias_nn_gap",
               "nli_bias_dev_acc")


def stsb(agg: Mapping[str, Any], info: Mapping[str, Any], n_pairs: int, total_pairs: int) -> list[dict]:
    out = head_deviations("stsb", info, STSB_METRICS)
    out += probe_deviations("stsb", n_pairs, total_pairs, STSB_METRICS)
    r, n = agg["overall"].get("pearson", math.nan), int(agg["overall"].get("dev_count", 0))
    bar = 2.0 / math.sqrt(n - 1) if n > 1 else math.inf
    if not (r == r) or r / 100.0 < bar:
        out.append(deviation("near_chance", STSB_METRICS, f"stsb: dev Pearson r = {r / 100.0:.3f} (n = {n}); "
                             f"below {bar:.3f}, about 2 standard errors of r = 0"))
    return out


def nli_bias(rows: Sequence[Mapping[str, Any]], agg: Mapping[str, Any], info: Mapping[str, Any],
             total_pairs: int) -> list[dict]:
    out = head_deviations(str(info.get("train_set", "nli")), info, NLI_METRICS)
    out += probe_deviations("nli-bias", int(agg["overall"].get("count", 0)), total_pairs, NLI_METRICS)
    if info.get("train_set") != "snli" or info.get("train_path"):
        out.append(deviation("other_train_set", NLI_METRICS, f"nli-bias: the head trained on {nli_train_text(info)}, "
                             "not on SNLI as Dev et al."))
    near, detail = near_chance_accuracy(agg["overall"].get("dev_acc", math.nan),
                                        [r["label"] for r in rows if r["kind"] == "dev"])
    if near:
        out.append(deviation("near_chance", NLI_METRICS, f"nli-bias: {detail}"))
    return out


def nli_train_text(info: Mapping[str, Any]) -> str:
    """What the NLI head was trained on, in words: a local folder's pairs (with its README's description) or the
    named set (MNLI, SNLI) with its source."""
    n, fmt = info.get("n_train"), str(info.get("train_set", "nli")).upper()
    size = f"{n} " if isinstance(n, int) else ""
    if info.get("train_path"):
        note = f": {info['train_note']}" if info.get("train_note") else ""
        return (f"{size}{fmt}-format pairs from the local folder {info['train_path']} "
                f"(evaluate.nli_bias.train_path{note})")
    return f"{size}pairs of {fmt} ({info.get('train_source')})"


def next_token(agg: Mapping[str, Any], cfg: EvaluateConfig | None) -> list[dict]:
    """Contexts cut by ``evaluate.max_items`` (a prefix of StereoSet's gender contexts)."""
    metrics = ["next_token_imbalance", "next_token_male_share", "next_token_male_share_std", "next_token_male_mass"]
    n = int(agg["overall"]["count"])
    if cfg is not None and cfg.max_items is not None and n >= cfg.max_items:
        return [deviation("subsample", metrics, f"next-token: the first {n} contexts only (evaluate.max_items)")]
    return []
