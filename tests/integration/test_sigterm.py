"""SIGTERM (what Kubernetes sends first) mid-stage, sent to the process that gets it in production: a stage command
(augment, finetune), `ccda run` (inside sample, entropy and finetune) and a Kubeflow task's own process (sample,
finetune; ``slow``). Each stops within seconds with exit code 143 and one line saying how to resume, keeps every
finished shard / epoch, releases its locks, marks its MLflow run KILLED, and the next run finishes the work with
nothing lost and nothing done twice (:mod:`context_cda.runtime.signals`, the step envelope :mod:`context_cda.steps`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parents[1] / "helpers"))

from cda_table import write_cda_table  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402

from context_cda import layout as L  # noqa: E402
from context_cda import schemas as S  # noqa: E402
from context_cda.runtime.signals import EXIT_CODE  # noqa: E402
from context_cda.steps import MARKER  # noqa: E402

STOP_WITHIN_S = 15.0  # signal to the closing line, under the load of a shared 2-core machine (seen: under 1 s)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.pop("CCDA_PARAMS", None)
    return env


def _wait_for(cond, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not cond() and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be stopped"
    assert cond(), "the run never got far enough to be stopped mid-run"


def _terminate(proc: subprocess.Popen) -> tuple[float, str]:
    """SIGTERM; (seconds until the stage had stopped: its closing line on stderr, the process's stderr). The
    interpreter's own shutdown after that (torch's atexit hooks) may take longer on a loaded machine."""
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stderr:
            lines.append((time.time(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    stopped = next((t for t, ln in lines if ln.startswith("error: ")), time.time())
    return stopped - t0, "".join(ln for _, ln in lines)


def _assert_clean_stop(proc: subprocess.Popen, seconds: float, err: str, folder: Path) -> None:
    assert proc.returncode == EXIT_CODE == 143, err[-3000:]
    assert seconds < STOP_WITHIN_S, f"took {seconds:.1f} s to stop"
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "stopped by SIGTERM" in lines[0] and "run the same command again to resume" in lines[0]
    assert "Traceback" not in err
    assert not list(folder.rglob(L.LOCK_FILE)), "a lock was left behind"


# ------------------------------------------------------------------------------------------------ augment


def _augment(run_dir: Path, src: Path, url: str) -> list[str]:
    sets = ["augment.shard_size=2", "augment.batch_size=2", "augment.few_shot=false", "augment.max_retries=0",
            "augment.openai.concurrency=2", "tracking.enabled=false"]
    cmd = [sys.executable, "-m", "context_cda.cli", "augment", "--params", str(ROOT / "params.yaml"),
           "--run-dir", str(run_dir), "--input", str(src), "--backend", "openai", "--model", "fake-model",
           "--base-url", url, "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def test_sigterm_stops_augment_and_the_rerun_finishes_exactly_once(tmp_path):
    n = 30
    src = write_cda_table(tmp_path / "cda.parquet", n)
    with FakeOpenAIServer(delay_s=0.15) as srv:
        run_dir = tmp_path / "run"
        shards = run_dir / "augment-parts" / "part-0" / "shards"  # shards/<fingerprint>/
        proc = subprocess.Popen(_augment(run_dir, src, srv.base_url), cwd=tmp_path, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: len(list(shards.glob("*/shard-*.parquet"))) >= 2, proc)
        seconds, err = _terminate(proc)
        _assert_clean_stop(proc, seconds, err, run_dir)
        kept = pd.concat([pd.read_parquet(f) for f in shards.glob("*/shard-*.parquet")])
        assert 4 <= len(kept) < n and kept["item_key"].is_unique  # finished shards kept, nothing half-written
        assert not list(shards.rglob(".*.tmp")) and not (run_dir / "augment" / L.AUGMENTED_FILE).exists()
        sent = len(srv.log)
        again = subprocess.run(_augment(run_dir, src, srv.base_url), cwd=tmp_path, env=_env(), capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
        resent = len(srv.log) - sent
    aug = pd.read_parquet(run_dir / "augment" / L.AUGMENTED_FILE)
    rej = pd.read_parquet(run_dir / "augment" / "rejected.parquet")
    assert aug["cda_id"].is_unique and len(aug) + len(rej) == n  # 0 lost, 0 duplicated
    assert set(aug["cda_id"]) | set(rej["cda_id"]) == {f"cda{i:04d}" for i in range(n)}
    assert resent == n - len(kept)  # the kept items were not generated again
    print(f"augment: stopped {seconds:.2f} s after SIGTERM, {len(kept)} of {n} items kept, {resent} generated by "
          f"the rerun, {len(aug) + len(rej)} final rows, 0 duplicated")


# ------------------------------------------------------------------------------------------------ ccda run


def _tiny(tmp_path: Path, url: str, sets: dict):
    """The tiny pipeline's config on the fake server, tracking off, ``sets`` (``section__field=value``) applied."""
    sys.path.insert(0, str(HERE.parents[1] / "helpers"))
    import tiny_pipeline as tp

    cfg = tp.tiny_config(url, run_dir=tmp_path / "run")
    cfg.tracking.enabled = False
    for key, value in sets.items():
        *path, field = key.split("__")
        target = cfg
        for name in path:
            target = getattr(target, name)
        setattr(target, field, value)
    return cfg


def _run_config(tmp_path: Path, url: str, **sets) -> Path:
    """params.yaml of the tiny pipeline on the fake server, tracking and the after-training evaluation off."""
    import yaml

    cfg = _tiny(tmp_path, url, {"evaluate__after_training": False, **sets})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(cfg.to_dict()))
    return params


def _ccda_run(params: Path) -> list[str]:
    return [sys.executable, "-m", "context_cda.cli", "run", "--params", str(params)]


def _slow_env(spec: str) -> dict[str, str]:
    """The test's stage delays (tests/helpers/slow_stages/sitecustomize.py) in every python the run starts."""
    env = _env()
    env["CCDA_TEST_SLOW"] = spec
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parents[1] / "helpers" / "slow_stages"), str(ROOT),
                                                      env.get("PYTHONPATH")]))
    return env


def _shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("shards/*/shard-*.parquet"))


@pytest.mark.parametrize("step", ["sample", "entropy"])
def test_sigterm_to_ccda_run_in_the_item_stages_and_the_rerun_finishes_exactly_once(tmp_path, step):
    """SIGTERM to `ccda run` itself while it is inside the sample step (the generator: the fake server answers
    slowly) or a target's entropy step (scoring, slowed by the test's sitecustomize): exit 143 with the one stop
    line, finished shards kept, no lock left; the rerun resumes there (no item done twice) and every item ends in
    the step's table or its rejected table."""
    with FakeOpenAIServer(delay_s=0.3 if step == "sample" else 0.0) as srv:
        params = _run_config(tmp_path, srv.base_url, entropy__shard_size=1)
        run = tmp_path / "run"
        folder = run / ("sample-parts/part-0" if step == "sample" else "entropy/tiny-gpt2")
        env = _slow_env("entropy:0.6") if step == "entropy" else _env()
        proc = subprocess.Popen(_ccda_run(params), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: len(_shards(folder)) >= 2, proc, timeout=300)
        seconds, err = _terminate(proc)
        _assert_clean_stop(proc, seconds, err, run)
        per_shard = [set(pd.read_parquet(f)["item_key"]) for f in _shards(folder)]
        assert sum(map(len, per_shard)) == len(set().union(*per_shard))  # each item in one finished shard
        assert not (folder / MARKER).exists()
        done = len(set().union(*per_shard))
        again = subprocess.run(_ccda_run(params), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                               timeout=900)
        assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((folder / "manifest.json").read_text())["summary"]
    assert summary["resumed_items"] == done and summary["processed_items"] > 0  # the kept items were not done again
    table = pd.read_parquet(folder / (L.SAMPLES_FILE if step == "sample" else L.SCORES_FILE))
    rejected = pd.read_parquet(folder / "rejected.parquet")
    assert not table.duplicated([S.ID, "sample_idx"] if step == "sample" else [S.ID]).any()  # 0 duplicated
    assert table[S.ID].nunique() + rejected[S.ID].nunique() == summary["items_in"]  # 0 lost
    print(f"ccda run, {step}: stopped {seconds:.2f} s after SIGTERM (exit 143), {done} items kept, "
          f"{summary['processed_items']} done by the rerun, {summary['items_in']} items in all, 0 duplicated")


def test_sigterm_to_ccda_run_in_finetune_marks_mlflow_killed_and_the_rerun_resumes(tmp_path):
    """SIGTERM to `ccda run` during a fine-tuning (its per-epoch evaluation slowed by the test's sitecustomize):
    exit 143 with the stop line, the finished epochs kept, the MLflow run marked KILLED; the rerun resumes from the
    last finished epoch."""
    with FakeOpenAIServer() as srv:
        params = _run_config(tmp_path, srv.base_url, train__epochs=3, train__max_steps=None, tracking__enabled=True)
        run = tmp_path / "run"
        proc = subprocess.Popen(_ccda_run(params), cwd=tmp_path, env=_slow_env("finetune:1.5"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: any(run.glob("finetune/*/*/seed-13/checkpoints/epoch-*/state.json")), proc, timeout=600)
        seconds, err = _terminate(proc)
        _assert_clean_stop(proc, seconds, err, run)
        step = next(run.glob("finetune/*/*/seed-13/checkpoints/epoch-*/state.json")).parents[2]
        kept = sorted(int(d.name.split("-")[1]) for d in (step / "checkpoints").glob("epoch-*")
                      if (d / "state.json").is_file())
        assert kept and not (step / L.FINAL_DIR).exists()
        from mlflow import MlflowClient

        client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
        runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
        arm = step.parent.name
        assert [r.info.status for r in runs if r.data.tags.get("arm") == arm or r.data.params.get("arm") == arm] == [
            "KILLED"], [(r.info.status, r.data.tags) for r in runs]
        again = subprocess.run(_ccda_run(params), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                               timeout=900)
        assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {step / 'checkpoints' / f'epoch-{kept[-1]}'}" in again.stderr
    assert (step / L.FINAL_DIR / "model.safetensors").is_file()
    print(f"ccda run, finetune: stopped {seconds:.2f} s after SIGTERM (exit 143), epochs 1-{kept[-1]} kept, MLflow "
          f"run KILLED, the rerun resumed from epoch {kept[-1]}")


# ------------------------------------------------------------------------------------------------ Kubeflow


def _kfp(tmp_path: Path, url: str, last_stage: str, env: dict[str, str], docker: bool = False, **sets):
    """kfp.local running the tiny pipeline to ``last_stage`` (tests/helpers/kfp_tasks.py), its output read line by
    line: (process, lines)."""
    cfg = _tiny(tmp_path, url, sets)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(cfg.to_dict()))
    cmd = [sys.executable, str(HERE.parents[1] / "helpers" / "kfp_tasks.py"), str(config),
           str(tmp_path / "root"), last_stage, *(["docker"] if docker else [])]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []  # kfp.local indents what a task prints: the lines are kept unindented
    proc.reader = threading.Thread(target=lambda: lines.extend((time.time(), ln.lstrip()) for ln in proc.stdout),
                                   daemon=True)
    proc.reader.start()
    return proc, lines


def _task_pid(lines, function: str) -> int | None:
    starts = [ln.split()[2] for _, ln in lines if ln.startswith("TASK START ") and ln.split()[3] == function]
    return int(starts[-1]) if starts else None


def _stop_task(proc, lines, function: str) -> tuple[float, int, str]:
    """SIGTERM to the running ``function`` task's own process: (seconds to its end, its exit code, its output)."""
    pid = _task_pid(lines, function)
    assert pid is not None and proc.poll() is None
    t0 = time.time()
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 120
    while time.time() < deadline and not any(ln.startswith(f"TASK END {pid} ") for _, ln in lines):
        time.sleep(0.05)
    end = next((t, ln) for t, ln in lines if ln.startswith(f"TASK END {pid} "))
    proc.wait(timeout=300)
    start = next(i for i, (_, ln) in enumerate(lines) if ln.startswith(f"TASK START {pid} "))
    out = "".join(ln for _, ln in lines[start:])
    return end[0] - t0, int(end[1].rsplit("rc=", 1)[1]), out.split(f"TASK END {pid}")[0]


def _sample_shards(root: Path) -> list[Path]:
    """The finished item shards of the sample task(s) under a kfp.local pipeline root (not its draws)."""
    return sorted(root.glob("*/*/sample/part/shards/*/shard-*.parquet"))


def _stop_case(step: str, root: Path):
    """(config sets, the fake server's delay, when the task may be stopped) for a Kubeflow SIGTERM check of
    ``step``. sample: one item a shard and one request at a time, so that the task is still running when two shards
    are done; finetune: one arm, so one fine-tuning task (kfp.local runs a ParallelFor's iterations side by side)."""
    if step == "sample":
        return ({"entropy__shard_size": 1, "augment__openai__concurrency": 1}, 0.3,
                lambda: len(_sample_shards(root)) >= 2)
    return ({"train__epochs": 3, "train__max_steps": None, "train__arms": ["cda"]}, 0.0,
            lambda: any(root.rglob("checkpoints/epoch-*/state.json")))


def _assert_kept(step: str, root: Path) -> None:
    """The stopped task's finished work is in the pipeline root: its shards (each item in one) or an epoch."""
    assert not list(root.rglob(L.LOCK_FILE)), "a lock was left behind"
    if step == "sample":
        per_shard = [set(pd.read_parquet(p)["item_key"]) for p in _sample_shards(root)]
        assert len(per_shard) >= 2 and sum(map(len, per_shard)) == len(set().union(*per_shard))
    else:
        assert any(root.rglob("checkpoints/epoch-*/state.json"))


def _assert_task_stopped(seconds: float, rc: int, out: str) -> None:
    assert rc == EXIT_CODE == 143, out[-3000:]
    assert seconds < STOP_WITHIN_S, f"took {seconds:.1f} s to stop"
    stop = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(stop) == 1 and "stopped by SIGTERM" in stop[0] and "rerun the task" in stop[0], out[-3000:]
    assert "Traceback" not in out


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("step", ["sample", "finetune"])
def test_sigterm_to_the_kfp_task_process_stops_the_stage_and_the_rerun_finishes(tmp_path, step):
    """SIGTERM to the process kfp.local started for the task (KFP's `sh -ec` command, python `exec`ed into it:
    the process that is a pod's PID 1): exit 143 with the stop line within seconds, finished shards / epochs kept
    in the task's output folder, no lock left; running the pipeline again (with KFP's task cache, as on a cluster)
    serves the tasks that had finished, runs the stopped one again and finishes with every item once."""
    env = _slow_env("finetune:1.5") if step == "finetune" else {**_env(), "PYTHONPATH": str(ROOT)}
    root = tmp_path / "root"
    sets, delay, ready = _stop_case(step, root)
    with FakeOpenAIServer(delay_s=delay) as srv:
        proc, lines = _kfp(tmp_path, srv.base_url, step, env, **sets)
        _wait_for(lambda: ready() and _task_pid(lines, step) is not None, proc, timeout=900)
        seconds, rc, out = _stop_task(proc, lines, step)
        _assert_task_stopped(seconds, rc, out)
        _assert_kept(step, root)
        again, more = _kfp(tmp_path, srv.base_url, step, {**_env(), "PYTHONPATH": str(ROOT)}, **sets)
        assert again.wait(timeout=1500) == 0, "".join(ln for _, ln in more)[-4000:]
        again.reader.join(timeout=30)
    executed = {ln.split()[3] for _, ln in more if ln.startswith("TASK START ")}
    assert step in executed and not executed & {"ingest", "cda", "augment"}, executed  # served from the cache
    if step == "sample":
        merged = max((p for p in root.rglob(L.SAMPLES_FILE) if "sample-merge" in str(p)), key=lambda p: p.stat().st_mtime)
        table = pd.read_parquet(merged)
        assert not table.duplicated([S.ID, "sample_idx"]).any()
    print(f"kfp.local, {step}: the task's process stopped {seconds:.2f} s after SIGTERM (exit {rc}); the pipeline "
          f"run again finished, executing {', '.join(sorted(executed))} (the rest from the cache)")


@pytest.mark.images
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("step", ["sample", "finetune"])
def test_sigterm_to_the_task_container_stops_the_stage(tmp_path, container_engine, project_images, step):
    """The same in the task's container (kfp.local's DockerRunner, in `make test-images`): `docker kill --signal
    TERM` reaches the container's PID 1, KFP's `sh -ec` command that `exec`s python; the container exits 143
    within seconds with the one stop line, its finished shards / epochs kept in the pipeline root, no lock left."""
    if container_engine.name != "docker":
        pytest.skip("kfp.local.DockerRunner talks to the Docker API")
    env = _slow_env("finetune:1.5") if step == "finetune" else _env()
    root = tmp_path / "root"
    sets, delay, ready = _stop_case(step, root)
    with FakeOpenAIServer(delay_s=delay) as srv:
        proc, lines = _kfp(tmp_path, srv.base_url, step, env, docker=True, pipeline__cpu_image=project_images["cpu"],
                           pipeline__image=project_images["train"], **sets)
        _wait_for(ready, proc, 900)
        name = subprocess.run(["docker", "ps", "--filter", "ancestor=" + project_images["train"], "--format",
                               "{{.ID}}"], capture_output=True, text=True).stdout.split()[0]
        t0 = time.time()
        subprocess.run(["docker", "kill", "--signal", "TERM", name], check=True)
        code = subprocess.run(["docker", "wait", name], capture_output=True, text=True).stdout.strip()
        seconds = time.time() - t0
        proc.wait(timeout=300)
    out = "".join(ln for _, ln in lines)
    assert code == "143" and seconds < STOP_WITHIN_S, (code, seconds, out[-3000:])
    stop = [ln for _, ln in lines if ln.startswith("error: ")]
    assert len(stop) == 1 and "stopped by SIGTERM" in stop[0], out[-3000:]
    _assert_kept(step, root)
    assert not any(root.rglob("final/model.safetensors"))
    print(f"DockerRunner, {step}: the container's PID 1 stopped {seconds:.2f} s after SIGTERM (exit {code})")


# ------------------------------------------------------------------------------------------------ finetune


def _finetune_sets(epochs: int) -> list[str]:
    return [f"train.epochs={epochs}", "tracking.enabled=false", "run.device=cpu", "train.max_seq_len=32",
            "train.batch_size=4"]


def _finetune(run_dir: Path, corpus: Path, epochs: int) -> list[str]:
    cmd = [sys.executable, "-m", "context_cda.cli", "finetune", "--params", str(ROOT / "params.yaml"),
           "--profile", "tiny", "--run-dir", str(run_dir), "--input", str(corpus), "--arm", "cda", "--seed", "13",
           "--no-eval"]
    for s in _finetune_sets(epochs):
        cmd += ["--set", s]
    return cmd


@pytest.mark.parametrize("epochs", [4])
def test_sigterm_stops_finetune_keeping_finished_epochs_and_the_rerun_matches(tmp_path, epochs):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    from context_cda.config import load_config
    from context_cda.train import run_finetune

    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": [f"He said that his mother was tired after the long day number {i} at work."
                           for i in range(60)]}).to_parquet(corpus)
    step = Path("finetune") / "tiny-gpt2" / "cda" / "seed-13"
    cfg = load_config("tiny", _finetune_sets(epochs), params_file=ROOT / "params.yaml")  # the uninterrupted run
    run_finetune(cfg, {"corpus": corpus}, tmp_path / "ref" / step, "tiny-gpt2", "cda", 13, evaluate=False)

    run_dir = tmp_path / "run"
    ckpt = run_dir / step / "checkpoints"
    proc = subprocess.Popen(_finetune(run_dir, corpus, epochs), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: any((d / "state.json").is_file() for d in ckpt.glob("epoch-*")), proc, timeout=600)
    seconds, err = _terminate(proc)
    _assert_clean_stop(proc, seconds, err, run_dir)
    kept = sorted(int(d.name.split("-")[1]) for d in ckpt.glob("epoch-*") if (d / "state.json").is_file())
    assert kept and kept[-1] < epochs and not (run_dir / step / L.FINAL_DIR).exists()
    assert not list(ckpt.glob(".epoch-*.tmp"))  # a checkpoint in flight is finished first (deferred)

    again = subprocess.run(_finetune(run_dir, corpus, epochs), cwd=ROOT, env=_env(), capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {ckpt / f'epoch-{kept[-1]}'}" in again.stderr  # no finished epoch was trained again
    a = load_file(tmp_path / "ref" / step / L.FINAL_DIR / "model.safetensors")
    b = load_file(run_dir / step / L.FINAL_DIR / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # no epoch lost or trained twice
    assert not ckpt.exists()  # finished: its resume state is gone (train.keep_resume_state keeps it)
    print(f"finetune: stopped {seconds:.2f} s after SIGTERM, epochs 1-{kept[-1]} of {epochs} kept, the rerun "
          f"resumed from epoch {kept[-1]}; final weights equal to an uninterrupted run")
