"""MLflow runs of a pipeline: one parent run per run directory, one nested run per (target, arm).

Runs are found again by tags (``ccda_run_dir``, ``ccda_kind``, ``ccda_target``, ``ccda_arm``), so every front
door (CLI, local runner, DVC, KFP components in separate pods) logs into the same runs without passing ids around.

Where: ``tracking.uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<parent of run_dir>/mlflow.db`` with the
artifacts in ``<parent of run_dir>/mlartifacts``. With ``tracking.enabled: false`` every call is a no-op.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ServiceError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

logger = logging.getLogger(__name__)

TAG_RUN_DIR = "ccda_run_dir"
TAG_KIND = "ccda_kind"
TAG_TARGET = "ccda_target"
TAG_ARM = "ccda_arm"
TAG_SEED = "ccda_seed"
PARENT_TAG = "mlflow.parentRunId"


def tracking_root(config: Config) -> Path:
    """Folder of the default local store: the parent of the run directory."""
    return config.run_dir().expanduser().resolve().parent


def tracking_uri(config: Config) -> str:
    if config.tracking.uri:
        return config.tracking.uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{tracking_root(config) / 'mlflow.db'}"


def _is_local(uri: str) -> bool:
    return uri.startswith(("sqlite:", "file:")) or "://" not in uri


_ANSWERED: set[str] = set()  # tracking servers that answered a probe in this process


def server_url(config: Config) -> str | None:
    """The tracking server's URL when tracking goes to one over HTTP (None: a local store or tracking off)."""
    uri = tracking_uri(config)
    return uri.rstrip("/") if config.tracking.enabled and uri.startswith(("http://", "https://")) else None


def check_server(config: Config) -> None:
    """An HTTP tracking server must answer its ``/health`` within seconds (:func:`context_cda.data.services.probe`),
    checked once per process: otherwise MLflow's client retries for minutes in silence."""
    from ..data.services import probe

    url = server_url(config)
    if url and url not in _ANSWERED:
        key = "tracking.uri" if config.tracking.uri else "MLFLOW_TRACKING_URI"
        probe(f"{url}/health", f"{key}: the MLflow tracking server",
              "Start it (mlflow server), fix the URI, or run without tracking (--set tracking.enabled=false).",
              refuse=(404,))
        _ANSWERED.add(url)


def get_client(config: Config):
    from mlflow.tracking import MlflowClient

    check_server(config)
    uri = tracking_uri(config)
    if uri.startswith("sqlite:///"):
        _create_sqlite_store(uri, Path(uri[len("sqlite:///") :]))
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


_SQLITE_READY: set[str] = set()


def _create_sqlite_store(uri: str, db: Path) -> None:
    """Open a local SQLite store once per process, one process at a time.

    The first opener of a new ``mlflow.db`` creates its tables and runs MLflow's schema migrations; two stages
    doing that at once (parallel finetune tasks under kfp.local, two seeds on one node) both migrate and one fails
    ("duplicate column name"). An exclusive ``flock`` on ``mlflow.db.lock`` orders the first opens; later ones
    find the schema current and do no work.
    """
    import fcntl

    key = str(db.resolve())
    if key in _SQLITE_READY:
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=uri, registry_uri=uri)  # creates or migrates the schema
            client.search_experiments(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _SQLITE_READY.add(key)


def experiment_id(client, config: Config) -> str:
    name = config.tracking.experiment
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    location = None
    if _is_local(tracking_uri(config)):
        location = (tracking_root(config) / "mlartifacts").as_uri()
    try:
        return client.create_experiment(name, artifact_location=location)
    except Exception:  # noqa: BLE001 - created concurrently by another stage
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def _find_run(client, exp_id: str, tags: Mapping[str, str]) -> str | None:
    flt = " and ".join(f"tags.{k} = '{_quote(v)}'" for k, v in tags.items())
    runs = client.search_runs([exp_id], filter_string=flt, max_results=1, order_by=["attributes.start_time DESC"])
    return runs[0].info.run_id if runs else None


def _quote(v: str) -> str:
    return str(v).replace("'", "\\'")


def pipeline_run_id(config: Config, client=None) -> str:
    """The parent run of this run directory (created on first use)."""
    client = client or get_client(config)
    exp = experiment_id(client, config)
    run_dir = str(config.run_dir().expanduser().resolve())
    tags = {TAG_RUN_DIR: run_dir, TAG_KIND: "pipeline"}
    found = _find_run(client, exp, tags)
    if found:
        return found
    run = client.create_run(
        exp, run_name=f"pipeline:{Path(run_dir).name}", tags={**tags, "ccda_profile": str(config.profile)}
    )
    return run.info.run_id


def arm_run_id(config: Config, target: str, arm: str, client=None, seed: int | None = None) -> str:
    """The nested run of one (target, arm[, seed]) under the pipeline run (created on first use)."""
    client = client or get_client(config)
    exp = experiment_id(client, config)
    run_dir = str(config.run_dir().expanduser().resolve())
    tags = {TAG_RUN_DIR: run_dir, TAG_KIND: "arm", TAG_TARGET: target, TAG_ARM: arm}
    if seed is not None:
        tags[TAG_SEED] = str(seed)
    found = _find_run(client, exp, tags)
    if found:
        return found
    parent = pipeline_run_id(config, client)
    name = f"{target}/{arm}" + (f"/seed-{seed}" if seed is not None else "")
    run = client.create_run(exp, run_name=name, tags={**tags, PARENT_TAG: parent})
    return run.info.run_id


class Tracker:
    """Logging into one MLflow run through the client API (no global active run)."""

    def __init__(self, client, run_id: str) -> None:
        self.client, self.run_id = client, run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        existing = self.client.get_run(self.run_id).data.params
        new = [Param(k, _param(v)) for k, v in params.items() if k not in existing]
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        import time

        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        items = [Metric(_metric_key(k), float(v), ts, int(step)) for k, v in metrics.items() if _finite(v)]
        if items:
            self.client.log_batch(self.run_id, metrics=items)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, str(v))

    def log_artifact(self, path: Path | str, artifact_path: str | None = None) -> None:
        p = Path(path)
        if not p.exists():
            return
        if p.is_dir():
            self.client.log_artifacts(self.run_id, str(p), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(p), artifact_path)

    def log_dict(self, obj: Any, name: str) -> None:
        self.client.log_text(self.run_id, json.dumps(obj, indent=2, default=str), name)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status)


class NullTracker:
    """What :func:`tracker_for` returns with tracking off: every call does nothing."""

    run_id: str | None = None
    client = None

    def __getattr__(self, name: str):
        return lambda *a, **k: None


def tracker_for(
    config: Config, target: str | None = None, arm: str | None = None, seed: int | None = None
) -> Tracker | NullTracker:
    """A tracker for the (target, arm[, seed]) run, or for the pipeline run when no target is given."""
    if not config.tracking.enabled:
        return NullTracker()
    try:
        client = get_client(config)
        rid = (arm_run_id(config, target, arm or "", client, seed) if target
               else pipeline_run_id(config, client))
    except ImportError as e:
        raise ServiceError("tracking needs mlflow: pip install 'context-cda[train]' (or tracking.enabled: false).") from e
    except Exception as e:  # noqa: BLE001 - unreachable server, bad URI
        if type(e).__name__ in {"MlflowException", "RestException", "ConnectionError", "OperationalError"}:
            raise ServiceError(
                f"MLflow at {tracking_uri(config)} failed: {e}. Check MLFLOW_TRACKING_URI / tracking.uri, or set "
                "tracking.enabled: false."
            ) from e
        raise
    return Tracker(client, rid)


def _param(v: Any) -> str:
    s = json.dumps(v) if isinstance(v, list | dict) else str(v)
    return s[:6000]


def _metric_key(k: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in k)


def _finite(v: Any) -> bool:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return False
    return f == f and f not in (float("inf"), float("-inf"))
