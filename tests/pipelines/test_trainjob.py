"""Fine-tuning as a Kubeflow Trainer v2 TrainJob (train.launcher: trainjob), without a cluster.

* The objects: the ClusterTrainingRuntime of k8s/trainer and the TrainJob the compiled paper pipeline's finetune task
  creates validate against Trainer's CRD schema, vendored with its version (k8s/trainer/crds/v2.3.0), strictly and
  with its CEL rules (tests/helpers/trainer_crd.py); a malformed object is refused by the same check.
* The launcher (context_cda.train.trainjob.launch) against a fake Kubernetes API server on 127.0.0.1 speaking the real
  REST paths (/apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs), through the ``kubernetes`` client:
  created, waited for, the step folder copied back; Failed -> the task fails with the TrainJob's reason and
  message; a retry takes over a running TrainJob and replaces a failed one; a refused object, a vanished one and a
  SIGTERM (the TrainJob deleted) each end it with one error.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parents[1] / "helpers"))

from trainer_crd import CRDS, problems  # noqa: E402

from context_cda.train import trainjob as TJ  # noqa: E402

pytest.importorskip("celpy")
kubernetes = pytest.importorskip("kubernetes")
VERSION = TJ.TRAINER_VERSION
PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs(?:/([^/?]+))?")


# ------------------------------------------------------------------------------------------------ the objects


def test_the_vendored_crds_are_the_release_they_name():
    folder = CRDS / VERSION
    source = (folder / "SOURCE.md").read_text()
    assert f"tag `{VERSION}`" in source
    for f in sorted(folder.glob("*.yaml")):
        assert hashlib.sha256(f.read_bytes()).hexdigest() in source, f.name
    assert len(list(folder.glob("*.yaml"))) == 2


def _runtime() -> dict:
    kubectl = subprocess.run([str(Path(sys.executable).parent / "kubectl"), "kustomize", str(ROOT / "k8s" / "trainer")],
                             capture_output=True, text=True, timeout=60)
    assert kubectl.returncode == 0, kubectl.stderr
    (obj,) = [d for d in yaml.safe_load_all(kubectl.stdout) if d]
    return obj


def test_the_runtime_validates_and_matches_what_the_trainjobs_expect():
    rt = _runtime()
    assert rt["kind"] == "ClusterTrainingRuntime" and rt["metadata"]["name"] == TJ.Cluster().runtime
    assert problems(rt, VERSION) == []
    (job,) = rt["spec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]
    assert job["name"] == TJ.NODE and [c["name"] for c in pod["spec"]["containers"]] == [TJ.NODE]
    assert pod["metadata"]["labels"] == TJ.POD_LABELS  # the NetworkPolicies' selector (k8s/base)
    sc = pod["spec"]["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] == 10001
    assert rt["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert {TJ.Cluster().model_cache_mount, "/dev/shm"} <= mounts


def test_a_malformed_object_is_refused_by_the_same_check():
    body = TJ.manifest(TJ.Cluster(), "ccda-ft-0123", "/runs/t/task.json")
    assert problems(body, VERSION) == []
    bad_name = json.loads(json.dumps(body))
    bad_name["metadata"]["name"] = "CCDA_ft"
    assert any("RFC 1035" in p for p in problems(bad_name, VERSION))  # a CEL rule of the CRD
    unknown = json.loads(json.dumps(body))
    unknown["spec"]["trainer"]["gpus"] = 8
    assert any("gpus" in p for p in problems(unknown, VERSION))  # strict: not a field of the schema
    typed = json.loads(json.dumps(body))
    typed["spec"]["trainer"]["numNodes"] = "two"
    assert any("numNodes" in p for p in problems(typed, VERSION))


def _compiled_trainjob(tmp_path: Path, *sets: str) -> tuple[dict, dict]:
    from pipelines.context_cda_pipeline import compile_pipeline

    from context_cda.config import load_config

    cfg = load_config("paper", ["train.launcher=trainjob", *sets], params_file=ROOT / "params.yaml")
    package, platform = yaml.safe_load_all(compile_pipeline(tmp_path / "paper.yaml", "gpu", cfg).read_text())
    tasks = {}

    def walk(dag: dict) -> None:
        for name, t in (dag.get("tasks") or {}).items():
            tasks[name] = t
    for comp in package["components"].values():
        walk(comp.get("dag") or {})
    walk(package["root"]["dag"])
    task = tasks["finetune"]
    cluster = TJ.Cluster.from_json(task["inputs"]["parameters"]["cluster"]["runtimeValue"]["constant"])
    executor = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-finetune"]
    container = package["deploymentSpec"]["executors"]["exec-finetune"]["container"]
    assert "accelerator" not in container.get("resources", {})  # the launcher is a CPU pod: the GPUs are the job's
    assert container["image"].startswith("ghcr.io/context-cda/context-cda-cpu:")
    return TJ.manifest(cluster, TJ.job_name("0123456789abcdef"), "/runs/trainjobs/0123456789abcdef/task.json",
                       {"context-cda.io/target": "bert-base-uncased"}), executor


def test_the_compiled_paper_pipeline_creates_a_trainjob_that_validates(tmp_path):
    body, executor = _compiled_trainjob(tmp_path, "pipeline.accelerator_count=8", "pipeline.trainjob.nodes=2")
    assert problems(body, VERSION) == []
    spec = body["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": _runtime()["metadata"]["name"]}
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 8
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "8"
    assert trainer["command"][:4] == ["torchrun", "--no-python", "ccda", "finetune"] and "--task" in trainer["command"]
    assert trainer["image"].startswith("ghcr.io/context-cda/context-cda-train:")
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in trainer["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {"ccda-s3-credentials", "ccda-mlflow-auth", "ccda-hf-token"}
    assert not any("value" in e and re.search(r"(?i)secret|password|token", e["name"]) for e in trainer["env"])
    (patch,) = spec["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["volumes"] == [{"name": "runs", "persistentVolumeClaim": {"claimName": "ccda-runs"}}]
    assert spec["activeDeadlineSeconds"] == 48 * 3600
    # the launcher task itself: a CPU pod on the same run volume, no GPU
    assert [m["mountPath"] for m in executor["pvcMount"]] == ["/runs"]
    print("\nthe paper profile's TrainJob (2 nodes x 8 GPUs):\n" + yaml.safe_dump(body, sort_keys=False))


def test_one_node_without_gpus_gets_one_process_and_no_gpu_request():
    body = TJ.manifest(TJ.Cluster(gpus_per_node=0), TJ.job_name("0123456789abcdef"), "/runs/t/task.json")
    assert problems(body, VERSION) == []
    trainer = body["spec"]["trainer"]
    assert trainer["numNodes"] == 1 and trainer["numProcPerNode"] == 1
    assert "nvidia.com/gpu" not in trainer["resourcesPerNode"]["requests"]


# ------------------------------------------------------------------------------------------------ a fake API server


class FakeTrainer:
    """The TrainJob endpoints of a Kubernetes API server: create (checked against the vendored CRD: 422 when
    refused, 409 when the name is taken), get (the status a test scripts: each GET moves one step along
    ``script[name]``; on "Complete" the job's ``work`` runs first, as its pods would), delete."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict] = {}
        self.script: dict[str, list[dict | None]] = {}
        self.work = None
        self.log: list[tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self):
                m = PATH.match(self.path)
                if m is None:
                    self._reply(404, _status(404, "NotFound", f"no route {self.path}"))
                return m

            def do_POST(self) -> None:  # noqa: N802
                if not (m := self._route()):
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = body["metadata"]["name"]
                fake.log.append(("POST", name))
                refused = problems(body, VERSION)
                if refused:
                    return self._reply(422, _status(422, "Invalid", f"TrainJob.trainer.kubeflow.org {name!r} is "
                                                    f"invalid: {'; '.join(refused)}"))
                if (m[1], name) in fake.objects:
                    return self._reply(409, _status(409, "AlreadyExists", f"trainjobs {name!r} already exists"))
                fake.objects[(m[1], name)] = body
                self._reply(201, body)

            def do_GET(self) -> None:  # noqa: N802
                if not (m := self._route()):
                    return
                fake.log.append(("GET", m[2]))
                obj = fake.objects.get((m[1], m[2]))
                if obj is None:
                    return self._reply(404, _status(404, "NotFound", f"trainjobs {m[2]!r} not found"))
                steps = fake.script.get(m[2], [])
                status = steps.pop(0) if len(steps) > 1 else (steps[0] if steps else None)
                if status is not None:
                    if any(c["type"] == "Complete" for c in status["conditions"]) and fake.work is not None:
                        fake.work(obj)
                        fake.work = None
                    obj["status"] = status
                self._reply(200, obj)

            def do_DELETE(self) -> None:  # noqa: N802
                if not (m := self._route()):
                    return
                fake.log.append(("DELETE", m[2]))
                if fake.objects.pop((m[1], m[2]), None) is None:
                    return self._reply(404, _status(404, "NotFound", f"trainjobs {m[2]!r} not found"))
                self._reply(200, _status(200, "Success", "deleted"))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeTrainer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def api(self):
        from kubernetes import client

        conf = client.Configuration()
        conf.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        return client.CustomObjectsApi(client.ApiClient(conf))


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Success" if code < 300 else "Failure",
            "message": message, "reason": reason, "code": code}


def _condition(kind: str, reason: str = "", message: str = "") -> dict:
    return {"conditions": [{"type": kind, "status": "True", "reason": reason or kind, "message": message,
                            "lastTransitionTime": "2026-12-06T00:00:00Z"}]}


RUNNING = {"conditions": [{"type": "Created", "status": "True", "reason": "JobsCreationSucceeded", "message": "",
                           "lastTransitionTime": "2026-12-06T00:00:00Z"}]}
KEYS = {"target": "tiny-gpt2", "arm": "cda", "seed": 13}


def _setup(tmp_path: Path) -> tuple[TJ.Cluster, dict[str, Path], str]:
    corpus = tmp_path / "artifacts" / "validate-cda" / "valid.parquet"
    corpus.parent.mkdir(parents=True)
    corpus.write_bytes(b"PAR1 not read here")
    cluster = TJ.Cluster(namespace="ccda", runs_mount=str(tmp_path / "runs"), poll_s=0.01, timeout_s=60)
    config = json.dumps({"train": {"epochs": 1}, "_step_view": "finetune"})
    return cluster, {"cda": corpus}, config


def _pods_work(obj: dict) -> None:
    """What the TrainJob's rank 0 leaves in the step folder when it completes."""
    task = json.loads(Path(obj["spec"]["trainer"]["command"][-1]).read_text())
    out = Path(task["out"])
    (out / "final").mkdir(parents=True)
    (out / "final" / "model.safetensors").write_bytes(b"weights")
    (out / "checkpoints" / "epoch-1").mkdir(parents=True)  # the resume state: not copied back
    (out / "manifest.json").write_text(json.dumps({
        "summary": {"steps": 7, "processes": 16, **task["keys"]}, "counts": {"items_in": 30, "out": 28},
        "outputs": {"final": {"path": str(out / "final")}}, "timings": {"train": 12.5},
        "versions": {"torch": "2.13.0+cu128"}}))
    assert Path(task["inputs"]["cda"]).read_bytes() == b"PAR1 not read here"


def test_the_launcher_creates_waits_and_copies_the_result_back(tmp_path):
    cluster, inputs, config = _setup(tmp_path)
    lines: list[str] = []
    with FakeTrainer() as k8s:
        name = TJ.job_name(TJ.job_key(config, KEYS, 950))
        k8s.script[name] = [None, RUNNING, RUNNING, _condition("Complete", "JobsCompleted")]
        k8s.work = _pods_work
        done = TJ.launch(cluster, config, inputs, tmp_path / "artifact", KEYS, 950, api=k8s.api(), log=lines.append)
    assert done["summary"] == {"steps": 7, "processes": 16, **KEYS} and done["trainjob"]["name"] == name
    assert (tmp_path / "artifact" / "final" / "model.safetensors").read_bytes() == b"weights"
    assert not (tmp_path / "artifact" / "checkpoints").exists()
    assert not any((tmp_path / "runs" / "trainjobs").iterdir())  # the job folder is emptied once copied
    assert [v for v, _ in k8s.log].count("POST") == 1 and "DELETE" not in [v for v, _ in k8s.log]
    assert any("Created" in ln for ln in lines)


def test_a_failed_trainjob_fails_the_task_with_its_own_reason(tmp_path):
    cluster, inputs, config = _setup(tmp_path)
    with FakeTrainer() as k8s:
        name = TJ.job_name(TJ.job_key(config, KEYS, 950))
        k8s.script[name] = [RUNNING, _condition("Failed", "FailedJobs", "jobset failed: node-1 OOMKilled")]
        with pytest.raises(TJ.TrainJobFailed) as e:
            TJ.launch(cluster, config, inputs, tmp_path / "artifact", KEYS, 950, api=k8s.api(), log=lambda _m: None)
    msg = str(e.value)
    assert "FailedJobs" in msg and "node-1 OOMKilled" in msg and f"ccda/{name}" in msg and "kubectl" in msg
    assert (tmp_path / "runs" / "trainjobs" / name.removeprefix("ccda-ft-") / "task.json").is_file()  # kept: retry


def test_a_retry_takes_over_a_running_trainjob_and_replaces_a_failed_one(tmp_path):
    cluster, inputs, config = _setup(tmp_path)
    key = TJ.job_key(config, KEYS, 950)
    name = TJ.job_name(key)
    body = TJ.manifest(cluster, name, str(Path(cluster.runs_mount) / "trainjobs" / key / TJ.TASK_FILE))
    with FakeTrainer() as k8s:
        k8s.objects[("ccda", name)] = json.loads(json.dumps(body))
        k8s.script[name] = [RUNNING, _condition("Complete")]
        k8s.work = _pods_work
        TJ.launch(cluster, config, inputs, tmp_path / "a1", KEYS, 950, api=k8s.api(), log=lambda _m: None)
        assert [v for v, _ in k8s.log] == ["POST", "GET", "GET"]  # 409, then waited for: not recreated
        k8s.log.clear()
        k8s.objects[("ccda", name)] = json.loads(json.dumps(body))
        k8s.script[name] = [_condition("Failed", "FailedJobs"), _condition("Complete")]
        k8s.work = _pods_work
        TJ.launch(cluster, config, inputs, tmp_path / "a2", KEYS, 950, api=k8s.api(), log=lambda _m: None)
        assert [v for v, _ in k8s.log][:4] == ["POST", "GET", "DELETE", "POST"]  # the failed one replaced


def test_a_refused_or_vanished_trainjob_is_one_error(tmp_path):
    cluster, inputs, config = _setup(tmp_path)
    with FakeTrainer() as k8s:
        bad = TJ.Cluster(**{**cluster.__dict__, "image": "registry.example.com/" + "x" * 500})  # the CRD's maxLength
        with pytest.raises(TJ.ServiceError, match="422.*image"):
            TJ.launch(bad, config, inputs, tmp_path / "a", KEYS, 950, api=k8s.api(), log=lambda _m: None)
        name = TJ.job_name(TJ.job_key(config, KEYS, 950))
        k8s.script[name] = [RUNNING]

        def vanish():
            k8s.objects.clear()
        threading.Timer(0.2, vanish).start()
        with pytest.raises(TJ.TrainJobFailed, match="deleted before it ended"):
            TJ.launch(cluster, config, inputs, tmp_path / "a", KEYS, 950, api=k8s.api(), log=lambda _m: None)


def test_sigterm_to_the_task_deletes_its_trainjob(tmp_path):
    import os

    from context_cda.runtime.signals import Terminated, sigterm_raises

    cluster, inputs, config = _setup(tmp_path)
    with FakeTrainer() as k8s:
        name = TJ.job_name(TJ.job_key(config, KEYS, 950))
        k8s.script[name] = [RUNNING]
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(Terminated), sigterm_raises():
            TJ.launch(cluster, config, inputs, tmp_path / "a", KEYS, 950, api=k8s.api(), log=lambda _m: None)
        assert ("DELETE", name) in k8s.log and not k8s.objects


def test_the_nodes_task_file_round_trips(tmp_path):
    from context_cda.config import load_config

    cfg = load_config("tiny", params_file=ROOT / "params.yaml")
    corpus = tmp_path / "c.parquet"
    corpus.write_bytes(b"x")
    task = TJ.write_task(tmp_path / "job", json.dumps(cfg.to_dict()), {"cda": corpus}, KEYS, 123)
    config, got, out, keys, budget = TJ.read_task(task)
    assert config.run.targets == cfg.run.targets and keys == KEYS and budget == 123 and out == tmp_path / "job" / "out"
    assert got["cda"].read_bytes() == b"x" and got["cda"].parent.parent == tmp_path / "job" / "inputs"
    (tmp_path / "bad.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(TJ.ConfigError, match="not a finetune task"):
        TJ.read_task(tmp_path / "bad.json")


def test_the_launcher_runs_in_the_step_envelope_and_records_what_rank_0_did(tmp_path):
    """The Kubeflow task's door: the envelope (lock, SIGTERM guard, manifest, marker) around the launcher, its
    manifest holding rank 0's counts, outputs and timings and the TrainJob."""
    from context_cda import steps as E
    from context_cda.config import load_config

    cluster, inputs, _ = _setup(tmp_path)
    cfg = load_config("tiny", ["tracking.enabled=false"], params_file=ROOT / "params.yaml")
    config = json.dumps(cfg.to_dict())
    with FakeTrainer() as k8s:
        k8s.script[TJ.job_name(TJ.job_key(config, KEYS, 950))] = [RUNNING, _condition("Complete")]
        k8s.work = _pods_work
        step = E.given("finetune", inputs, tmp_path / "artifact", **KEYS)
        ran = E.run(step, cfg, check=False, body=TJ.run_launcher, token_budget=950, cluster=cluster.to_json(),
                    config_json=config, api=k8s.api())
    manifest = json.loads((tmp_path / "artifact" / "manifest.json").read_text())
    assert ran.summary["steps"] == 7 and ran.counts.out == 28 and manifest["counts"]["items_in"] == 30
    assert manifest["outputs"]["final"]["path"] == str(tmp_path / "artifact" / "final")
    assert manifest["outputs"]["final"]["sha256"] and manifest["timings"]["trainjob.train"] == 12.5
    assert manifest["summary"]["trainjob"]["versions"] == {"torch": "2.13.0+cu128"}
    assert E.read_marker(tmp_path / "artifact")["key"] == step.key(cfg)
