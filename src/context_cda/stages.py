"""The stage table: every step of the pipeline, once. Every front door derives from it.

Each row names a step (its folder in :mod:`context_cda.layout`), the library function that runs it (a lazy
``module:attr``), the config keys it reads, its fan-out (per target, per arm, per seed), its inputs (the outputs
of earlier steps, in layout terms), whether it needs a GPU, and the library code it runs. From this table:

* the local runner (:mod:`context_cda.pipeline`) plans its steps and decides what is up to date;
* the stage commands (``ccda <command>``) take their default inputs and output folders;
* ``dvc.yaml`` is generated (``ccda config dvc``; :mod:`context_cda.tools.dvcgen`), deps and params included;
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
from . import schemas as S
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
    # (table file, column, input name): the values of that column of the step's table are ids of that input's
    # table (a consumer checks that what it reads came from its own run: context_cda.steps.check_inputs)
    lineage: tuple[str, str, str] | None = None
    # "module:attr" of fn(view, config, keys) -> Config: the row's own narrowing of the config one step sees, beyond the lists
    # its fan-out keys iterate (step_view): what its key hashes and what a Kubeflow task of it gets
    view: str | None = None
    # which arm-corpus inputs (cda, augmented, filtered, neutral) a step reads: "arm" its own arm's, "group" those of
    # its arm's budget group (context_cda.arms.Arm.budget_group); None: every input of the row
    corpus: str | None = None
    # a result in itself (a model, an evaluation, the registry, the report): planned whenever its row is switched
    # on; any other step is planned only when a planned step reads it (no configured arm reading the augmented
    # corpus: no augment, sample, entropy or filter step)
    product: bool = False
    # DVC keeps the step's outs when it reruns the stage (``persist``): an item engine's shards or a fine-tuning's
    # finished epochs survive a killed `dvc repro`, and a step the stage command finds up to date is not wiped
    persist: bool = False
    # fan-out lists the row reads beyond its own value (the budget step: every arm of its budget group): DVC tracks
    # them whole
    reads_lists: tuple[str, ...] = ()
    # in a distributed job (torchrun, a Kubeflow TrainJob): "all", every rank runs the body (the fine-tuning; rank 0
    # writes); "main", rank 0 runs it while the others wait (context_cda.steps.run)
    ranks: str = "main"

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
_GEN = ("generation", "models")
_VALIDATED = {"outs": (L.VALID_FILE, L.QUARANTINE_FILE), "metrics": (L.RESULTS_FILE,)}


def _valid(boundary: str) -> dict[str, Any]:
    """A validation step's outs, and its valid rows' ids: those of the table it checked (input ``boundary``)."""
    return {**_VALIDATED, "lineage": (L.VALID_FILE, S.ID, boundary)}


_REPHRASED = (L.AUGMENTED_FILE, S.CDA_ID, "counterfactuals")  # augment, neutral: one row per counterfactual
_SAMPLED = (L.SAMPLES_FILE, S.ID, "augmented")  # sample: the validated contextual counterfactuals' ids
#: the tables the trained arms' corpora come from (context_cda.arms.corpus_input): a fine-tuning reads its own arm's,
#: its budget step those of its budget group (Stage.corpus)
_ARM_CORPORA = (Input("cda", "validate-cda", L.VALID_FILE), Input("augmented", "validate-augment", L.VALID_FILE),
                Input("filtered", "filter", None, ("target",)),
                Input("neutral", "validate-neutral", L.VALID_FILE))
_MODEL = ("models", "scoring", "evaluate/stats.py")
#: what decontamination reads (context_cda.evaluate.decontam): its settings, and the benchmark files it compares with
_EVAL_FILES = ("evaluate.stereoset_path", "evaluate.crows_path", "evaluate.winogender.path", "evaluate.winobias.path")
_DECONTAM = ("decontaminate", *_EVAL_FILES, "evaluate.winobias.split")
#: what a model card states of the run besides its evaluations (context_cda.publish.facts: the report's setup facts)
_CARD_FACTS = ("run.seed", "ingest.corpus", "ingest.path", "ingest.sample_n", "augment", "entropy", "decontaminate")
#: what the review's meaning judge reads when augment.review.meaning_model is null: the entropy step's judge
_MEANING_JUDGE = ("entropy.judge", "entropy.judge_model", "entropy.batch_size")
#: the entropy settings the sample step reads (the samples and their clusters: drawn and judged once per run) and
#: the ones each target's entropy step reads (scoring); together every field of ``entropy`` (a test keeps it so)
SAMPLE_KEYS = tuple(f"entropy.{k}" for k in (
    "n_samples", "temperature", "top_p", "max_tokens", "generator_backend", "generator_model", "judge", "judge_model",
    "rule", "embedding_threshold", "condition_on_x", "clustering", "min_samples", "batch_size", "shard_size", "limit"))
SCORE_KEYS = tuple(f"entropy.{k}" for k in ("estimator", "length_normalised", "batch_size", "shard_size"))

TABLE: tuple[Stage, ...] = (
    Stage("ingest", "ingest", "context_cda.ingest.corpus:run_ingest",
          ("run.seed", "run.attribute", "lexicon", "ingest", "cda.mapping", "cda.ambiguous", *_DECONTAM),
          code=("ingest", "cda", "evaluate/decontam.py"), artifact="sentences", config_files=("ingest.path", *_EVAL_FILES)),
    Stage("cda", "cda", "context_cda.cda:run_cda", ("run.seed", "run.attribute", "lexicon", "cda", *_DECONTAM),
          (Input("sentences", "ingest", L.SENTENCES_FILE),), code=("cda", "evaluate/decontam.py"), artifact="counterfactuals",
          config_files=_EVAL_FILES, lineage=(L.COUNTERFACTUALS_FILE, S.SOURCE_ID, "sentences")),
    Stage("validate-cda", "validate", "context_cda.validation:run_validate",
          ("run.attribute", "lexicon", "validate", "cda"),
          (Input("cda", "cda", L.COUNTERFACTUALS_FILE),), options={"boundary": "cda"}, code=("validation",),
          artifact="validated", cli_args=("--stage", "cda"), **_valid("cda")),
    Stage("augment-part", "augment", "context_cda.augment:run_augment",
          # entropy.judge / judge_model: the review's meaning judge defaults to the entropy step's judge model
          ("run.device", "run.attribute", "lexicon", "augment", *_MEANING_JUDGE, "pipeline.generation_shards"),
          (Input("counterfactuals", "validate-cda", L.VALID_FILE),), fanout=("shard",), gpu="generator",
          code=("augment", *_GEN, "items.py"), artifact="part", cli_args=("--no-progress",),
          generates=True, lineage=_REPHRASED, persist=True),
    Stage("augment", "augment", "context_cda.augment:run_augment_merge",
          ("augment", "pipeline.generation_shards", *_DECONTAM),
          (Input("parts", "augment-part"), Input("counterfactuals", "validate-cda", L.VALID_FILE)),
          code=("augment", "items.py", "evaluate/decontam.py"), artifact="augmented", cli_args=("--merge",),
          config_files=_EVAL_FILES, lineage=_REPHRASED),
    Stage("validate-augment", "validate", "context_cda.validation:run_validate",
          ("run.attribute", "lexicon", "validate", "augment"),
          (Input("augment", "augment", L.AUGMENTED_FILE),), options={"boundary": "augment"},
          code=("validation", "augment"), artifact="validated", cli_args=("--stage", "augment"), **_valid("augment")),
    Stage("neutral", "neutral", "context_cda.augment:run_neutral",
          ("run.device", "run.attribute", "lexicon", "augment", "neutral", *_MEANING_JUDGE, *_DECONTAM),
          (Input("counterfactuals", "validate-cda", L.VALID_FILE),), gpu="generator",
          code=("augment", *_GEN, "items.py", "cda", "evaluate/decontam.py"), artifact="neutral",
          cli_args=("--no-progress",), generates=True, when="train.arms~context-neutral", config_files=_EVAL_FILES,
          lineage=_REPHRASED, persist=True),
    Stage("validate-neutral", "validate", "context_cda.validation:run_validate",
          ("run.attribute", "lexicon", "validate", "augment", "neutral"),
          (Input("neutral", "neutral", L.AUGMENTED_FILE),), options={"boundary": "neutral"},
          code=("validation", "augment", "cda"), artifact="validated", cli_args=("--stage", "neutral"),
          when="train.arms~context-neutral", **_valid("neutral")),
    Stage("sample-part", "sample", "context_cda.entropy:run_sample",
          ("run.seed", "run.device", "run.attribute", "augment", *SAMPLE_KEYS, "pipeline.generation_shards"),
          (Input("augmented", "validate-augment", L.VALID_FILE),), fanout=("shard",), gpu="yes",
          code=("entropy", "augment", *_GEN, "items.py"), artifact="part",
          cli_args=("--no-progress",), generates=True, lineage=_SAMPLED, persist=True),
    Stage("sample", "sample", "context_cda.entropy:run_sample_merge",
          ("entropy.limit", "entropy.n_samples", "pipeline.generation_shards"),
          (Input("parts", "sample-part"), Input("augmented", "validate-augment", L.VALID_FILE)),
          code=("entropy", "items.py"), artifact="samples", cli_args=("--merge",), lineage=_SAMPLED),
    Stage("entropy", "entropy", "context_cda.entropy:run_entropy", ("run.device", "run.targets.{target}", *SCORE_KEYS),
          (Input("samples", "sample"),), fanout=("target",), gpu="yes",
          code=("entropy", "scoring", "models", "items.py"), artifact="scores",
          cli_args=("--no-progress",), lineage=(L.SCORES_FILE, S.ID, "samples"), persist=True),
    Stage("validate-entropy", "validate", "context_cda.validation:run_validate", ("validate", "entropy.n_samples"),
          (Input("entropy", "entropy", L.SCORES_FILE, ("target",)),), fanout=("target",),
          options={"boundary": "entropy"}, code=("validation",), artifact="validated",
          cli_args=("--stage", "entropy"), **_valid("entropy")),
    Stage("filter", "filter", "context_cda.entropy:run_filter", ("filter",),
          (Input("scores", "validate-entropy", L.VALID_FILE, ("target",)),), fanout=("target",),
          code=("entropy/filter.py",), artifact="filtered"),
    Stage("debias", "debias", "context_cda.baselines:run_debias",
          ("run.device", "run.targets.{target}", "lexicon", "cda.mode", "baselines", "evaluate.bias_type"),
          (Input("sentences", "ingest"), Input("cda", "validate-cda", L.VALID_FILE)),
          fanout=("target", "arm"), gpu="yes", code=("baselines", "arms.py", "cda", *_MODEL), artifact="debias",
          cli_args=("--no-progress",), product=True),
    Stage("budget", "finetune", "context_cda.train:run_budget",
          ("run.targets.{target}", "train.arms", "train.k", "train.max_seq_len", "train.token_budget",
           "cda.mode", "lexicon", *_DECONTAM),
          _ARM_CORPORA, fanout=("target", "arm"), code=("train", "cda", "arms.py", "models"),
          artifact="budget", cli_args=("--budget",), view="context_cda.train:budget_view", corpus="group",
          reads_lists=("train.arms",)),
    Stage("finetune", "finetune", "context_cda.train:run_finetune",
          ("run.seed", "run.device", "run.targets.{target}", "cda.mode", "lexicon", "train", "evaluate",
           "baselines.dropout", "decontaminate"),
          (*_ARM_CORPORA, Input("budget", "budget", L.BUDGET_FILE, ("target", "arm"))),
          fanout=("target", "arm", "seed"), gpu="yes",
          code=("train", "cda", "evaluate", "arms.py", *_MODEL),
          artifact="checkpoint", outs=(L.FINAL_DIR, L.TRAIN_ROWS_FILE, REJECTED, L.EPOCH_PREDICTIONS_DIR),
          metrics=(L.CORPUS_STATS_FILE,), plots=(L.METRICS_FILE,), view="context_cda.train:finetune_view",
          corpus="arm", product=True, persist=True, ranks="all"),
    Stage("evaluate-vanilla", "evaluate", "context_cda.evaluate:run_evaluate",
          ("run.device", "run.targets.{target}", "evaluate"), fanout=("target",), gpu="yes",
          code=("evaluate", *_MODEL), artifact="evaluation", when="evaluate.after_training",
          cli_args=("--no-progress",), product=True, **_PER_BENCHMARK),
    Stage("evaluate", "evaluate", "context_cda.evaluate:run_evaluate", ("run.device", "evaluate"),
          (Input("model", "finetune", L.FINAL_DIR, ("target", "arm", "seed")),),
          fanout=("target", "arm", "seed"), gpu="yes", code=("evaluate", *_MODEL),
          artifact="evaluation", when="evaluate.after_training", cli_args=("--no-progress",), product=True,
          **_PER_BENCHMARK),
    Stage("evaluate-posthoc", "evaluate", "context_cda.evaluate:run_evaluate",
          ("run.device", "run.targets.{target}", "evaluate", "baselines", "train.k"),
          (Input("debias", "debias", None, ("target",), optional=True),),
          fanout=("target", "arm"), gpu="yes", code=("evaluate", "arms.py", *_MODEL),
          artifact="evaluation", cli_args=("--no-progress",), fresh="context_cda.evaluate.posthoc:available",
          product=True, **_PER_BENCHMARK),
    Stage("register", "register", "context_cda.publish:run_register_target",
          ("run.attribute", "run.targets.{target}", "train.arms", "train.seeds", "train.k", "baselines", "tracking",
           "evaluate", *_CARD_FACTS),
          (Input("finetune", "finetune", None, ("target",), optional=True),
           Input("evaluations", "evaluate", None, ("target",), optional=True),
           Input("filtered", "filter", None, ("target",), optional=True),
           Input("posthoc", "evaluate-posthoc", None, ("target",), optional=True),
           Input("debias", "debias", None, ("target",), optional=True)),
          fanout=("target",), code=("tracking", "publish", "evaluate", "report/setup.py", "models/info.py"),
          artifact="registration", when="tracking.enabled",
          side_effects=True, cache=False, fresh="context_cda.tracking:registered_versions_exist", product=True),
    Stage("report", "report", "context_cda.report:run_report",
          ("report", "run.seed", "run.attribute", "run.targets", "ingest.sample_n", "augment", "entropy",
           "decontaminate", "evaluate", "tracking.enabled", "tracking.promotion", "train.arms", "train.seeds",
           "train.k", "baselines"),
          (Input("finetune", "finetune", optional=True), Input("evaluations", "evaluate", optional=True),
           Input("registrations", "register", optional=True), Input("augment", "augment", optional=True),
           Input("entropy", "entropy", optional=True), Input("filtered", "filter", optional=True),
           Input("posthoc", "evaluate-posthoc", optional=True), Input("ingest", "ingest"), Input("cda", "cda")),
          code=("report", "evaluate/stats.py"), artifact="report", cli_args=("${run.run_dir}",), product=True),
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


def command_line(row: Stage, keys: Mapping[str, Any]) -> str:
    """The stage command that runs one step of ``row`` (``ccda validate --stage cda``, ``ccda finetune --target
    gpt2 --arm cda --seed 13``): what an error tells a user to rerun."""
    args = [a for a in row.cli_args if not a.startswith("${")]
    flags = [f"--{k} {v}" for k, v in keys.items()]
    return "`" + " ".join(["ccda", row.command, *args, *flags]) + "`"


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


#: settings that give a step's tables their meaning for every step after it (the attribute the corpus was
#: selected and swapped for, the M samples an item's entropy is estimated from): a step refuses an input whose
#: producer ran with other values, whether it reads them itself or not (context_cda.steps.check_inputs)
CONTRACT_KEYS = ("run.attribute", "entropy.n_samples")


def shared_keys(mine: Iterable[str], theirs: Iterable[str]) -> list[str]:
    """The config keys two lists of sections have in common, at the finer of two nested spellings (``cda`` and
    ``cda.mode`` share ``cda.mode``)."""
    theirs = list(theirs)
    out: list[str] = []
    for a in mine:
        for b in theirs:
            key = a if a == b or a.startswith(b + ".") else b if b.startswith(a + ".") else None
            if key is not None and key not in out:
                out.append(key)
    return out


#: fan-out key -> the config list (or mapping) it iterates: a step with that key sees only its own value in it
#: (:func:`step_view`), so adding a seed, a target or an arm changes nothing a finished step read, under every door:
#: the runner's and the commands' step key (:func:`key_sections`), DVC's params (:func:`param_keys`) and the config
#: a Kubeflow task gets. An arm that is not one of train.arms (a published checkpoint) narrows nothing.
FANOUT_LISTS = {"seed": "train.seeds", "target": "run.targets", "arm": "train.arms"}
#: mappings keyed by a fan-out value, narrowed the same way: an arm's evaluation benchmarks, a target's published
#: checkpoints
FANOUT_MAPS = {"arm": "evaluate.arm_benchmarks", "target": "baselines.published"}
#: config keys a step may read that change none of its outputs (where models, data and the run live, how errors and
#: progress are handled): in every step's view, in no step's key nor DVC params
ENV_KEYS = ("run.run_dir", "run.model_cache", "run.data_cache", "run.allow_errors", "run.max_error_fraction",
            "tracking.enabled", "tracking.uri", "tracking.experiment", "profile")


def _own_lists(row: Stage) -> list[str]:
    return [FANOUT_LISTS[k] for k in row.fanout if k in FANOUT_LISTS]


def step_view(config: Config, row: Stage, keys: Mapping[str, Any]) -> Config:
    """The config as one step of ``row`` sees it: each list and mapping its fan-out keys iterate narrowed to the
    step's own value (``train.seeds`` -> [seed], ``run.targets`` -> {target: its model}, ``train.arms`` -> [arm],
    ``evaluate.arm_benchmarks`` -> the arm's entry), then the row's own narrowing (``Stage.view``: e.g. a
    fine-tuning sees the per-epoch evaluation settings of its arm only). The step's key hashes this view's values of
    the row's config keys; a Kubeflow task gets this view."""
    view = config.model_copy(deep=True)
    if "seed" in row.fanout:
        view.train.seeds = [int(keys["seed"])]
    if "target" in row.fanout:
        t = str(keys["target"])
        if t in config.run.targets:
            view.run.targets = {t: config.run.targets[t]}
        view.baselines.published = {k: v for k, v in config.baselines.published.items() if k == t}
    if "arm" in row.fanout:
        arm = str(keys["arm"])
        if arm in config.train.arms:
            view.train.arms = [arm]
        view.evaluate.arm_benchmarks = {k: v for k, v in config.evaluate.arm_benchmarks.items() if k == arm}
    return resolve(row.view)(view, config, keys) if row.view else view


def key_sections(config: Config, row: Stage, keys: Mapping[str, Any]) -> dict[str, Any]:
    """The config values a step's up-to-date key hashes: the row's config keys (less :data:`ENV_KEYS`) as the step
    sees them (:func:`step_view`): a per-seed step holds its own seed, not the others, so adding a seed, an arm or a
    target reruns none of the steps already done."""
    view = step_view(config, row, keys)
    return {s: config_value(view, s) for s in sections_of(row, keys) if s not in ENV_KEYS}


def param_keys(config: Config, row: Stage) -> list[str]:
    """The config keys DVC tracks for ``row`` (its ``params``): its keys (less :data:`ENV_KEYS`), a section that
    holds a list or mapping the row fans out over spelled out key by key without it (``train`` -> ``train.epochs``,
    ... but not ``train.seeds`` nor ``train.arms`` for a fine-tuning), so adding a seed or an arm reruns no
    finished step there either. (DVC cannot narrow a row's own view further; where it runs a stage whose key did not
    change, the stage command finds the step up to date and skips it.)"""
    drop = [d for d in (*_own_lists(row), *(FANOUT_MAPS[k] for k in row.fanout if k in FANOUT_MAPS))
            if d not in row.reads_lists]
    out: list[str] = []
    for section in row.sections:
        inner = [d for d in drop if d.startswith(section + ".")]
        if section in drop or section in ENV_KEYS:
            continue
        if inner:
            out += _spelled(config, section, inner)
        else:
            out.append(section)
    return out


def _spelled(config: Config, section: str, without: list[str]) -> list[str]:
    """``section``'s keys one by one, down to the parents of ``without``, leaving those out."""
    out: list[str] = []
    for k in config_value(config, section):
        key = f"{section}.{k}"
        if key in without:
            continue
        deeper = [w for w in without if w.startswith(key + ".")]
        out += _spelled(config, key, deeper) if deeper else [key]
    return out


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
    corpora = corpus_inputs(config, row, keys)
    out = {}
    for inp in row.inputs:
        if corpora is not None and inp.name in A.CORPUS_INPUTS.values() and inp.name not in corpora:
            continue
        if inp.optional and not (inp.step in planned(config) and produced(config, inp, keys)):
            continue
        out[inp.name] = input_path(lay, inp, keys)
    return out


def planned(config: Config) -> set[str]:
    """The rows a run plans: every switched-on row that is a result in itself (``Stage.product``), and every row one
    of those reads, step by step back (an optional input does not make its producer needed; an arm-corpus input
    counts only when one of the run's arms reads it). With ``train.arms=[cda]`` no augment, sample, entropy or
    filter step is planned."""
    on = {r.step for r in TABLE if r.enabled(config)}
    need = {s for s in on if get(s).product}
    stack = list(need)
    while stack:
        row = get(stack.pop())
        read = None
        if row.corpus is not None:
            read = set().union(*(corpus_inputs(config, row, keys) or set() for keys in step_keys(config, row)))
        for inp in row.inputs:
            if inp.optional or inp.step not in on or inp.step in need:
                continue
            if read is not None and inp.name in A.CORPUS_INPUTS.values() and inp.name not in read:
                continue
            need.add(inp.step)
            stack.append(inp.step)
    return need


def corpus_inputs(config: Config, row: Stage, keys: Mapping[str, Any]) -> set[str] | None:
    """The arm-corpus inputs one step of ``row`` reads (``Stage.corpus``): its own arm's, or its budget group's
    (None: the row reads every input it names)."""
    if row.corpus is None or "arm" not in keys:
        return None
    arm = str(keys["arm"])
    arms = [arm] if row.corpus == "arm" else A.budget_group(config, arm) or [arm]
    return {A.corpus_input(a, config.train.k) for a in arms}


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
