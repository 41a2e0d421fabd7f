"""Pre-flight of a run: everything the planned steps need, checked before the first step starts.

``ccda run`` (:func:`context_cda.pipeline.check_requirements`) calls these before anything runs, so a misspelt
benchmark, a partial data mirror, a damaged model file or a server that does not answer stops the run at once
instead of twenty minutes in. Nothing here loads a model; each check takes seconds.

Data and names — one line per problem, naming the config key (or the flag) the user would change; the runner
raises them together:

* :func:`needed_datasets` — what a configuration reads: the ingest corpus and every configured benchmark's
  datasets, with the config key of each one's explicit path (``ccda data list`` prints the same rows);
* :func:`check_benchmarks` — ``evaluate.benchmarks`` names only known benchmarks (when a step scores any);
* :func:`check_datasets` — every dataset a planned step reads is there: an explicit path exists, else the
  mirror (``$CCDA_DATA_DIR``) or the data cache holds it intact, else it is downloaded now (the step would do the
  same later; a failed download is found here, with every other missing dataset).

Models, services and benchmark files — each failure one :class:`~context_cda.errors.CCDAError` naming the key,
the file or the URL, and the fix:

* :func:`check_model_files` - every model reference the steps load resolves and its files are whole
  (:func:`context_cda.models.parse_ref`: GGUF and safetensors headers against their sizes, tokenizer files;
  :mod:`context_cda.models.files`);
* :func:`check_services` - the MLflow tracking server (an ``http(s)://`` tracking URI, when a step logs to it)
  and the S3 endpoint (when a location the steps read is ``s3://``) answer within seconds
  (:func:`context_cda.data.services.probe`; MLflow's own client retries an unreachable server for minutes before it
  says anything);
* :func:`check_benchmark_files` - the intrinsic benchmarks the steps evaluate on are parsed and checked
  (a malformed or duplicated item stops the run before any model loads).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CCDAError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

#: steps that read the ingest corpus / every configured benchmark / the per-epoch benchmarks only
CORPUS_STEPS = ("ingest",)
BENCHMARK_STEPS = ("evaluate", "evaluate-vanilla")
PER_EPOCH_STEPS = ("finetune",)
#: steps that score the intrinsic benchmarks (finetune: every epoch)
EVALUATING_STEPS = (*PER_EPOCH_STEPS, *BENCHMARK_STEPS)
#: steps that compare their training texts with ``decontaminate.benchmarks`` (and finetune's cda-neutral arm)
DECONTAM_STEPS = ("ingest", "cda", "augment", "neutral")
INGEST = "ingest"
DECONTAMINATE = "decontaminate"
CDA_NEUTRAL_FINETUNE = "finetune:cda-neutral"

# ------------------------------------------------------------------------------------------------ data and names


def needed_datasets(config: Config) -> list[tuple[str, str, str, str | None]]:
    """(dataset, used by, config key of the explicit path, its value) for everything ``config`` reads: the
    ingest corpus (used by ``ingest``) and every configured benchmark's files (used by the benchmark's name);
    one row per dataset and key (users joined by ", ")."""
    from ..evaluate.data import benchmark_datasets
    from ..ingest.corpus import corpus_dataset

    rows: list[tuple[str, str, str, str | None]] = []
    if config.ingest.path:
        rows.append((config.ingest.corpus, INGEST, "ingest.path", config.ingest.path))
    else:
        rows.append((str(corpus_dataset(config)), INGEST, "ingest.path", None))
    rows += benchmark_datasets(config.evaluate)
    if config.decontaminate.enabled:  # the benchmarks no training text may hold, whether evaluated or not
        compared = config.evaluate.model_copy(update={"benchmarks": list(config.decontaminate.benchmarks)})
        rows += [(ds, DECONTAMINATE, key, value) for ds, _, key, value in benchmark_datasets(compared)]
    merged: dict[tuple[str, str, str | None], list[str]] = {}
    for ds, user, key, explicit in rows:
        users = merged.setdefault((ds, key, explicit), [])
        users += [user] if user not in users else []
    return [(ds, ", ".join(users), key, explicit) for (ds, key, explicit), users in merged.items()]


def _users(steps: Iterable[str], config: Config) -> set[str]:
    """Who among ``ingest``, ``decontaminate`` and the configured benchmarks reads data in the planned ``steps``
    (:func:`step_names`)."""
    from ..evaluate import get_benchmark

    steps = set(steps)
    users = {INGEST} if steps & set(CORPUS_STEPS) else set()
    if steps & set(BENCHMARK_STEPS):
        users |= set(config.evaluate.benchmarks)
    if steps & set(PER_EPOCH_STEPS):
        users |= {b for b in config.evaluate.benchmarks if get_benchmark(b).per_epoch}
    if config.decontaminate.enabled and steps & {*DECONTAM_STEPS, CDA_NEUTRAL_FINETUNE}:
        users.add(DECONTAMINATE)
    return users


def step_names(steps: Iterable[Any]) -> list[str]:
    """The planned steps' names for :func:`check_datasets`, and :data:`CDA_NEUTRAL_FINETUNE` when a finetune step of
    the cda-neutral arm is planned (it decontaminates the rewrites it makes)."""
    steps = list(steps)
    names = [s.row.step for s in steps]
    cda_neutral = any(s.row.step == "finetune" and s.keys.get("arm") == "cda-neutral" for s in steps)
    return names + ([CDA_NEUTRAL_FINETUNE] if cda_neutral else [])


def check_benchmarks(config: Config, steps: Iterable[str]) -> list[str]:
    """One line when a planned step scores benchmarks and ``evaluate.benchmarks`` (or an arm's list in
    ``evaluate.arm_benchmarks``) names an unknown one."""
    from ..evaluate.registry import check_config_names

    if not set(steps) & set(EVALUATING_STEPS):
        return []
    try:
        check_config_names(config.evaluate)  # and each arm's list of evaluate.arm_benchmarks
    except CCDAError as e:
        return [str(e)]
    return []


def check_datasets(config: Config, steps: Iterable[str]) -> list[str]:
    """One line per dataset a planned step reads that cannot be had (see the module docstring), and a last line
    with the ``ccda data fetch`` command that brings the missing named ones."""
    steps = list(steps)
    if check_benchmarks(config, steps):
        return []  # the unknown names are the problem to report; their datasets are unknown too
    users = _users(steps, config)
    problems, missing = [], []
    for name, used_by, key, explicit in needed_datasets(config):
        wanted = [u for u in used_by.split(", ") if u in users]
        if not wanted:
            continue
        why = f"needed by {', '.join(wanted)}"
        problem = _explicit_problem(key, explicit, why) if explicit else _dataset_problem(name, key, why, config)
        if problem:
            problems.append(problem)
            missing += [] if explicit else [name]
    return problems + ([fetch_hint(missing)] if missing else [])


def _explicit_problem(key: str, value: str, why: str) -> str | None:
    """A local explicit path that does not exist (an ``s3://`` one is the service check's to reach)."""
    from ..data import s3

    if s3.is_s3(value) or Path(value).expanduser().exists():
        return None
    return f"{key}: {value} does not exist ({why}); fix the path, or set {key} to null to read the named dataset."


def _dataset_problem(name: str, key: str, why: str, config: Config) -> str | None:
    """None when dataset ``name`` is in the mirror or the cache, or downloads now; else where it was looked for,
    in one line."""
    from urllib.parse import urlparse

    from ..data import datasets as D

    tried: list[str] = []
    try:
        if D.obtain(D.get(name), config.run.data_cache, tried) is not None:
            return None
    except CCDAError as e:  # e.g. a changed copy in the mirror (checksum mismatch)
        return f"{name} ({why}): {e}"
    places = []
    for t in tried:
        if t.startswith("download "):
            url, _, reason = t.removeprefix("download ").partition(": ")
            t = f"download from {urlparse(url).netloc or url} failed ({reason})"
        places.append(t)
    return f"{name} ({why}; or set {key} to a local copy): " + "; ".join(places)


def fetch_hint(names: list[str]) -> str:
    """How to bring the named datasets: one ``ccda data fetch`` command (into the mirror when one is set)."""
    from ..data.datasets import DATA_DIR_ENV, data_dir

    mirror = data_dir()
    to = f" --to {mirror}" if mirror else ""
    return (f"to fix: on a machine with network access, `ccda data fetch {' '.join(dict.fromkeys(names))}{to}` "
            f"brings {'them' if len(names) > 1 else 'it'}{' into the mirror' if mirror else ''}"
            f"{'' if mirror else f'; bring that folder here and set {DATA_DIR_ENV} to it'}.")


# ------------------------------------------------------------------------------------------------ models

#: steps that load their target model (the generator and the entailment judge: ``sample-part``)
TARGET_STEPS = ("entropy", "finetune", "evaluate-vanilla")


def _step(s: Any) -> str:
    return s.row.step


def model_refs(config: Config, steps: Iterable[Any]) -> dict[str, str]:
    """``{config key: model reference}`` of every model the steps load."""
    refs: dict[str, str] = {}
    for s in steps:
        if "target" in s.keys and _step(s) in TARGET_STEPS:
            refs[f"run.targets.{s.keys['target']}"] = config.run.targets[s.keys["target"]]
        if _step(s) == "augment-part" and config.augment.backend != "openai":
            refs["augment.model"] = config.augment.model
        if _step(s) == "sample-part":
            backend, model = config.sample_generator()
            if backend != "openai":
                refs["entropy.generator_model" if config.entropy.generator_model else "augment.model"] = model
            refs["entropy.judge_model"] = config.entropy.judge_model
    return refs


def check_model_files(config: Config, steps: Iterable[Any]) -> None:
    """Every model the steps load resolves and its files are whole; the error names the config key."""
    from ..models import parse_ref

    for key, ref in model_refs(config, steps).items():
        try:
            parse_ref(ref)
        except CCDAError as e:
            raise type(e)(f"{key}: {e}") from None


# ------------------------------------------------------------------------------------------------ services


def s3_locations(config: Config, steps: Iterable[Any]) -> list[str]:
    """The ``s3://`` locations the steps read: model references, the corpus, benchmark files, the data mirror."""
    from ..data.s3 import is_s3

    values: list[Any] = [*model_refs(config, steps).values(), config.ingest.path, config.evaluate.stereoset_path,
                         config.evaluate.crows_path, os.environ.get("CCDA_DATA_DIR")]
    return [str(v) for v in values if v and is_s3(v)]


def check_services(config: Config, steps: Iterable[Any], tracked: Iterable[str]) -> None:
    """The tracking server when a step of ``tracked`` runs (:func:`context_cda.tracking.runs.check_server`), and
    the S3 endpoint when an input is on S3 (:func:`context_cda.data.s3.check_endpoint`)."""
    steps = list(steps)
    if any(_step(s) in set(tracked) for s in steps):
        from ..tracking.runs import check_server

        check_server(config)
    found = s3_locations(config, steps)
    if found:
        from ..data.s3 import check_endpoint

        check_endpoint(found[0])


# ------------------------------------------------------------------------------------------------ benchmarks


def benchmarks_read(config: Config, steps: Iterable[Any]) -> tuple[list[str], bool]:
    """(the benchmarks the planned steps evaluate on, whether they compare training texts with
    ``decontaminate.benchmarks``)."""
    from ..evaluate import get_benchmark

    names = set(step_names(steps))
    cfg = config.evaluate
    scored = set(cfg.benchmarks) if names & set(BENCHMARK_STEPS) else set()
    if names & set(PER_EPOCH_STEPS):
        scored |= {b for b in cfg.benchmarks if get_benchmark(b).per_epoch}
    if "next-token" in scored:
        scored.add("stereoset")  # its contexts
    read = [b for b in ("stereoset", "stereoset-inter", "crows", "winogender", "winobias") if b in scored]
    return read, DECONTAMINATE in _users(names, config)


def check_benchmark_files(config: Config, steps: Iterable[Any]) -> None:
    """Parse every benchmark file the planned steps read, before the first one runs: the intrinsic benchmarks a step
    evaluates on (StereoSet, CrowS-Pairs, WinoGender, WinoBias) when their files are here (an explicit path, the
    mirror or the data cache; a dataset still to download is the data check's, and the evaluating step's, to find),
    and every benchmark of ``decontaminate.benchmarks`` when a step compares its training texts with them (their
    index is built now: the steps reuse it). A malformed or duplicated item stops the run with one error line
    naming the file and line. The parsed items are memoised, so the first evaluation reuses them."""
    from ..errors import CCDAError

    read, decontaminates = benchmarks_read(config, steps)
    try:
        for name in read:
            _parse_benchmark(config, name)
        if decontaminates:
            from ..evaluate.decontam import index_for

            index_for(config)
    except CCDAError as e:
        raise type(e)(f"pre-flight, nothing was run: {e}") from None


def _parse_benchmark(config: Config, name: str) -> None:
    """Parse benchmark ``name``'s files as its evaluation reads them, when they are here without a download."""
    from ..data import datasets as D
    from ..evaluate import load_items
    from ..evaluate.data import local_benchmark_file

    cfg = config.evaluate
    file = {"stereoset-inter": "stereoset"}.get(name, name)  # intersentence: the StereoSet file's other split
    if file in ("stereoset", "crows"):
        path = local_benchmark_file(file, getattr(cfg, f"{file}_path"), config.run.data_cache)
    else:
        explicit = getattr(cfg, name).path
        path = (Path(explicit).expanduser() if explicit and "://" not in explicit
                else None if explicit else D.find(D.get(name), config.run.data_cache))
    if path is not None:
        load_items(name, cfg, path if file in ("stereoset", "crows") else None, config.run.data_cache)
