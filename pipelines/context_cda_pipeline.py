"""The Context-CDA pipeline for Kubeflow Pipelines v2, in two variants built from the same wiring.

``gpu`` (the cluster): GPU steps (entropy, finetune, evaluate; augment when vLLM runs in-process) request
``config.pipeline.accelerator_type`` x ``accelerator_count``, land on GPU nodes (node selector + toleration) and
mount the model-cache PVC; every step gets its secrets as environment variables (S3 for data and artifacts,
MLflow for tracking, the hub token for gated models); augment talks to the cluster's vLLM service through the
``openai`` backend (``augment_mode: service``) or runs vLLM in-process on its GPU node (``augment_mode:
in-process``). ``cpu``: the same DAG with no Kubernetes settings, for ``kfp.local`` (a cluster without GPUs
runs ``gpu`` with ``accelerator_count: 0``). Both name the images of ``config.pipeline``: the train image
(``image``) for the GPU steps, the CPU image (``cpu_image``) for the others.

What every ``gpu``-variant task gets besides (settings in the config's ``pipeline`` section):

* retries with exponential backoff (``set_retry``: ``retries``, ``retry_backoff_s``, ``retry_backoff_factor``),
  except the steps with side effects in the stage table (register) and the exit handler; Argo's backoff
  ``maxDuration`` counts from the first attempt's start and also cuts the pod of a later attempt, so it is derived
  per task as ``(retries + 1) * timeout + the waits`` instead of KFP's default of one hour;
* a timeout, the pod's ``activeDeadlineSeconds`` (``kubernetes.set_timeout``): ``timeouts[step]``, else
  ``default_timeout_s``;
* runAsUser/runAsGroup (the images' UID 10001) and runAsNonRoot (``kubernetes.set_security_context``); the KFP
  backend adds allowPrivilegeEscalation=false, drop ALL capabilities and the RuntimeDefault seccomp profile to
  every task container itself; readOnlyRootFilesystem cannot be expressed (see docs/kubernetes.md);
* pod labels the NetworkPolicies in ``k8s/`` select on (``app.kubernetes.io/component: pipeline-step``, and
  ``context-cda.io/egress: internet`` on the steps that may download, see ``internet_egress``);
* GPU tasks: a memory-backed ``/dev/shm`` of ``shm_size`` (``kubernetes.empty_dir_mount``, medium Memory).

::

    ingest -> cda -> validate(cda)
      ParallelFor part in matrix(augment-part):  augment(part)
    augment_merge (all parts) -> validate(augment)
    neutral -> validate(neutral)       (when train.arms holds context-neutral)
      ParallelFor part in matrix(sample-part):  sample(part)      (the M samples and their clusters, once)
    sample_merge (all parts)
      ParallelFor target in matrix(targets):    (each item: the target and each per-target task's view of the config)
        entropy(target) -> validate(entropy) (gate) -> filter(target)
        filter(target) -> evaluate_target(target)      (the vanilla target, beside the arms' fine-tuning)
        ParallelFor (target, arm) in matrix(debias, target):  debias(target, arm)   (INLP, SentenceDebias)
        collect_debias(target)                   (the target's matrices side by side, one artifact)
        ParallelFor (target, arm) in matrix(evaluate-posthoc, target):
          evaluate_posthoc(target, arm)            (the matrices of collect_debias; self-debias; published)
        ParallelFor (target, arm, seed) in matrix(finetune, target):
          budget(target, arm) -> finetune(target, arm, seed) -> evaluate(target, arm, seed)
                                   (the arm's token budget, a number in the fine-tuning's cache key)
        register(target)          (every arm in order, after the loop: its finetune steps, evaluations and the
                                   vanilla evaluation; the gate pools the seeds' per-item evidence)
        collect_arms(target)      (finetune metrics, registrations, evaluation aggregates of arms and vanilla)
      report(all targets)
    exit handler: record_status (always runs; records failures)

The resolved config travels as one YAML string parameter (``config_yaml``), the run's one source: the same config
drives a local ``kfp.local`` run, a compiled package and a submitted run, and every loop (generation parts,
targets, arms x seeds) is read from it at run time (:func:`components.control.matrix`). Every task gets its step's
view of the config (:func:`components._runtime.task_config`: the keys its step reads, its own target, arm and seed,
the rest at their defaults; from its loop item, or a ``view`` task for the steps without fan-out), so a run with an
arm, a seed or a benchmark added is served the finished tasks from the KFP cache and trains only what is new. A
step no configured arm reads has no task (``train.arms=[cda]``: no augment, sample, entropy or filter). Cluster object names (secrets, PVC, vLLM service) are
in :class:`ClusterSettings` and match ``k8s/base`` (Secrets ``ccda-s3-credentials`` and ``ccda-hf-token``,
ConfigMap ``ccda-pipeline-config``, PVC ``ccda-model-cache``). ``ccda-mlflow-auth`` (the MLflow user; the server
runs basic auth) is read as optional, since tracking may be off; ``ccda-vllm-api-key`` is required by the steps
that call the vLLM service (augment and entropy in service mode), as the server requires the key.

(No ``from __future__ import annotations`` here: KFP reads the pipeline function's annotations at runtime.)
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import components as C
from components.images import tagged
from kfp import compiler, dsl, kubernetes

from context_cda import stages as T
from context_cda.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from context_cda.config import Config

VARIANTS = ("gpu", "cpu")

#: steps whose results are side effects (MLflow registry, status records): never served from the KFP cache
UNCACHED = frozenset({r.step for r in T.TABLE if r.side_effects} | {"record_status"})
#: ... and never retried: a registration must not run twice, and the exit handler reports the run as it ended
NO_RETRY = UNCACHED
#: the GPU tasks' memory limit; their /dev/shm (memory-backed) must fit well inside it
GPU_MEMORY_LIMIT = "32Gi"


@dataclass(frozen=True)
class ClusterSettings:
    """Everything the ``gpu`` variant needs to know about the cluster (names must match ``k8s/``)."""

    cpu_image: str = C.images.CPU_IMAGE
    gpu_image: str = C.images.GPU_IMAGE
    accelerator_type: str = "nvidia.com/gpu"
    accelerator_count: int = 1
    augment_mode: str = "service"
    namespace: str = "kubeflow"
    gpu_node_selector: dict[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    gpu_tolerations: tuple[dict[str, str], ...] = (
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    )
    s3_secret: str = "ccda-s3-credentials"
    s3_env: dict[str, str] = field(
        default_factory=lambda: {"AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY"}
    )
    mlflow_secret: str = "ccda-mlflow-auth"
    mlflow_env: dict[str, str] = field(
        default_factory=lambda: {
            "MLFLOW_TRACKING_USERNAME": "MLFLOW_TRACKING_USERNAME",
            "MLFLOW_TRACKING_PASSWORD": "MLFLOW_TRACKING_PASSWORD",
        }
    )
    hf_secret: str = "ccda-hf-token"
    hf_env: dict[str, str] = field(default_factory=lambda: {"HF_TOKEN": "HF_TOKEN"})
    vllm_secret: str = "ccda-vllm-api-key"
    vllm_env: dict[str, str] = field(default_factory=lambda: {"OPENAI_API_KEY": "OPENAI_API_KEY"})
    config_map: str = "ccda-pipeline-config"
    config_map_env: dict[str, str] = field(
        default_factory=lambda: {
            k: k
            for k in ("MLFLOW_TRACKING_URI", "AWS_ENDPOINT_URL", "HF_HOME", "CCDA_MODEL_CACHE",
                      "CCDA_VLLM_BASE_URL", "CCDA_VLLM_MODEL", "CCDA_VLLM_ALLOW_INSECURE")
        }
    )
    model_cache_pvc: str = "ccda-model-cache"
    model_cache_mount: str = "/models"
    enable_caching: bool = True
    retries: int = 2
    retry_backoff_s: int = 60
    retry_backoff_factor: int = 2
    timeouts: dict[str, int] = field(default_factory=dict)  # stage-table step -> seconds
    default_timeout_s: int = 3600
    shm_size: str = "8Gi"
    run_as_user: int = 10001
    run_as_group: int = 10001
    internet_egress: str = "downloads"
    #: labels of every task pod; the NetworkPolicies in k8s/base/networkpolicies.yaml select on them
    pod_labels: dict[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/part-of": "context-cda", "app.kubernetes.io/component": "pipeline-step"}
    )
    internet_label: tuple[str, str] = ("context-cda.io/egress", "internet")
    #: train.launcher: pod (the finetune task trains in its GPU pod) or trainjob (it creates a Kubeflow Trainer
    #: TrainJob and waits: context_cda.train.trainjob; the gpu variant only, kfp.local has no Trainer)
    #: GPUs of the tasks that run the generator in-process (augment_mode: in-process): augment.tensor_parallel_size
    #: x pipeline_parallel_size when the tensor size is set, else None (accelerator_count; vLLM splits over them)
    generator_gpus: int | None = None
    launcher: str = "pod"
    trainjob_runtime: str = "ccda-torch-distributed"
    trainjob_nodes: int = 1
    runs_pvc: str = "ccda-runs"
    runs_mount: str = "/runs"
    trainjob_poll_s: float = 15.0

    @classmethod
    def from_config(cls, config: "Config", **overrides: Any) -> "ClusterSettings":
        p = config.pipeline
        values: dict[str, Any] = {
            "cpu_image": tagged(p.cpu_image),
            "gpu_image": tagged(p.image),
            "accelerator_type": p.accelerator_type,
            "accelerator_count": p.accelerator_count,
            "augment_mode": p.augment_mode,
            "namespace": p.namespace,
            **{k: getattr(p, k) for k in ("retries", "retry_backoff_s", "retry_backoff_factor", "default_timeout_s",
                                          "shm_size", "run_as_user", "run_as_group", "internet_egress")},
            "timeouts": dict(p.timeouts),
            "generator_gpus": (config.augment.tensor_parallel_size * config.augment.pipeline_parallel_size
                               if config.augment.tensor_parallel_size else None),
            "launcher": config.train.launcher,
            "trainjob_runtime": p.trainjob.runtime,
            "trainjob_nodes": p.trainjob.nodes,
            "runs_pvc": p.trainjob.volume,
            "runs_mount": p.trainjob.mount_path,
            "trainjob_poll_s": p.trainjob.poll_s,
        }
        values.update(overrides)
        return cls(**values)

    def trainjob(self):
        """The cluster as a finetune task's TrainJob sees it (:class:`context_cda.train.trainjob.Cluster`): the train
        image, nodes x GPUs, the run volume and model cache, the Secrets and ConfigMap every GPU step gets, the
        fine-tuning's timeout."""
        from context_cda.train.trainjob import Cluster

        return Cluster(namespace=self.namespace, runtime=self.trainjob_runtime, image=self.gpu_image,
                       nodes=self.trainjob_nodes, gpus_per_node=self.accelerator_count,
                       accelerator_type=self.accelerator_type, runs_pvc=self.runs_pvc, runs_mount=self.runs_mount,
                       model_cache_pvc=self.model_cache_pvc, model_cache_mount=self.model_cache_mount,
                       secrets={self.s3_secret: dict(self.s3_env), self.mlflow_secret: dict(self.mlflow_env),
                                self.hf_secret: dict(self.hf_env)},
                       optional_secrets=(self.mlflow_secret, self.hf_secret), config_map=self.config_map,
                       config_map_env=tuple(self.config_map_env), cpu=str(max(8, 4 * self.accelerator_count)),
                       memory=f"{max(32, 16 * self.accelerator_count)}Gi",
                       timeout_s=self.timeout("finetune"), poll_s=self.trainjob_poll_s)

    def generator_overrides(self) -> list[str]:
        """Config overrides for the generating steps (augment, entropy's sampler) on the cluster.

        ``service``: the openai backend against the cluster's vLLM Service; URL, served model name and whether
        the API key may travel over the Service's plain http come from the ``ccda-pipeline-config`` ConfigMap
        (``$VAR`` is expanded inside the pod). ``in-process``: vLLM in the step's own process on its GPU node.
        """
        if self.augment_mode == "service":
            return ["augment.backend=openai", "augment.openai.base_url=$CCDA_VLLM_BASE_URL",
                    "augment.model=$CCDA_VLLM_MODEL", "augment.openai.allow_insecure=$CCDA_VLLM_ALLOW_INSECURE"]
        return ["augment.backend=vllm"]

    def timeout(self, name: str) -> int:
        """Seconds task ``name`` (a stage-table step or one of the pipeline's own tasks) may run."""
        return int(self.timeouts.get(name, self.default_timeout_s))

    def retry_window(self, name: str) -> int:
        """Argo's backoff maxDuration for task ``name``: every attempt's timeout plus every wait between them.

        Argo measures it from the first attempt's start and makes it the deadline of later attempts' pods, so
        anything shorter would cut a long task's retries short (KFP's default is 3600 s). The KFP SDK >= 2.15
        compiles at most 3600 s whatever is asked: there a task whose attempts outlast an hour is not retried.
        """
        waits = sum(self.retry_backoff_s * self.retry_backoff_factor**i for i in range(self.retries))
        return (self.retries + 1) * self.timeout(name) + waits


def config_yaml(config: "Config") -> str:
    """The config as the pipeline's ``config_yaml`` parameter: YAML in flow style, i.e. one line of JSON.

    One line because KFP copies parameter defaults into the package's header comment verbatim, and a multi-line
    default would break the package's YAML. ``yaml.safe_load`` reads it like any other config file.
    """
    from components._runtime import config_json

    return config_json(config)


# ---------------------------------------------------------------------------------------------- task settings


def _common(task: dsl.PipelineTask, s: ClusterSettings) -> None:
    """Every cluster step: S3 credentials (secret), endpoints and cache folders (ConfigMap)."""
    kubernetes.use_secret_as_env(task, s.s3_secret, dict(s.s3_env))
    kubernetes.use_config_map_as_env(task, s.config_map, dict(s.config_map_env))


def _model_cache(task: dsl.PipelineTask, s: ClusterSettings) -> None:
    kubernetes.mount_pvc(task, pvc_name=s.model_cache_pvc, mount_path=s.model_cache_mount)
    task.set_env_variable("VLLM_CACHE_ROOT", f"{s.model_cache_mount}/cache/vllm")


def _cpu_step(task: dsl.PipelineTask, s: ClusterSettings, name: str, memory: str = "4Gi") -> dsl.PipelineTask:
    task.set_container_image(s.cpu_image)
    task.set_cpu_request("1").set_cpu_limit("4").set_memory_request("1Gi").set_memory_limit(memory)
    _common(task, s)
    if name in {"register", "report", "record_status"}:
        kubernetes.use_secret_as_env(task, s.mlflow_secret, dict(s.mlflow_env), optional=True)
    if name == "ingest":
        kubernetes.use_secret_as_env(task, s.hf_secret, dict(s.hf_env), optional=True)
    return task


def _gpu_step(task: dsl.PipelineTask, s: ClusterSettings, memory: str = GPU_MEMORY_LIMIT,
              gpus: int | None = None) -> dsl.PipelineTask:
    task.set_container_image(s.gpu_image)
    task.set_accelerator_type(s.accelerator_type).set_accelerator_limit(s.accelerator_count if gpus is None else gpus)
    task.set_cpu_request("4").set_cpu_limit("8").set_memory_request("16Gi").set_memory_limit(memory)
    # NCCL and vLLM's workers exchange tensors through /dev/shm: memory-backed, counted against the memory limit
    kubernetes.empty_dir_mount(task, volume_name="dshm", mount_path="/dev/shm", medium="Memory",
                               size_limit=s.shm_size)
    for key, value in s.gpu_node_selector.items():
        kubernetes.add_node_selector(task, label_key=key, label_value=value)
    for tol in s.gpu_tolerations:
        kubernetes.add_toleration(task, **tol)
    _model_cache(task, s)
    _common(task, s)
    kubernetes.use_secret_as_env(task, s.mlflow_secret, dict(s.mlflow_env), optional=True)
    kubernetes.use_secret_as_env(task, s.hf_secret, dict(s.hf_env), optional=True)
    return task


def _service_step(task: dsl.PipelineTask, s: ClusterSettings) -> dsl.PipelineTask:
    """augment in service mode: a CPU pod that talks to the cluster's vLLM (no GPU, no node pinning)."""
    task.set_container_image(s.cpu_image)
    task.set_cpu_request("1").set_cpu_limit("4").set_memory_request("2Gi").set_memory_limit("8Gi")
    _model_cache(task, s)
    _common(task, s)
    return task


def _hardening(task: dsl.PipelineTask, s: ClusterSettings, name: str, internet: bool) -> dsl.PipelineTask:
    """Every cluster task: a timeout, retries (unless it has side effects), its UID, and the pod labels the
    NetworkPolicies select on (``internet``: the label that lets it reach the internet over https)."""
    kubernetes.set_timeout(task, s.timeout(name))
    kubernetes.set_security_context(task, run_as_user=s.run_as_user, run_as_group=s.run_as_group,
                                    run_as_non_root=True)
    for key, value in s.pod_labels.items():
        kubernetes.add_pod_label(task, key, value)
    if internet:
        kubernetes.add_pod_label(task, *s.internet_label)
    if name not in NO_RETRY and s.retries > 0:
        task.set_retry(s.retries, backoff_duration=f"{s.retry_backoff_s}s", backoff_factor=float(s.retry_backoff_factor),
                       backoff_max_duration=f"{s.retry_window(name)}s")
    return task


def _may_download(s: ClusterSettings, name: str, kind: str, judge: bool = False) -> bool:
    """Whether task ``name`` gets the internet egress label: a step that loads a model (a GPU step of the table,
    run on a GPU or not; an augment part whose review has a meaning judge, ``judge``) or reads input files from
    outside the run (the table's ``config_files``: ingest)."""
    if s.internet_egress != "downloads":
        return s.internet_egress == "all"
    return kind == "yes" or judge or (name in T.STAGES and bool(T.get(name).config_files))


def _quantity(q: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    return int(q[:-2]) * units[q[-2:]] if q[-2:] in units else int(q)


# ---------------------------------------------------------------------------------------------- the pipeline


#: the DAG's steps in order (the stage table's); ``last_stage`` cuts the pipeline after one of them (or after the
#: last step of a command, e.g. ``validate``), validation steps going with the step whose output they check
DAG_STAGES = T.ORDER
#: steps that run on GPU nodes ("generator": only when the generator runs in-process, augment_mode: in-process)
GPU_STEPS = {r.step: r.gpu for r in T.TABLE if r.gpu != "no"}


def _last_index(last_stage: str) -> int:
    try:
        return T.until_index(last_stage)
    except ConfigError as e:
        raise ValueError(f"last_stage: {e}") from None


class _Wiring:
    """Which task output feeds which component input, by the stage table: ``feed(step, name)`` is the
    artifact of the task that produced the input (a ``dsl.Collected`` list for a fan-in); ``feeds(step, *names)``
    the inputs whose producer is in the DAG (a step the run does not plan has no task)."""

    def __init__(self) -> None:
        self.tasks: dict[str, dsl.PipelineTask] = {}

    def add(self, step: str, task: dsl.PipelineTask) -> dsl.PipelineTask:
        self.tasks[step] = task
        return task

    def feed(self, step: str, name: str):
        inp = next(i for i in T.get(step).inputs if i.name == name)
        producer = T.get(inp.step)
        out = self.tasks[inp.step].outputs[producer.artifact]
        return out if set(producer.fanout) <= set(inp.keys) else dsl.Collected(out)

    def feeds(self, step: str, *names: str) -> dict[str, Any]:
        inputs = {i.name: i for i in T.get(step).inputs}
        return {n: self.feed(step, n) for n in names if inputs[n].step in self.tasks}


def build_pipeline(
    variant: str = "gpu",
    config: "Config | None" = None,
    settings: ClusterSettings | None = None,
    last_stage: str = "report",
):
    """The ``@dsl.pipeline`` function of ``variant`` with ``config`` (default: resolved defaults) as its defaults.

    ``last_stage`` stops the DAG after that step (e.g. ``filter`` for a data-only pipeline); validation steps
    belong to the step whose output they check. Steps the config does not plan (the table's ``when``: the
    evaluate steps, register; a step whose output no configured arm reads: :func:`context_cda.stages.planned`)
    are left out. Every task gets its step's view of the config (:func:`components._runtime.task_config`).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown pipeline variant {variant!r}; use one of {', '.join(VARIANTS)}.")
    upto = _last_index(last_stage)
    if config is None:
        from context_cda.config import load_config

        config = load_config()
    s = settings or ClusterSettings.from_config(config)
    planned = T.planned(config)

    def wanted(step: str) -> bool:
        return T.ORDER.index(step) <= upto and step in planned

    # an augment part whose review has a meaning judge loads that model (nli, embedding; llm: the generator's)
    judged = {"augment-part"} if config.augment.review.meaning in ("nli", "embedding") else set()
    step = _task_settings(variant, s, judged)
    gen_overrides = s.generator_overrides() if variant == "gpu" else []
    config_yaml_default = config_yaml(config)

    @dsl.pipeline(
        name=f"context-cda-{variant}",
        description="Context-CDA: CDA, LLM augmentation, semantic-entropy filtering, debias fine-tuning, "
        "evaluation and registration, per target model, arm and seed.",
    )
    def context_cda_pipeline(config_yaml: str = config_yaml_default):
        status = step(C.record_status(config_yaml=config_yaml), "record_status")
        with dsl.ExitHandler(status, name="context-cda-run"):
            w = _Wiring()
            _corpus_steps(w, step, wanted, config_yaml, gen_overrides)
            _sample_steps(w, step, wanted, config_yaml, gen_overrides)
            _target_steps(w, step, wanted, config_yaml)

    return context_cda_pipeline


def _task_settings(variant: str, s: ClusterSettings, judged: set[str] = frozenset()):
    """``step(task, name)``: caching, and on the cluster the resources, mounts, secrets, timeout, retries and
    security settings of the table's kind of step (a row that ``generates`` calls the generator, which in service
    mode is the cluster's vLLM and needs its API key)."""
    gpu = variant == "gpu" and s.accelerator_count > 0
    if variant == "gpu" and _quantity(s.shm_size) >= _quantity(GPU_MEMORY_LIMIT) // 2:
        raise ConfigError(f"pipeline.shm_size {s.shm_size}: /dev/shm is memory-backed and counts against the GPU "
                         f"tasks' memory limit ({GPU_MEMORY_LIMIT}); keep it below half of that.")

    def step(task: dsl.PipelineTask, name: str) -> dsl.PipelineTask:
        generates = name in T.STAGES and T.get(name).generates
        task.set_caching_options(enable_caching=s.enable_caching and name not in UNCACHED)
        if variant != "gpu":  # kfp.local's DockerRunner runs each task in this image (SubprocessRunner: ignored)
            task.set_container_image(s.gpu_image if GPU_STEPS.get(name) == "yes" else s.cpu_image)
            return task
        if name == "finetune" and s.launcher == "trainjob":  # a CPU pod that creates the TrainJob and waits
            _cpu_step(task, s, name)
            kubernetes.mount_pvc(task, pvc_name=s.runs_pvc, mount_path=s.runs_mount)
            return _hardening(task, s, name, False)
        kind = GPU_STEPS.get(name, "no")
        if kind == "generator":
            kind = "service" if s.augment_mode == "service" else "yes"
        if kind == "yes" and gpu:  # a generating task in-process: the GPUs of vLLM's tensor x pipeline parallelism
            _gpu_step(task, s, gpus=s.generator_gpus if generates and s.augment_mode == "in-process" else None)
        elif kind == "service":
            _service_step(task, s)
        else:
            _cpu_step(task, s, name)
        if generates and s.augment_mode == "service":
            kubernetes.use_secret_as_env(task, s.vllm_secret, dict(s.vllm_env))
        return _hardening(task, s, name, _may_download(s, name, kind, name in judged))

    # the TrainJob a finetune task creates (train.launcher: trainjob, the cluster variant): its cluster settings
    step.trainjob = s.trainjob().to_json() if variant == "gpu" and s.launcher == "trainjob" else None
    return step


def _loop(step, config_yaml, name: str, target=None, also: tuple[str, ...] = ()):
    """The items of ``name``'s ParallelFor, read from the config at run time (:func:`components.control.matrix`),
    each with its task's view of the config (``also``: those of the other steps in the loop, ``config_<step>``)."""
    extra = {} if target is None else {"target": target}
    return step(C.matrix(config_yaml=config_yaml, step=name, also=list(also), **extra), "matrix").output


def _view(step, config_yaml, name: str):
    """The view of the config a task of ``name`` (a row without fan-out) gets (:func:`components.control.view`)."""
    return step(C.view(config_yaml=config_yaml, step=name), "view").output


def _own(item, name: str):
    """A loop item's view of the config for step ``name`` (``config_<name>``)."""
    return getattr(item, f"config_{name.replace('-', '_')}")


def _corpus_steps(w: _Wiring, step, wanted, config_yaml, gen_overrides) -> None:
    """ingest -> cda -> validate(cda) -> augment parts (ParallelFor) -> merge -> validate(augment), and the neutral
    rewrites: each when the run plans it."""
    for name, make in (("ingest", lambda c: C.ingest(config_yaml=c)),
                       ("cda", lambda c: C.cda(config_yaml=c, sentences=w.feed("cda", "sentences"))),
                       ("validate-cda", lambda c: C.validate(config_yaml=c, boundary="cda",
                                                             data=w.feed("validate-cda", "cda")))):
        if wanted(name):
            w.add(name, step(make(_view(step, config_yaml, name)), name))
    if wanted("augment-part"):
        with dsl.ParallelFor(_loop(step, config_yaml, "augment-part"), name="augment-parts") as part:
            w.add("augment-part", step(C.augment(config_yaml=part.config, shard=part.shard, overrides=gen_overrides,
                                                 counterfactuals=w.feed("augment-part", "counterfactuals")),
                                       "augment-part"))
    if wanted("augment"):
        w.add("augment", step(C.augment_merge(config_yaml=_view(step, config_yaml, "augment"),
                                              parts=w.feed("augment", "parts"),
                                              counterfactuals=w.feed("augment", "counterfactuals")), "augment"))
    if wanted("validate-augment"):
        w.add("validate-augment", step(C.validate(config_yaml=_view(step, config_yaml, "validate-augment"),
                                                  boundary="augment", data=w.feed("validate-augment", "augment")),
                                       "validate-augment"))
    if wanted("neutral"):  # the context-neutral arm's corpus: the generator's neutral rewrites, validated
        w.add("neutral", step(C.neutral(config_yaml=_view(step, config_yaml, "neutral"), overrides=gen_overrides,
                                        counterfactuals=w.feed("neutral", "counterfactuals")), "neutral"))
        w.add("validate-neutral", step(C.validate(config_yaml=_view(step, config_yaml, "validate-neutral"),
                                                  boundary="neutral", data=w.feed("validate-neutral", "neutral")),
                                       "validate-neutral"))


def _sample_steps(w: _Wiring, step, wanted, config_yaml, gen_overrides) -> None:
    """sample parts (ParallelFor: the M samples and their clusters, once for every target) -> sample_merge, when
    the run plans them."""
    if wanted("sample-part"):
        with dsl.ParallelFor(_loop(step, config_yaml, "sample-part"), name="sample-parts") as part:
            w.add("sample-part", step(C.sample(config_yaml=part.config, shard=part.shard, overrides=gen_overrides,
                                               augmented=w.feed("sample-part", "augmented")), "sample-part"))
    if wanted("sample"):
        w.add("sample", step(C.sample_merge(config_yaml=_view(step, config_yaml, "sample"),
                                            parts=w.feed("sample", "parts"), augmented=w.feed("sample", "augmented")),
                             "sample"))


#: the steps the per-target loop runs itself, each with its own view of the config (the loop item's config_<step>)
_PER_TARGET = ("entropy", "validate-entropy", "filter", "evaluate-vanilla", "register")


def _target_steps(w: _Wiring, step, wanted, config_yaml) -> None:
    """Per target (each task with its own view of the config): entropy -> validate(entropy) -> filter -> the
    vanilla evaluation, the post-hoc arms, the (arm, seed) loop (budget -> finetune -> evaluate) -> register ->
    collect; then the report. Each step when the run plans it."""
    also = tuple(n for n in _PER_TARGET if wanted(n))
    if not any(wanted(r.step) for r in T.TABLE if "target" in r.fanout):
        return  # no task per target (a run cut before entropy): no loop, which would be an empty DAG
    with dsl.ParallelFor(_loop(step, config_yaml, "targets", also=also), name="targets") as t:
        if wanted("entropy"):
            w.add("entropy", step(C.entropy(config_yaml=_own(t, "entropy"), target=t.target,
                                            samples=w.feed("entropy", "samples")), "entropy"))
        if wanted("validate-entropy"):
            w.add("validate-entropy", step(C.validate(config_yaml=_own(t, "validate-entropy"), boundary="entropy",
                                                      target=t.target, data=w.feed("validate-entropy", "entropy")),
                                           "validate-entropy"))
        if wanted("filter"):
            w.add("filter", step(C.filter(config_yaml=_own(t, "filter"), target=t.target,
                                          scores=w.feed("filter", "scores")), "filter"))
        _posthoc_steps(w, step, wanted, config_yaml, t.target)  # beside the fine-tuning: no trained model needed
        if wanted("evaluate-vanilla"):  # the vanilla target, the baseline of every arm (beside their fine-tuning)
            task = step(C.evaluate_target(config_yaml=_own(t, "evaluate-vanilla"), target=t.target),
                        "evaluate-vanilla")
            w.add("evaluate-vanilla", task.after(w.tasks["filter"]) if "filter" in w.tasks else task)
        if wanted("budget"):
            _arm_steps(w, step, wanted, config_yaml, t.target)
        _register_and_collect(w, step, wanted, t, t.target)
    if wanted("report"):
        extra = {k: w.tasks[s].outputs[o] for k, s, o in (("augmented", "augment", "augmented"),
                                                           ("sentences", "ingest", "sentences"),
                                                           ("counterfactuals", "cda", "counterfactuals"))
                 if s in w.tasks}
        step(C.report(config_yaml=_view(step, config_yaml, "report"),
                      summaries=dsl.Collected(w.tasks["collect_arms"].outputs["summary"]), **extra), "report")


def _arm_steps(w: _Wiring, step, wanted, config_yaml, target) -> None:
    """The target's (arm, seed) loop: the arm's token budget (a number: the fine-tuning's cache key holds it),
    the fine-tuning on the arm's own corpus, its evaluation."""
    also = ("budget", *(("evaluate",) if wanted("evaluate") else ()))
    with dsl.ParallelFor(_loop(step, config_yaml, "finetune", target, also), name="arms") as item:
        keys = {"target": item.target, "arm": item.arm}
        corpora = w.feeds("finetune", "cda", "augmented", "filtered", "neutral")
        budget = step(C.budget(config_yaml=_own(item, "budget"), **keys, **corpora), "budget")
        w.add("budget", budget)
        if not wanted("finetune"):
            return
        trainjob = {"cluster": step.trainjob} if step.trainjob else {}  # Kubeflow Trainer runs it (train.trainjob)
        w.add("finetune", step(C.finetune(config_yaml=item.config, **keys, seed=item.seed,
                                          token_budget=budget.outputs["Output"], **corpora, **trainjob), "finetune"))
        if wanted("evaluate"):
            w.add("evaluate", step(C.evaluate(config_yaml=_own(item, "evaluate"), **keys, seed=item.seed,
                                              model=w.feed("evaluate", "model")), "evaluate"))


def _posthoc_steps(w: _Wiring, step, wanted, config_yaml, target) -> None:
    """The target's post-hoc arms, each loop read from the config (:func:`components.control.matrix`): one learns
    the projection arms' matrices (debias), one scores every post-hoc arm (evaluate-posthoc), each of its tasks
    reading the matrices of all the target's projection arms (a fan-in)."""
    if wanted("debias"):
        with dsl.ParallelFor(_loop(step, config_yaml, "debias", target), name="debias-arms") as it:
            w.add("debias", step(C.debias(config_yaml=it.config, target=it.target, arm=it.arm,
                                          sentences=w.feed("debias", "sentences"), cda=w.feed("debias", "cda")),
                                 "debias"))
    if wanted("evaluate-posthoc"):
        extra = {}
        if "debias" in w.tasks:  # the loop's tasks read one artifact: every matrix of the target, side by side
            joined = step(C.collect_debias(target=target, projections=w.feed("evaluate-posthoc", "debias")),
                          "collect_debias")
            extra = {"debias": joined.outputs["debias"]}
        with dsl.ParallelFor(_loop(step, config_yaml, "evaluate-posthoc", target), name="posthoc-arms") as it:
            w.add("evaluate-posthoc", step(C.evaluate_posthoc(config_yaml=it.config, target=it.target, arm=it.arm,
                                                              **extra), "evaluate-posthoc"))


def _register_and_collect(w: _Wiring, step, wanted, t, target) -> None:
    evaluated = "evaluate" in w.tasks
    vanilla = w.tasks["evaluate-vanilla"].outputs["evaluation"] if "evaluate-vanilla" in w.tasks else None
    extra = {"evaluations": w.feed("register", "evaluations"), "vanilla_evaluation": vanilla} if evaluated else {}
    if "evaluate-posthoc" in w.tasks:
        extra["posthoc_evaluations"] = w.feed("register", "posthoc")
    if "debias" in w.tasks:
        extra["debias"] = w.feed("register", "debias")
    if wanted("register") and "finetune" in w.tasks:
        w.add("register", step(C.register(config_yaml=_own(t, "register"), target=target,
                                          checkpoints=w.feed("register", "finetune"),
                                          **w.feeds("register", "filtered"), **extra), "register"))
    if wanted("report") and "finetune" in w.tasks:
        evals = {"evaluations": dsl.Collected(w.tasks["evaluate"].outputs["evaluation"]),
                 "vanilla_evaluation": vanilla} if evaluated else {}
        if "evaluate-posthoc" in w.tasks:
            evals["posthoc_evaluations"] = dsl.Collected(w.tasks["evaluate-posthoc"].outputs["evaluation"])
        reg = {"registration": w.tasks["register"].outputs["registration"]} if "register" in w.tasks else {}
        kept = {k: w.tasks[s].outputs[o] for k, s, o in (("filtered", "filter", "filtered"),
                                                         ("scores", "entropy", "scores")) if s in w.tasks}
        w.add("collect_arms", step(C.collect_arms(
            target=target, checkpoints=dsl.Collected(w.tasks["finetune"].outputs["checkpoint"]),
            **kept, **evals, **reg), "collect_arms"))


def compile_pipeline(
    out: Path | str,
    variant: str = "gpu",
    config: "Config | None" = None,
    settings: ClusterSettings | None = None,
    last_stage: str = "report",
) -> Path:
    """Compile the pipeline of ``variant`` to a KFP IR YAML package at ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(build_pipeline(variant, config, settings, last_stage), package_path=str(out))
    return out
