"""One way to run a step: the envelope every door shares.

The local runner (:mod:`context_cda.pipeline`), every stage command (``ccda <stage>``, and through them ``dvc
repro``) and the Kubeflow components (``components/_runtime.py``) run a step of the stage table
(:mod:`context_cda.stages`) with :func:`run`, which

1. takes the step's inputs from the table (:func:`make`; a door may replace some: ``--input``, a component's
   input artifacts) and its folder from the run layout;
2. holds the step folder's lock (:func:`lock`): a second process in the same folder is refused, naming the holder;
3. holds the SIGTERM guard (:func:`context_cda.runtime.signals.sigterm_raises`): a SIGTERM stops the stage at the next
   Python instruction; finished shards and epochs are on disk already, the lock is released on the way out;
4. checks that every table it reads came from this run's producer step (:func:`check_inputs`);
5. hands the stage body a :class:`Recorder` (:func:`recorder`), to which the body reports its timings, outputs,
   counts (one typed record, :class:`Counts`) and summary;
6. writes ``manifest.json``: the step's name and keys, ``config`` = the config values its up-to-date key hashes
   (the row's :func:`~context_cda.stages.key_sections`), input and output hashes, versions, counts, timings and
   the summary;
7. applies the item-error policy: a step with error items (transient failures: the generator's) raises
   :class:`~context_cda.errors.ItemErrors` (exit code 75) unless ``run.allow_errors``; either way it is not marked
   up to date, so the next run retries exactly those items;
8. writes the up-to-date marker ``.ccda-step.json`` (the step's key and its inputs' fingerprints).

:func:`is_fresh` reads the marker, so any mix of doors skips what another door finished. A stage body
(``run_<stage>(config, inputs, out_dir, **options) -> summary``) keeps only its own work: called directly (a
notebook, a unit test) it writes its tables and nothing else.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import layout as L
from . import stages as T
from .errors import InputError, check_item_errors
from .io import MANIFEST, file_lock, json_hash, package_versions, path_hash, read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

MARKER = ".ccda-step.json"
#: how a marker's input hashes were computed: 2 leaves the resume state and caches out (layout.RESUME_DIRS), so
#: removing them (`ccda clean`, a finished fine-tuning) leaves the later steps up to date; markers without a rule
#: are rule 1
HASH_RULE = 2
#: how a marker's step key was computed: 3 hashes the row's config keys as the step sees them (stages.step_view);
#: older markers (no rule) are read by :func:`legacy_key` (below)
KEY_RULE = 3


# ---------------------------------------------------------------------------------------------- the record


@dataclass
class Counts:
    """What a step did, in numbers, the same fields for every step: ``items_in`` (the items or rows it had to
    do), ``out`` (what it produced), ``rejected`` (final refusals, with their reasons in its rejected table),
    ``errors`` (items that failed for a transient reason: not results, retried by the next run) and
    ``error_reasons`` (how many errors of each kind)."""

    items_in: int = 0
    out: int = 0
    rejected: int = 0
    errors: int = 0
    error_reasons: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Counts:
        """The record a manifest holds (an older manifest's free-form counts: zeros)."""
        data = data or {}
        fields = {k: data[k] for k in ("items_in", "out", "rejected", "errors") if isinstance(data.get(k), int)}
        return cls(**fields, error_reasons=dict(data.get("error_reasons") or {}))


class Recorder:
    """What a stage body reports to the envelope: timings (:meth:`timed`), then :meth:`finish` with its counts,
    outputs and summary. The envelope writes them into the step's manifest; a body called outside the envelope
    gets a recorder that writes nothing."""

    def __init__(self, out_dir: Path | str, versions: tuple[str, ...] = ()) -> None:
        self.out_dir = Path(out_dir)
        self.versions = tuple(versions)
        self.timings: dict[str, float] = {}
        self.counts = Counts()
        self.outputs: dict[str, Path] = {}
        self.summary: dict[str, Any] = {}
        self.finished = False
        self.claimed = False
        self.started = time.time()
        self._t0 = time.perf_counter()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - t, 4)

    def finish(self, counts: Counts, outputs: Mapping[str, Path | str] | None = None,
               summary: Mapping[str, Any] | None = None) -> None:
        self.counts = counts
        self.outputs = {k: Path(v) for k, v in (outputs or {}).items()}
        self.summary = dict(summary or {})
        self.finished = True


_ACTIVE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("ccda_step_recorder", default=None)


def recorder(out_dir: Path | str, versions: tuple[str, ...] = ()) -> Recorder:
    """The recorder of the step the envelope is running (the first body to ask gets it; ``versions``: the
    libraries whose versions the manifest records), or one that writes nothing (a library call, a body called
    from inside another body)."""
    rec = _ACTIVE.get()
    if rec is not None and not rec.claimed:
        rec.claimed = True
        rec.versions = tuple(dict.fromkeys((*rec.versions, *versions)))
        return rec
    return Recorder(out_dir, versions)


# ---------------------------------------------------------------------------------------------- one step


@dataclass
class Step:
    """One step of a run: a row of the stage table with its fan-out keys, its inputs and its folder."""

    row: T.Stage
    keys: dict[str, Any]
    out_dir: Path
    inputs: dict[str, Path]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def stage(self) -> str:
        return self.row.step

    @property
    def name(self) -> str:  # e.g. "finetune[gpt2/cda/seed-13]", "augment-part[part-0]"
        parts = [f"seed-{v}" if k == "seed" else f"part-{v}" if k == "shard" else str(v)
                 for k, v in self.keys.items()]
        return f"{self.row.step}[{'/'.join(parts)}]" if parts else self.row.step

    def key(self, config: Config) -> str:
        return json_hash({"step": self.row.step, "options": self.options,
                          "sections": T.key_sections(config, self.row, self.keys)})


def make(config: Config, step: str, layout: L.RunLayout | None = None, inputs: Mapping[str, Any] | None = None,
         out: Path | str | None = None, **keys: Any) -> Step:
    """The step ``step`` with fan-out ``keys``: its inputs from the table (each of ``inputs`` that is not None
    replaces the table's input of that name; the row's ``config_files``, e.g. a local corpus, are inputs too) and
    its folder in the run layout (or ``out``)."""
    row = T.get(step)
    keys = row.keys_of(keys)
    lay = layout or L.RunLayout.of(config)
    found = T.step_inputs(config, step, lay, **keys)
    found.update({k: Path(v) for k in row.config_files if (v := T.config_value(config, k))})
    found.update({k: Path(v) for k, v in (inputs or {}).items() if v is not None})
    folder = Path(out) if out is not None else lay.step_dir(step, **keys)
    return Step(row, keys, folder, found, T.step_options(row, keys))


def given(step: str, inputs: Mapping[str, Any], out: Path | str, **keys: Any) -> Step:
    """The step ``step`` with fan-out ``keys`` whose inputs and folder are given, not looked up in the run layout:
    a Kubeflow task's artifacts (components/_runtime.py), a TrainJob's copies on its run volume
    (:mod:`context_cda.train.trainjob`). Run it with ``check=False``: its DAG handed it its producers' outputs."""
    row = T.get(step)
    return Step(row, row.keys_of(keys), Path(out), {k: Path(v) for k, v in inputs.items() if v is not None},
                T.step_options(row, keys))


def detached(config: Config, step: str, out: Path | str, inputs: Mapping[str, Any]) -> Step:
    """A step of ``step``'s kind outside the run's table (``ccda evaluate --model REF``: a model no target names),
    with its folder and inputs given; its key holds the row's config keys that name no fan-out key. Run it with
    ``check=False`` (it has no producer step) and its options (the model, its name) as ``extra``."""
    import dataclasses

    row = T.get(step)
    row = dataclasses.replace(row, sections=tuple(s for s in row.sections if "{" not in s), fanout=(), fresh=None)
    return Step(row, {}, Path(out), {k: Path(v) for k, v in inputs.items() if v is not None}, {})


# ---------------------------------------------------------------------------------------------- up to date


def input_hashes(step: Step, rule: int = HASH_RULE) -> dict[str, str | None]:
    """The fingerprint of each input (None for one that is missing); the step's own marker and lock, and (rule 2)
    resume state and caches, are left out."""
    return {name: path_hash(p, ignore=(MARKER, L.LOCK_FILE), ignore_dirs=L.RESUME_DIRS if rule >= 2 else ())
            if Path(p).exists() else None for name, p in step.inputs.items()}


def read_marker(out_dir: Path | str) -> dict[str, Any] | None:
    try:
        rec = json.loads((Path(out_dir) / MARKER).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def is_fresh(step: Step, config: Config) -> bool:
    """Up to date: the marker records this step's key and its inputs' fingerprints, its outputs are there, and
    the row's own check (``Stage.fresh``, e.g. the model registry) agrees. A marker written before the keys said
    what a step depends on (no ``key_rule``) is read by its own rule (:func:`_legacy_inputs_match`)."""
    rec = read_marker(step.out_dir)
    if rec is None:
        return False
    hashes = input_hashes(step, int(rec.get("hash_rule", 1)))
    if rec.get("key_rule") == KEY_RULE:
        same = rec.get("key") == step.key(config) and None not in hashes.values() and rec.get("inputs") == hashes
    else:
        same = rec.get("key") == legacy_key(config, step) and _legacy_inputs_match(step, rec, hashes)
    return (same and outputs_exist(step.out_dir)
            and (step.row.fresh is None or bool(T.resolve(step.row.fresh)(config, step.out_dir, **step.keys))))


def _legacy_inputs_match(step: Step, rec: Mapping[str, Any], hashes: Mapping[str, str | None]) -> bool:
    """An older marker: every input it and the step both name is unchanged, and a fine-tuning's token budget (an
    input those markers did not have) is the one it trained with, so a run finished by older code is not redone."""
    recorded = rec.get("inputs") or {}
    if any(hashes.get(n) is None or hashes[n] != recorded[n] for n in recorded if n in hashes):
        return False
    if "budget" in step.inputs and "budget" not in recorded:
        try:
            budget = read_json(step.inputs["budget"]).get("token_budget")
        except (OSError, ValueError, InputError):
            return False
        return budget is not None and budget == summary_of(step.out_dir).get("token_budget")
    return all(n in recorded for n in hashes)


def outputs_exist(out_dir: Path | str) -> bool:
    """The step's manifest is there and every output it lists still exists."""
    try:
        manifest = read_json(Path(out_dir) / MANIFEST)
    except (OSError, ValueError, InputError):
        return False
    return isinstance(manifest, dict) and all(Path(o["path"]).exists()
                                              for o in manifest.get("outputs", {}).values())


def summary_of(out_dir: Path | str) -> dict[str, Any]:
    """The summary a finished step recorded in its manifest ({} when there is none)."""
    try:
        return dict(read_json(Path(out_dir) / MANIFEST).get("summary") or {})
    except (OSError, ValueError, AttributeError, InputError):
        return {}


# ---------------------------------------------------------------------------------------------- running


@dataclass
class Ran:
    """What :func:`run` returns: the stage's summary and its counts."""

    summary: dict[str, Any]
    counts: Counts


def _world(config: Config):
    """The job's processes (:mod:`context_cda.runtime.distributed`): one, or torchrun's N, whose process group is opened
    here with ``train.dist_timeout_s``. Every rank runs the command; only rank 0 locks, records and marks."""
    from .runtime import distributed

    return distributed.init(config.train.dist_timeout_s, config.run.device)


def agreed_fresh(step: Step, config: Config) -> bool:
    """:func:`is_fresh`, rank 0's answer on every process of a distributed job (so none of them runs a step the
    others skip)."""
    world = _world(config)
    return bool(world.agree(is_fresh(step, config) if world.main else None))


@contextlib.contextmanager
def lock(folder: Path | str, what: str) -> Iterator[Path]:
    """Hold step folder ``folder``'s lock for the block (:func:`context_cda.io.file_lock`; ``what`` names the
    work for whoever is refused)."""
    with file_lock(Path(folder) / L.LOCK_FILE, what) as path:
        yield path


def run(step: Step, config: Config, check: bool = True, body: Any = None, **extra: Any) -> Ran:
    """Run ``step`` inside the envelope (see the module docstring); ``extra`` goes to the stage function
    (``body``: another function of the same shape than the row's, e.g. a test's stage with its own generator).
    ``check`` False skips :func:`check_inputs` (the Kubeflow door: its DAG hands each task its producer's
    artifact). In a distributed job (torchrun) a row that runs on every rank (``Stage.ranks``: the fine-tuning)
    runs its body on each, rank 0 alone writing; any other step runs on rank 0 while the others wait for its
    outcome (:func:`_on_rank0`)."""
    from .runtime import distributed

    world = _world(config)
    if world.distributed and step.row.ranks != "all":
        return _on_rank0(step, config, world, check, body, extra)
    guard = distributed.collective_errors(step.name, str(step.out_dir)) if world.distributed \
        else contextlib.nullcontext()
    with guard:
        return _run(step, config, world.main, check, body, extra)


def _run(step: Step, config: Config, main: bool, check: bool, body: Any, extra: Mapping[str, Any]) -> Ran:
    from .runtime.progress import activity
    from .runtime.progress import step as progress_step
    from .runtime.signals import sigterm_raises

    fn = body or T.get_stage(step.row.step)
    with (lock(step.out_dir, step.name) if main else contextlib.nullcontext()), sigterm_raises(), \
            progress_step(step.name), activity(step.name):
        if main:
            (step.out_dir / MARKER).unlink(missing_ok=True)  # a step that starts is not up to date until it ends
        if check:
            check_inputs(step, config)
        rec = Recorder(step.out_dir)
        token = _ACTIVE.set(rec)
        try:
            summary = fn(config, dict(step.inputs), step.out_dir, **step.options, **extra)
        finally:
            _ACTIVE.reset(token)
        if main:
            _record(step, config, rec, summary)
        check_item_errors(step.name, rec.counts.errors, rec.counts.items_in, rec.counts.error_reasons,
                          step.out_dir / L.ERRORS_FILE, config.run.allow_errors)
        if main and not rec.counts.errors:
            write_json(step.out_dir / MARKER, {"stage": step.row.step, "name": step.name, "keys": step.keys,
                                               "key": step.key(config), "key_rule": KEY_RULE,
                                               "hash_rule": HASH_RULE,
                                               "inputs": input_hashes(step)})
    return Ran(summary if isinstance(summary, dict) else {}, rec.counts)


def _on_rank0(step: Step, config: Config, world, check: bool, body: Any, extra: Mapping[str, Any]) -> Ran:
    """A step that is not distributed (the token budget), in a distributed job: rank 0 runs it; the other ranks
    wait for its outcome, then carry its summary, or stop without a word of their own when it failed (rank 0's
    line says why)."""
    from .runtime.distributed import RankZeroFailed

    if world.main:
        try:
            ran = _run(step, config, True, check, body, extra)
        except BaseException as e:
            world.agree(("failed", getattr(e, "exit_code", 1)))
            raise
        world.agree(("done", ran.summary, asdict(ran.counts)))
        return ran
    outcome = world.agree(None)
    if outcome[0] == "failed":
        raise RankZeroFailed(f"{step.name} failed on rank 0", exit_code=int(outcome[1]))
    return Ran(dict(outcome[1]), Counts(**outcome[2]))


def _record(step: Step, config: Config, rec: Recorder, summary: Any) -> None:
    """The step's ``manifest.json``."""
    if not rec.finished:  # a body that reported nothing: its summary is all there is
        rec.finish(Counts(), {}, summary if isinstance(summary, Mapping) else {})
    rec.timings["total"] = round(time.perf_counter() - rec._t0, 4)
    hashes = input_hashes(step)
    sections = T.key_sections(config, step.row, step.keys)
    write_json(step.out_dir / MANIFEST, {
        "stage": step.row.step,
        "name": step.name,
        "keys": step.keys,
        "key": step.key(config),
        "config": sections,
        "config_hash": json_hash(sections),
        "inputs": {k: {"path": str(p), "sha256": hashes.get(k)} for k, p in step.inputs.items()},
        "outputs": {k: {"path": str(v), "sha256": path_hash(v) if v.exists() else None}
                    for k, v in rec.outputs.items()},
        "versions": package_versions(rec.versions),
        "counts": asdict(rec.counts),
        "timings": rec.timings,
        "started": datetime.fromtimestamp(rec.started, tz=timezone.utc).isoformat(),
        "finished": datetime.now(tz=timezone.utc).isoformat(),
        "summary": dict(rec.summary or (summary if isinstance(summary, Mapping) else {})),
    })


# ---------------------------------------------------------------------------------------------- provenance


def check_inputs(step: Step, config: Config) -> None:
    """Every table ``step`` reads came from its own run's producer step: the producer ran with the settings this
    config gives it (its recorded key), from this run's tables (the fingerprints its manifest recorded of its
    own inputs), and its ids lie within the table it was made from. One :class:`InputError` line names the step
    to rerun. An input with no manifest beside it (a user's own table) is checked by its ids only."""
    layout = L.RunLayout.of(config)
    for inp in step.row.inputs:
        path = step.inputs.get(inp.name)
        producer = T.get(inp.step)
        if path is None or not Path(path).exists() or not set(producer.fanout) <= set(inp.keys):
            continue  # missing (the stage says so) or a fan-in folder (each part was checked when it was read)
        folder = Path(path).parent if inp.file else Path(path)
        manifest = _manifest(folder)
        keys = {k: step.keys[k] for k in producer.fanout}
        if manifest is not None and "key" in manifest:
            _check_settings(step, config, inp, Path(path), manifest, keys)
            _check_lineage(step, config, layout, inp, Path(path), manifest, keys)
        _check_ids(step, config, layout, inp, Path(path), keys)


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        m = read_json(folder / MANIFEST)
    except (OSError, ValueError, InputError):
        return None
    return m if isinstance(m, dict) else None


def _rerun(config: Config, producer: T.Stage, keys: Mapping[str, Any]) -> str:
    return f"rerun {T.command_line(producer, keys)} first (or `ccda run`, which reruns what changed)"


def _check_settings(step: Step, config: Config, inp: T.Input, path: Path, manifest: Mapping[str, Any],
                    keys: Mapping[str, Any]) -> None:
    """The producer ran with the settings that give its table its meaning for every later step
    (:data:`context_cda.stages.CONTRACT_KEYS`: the attribute, the samples' M): e.g. `ccda cda --attribute race` on
    sentences selected for gender is refused. Other settings may differ: a stage command run with its own flags
    (``ccda ingest --corpus X``) is not undone by the next command, and a step may read a setting its producer
    read otherwise (an evaluation's settings are not the fine-tuning's per-epoch ones); where the producer's
    output is not this run's, its recorded input fingerprints say so (:func:`_check_lineage`)."""
    producer = T.get(inp.step)
    want = Step(producer, dict(keys), path, {}, T.step_options(producer, keys)).key(config)
    if manifest.get("key") == want:
        return
    then = manifest.get("config") or {}
    diff = []
    for key in T.shared_keys(list(then), T.CONTRACT_KEYS):
        old, new = _dig(then, key), T.config_value(config, key)
        if old is not _MISSING and json_hash(old) != json_hash(new):
            diff.append(f"{key}: {_short(old)} there, {_short(new)} here")
    if diff:
        raise InputError(f"{step.name}: its input {inp.name} ({path}) was made by {inp.step} with other settings "
                         f"({'; '.join(diff[:3])}); {_rerun(config, producer, keys)}.")


_MISSING = object()


def _dig(recorded: Mapping[str, Any], key: str) -> Any:
    """The value of config key ``key`` in a manifest's ``config`` (sections by their own names: ``train`` holds
    ``train.epochs``)."""
    for section, value in recorded.items():
        if key == section:
            return value
        if key.startswith(section + "."):
            for part in key[len(section) + 1:].split("."):
                if not isinstance(value, Mapping) or part not in value:
                    return _MISSING
                value = value[part]
            return value
    return _MISSING


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_lineage(step: Step, config: Config, layout: L.RunLayout, inp: T.Input, path: Path,
                   manifest: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
    """The producer read this run's tables: each of its inputs that this run has, by its recorded fingerprint."""
    recorded = manifest.get("inputs") or {}
    ours = T.step_inputs(config, inp.step, layout, **keys)
    for name, p in ours.items():
        rec = recorded.get(name)
        if not isinstance(rec, Mapping) or not Path(p).exists() or rec.get("sha256") is None:
            continue
        if path_hash(p, ignore=(MARKER, L.LOCK_FILE), ignore_dirs=L.RESUME_DIRS) != rec["sha256"]:
            where = "another run's" if Path(rec.get("path", p)).resolve() != Path(p).resolve() else "an older"
            raise InputError(f"{step.name}: its input {inp.name} ({path}) was made from {where} {name} "
                             f"({rec.get('path')}), not from this run's {p}; "
                             f"{_rerun(config, T.get(inp.step), keys)}.")


def _check_ids(step: Step, config: Config, layout: L.RunLayout, inp: T.Input, path: Path,
               keys: Mapping[str, Any]) -> None:
    """The ids of the table read lie within the table its producer read (``Stage.lineage``)."""
    producer = T.get(inp.step)
    if producer.lineage is None:
        return
    file, column, source = producer.lineage
    table = path if inp.file else path / file
    upstream = T.step_inputs(config, inp.step, layout, **keys).get(source)
    if upstream is None or not table.is_file() or not Path(upstream).exists():
        return
    if Path(upstream).is_dir():
        lin = T.get(next(i.step for i in producer.inputs if i.name == source)).lineage
        upstream = Path(upstream) / lin[0] if lin else None
    if upstream is None or not Path(upstream).is_file():
        return
    got, have = _ids(table, column), _ids(Path(upstream), "id")
    foreign = got - have if got is not None and have is not None else set()
    if foreign:
        raise InputError(f"{step.name}: its input {inp.name} ({table}) holds {len(foreign)} {column}(s) that are not "
                         f"in {upstream}, e.g. {sorted(foreign)[0]!r}: it comes from another run or an older "
                         f"{source}; {_rerun(config, producer, keys)}.")


def _ids(table: Path, column: str) -> set[str] | None:
    import pyarrow.parquet as pq

    try:
        return {str(v) for v in pq.read_table(table, columns=[column]).column(column).to_pylist() if v is not None}
    except Exception:  # noqa: BLE001 - no such column, not Parquet: the stage's own reader says what is wrong
        return None


# ------------------------------------------------------------------------------------------------ older markers


#: each row's config keys as the step keys of markers without a ``key_rule`` (written before the keys said what a
#: step depends on) hashed them: the row's sections less the lists its target and seed iterate
LEGACY_SECTIONS: dict[str, tuple[str, ...]] = {
    "ingest": ("run.seed", "run.attribute", "lexicon", "ingest", "cda.mapping", "cda.ambiguous", "decontaminate",
               "evaluate.stereoset_path", "evaluate.crows_path"),
    "cda": ("run.seed", "run.attribute", "lexicon", "cda", "decontaminate", "evaluate.stereoset_path",
            "evaluate.crows_path"),
    "validate-cda": ("run.seed", "run.attribute", "lexicon", "validate", "cda"),
    "augment-part": ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "entropy.judge",
                     "entropy.judge_model", "pipeline.generation_shards"),
    "augment": ("run.attribute", "lexicon", "augment", "pipeline.generation_shards", "decontaminate",
                "evaluate.stereoset_path", "evaluate.crows_path"),
    "validate-augment": ("run.attribute", "lexicon", "validate", "augment"),
    "neutral": ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "neutral", "entropy.judge",
                "entropy.judge_model"),
    "validate-neutral": ("run.attribute", "lexicon", "validate", "augment", "neutral"),
    "sample-part": ("run.seed", "run.device", "run.attribute", "augment", "entropy.n_samples", "entropy.temperature",
                    "entropy.top_p", "entropy.max_tokens", "entropy.generator_backend", "entropy.generator_model",
                    "entropy.judge", "entropy.judge_model", "entropy.rule", "entropy.embedding_threshold",
                    "entropy.condition_on_x", "entropy.clustering", "entropy.min_samples", "entropy.batch_size",
                    "entropy.shard_size", "entropy.limit", "pipeline.generation_shards"),
    "sample": ("entropy.limit", "pipeline.generation_shards"),
    "entropy": ("run.device", "run.targets.{target}", "entropy.estimator", "entropy.length_normalised",
                "entropy.batch_size", "entropy.shard_size"),
    "validate-entropy": ("validate",),
    "filter": ("filter",),
    "debias": ("run.device", "run.targets.{target}", "lexicon", "cda.mode", "baselines", "evaluate.bias_type"),
    "finetune": ("run.seed", "run.device", "run.targets.{target}", "cda.mode", "lexicon", "train", "evaluate",
                 "baselines.dropout"),
    "evaluate-vanilla": ("run.seed", "run.device", "run.targets.{target}", "evaluate"),
    "evaluate": ("run.seed", "run.device", "evaluate"),
    "evaluate-posthoc": ("run.seed", "run.device", "run.targets.{target}", "evaluate", "baselines"),
    "register": ("run.targets.{target}", "train.arms", "train.seeds", "train.k", "baselines", "tracking",
                 "evaluate.bootstrap", "evaluate.bias_type"),
    "report": ("report", "tracking.enabled", "train.arms", "train.seeds", "baselines", "evaluate.bootstrap"),
}


def legacy_key(config: Config, step: Step) -> str | None:
    """The step key an older marker holds when the step is up to date under ``config`` (None: a row those markers
    did not know)."""
    sections = LEGACY_SECTIONS.get(step.row.step)
    if sections is None:
        return None
    drop = [{"seed": "train.seeds", "target": "run.targets"}[k] for k in step.row.fanout if k in ("seed", "target")]
    out: dict[str, Any] = {}
    for section in (s.format(**step.keys) for s in sections):
        if section in drop:
            continue
        value = T.config_value(config, section)
        for key in drop:
            parent, _, leaf = key.rpartition(".")
            if section == parent and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k != leaf}
        out[section] = value
    return json_hash({"step": step.row.step, "options": step.options, "sections": out})
