"""Every variant of the Kubeflow pipeline compiles, and the compiled package carries the cluster settings.

No cluster needed: these tests read the KFP IR YAML the compiler writes (pipeline spec + Kubernetes platform
spec) and check GPU requests, node selectors, tolerations, secrets, the model-cache PVC, caching options, the
exit handler and the ParallelFor loops.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kfp")
pytest.importorskip("kfp.kubernetes")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import components  # noqa: E402
from components import _runtime  # noqa: E402

from context_cda import __version__  # noqa: E402
from context_cda import stages as T  # noqa: E402
from context_cda.config import Config, load_config  # noqa: E402
from pipelines import DAG_STAGES, ClusterSettings, build_pipeline, compile_pipeline  # noqa: E402

GPU_EXECUTORS = ("exec-sample", "exec-entropy", "exec-finetune", "exec-evaluate",
                 "exec-evaluate-target")  # see the table test


#: one arm of every kind (trained, dropout, projection, scoring): every row of the stage table is enabled
ALL_ARMS = ["cda", "context-cda", "dropout", "inlp", "sentence-debias", "self-debias"]


def _config(**overrides) -> Config:
    return load_config(None, overrides or None, params_file=ROOT / "params.yaml")


def _compile(tmp_path: Path, variant: str, config: Config | None = None, **kw) -> tuple[dict, dict | None]:
    out = compile_pipeline(tmp_path / f"{variant}.yaml", variant=variant, config=config or _config(), **kw)
    docs = list(yaml.safe_load_all(out.read_text()))
    return docs[0], (docs[1] if len(docs) > 1 else None)


def _executors(spec: dict) -> dict:
    return spec["deploymentSpec"]["executors"]


def _k8s(platform: dict) -> dict:
    return platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def _all_tasks(spec: dict) -> dict[str, dict]:
    """Every task of every DAG (root and sub-DAGs), keyed by task name."""
    tasks = dict(spec["root"]["dag"]["tasks"])
    for comp in spec["components"].values():
        tasks.update(comp.get("dag", {}).get("tasks", {}))
    return tasks


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("gpu"), "gpu")


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("cpu"), "cpu")


# ---------------------------------------------------------------------------------------------------- components


def test_one_component_per_stage_calling_the_library():
    assert set(components.STAGE_COMPONENTS) == set(T.ORDER)  # every step of the table has its component
    for step, comp in components.STAGE_COMPONENTS.items():
        source = comp.component_spec.implementation.container.command[-1]
        calls = (f'run_table_step("{step}"', "run_table_step(BOUNDARY_STEPS[boundary]", f'run_stage("{step}"')
        assert any(c in source for c in calls), step
        assert "from components._runtime import" in source
        # the component's input artifacts are the table's inputs of the step (validate: one generic input)
        names = {i.name for i in T.get(step).inputs}
        inputs = set(comp.component_spec.inputs or {})
        names = {n for n in names if _runtime.GIVEN_AS.get(next(iter(inputs & set(_runtime.GIVEN_AS)), "")) != n}
        if T.get(step).command != "validate" and step != "report":
            assert names <= inputs or step == "register", (step, names, inputs)


def test_gpu_steps_follow_the_stage_table(tmp_path):
    # every arm kind, so that every row of the table is in the pipeline (debias and evaluate-posthoc are compiled
    # only for a config with a projection / post-hoc arm)
    cfg = _config(train={"arms": ALL_ARMS})
    spec, _ = _compile(tmp_path, "gpu", cfg)
    ex = _executors(spec)
    checked = set()
    for row in T.TABLE:
        if not row.enabled(cfg):  # the neutral rows: only with the context-neutral arm (below)
            continue
        name = "exec-" + components.STAGE_COMPONENTS[row.step].component_spec.name.replace("_", "-")
        wants_gpu = row.gpu == "yes"  # "generator": only with augment_mode in-process (the default is service)
        assert ("accelerator" in ex[name]["container"].get("resources", {})) == wants_gpu, row.step
        checked.add(row.step)
    assert {"debias", "evaluate-posthoc", "finetune", "register", "report"} <= checked, checked


def test_the_neutral_step_is_wired_with_its_arm(tmp_path):
    spec, _ = _compile(tmp_path, "gpu", _config(train={"arms": ["cda", "context-neutral"]}))
    assert "exec-neutral" in _executors(spec)
    # the finetune task reads the validated neutral rewrites: its 'neutral' input comes from a validate task's output
    text = json.dumps(spec)
    assert re.search(r'"neutral": \{"componentInputArtifact": "pipelinechannel--validate-\d-validated"\}', text), (
        "finetune's neutral input is not wired")
    off, _ = _compile(tmp_path, "gpu", _config())
    assert "exec-neutral" not in _executors(off)


def test_components_have_typed_artifacts_and_project_images():
    spec = components.finetune.component_spec
    assert {"cda", "augmented", "filtered"} <= set(spec.inputs)
    assert {"checkpoint", "metrics"} <= set(spec.outputs)
    assert spec.outputs["checkpoint"].type.startswith("system.Model")
    source = spec.implementation.container.command[-1]
    assert "from components.artifacts import Checkpoint" in source  # custom type travels by import
    assert components.ingest.component_spec.implementation.container.image.endswith(f"context-cda-cpu:{__version__}")
    assert components.entropy.component_spec.implementation.container.image.endswith(
        f"context-cda-train:{__version__}"
    )


# ---------------------------------------------------------------------------------------------------- gpu variant


def test_gpu_variant_requests_accelerators_on_gpu_steps(gpu):
    spec, _ = gpu
    ex = _executors(spec)
    for name in GPU_EXECUTORS:
        res = ex[name]["container"]["resources"]
        assert res["accelerator"]["resourceType"] == "nvidia.com/gpu", name
        assert res["accelerator"]["resourceCount"] == "1", name
        assert ex[name]["container"]["image"] == f"ghcr.io/context-cda/context-cda-train:{__version__}"
    for name in ("exec-ingest", "exec-cda", "exec-filter", "exec-register"):
        assert "accelerator" not in ex[name]["container"].get("resources", {}), name
        assert ex[name]["container"]["image"] == f"ghcr.io/context-cda/context-cda-cpu:{__version__}"


def test_gpu_variant_node_selectors_tolerations_and_pvc(gpu):
    _, platform = gpu
    k8s = _k8s(platform)
    for name in GPU_EXECUTORS:
        assert k8s[name]["nodeSelector"]["labels"] == {"nvidia.com/gpu.present": "true"}, name
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in k8s[name]["tolerations"]
        assert [(p["constant"], p["mountPath"]) for p in k8s[name]["pvcMount"]] == [("ccda-model-cache", "/models")]
    for name in ("exec-ingest", "exec-cda", "exec-filter"):
        assert "nodeSelector" not in k8s[name] and "tolerations" not in k8s[name], name


def test_gpu_variant_secrets_as_env(gpu):
    _, platform = gpu
    k8s = _k8s(platform)

    def secrets(executor: str) -> dict[str, tuple[set[str], bool]]:
        return {
            s["secretName"]: ({e["envVar"] for e in s["keyToEnv"]}, s.get("optional", False))
            for s in k8s[executor].get("secretAsEnv", [])
        }

    for name in k8s:  # S3 credentials everywhere, never optional
        assert secrets(name)["ccda-s3-credentials"] == ({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, False)
        cms = {c["configMapName"] for c in k8s[name].get("configMapAsEnv", [])}
        assert cms == {"ccda-pipeline-config"}, name
    for name in GPU_EXECUTORS:
        assert secrets(name)["ccda-hf-token"] == ({"HF_TOKEN"}, True)
        assert "MLFLOW_TRACKING_PASSWORD" in secrets(name)["ccda-mlflow-auth"][0]
    assert "ccda-mlflow-auth" in secrets("exec-register")
    # no secret *values* anywhere in the package
    text = yaml.safe_dump(platform)
    assert not re.search(r"(?i)(secretValue|stringData|password:\s*\S)", text)


def test_caching_options(gpu):
    spec, _ = gpu
    tasks = _all_tasks(spec)
    assert tasks["ingest"]["cachingOptions"] == {"enableCache": True}
    assert tasks["finetune"]["cachingOptions"] == {"enableCache": True}
    assert not tasks["register"]["cachingOptions"].get("enableCache", False)
    assert not tasks["record-status"]["cachingOptions"].get("enableCache", False)


def test_exit_handler_records_status(gpu):
    spec, _ = gpu
    root = spec["root"]["dag"]["tasks"]
    assert set(root) == {"exit-handler-1", "record-status"}
    exit_task = root["record-status"]
    assert exit_task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert exit_task["dependentTasks"] == ["exit-handler-1"]
    status_input = exit_task["inputs"]["parameters"]["status"]
    assert status_input["taskFinalStatus"]["producerTask"] == "exit-handler-1"


def _loops(spec: dict) -> dict[str, dict]:
    return {name: c["dag"]["tasks"] for name, c in spec["components"].items() if name.startswith("comp-for-loop")}


def _loop_task(dag: dict, loop_component: str) -> str:
    """The task in ``dag`` that runs the ParallelFor component ``loop_component``."""
    return next(n for n, t in dag.items() if t.get("componentRef", {}).get("name") == loop_component)


def _items_of(dag: dict, loop_task: str) -> tuple[str, dict]:
    """(the task whose output a ParallelFor iterates, its inputs): each loop iterates a ``matrix`` task."""
    channel = dag[loop_task]["parameterIterator"]["items"]["inputParameter"]
    producer = channel.removeprefix("pipelinechannel--").removesuffix("-Output")
    return producer, dag[producer]["inputs"]["parameters"]


def test_parallel_for_over_parts_targets_and_arms_from_the_config(gpu):
    """Every loop iterates a matrix task that reads the config at run time: the augment and sample parts, the
    targets (each item with its view of the config), and (target, arm, seed) inside each target."""
    spec, _ = gpu
    loops = _loops(spec)
    name = {k: next(n for n, t in loops.items() if k in t) for k in ("augment", "sample", "filter", "finetune")}
    outer, inner = loops[name["filter"]], loops[name["finetune"]]
    assert set(loops[name["augment"]]) == {"augment"} and set(loops[name["sample"]]) == {"sample"}
    assert {"entropy", "filter", "collect-arms", "register"} <= set(outer) and "sample" not in outer
    assert {"budget", "finetune", "evaluate"} == set(inner)
    inner_loop = _loop_task(outer, name["finetune"])
    assert inner_loop in outer["register"]["dependentTasks"]  # every arm and seed first (one gate, in order)
    exit_dag = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    steps = {}
    for loop, dag in ((name["augment"], exit_dag), (name["sample"], exit_dag), (name["filter"], exit_dag),
                      (name["finetune"], outer)):
        producer, params = _items_of(dag, _loop_task(dag, loop))
        assert dag[producer]["componentRef"]["name"].startswith("comp-matrix")
        steps[loop] = params["step"]["runtimeValue"]["constant"]
        assert "config_yaml" in params
    assert steps == {name["augment"]: "augment-part", name["sample"]: "sample-part", name["filter"]: "targets",
                     name["finetune"]: "finetune"}
    # the per-target tasks take the target's view of the config from the loop item, not the pipeline parameter
    assert outer["entropy"]["inputs"]["parameters"]["config_yaml"]["componentInputParameter"].endswith("-loop-item")
    assert "sample-merge" in exit_dag and "report" in exit_dag  # the merge once, the report fans in the targets


def test_the_matrix_items_carry_each_steps_view_of_the_config():
    cfg = _config(run={"targets": {"a": "tiny:gpt2", "b": "tiny:bert"}}, train={"seeds": [13, 99]},
                  pipeline={"generation_shards": 3})
    parts = _runtime.step_matrix(cfg, "sample-part", {})
    assert [p["shard"] for p in parts] == [0, 1, 2]
    targets = _runtime.step_matrix(cfg, "targets", {}, ("entropy", "filter"))
    assert [t["target"] for t in targets] == ["a", "b"]
    assert _runtime.load_config(targets[1]["config_entropy"]).run.targets == {"b": "tiny:bert"}
    assert targets[0]["config_filter"] == targets[1]["config_filter"]  # the filter reads no target setting
    arms = _runtime.step_matrix(cfg, "finetune", {"target": "a"}, ("budget",))
    assert [(i["target"], i["arm"], i["seed"]) for i in arms] == [
        ("a", "cda", 13), ("a", "cda", 99), ("a", "context-cda", 13), ("a", "context-cda", 99)]
    view = _runtime.load_config(arms[0]["config"])
    assert view.train.seeds == [13] and view.train.arms == ["cda"] and view.run.targets == {"a": "tiny:gpt2"}
    assert _runtime.load_config(arms[0]["config_budget"]).train.arms == ["cda", "context-cda"]  # its group
    one = _config(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13]}, pipeline={"generation_shards": 3})
    first = _runtime.step_matrix(one, "finetune", {"target": "a"}, ("budget",))
    # adding a seed and a target leaves the finished task's inputs (its KFP cache key) as they were; so does an arm
    # of another kind or group, or a benchmark that is not scored per epoch
    assert first[0] == arms[0]
    more = _config(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13], "arms": ["cda", "context-cda", "inlp"]},
                   evaluate={"benchmarks": ["stereoset", "crows", "winogender"]}, pipeline={"generation_shards": 3})
    assert _runtime.step_matrix(more, "finetune", {"target": "a"}, ("budget",))[0] == first[0]
    for step in ("ingest", "cda", "validate-cda", "augment", "sample"):  # and the tasks upstream
        assert _runtime.task_config(more, step, {}) == _runtime.task_config(one, step, {}), step


def _artifact_source(task: dict, name: str) -> tuple[str, str]:
    """(producer task or parent-DAG input, output key) of a task's input artifact."""
    src = task["inputs"]["artifacts"][name]
    if "taskOutputArtifact" in src:
        return src["taskOutputArtifact"]["producerTask"], src["taskOutputArtifact"]["outputArtifactKey"]
    return "<parent>", src["componentInputArtifact"]


def test_evaluations_reach_register_and_the_report(gpu):
    spec, _ = gpu
    comps = spec["components"]
    loops = _loops(spec)
    outer_name, outer = next((n, t) for n, t in loops.items() if "filter" in t)
    inner_name, inner = next((n, t) for n, t in loops.items() if "finetune" in t)
    # the vanilla target is evaluated once per target (outer loop), on a GPU node, after its corpus passed
    van = outer["evaluate-target"]
    assert van["componentRef"]["name"] == "comp-evaluate-target"
    assert van["inputs"]["parameters"]["target"] == outer["entropy"]["inputs"]["parameters"]["target"]
    assert "filter" in van["dependentTasks"]
    assert "evaluate-target" not in inner
    # register (per target) gets every (arm, seed)'s checkpoint and evaluation, and the target's vanilla one
    loop_task = next(n for n, t in outer.items() if t.get("componentRef", {}).get("name") == inner_name)
    reg = outer["register"]
    assert _artifact_source(reg, "checkpoints") == (loop_task, "pipelinechannel--finetune-checkpoint")
    assert _artifact_source(reg, "evaluations") == (loop_task, "pipelinechannel--evaluate-evaluation")
    assert _artifact_source(reg, "vanilla_evaluation") == ("evaluate-target", "evaluation")
    assert _artifact_source(reg, "filtered") == ("filter", "filtered")
    reg_inputs = comps["comp-register"]["inputDefinitions"]["artifacts"]
    assert reg_inputs["checkpoints"]["isArtifactList"] and reg_inputs["evaluations"]["isArtifactList"]
    assert reg_inputs["evaluations"]["isOptional"] and reg_inputs["vanilla_evaluation"]["isOptional"]
    # collect_arms fans in the arms' evaluations (dsl.Collected over the inner loop) and takes the vanilla one
    collect = outer["collect-arms"]
    assert _artifact_source(collect, "evaluations") == (loop_task, "pipelinechannel--evaluate-evaluation")
    assert _artifact_source(collect, "vanilla_evaluation") == ("evaluate-target", "evaluation")
    assert _artifact_source(collect, "registration") == ("register", "registration")
    assert comps["comp-collect-arms"]["inputDefinitions"]["artifacts"]["evaluations"]["isArtifactList"]
    # the report fans in the targets' summaries (which carry the evaluation aggregates)
    exit_dag = comps["comp-exit-handler-1"]["dag"]["tasks"]
    targets_loop = next(n for n, t in exit_dag.items() if t.get("componentRef", {}).get("name") == outer_name)
    assert _artifact_source(exit_dag["report"], "summaries") == (targets_loop, "pipelinechannel--collect-arms-summary")
    assert _artifact_source(exit_dag["report"], "augmented") == ("augment-merge", "augmented")
    # the evaluate_target body runs the table's vanilla evaluation step
    source = _executors(spec)["exec-evaluate-target"]["container"]["command"][-1]
    assert 'run_table_step("evaluate-vanilla"' in source


def test_training_and_filtering_read_the_validated_tables(gpu):
    """The KFP wiring takes what the stage table names: every door trains on what validation kept."""
    spec, _ = gpu
    tasks = _all_tasks(spec)
    validators = {n: t for n, t in tasks.items() if t["componentRef"]["name"].startswith("comp-validate")}
    boundary = {t["inputs"]["parameters"]["boundary"]["runtimeValue"]["constant"]: n for n, t in validators.items()}
    assert _artifact_source(tasks["augment"], "counterfactuals") == ("<parent>", f"pipelinechannel--{boundary['cda']}-validated")
    assert _artifact_source(tasks["augment-merge"], "counterfactuals") == (boundary["cda"], "validated")
    assert _artifact_source(tasks["sample"], "augmented") == ("<parent>", f"pipelinechannel--{boundary['augment']}-validated")
    assert _artifact_source(tasks["sample-merge"], "augmented") == (boundary["augment"], "validated")
    assert _artifact_source(tasks["entropy"], "samples") == ("<parent>", "pipelinechannel--sample-merge-samples")
    assert _artifact_source(tasks["filter"], "scores") == (boundary["entropy"], "validated")
    ft = tasks["finetune"]
    assert _artifact_source(ft, "cda") == ("<parent>", f"pipelinechannel--{boundary['cda']}-validated")
    assert _artifact_source(ft, "augmented") == ("<parent>", f"pipelinechannel--{boundary['augment']}-validated")
    assert _artifact_source(ft, "filtered") == ("<parent>", "pipelinechannel--filter-filtered")


def test_components_lay_fan_ins_out_by_the_run_layout():
    collect = components.collect_arms.component_spec.implementation.container.command[-1]
    assert "L.folder(" in collect and "L.AGGREGATE_FILE" in collect
    report = components.report.component_spec.implementation.container.command[-1]
    assert 'step_inputs(config, "report"' in report


def test_pipeline_parameters_carry_the_config(gpu):
    """The config is the run's one source: no targets, arms or seeds parameters beside it."""
    spec, _ = gpu
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert set(params) == {"config_yaml"}
    cfg = _runtime.load_config(params["config_yaml"]["defaultValue"])
    assert cfg.to_dict() == _config().to_dict()


def test_augment_service_mode_uses_the_vllm_service_without_gpu(gpu):
    spec, platform = gpu
    ex = _executors(spec)
    assert "accelerator" not in ex["exec-augment"]["container"].get("resources", {})
    tasks = _all_tasks(spec)
    overrides = tasks["augment"]["inputs"]["parameters"]["overrides"]["runtimeValue"]["constant"]
    assert "augment.backend=openai" in overrides
    assert "augment.openai.base_url=$CCDA_VLLM_BASE_URL" in overrides
    assert "nodeSelector" not in _k8s(platform)["exec-augment"]


def test_augment_in_process_mode_runs_vllm_on_a_gpu_node(tmp_path):
    spec, platform = _compile(tmp_path, "gpu", _config(pipeline={"augment_mode": "in-process"},
                                                       augment={"tensor_parallel_size": 2, "pipeline_parallel_size": 2}))
    res = _executors(spec)["exec-augment"]["container"]["resources"]
    assert res["accelerator"]["resourceType"] == "nvidia.com/gpu"
    # the generating tasks request vLLM's tensor x pipeline GPUs, the others pipeline.accelerator_count
    counts = {name: ex["container"]["resources"]["accelerator"]["resourceCount"]
              for name, ex in _executors(spec).items() if "accelerator" in ex["container"].get("resources", {})}
    assert counts["exec-augment"] == counts["exec-sample"] == "4" and counts["exec-finetune"] == "1", counts
    assert "nodeSelector" in _k8s(platform)["exec-augment"]
    overrides = _all_tasks(spec)["augment"]["inputs"]["parameters"]["overrides"]["runtimeValue"]["constant"]
    assert overrides == ["augment.backend=vllm"]


def test_settings_follow_config(tmp_path):
    cfg = _config(pipeline={"accelerator_type": "amd.com/gpu", "accelerator_count": 2, "image": "reg.io/t:9"})
    spec, _ = _compile(tmp_path, "gpu", cfg)
    ex = _executors(spec)["exec-finetune"]["container"]
    assert ex["resources"]["accelerator"] == {
        "count": "2", "resourceCount": "2", "resourceType": "amd.com/gpu", "type": "amd.com/gpu"
    } or (ex["resources"]["accelerator"]["resourceType"], ex["resources"]["accelerator"]["resourceCount"]) == (
        "amd.com/gpu", "2")
    assert ex["image"] == "reg.io/t:9"


# ---------------------------------------------------------------------------------------------------- cpu variant


def test_cpu_variant_has_no_cluster_settings(cpu):
    spec, platform = cpu
    assert platform is None  # no Kubernetes platform spec at all
    for name, ex in _executors(spec).items():
        assert "accelerator" not in ex["container"].get("resources", {}), name
    tasks = _all_tasks(spec)
    assert tasks["augment"]["inputs"]["parameters"]["overrides"]["runtimeValue"]["constant"] == []
    assert "record-status" in spec["root"]["dag"]["tasks"]


@pytest.mark.parametrize("last", DAG_STAGES)
def test_truncated_pipelines_compile(tmp_path, last):
    # every arm kind: every step of the table up to `last` is in the DAG (debias and evaluate-posthoc need one)
    spec, _ = _compile(tmp_path, "cpu", _config(train={"arms": ALL_ARMS}), last_stage=last)
    used = {t["componentRef"]["name"] for t in _all_tasks(spec).values()}
    for step in DAG_STAGES:  # the DAG holds exactly the steps up to `last` (validation going with its step)
        comp = "comp-" + components.STAGE_COMPONENTS[step].component_spec.name.replace("_", "-")
        row = T.get(step)
        if not row.enabled(_config()):  # the neutral rows: only with the context-neutral arm
            continue
        checks = row.command == "validate" and DAG_STAGES.index(row.inputs[0].step) <= DAG_STAGES.index(last)
        if DAG_STAGES.index(step) <= DAG_STAGES.index(last) or checks:
            assert comp in used, (last, step)
    assert ("comp-evaluate-target" in used) == (DAG_STAGES.index(last) >= DAG_STAGES.index("evaluate-vanilla"))


def test_unknown_variant_is_an_error():
    with pytest.raises(ValueError, match="variant"):
        build_pipeline("tpu", _config())


def test_cluster_settings_from_config():
    s = ClusterSettings.from_config(_config(pipeline={"cpu_image": "reg.io/cpu"}))
    assert s.cpu_image == f"reg.io/cpu:{__version__}"
    assert s.gpu_image == f"ghcr.io/context-cda/context-cda-train:{__version__}"


# ---------------------------------------------------------------------------------------------------- runtime glue


def test_runtime_load_config_applies_overrides_and_env(monkeypatch):
    text = json.dumps(_config().to_dict())
    monkeypatch.setenv("CCDA_VLLM_BASE_URL", "http://ccda-vllm:8000/v1")
    cfg = _runtime.load_config(text, ["augment.backend=openai", "augment.openai.base_url=$CCDA_VLLM_BASE_URL",
                                      "augment.sampling.n=3"])
    assert cfg.augment.backend == "openai"
    assert cfg.augment.openai.base_url == "http://ccda-vllm:8000/v1"
    assert cfg.augment.sampling.n == 3
    assert cfg.augment.sampling.temperature == _config().augment.sampling.temperature  # siblings kept
    monkeypatch.delenv("CCDA_VLLM_BASE_URL")
    from context_cda.errors import ConfigError

    with pytest.raises(ConfigError, match="CCDA_VLLM_BASE_URL"):
        _runtime.load_config(text, ["augment.openai.base_url=$CCDA_VLLM_BASE_URL"])


def test_runtime_run_view_and_metrics(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "counterfactuals.parquet").write_text("x")
    view = _runtime.run_view({"cda": a, "filter/t1": a})
    assert (view / "cda" / "counterfactuals.parquet").read_text() == "x"
    assert (view / "filter" / "t1").resolve() == a.resolve()

    class M:  # a dsl.Metrics artifact: metadata, and the file at its path
        def __init__(self):
            self.metadata = {}
            self.path = str(tmp_path / "metrics" / "metrics")

        def log_metric(self, k, v):
            self.metadata[k] = v

    m = M()
    _runtime.log_metrics(m, json.dumps({"rows": 3, "ok": True, "ss": {"gender": 51.5}, "name": "x", "nan": None}))
    assert m.metadata == {"rows": 3.0, "ss.gender": 51.5}
    assert json.loads(Path(m.path).read_text()) == m.metadata  # kfp.local's cache finds the output's file


def test_collect_arms_copies_evaluation_aggregates_without_predictions(tmp_path):
    from kfp import dsl

    def folder(name: str, files: dict[str, str]) -> Path:
        root = tmp_path / name
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    evaluation = {"aggregate.json": '{"metrics": {"stereoset_ss": 55.0}}', "manifest.json": "{}",
                  "stereoset/aggregate.json": "{}", "stereoset/predictions.parquet": "x",
                  "next-token/aggregate.json": "{}", "rejected.parquet": "x"}
    ckpt = folder("ft", {"metrics.csv": "epoch\n0\n", "final/model.safetensors": "w", "checkpoints/epoch-1/x": "w"})
    reg = folder("reg", {"cda/promotion.json": "{}"})
    flt = folder("flt", {"k30/corpus.parquet": "x", "summary.json": "{}"})
    ent = folder("ent", {"scores.parquet": "x", "audit.parquet": "x", "samples/a/s.parquet": "x"})
    arm_ev, van_ev = folder("ev", evaluation), folder("van", evaluation)

    def art(cls, path: Path, step: str, **keys):
        return cls(uri=str(path), metadata={"step": step, "target": "t1", **keys})

    summary = dsl.Artifact(uri=str(tmp_path / "summary"))
    components.collect_arms.python_func(
        target="t1", checkpoints=[art(dsl.Model, ckpt, "finetune", arm="cda", seed=13)],
        registration=art(dsl.Artifact, reg, "register"), filtered=art(dsl.Dataset, flt, "filter"),
        scores=art(dsl.Dataset, ent, "entropy"),
        evaluations=[art(dsl.Dataset, arm_ev, "evaluate", arm="cda", seed=13)],
        vanilla_evaluation=art(dsl.Dataset, van_ev, "evaluate-vanilla"), summary=summary,
    )
    root = tmp_path / "summary"
    for model in ("cda/seed-13", "vanilla"):
        files = {p.relative_to(root / "evaluate" / "t1" / model).as_posix()
                 for p in (root / "evaluate" / "t1" / model).rglob("*") if p.is_file()}
        # aggregates, and the intrinsic per-item scores the paired comparisons need; no other predictions
        assert files == {"aggregate.json", "stereoset/aggregate.json", "next-token/aggregate.json",
                         "stereoset/predictions.parquet"}, model
    assert (root / "finetune" / "t1" / "cda" / "seed-13" / "metrics.csv").is_file()
    assert not (root / "finetune" / "t1" / "cda" / "seed-13" / "final").exists()
    assert not (root / "finetune" / "t1" / "cda" / "seed-13" / "checkpoints").exists()
    assert (root / "register" / "t1" / "cda" / "promotion.json").is_file()
    assert (root / "filter" / "t1" / "k30" / "corpus.parquet").is_file()
    assert (root / "entropy" / "t1" / "scores.parquet").is_file() and not (root / "entropy" / "t1" / "samples").exists()
    assert summary.metadata["steps"] == [{"target": "t1", "arm": "cda", "seed": 13}]


# ------------------------------------------------------------------ cluster settings of the paper package (issue 16/18)


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """`ccda pipeline compile --profile paper`: (pipeline spec, Kubernetes platform spec, resolved config)."""
    from context_cda.cli import main

    out = tmp_path_factory.mktemp("paper") / "paper.yaml"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        assert main(["pipeline", "compile", "--profile", "paper", "--out", str(out)]) == 0
    spec, platform = yaml.safe_load_all(out.read_text())
    return spec, platform, load_config("paper", params_file=ROOT / "params.yaml")


def _kfp_max_retry_window() -> int:
    """The longest backoff maxDuration the installed KFP SDK compiles (a probe: newer SDKs cap it at 3600 s)."""
    from kfp import compiler, dsl

    @dsl.component
    def noop():
        pass

    @dsl.pipeline(name="probe")
    def probe():
        noop().set_retry(1, backoff_max_duration="1000000s")

    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / "probe.yaml"
        compiler.Compiler().compile(probe, package_path=str(package))
        task = yaml.safe_load(package.read_text())["root"]["dag"]["tasks"]["noop"]
    return int(task["retryPolicy"]["backoffMaxDuration"].removesuffix("s"))


def _task_steps(spec: dict) -> dict[str, tuple[str, dict]]:
    """executor label -> (stage-table step or the pipeline's own task name, the task), for every container task."""
    by_component = {c.component_spec.name.replace("_", "-"): step for step, c in components.STAGE_COMPONENTS.items()
                    if T.get(step).command != "validate"}
    out = {}
    for task in _all_tasks(spec).values():
        comp = spec["components"][task["componentRef"]["name"]]
        if "executorLabel" not in comp:
            continue  # a ParallelFor / exit-handler DAG
        base = re.sub(r"-\d+$", "", task["componentRef"]["name"].removeprefix("comp-"))
        if base == "validate":
            boundary = task["inputs"]["parameters"]["boundary"]["runtimeValue"]["constant"]
            step = f"validate-{boundary}"
        else:
            step = by_component.get(base, base.replace("-", "_"))
        out[comp["executorLabel"]] = (step, task)
    return out


def test_paper_package_covers_every_step_of_the_table(paper):
    spec, _, cfg = paper
    steps = {step for step, _ in _task_steps(spec).values()}
    # the paper profile evaluates and registers: every step its config switches on is a task (the neutral rows
    # only come with the context-neutral arm, which the paper profile does not train)
    on = {s for s in T.ORDER if T.get(s).enabled(cfg)}
    assert on <= steps and not (set(T.ORDER) - on) & steps
    assert set(T.ORDER) - on == {"neutral", "validate-neutral"}
    assert {"matrix", "collect_arms", "record_status"} <= steps


def test_paper_package_retries_with_backoff_except_side_effects_and_the_exit_handler(paper):
    spec, _, cfg = paper
    p = cfg.pipeline
    exit_task = next(n for n, t in spec["root"]["dag"]["tasks"].items()
                     if t.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED")
    no_retry = {r.step for r in T.TABLE if r.side_effects}
    assert no_retry == {"register"}  # what the table says today; the loop below derives from it either way
    for _, (step, task) in _task_steps(spec).items():
        policy = task.get("retryPolicy")
        if step in no_retry or task is spec["root"]["dag"]["tasks"][exit_task]:
            assert policy is None, step
            continue
        assert policy["maxRetryCount"] == p.retries == 2, step
        assert policy["backoffDuration"] == f"{p.retry_backoff_s}s" and policy["backoffFactor"] == p.retry_backoff_factor
        timeout = p.timeouts.get(step, p.default_timeout_s)
        waits = sum(p.retry_backoff_s * p.retry_backoff_factor**i for i in range(p.retries))
        # Argo's maxDuration runs from the first attempt's start: it must leave room for every attempt, as far as
        # the KFP SDK lets it (kfp >= 2.15 caps it at 3600 s)
        window = (p.retries + 1) * timeout + waits
        assert policy["backoffMaxDuration"] == f"{min(window, _kfp_max_retry_window())}s", step


def test_paper_package_gives_every_task_a_timeout(paper):
    spec, platform, cfg = paper
    k8s = _k8s(platform)
    execs = _task_steps(spec)
    assert set(execs) == set(k8s)
    for ex, (step, _) in execs.items():
        expected = cfg.pipeline.timeouts.get(step, cfg.pipeline.default_timeout_s)
        assert int(k8s[ex]["activeDeadlineSeconds"]) == expected, (ex, step)
    assert int(k8s["exec-finetune"]["activeDeadlineSeconds"]) == 48 * 3600
    assert int(k8s["exec-register"]["activeDeadlineSeconds"]) == cfg.pipeline.default_timeout_s


def test_paper_package_gpu_tasks_get_a_memory_backed_dev_shm(paper):
    spec, platform, cfg = paper
    k8s = _k8s(platform)
    execs = _task_steps(spec)
    gpu_steps = {r.step for r in T.TABLE if r.gpu == "yes"}  # augment runs on the vLLM service in this package
    gpu_execs = {ex for ex, (step, _) in execs.items() if step in gpu_steps}
    # the paper profile's Table-1 baselines bring debias and evaluate-posthoc beside the five others
    assert len(gpu_execs) == len(gpu_steps) == 7 and {"debias", "evaluate-posthoc"} <= gpu_steps
    for ex in k8s:
        has_gpu = "accelerator" in _executors(spec)[ex]["container"].get("resources", {})
        assert has_gpu == (ex in gpu_execs), ex
        mounts = k8s[ex].get("emptyDirMounts", [])
        if has_gpu:
            assert mounts == [{"volumeName": "dshm", "mountPath": "/dev/shm", "medium": "Memory",
                               "sizeLimit": cfg.pipeline.shm_size}], ex
        else:
            assert not mounts, ex


def test_paper_package_runs_every_task_as_the_images_non_root_user(paper):
    _, platform, _ = paper
    for ex, cfg in _k8s(platform).items():
        assert cfg["securityContext"] == {"runAsUser": "10001", "runAsGroup": "10001", "runAsNonRoot": True}, ex


def test_paper_package_labels_pods_for_the_network_policies(paper):
    spec, platform, cfg = paper
    k8s = _k8s(platform)
    downloads = {r.step for r in T.TABLE if r.gpu == "yes" or r.config_files}  # models, or input files (ingest)
    assert cfg.augment.review.meaning == "nli"  # the paper's review loads an NLI judge in the augment parts
    downloads.add("augment-part")
    for ex, (step, _) in _task_steps(spec).items():
        labels = k8s[ex]["podMetadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == "pipeline-step", ex
        assert labels["app.kubernetes.io/part-of"] == "context-cda", ex
        assert (labels.get("context-cda.io/egress") == "internet") == (step in downloads), (ex, step)
    assert "context-cda.io/egress" not in k8s["exec-register"]["podMetadata"]["labels"]


def test_paper_package_sends_the_vllm_key_to_the_generating_steps_only(paper):
    spec, platform, _ = paper
    k8s = _k8s(platform)
    tasks = _all_tasks(spec)
    for ex, (step, task) in _task_steps(spec).items():
        secrets = {s["secretName"]: s for s in k8s[ex].get("secretAsEnv", [])}
        overrides = task["inputs"]["parameters"].get("overrides", {}).get("runtimeValue", {}).get("constant", [])
        generates = "augment.backend=openai" in overrides
        assert ("ccda-vllm-api-key" in secrets) == generates, step
        if generates:  # the server requires the key (--api-key): a missing Secret stops the pod before it starts
            assert secrets["ccda-vllm-api-key"]["keyToEnv"] == [{"secretKey": "OPENAI_API_KEY", "envVar": "OPENAI_API_KEY"}]
            assert not secrets["ccda-vllm-api-key"].get("optional", False)
            assert "augment.openai.allow_insecure=$CCDA_VLLM_ALLOW_INSECURE" in overrides
    assert {s for s, (step, _) in _task_steps(spec).items() if step in ("augment-part", "sample-part")} == {
        "exec-augment", "exec-sample"}
    assert "overrides" in tasks["sample"]["inputs"]["parameters"]
    assert "ccda-vllm-api-key" not in {s["secretName"] for s in k8s["exec-entropy"].get("secretAsEnv", [])}


def test_cluster_settings_follow_the_pipeline_section(tmp_path):
    cfg = _config(pipeline={"retries": 0, "timeouts": {"filter": 120}, "default_timeout_s": 600, "shm_size": "2Gi",
                            "internet_egress": "none", "run_as_user": 2000, "run_as_group": 3000})
    assert cfg.pipeline.timeouts["finetune"] == 48 * 3600  # a partial map keeps the other steps' defaults
    spec, platform = _compile(tmp_path, "gpu", cfg)
    k8s = _k8s(platform)
    assert not any("retryPolicy" in t for t in _all_tasks(spec).values())
    assert int(k8s["exec-filter"]["activeDeadlineSeconds"]) == 120
    assert int(k8s["exec-matrix"]["activeDeadlineSeconds"]) == 600
    assert k8s["exec-finetune"]["emptyDirMounts"][0]["sizeLimit"] == "2Gi"
    assert not any("context-cda.io/egress" in e["podMetadata"]["labels"] for e in k8s.values())
    assert k8s["exec-ingest"]["securityContext"] == {"runAsUser": "2000", "runAsGroup": "3000", "runAsNonRoot": True}
    _, everyone = _compile(tmp_path / "all", "gpu", _config(pipeline={"internet_egress": "all"}))
    assert all(e["podMetadata"]["labels"]["context-cda.io/egress"] == "internet" for e in _k8s(everyone).values())


def test_bad_cluster_settings_are_config_errors(tmp_path):
    from context_cda.errors import ConfigError

    with pytest.raises(ConfigError, match="shm_size"):
        _compile(tmp_path, "gpu", _config(pipeline={"shm_size": "16Gi"}))  # half the GPU tasks' memory limit
    with pytest.raises(ConfigError, match="unknown step.*fine-tune"):
        _config(pipeline={"timeouts": {"fine-tune": 3600}})
    with pytest.raises(ConfigError, match="at least 60"):
        _config(pipeline={"timeouts": {"finetune": 5}})
    with pytest.raises(ConfigError, match="retry_backoff_factor"):
        _config(pipeline={"retry_backoff_factor": 1.5})  # Argo reads the factor as an integer
    with pytest.raises(ConfigError, match="shm_size"):
        _config(pipeline={"shm_size": "lots"})


def test_cpu_variant_has_no_retries_or_timeouts(cpu):
    spec, platform = cpu  # kfp.local would wait out the backoff of a failing task: cluster settings only
    assert platform is None
    assert not any("retryPolicy" in t for t in _all_tasks(spec).values())
