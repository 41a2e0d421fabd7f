"""The stage table: every step of the pipeline, once. Every front door derives from it.

Each row names a step (its folder in :mod:`context_cda.layout`), the library function that runs it (a lazy
``module:attr``), the config keys it reads, its fan-out (per target, per arm, per seed), its inputs (the outputs
of earlier steps, in layout terms), whether it needs a GPU, and the library code it runs. From this table:

* the local runner (:mod:`context_cda.pipeline`) plans its steps and decides what is up to date;
* the stage commands (``ccda <command>``) take their default inputs and output folders;
* ``dvc.yaml`` is generated (``ccda config dvc``; :mod:`context_cda.dvcgen`), deps and params included;
* the Kubeflow pipeline (``pipelines/``) takes its DAG order, its GPU steps and which artifact feeds which input.

Every stage function has the same shape::

    run_<stage>(config: Config, inputs: Mapping[str, Path], out_dir: Path, **options) -> dict  # summary

It reads only the files named in ``inputs``, writes only below ``out_dir`` (tables atomically, a
``manifest.json`` last), and returns a JSON-serialisable summary. ``options`` carry the step's keys (target,
arm, seed) and fixed choices (the validation boundary).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import arms as A
from . import layout as L
from .errors import ConfigError
from .io import REJECTED

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config



@dataclass(frozen=True)
class Input:
    """One input of a step: the folder of an earlier step (``file=None``), or one file in it.

    ``keys`` are the keys of *this* step the producer is looked up with; a producer with more fan-out keys than
    that is a fan-in: the input is the parent folder of all its steps (e.g. ``finetune/<target>``).
    """

    name: str
    step: str
    file: str | None = None
    keys: tuple[str, ...] = ()
    optional: bool = False  # the producer may be switched off (its `when` is false)


@dataclass(frozen=True)
class Stage:
    step: str
    command: str  # `ccda <command>`; also the KFP component's stage
    function: str  # "module:attr", imported on first use
    sections: tuple[str, ...]  # config keys read ("train", "run.seed", "run.targets.{target}")
    inputs: tuple[Input, ...] = ()
    fanout: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # fixed keyword options of the stage function
    gpu: str = "no"  # no | yes | generator (a GPU when the generator runs in-process)
    code: tuple[str, ...] = ()  # library code under src/context_cda (DVC deps)
    artifact: str = "out"  # the KFP output artifact holding the step folder
    when: str | None = None  # a boolean config key that switches the step on, or "list.key~value" (membership)
    side_effects: bool = False  # writes outside the run folder (the model registry): Kubeflow never caches it
    generates: bool = False  # calls the generator (on the cluster: the vLLM service and its API key)
    # "module:attr" of an extra up-to-date check, fn(config, out_dir, **keys) -> bool, for a step whose outputs
    # live outside the run folder too (the runner reruns the step when it says False)
    fresh: str | None = None
    config_files: tuple[str, ...] = ()  # config keys naming input files outside the run folder
    cli_args: tuple[str, ...] = ()  # fixed arguments of `ccda <command>` (the fan-out keys are added as flags)
    # what DVC tracks in the step folder: ``outs`` (none named: the whole folder; an :data:`OUT_LISTS` placeholder
    # stands for one out per value of its config list), ``metrics`` and ``plots``
    # (JSON/CSV, not cached); ``cache=False`` keeps outs in git instead of the DVC cache
    outs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    cache: bool = True

    def keys_of(self, values: Mapping[str, Any]) -> dict[str, Any]:
        missing = [k for k in self.fanout if k not in values]
        if missing:
            raise ConfigError(f"step {self.step} needs {', '.join(missing)}.")
        return {k: values[k] for k in self.fanout}

    def enabled(self, config: Config) -> bool:
        """Switched on by its ``when``: a boolean config key, or ``key~value`` (the config list ``key`` holds
        ``value``); and (a row that fans out over arms) with an arm of its kinds."""
        if self.when is not None:
            key, _, member = self.when.partition("~")
            value = config_value(config, key)
            if not (member in (value or ()) if member else bool(value)):
                return False
        return "arm" not in self.fanout or any(arm_values(config, self.step, t) for t in config.run.targets)


#: a placeholder in ``Stage.outs`` -> the config list it stands for: one out per value (``dvc.yaml`` is written with
#: the config's list, like the generation parts; regenerate it after changing the list)
OUT_LISTS = {"{benchmark}": "evaluate.benchmarks"}
#: an evaluate step's per-benchmark folders (predictions.parquet + aggregate.json each: the paired evidence of
#: register and report)
_PER_BENCHMARK = {"outs": ("{benchmark}",), "metrics": (L.AGGREGATE_FILE,)}
_GEN = ("generation", "models.py", "tiny.py")
_VALIDATED = {"outs": (L.VALID_FILE, L.QUARANTINE_FILE), "metrics": (L.RESULTS_FILE,)}
_MODEL = ("models.py", "tiny.py", "scoring", "stats.py")
#: what decontamination reads (context_cda.decontam): its settings, and the benchmark files it compares with
_EVAL_FILES = ("evaluate.stereoset_path", "evaluate.crows_path", "evaluate.winogender.path", "evaluate.winobias.path")
_DECONTAM = ("decontaminate", *_EVAL_FILES, "evaluate.winobias.split")
#: the entropy settings the sample step reads (the samples and their clusters: drawn and judged once per run) and
#: the ones each target's entropy step reads (scoring); together every field of ``entropy`` (a test keeps it so)
SAMPLE_KEYS = tuple(f"entropy.{k}" for k in (
    "n_samples", "temperature", "top_p", "max_tokens", "generator_backend", "generator_model", "judge", "judge_model",
    "rule", "embedding_threshold", "condition_on_x", "clustering", "min_samples", "batch_size", "shard_size", "limit"))
SCORE_KEYS = tuple(f"entropy.{k}" for k in ("estimator", "length_normalised", "batch_size", "shard_size"))

TABLE: tuple[Stage, ...] = (
    Stage("ingest", "ingest", "context_cda.corpus:run_ingest",
          ("run.seed", "run.attribute", "lexicon", "ingest", "cda.mapping", "cda.ambiguous", *_DECONTAM),
          code=("corpus.py", "cda", "decontam.py"), artifact="sentences", config_files=("ingest.path", *_EVAL_FILES)),
    Stage("cda", "cda", "context_cda.cda:run_cda", ("run.seed", "run.attribute", "lexicon", "cda", *_DECONTAM),
          (Input("sentences", "ingest", L.SENTENCES_FILE),), code=("cda", "decontam.py"), artifact="counterfactuals",
          config_files=_EVAL_FILES),
    Stage("validate-cda", "validate", "context_cda.validation:run_validate",
          ("run.seed", "run.attribute", "lexicon", "validate", "cda"),
          (Input("cda", "cda", L.COUNTERFACTUALS_FILE),), options={"boundary": "cda"}, code=("validation",),
          artifact="validated", cli_args=("--stage", "cda"), **_VALIDATED),
    Stage("augment-part", "augment", "context_cda.augment:run_augment",
          # entropy.judge / judge_model: the review's meaning judge defaults to the entropy step's judge model
          ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "entropy.judge", "entropy.judge_model",
           "pipeline.generation_shards"),
          (Input("counterfactuals", "validate-cda", L.VALID_FILE),), fanout=("shard",), gpu="generator",
          code=("augment", *_GEN, "shards.py", "items.py", "judges.py"), artifact="part", cli_args=("--no-progress",),
          generates=True),
    Stage("augment", "augment", "context_cda.augment:run_augment_merge",
          ("run.attribute", "lexicon", "augment", "pipeline.generation_shards", *_DECONTAM),
          (Input("parts", "augment-part"), Input("counterfactuals", "validate-cda", L.VALID_FILE)),
          code=("augment", "shards.py", "items.py", "decontam.py"), artifact="augmented", cli_args=("--merge",),
          config_files=_EVAL_FILES),
    Stage("validate-augment", "validate", "context_cda.validation:run_validate",
          ("run.attribute", "lexicon", "validate", "augment"),
          (Input("augment", "augment", L.AUGMENTED_FILE),), options={"boundary": "augment"},
          code=("validation", "augment"), artifact="validated", cli_args=("--stage", "augment"), **_VALIDATED),
    Stage("neutral", "neutral", "context_cda.augment:run_neutral",
          ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "neutral", "entropy.judge",
           "entropy.judge_model", *_DECONTAM),
          (Input("counterfactuals", "validate-cda", L.VALID_FILE),), gpu="generator",
          code=("augment", *_GEN, "shards.py", "items.py", "judges.py", "cda", "decontam.py"), artifact="neutral",
          cli_args=("--no-progress",), generates=True, when="train.arms~context-neutral", config_files=_EVAL_FILES),
    Stage("validate-neutral", "validate", "context_cda.validation:run_validate",
          ("run.attribute", "lexicon", "validate", "augment", "neutral"),
          (Input("neutral", "neutral", L.AUGMENTED_FILE),), options={"boundary": "neutral"},
          code=("validation", "augment", "cda"), artifact="validated", cli_args=("--stage", "neutral"),
          when="train.arms~context-neutral", **_VALIDATED),
    Stage("sample-part", "sample", "context_cda.entropy:run_sample",
          ("run.seed", "run.device", "run.attribute", "augment", *SAMPLE_KEYS, "pipeline.generation_shards"),
          (Input("augmented", "validate-augment", L.VALID_FILE),), fanout=("shard",), gpu="yes",
          code=("entropy", "augment", *_GEN, "judges.py", "shards.py", "items.py"), artifact="part",
          cli_args=("--no-progress",), generates=True),
    Stage("sample", "sample", "context_cda.entropy:run_sample_merge", ("entropy.limit", "pipeline.generation_shards"),
          (Input("parts", "sample-part"), Input("augmented", "validate-augment", L.VALID_FILE)),
          code=("entropy", "shards.py", "items.py"), artifact="samples", cli_args=("--merge",)),
    Stage("entropy", "entropy", "context_cda.entropy:run_entropy", ("run.device", "run.targets.{target}", *SCORE_KEYS),
          (Input("samples", "sample"),), fanout=("target",), gpu="yes",
          code=("entropy", "scoring", "models.py", "tiny.py", "items.py"), artifact="scores",
          cli_args=("--no-progress",)),
    Stage("validate-entropy", "validate", "context_cda.validation:run_validate", ("validate",),
          (Input("entropy", "entropy", L.SCORES_FILE, ("target",)),), fanout=("target",),
          options={"boundary": "entropy"}, code=("validation",), artifact="validated",
          cli_args=("--stage", "entropy"), **_VALIDATED),
    Stage("filter", "filter", "context_cda.entropy:run_filter", ("filter",),
          (Input("scores", "validate-entropy", L.VALID_FILE, ("target",)),), fanout=("target",),
          code=("entropy/filter.py",), artifact="filtered"),
    Stage("debias", "debias", "context_cda.baselines:run_debias",
          ("run.device", "run.targets.{target}", "lexicon", "cda.mode", "baselines", "evaluate.bias_type"),
          (Input("sentences", "ingest"), Input("cda", "validate-cda", L.VALID_FILE)),
          fanout=("target", "arm"), gpu="yes", code=("baselines", "arms.py", "cda", *_MODEL), artifact="debias",
          cli_args=("--no-progress",)),
    Stage("finetune", "finetune", "context_cda.train:run_finetune",
          ("run.seed", "run.device", "run.targets.{target}", "cda.mode", "lexicon", "train", "evaluate",
           "baselines.dropout", "decontaminate"),
          (Input("cda", "validate-cda", L.VALID_FILE), Input("augmented", "validate-augment", L.VALID_FILE),
           Input("filtered", "filter", None, ("target",)),
           Input("neutral", "validate-neutral", L.VALID_FILE, optional=True)),
          fanout=("target", "arm", "seed"), gpu="yes",
          code=("train", "optim.py", "cda", "evaluate", "arms.py", "decontam.py", *_MODEL),
          artifact="checkpoint", outs=(L.FINAL_DIR, L.TRAIN_ROWS_FILE, REJECTED, L.EPOCH_PREDICTIONS_DIR),
          metrics=(L.CORPUS_STATS_FILE,), plots=(L.METRICS_FILE,)),
    Stage("evaluate-vanilla", "evaluate", "context_cda.evaluate:run_evaluate",
          ("run.seed", "run.device", "run.targets.{target}", "evaluate"), fanout=("target",), gpu="yes",
          code=("evaluate", "optim.py", *_MODEL), artifact="evaluation", when="evaluate.after_training",
          cli_args=("--no-progress",), **_PER_BENCHMARK),
    Stage("evaluate", "evaluate", "context_cda.evaluate:run_evaluate", ("run.seed", "run.device", "evaluate"),
          (Input("model", "finetune", L.FINAL_DIR, ("target", "arm", "seed")),),
          fanout=("target", "arm", "seed"), gpu="yes", code=("evaluate", "optim.py", *_MODEL),
          artifact="evaluation", when="evaluate.after_training", cli_args=("--no-progress",), **_PER_BENCHMARK),
    Stage("evaluate-posthoc", "evaluate", "context_cda.evaluate:run_evaluate",
          ("run.seed", "run.device", "run.targets.{target}", "evaluate", "baselines"),
          (Input("debias", "debias", None, ("target",), optional=True),),
          fanout=("target", "arm"), gpu="yes", code=("evaluate", "optim.py", "arms.py", *_MODEL),
          artifact="evaluation", cli_args=("--no-progress",), fresh="context_cda.evaluate.posthoc:available",
          **_PER_BENCHMARK),
    Stage("register", "register", "context_cda.publish:run_register_target",
          ("run.targets.{target}", "train.arms", "train.seeds", "train.k", "baselines", "tracking",
           "evaluate.bootstrap", "evaluate.bias_type"),
          (Input("finetune", "finetune", None, ("target",), optional=True),
           Input("evaluations", "evaluate", None, ("target",), optional=True),
           Input("filtered", "filter", None, ("target",)),
           Input("posthoc", "evaluate-posthoc", None, ("target",), optional=True),
           Input("debias", "debias", None, ("target",), optional=True)),
          fanout=("target",), code=("tracking", "publish", "evaluate", "stats.py", "report/setup.py", "model_info.py"),
          artifact="registration", when="tracking.enabled",
          side_effects=True, cache=False, fresh="context_cda.tracking:registered_versions_exist"),
    Stage("report", "report", "context_cda.report:run_report",
          ("report", "tracking.enabled", "train.arms", "train.seeds", "baselines", "evaluate.bootstrap"),
          (Input("finetune", "finetune", optional=True), Input("evaluations", "evaluate", optional=True),
           Input("registrations", "register", optional=True), Input("augment", "augment"),
           Input("entropy", "entropy"), Input("filtered", "filter"),
           Input("posthoc", "evaluate-posthoc", optional=True), Input("ingest", "ingest"), Input("cda", "cda")),
          code=("report", "stats.py"), artifact="report", cli_args=("${run.run_dir}",)),
)

STAGES: dict[str, Stage] = {s.step: s for s in TABLE}
ORDER: tuple[str, ...] = tuple(STAGES)
COMMANDS: tuple[str, ...] = tuple(dict.fromkeys(s.command for s in TABLE))


def get(step: str) -> Stage:
    try:
        return STAGES[step]
    except KeyError:
        raise ConfigError(f"unknown step {step!r}; steps: {', '.join(ORDER)}.") from None


def resolve(ref: str) -> Callable[..., Any]:
    """The object a lazy ``"module:attr"`` reference names (imported now)."""
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)


def get_stage(name: str) -> Callable[..., dict[str, Any]]:
    """Import and return the library function of step ``name`` (heavy libraries load only now)."""
    return resolve(get(name).function)


def until_index(name: str) -> int:
    """Where a run cut after ``name`` (a step, or a command: its last row) ends in :data:`TABLE`: that row, or
    the validation step that checks its output when there is one (``ccda run --until``, the KFP ``last_stage``)."""
    hits = [i for i, r in enumerate(TABLE) if name in (r.step, r.command)]
    if not hits:
        raise ConfigError(f"unknown stage {name!r}; stages: {', '.join(ORDER)} (or a command: "
                          f"{', '.join(COMMANDS)}).")
    last = max(hits)
    checks = [i for i, r in enumerate(TABLE) if r.command == "validate" and r.inputs[0].step == ORDER[last]]
    return max([last, *checks])


def outs_of(row: Stage, config: Config) -> tuple[str, ...]:
    """The row's ``outs`` with each :data:`OUT_LISTS` placeholder expanded over its config list."""
    out: list[str] = []
    for name in row.outs:
        holder = next((h for h in OUT_LISTS if h in name), None)
        values = dict.fromkeys(config_value(config, OUT_LISTS[holder])) if holder else {}
        out += [name.replace(holder, L.safe_name(str(v), OUT_LISTS[holder])) for v in values] if holder else [name]
    return tuple(out)


def config_value(config: Config, key: str) -> Any:
    """``"train.k"`` -> config.train.k; ``"run.targets.gpt2"`` -> the mapping's value."""
    node: Any = config
    for part in key.split("."):
        if isinstance(node, Mapping):
            node = node.get(part)
        else:
            node = getattr(node, "validate_" if node is config and part == "validate" else part)
    return node.model_dump(mode="json") if hasattr(node, "model_dump") else node


def sections_of(row: Stage, keys: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(s.format(**keys) for s in row.sections)


#: fan-out key -> the config list (or mapping) it iterates: a step with that key reads only its own value, so
#: adding a seed (or a target) changes nothing a finished step read, under every door: the runner's step key
#: (:func:`key_sections`), DVC's params (:func:`param_keys`) and the config a Kubeflow task gets (:func:`step_view`)
FANOUT_LISTS = {"seed": "train.seeds", "target": "run.targets"}


def _own_lists(row: Stage) -> list[str]:
    return [FANOUT_LISTS[k] for k in row.fanout if k in FANOUT_LISTS]


def key_sections(config: Config, row: Stage, keys: Mapping[str, Any]) -> dict[str, Any]:
    """The config values a step's up-to-date key hashes: the row's sections, less the lists its fan-out keys
    iterate (a per-seed step depends on its own seed, not on the others: adding a seed reruns none of the steps
    already done)."""
    drop = _own_lists(row)
    out: dict[str, Any] = {}
    for section in sections_of(row, keys):
        if section in drop:
            continue
        value = config_value(config, section)
        for key in drop:
            parent, _, leaf = key.rpartition(".")
            if section == parent and isinstance(value, Mapping):
                value = {k: v for k, v in value.items() if k != leaf}
        out[section] = value
    return out


def param_keys(config: Config, row: Stage) -> list[str]:
    """The config keys DVC tracks for ``row`` (its ``params``): its sections, a section that holds a list the row
    fans out over spelled out key by key without that list (``train`` -> ``train.arms``, ``train.k``, ... but not
    ``train.seeds`` for a per-seed step), so adding a seed reruns no finished step there either."""
    drop = _own_lists(row)
    out: list[str] = []
    for section in row.sections:
        inner = [d for d in drop if d.rpartition(".")[0] == section]
        if inner:
            value = config_value(config, section)
            out += [f"{section}.{k}" for k in value if f"{section}.{k}" not in inner]
        elif section not in drop:
            out.append(section)
    return out


def step_view(config: Config, row: Stage, keys: Mapping[str, Any]) -> Config:
    """The config as one step of ``row`` sees it: each list its fan-out keys iterate narrowed to the step's own
    value (``train.seeds`` -> [seed], ``run.targets`` -> {target: its model}). A Kubeflow task gets this view, so
    its cache key does not change when a seed or a target is added."""
    view = config.model_copy(deep=True)
    if "seed" in row.fanout:
        view.train.seeds = [int(keys["seed"])]
    if "target" in row.fanout:
        view.run.targets = {str(keys["target"]): config.run.targets[str(keys["target"])]}
    return view


# ---------------------------------------------------------------------------------------- one step's paths


def producer_dir(layout: L.RunLayout, inp: Input, keys: Mapping[str, Any]) -> Path:
    """The folder ``inp`` reads: the producer's step folder, or (fan-in) the parent of all its step folders."""
    have = {k: keys[k] for k in inp.keys}
    if set(get(inp.step).fanout) <= set(have):
        return layout.step_dir(inp.step, **{k: have[k] for k in get(inp.step).fanout})
    return L.fanin_dir(layout.root, inp.step, have)


def input_path(layout: L.RunLayout, inp: Input, keys: Mapping[str, Any]) -> Path:
    folder = producer_dir(layout, inp, keys)
    return folder / inp.file if inp.file else folder


def step_inputs(config: Config, step: str, layout: L.RunLayout | None = None, **keys: Any) -> dict[str, Path]:
    """The ``inputs`` mapping of one step (optional inputs only when their producer is switched on)."""
    row = get(step)
    lay = layout or L.RunLayout.of(config)
    out = {}
    for inp in row.inputs:
        if inp.optional and not (get(inp.step).enabled(config) and produced(config, inp, keys)):
            continue
        out[inp.name] = input_path(lay, inp, keys)
    return out


def produced(config: Config, inp: Input, keys: Mapping[str, Any]) -> bool:
    """Whether the producer of ``inp`` has a step for these keys (a step fanned out over arms runs for the arms of
    its kinds only: the ``debias`` step exists for inlp, not for self-debias)."""
    producer = get(inp.step)
    if "arm" not in producer.fanout:
        return True
    if "arm" in inp.keys and "arm" in keys:
        return str(keys["arm"]) in arm_values(config, producer.step, keys.get("target"))
    target = keys.get("target")
    return bool(arm_values(config, producer.step, target)) if "target" in inp.keys and target else True


def step_dir(config: Config, step: str, layout: L.RunLayout | None = None, **keys: Any) -> Path:
    row = get(step)
    return (layout or L.RunLayout.of(config)).step_dir(step, **row.keys_of(keys))


def resolve_io(config: Config, step: str, inputs: Mapping[str, Any] | None, out_dir: Path | str | None,
               **keys: Any) -> tuple[dict[str, Path], Path]:
    """A stage function's ``inputs`` and ``out_dir`` with what the caller left out taken from the table (the
    step's inputs in ``config``'s run folder, and its folder), so a library call needs only the config."""
    given = {k: Path(v) for k, v in (inputs or {}).items() if v is not None}
    needed = [i.name for i in get(step).inputs if not i.optional]
    resolved = given if all(n in given for n in needed) else {**step_inputs(config, step, **keys), **given}
    return resolved, Path(out_dir) if out_dir is not None else step_dir(config, step, **keys)


def step_options(row: Stage, keys: Mapping[str, Any]) -> dict[str, Any]:
    return {**row.options, **{k: keys[k] for k in row.fanout}}


def fanout_values(config: Config, key: str, targets: Iterable[str] | None = None, step: str | None = None,
                  target: str | None = None) -> list[Any]:
    """The values one fan-out key takes in a run (``arm``: the arms of ``step``'s kinds, of ``target`` or of any
    target)."""
    if key == "target":
        names = list(targets) if targets is not None else list(config.run.targets)
        return [L.safe_name(t, "target") for t in names]
    if key == "arm":
        names = [target] if target is not None else list(targets if targets is not None else config.run.targets)
        return list(dict.fromkeys(a for t in names for a in arm_values(config, step, t)))
    if key == "seed":
        return list(config.train.seeds)
    if key == "shard":
        return list(range(config.pipeline.generation_shards))
    raise ConfigError(f"unknown fan-out key {key!r}.")


def arm_values(config: Config, step: str | None, target: str | None) -> list[str]:
    """The arms ``step`` runs for ``target`` (:data:`context_cda.arms.STEP_KINDS`; a step not listed there: the
    trained ones; ``target`` None: every arm of train.arms of those kinds)."""
    kinds = A.STEP_KINDS.get(step or "", ("trained",))
    if target is None:
        return [L.safe_name(a, "arm") for a in A.of_kinds(config.train.arms, kinds, config.train.k)]
    return [L.safe_name(a, "arm") for a in A.for_target(config, target, kinds)]


def step_keys(config: Config, row: Stage, targets: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every key combination of ``row``'s fan-out in a run, in order (its arms follow each target's arms)."""
    combos: list[dict[str, Any]] = [{}]
    for key in row.fanout:
        combos = [{**c, key: v} for c in combos
                  for v in fanout_values(config, key, targets, row.step, c.get("target"))]
    return combos


# ---------------------------------------------------------------------------------------- documentation


def markdown() -> str:
    """The stage table and each step's folder as Markdown (docs/architecture.md embeds it; a test keeps the
    two equal; ``ccda config stages`` prints it)."""
    lines = ["| step | `ccda` | library function | config keys | fan-out | inputs (step: file) | GPU | folder |",
             "|---|---|---|---|---|---|---|---|"]
    for r in TABLE:
        inputs = "<br>".join(f"{i.name} = {i.step}" + (f": {i.file}" if i.file else "") + (" (opt.)" if i.optional
                             else "") for i in r.inputs) or "–"
        when = f" (when {r.when})" if r.when else ""
        lines.append(
            f"| {r.step}{when} | {' '.join([r.command, *r.cli_args[:2]]).replace('${run.run_dir}', 'RUN_DIR')} "
            f"| `{r.function}` | {', '.join(r.sections)} | {' × '.join(r.fanout) or '–'} | {inputs} | {r.gpu} "
            f"| `{L.FOLDERS[r.step]}` |"
        )
    return "\n".join(lines) + "\n"
