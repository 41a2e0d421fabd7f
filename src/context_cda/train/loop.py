"""The fine-tuning loop: one loop for every model family, on ``accelerate``.

* Single process on CPU or one GPU, or several processes under ``torchrun`` / ``accelerate launch`` / a Kubeflow
  TrainJob (:mod:`context_cda.runtime.distributed`; DDP, or FSDP with ``train.strategy``). An optimizer step takes the
  next :func:`micro_per_step` micro-batches of the epoch's seeded batch order, wherever they run: micro-batch i of
  a step goes to process ``i mod world``, every process makes the same number of passes (one short of micro-batches
  pads with a pass of weight 0), and the weights make the averaged gradient the mean over the step's micro-batches
  (:func:`rank_share`). Masking and dropout are seeded per micro-batch by (seed, epoch, batch), so 1 process and N
  at the same global batch (``train.global_batch_size``, or ``grad_accum`` x processes) take the same steps and
  end with the same weights, to float rounding of the gradient's reduction.
* Gradient accumulation (``grad_accum`` micro-batches per process and optimizer step, gradients synchronised once
  per step), mixed precision (bf16/fp16 on GPU), gradient clipping, AdamW with linear warm-up and decay.
* Per-epoch evaluation on every process, each scoring its share of each benchmark's items (gathered on rank 0,
  which writes; :mod:`context_cda.train.finetune`), with FSDP's parameters gathered for it.
* A checkpoint after every epoch (after that epoch's evaluation) in ``checkpoints/epoch-N`` (model, optimizer,
  scheduler and RNG states through ``accelerator.save_state``, then ``state.json`` as the completion marker);
  :func:`train` resumes from the last complete checkpoint. Batch order and masking depend only on (seed, epoch,
  batch), and evaluation runs with the RNG state forked, so a resumed run ends with the same weights as an
  uninterrupted one.
* Retention: once a checkpoint is complete, only the newest ``train.keep_checkpoints`` full states are kept
  (default 1: resuming needs the last one only); an older epoch's folder is deleted, or with
  ``train.keep_epoch_weights`` reduced to its model weights (``state.json`` goes first, so a half-pruned folder
  is never taken for a resumable one, and the next start finishes the pruning: :func:`remove_partial`).
* Interruptions: a SIGTERM (:mod:`context_cda.runtime.signals`) stops the epoch in flight, but never the writing or
  pruning of a checkpoint (deferred until it is complete); a training loss that is not finite stops the step
  with :class:`TrainingDiverged` naming the key to change, before the optimizer writes NaN into the weights.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..io import write_json
from ..models.optim import epoch_batches, linear_schedule, param_groups
from ..runtime.signals import deferred
from .epochs import evaluates_after
from .objectives import Objective

CHECKPOINTS = "checkpoints"


class TrainingDiverged(ConfigError):
    """The training loss stopped being a finite number (a learning rate too high, fp16 overflow)."""

STATE_FILE = "state.json"

# evaluate(model, tokenizer, epoch[, world]) -> metrics, with the model in eval mode: one process, or under FSDP
# rank 0 alone with a whole copy of the model, scores every item; under DDP every process is called with the
# job's world (context_cda.runtime.distributed.World) and scores its share, rank 0 gathering (its metrics count)
EpochEval = Callable[..., dict[str, float] | None]


@dataclass
class TrainResult:
    model: Any  # the unwrapped trained model (FSDP: a whole copy on rank 0, None on the other processes)
    epochs_done: int
    global_step: int
    resumed_from: int | None
    losses: list[float] = field(default_factory=list)  # per optimizer step: its mean over the micro-batches
    epoch_losses: dict[int, float] = field(default_factory=dict)
    tokens: int = 0
    processes: int = 1  # of the job (torchrun's WORLD_SIZE)
    global_batch: int = 0  # sequences per optimizer step over all processes


def precision_for(precision: str, device: str) -> str:
    """accelerate's ``mixed_precision`` value for a config ``precision`` on ``device``."""
    import torch

    on_cuda = device.startswith("cuda")
    if precision == "auto":
        return "bf16" if on_cuda and torch.cuda.is_bf16_supported() else "no"
    if precision == "fp32":
        return "no"
    if precision == "fp16" and not on_cuda:
        raise ConfigError("train.precision=fp16 needs a CUDA GPU; use bf16 or fp32 on this device.")
    return precision


def make_accelerator(tcfg, device: str = "auto"):
    """accelerate's Accelerator for ``train``: mixed precision, CPU or GPU, and under several processes the
    strategy of ``train.strategy`` (:func:`fsdp_plugin`); the process group is :mod:`context_cda.runtime.distributed`'s,
    opened here when the step envelope has not opened it yet."""
    from accelerate import Accelerator

    from ..models import pick_device
    from ..runtime import distributed

    dev = pick_device(device)
    world = distributed.init(tcfg.dist_timeout_s, dev)
    plugin = fsdp_plugin(tcfg, dev) if world.distributed and tcfg.strategy == "fsdp" else None
    return Accelerator(mixed_precision=precision_for(tcfg.precision, dev), cpu=dev == "cpu", fsdp_plugin=plugin)


def fsdp_plugin(tcfg, device: str):
    """accelerate's FSDP settings for ``train.strategy=fsdp``: parameters, gradients and optimizer state fully
    sharded, each of the model's repeated blocks (its ``_no_split_modules``: read by accelerate from the model, never
    from its name) one shard unit, sharded checkpoints (every rank writes its part; a resume needs the same number
    of processes, which the checkpoint's fingerprint records). accelerate runs FSDP on GPUs only."""
    if not device.startswith("cuda"):
        raise ConfigError(f"train.strategy=fsdp shards the model across GPUs and needs CUDA (run.device is {device}); "
                          "use train.strategy=ddp on CPU.")
    from accelerate.utils import FullyShardedDataParallelPlugin

    return FullyShardedDataParallelPlugin(reshard_after_forward="FULL_SHARD", auto_wrap_policy="transformer_based_wrap",
                                          state_dict_type="SHARDED_STATE_DICT", use_orig_params=True,
                                          cpu_ram_efficient_loading=False)


def micro_per_step(tcfg, world: int = 1) -> int:
    """Micro-batches (of ``train.batch_size`` sequences) per optimizer step over all processes:
    ``global_batch_size / batch_size``, else ``grad_accum`` x processes."""
    if tcfg.global_batch_size is not None:
        return max(tcfg.global_batch_size // tcfg.batch_size, 1)
    return tcfg.grad_accum * world


def step_plan(n_examples: int, tcfg, seed: int, epoch: int, world: int = 1) -> list[list[tuple[int, list[int]]]]:
    """The epoch's optimizer steps: each the list of its micro-batches, ``(batch number, example indices)``, the
    next :func:`micro_per_step` of the epoch's seeded batch order (the last step may have fewer)."""
    batches = list(enumerate(epoch_batches(n_examples, tcfg.batch_size, seed, epoch)))
    m = micro_per_step(tcfg, world)
    return [batches[i : i + m] for i in range(0, len(batches), m)]


def rank_share(step: Sequence[tuple[int, list[int]]], rank: int, world: int) -> list[tuple[int, list[int], bool]]:
    """Process ``rank``'s passes of one optimizer step, ``(batch number, example indices, real)``: micro-batch i
    goes to process ``i mod world``; every process makes ``ceil(k / world)`` passes, one with fewer micro-batches
    than that padding with the step's first micro-batch, not real (weight 0: DDP and FSDP need every process in
    every collective). A real pass's loss is weighted ``world / k``, so the average of the processes' gradients is
    the mean over the step's k micro-batches, as one process computes it."""
    passes = math.ceil(len(step) / world)
    mine = [(b, idx, True) for b, idx in step[rank::world]]
    return mine + [(step[0][0], step[0][1], False)] * (passes - len(mine))


def steps_per_epoch(n_examples: int, tcfg, world: int = 1) -> int:
    return math.ceil(math.ceil(n_examples / tcfg.batch_size) / micro_per_step(tcfg, world))


def last_checkpoint(out_dir: Path | str) -> tuple[int, Path] | None:
    """The highest complete ``checkpoints/epoch-N`` (one holding ``state.json``), or None."""
    root = Path(out_dir) / CHECKPOINTS
    best: tuple[int, Path] | None = None
    if root.is_dir():
        for d in root.iterdir():
            if d.is_dir() and d.name.startswith("epoch-") and (d / STATE_FILE).is_file():
                try:
                    n = int(d.name.split("-", 1)[1])
                except ValueError:
                    continue
                if best is None or n > best[0]:
                    best = (n, d)
    return best


#: train settings that do not change a run's trajectory nor its checkpoints' format (left out of the fingerprint);
#: grad_accum and global_batch_size enter through the micro-batches per step they make (:func:`micro_per_step`)
_NOT_TRAJECTORY = {"eval_every", "arms", "seeds", "k", "min_rows", "keep_checkpoints", "keep_epoch_weights",
                   "keep_resume_state", "launcher", "dist_timeout_s", "grad_accum", "global_batch_size"}


def data_fingerprint(examples: Sequence[dict[str, list[int]]], tcfg, seed: int, family: str, world: int = 1) -> str:
    """Hash of what determines the training trajectory: the token rows, the train settings (except how often
    to evaluate), the micro-batches per optimizer step, the seed and the family; with FSDP also the number of
    processes (its checkpoints are sharded per process). A checkpoint resumes only a run with the same
    fingerprint: a DDP checkpoint resumes on any number of processes that makes the same global batch."""
    import hashlib

    h = hashlib.sha256()
    for ex in examples:
        h.update(np.asarray(ex["input_ids"], dtype=np.int64).tobytes())
        h.update(b"|")
    settings = tcfg.model_dump(mode="json", exclude=_NOT_TRAJECTORY)
    settings["micro_per_step"] = micro_per_step(tcfg, world)
    if tcfg.strategy == "fsdp" and world > 1:
        settings["processes"] = world
    h.update(json.dumps([settings, seed, family], sort_keys=True).encode())
    return h.hexdigest()[:16]


def checkpoint_fingerprint(path: Path) -> str | None:
    try:
        return json.loads((Path(path) / STATE_FILE).read_text()).get("fingerprint")
    except (OSError, json.JSONDecodeError):
        return None


def discard_checkpoints(out_dir: Path | str) -> None:
    shutil.rmtree(Path(out_dir) / CHECKPOINTS, ignore_errors=True)


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Run a block (evaluation) without disturbing python, numpy and torch RNG streams."""
    import torch

    py, npy = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


@dataclass
class _Session:
    """What one training run carries from step to step (prepared by accelerate)."""

    acc: Any
    model: Any
    optimizer: Any
    scheduler: Any
    objective: Objective
    world: int
    rank: int
    fsdp: bool = False  # train.strategy=fsdp under several processes: the parameters are sharded
    start_epoch: int = 1
    global_step: int = 0
    resumed: int | None = None
    epoch_losses: dict[int, float] = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)
    keep_weights: bool = False  # train.keep_epoch_weights


def train(
    model,
    tokenizer,
    examples: Sequence[dict[str, list[int]]],
    tcfg,
    out_dir: Path | str,
    *,
    family: str,
    seed: int,
    device: str = "auto",
    accelerator=None,
    evaluate: EpochEval | None = None,
    on_step: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
    max_grad_norm: float = 1.0,
    fingerprint: str | None = None,
    last_state: bool = True,
) -> TrainResult:
    """Fine-tune ``model`` on ``examples`` (token id rows) for ``tcfg.epochs`` epochs, checkpointing each epoch.

    ``evaluate(model, tokenizer, epoch)`` runs after epoch 0 (the untouched model; skipped when resuming) and
    after every ``tcfg.eval_every``-th epoch and the last one, *before* that epoch's checkpoint is written: a run
    killed between the two redoes the epoch, so no epoch's metrics are ever lost. ``last_state=False``: the last
    epoch's full state (weights, optimizer, scheduler: ~3x the weights) is not written, for a caller that saves the
    final model right after and would delete the state then (a run killed before that redoes the last epoch).
    ``on_step(epoch, global_step)`` is called after every optimizer step (tests use it to interrupt training).
    ``fingerprint`` (see :func:`data_fingerprint`) is stored in each checkpoint; a checkpoint with another
    fingerprint is discarded instead of resumed.
    """
    from accelerate.utils import set_seed

    if not examples:
        raise ConfigError("nothing to train on: the corpus is empty after tokenization and the token budget.")
    out = Path(out_dir)
    say = log or (lambda _msg: None)
    acc = accelerator or make_accelerator(tcfg, device)
    set_seed(seed)
    run = _prepare(acc, model, tokenizer, family, tcfg, len(examples))
    _resume(run, out, fingerprint, say)
    if run.resumed is None and evaluate is not None:
        _run_eval(run, tokenizer, evaluate, 0)
    epochs_done = run.start_epoch - 1
    for epoch in range(run.start_epoch, tcfg.epochs + 1):
        if tcfg.max_steps is not None and run.global_step >= tcfg.max_steps:
            break
        _train_epoch(run, examples, tcfg, seed, epoch, max_grad_norm, on_step)
        say(f"epoch {epoch}: loss {run.epoch_losses[epoch]:.4f} (step {run.global_step})")
        last = epoch == tcfg.epochs or (tcfg.max_steps is not None and run.global_step >= tcfg.max_steps)
        if evaluate is not None and evaluates_after(epoch, tcfg.eval_every, last):
            _run_eval(run, tokenizer, evaluate, epoch)
        with deferred():  # a SIGTERM waits until the epoch's checkpoint is complete and the old ones pruned
            if not last or last_state:
                _save_checkpoint(acc, out, epoch, run.global_step, {"epoch_losses": run.epoch_losses}, fingerprint)
                if acc.is_main_process:
                    prune_checkpoints(out, tcfg.keep_checkpoints, tcfg.keep_epoch_weights)
        acc.wait_for_everyone()
        epochs_done = epoch
    acc.wait_for_everyone()
    return TrainResult(
        model=full_copy(acc, run.model) if run.fsdp else acc.unwrap_model(run.model),
        epochs_done=epochs_done,
        global_step=run.global_step,
        resumed_from=run.resumed,
        losses=run.losses,
        epoch_losses=dict(run.epoch_losses),
        tokens=sum(len(e["input_ids"]) for e in examples),
        processes=run.world,
        global_batch=micro_per_step(tcfg, run.world) * tcfg.batch_size,
    )


def _prepare(acc, model, tokenizer, family: str, tcfg, n_examples: int) -> _Session:
    """Objective, AdamW with linear warm-up/decay, and accelerate's wrapping of the three."""
    import torch

    objective = Objective(
        family,
        tokenizer,
        mlm_probability=tcfg.mlm_probability,
        whole_word_mask=tcfg.whole_word_mask,
        noise_density=tcfg.noise_density,
        mean_span_length=tcfg.mean_span_length,
    )
    world, rank = acc.num_processes, acc.process_index
    total_steps = steps_per_epoch(n_examples, tcfg, world) * tcfg.epochs
    if tcfg.max_steps is not None:
        total_steps = min(total_steps, tcfg.max_steps)
    optimizer = torch.optim.AdamW(param_groups(model, tcfg.weight_decay), lr=tcfg.learning_rate)
    # accelerate's prepared scheduler advances num_processes times per optimizer step: scale the schedule
    scheduler = linear_schedule(optimizer, int(tcfg.warmup_ratio * total_steps) * world, total_steps * world)
    fsdp = world > 1 and tcfg.strategy == "fsdp"
    if fsdp and hasattr(model, "peft_config"):
        raise ConfigError("train.strategy=fsdp with train.lora: LoRA's trainable weights are small, so train it with "
                          "train.strategy=ddp.")
    model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    return _Session(acc, model, optimizer, scheduler, objective, world, rank, fsdp,
                    keep_weights=tcfg.keep_epoch_weights)


def remove_partial(out_dir: Path | str, keep_weights: bool = False) -> list[Path]:
    """What a killed run left in ``checkpoints/``: a checkpoint being written (``.epoch-N.tmp``) and an epoch
    folder whose pruning was cut short (its ``state.json`` gone, its optimizer state still there), which is
    deleted, or with ``keep_weights`` reduced to its weights as the pruning would have. Returns what it removed.
    Call holding the step's lock."""
    root = Path(out_dir) / CHECKPOINTS
    removed = []
    for d in sorted(root.glob(".epoch-*.tmp")) if root.is_dir() else []:
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    for d in sorted(root.glob("epoch-*")) if root.is_dir() else []:
        if d.is_dir() and not (d / STATE_FILE).is_file() and (not keep_weights or _reduce_to_weights(d)):
            if not keep_weights:
                shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _resume(run: _Session, out: Path, fingerprint: str | None, say: Callable[[str], None]) -> None:
    """Continue from the last complete checkpoint of the same fingerprint (others are discarded); first remove
    what a killed run left half-written (:func:`remove_partial`)."""
    acc = run.acc
    if acc.is_main_process:
        for d in remove_partial(out, run.keep_weights):
            say(f"removed {d}: left half-written by an interrupted run")
    acc.wait_for_everyone()
    ckpt = last_checkpoint(out)
    if ckpt is not None and fingerprint is not None and checkpoint_fingerprint(ckpt[1]) != fingerprint:
        say(f"{ckpt[1]}: written for other data or settings; starting afresh")
        acc.wait_for_everyone()
        if acc.is_main_process:
            discard_checkpoints(out)
        acc.wait_for_everyone()
        ckpt = None
    if ckpt is None:
        return
    n, path = ckpt
    acc.load_state(str(path))
    state = json.loads((path / STATE_FILE).read_text())
    run.start_epoch, run.global_step, run.resumed = n + 1, int(state["global_step"]), n
    run.epoch_losses = {int(k): v for k, v in state.get("epoch_losses", {}).items()}
    say(f"resumed from {path} (epoch {n}, step {run.global_step})")


def _train_epoch(run: _Session, examples, tcfg, seed: int, epoch: int, max_grad_norm: float,
                 on_step: Callable[[int, int], None] | None) -> None:
    """One epoch of optimizer steps (:func:`step_plan`, this process's passes of each: :func:`rank_share`); batch
    order, masking and dropout depend only on (seed, epoch, batch). The main process reports its progress
    (:mod:`context_cda.runtime.progress`)."""
    from ..runtime.progress import Progress

    run.model.train()
    steps = step_plan(len(examples), tcfg, seed, epoch, run.world)
    ep_loss, ep_n = 0.0, 0
    main = run.acc.is_main_process
    with Progress(len(steps), f"train epoch {epoch}/{tcfg.epochs}", "step", bar=main,
                  every=None if main else 0) as bar:
        for step in steps:
            step_loss = _optimizer_step(run, examples, step, seed, epoch, tcfg, max_grad_norm)
            ep_loss, ep_n = ep_loss + step_loss, ep_n + 1
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.3f}", step=run.global_step)
            if on_step is not None:
                on_step(epoch, run.global_step)
            if tcfg.max_steps is not None and run.global_step >= tcfg.max_steps:
                break
    run.epoch_losses[epoch] = ep_loss / max(ep_n, 1)


def micro_seed(seed: int, epoch: int, batch: int) -> int:
    """The torch seed of one micro-batch's forward pass (dropout): the same on whichever process runs it."""
    return int(np.random.SeedSequence([seed, epoch, batch, 1]).generate_state(1)[0])


def _optimizer_step(run: _Session, examples, step, seed: int, epoch: int, tcfg, max_grad_norm: float) -> float:
    """One optimizer step over the micro-batches of ``step`` (this process's passes: :func:`rank_share`); returns
    its loss, the mean over the step's micro-batches (averaged over the processes)."""
    import torch

    acc, model = run.acc, run.model
    passes = rank_share(step, run.rank, run.world)
    step_loss = 0.0
    for j, (b, idx, real) in enumerate(passes):
        rng = np.random.default_rng([seed, epoch, b])
        batch = run.objective.collate([examples[i] for i in idx], rng)
        batch = {k: v.to(acc.device) for k, v in batch.items()}
        sync = j == len(passes) - 1
        ctx = contextlib.nullcontext() if sync or run.world == 1 else acc.no_sync(model)
        torch.manual_seed(micro_seed(seed, epoch, b))
        with ctx, acc.autocast():
            loss = model(**batch).loss
            loss = loss * run.world / len(step) if real else loss * 0.0
            acc.backward(loss)
        step_loss += float(loss.detach())
    if run.world > 1:  # every process the same figure: the step's mean loss (and the same verdict on NaN)
        step_loss = float(acc.reduce(torch.tensor(step_loss, device=acc.device), reduction="mean"))
    check_finite(step_loss, epoch, run.global_step + 1, tcfg)
    if max_grad_norm and max_grad_norm > 0:
        acc.clip_grad_norm_(model.parameters(), max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.global_step += 1
    run.losses.append(step_loss)
    return step_loss


def check_finite(loss: float, epoch: int, step: int, tcfg) -> None:
    """A training loss that is NaN or infinite stops the step before the optimizer writes NaN into the weights;
    the finished epochs' checkpoints stay, the error names the keys to change."""
    if math.isfinite(loss):
        return
    hint = (f"lower train.learning_rate (now {tcfg.learning_rate:g}; fine-tuning uses ~1e-5 to 1e-4)"
            + (f" or train.precision={tcfg.precision} -> fp32" if tcfg.precision in ("fp16", "bf16") else "")
            + ", or check the corpus and the target model's weights")
    raise TrainingDiverged(f"finetune: the training loss is {loss} at epoch {epoch}, optimizer step {step}: the "
                           f"run diverged. {hint[0].upper() + hint[1:]}; the finished epochs' checkpoints are kept.")


def _run_eval(run: _Session, tokenizer, evaluate: EpochEval, epoch: int) -> None:
    """Evaluate with the RNG streams untouched: one process scores everything; under DDP every process scores its
    share (``evaluate(..., world)``); under FSDP rank 0 scores a whole copy of the model (:func:`full_copy`) while
    the others wait."""
    import torch

    from ..runtime import distributed

    acc = run.acc
    with preserved_rng(), torch.no_grad():
        if run.fsdp:
            whole = full_copy(acc, run.model)
            if whole is not None:
                evaluate(whole.eval(), tokenizer, epoch)
        else:
            inner = acc.unwrap_model(run.model)
            was_training = inner.training
            inner.eval()
            world = distributed.current()
            if world.distributed:
                evaluate(inner, tokenizer, epoch, world)
            elif acc.is_main_process:
                evaluate(inner, tokenizer, epoch)
            inner.train(was_training)
    acc.wait_for_everyone()


def full_copy(acc, model):
    """FSDP: every process takes part in gathering the whole state dict; rank 0 gets a plain (unsharded) copy of
    the model with it, on its device, for evaluation and the final save; the other processes get None."""
    import torch

    state = acc.get_state_dict(model)
    if not acc.is_main_process:
        return None
    inner = acc.unwrap_model(model)
    with torch.device("meta"):
        whole = type(inner)(inner.config)
    whole.load_state_dict(state, strict=False, assign=True)
    whole.tie_weights()
    return whole.to(acc.device)


def _save_checkpoint(
    acc, out: Path, epoch: int, global_step: int, history: dict[str, Any], fingerprint: str | None = None
) -> None:
    """Write ``checkpoints/epoch-N`` via a temporary folder; ``state.json`` last marks it complete."""
    final = out / CHECKPOINTS / f"epoch-{epoch}"
    tmp = out / CHECKPOINTS / f".epoch-{epoch}.tmp"
    if acc.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    if acc.is_main_process:
        state = {"epoch": epoch, "global_step": global_step, "epoch_losses": history["epoch_losses"],
                 "fingerprint": fingerprint}
        write_json(tmp / STATE_FILE, state)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    acc.wait_for_everyone()


#: an epoch folder's model weights (FSDP: the folder of each process's shards)
WEIGHT_FILES = ("model*.safetensors", "pytorch_model*.bin", "pytorch_model_fsdp_*")


def prune_checkpoints(out_dir: Path | str, keep: int = 1, keep_weights: bool = False) -> list[Path]:
    """Keep the newest ``keep`` complete checkpoints whole (0: none, see :func:`drop_resume_state`); delete older
    epochs' folders, or (``keep_weights``) reduce them to their model weights. Returns the folders pruned."""
    root = Path(out_dir) / CHECKPOINTS
    full = sorted((int(d.name.split("-", 1)[1]), d) for d in root.glob("epoch-*")
                  if d.is_dir() and d.name.split("-", 1)[1].isdigit() and (d / STATE_FILE).is_file())
    pruned = []
    for _, d in full[: max(len(full) - max(keep, 0), 0)]:
        (d / STATE_FILE).unlink()  # first: from now on the folder is not a resumable checkpoint
        if not keep_weights:
            shutil.rmtree(d, ignore_errors=True)
        else:
            _reduce_to_weights(d)
        pruned.append(d)
    return pruned


def drop_resume_state(out_dir: Path | str, keep_weights: bool = False) -> int:
    """After a finished run (its final model saved): delete every full training state in ``checkpoints/`` (model,
    optimizer, scheduler, RNG: only a resume needs them), or with ``keep_weights`` reduce each to its model weights;
    the folder goes when nothing is left. Returns the bytes freed."""
    root = Path(out_dir) / CHECKPOINTS
    if not root.is_dir():
        return 0
    before = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    for tmp in root.glob(".epoch-*.tmp"):  # a save killed half-way
        shutil.rmtree(tmp, ignore_errors=True)
    prune_checkpoints(out_dir, keep=0, keep_weights=keep_weights)
    if not any(any(root.rglob(p)) for p in ("*.safetensors", "*.bin", "*.distcp")):
        shutil.rmtree(root, ignore_errors=True)
    after = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
    return before - after


def _reduce_to_weights(d: Path) -> bool:
    """Delete everything but the model weights in an epoch folder; whether anything was deleted."""
    weights = {f for pattern in WEIGHT_FILES for f in d.glob(pattern)}
    extra = [f for f in d.iterdir() if f not in weights]
    for f in extra:
        shutil.rmtree(f, ignore_errors=True) if f.is_dir() else f.unlink()
    return bool(extra)
