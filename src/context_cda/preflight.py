"""Pre-flight checks of ``ccda run`` (:func:`context_cda.pipeline.check_requirements` calls them) that need no
model loaded and take seconds: the model files the planned steps load, the services they talk to, the benchmark
files their evaluations read. Each failure is one :class:`~context_cda.errors.CCDAError` naming the key, the
file or the URL, and the fix.

* :func:`check_model_files` - every model reference the steps load resolves and its files are whole
  (:func:`context_cda.models.parse_ref`: GGUF and safetensors headers against their sizes, tokenizer files;
  :mod:`context_cda.model_files`);
* :func:`check_services` - the MLflow tracking server (an ``http(s)://`` tracking URI, when a step logs to it)
  and the S3 endpoint (when a location the steps read is ``s3://``) answer within seconds
  (:func:`context_cda.services.probe`; MLflow's own client retries an unreachable server for minutes before it
  says anything);
* :func:`check_benchmark_files` - the intrinsic benchmarks the steps evaluate on are parsed and checked
  (a malformed or duplicated item stops the run before any model loads).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .errors import CCDAError

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

#: steps that load their target model (the generator and the entailment judge: ``sample-part``)
TARGET_STEPS = ("entropy", "finetune", "evaluate-vanilla")
#: steps that score the intrinsic benchmarks (finetune: every epoch)
EVALUATING_STEPS = ("finetune", "evaluate-vanilla", "evaluate")


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
    from .models import parse_ref

    for key, ref in model_refs(config, steps).items():
        try:
            parse_ref(ref)
        except CCDAError as e:
            raise type(e)(f"{key}: {e}") from None


# ------------------------------------------------------------------------------------------------ services


def s3_locations(config: Config, steps: Iterable[Any]) -> list[str]:
    """The ``s3://`` locations the steps read: model references, the corpus, benchmark files, the data mirror."""
    from .s3 import is_s3

    values: list[Any] = [*model_refs(config, steps).values(), config.ingest.path, config.evaluate.stereoset_path,
                         config.evaluate.crows_path, os.environ.get("CCDA_DATA_DIR")]
    return [str(v) for v in values if v and is_s3(v)]


def check_services(config: Config, steps: Iterable[Any], tracked: Iterable[str]) -> None:
    """The tracking server when a step of ``tracked`` runs (:func:`context_cda.tracking.runs.check_server`), and
    the S3 endpoint when an input is on S3 (:func:`context_cda.s3.check_endpoint`)."""
    steps = list(steps)
    if any(_step(s) in set(tracked) for s in steps):
        from .tracking.runs import check_server

        check_server(config)
    found = s3_locations(config, steps)
    if found:
        from .s3 import check_endpoint

        check_endpoint(found[0])


# ------------------------------------------------------------------------------------------------ benchmarks


def check_benchmark_files(config: Config, steps: Iterable[Any]) -> None:
    """Parse the intrinsic benchmarks (StereoSet, CrowS-Pairs) when a step evaluates on them and their files are
    here (an explicit path, the mirror or the data cache; a dataset still to download is the data check's, and
    the evaluating step's, to find). The parsed items are memoised, so the first evaluation reuses them."""
    if not any(_step(s) in EVALUATING_STEPS for s in steps):
        return
    from .evaluate import load_items
    from .evaluate.data import local_benchmark_file

    cfg = config.evaluate
    for name in ("stereoset", "crows"):
        wanted = name in cfg.benchmarks or (name == "stereoset" and "next-token" in cfg.benchmarks)
        path = local_benchmark_file(name, getattr(cfg, f"{name}_path"), config.run.data_cache) if wanted else None
        if path is not None:
            load_items(name, cfg, path, config.run.data_cache)
