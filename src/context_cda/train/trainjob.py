"""Fine-tuning as a Kubeflow Trainer v2 ``TrainJob`` (``train.launcher: trainjob``).

With the ``pod`` launcher a Kubeflow finetune task trains in its own pod. With ``trainjob`` the task is a small CPU
pod that hands the fine-tuning to Kubeflow Trainer, the cluster's engine for distributed training, and waits:

1. it copies its input artifacts (the arm's corpus, the token budget) onto the run volume
   (``pipeline.trainjob.volume``, a PVC every node mounts), into a job folder named by what the task's output
   depends on (its config, keys and budget: :func:`job_key`), and writes ``task.json`` there (:func:`write_task`);
2. it creates a ``TrainJob`` (trainer.kubeflow.org/v1alpha1, :func:`manifest`) on the ClusterTrainingRuntime
   ``pipeline.trainjob.runtime`` (k8s/trainer: Trainer's ``torch-distributed`` with this project's settings):
   ``pipeline.trainjob.nodes`` nodes of ``pipeline.accelerator_count`` GPUs each, the train image, each node
   running ``torchrun --no-python ccda finetune --task <job>/task.json`` (Trainer injects torchrun's ``PET_*``
   settings: nodes, processes per node, node rank, master address), the run volume, the model cache, the S3,
   MLflow and hub secrets and the pipeline's ConfigMap;
3. it waits for the TrainJob (:func:`wait`): ``Complete`` -> it copies the job folder's step folder (final model,
   metrics.csv, predictions, manifest) into its output artifact; ``Failed`` -> the task fails with the TrainJob's
   own reason and message (:class:`TrainJobFailed`). A retried task finds its job folder and its TrainJob by the
   same key: a running one is waited for, a failed one replaced, and the new one resumes from the checkpoints the
   last one left on the volume. A SIGTERM to the task (the run cancelled) deletes its TrainJob, whose ranks then
   stop cleanly keeping their finished epochs.

Every node runs the same step envelope and loop as one pod (:mod:`context_cda.runtime.distributed`): only rank 0 writes.
The Kubernetes API is reached with the ``kubernetes`` client (what kfp itself depends on), in-cluster.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CCDAError, ConfigError, ServiceError

GROUP, VERSION, PLURAL, KIND = "trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"
#: the Kubeflow Trainer release whose CRDs k8s/trainer/crds vendors: the schema every TrainJob made here is checked
#: against (tests/pipelines/test_trainjob.py)
TRAINER_VERSION = "v2.3.0"
#: the runtime's container (and Job) that runs the trainer: Trainer's constant for every torch runtime
NODE = "node"
#: who owns this project's entry of the TrainJob's runtimePatches
MANAGER = "context-cda.io/pipeline"
TASK_FILE = "task.json"
OUT_DIR = "out"
#: labels of every TrainJob and its pods (the NetworkPolicies of k8s/base select the pods on them)
POD_LABELS = {"app.kubernetes.io/part-of": "context-cda", "app.kubernetes.io/component": "trainjob-node"}


class TrainJobFailed(ServiceError):
    """The TrainJob ended Failed (or vanished): its own reason and message, and where its pods' logs are."""


@dataclass(frozen=True)
class Cluster:
    """What a TrainJob needs to know about the cluster (the pipeline's ClusterSettings make one; names must match
    k8s/)."""

    namespace: str = "kubeflow"
    runtime: str = "ccda-torch-distributed"
    image: str = "ghcr.io/context-cda/context-cda-train:0.1.0"
    nodes: int = 1
    gpus_per_node: int = 1
    accelerator_type: str = "nvidia.com/gpu"
    runs_pvc: str = "ccda-runs"
    runs_mount: str = "/runs"
    model_cache_pvc: str = "ccda-model-cache"
    model_cache_mount: str = "/models"
    #: Secret name -> {environment variable: key}; ``optional`` names those a run may lack (tracking off, no hub token)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    optional_secrets: tuple[str, ...] = ()
    config_map: str = "ccda-pipeline-config"
    config_map_env: tuple[str, ...] = ()
    cpu: str = "8"
    memory: str = "32Gi"
    timeout_s: int = 48 * 3600
    poll_s: float = 15.0
    labels: dict[str, str] = field(default_factory=lambda: dict(POD_LABELS))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        data = json.loads(text)
        data["optional_secrets"] = tuple(data.get("optional_secrets", ()))
        data["config_map_env"] = tuple(data.get("config_map_env", ()))
        return cls(**data)


# ---------------------------------------------------------------------------------------------- the object


def job_key(task_config: str, keys: Mapping[str, Any], token_budget: int) -> str:
    """What the task's output depends on, hashed (the same inputs as its Kubeflow cache key): its job folder and
    its TrainJob's name, so a retry finds both."""
    from ..io import json_hash

    return json_hash({"config": json.loads(task_config), "keys": dict(keys), "token_budget": int(token_budget)})


def job_name(key: str) -> str:
    """The TrainJob's name: an RFC 1035 label (Trainer's CRD rule), at most 63 characters."""
    return f"ccda-ft-{key}"[:63]


def command(task_file: str) -> list[str]:
    """What every node runs: the stage command under torchrun (its PET_* settings come from Trainer)."""
    return ["torchrun", "--no-python", "ccda", "finetune", "--task", task_file]


def _env(c: Cluster) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
                                 {"name": "PYTHONUNBUFFERED", "value": "1"},
                                 {"name": "VLLM_CACHE_ROOT", "value": f"{c.model_cache_mount}/cache/vllm"}]
    for secret, names in c.secrets.items():
        for var, key in names.items():
            ref = {"name": secret, "key": key, **({"optional": True} if secret in c.optional_secrets else {})}
            env.append({"name": var, "valueFrom": {"secretKeyRef": ref}})
    env += [{"name": k, "valueFrom": {"configMapKeyRef": {"name": c.config_map, "key": k, "optional": True}}}
            for k in c.config_map_env]
    return env


def manifest(c: Cluster, name: str, task_file: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The TrainJob: the runtime, the trainer (image, command, nodes, processes and resources per node, env from
    Secrets and the ConfigMap) and this project's runtime patch (the run volume, mounted in the node container;
    pod labels for the NetworkPolicies). What the runtime holds itself: k8s/trainer."""
    gpus = max(int(c.gpus_per_node), 0)
    resources = {"requests": {"cpu": str(c.cpu), "memory": c.memory}, "limits": {"memory": c.memory}}
    if gpus:
        resources["requests"][c.accelerator_type] = str(gpus)
        resources["limits"][c.accelerator_type] = str(gpus)
    meta_labels = {**c.labels, **(labels or {})}
    pod_spec = {"volumes": [{"name": "runs", "persistentVolumeClaim": {"claimName": c.runs_pvc}}],
                "containers": [{"name": NODE, "volumeMounts": [{"name": "runs", "mountPath": c.runs_mount}]}]}
    patch = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": NODE, "template": {"spec": {"template": {"metadata": {"labels": dict(meta_labels)},
                                                          "spec": pod_spec}}}}]}}}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": c.namespace, "labels": meta_labels},
        "spec": {
            "runtimeRef": {"apiGroup": GROUP, "kind": "ClusterTrainingRuntime", "name": c.runtime},
            "activeDeadlineSeconds": int(c.timeout_s),
            "trainer": {"image": c.image, "command": command(task_file), "numNodes": int(c.nodes),
                        "numProcPerNode": max(gpus, 1), "resourcesPerNode": resources, "env": _env(c)},
            "runtimePatches": [patch],
        },
    }


# ---------------------------------------------------------------------------------------------- the task


def write_task(job_dir: Path, config_json: str, inputs: Mapping[str, Path], keys: Mapping[str, Any],
               token_budget: int) -> Path:
    """Copy the task's inputs into ``job_dir/inputs`` (a retry copies them again: same content) and write
    ``task.json``: the config, the inputs' paths there, the step folder (``job_dir/out``), the keys, the budget."""
    from ..io import write_json

    copied: dict[str, str] = {}
    for name, src in inputs.items():
        src = Path(src)
        dest = job_dir / "inputs" / name / src.name
        if dest.exists():
            shutil.rmtree(dest) if dest.is_dir() else dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dest, symlinks=False) if src.is_dir() else shutil.copy2(src, dest)
        copied[name] = str(dest)
    return write_json(job_dir / TASK_FILE, {"config": json.loads(config_json), "inputs": copied,
                                           "out": str(job_dir / OUT_DIR), "keys": dict(keys),
                                           "token_budget": int(token_budget)})


def read_task(path: Path | str) -> tuple[Any, dict[str, Path], Path, dict[str, Any], int]:
    """(config, inputs, step folder, keys, token budget) of a ``task.json`` (:func:`write_task`)."""
    from ..config import Config
    from ..io import read_json

    data = read_json(path)
    try:
        cfg = dict(data["config"])
        view = cfg.pop("_step_view", None)  # one step's view of the config (its keys only), checked as a part
        config = Config.model_validate(cfg, context={"partial": view is not None})
        return (config, {k: Path(v) for k, v in data["inputs"].items()}, Path(data["out"]), dict(data["keys"]),
                int(data["token_budget"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{path}: not a finetune task written by the TrainJob launcher ({e}).") from None


# ---------------------------------------------------------------------------------------------- the API


def custom_api(api_client: Any = None) -> Any:
    """The Kubernetes custom-objects API: ``api_client``'s, else in-cluster (the task's service account), else the
    local kubeconfig."""
    from kubernetes import client, config

    if api_client is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        api_client = client.ApiClient()
    return client.CustomObjectsApi(api_client)


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)}


def verdict(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(``Complete`` | ``Failed``, reason, message) once the TrainJob has ended, else None."""
    for kind in ("Failed", "Complete"):
        c = _conditions(obj).get(kind)
        if c is not None and str(c.get("status")) == "True":
            return kind, str(c.get("reason") or ""), str(c.get("message") or "")
    return None


def submit(api: Any, body: Mapping[str, Any], log: Callable[[str], None] = print) -> dict[str, Any]:
    """Create the TrainJob, or take over the one of the same name a previous attempt of the task created: one that
    is still running is waited for, one that ended Failed is deleted and created again (it resumes from the
    checkpoints on the run volume), one that completed is kept."""
    from kubernetes.client.exceptions import ApiException

    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    try:
        return api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    except ApiException as e:
        if e.status != 409:
            raise ServiceError(f"creating TrainJob {ns}/{name}: the API server answered {e.status} {e.reason}: "
                               f"{_api_message(e)}") from None
    old = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
    ended = verdict(old)
    if ended is None or ended[0] == "Complete":
        log(f"TrainJob {ns}/{name}: taking over the one a previous attempt created ({ended[0] if ended else 'running'})")
        return old
    log(f"TrainJob {ns}/{name}: the previous attempt's ended Failed ({ended[1]}); creating it again (it resumes "
        "from the checkpoints on the run volume)")
    delete(api, ns, name)
    for _ in range(120):  # deletion is asynchronous: wait until the name is free
        try:
            return api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        except ApiException as e:
            if e.status != 409:
                raise ServiceError(f"creating TrainJob {ns}/{name}: {e.status} {e.reason}: {_api_message(e)}") from None
            time.sleep(1.0)
    raise ServiceError(f"TrainJob {ns}/{name}: the failed one of a previous attempt is still being deleted after 2 "
                       "minutes; rerun the task.")


def _api_message(e: Any) -> str:
    try:
        return str(json.loads(e.body).get("message") or e.body)[:500]
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "body", "") or "")[:500]


def delete(api: Any, namespace: str, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                            body={"propagationPolicy": "Foreground"})
    except ApiException as e:
        if e.status != 404:
            raise


def wait(api: Any, namespace: str, name: str, poll_s: float, timeout_s: float, what: str,
         log: Callable[[str], None] = print) -> dict[str, Any]:
    """Poll the TrainJob until it ends; its object when it completed, else :class:`TrainJobFailed` with its own
    reason and message (a TrainJob deleted by someone else, or still running after ``timeout_s``, fails too)."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + timeout_s
    seen = None
    while True:
        try:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                raise TrainJobFailed(f"{what}: TrainJob {namespace}/{name} was deleted before it ended.") from None
            raise ServiceError(f"{what}: reading TrainJob {namespace}/{name}: {e.status} {e.reason}") from None
        ended = verdict(obj)
        if ended is not None and ended[0] == "Complete":
            return obj
        if ended is not None:
            raise TrainJobFailed(
                f"{what}: TrainJob {namespace}/{name} failed ({ended[1] or 'no reason given'}): "
                f"{ended[2] or 'no message'}. Its pods' logs: kubectl -n {namespace} logs -l "
                f"jobset.sigs.k8s.io/jobset-name={name} --prefix. Finished epochs are kept on the run volume; "
                "retry the task to resume.")
        state = sorted(k for k, c in _conditions(obj).items() if str(c.get("status")) == "True") or ["pending"]
        if state != seen:
            log(f"TrainJob {namespace}/{name}: {', '.join(state)}")
            seen = state
        if time.monotonic() > deadline:
            raise TrainJobFailed(f"{what}: TrainJob {namespace}/{name} still running after {timeout_s:.0f} s "
                                 f"(pipeline.timeouts.finetune); it was left running: delete it or retry the task.")
        time.sleep(poll_s)


def launch(c: Cluster, config_json: str, inputs: Mapping[str, Path], out_dir: Path | str, keys: Mapping[str, Any],
           token_budget: int, api: Any = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The finetune task with ``train.launcher: trainjob`` (see the module docstring): its inputs onto the run
    volume, the TrainJob created and waited for (a SIGTERM deletes it), the finished step folder copied into
    ``out_dir``; returns the step's manifest as rank 0 wrote it."""
    from ..io import read_json
    from ..runtime.signals import Terminated

    what = f"finetune[{keys.get('target')}/{keys.get('arm')}/seed-{keys.get('seed')}]"
    key = job_key(config_json, keys, token_budget)
    job_dir = Path(c.runs_mount) / "trainjobs" / key
    task = write_task(job_dir, config_json, inputs, keys, token_budget)
    body = manifest(c, job_name(key), str(task), {"context-cda.io/target": str(keys.get("target", ""))[:63]})
    api = api if api is not None else custom_api()
    name = body["metadata"]["name"]
    submit(api, body, log)
    log(f"{what}: TrainJob {c.namespace}/{name} on {c.runtime}: {c.nodes} node(s) x {c.gpus_per_node} GPU(s), "
        f"job folder {job_dir}")
    try:
        wait(api, c.namespace, name, c.poll_s, c.timeout_s, what, log)
    except Terminated:
        log(f"{what}: stopped: deleting TrainJob {c.namespace}/{name} (its ranks stop and keep their finished "
            "epochs on the run volume)")
        delete(api, c.namespace, name)
        raise
    step = job_dir / OUT_DIR
    if not (step / "manifest.json").is_file():
        raise TrainJobFailed(f"{what}: TrainJob {c.namespace}/{name} completed but left no manifest in {step}.")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(step, out, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("checkpoints", ".*.tmp", "*.lock"))
    done = dict(read_json(out / "manifest.json"))
    shutil.rmtree(job_dir, ignore_errors=True)  # its inputs, checkpoints and copy: the artifact holds the result
    return {**done, "step_dir": str(step), "trainjob": {"name": name, "namespace": c.namespace, "nodes": c.nodes,
                                                        "gpus_per_node": c.gpus_per_node, "runtime": c.runtime}}


def run_launcher(config: Any, inputs: Mapping[str, Path], out_dir: Path | str, *, target: str, arm: str, seed: int,
                 token_budget: int, cluster: str, config_json: str, api: Any = None, **_: Any) -> dict[str, Any]:
    """The finetune step's body in the task of ``train.launcher: trainjob``, run by the step envelope like any
    door's (its lock, SIGTERM guard, manifest, marker): :func:`launch`, then the envelope's record of what rank 0
    recorded (counts, outputs, timings; the train image's library versions and the TrainJob in the summary)."""
    from ..steps import Counts, recorder

    rec = recorder(out_dir)
    done = launch(Cluster.from_json(cluster), config_json, inputs, out_dir, {"target": target, "arm": arm,
                                                                             "seed": seed}, token_budget, api)
    rec.timings.update({f"trainjob.{k}": v for k, v in (done.get("timings") or {}).items()})
    summary = {**(done.get("summary") or {}), "trainjob": {**done["trainjob"], "versions": done.get("versions")}}
    outputs = {k: Path(out_dir) / Path(v["path"]).relative_to(done["step_dir"])
               for k, v in (done.get("outputs") or {}).items()}
    rec.finish(Counts.of(done.get("counts")), outputs, summary)
    return summary


def run_task(path: Path | str) -> dict[str, Any]:
    """What every process of every node of the TrainJob runs (``ccda finetune --task``): the finetune step of
    ``task.json`` through the step envelope, inputs and folder as given (the Kubeflow door: no provenance check,
    the DAG handed the task its producers' artifacts)."""
    from .. import steps as E

    config, inputs, out, keys, budget = read_task(path)
    if not config.run.targets:
        raise CCDAError(f"{path}: the task's config names no target.")
    step = E.given("finetune", inputs, out, **keys)
    return E.run(step, config, check=False, token_budget=budget).summary
