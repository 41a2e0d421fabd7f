"""The ``finetune`` stage: debias one target model on one arm's corpus with one seed, evaluating it epoch by epoch.

Writes, below the step folder ``finetune/<target>/<arm>/seed-<seed>`` (:mod:`context_cda.layout`):
``checkpoints/epoch-N`` (resumable; deleted when the run finishes unless ``train.keep_resume_state``), ``final/`` (``save_pretrained``, safetensors, tokenizer; LoRA adapters merged),
``adapter/`` (LoRA only), ``metrics.csv`` (one row per evaluated epoch; epoch 0 = the vanilla model),
``train_rows.parquet`` (the source rows of the texts trained on), ``corpus_stats.json`` and ``manifest.json``.

Before anything is loaded or written the stage checks its inputs, the target's model reference, ``run.device``
and the arm's corpus (at least ``train.min_rows`` rows). The step envelope (:mod:`context_cda.steps`) holds the step
folder's lock while it trains (on the main process under DDP), so a second fine-tuning of the same target, arm and
seed is refused instead of sharing ``checkpoints/``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from .. import schemas as S
from ..arms import of_kinds
from ..arms import parse as parse_arm
from ..errors import ConfigError, InputError
from ..io import atomic_dir, atomic_path, write_json, write_rejected, write_table
from ..steps import Counts, Recorder, recorder
from .budget import check_dose, model_ref, read_budget
from .corpus import (
    apply_token_budget,
    arm_corpus,
    arm_token_count,
    count_tokens,
    load_arm_rows,
    tokenize_texts,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config

logger = logging.getLogger(__name__)

METRICS_FILE = L.METRICS_FILE
FINAL_DIR = L.FINAL_DIR
ADAPTER_DIR = L.ADAPTER_DIR
ID_COLUMNS = ("epoch", "arm", "target", "seed")

# evaluate_model(model, tokenizer, eval_config) -> {"stereoset_ss": ..., "crows_cs": ...}
EvaluateFn = Callable[[Any, Any, Any], Mapping[str, float]]


def default_evaluate_fn(config: Config) -> EvaluateFn | None:
    """:func:`context_cda.evaluate.evaluate_model` (StereoSet + CrowS-Pairs, ``config.evaluate``), or None when
    the benchmarks cannot be imported. The function keeps its last results in ``.predictions`` (``{benchmark:
    result}``, the per-item rows among them), which the per-epoch evaluation saves for epoch 0 and the last epoch.
    It is ``sharded``: under several processes each scores its share of the items (``world``), and rank 0 gets
    every item's scores, in order, and the metrics (the others get ``{}``)."""
    try:
        from ..evaluate import evaluate_model
    except ImportError as e:
        logger.warning("context_cda.evaluate unavailable (%s)", e)
        return None

    def evaluate(model, tokenizer, eval_config, world=None) -> Mapping[str, float]:
        flat, evaluate.predictions = evaluate_model(model, tokenizer, eval_config, data_cache=config.run.data_cache,
                                                    with_predictions=True, world=world)
        return flat

    evaluate.predictions = None  # type: ignore[attr-defined]
    evaluate.sharded = True  # type: ignore[attr-defined]
    return evaluate


def save_epoch_predictions(out: Path, epoch: int, predictions: Mapping[str, Any]) -> Path:
    """An epoch's per-item intrinsic predictions into ``predictions/epoch-<epoch>/<benchmark>/`` of the step
    folder; a later epoch replaces the earlier ones (epoch 0, the vanilla model, stays). ``predictions``:
    {benchmark: rows}, or {benchmark: result} from :func:`context_cda.evaluate.evaluate_model`, whose
    ``result.json`` lets the evaluate step reuse the last epoch's scores (:mod:`context_cda.evaluate.reuse`)."""
    import shutil

    import pandas as pd

    dest = L.epoch_predictions_dir(out, epoch)
    for name, res in predictions.items():
        write_table(pd.DataFrame(res["rows"] if isinstance(res, Mapping) else res), dest / name / L.PREDICTIONS_FILE)
        if isinstance(res, Mapping) and "fingerprint" in res:
            from ..evaluate.reuse import save

            save(dest, name, res)
    if epoch > 0:
        for other in L.epoch_predictions_dirs(out):
            if L.epoch_of(other) not in (0, epoch):
                shutil.rmtree(other, ignore_errors=True)
    return dest


def load_target(config: Config, target: str, arm: str | None = None):
    """(model, tokenizer, family) of a target, in train mode on CPU (accelerate moves it); the dropout arm's
    model with its raised dropout (:func:`dropout_overrides`)."""
    from transformers import AutoConfig, AutoTokenizer

    from ..models import auto_class_for, family_of, family_of_config, resolve_pretrained

    path = resolve_pretrained(model_ref(config, target), config.run.model_cache)
    mcfg = AutoConfig.from_pretrained(path)
    fam = family_of_config(mcfg)
    extra = dropout_overrides(mcfg, fam, config, target) if arm == "dropout" else {}
    model = auto_class_for(fam).from_pretrained(path, **extra)
    tok = AutoTokenizer.from_pretrained(path)
    return model, tok, family_of(model)


#: config keys of a model's dropout probabilities (read from its config, never from its name)
HIDDEN_DROPOUT_KEYS = ("hidden_dropout_prob", "resid_pdrop", "embd_pdrop", "dropout", "dropout_rate",
                       "hidden_dropout")
ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attn_pdrop", "attention_dropout")
#: bias-bench's dropout debiasing (Webster et al. 2020): run_mlm.py sets BERT's and RoBERTa's hidden dropout to 0.20
#: and attention dropout to 0.15; run_clm.py sets GPT-2's resid/embd/attn dropout to 0.15
BIAS_BENCH_DROPOUT = {"masked": (0.20, 0.15), "causal": (0.15, 0.15), "seq2seq": (0.15, 0.15)}


def dropout_overrides(model_config: Any, family: str, config: Config, target: str) -> dict[str, float]:
    """The dropout arm's config values: every dropout probability the model's config has, raised to
    ``baselines.dropout.hidden`` / ``attention`` (null: bias-bench's values for the family). Llama-style configs
    have only an attention dropout, which is then all the arm raises."""
    hidden, attention = BIAS_BENCH_DROPOUT[family]
    d = config.baselines.dropout
    hidden = hidden if d.hidden is None else d.hidden
    attention = attention if d.attention is None else d.attention
    out = {k: hidden for k in HIDDEN_DROPOUT_KEYS if isinstance(getattr(model_config, k, None), float | int)}
    out.update({k: attention for k in ATTENTION_DROPOUT_KEYS
                if isinstance(getattr(model_config, k, None), float | int)})
    if not out:
        raise ConfigError(f"arm dropout on target {target}: its model config has no dropout probability "
                          f"({', '.join(HIDDEN_DROPOUT_KEYS + ATTENTION_DROPOUT_KEYS)}), so there is nothing to raise; "
                          "drop the dropout arm for this target (baselines.targets).")
    return out


def shared_token_budget(config: Config, inputs: Mapping[str, Path | str], tokenizer, family: str,
                        arm: str | None = None) -> int:
    """The smallest token count over the corpora of ``train.arms`` that exist (the default budget); with ``arm``,
    over the arms of its budget group (:attr:`context_cda.arms.Arm.budget_group`)."""
    counts = {}
    group = None if arm is None else parse_arm(arm, config.train.k).budget_group
    for name in of_kinds(config.train.arms, ("trained",), config.train.k):
        if group is not None and parse_arm(name, config.train.k).budget_group != group:
            continue
        kind, path = arm_corpus(inputs, name, config.train.k)
        if not path.exists():
            continue
        try:
            counts[name] = arm_token_count(config, kind, path, tokenizer, family)
        except InputError as e:  # an empty corpus fails its own arm, not the budget of the others
            logger.warning("token budget: arm %s not counted: %s", name, e)
    if not counts:
        raise InputError(
            f"token budget: none of the corpora of train.arms ({', '.join(config.train.arms)}) exist "
            f"({', '.join(f'{k}={v}' for k, v in inputs.items())}); run the earlier stages or set train.token_budget."
        )
    return min(counts.values())


def wrap_lora(model, lora_cfg, family: str):
    from peft import LoraConfig, TaskType, get_peft_model

    task = {"causal": TaskType.CAUSAL_LM, "seq2seq": TaskType.SEQ_2_SEQ_LM}.get(family)
    cfg = LoraConfig(
        r=lora_cfg.r,
        lora_alpha=lora_cfg.alpha,
        lora_dropout=lora_cfg.dropout,
        target_modules=lora_cfg.target_modules,
        task_type=task,
    )
    try:
        return get_peft_model(model, cfg)
    except ValueError as e:
        raise ConfigError(f"train.lora: {e} Set train.lora.target_modules for this architecture.") from e


class MetricsLog:
    """``metrics.csv``: one row per evaluated epoch, rewritten atomically after each evaluation."""

    def __init__(self, path: Path, ids: Mapping[str, Any], keep_until: int | None) -> None:
        import pandas as pd

        self.path, self.ids = path, dict(ids)
        self.rows: list[dict[str, Any]] = []
        if keep_until is not None and path.is_file():  # resuming: keep what the finished epochs wrote
            old = pd.read_csv(path)
            self.rows = [r for r in old.to_dict("records") if int(r["epoch"]) <= keep_until]

    def add(self, epoch: int, metrics: Mapping[str, float]) -> dict[str, Any]:
        row = {"epoch": epoch, **self.ids, **{k: float(v) for k, v in metrics.items()}}
        self.rows = [r for r in self.rows if int(r["epoch"]) != epoch] + [row]
        self.write()
        return row

    def write(self) -> None:
        import pandas as pd

        df = pd.DataFrame(self.rows)
        if df.empty:
            df = pd.DataFrame(columns=list(ID_COLUMNS))
        cols = [c for c in ID_COLUMNS if c in df.columns] + sorted(c for c in df.columns if c not in ID_COLUMNS)
        df = df[cols].sort_values("epoch")
        with atomic_path(self.path) as tmp:
            df.to_csv(tmp, index=False)


@dataclass
class _Corpus:
    """What one (target, arm, seed) trains on."""

    rows: pd.DataFrame  # id, text, side: every row of the arm's table
    examples: list[dict[str, list[int]]]
    available: int  # tokens before the budget
    used: int  # tokens after it
    budget: int
    path: Path


def run_finetune(
    config: Config,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    target: str,
    arm: str,
    seed: int | None = None,
    *,
    token_budget: int | None = None,
    evaluate_fn: EvaluateFn | None = None,
    evaluate: bool = True,
    vanilla_metrics: Mapping[str, float] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``config.run.targets[target]`` on ``arm``'s corpus with training seed ``seed`` (default: the
    first of ``train.seeds``); resumes from the last epoch checkpoint.

    ``inputs`` are the stage table's finetune inputs (``cda``, ``augmented``, ``filtered``; see
    :mod:`context_cda.train.corpus`), or ``corpus`` (one explicit table). Options:

    * ``token_budget`` overrides ``train.token_budget``; default: the smallest arm's token count;
    * ``evaluate_fn(model, tokenizer, config.evaluate) -> metrics`` replaces the intrinsic benchmarks (default:
      :func:`context_cda.evaluate.evaluate_model`); ``evaluate=False`` skips evaluation;
    * ``vanilla_metrics`` reuses an epoch-0 result instead of evaluating the untouched model again;
    * ``on_step(epoch, global_step)`` is called after each optimizer step; ``log`` receives progress lines.

    Returns the summary (also in ``manifest.json``): tokens, steps, epochs, last metrics, MLflow run id.
    """
    seed = config.train.seeds[0] if seed is None else int(seed)
    out, say = Path(out_dir), log or logger.info
    check_inputs(config, inputs, target, arm, seed, benchmarks=evaluate and evaluate_fn is None)
    return _finetune(config, inputs, out, target, arm, seed, token_budget,
                     evaluate_fn if evaluate else None, evaluate, vanilla_metrics, on_step, say)


def check_inputs(config: Config, inputs: Mapping[str, Path | str], target: str, arm: str, seed: int,
                 benchmarks: bool = False) -> None:
    """What can be checked without loading a model: the seed, the inputs, the model reference and its files, the
    device, the size of the arm's corpus (``train.min_rows``) and, with ``benchmarks``, the files of the
    per-epoch benchmarks (parsed once, memoised for the evaluations)."""
    from ..models import check_device, parse_ref

    if not 0 <= seed < 2**32:
        raise ConfigError(f"finetune {target}/{arm}: seed {seed} must lie in [0, 2**32) (numpy and torch seeds).")
    for name, p in inputs.items():
        if not Path(p).exists():
            raise InputError(f"finetune {target}/{arm}: input {name} = {p} not found; run the stage before.")
    parse_ref(model_ref(config, target))
    if config.run.device not in ("auto", "cpu"):
        check_device(config.run.device)
    if config.tracking.enabled:  # an unreachable tracking server: now, not after loading and minutes of retries
        from ..tracking.runs import check_server

        check_server(config)
    kind, path = arm_corpus(inputs, arm, config.train.k)
    if not path.exists():
        raise InputError(f"finetune {arm}: its corpus {path} does not exist; run the earlier stages first.")
    rows = len(load_arm_rows(kind, path, config.cda.mode, config.lexicon, config))
    if rows < config.train.min_rows:
        raise InputError(
            f"finetune {target}/{arm}: its corpus {path} has {rows} rows, fewer than train.min_rows="
            f"{config.train.min_rows}. Earlier steps lost items (their errors, rejected and quarantine tables say "
            "why): rerun them (error items are retried), or lower train.min_rows."
        )
    if benchmarks:
        from ..evaluate import load_benchmarks

        load_benchmarks(config.evaluate, data_cache=config.run.data_cache, per_epoch_only=True)


def _finetune(config: Config, inputs, out: Path, target: str, arm: str, seed: int, token_budget, evaluate_fn,
              evaluate: bool, vanilla_metrics, on_step, say) -> dict[str, Any]:
    from ..runtime.progress import activity

    rec = recorder(out, versions=("torch", "transformers", "accelerate", "peft"))
    with rec.timed("load"), activity(f"load {config.run.targets[target]}"):
        model, tok, family = load_target(config, target, arm)
        corpus = _corpus(config, inputs, target, arm, tok, family, token_budget)
        if config.train.lora.enabled:
            model = wrap_lora(model, config.train.lora, family)
    say(f"finetune {target}/{arm}/seed-{seed}: {family} model, {len(corpus.examples)} sequences, "
        f"{corpus.used} tokens (budget {corpus.budget})")
    result, metrics_log, tracker, main = _train(config, model, tok, family, corpus, out, target, arm, seed,
                                                evaluate_fn, evaluate, vanilla_metrics, on_step, say, rec)
    summary = _summary(target, arm, seed, family, corpus, result, metrics_log, out, tracker)
    if main:
        _record(rec, out, corpus, summary, tracker)
        if not config.train.keep_resume_state:  # finished: final/ holds the weights, a resume needs nothing
            from .loop import drop_resume_state

            freed = drop_resume_state(out, config.train.keep_epoch_weights)
            say(f"finetune {target}/{arm}/seed-{seed}: resume state removed ({freed / 2**20:.0f} MiB; "
                "train.keep_resume_state keeps it)")
    return summary


def _corpus(config: Config, inputs, target: str, arm: str, tok, family: str, token_budget: int | None
            ) -> _Corpus:
    """The arm's rows, tokenized, cut to the shared token budget (a dose arm: its dose) by a shuffle seeded with
    ``run.seed`` (the same data for every training seed)."""
    tcfg = config.train
    kind, path = arm_corpus(inputs, arm, tcfg.k)
    if not path.exists():
        raise InputError(f"finetune {arm}: its corpus {path} does not exist; run the earlier stages first.")
    rows = load_arm_rows(kind, path, config.cda.mode, config.lexicon, config)
    examples = tokenize_texts(tok, rows["text"].tolist(), tcfg.max_seq_len, family)
    available = count_tokens(examples)
    dose = parse_arm(arm, tcfg.k).tokens  # a dose arm's own budget comes before train.token_budget
    budget = (token_budget or (dose and check_dose(target, arm, dose, available)) or tcfg.token_budget
              or read_budget(inputs) or shared_token_budget(config, inputs, tok, family, arm))  # the budget step's
    examples, used = apply_token_budget(examples, budget, config.run.seed)
    return _Corpus(rows, examples, available, used, budget, path)


def _train(config, model, tok, family, corpus: _Corpus, out: Path, target, arm, seed, evaluate_fn, evaluate,
           vanilla_metrics, on_step, say, rec: Recorder):
    """Resume or start, evaluating each epoch into metrics.csv (and MLflow), then save the final model."""
    import shutil

    from ..tracking import NullTracker, tracker_for
    from .loop import (
        checkpoint_fingerprint,
        data_fingerprint,
        discard_checkpoints,
        last_checkpoint,
        make_accelerator,
        train,
    )

    tcfg = config.train
    acc = make_accelerator(tcfg, config.run.device)
    main = acc.is_main_process  # under torchrun only the main process logs and writes files
    if main:
        _remove_leftovers(out, say)
    tracker = tracker_for(config, target=target, arm=arm, seed=seed) if main else NullTracker()
    fingerprint = data_fingerprint(corpus.examples, tcfg, seed, family, acc.num_processes)
    ckpt = last_checkpoint(out)
    if ckpt is not None and checkpoint_fingerprint(ckpt[1]) != fingerprint:
        say(f"finetune {target}/{arm}: checkpoints in {out} belong to other data or settings; starting afresh")
        acc.wait_for_everyone()
        if main:
            discard_checkpoints(out)
        acc.wait_for_everyone()
        ckpt = None
    metrics_log = MetricsLog(out / METRICS_FILE, {"arm": arm, "target": target, "seed": seed},
                             keep_until=ckpt[0] if ckpt else None)
    if ckpt is None and main:
        metrics_log.write()
        shutil.rmtree(out / L.EPOCH_PREDICTIONS_DIR, ignore_errors=True)  # a fresh start: no older epoch's scores
    on_eval = _epoch_evaluator(config, evaluate_fn, evaluate, vanilla_metrics, metrics_log, tracker, say,
                               f"{target}/{arm}/seed-{seed}", arm)
    tracker.log_params(_params(config, target, arm, seed, family, corpus.budget))
    with rec.timed("train"), _mark_failed_on_error(tracker):
        result = train(model, tok, corpus.examples, tcfg, out, family=family, seed=seed, accelerator=acc,
                       evaluate=on_eval, on_step=on_step, log=say, fingerprint=fingerprint,
                       last_state=config.train.keep_resume_state or config.train.keep_epoch_weights)
    if main:
        with rec.timed("save"):
            _save_final(result.model, tok, out / FINAL_DIR, out / ADAPTER_DIR if tcfg.lora.enabled else None)
        for epoch, loss in sorted(result.epoch_losses.items()):
            tracker.log_metrics({"train_loss": loss}, step=epoch)
    acc.wait_for_everyone()
    return result, metrics_log, tracker, main


def _remove_leftovers(out: Path, say) -> None:
    """Temporary files and folders of atomic writes a killed run cut short (``final/``, ``adapter/``,
    ``metrics.csv``); the step's lock is held, so no one else is writing them."""
    import shutil

    for p in sorted(out.glob(".*.tmp")):
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        say(f"removed {p}: left half-written by an interrupted run")


def _epoch_evaluator(config, evaluate_fn, evaluate: bool, vanilla_metrics, metrics_log: MetricsLog, tracker, say,
                     label: str, arm: str | None = None):
    """The per-epoch callback of :func:`~context_cda.train.loop.train` (None: no evaluation): the per-epoch
    benchmarks, after training those of the arm (``evaluate.arm_benchmarks``); epoch 0, the vanilla model, all."""
    fn = (evaluate_fn or default_evaluate_fn(config)) if evaluate else None
    eval_cfg = config.evaluate.for_arm(arm)
    if evaluate and fn is None:
        say("context_cda.evaluate.evaluate_model is not available: per-epoch evaluation skipped")
    if fn is None:
        return None

    def on_eval(m, t, epoch: int, world=None) -> dict[str, float] | None:
        """One epoch's scores; under several processes (``world``) each scores its share of the items and rank 0
        alone writes metrics.csv, the predictions and the MLflow metrics (a function that is not ``sharded``
        runs on rank 0 only)."""
        main = world is None or world.main
        if epoch == 0 and vanilla_metrics is not None:
            metrics = dict(vanilla_metrics)
        elif main or getattr(fn, "sharded", False):
            if hasattr(fn, "predictions"):
                fn.predictions = None
            cfg = config.evaluate if epoch == 0 else eval_cfg  # epoch 0: the vanilla model
            metrics = dict(fn(m, t, cfg, world=world) if world is not None else fn(m, t, cfg))
            if main and getattr(fn, "predictions", None):
                save_epoch_predictions(metrics_log.path.parent, epoch, fn.predictions)
        if not main:
            return None
        metrics_log.add(epoch, metrics)
        tracker.log_metrics(metrics, step=epoch)
        say(f"finetune {label} epoch {epoch}: {headline(metrics)}")
        return metrics

    return on_eval


#: the metrics an epoch's log line shows (with their intervals); metrics.csv and MLflow hold every one
HEADLINE = {"stereoset_ss": "SS", "stereoset_lms": "LMS", "stereoset_icat": "ICAT", "crows_cs": "CS"}


def headline(metrics: Mapping[str, float]) -> str:
    """``SS 57.00 [51.20, 62.80], LMS 88.10 [...], ... (+31 more in metrics.csv)``: one short line per epoch."""
    shown = []
    for key, title in HEADLINE.items():
        if key in metrics:
            lo, hi = metrics.get(f"{key}_ci_low"), metrics.get(f"{key}_ci_high")
            iv = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
            shown.append(f"{title} {metrics[key]:.2f}{iv}")
    used = {k for key in HEADLINE if key in metrics for k in (key, f"{key}_ci_low", f"{key}_ci_high")}
    more = len(set(metrics) - used)
    return ", ".join(shown) + (f" (+{more} more in metrics.csv)" if more else "") if shown else f"{len(metrics)} metrics"


def _params(config: Config, target: str, arm: str, seed: int, family: str, budget: int) -> dict[str, Any]:
    tcfg = config.train
    return {
        "target": target,
        "arm": arm,
        "model": model_ref(config, target),
        "family": family,
        "seed": seed,
        "token_budget": budget,
        **{f"train.{k}": v for k, v in tcfg.model_dump(mode="json").items() if k != "lora"},
        **{f"train.lora.{k}": v for k, v in tcfg.lora.model_dump(mode="json").items()},
    }


def _summary(target, arm, seed, family, corpus: _Corpus, result, metrics_log: MetricsLog, out: Path,
             tracker) -> dict[str, Any]:
    last_row = metrics_log.rows[-1] if metrics_log.rows else {}
    return {
        "target": target,
        "arm": arm,
        "seed": seed,
        "family": family,
        "sequences": len(corpus.examples),
        "texts": len(corpus.rows),
        "tokens_available": corpus.available,
        "tokens": corpus.used,
        "token_budget": corpus.budget,
        "epochs": result.epochs_done,
        "steps": result.global_step,
        "processes": result.processes,
        "global_batch": result.global_batch,
        "resumed_from_epoch": result.resumed_from,
        "final_loss": result.epoch_losses.get(max(result.epoch_losses)) if result.epoch_losses else None,
        "metrics": {k: (None if v != v else v) for k, v in last_row.items() if k not in ID_COLUMNS},
        "final_dir": str(out / FINAL_DIR),
        "mlflow_run_id": tracker.run_id,
        **_left_out_counts(corpus.rows.attrs.get("left_out", [])),
    }


def _left_out_counts(left_out: list[dict[str, Any]]) -> dict[str, Any]:
    """How many texts of the arm's corpus were left out, and those that held an evaluation item per benchmark
    (the cda-neutral arm's rewrites; :mod:`context_cda.evaluate.decontam`)."""
    from ..evaluate.decontam import REASON as OVERLAP

    if not left_out:
        return {}
    by: dict[str, int] = {}
    for r in left_out:
        if str(r[S.REASON]).startswith(OVERLAP):
            bench = str(r[S.REASON]).split(": ", 1)[1].split(":", 1)[0]
            by[bench] = by.get(bench, 0) + 1
    return {"left_out": len(left_out), "eval_overlap": sum(by.values()), "eval_overlap_by_benchmark": by}


def _record(rec: Recorder, out: Path, corpus: _Corpus, summary: dict[str, Any], tracker) -> None:
    """corpus statistics, the rows trained on, the rows left out, the manifest; the same to MLflow."""
    import pandas as pd

    stats = write_json(out / L.CORPUS_STATS_FILE, {k: summary[k] for k in ("texts", "sequences",
                                                                            "tokens_available", "tokens",
                                                                            "token_budget")})
    rows = write_table(corpus.rows.assign(source=str(corpus.path)), out / L.TRAIN_ROWS_FILE)
    rejected = write_rejected(pd.DataFrame(corpus.rows.attrs.get("left_out", []), columns=[S.ID, S.TEXT, S.REASON]),
                              out)  # the corpus's texts the arm does not train on (cda-neutral), with why
    tracker.log_artifact(stats)
    tracker.log_artifact(out / METRICS_FILE)
    rec.finish(
        Counts(items_in=len(corpus.rows), out=len(corpus.examples), rejected=len(corpus.rows.attrs.get("left_out", []))),
        outputs={"final": out / FINAL_DIR, "metrics": out / METRICS_FILE, "train_rows": rows, "rejected": rejected},
        summary=summary,
    )
    tracker.log_dict(summary, "finetune_summary.json")
    tracker.finish()


@contextlib.contextmanager
def _mark_failed_on_error(tracker) -> Iterator[None]:
    from ..runtime.signals import Terminated

    try:
        yield
    except BaseException as exc:
        with contextlib.suppress(Exception):  # a rerun resumes into the same MLflow run and marks it FINISHED
            tracker.finish("KILLED" if isinstance(exc, Terminated | KeyboardInterrupt) else "FAILED")
        raise


def _save_final(model, tokenizer, dest: Path, adapter_dir: Path | None) -> None:
    """``save_pretrained`` (safetensors) + tokenizer into ``dest`` atomically; LoRA adapters are merged."""
    if hasattr(model, "merge_and_unload"):
        if adapter_dir is not None:
            with atomic_dir(adapter_dir) as tmp:
                model.save_pretrained(tmp, safe_serialization=True)
        model = model.merge_and_unload()
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
