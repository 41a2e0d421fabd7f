"""The extrinsic benchmarks as registry entries: ``load`` (data, from ``evaluate.<benchmark>`` settings), ``score``
(fine-tune a head on the checkpoint, predict, one row per item) and ``aggregate`` (pure, from the rows).

* ``glue``: SST-2, RTE, QNLI dev accuracy (%) after fine-tuning on each task's train set.
* ``biasbios``: profession accuracy (%) and the gender gap in true-positive rate per profession, with its root
  mean square over professions (De-Arteaga et al. 2019).
* ``stsb``: a similarity head fine-tuned on STS-B's gold 0-5 scores (the reference scale); the Bias-STS-B pairs
  (the same sentence with "a man" / "a woman" against an occupation sentence): mean |sim(man) - sim(woman)| and
  the shares of pairs above 0.1, 0.3, 0.5 and 0.7 (Webster et al. 2020, the code of Lauscher et al. 2021); STS-B
  dev Pearson/Spearman (x100) as the quality check.
* ``nli-bias``: an NLI head fine-tuned on SNLI (Dev et al.'s training set; MNLI as an option); generated
  occupation/gender-word pairs in the authors' exact strings (Dev et al. 2020): Net Neutral, Fraction Neutral,
  Threshold:tau (P(neutral) > tau, as their code), and the male - female difference of each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import deviations

if TYPE_CHECKING:  # pragma: no cover
    from ...config import EvaluateConfig
    from ...scoring import Scorer
    from .data import Example, TaskData

NLI_LABELS = ("entailment", "neutral", "contradiction")


def _factory(scorer: Scorer):
    """A head factory on the scorer's checkpoint: its model reference when known (no copy), else the loaded model."""
    from .classifier import HeadFactory

    ref = getattr(scorer, "model_ref", None)
    device = str(scorer.device)
    hook = getattr(scorer, "intervention", None)  # a projection arm: every task head reads the projected states
    if ref:
        return HeadFactory(ref, device=device, intervention=hook)
    return HeadFactory(scorer.model, scorer.tokenizer, device=device, intervention=hook)


def fit_and_predict(
    factory, task: TaskData, cfg: EvaluateConfig, extra: Sequence[Example] = (), progress: bool = False
) -> tuple[Any, Any, dict[str, Any]]:
    """Fine-tune a fresh head on ``task.train``; logits for ``task.eval`` and for ``extra`` (e.g. bias probes)."""
    from .classifier import fine_tune, predict

    hcfg = cfg.head
    model = factory.new(1 if task.is_regression else len(task.labels), seed=hcfg.seed)
    tok = factory.tokenizer
    try:
        stats = fine_tune(model, tok, task.train, hcfg, desc=f"{task.name}: fine-tune", progress=progress)
        eval_logits = predict(model, tok, task.eval, hcfg.max_seq_len, cfg.batch_size,
                              desc=f"{task.name}: dev", progress=progress)
        extra_logits = (
            predict(model, tok, list(extra), hcfg.max_seq_len, cfg.batch_size, desc=f"{task.name}: probes",
                    progress=progress)
            if extra else None
        )
    finally:
        del model
    info = {
        "train_source": task.train_source,
        "eval_source": task.eval_source,
        "n_train": len(task.train),
        "n_eval": len(task.eval),
        "train_available": task.train_available,
        "eval_available": task.eval_available,
        "dev_holdout": task.dev_holdout,
        "freeze_body": hcfg.freeze_body,
        "steps": stats.steps,
        "epochs": round(stats.epochs, 3),
        "final_loss": round(stats.final_loss, 5),
        "train_seconds": round(stats.seconds, 2),
    }
    return eval_logits, extra_logits, info


def _pct(x: float) -> float:
    return 100.0 * x if x == x else math.nan


# ------------------------------------------------------------------------------------------------------- GLUE


def load_glue(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[TaskData]:
    from .data import glue_task

    g = cfg.glue
    return [
        glue_task(t, path or g.path, cache, max_train=g.max_train, max_eval=g.max_eval, dev_holdout=g.dev_holdout,
                  seed=cfg.head.seed)
        for t in g.tasks
    ]


def score_glue(scorer: Scorer, tasks: Sequence[TaskData], cfg: EvaluateConfig):
    rows, info = [], {}
    with _factory(scorer) as factory:
        for task in tasks:
            logits, _, info[task.name] = fit_and_predict(factory, task, cfg, progress=scorer.progress)
            preds = logits.argmax(axis=1)
            for ex, p in zip(task.eval, preds, strict=True):
                rows.append({"task": task.name, "id": ex.id, "label": int(ex.label), "pred": int(p),
                             "correct": bool(int(p) == int(ex.label)), "source": ex.source})
    out = {"tasks": info}
    out["deviations"] = deviations.glue(rows, aggregate_glue(rows, cfg), out)
    return rows, [], out


def aggregate_glue(rows: list[dict], cfg: EvaluateConfig | None = None) -> dict[str, Any]:
    from .metrics import accuracy

    by_task: dict[str, dict[str, Any]] = {}
    for task in sorted({r["task"] for r in rows}):
        rs = [r for r in rows if r["task"] == task]
        by_task[task] = {"acc": _pct(accuracy([r["pred"] for r in rs], [r["label"] for r in rs])), "count": len(rs)}
    overall: dict[str, Any] = {f"{t}_acc": v["acc"] for t, v in by_task.items()}
    overall["avg_acc"] = sum(v["acc"] for v in by_task.values()) / len(by_task) if by_task else math.nan
    overall["count"] = len(rows)
    return {"overall": overall, "by_task": by_task}


# ------------------------------------------------------------------------------------------------- Bias in Bios


def load_biasbios(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[TaskData]:
    from .data import load_biasbios as load

    b = cfg.biasbios
    return [load(path or b.path, cache, max_train=b.max_train, max_eval=b.max_eval, test_fraction=b.test_fraction,
                 seed=cfg.head.seed, dataset=b.dataset)]


def score_biasbios(scorer: Scorer, tasks: Sequence[TaskData], cfg: EvaluateConfig):
    (task,) = tasks
    with _factory(scorer) as factory:
        logits, _, info = fit_and_predict(factory, task, cfg, progress=scorer.progress)
    rows = []
    for ex, p in zip(task.eval, logits.argmax(axis=1), strict=True):
        rows.append({"id": ex.id, "profession": task.labels[int(ex.label)], "gender": ex.meta.get("gender"),
                     "label": int(ex.label), "pred": int(p), "pred_profession": task.labels[int(p)],
                     "correct": bool(int(p) == int(ex.label)), "source": ex.source})
    info["deviations"] = deviations.biasbios(rows, aggregate_biasbios(rows, cfg), info)
    return rows, [], info


def aggregate_biasbios(rows: list[dict], cfg: EvaluateConfig | None = None) -> dict[str, Any]:
    from .metrics import tpr_gap

    professions = sorted({r["profession"] for r in rows} | {r["pred_profession"] for r in rows})
    index = {p: i for i, p in enumerate(professions)}
    gaps = tpr_gap(
        [index[r["pred_profession"]] for r in rows],
        [index[r["profession"]] for r in rows],
        [r["gender"] for r in rows],
        professions,
    )
    overall = {"acc": _pct(gaps["accuracy"]), "tpr_gap_rms": gaps["rms"], "count": len(rows),
               "professions_used": gaps["n_professions_used"]}
    return {"overall": overall, "by_profession": gaps["per_profession"], "skipped": gaps["skipped"]}


# ------------------------------------------------------------------------------------------------------ STS-B


def load_stsb(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[tuple[TaskData, list, int]]:
    """[(STS-B task, the Bias-STS-B pairs to score, how many the file holds)]."""
    from .data import glue_task, load_sts_bias_pairs, sample_examples

    s = cfg.stsb
    task = glue_task("stsb", s.path, cache, max_train=s.max_train, max_eval=s.max_eval, seed=cfg.head.seed)
    every = load_sts_bias_pairs(path or s.bias_path, cache)
    pairs = sample_examples(every, s.max_pairs, cfg.head.seed, ident=lambda x: x.id)  # as max_pairs= samples
    return [(task, pairs, len(every))]


def score_stsb(scorer: Scorer, items: Sequence[tuple[TaskData, list, int]], cfg: EvaluateConfig):
    from .data import Example

    ((task, pairs, total),) = items
    probes = []
    for p in pairs:
        probes.append(Example(f"{p.id}-male", p.male, p.occupation_sentence, 0.0, p.source))
        probes.append(Example(f"{p.id}-female", p.female, p.occupation_sentence, 0.0, p.source))
    with _factory(scorer) as factory:
        dev, probe, info = fit_and_predict(factory, task, cfg, extra=probes, progress=scorer.progress)
    rows: list[dict[str, Any]] = [
        {"kind": "dev", "id": ex.id, "label": float(ex.label), "pred": float(v)}
        for ex, v in zip(task.eval, dev[:, 0], strict=True)
    ]
    for k, p in enumerate(pairs):
        m, f = float(probe[2 * k, 0]), float(probe[2 * k + 1, 0])
        rows.append({"kind": "bias", "id": p.id, "occupation": p.occupation, "male": m, "female": f,
                     "diff": m - f, "source": p.source})
    info["deviations"] = deviations.stsb(aggregate_stsb(rows, cfg), info, len(pairs), total)
    return rows, [], info


def aggregate_stsb(rows: list[dict], cfg: EvaluateConfig | None = None) -> dict[str, Any]:
    """Scores on the STS-B 0-5 scale: ``diff`` = mean |sim(man) - sim(woman)|, ``gt_<t>`` = share of pairs whose
    difference exceeds t (``evaluate.stsb.thresholds``), the signed ``mean_diff``, ``male_higher`` and the dev
    Pearson/Spearman (x100)."""
    from .metrics import STS_THRESHOLDS, pearson, spearman, sts_bias

    thresholds = tuple(cfg.stsb.thresholds) if cfg is not None else STS_THRESHOLDS
    dev = [r for r in rows if r["kind"] == "dev"]
    bias = [r for r in rows if r["kind"] == "bias"]
    sb = sts_bias([r["male"] for r in bias], [r["female"] for r in bias], thresholds) if bias else {}
    preds, golds = [r["pred"] for r in dev], [r["label"] for r in dev]
    overall = {
        "pearson": _pct(pearson(preds, golds)) if len(dev) > 1 else math.nan,
        "spearman": _pct(spearman(preds, golds)) if len(dev) > 1 else math.nan,
        "scale": "0-5",
        "diff": sb.get("mean_abs_diff", math.nan),
        **{"gt_" + _tkey(t): sb.get(f"frac_gt_{t:g}", math.nan) for t in thresholds},
        "mean_diff": sb.get("mean_diff", math.nan),
        "male_mean": sb.get("male_mean", math.nan),
        "female_mean": sb.get("female_mean", math.nan),
        "male_higher": sb.get("frac_male_higher", math.nan),
        "count": len(bias),
        "dev_count": len(dev),
    }
    by_occ: dict[str, dict[str, float]] = {}
    for occ in sorted({r["occupation"] for r in bias}):
        ds = [r["diff"] for r in bias if r["occupation"] == occ]
        by_occ[occ] = {"mean_diff": sum(ds) / len(ds), "mean_abs_diff": sum(abs(d) for d in ds) / len(ds),
                       "count": len(ds)}
    return {"overall": overall, "by_occupation": by_occ}


# --------------------------------------------------------------------------------------------------- NLI-Bias


def load_nli_bias(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[tuple[TaskData, list, int]]:
    """[(NLI training task, the probe pairs to score, the size of the whole probe space)]."""
    from .data import nli_train_task
    from .nli_templates import generate_nli_bias, load_nli_word_lists, nli_bias_space_size

    n = cfg.nli_bias
    task = nli_train_task(n.train_set, n.train_path, cache, max_train=n.max_train, max_eval=n.max_eval,
                          seed=cfg.head.seed)
    if tuple(task.labels) != NLI_LABELS:
        raise ValueError(f"{task.name} labels {task.labels} != {NLI_LABELS}")  # pragma: no cover - loader contract
    words = load_nli_word_lists(path or n.words_path, cache)
    pairs = generate_nli_bias(words, max_pairs=n.max_pairs, seed=cfg.head.seed, premise=n.premise, mode=n.mode)
    return [(task, pairs, nli_bias_space_size(words))]


def score_nli_bias(scorer: Scorer, items: Sequence[tuple[TaskData, list, int]], cfg: EvaluateConfig):
    from .classifier import softmax
    from .data import Example, folder_note

    ((task, pairs, total),) = items
    probes = [Example(p.id, p.premise, p.hypothesis, 0, p.template) for p in pairs]
    with _factory(scorer) as factory:
        dev, probe, info = fit_and_predict(factory, task, cfg, extra=probes, progress=scorer.progress)
    rows: list[dict[str, Any]] = [
        {"kind": "dev", "id": ex.id, "label": int(ex.label), "pred": int(p)}
        for ex, p in zip(task.eval, dev.argmax(axis=1), strict=True)
    ]
    probs = softmax(probe)
    for p, pr in zip(pairs, probs, strict=True):
        rows.append({"kind": "bias", "id": p.id, "premise": p.premise, "hypothesis": p.hypothesis,
                     "occupation": p.occupation, "gender_word": p.gender_word, "gender": p.gender,
                     "p_entailment": float(pr[0]), "p_neutral": float(pr[1]), "p_contradiction": float(pr[2])})
    info.update({"thresholds": list(cfg.nli_bias.thresholds), "train_set": task.name, "mode": cfg.nli_bias.mode,
                 "premise": cfg.nli_bias.premise, "train_path": cfg.nli_bias.train_path,
                 "train_note": folder_note(cfg.nli_bias.train_path)})
    info["deviations"] = deviations.nli_bias(rows, aggregate_nli_bias(rows, cfg), info, total)
    return rows, [], info


def aggregate_nli_bias(rows: list[dict], cfg: EvaluateConfig | None = None) -> dict[str, Any]:
    import numpy as np

    from .metrics import accuracy, nli_bias

    thresholds = tuple(cfg.nli_bias.thresholds) if cfg is not None else (0.5, 0.7)
    strict = cfg is None or cfg.nli_bias.mode == "reference"

    dev = [r for r in rows if r["kind"] == "dev"]
    bias = [r for r in rows if r["kind"] == "bias"]
    overall: dict[str, Any] = {
        "dev_acc": _pct(accuracy([r["pred"] for r in dev], [r["label"] for r in dev])) if dev else math.nan,
        "count": len(bias),
        "threshold_rule": "P(neutral) > tau" if strict else "P(neutral) >= tau",
    }
    detail: dict[str, Any] = {}
    if bias:
        probs = np.array([[r["p_entailment"], r["p_neutral"], r["p_contradiction"]] for r in bias])
        detail = nli_bias(probs, [r["gender"] for r in bias], neutral_index=1, thresholds=thresholds, strict=strict)
        ov = detail["overall"]
        overall.update({
            "net_neutral": ov["net_neutral"],
            "fraction_neutral": ov["fraction_neutral"],
            **{"tau_" + _tkey(t): ov[f"threshold_{t:g}"] for t in thresholds},
            "nn_gap": detail["difference"]["net_neutral"],
            "fn_gap": detail["difference"]["fraction_neutral"],
        })
    return {"overall": overall, **{k: v for k, v in detail.items() if k != "overall"}}


def _tkey(t: float) -> str:
    """0.5 -> "0_5" (a threshold in a metric key)."""
    return f"{t:g}".replace(".", "_")


__all__ = [
    "aggregate_biasbios", "aggregate_glue", "aggregate_nli_bias", "aggregate_stsb", "fit_and_predict",
    "load_biasbios", "load_glue", "load_nli_bias", "load_stsb", "score_biasbios", "score_glue", "score_nli_bias",
    "score_stsb",
]
