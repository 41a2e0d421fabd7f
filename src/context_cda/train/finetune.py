"""The ``finetune`` stage: debias one target model on one arm's corpus, evaluating it epoch by epoch.

Writes ``<out_dir>/checkpoints/epoch-N`` (resumable), ``<out_dir>/final`` (``save_pretrained``, safetensors,
tokenizer; LoRA adapters merged), ``<out_dir>/adapter`` (LoRA only), ``<out_dir>/metrics.csv`` (one row per
evaluated epoch; epoch 0 = the vanilla model) and ``manifest.json``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InputError
from ..io import StageRecorder, atomic_path, write_json
from .corpus import (
    apply_token_budget,
    arm_inputs,
    count_tokens,
    load_arm_texts,
    tokenize_texts,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.csv"
FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
ID_COLUMNS = ("epoch", "arm", "target")

# evaluate_model(model, tokenizer, eval_config) -> {"stereoset_ss": ..., "crows_cs": ...}
EvaluateFn = Callable[[Any, Any, Any], Mapping[str, float]]


def default_evaluate_fn(config: Config) -> EvaluateFn | None:
    """:func:`context_cda.evaluate.evaluate_model` (StereoSet + CrowS-Pairs, ``config.evaluate``), or None when
    the benchmarks cannot be imported."""
    try:
        from ..evaluate import evaluate_model
    except ImportError as e:
        logger.warning("context_cda.evaluate unavailable (%s)", e)
        return None

    def evaluate(model, tokenizer, eval_config) -> Mapping[str, float]:
        return evaluate_model(model, tokenizer, eval_config, data_cache=config.run.data_cache)

    return evaluate


def model_ref(config: Config, target: str) -> str:
    try:
        return config.run.targets[target]
    except KeyError:
        raise ConfigError(
            f"run.targets: no target named {target!r}; known: {', '.join(config.run.targets) or 'none'}."
        ) from None


def load_target(config: Config, target: str):
    """(model, tokenizer, family) of a target, in train mode on CPU (accelerate moves it)."""
    from transformers import AutoConfig, AutoTokenizer

    from ..models import auto_class_for, family_of, family_of_config, resolve_pretrained

    path = resolve_pretrained(model_ref(config, target), config.run.model_cache)
    fam = family_of_config(AutoConfig.from_pretrained(path))
    model = auto_class_for(fam).from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    return model, tok, family_of(model)


def arm_token_count(config: Config, inputs: Mapping[str, Path | str], tokenizer, family: str) -> int:
    texts = load_arm_texts(inputs, config.cda.mode)
    return count_tokens(tokenize_texts(tokenizer, texts, config.train.max_seq_len, family))


def shared_token_budget(
    config: Config,
    target: str,
    tokenizer,
    family: str,
    run_dir: Path | None = None,
    arm_corpora: Mapping[str, Mapping[str, Path | str]] | None = None,
) -> int:
    """The smallest token count over the arms' corpora that exist (the default budget).

    ``arm_corpora`` maps arm -> its finetune ``inputs``; default: :func:`arm_inputs` for each of ``train.arms``.
    """
    counts = {}
    corpora = arm_corpora or {arm: arm_inputs(config, target, arm, run_dir) for arm in config.train.arms}
    for name, inp in corpora.items():
        if all(Path(p).exists() for p in inp.values()):
            try:
                counts[name] = arm_token_count(config, inp, tokenizer, family)
            except InputError as e:  # an empty corpus fails its own arm, not the budget of the others
                logger.warning("token budget: arm %s not counted: %s", name, e)
    if not counts:
        raise InputError(
            f"token budget: none of the corpora of train.arms ({', '.join(config.train.arms)}) exist under "
            f"{run_dir or config.run_dir()}; run cda/filter first or set train.token_budget."
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

    def __init__(self, path: Path, target: str, arm: str, keep_until: int | None) -> None:
        import pandas as pd

        self.path, self.target, self.arm = path, target, arm
        self.rows: list[dict[str, Any]] = []
        if keep_until is not None and path.is_file():  # resuming: keep what the finished epochs wrote
            old = pd.read_csv(path)
            self.rows = [r for r in old.to_dict("records") if int(r["epoch"]) <= keep_until]

    def add(self, epoch: int, metrics: Mapping[str, float]) -> dict[str, Any]:
        row = {"epoch": epoch, "arm": self.arm, "target": self.target, **{k: float(v) for k, v in metrics.items()}}
        self.rows = [r for r in self.rows if int(r["epoch"]) != epoch] + [row]
        self.write()
        return row

    def write(self) -> None:
        import pandas as pd

        df = pd.DataFrame(self.rows)
        if df.empty:
            df = pd.DataFrame(columns=list(ID_COLUMNS))
        cols = list(ID_COLUMNS) + sorted(c for c in df.columns if c not in ID_COLUMNS)
        df = df[cols].sort_values("epoch")
        with atomic_path(self.path) as tmp:
            df.to_csv(tmp, index=False)


def run_finetune(
    config: Config,
    inputs: Mapping[str, Path | str] | None,
    out_dir: Path | str,
    target: str,
    arm: str,
    *,
    token_budget: int | None = None,
    evaluate_fn: EvaluateFn | None = None,
    evaluate: bool = True,
    vanilla_metrics: Mapping[str, float] | None = None,
    arm_corpora: Mapping[str, Mapping[str, Path | str]] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``config.run.targets[target]`` on ``arm``'s corpus; resumes from the last epoch checkpoint.

    Options:

    * ``token_budget`` overrides ``train.token_budget``; default: the smallest arm's token count, over
      ``arm_corpora`` (``{arm: inputs}``) when given, else over the run dir's corpora of ``train.arms``;
    * ``evaluate_fn(model, tokenizer, config.evaluate) -> metrics`` replaces the intrinsic benchmarks (default:
      :func:`context_cda.evaluate.evaluate_model`); ``evaluate=False`` skips evaluation;
    * ``vanilla_metrics`` reuses an epoch-0 result instead of evaluating the untouched model again;
    * ``on_step(epoch, global_step)`` is called after each optimizer step; ``log`` receives progress lines.

    Returns the summary (also in ``manifest.json``): tokens, steps, epochs, last metrics, MLflow run id.
    """
    from .loop import (
        checkpoint_fingerprint,
        data_fingerprint,
        discard_checkpoints,
        last_checkpoint,
        make_accelerator,
        train,
    )

    out = Path(out_dir)
    inputs = dict(inputs) if inputs else arm_inputs(config, target, arm)
    for name, p in inputs.items():
        if not Path(p).exists():
            raise InputError(f"finetune {target}/{arm}: input {name} = {p} not found; run the stage before.")
    tcfg = config.train
    stage_cfg = {
        "train": tcfg.model_dump(mode="json"),
        "evaluate": config.evaluate.model_dump(mode="json"),
        "cda_mode": config.cda.mode,
        "seed": config.run.seed,
        "model": model_ref(config, target),
        "target": target,
        "arm": arm,
        "token_budget_option": token_budget,
    }
    rec = StageRecorder("finetune", out, stage_cfg, inputs, versions=("torch", "transformers", "accelerate", "peft"))
    say = log or logger.info

    with rec.timed("load"):
        model, tok, family = load_target(config, target)
        texts = load_arm_texts(inputs, config.cda.mode)
        examples = tokenize_texts(tok, texts, tcfg.max_seq_len, family)
        available = count_tokens(examples)
        budget = token_budget or tcfg.token_budget or shared_token_budget(
            config, target, tok, family, arm_corpora={**(arm_corpora or {}), arm: inputs} if arm_corpora else None
        )
        examples, used = apply_token_budget(examples, budget, config.run.seed)
        if tcfg.lora.enabled:
            model = wrap_lora(model, tcfg.lora, family)
    say(f"finetune {target}/{arm}: {family} model, {len(examples)} sequences, {used} tokens (budget {budget})")

    from ..tracking import NullTracker, tracker_for

    acc = make_accelerator(tcfg, config.run.device)
    main = acc.is_main_process  # under DDP only the main process logs and writes files
    tracker = tracker_for(config, target=target, arm=arm) if main else NullTracker()
    fingerprint = data_fingerprint(examples, tcfg, config.run.seed, family)
    ckpt = last_checkpoint(out)
    if ckpt is not None and checkpoint_fingerprint(ckpt[1]) != fingerprint:
        say(f"finetune {target}/{arm}: checkpoints in {out} belong to other data or settings; starting afresh")
        acc.wait_for_everyone()
        if main:
            discard_checkpoints(out)
        acc.wait_for_everyone()
        ckpt = None
    metrics_log = MetricsLog(out / METRICS_FILE, target, arm, keep_until=ckpt[0] if ckpt else None)
    if ckpt is None and main:
        metrics_log.write()
    fn = (evaluate_fn or default_evaluate_fn(config)) if evaluate else None
    if evaluate and fn is None:
        say("context_cda.evaluate.evaluate_model is not available: per-epoch evaluation skipped")

    def on_eval(m, t, epoch: int) -> dict[str, float]:
        if epoch == 0 and vanilla_metrics is not None:
            metrics = dict(vanilla_metrics)
        else:
            metrics = dict(fn(m, t, config.evaluate))  # type: ignore[misc]
        metrics_log.add(epoch, metrics)
        tracker.log_metrics(metrics, step=epoch)
        say(f"finetune {target}/{arm} epoch {epoch}: " + ", ".join(f"{k}={v:.2f}" for k, v in metrics.items()))
        return metrics

    tracker.log_params(
        {
            "target": target,
            "arm": arm,
            "model": model_ref(config, target),
            "family": family,
            "seed": config.run.seed,
            "token_budget": budget,
            **{f"train.{k}": v for k, v in tcfg.model_dump(mode="json").items() if k != "lora"},
            **{f"train.lora.{k}": v for k, v in tcfg.lora.model_dump(mode="json").items()},
        }
    )
    with rec.timed("train"), _mark_failed_on_error(tracker):
        result = train(
            model,
            tok,
            examples,
            tcfg,
            out,
            family=family,
            seed=config.run.seed,
            accelerator=acc,
            evaluate=on_eval if fn is not None else None,
            on_step=on_step,
            log=say,
            fingerprint=fingerprint,
        )
    final = out / FINAL_DIR
    if acc.is_main_process:
        with rec.timed("save"):
            _save_final(result.model, tok, final, out / ADAPTER_DIR if tcfg.lora.enabled else None)
        for epoch, loss in sorted(result.epoch_losses.items()):
            tracker.log_metrics({"train_loss": loss}, step=epoch)
    acc.wait_for_everyone()

    last_row = metrics_log.rows[-1] if metrics_log.rows else {}
    summary = {
        "target": target,
        "arm": arm,
        "family": family,
        "sequences": len(examples),
        "texts": len(texts),
        "tokens_available": available,
        "tokens": used,
        "token_budget": budget,
        "epochs": result.epochs_done,
        "steps": result.global_step,
        "resumed_from_epoch": result.resumed_from,
        "final_loss": result.epoch_losses.get(max(result.epoch_losses)) if result.epoch_losses else None,
        "metrics": {k: (None if v != v else v) for k, v in last_row.items() if k not in ID_COLUMNS},
        "final_dir": str(final),
        "mlflow_run_id": tracker.run_id,
    }
    if acc.is_main_process:
        write_json(out / "corpus_stats.json", {k: summary[k] for k in ("texts", "sequences", "tokens_available",
                                                                         "tokens", "token_budget")})
        tracker.log_artifact(out / "corpus_stats.json")
        tracker.log_artifact(out / METRICS_FILE)
        rec.finish(
            {"texts_in": len(texts), "sequences": len(examples), "tokens": used},
            outputs={"final": final, "metrics": out / METRICS_FILE},
            summary=summary,
        )
        tracker.log_dict(summary, "finetune_summary.json")
        tracker.finish()
    return summary


@contextlib.contextmanager
def _mark_failed_on_error(tracker) -> Iterator[None]:
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            tracker.finish("FAILED")  # a rerun resumes into the same MLflow run and marks it FINISHED
        raise


def _save_final(model, tokenizer, dest: Path, adapter_dir: Path | None) -> None:
    """``save_pretrained`` (safetensors) + tokenizer into ``dest`` atomically; LoRA adapters are merged."""
    if hasattr(model, "merge_and_unload"):
        if adapter_dir is not None:
            _atomic_dir(adapter_dir, lambda tmp: model.save_pretrained(tmp, safe_serialization=True))
        model = model.merge_and_unload()

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

    _atomic_dir(dest, write)


def _atomic_dir(dest: Path, writer: Callable[[Path], None]) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    writer(tmp)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
