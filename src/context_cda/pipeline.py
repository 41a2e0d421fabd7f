"""The embedded local runner: every step of the stage table in order, skipping what is up to date.

``ccda run --profile P`` plans the steps of a run from :data:`context_cda.stages.TABLE` (one per row and per
target, arm and seed of its fan-out, with inputs and folders from :mod:`context_cda.layout`), then runs each one
through the step envelope (:func:`context_cda.steps.run`), the same one the stage commands, DVC and Kubeflow use:
its lock, SIGTERM guard, manifest, item-error policy and up-to-date marker. A step is skipped when its marker
records the same step key and input fingerprints (:func:`context_cda.steps.is_fresh`), whichever door wrote it. A
killed run leaves no marker for the step it was in; on the next ``ccda run`` that step runs again, and the long
stages resume from their own checkpoints (the item engine's shards of augment, sample and entropy; training
epochs) instead of starting over.

A step that ends with *error items* (items that failed for a transient reason: augment, sample) is never marked
up to date: without ``run.allow_errors`` the envelope raises :class:`~context_cda.errors.ItemErrors` and the run
stops there (exit code 75); with it the run goes on, says so loudly, and stops before fine-tuning a target whose
corpus lost more than ``run.max_error_fraction`` of its items to errors. Either way the next run reruns the step,
which retries exactly its error items.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import stages as T
from . import steps as E
from .config import Config
from .errors import ConfigError, InputError, ItemErrors
from .layout import RunLayout
from .runtime.signals import Terminated
from .steps import Counts, Step, is_fresh

__all__ = ["Step", "StepResult", "is_fresh", "plan", "run_pipeline", "select", "to_run", "with_errors"]


@dataclass
class StepResult:
    step: Step
    status: str  # ran | errors (ran, with error items let through by run.allow_errors) | skipped | failed
    seconds: float
    summary: dict[str, Any]
    counts: Counts | None = None

    @property
    def errors(self) -> int:
        return self.counts.errors if self.counts is not None else 0


def with_errors(results: Iterable[StepResult]) -> list[StepResult]:
    """The results whose error items a run reports, each item once: a generation part (fan-out ``shard``) only
    when the merge of its parts is not among ``results`` (the merge's summary already sums its parts' errors)."""
    results = list(results)

    def merge_of(step: Step) -> tuple[str, tuple]:
        return step.row.command, tuple((k, v) for k, v in step.keys.items() if k != "shard")

    merges = {merge_of(r.step) for r in results if "shard" not in r.step.keys}
    return [r for r in results if r.errors and ("shard" not in r.step.keys or merge_of(r.step) not in merges)]


# ------------------------------------------------------------------------------------------------------ planning


def plan(config: Config, targets: Iterable[str] | None = None) -> list[Step]:
    """All steps of a run, in table order: those of the rows it plans (:func:`context_cda.stages.planned`)."""
    names = list(targets) if targets else list(config.run.targets)
    unknown = [t for t in names if t not in config.run.targets]
    if unknown:
        raise ConfigError(
            f"--targets: unknown target(s) {', '.join(unknown)}; configured: {', '.join(config.run.targets)}."
        )
    layout = RunLayout.of(config)
    rows = T.planned(config)  # a step no configured arm reads is not planned
    return [E.make(config, row.step, layout, **keys) for row in T.TABLE if row.step in rows
            for keys in T.step_keys(config, row, names)]


def select(steps: list[Step], only: Iterable[str] | None = None, until: str | None = None) -> list[Step]:
    """``only``: steps named (a step or a command: ``validate`` means every boundary); ``until``: every step up
    to the last one named, plus the validation of that step's output."""
    only = list(only or [])
    known = set(T.ORDER) | set(T.COMMANDS)
    for s in [*only, *([until] if until else [])]:
        if s not in known:
            raise ConfigError(f"unknown stage {s!r}; stages: {', '.join(T.ORDER)} (or a command: "
                              f"{', '.join(T.COMMANDS)}).")
    if only:
        return [s for s in steps if s.row.step in only or s.row.command in only]
    if until:
        wanted = set(T.ORDER[: T.until_index(until) + 1])
        return [s for s in steps if s.row.step in wanted]
    return steps


# ------------------------------------------------------------------------------------------------------ running


Event = Callable[[str, Step, "StepResult | None"], None]


def run_pipeline(
    config: Config,
    targets: Iterable[str] | None = None,
    only: Iterable[str] | None = None,
    until: str | None = None,
    force: bool = False,
    on_event: Event | None = None,
    allow_errors: bool | None = None,
) -> list[StepResult]:
    """Run the planned steps in order; returns one result per step. Stops at the first failure (re-raised).

    ``allow_errors`` overrides ``run.allow_errors`` (see the module docstring)."""
    if allow_errors is not None:
        config = config.model_copy(deep=True)
        config.run.allow_errors = allow_errors
    RunLayout.of(config).check()
    steps = select(plan(config, targets), only, until)
    check_requirements(config, steps if force else to_run(steps, config))
    results: list[StepResult] = []
    vanilla: dict[str, dict[str, float]] = {}
    notify = on_event or (lambda *_: None)
    tracked = False  # whether a step that logs to MLflow has started (then a failure marks the run FAILED)
    for step in steps:
        if not force and is_fresh(step, config):
            results.append(StepResult(step, "skipped", 0.0, E.summary_of(step.out_dir)))
            notify("skipped", step, results[-1])
            continue
        if step.row.step == "finetune":
            _check_error_share(config, results, step)
        notify("start", step, None)
        tracked = tracked or step.row.step in TRACKED
        results.append(_run_one(step, config, vanilla, notify, tracked))
        notify("done", step, results[-1])
    if not only and until is None:
        _finish_tracking(config, "FINISHED")
    return results


TRACKED = ("finetune", "evaluate-vanilla", "evaluate", "register", "report")


def _run_one(step: Step, config: Config, vanilla: dict[str, dict[str, float]], notify: Event,
             tracked: bool = True) -> StepResult:
    """Run one step; the finetune steps of a target share the vanilla (epoch-0) metrics of the first one."""
    t0 = time.perf_counter()
    target = step.keys.get("target")
    extra = {"vanilla_metrics": vanilla[target]} if step.row.step == "finetune" and target in vanilla else {}
    try:
        ran = E.run(step, config, **extra)
    except BaseException as exc:
        res = StepResult(step, "failed", time.perf_counter() - t0, {})
        notify("failed", step, res)
        if tracked:
            _finish_tracking(config, "KILLED" if isinstance(exc, Terminated | KeyboardInterrupt) else "FAILED")
        raise
    if step.row.step == "finetune":
        v = _epoch0_metrics(step.out_dir)
        if v:
            vanilla.setdefault(target, v)
    return StepResult(step, "errors" if ran.counts.errors else "ran", time.perf_counter() - t0, ran.summary,
                      ran.counts)


def _check_error_share(config: Config, results: list[StepResult], step: Step) -> None:
    """Stop before fine-tuning a target when this run's error items (augment, the sample step, the target's
    entropy) took more than ``run.max_error_fraction`` of the items planned for its corpus."""
    target = step.keys["target"]
    parts, kept = [], 1.0
    for r in results:
        if r.errors and (r.step.row.step in ("augment", "sample") or (r.step.row.step == "entropy"
                                                                     and r.step.keys.get("target") == target)):
            planned = int(r.counts.items_in if r.counts and r.counts.items_in else r.errors)
            parts.append(f"{r.step.name}: {r.errors} of {planned}")
            kept *= 1 - r.errors / max(planned, r.errors)
    lost = 1 - kept
    if parts and lost > config.run.max_error_fraction:
        raise ItemErrors(
            f"{step.name}: not started: {lost:.0%} of the items planned for its corpus ended as errors "
            f"({'; '.join(parts)}), more than run.max_error_fraction={config.run.max_error_fraction:g}. Rerun "
            "when the generator is healthy (only the error items are redone), or raise run.max_error_fraction.",
            sum(r.errors for r in results), step.name)


def to_run(steps: list[Step], config: Config) -> list[Step]:
    """The steps from the first one that is not up to date on (the ones before it will be skipped; any after it
    may run, as its outputs change)."""
    for i, step in enumerate(steps):
        if not is_fresh(step, config):
            return steps[i:]
    return []


def check_requirements(config: Config, steps: list[Step]) -> None:
    """Before any step runs, everything the ``steps`` need (:mod:`context_cda.tools.preflight`): the benchmark names and
    datasets they read, each problem one line naming the key to change, all of them in one error
    (:func:`preflight_problems`; a named dataset neither mirrored nor cached is downloaded now); the model
    references they load and their files (a missing folder, a truncated GGUF or safetensors file, a folder without
    its tokenizer fail here, not after an hour of earlier steps); ``run.device`` when a step uses it; the tracking
    server and S3 endpoint the steps talk to; the benchmark files they evaluate on. No model is loaded."""
    from .models import check_device
    from .tools.preflight import check_benchmark_files, check_model_files, check_services

    problems = preflight_problems(config, steps)
    found = [p for p in problems if not p.startswith("to fix:")]
    if len(found) == 1:  # one problem: one line (with its fix)
        raise InputError("pre-flight, nothing was run: " + " ".join(problems))
    if found:
        raise InputError(f"pre-flight: {len(found)} problems found before the first step (nothing was run):\n  "
                         + "\n  ".join(problems))
    check_model_files(config, steps)
    check_arm_families(config, steps)
    if config.run.device not in ("auto", "cpu") and any(s.row.gpu != "no" for s in steps):
        check_device(config.run.device)
    check_services(config, steps, TRACKED)
    check_benchmark_files(config, steps)


def check_arm_families(config: Config, steps: list[Step]) -> None:
    """Every post-hoc arm a step will apply is defined for its target's family (e.g. no self-debias on a seq2seq
    model), checked from the target's config where it can be read without a download."""
    from .arms import check_family
    from .models import peek_family

    seen: dict[str, str | None] = {}
    for s in steps:
        target, arm = s.keys.get("target"), s.keys.get("arm")
        if s.row.step not in ("debias", "evaluate-posthoc") or target is None or arm is None:
            continue
        if target not in seen:
            seen[target] = peek_family(config.run.targets[target], config.run.model_cache)
        if seen[target] is not None and arm not in config.baselines.published.get(target, {}):
            check_family(arm, str(seen[target]), target)


def preflight_problems(config: Config, steps: list[Step]) -> list[str]:
    """One line per thing the planned steps need and cannot have: unknown benchmark names, datasets that are
    neither given, mirrored, cached nor downloadable (:mod:`context_cda.tools.preflight`)."""
    from .tools import preflight

    names = preflight.step_names(steps)
    return preflight.check_benchmarks(config, names) + preflight.check_datasets(config, names)


def _finish_tracking(config: Config, status: str) -> None:
    if not config.tracking.enabled:
        return
    try:
        from .tracking import finish_pipeline_run

        finish_pipeline_run(config, status)
    except Exception:  # noqa: BLE001 - tracking must never hide the pipeline's own outcome
        pass


def _epoch0_metrics(out_dir: Path) -> dict[str, float] | None:
    """The vanilla model's metrics (epoch 0) from a finished arm, to reuse for the other arms."""
    import csv

    from .layout import METRICS_FILE

    path = out_dir / METRICS_FILE
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("epoch") == "0":
                out = {}
                for k, v in row.items():
                    if k in ("epoch", "arm", "target", "seed") or v in ("", None):
                        continue
                    try:
                        out[k] = float(v)
                    except ValueError:
                        continue
                return out or None
    return None


def rows_out(summary: dict[str, Any]) -> str:
    """A short 'what came out' for the summary table."""
    parts = []
    for key in ("rows_out", "rows_valid", "accepted", "rejected", "errors", "rows_rejected", "rows_quarantined",
                "scored", "kept", "dropped", "tokens", "epochs", "version", "decision"):
        if key == "errors" and not summary.get(key):
            continue
        if key in summary and not isinstance(summary[key], dict | list):
            parts.append(f"{key}={summary[key]}")
    if not parts:  # a step with sub-steps (filter: one per k)
        parts = [f"{k}: {rows_out(v)}" for k, v in summary.items() if isinstance(v, dict) and rows_out(v)]
    return " ".join(parts[:4])
