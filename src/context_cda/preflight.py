"""Pre-flight checks of ``ccda run`` (:func:`context_cda.pipeline.check_requirements` calls them) that need no
model loaded and take seconds: the model files the planned steps load, the services they talk to, the benchmark
files their evaluations read. Each failure is one :class:`~context_cda.errors.CCDAError` naming the key, the
file or the URL, and the fix.

* :func:`check_model_files` - every model reference the steps load resolves and its files are whole
  (:func:`context_cda.models.parse_ref`: GGUF and safetensors headers against their sizes, tokenizer files;
  :mod:`context_cda.model_files`);
* :func:`check_services` - the MLflow tracking server (an ``http(s)://`` tracking URI, when a step logs to it)
  and the S3 endpoint (when a location the steps read is ``s3://``) answer within :data:`PROBE_TIMEOUT_S`
  seconds (MLflow's own client retries an unreachable server for minutes before it says anything);
* :func:`check_benchmark_files` - the intrinsic benchmarks the steps evaluate on are parsed and checked
  (a malformed or duplicated item stops the run before any model loads).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import CCDAError, ServiceError

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

#: seconds a service has to answer the pre-flight probe
PROBE_TIMEOUT_S = 5.0
#: steps that load their target model, the generator, or the entailment judge
TARGET_STEPS = ("entropy-part", "finetune", "evaluate-vanilla")
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
        if _step(s) == "entropy-part":
            e = config.entropy
            if (e.generator_backend or config.augment.backend) != "openai":
                refs["entropy.generator_model" if e.generator_model else "augment.model"] = (
                    e.generator_model or config.augment.model)
            refs["entropy.judge_model"] = e.judge_model
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


def probe(url: str, what: str, fix: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """One HTTP GET of ``url``: any HTTP answer (even 401/403/404) means something listens; no answer within
    ``timeout`` seconds, a refused connection, an unknown host or a gateway error is a :class:`ServiceError`."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):  # noqa: S310
            return
    except urllib.error.HTTPError as e:
        if e.code not in (502, 503, 504):
            return
        why = f"HTTP {e.code} from a gateway"
    except OSError as e:  # URLError, a refused connection, a timeout
        reason = getattr(e, "reason", e)
        why = (f"no answer within {timeout:g} s" if isinstance(reason, TimeoutError)
               else str(getattr(reason, "strerror", None) or reason))
    raise ServiceError(f"{what} at {url} does not answer ({why}). {fix}")


def tracking_server(config: Config) -> str | None:
    """The tracking server's URL when tracking goes to one over HTTP (None: a local store or tracking off)."""
    if not config.tracking.enabled:
        return None
    from .tracking.runs import tracking_uri

    uri = tracking_uri(config)
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else None


def check_tracking_server(config: Config) -> None:
    url = tracking_server(config)
    if url:
        key = "tracking.uri" if config.tracking.uri else "MLFLOW_TRACKING_URI"
        probe(f"{url}/health", f"{key}: the MLflow tracking server",
              "Start it (mlflow server), fix the URI, or run without tracking (--set tracking.enabled=false).")


def s3_locations(config: Config, steps: Iterable[Any]) -> list[str]:
    """The ``s3://`` locations the steps read: model references, the corpus, benchmark files, the data mirror."""
    from .s3 import is_s3

    values: list[Any] = [*model_refs(config, steps).values(), config.ingest.path, config.evaluate.stereoset_path,
                         config.evaluate.crows_path, os.environ.get("CCDA_DATA_DIR")]
    return [str(v) for v in values if v and is_s3(v)]


def check_s3_endpoint(config: Config, steps: Iterable[Any]) -> None:
    from .s3 import endpoint

    found = s3_locations(config, steps)
    if found:
        url = endpoint() or "https://s3.amazonaws.com"
        probe(url, f"the S3 endpoint for {found[0]} (AWS_ENDPOINT_URL)",
              "Start the object store, set AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) to its URL, or use local paths.")


def check_services(config: Config, steps: Iterable[Any], tracked: Iterable[str]) -> None:
    """The tracking server when a step of ``tracked`` runs, and the S3 endpoint when an input is on S3."""
    steps = list(steps)
    if any(_step(s) in set(tracked) for s in steps):
        check_tracking_server(config)
    check_s3_endpoint(config, steps)


# ------------------------------------------------------------------------------------------------ benchmarks


def check_benchmark_files(config: Config, steps: Iterable[Any], paths: Mapping[str, Any] | None = None) -> None:
    """Parse the intrinsic benchmarks (StereoSet, CrowS-Pairs, next-token words) when a step evaluates on them;
    the parsed items are memoised, so the first evaluation reuses them."""
    if not any(_step(s) in EVALUATING_STEPS for s in steps):
        return
    from .evaluate import load_benchmarks

    load_benchmarks(config.evaluate, paths, config.run.data_cache, per_epoch_only=True)
