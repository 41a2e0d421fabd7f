"""The embedded local runner: every stage in order, skipping what is up to date, resuming what was cut short.

``ccda run --profile P`` plans the steps of a run (one per stage, per target model and per arm), then runs each
one through the same stage function the CLI, DVC and Kubeflow call. A step is skipped when its marker file
(``<out_dir>/.ccda-step.json``) records the same step key (stage, options and the config sections the stage
reads) and the same input hashes, and its outputs still exist. A killed run leaves no marker for the step it was
in; on the next ``ccda run`` that step runs again, and the long stages resume from their own checkpoints
(augment and entropy shards, training epochs) instead of starting over.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import schemas as S
from .config import Config
from .errors import ConfigError
from .io import json_hash, path_hash, write_json
from .stages import get_stage

MARKER = ".ccda-step.json"

#: stage order; --until/--only take these names
STAGE_ORDER = ["ingest", "cda", "validate", "augment", "entropy", "filter", "finetune", "evaluate", "register",
               "report"]

#: config sections a stage reads (changing any other section does not rerun it)
SECTIONS: dict[str, tuple[str, ...]] = {
    "ingest": ("ingest", "lexicon"),
    "cda": ("cda", "lexicon"),
    "validate": ("validate", "lexicon", "cda", "augment"),
    "augment": ("augment", "lexicon"),
    "entropy": ("entropy", "augment"),
    "filter": ("filter",),
    "finetune": ("train", "evaluate", "cda"),
    "evaluate": ("evaluate",),
    "register": ("tracking",),
    "report": ("report", "tracking"),
}


@dataclass
class Step:
    stage: str
    name: str  # display name, e.g. "finetune[smollm2-135m/cda]"
    out_dir: Path
    inputs: dict[str, Path]
    options: dict[str, Any] = field(default_factory=dict)
    extra_key: dict[str, Any] = field(default_factory=dict)  # e.g. the target's model reference
    always: bool = False  # steps whose result depends on state outside the run dir (the registry)

    def key(self, config: Config) -> str:
        sections = {s: config.section(s).model_dump(mode="json") for s in SECTIONS[self.stage]}
        return json_hash({"stage": self.stage, "options": self.options, "sections": sections,
                          "seed": config.run.seed, **self.extra_key})


@dataclass
class StepResult:
    step: Step
    status: str  # ran | skipped | failed
    seconds: float
    summary: dict[str, Any]


# ------------------------------------------------------------------------------------------------------ planning


def plan(config: Config, targets: Iterable[str] | None = None) -> list[Step]:
    """All steps of a run, in order."""
    rd = config.run_dir()
    names = list(targets) if targets else list(config.run.targets)
    unknown = [t for t in names if t not in config.run.targets]
    if unknown:
        raise ConfigError(
            f"--targets: unknown target(s) {', '.join(unknown)}; configured: {', '.join(config.run.targets)}."
        )
    cda_valid = rd / "validate" / "cda" / S.VALID_FILE
    aug_valid = rd / "validate" / "augment" / S.VALID_FILE
    corpus_input = {"corpus": Path(config.ingest.path)} if config.ingest.path else {}
    steps = [
        Step("ingest", "ingest", rd / "ingest", corpus_input),
        Step("cda", "cda", rd / "cda", {"sentences": rd / "ingest" / S.INGEST_FILE}),
        Step("validate", "validate[cda]", rd / "validate" / "cda", {"cda": rd / "cda" / S.CDA_FILE},
             {"boundary": "cda"}),
        Step("augment", "augment", rd / "augment", {"counterfactuals": cda_valid}),
        Step("validate", "validate[augment]", rd / "validate" / "augment",
             {"augment": rd / "augment" / S.AUGMENT_FILE}, {"boundary": "augment"}),
    ]
    for t in names:
        ref = {"model": config.run.targets[t]}
        steps += [
            Step("entropy", f"entropy[{t}]", rd / "entropy" / t, {"augmented": aug_valid}, {"target": t}, ref),
            Step("validate", f"validate[entropy/{t}]", rd / "validate" / "entropy" / t,
                 {"entropy": rd / "entropy" / t / S.ENTROPY_FILE}, {"boundary": "entropy", "target": t}),
            Step("filter", f"filter[{t}]", rd / "filter" / t,
                 {"scores": rd / "validate" / "entropy" / t / S.VALID_FILE}, {"target": t}, ref),
        ]
    for t in names:
        ref = {"model": config.run.targets[t]}
        # every arm trains on the same token budget: the smallest of the validated corpora
        corpora = {arm: _arm_inputs(config, t, arm, cda_valid, aug_valid) for arm in config.train.arms}
        for arm in config.train.arms:
            steps.append(Step("finetune", f"finetune[{t}/{arm}]", rd / "finetune" / t / arm, corpora[arm],
                              {"target": t, "arm": arm, "arm_corpora": corpora}, ref))
        if config.evaluate.after_training:
            # the vanilla target too: the extrinsic benchmarks compare every arm against it
            steps.append(Step("evaluate", f"evaluate[{t}/vanilla]", rd / "evaluate" / t / "vanilla", {},
                              {"model": config.run.targets[t], "name": f"{t}/vanilla"}, ref))
            for arm in config.train.arms:
                final = rd / "finetune" / t / arm / "final"
                steps.append(Step("evaluate", f"evaluate[{t}/{arm}]", rd / "evaluate" / t / arm,
                                  {"model": final}, {"model": str(final), "name": f"{t}/{arm}"}, ref))
        if config.tracking.enabled:
            for arm in config.train.arms:
                steps.append(Step("register", f"register[{t}/{arm}]", rd / "register" / t / arm,
                                  _register_inputs(config, t, arm), {"target": t, "arm": arm}, ref))
    # the report reads every arm's per-epoch metrics (and the registry decisions, logged beside them)
    metrics = {f"{t}/{arm}": rd / "finetune" / t / arm / "metrics.csv" for t in names for arm in config.train.arms}
    if config.evaluate.after_training:
        metrics.update({f"evaluate:{t}/{m}": rd / "evaluate" / t / m / "aggregate.json"
                        for t in names for m in ("vanilla", *config.train.arms)})
    steps.append(Step("report", "report", rd / "report", metrics, {}, {"targets": names, "arms": config.train.arms}))
    return steps


def _arm_inputs(config: Config, target: str, arm: str, cda_valid: Path, aug_valid: Path) -> dict[str, Path]:
    from .train.corpus import arm_inputs

    inputs = arm_inputs(config, target, arm)
    if "cda" in inputs:  # train on what passed validation
        return {"cda": cda_valid}
    if arm == "context-cda-nofilter":
        return {"corpus": aug_valid}
    return dict(inputs)


def _register_inputs(config: Config, target: str, arm: str) -> dict[str, Path]:
    """The model and its per-epoch metrics decide whether a registration is up to date; run_register finds the
    optional extras (corpus statistics, SE histogram, evaluate aggregates) itself."""
    ft = config.run_dir() / "finetune" / target / arm
    return {"model": ft / "final", "metrics": ft / "metrics.csv"}


def select(steps: list[Step], only: Iterable[str] | None = None, until: str | None = None) -> list[Step]:
    only = list(only or [])
    for s in [*only, *([until] if until else [])]:
        if s not in STAGE_ORDER:
            raise ConfigError(f"unknown stage {s!r}; stages: {', '.join(STAGE_ORDER)}.")
    if only:
        return [s for s in steps if s.stage in only]
    if until:
        last = STAGE_ORDER.index(until)
        return [s for s in steps if STAGE_ORDER.index(s.stage) <= last]
    return steps


# ------------------------------------------------------------------------------------------------------ running


def _input_hashes(step: Step) -> dict[str, str] | None:
    out = {}
    for name, p in step.inputs.items():
        if not Path(p).exists():
            return None
        out[name] = path_hash(p)
    return out


def is_fresh(step: Step, config: Config) -> bool:
    if step.always:
        return False
    marker = step.out_dir / MARKER
    if not marker.is_file():
        return False
    try:
        rec = json.loads(marker.read_text())
    except json.JSONDecodeError:
        return False
    if rec.get("key") != step.key(config):
        return False
    hashes = _input_hashes(step)
    return hashes is not None and rec.get("inputs") == hashes and _outputs_exist(step.out_dir)


def _manifests(out_dir: Path) -> list[Path]:
    """The step's manifest, or its sub-steps' (filter writes one per k) when it has none of its own."""
    top = out_dir / "manifest.json"
    return [top] if top.is_file() else sorted(out_dir.glob("*/manifest.json"))


def _outputs_exist(out_dir: Path) -> bool:
    manifests = _manifests(out_dir)
    if not manifests:
        return False
    for path in manifests:
        try:
            manifest = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return False
        if not all(Path(o["path"]).exists() for o in manifest.get("outputs", {}).values()):
            return False
    return True


def run_step(step: Step, config: Config, **extra: Any) -> dict[str, Any]:
    fn = get_stage(step.stage)
    summary = fn(config, dict(step.inputs), step.out_dir, **step.options, **extra)
    write_json(step.out_dir / MARKER, {"stage": step.stage, "name": step.name, "key": step.key(config),
                                       "inputs": _input_hashes(step) or {}})
    return summary


def run_pipeline(
    config: Config,
    targets: Iterable[str] | None = None,
    only: Iterable[str] | None = None,
    until: str | None = None,
    force: bool = False,
    on_event: Callable[[str, Step, StepResult | None], None] | None = None,
) -> list[StepResult]:
    """Run the planned steps in order; returns one result per step. Stops at the first failure (re-raised)."""
    steps = select(plan(config, targets), only, until)
    results: list[StepResult] = []
    vanilla: dict[str, dict[str, float]] = {}
    for step in steps:
        if not force and is_fresh(step, config):
            res = StepResult(step, "skipped", 0.0, _summary_of(step))
            results.append(res)
            if on_event:
                on_event("skipped", step, res)
            continue
        if on_event:
            on_event("start", step, None)
        t0 = time.perf_counter()
        extra: dict[str, Any] = {}
        if step.stage == "finetune" and step.options["target"] in vanilla:
            extra["vanilla_metrics"] = vanilla[step.options["target"]]
        try:
            summary = run_step(step, config, **extra)
        except BaseException:
            res = StepResult(step, "failed", time.perf_counter() - t0, {})
            results.append(res)
            if on_event:
                on_event("failed", step, res)
            _finish_tracking(config, "FAILED")
            raise
        if step.stage == "finetune":
            v = _epoch0_metrics(step.out_dir)
            if v:
                vanilla.setdefault(step.options["target"], v)
        res = StepResult(step, "ran", time.perf_counter() - t0, summary)
        results.append(res)
        if on_event:
            on_event("done", step, res)
    if not only and until is None:
        _finish_tracking(config, "FINISHED")
    return results


def _finish_tracking(config: Config, status: str) -> None:
    if not config.tracking.enabled:
        return
    try:
        from .tracking import finish_pipeline_run

        finish_pipeline_run(config, status)
    except Exception:  # noqa: BLE001 - tracking must never hide the pipeline's own outcome
        pass


def _summary_of(step: Step) -> dict[str, Any]:
    manifests = _manifests(step.out_dir)
    try:
        if len(manifests) == 1:
            return json.loads(manifests[0].read_text()).get("summary", {})
        return {p.parent.name: json.loads(p.read_text()).get("summary", {}) for p in manifests}
    except (OSError, json.JSONDecodeError):
        return {}


def _epoch0_metrics(out_dir: Path) -> dict[str, float] | None:
    """The vanilla model's metrics (epoch 0) from a finished arm, to reuse for the other arms."""
    import csv

    path = out_dir / "metrics.csv"
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("epoch") == "0":
                out = {}
                for k, v in row.items():
                    if k in ("epoch", "arm", "target") or v in ("", None):
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
    for key in ("rows_out", "rows_valid", "accepted", "rejected", "rows_rejected", "rows_quarantined", "scored",
                "kept", "dropped", "tokens", "epochs", "version", "promote"):
        if key in summary and not isinstance(summary[key], dict | list):
            parts.append(f"{key}={summary[key]}")
    if not parts:  # a step with sub-steps (filter: one per k)
        parts = [f"{k}: {rows_out(v)}" for k, v in summary.items() if isinstance(v, dict) and rows_out(v)]
    return " ".join(parts[:4])
