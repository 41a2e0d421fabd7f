"""Pre-flight of a run: the datasets and benchmark names the planned steps need, checked before the first step.

``ccda run`` (:func:`context_cda.pipeline.check_requirements`) calls these before anything runs, so a misspelt
benchmark or a partial data mirror stops the run at once instead of twenty minutes in. Each helper returns one
line per problem, naming the config key (or the flag) the user would change; the runner raises them together.

* :func:`needed_datasets` — what a configuration reads: the ingest corpus and every configured benchmark's
  datasets, with the config key of each one's explicit path (``ccda data list`` prints the same rows);
* :func:`check_benchmarks` — ``evaluate.benchmarks`` names only known benchmarks (when a step scores any);
* :func:`check_datasets` — every dataset a planned step reads is there: an explicit path exists, else the
  mirror (``$CCDA_DATA_DIR``) or the data cache holds it intact, else it is downloaded now (the step would do the
  same later; a failed download is found here, with every other missing dataset).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CCDAError

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

#: steps that read the ingest corpus / every configured benchmark / the per-epoch benchmarks only
CORPUS_STEPS = ("ingest",)
BENCHMARK_STEPS = ("evaluate", "evaluate-vanilla")
PER_EPOCH_STEPS = ("finetune",)
INGEST = "ingest"


def needed_datasets(config: Config) -> list[tuple[str, str, str, str | None]]:
    """(dataset, used by, config key of the explicit path, its value) for everything ``config`` reads: the
    ingest corpus (used by ``ingest``) and every configured benchmark's files (used by the benchmark's name);
    one row per dataset and key (users joined by ", ")."""
    from .corpus import corpus_dataset
    from .evaluate.data import benchmark_datasets

    rows: list[tuple[str, str, str, str | None]] = []
    if config.ingest.path:
        rows.append((config.ingest.corpus, INGEST, "ingest.path", config.ingest.path))
    else:
        rows.append((str(corpus_dataset(config)), INGEST, "ingest.path", None))
    rows += benchmark_datasets(config.evaluate)
    merged: dict[tuple[str, str, str | None], list[str]] = {}
    for ds, user, key, explicit in rows:
        users = merged.setdefault((ds, key, explicit), [])
        users += [user] if user not in users else []
    return [(ds, ", ".join(users), key, explicit) for (ds, key, explicit), users in merged.items()]


def _users(steps: Iterable[str], config: Config) -> set[str]:
    """Who among ``ingest`` and the configured benchmarks reads data in the planned ``steps``."""
    from .evaluate import get_benchmark

    steps = set(steps)
    users = {INGEST} if steps & set(CORPUS_STEPS) else set()
    if steps & set(BENCHMARK_STEPS):
        users |= set(config.evaluate.benchmarks)
    if steps & set(PER_EPOCH_STEPS):
        users |= {b for b in config.evaluate.benchmarks if get_benchmark(b).per_epoch}
    return users


def check_benchmarks(config: Config, steps: Iterable[str]) -> list[str]:
    """One line when a planned step scores benchmarks and ``evaluate.benchmarks`` names an unknown one."""
    from .evaluate import check_names

    if not set(steps) & {*BENCHMARK_STEPS, *PER_EPOCH_STEPS}:
        return []
    try:
        check_names(config.evaluate.benchmarks, "evaluate.benchmarks")
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
    from . import s3

    if s3.is_s3(value) or Path(value).expanduser().exists():
        return None
    return f"{key}: {value} does not exist ({why}); fix the path, or set {key} to null to read the named dataset."


def _dataset_problem(name: str, key: str, why: str, config: Config) -> str | None:
    """None when dataset ``name`` is in the mirror or the cache, or downloads now; else where it was looked for,
    in one line."""
    from urllib.parse import urlparse

    from . import datasets as D

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
    from .datasets import DATA_DIR_ENV, data_dir

    mirror = data_dir()
    to = f" --to {mirror}" if mirror else ""
    return (f"to fix: on a machine with network access, `ccda data fetch {' '.join(dict.fromkeys(names))}{to}` "
            f"brings {'them' if len(names) > 1 else 'it'}{' into the mirror' if mirror else ''}"
            f"{'' if mirror else f'; bring that folder here and set {DATA_DIR_ENV} to it'}.")
