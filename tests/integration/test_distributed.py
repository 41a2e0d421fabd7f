"""`ccda finetune` under torchrun: two gloo processes on this CPU against one process at the same global batch.

One run of two processes (``python -m torch.distributed.run --standalone --nproc-per-node 2``, the same command a
Kubeflow TrainJob's nodes run) is killed on one rank after its first epoch's checkpoint (SIGKILL: a node lost, the
OOM killer): the job must stop within seconds with one clear line and exit non-zero; the same command then resumes
from the checkpoint. Its final weights and its per-epoch scores (every item of StereoSet, CrowS-Pairs and
next-token, scored half on each rank and gathered) must equal those of one uninterrupted process with the same
``train.global_batch_size`` (the single process accumulates the two micro-batches the two ranks compute), to the
float rounding of averaging the gradient over two processes instead of accumulating it in one. Dropout is on
(the tiny GPT-2's 0.1): it is seeded per micro-batch, whichever process runs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")

from context_cda import layout as L  # noqa: E402

pytestmark = pytest.mark.distributed

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
STEP = Path("finetune") / "tiny-gpt2" / "cda" / "seed-13"
EPOCHS = 3
#: the largest difference allowed between a weight trained by 1 process and by 2 (float32 rounding of the averaged
#: gradient, through AdamW's normalisation, over 3 epochs x 4 steps; measured: see the test's printout)
WEIGHT_TOL = 1e-5
SCORE_TOL = 1e-5  # per-item scores (float32 log-probabilities) and the next-token shares computed from them


def _fixtures(folder: Path) -> dict[str, str]:
    """StereoSet (13 gender items: an odd number, so the two ranks' shares differ) and CrowS-Pairs (11 pairs) files
    in their published formats, and the sets of the run."""
    targets = ["nurse", "mother", "father", "sister", "brother", "engineer", "king", "queen", "wife", "husband",
               "doctor", "girl", "boy"]
    words = [("caring", "rude", "banana"), ("strong", "weak", "pencil"), ("gentle", "loud", "window")]
    items = []
    for i, t in enumerate(targets):
        s, a, u = words[i % 3]
        ctx = f"The {t} was BLANK." if i % 2 else f"My {t} is very BLANK today."
        items.append({"id": f"c{i}", "target": t, "bias_type": "gender", "context": ctx, "sentences": [
            {"id": f"c{i}-{k}", "sentence": ctx.replace("BLANK", w), "gold_label": g, "labels": []}
            for k, w, g in (("s", s, "stereotype"), ("a", a, "anti-stereotype"), ("u", u, "unrelated"))]})
    ss = folder / "stereoset.json"
    ss.write_text(json.dumps({"version": "1.0-test", "data": {"intrasentence": items, "intersentence": []}}))
    jobs = ["cook", "pilot", "nurse", "farmer", "teacher", "lawyer", "singer", "dancer", "baker", "driver", "judge"]
    crows = pd.DataFrame({"sent_more": [f"she was a good {j}." if i % 2 else f"he can not be a {j}."
                                        for i, j in enumerate(jobs)],
                          "sent_less": [f"he was a good {j}." if i % 2 else f"she can not be a {j}."
                                        for i, j in enumerate(jobs)],
                          "stereo_antistereo": ["stereo" if i % 3 else "antistereo" for i in range(len(jobs))],
                          "bias_type": "gender", "annotations": "[['gender']]", "anon_writer": "a0",
                          "anon_annotators": "['a1']"})
    cp = folder / "crows.csv"
    crows.to_csv(cp)
    return {"stereoset": str(ss), "crows": str(cp)}


def _sets(files: dict[str, str]) -> list[str]:
    return [f"train.epochs={EPOCHS}", "tracking.enabled=false", "run.device=cpu", "train.max_seq_len=32",
            "train.batch_size=4", "train.global_batch_size=12", "train.learning_rate=1e-3", "evaluate.benchmarks=[stereoset,crows,next-token]",
            f"evaluate.stereoset_path={files['stereoset']}", f"evaluate.crows_path={files['crows']}",
            "evaluate.bootstrap.resamples=200"]


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               CCDA_TEST_SLOW="finetune:0.4",  # each evaluation 0.4 s longer: time to kill a rank mid-epoch
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parents[1] / "helpers" / "slow_stages"), str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    env.pop("CCDA_PARAMS", None)
    return env


def _torchrun(run_dir: Path, corpus: Path, files: dict[str, str]) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "context_cda.cli", "finetune", "--params", str(ROOT / "params.yaml"), "--profile", "tiny",
           "--run-dir", str(run_dir), "--input", str(corpus), "--arm", "cda", "--seed", "13"]
    for s in _sets(files):
        cmd += ["--set", s]
    return cmd


def _rank_pid(launcher: subprocess.Popen, rank: int) -> int | None:
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.environ().get("RANK") == str(rank):
                return child.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def _reference(tmp_path: Path, corpus: Path, files: dict[str, str]) -> Path:
    """One process, uninterrupted, one torch thread as each torchrun worker has."""
    from context_cda.config import load_config
    from context_cda.train import run_finetune

    cfg = load_config("tiny", _sets(files), params_file=ROOT / "params.yaml")
    out = tmp_path / "ref" / STEP
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = run_finetune(cfg, {"corpus": corpus}, out, "tiny-gpt2", "cda", 13)
    finally:
        torch.set_num_threads(threads)
    assert summary["processes"] == 1 and summary["global_batch"] == 12
    return out


def _initial_weights() -> Path:
    from context_cda.models import resolve_pretrained

    return Path(resolve_pretrained("tiny:gpt2")) / "model.safetensors"


def _per_item(step: Path) -> dict[str, pd.DataFrame]:
    return {f"{e.name}/{b.name}": pd.read_parquet(b / L.PREDICTIONS_FILE)
            for e in sorted(L.epoch_predictions_dirs(step)) for b in sorted(e.iterdir()) if b.is_dir()}


def _max_diff(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """The largest difference between two tables of per-item scores (numbers, or arrays of them, within float
    rounding; every other value equal)."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    worst = 0.0
    for col in a.columns:
        for x, y in zip(a[col].tolist(), b[col].tolist(), strict=True):
            xs, ys = np.asarray(x, dtype=object).ravel().tolist(), np.asarray(y, dtype=object).ravel().tolist()
            assert len(xs) == len(ys), col
            for u, v in zip(xs, ys, strict=True):
                if isinstance(u, float | np.floating) and isinstance(v, float | np.floating):
                    worst = max(worst, 0.0 if np.isnan(u) and np.isnan(v) else abs(float(u) - float(v)))
                else:
                    assert u == v, (col, u, v)
    return worst


def test_two_processes_equal_one_and_a_killed_rank_resumes(tmp_path):
    from safetensors.torch import load_file

    files = _fixtures(tmp_path)
    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": [f"He said that his mother was tired after the long day number {i} at work." if i % 2
                           else f"She told her brother that the doctor {i} would call him soon." for i in range(30)]}
                 ).to_parquet(corpus)
    t0 = time.time()
    ref = _reference(tmp_path, corpus, files)
    t_ref = time.time() - t0

    run_dir = tmp_path / "run"
    ckpt = run_dir / STEP / "checkpoints"
    t0 = time.time()
    proc = subprocess.Popen(_torchrun(run_dir, corpus, files), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (ckpt / "epoch-1" / "state.json").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    victim = _rank_pid(proc, 1)
    assert proc.poll() is None and victim is not None, "the job ended before a rank could be killed"
    os.kill(victim, signal.SIGKILL)
    killed = time.time()
    _, err = proc.communicate(timeout=120)
    stopped = time.time() - killed
    assert proc.returncode != 0, err[-3000:]
    ours = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(ours) == 1, err[-4000:]  # the surviving rank's one line (then torchrun's own report of the job)
    assert "run the same command again to resume" in ours[0] and ("lost the others" in ours[0]
                                                                   or "stopped by SIGTERM" in ours[0]), ours[0]
    assert "[rank0]:" not in err and "src/context_cda/" not in err, err[-4000:]  # no traceback of ours
    assert not list((run_dir / STEP).rglob(L.LOCK_FILE)) and not (run_dir / STEP / L.FINAL_DIR).exists()
    kept = sorted(int(d.name.split("-")[1]) for d in ckpt.glob("epoch-*") if (d / "state.json").is_file())
    assert kept and kept[-1] < EPOCHS
    t_killed = time.time() - t0

    t0 = time.time()
    again = subprocess.run(_torchrun(run_dir, corpus, files), cwd=ROOT, env=_env(), capture_output=True, text=True,
                           timeout=600)
    t_resumed = time.time() - t0
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"resumed from {ckpt / f'epoch-{kept[-1]}'}" in again.stderr
    summary = json.loads((run_dir / STEP / "manifest.json").read_text())["summary"]
    assert summary["processes"] == 2 and summary["global_batch"] == 12 and summary["epochs"] == EPOCHS

    a = load_file(ref / L.FINAL_DIR / "model.safetensors")
    b = load_file(run_dir / STEP / L.FINAL_DIR / "model.safetensors")
    assert a.keys() == b.keys()
    weight_diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    start = load_file(_initial_weights())
    moved = max(float((a[k] - start[k]).abs().max()) for k in a if k in start)  # how far training moved them
    assert weight_diff <= WEIGHT_TOL, f"1 vs 2 processes: max |w1 - w2| = {weight_diff:.3g}"

    m1 = pd.read_csv(ref / L.METRICS_FILE)
    m2 = pd.read_csv(run_dir / STEP / L.METRICS_FILE)
    assert m1["epoch"].tolist() == m2["epoch"].tolist() == list(range(EPOCHS + 1))
    metric_cols = [c for c in m1.columns if c not in ("epoch", "arm", "target", "seed")]
    counted = [c for c in metric_cols if c.startswith(("stereoset_", "crows_"))]  # shares of items: exact
    assert m1[counted].equals(m2[counted]), (m1[counted] - m2[counted]).abs().max().sort_values().tail()
    metric_diff = float(np.abs(m1[metric_cols].to_numpy(float) - m2[metric_cols].to_numpy(float)).max())
    assert metric_diff <= SCORE_TOL, (m1[metric_cols] - m2[metric_cols]).abs().max().sort_values().tail()
    p1, p2 = _per_item(ref), _per_item(run_dir / STEP)
    assert p1.keys() == p2.keys() and len(p1) == 6  # epochs 0 and 3, three benchmarks each
    item_diff = max(_max_diff(p1[k], p2[k]) for k in p1)
    assert item_diff <= SCORE_TOL
    print(f"\n1 vs 2 gloo processes (global batch 12: 3 micro-batches of 4 per step, rank 1 padding, {EPOCHS} epochs, dropout on): max |weight difference| "
          f"{weight_diff:.3g} over {sum(v.numel() for v in a.values())} weights (training moved them by up to "
          f"{moved:.3g}); "
          f"per-epoch metrics: the {len(counted)} StereoSet/CrowS ones equal, max difference {metric_diff:.3g} over "
          f"all {len(metric_cols)} x {len(m1)} epochs; "
          f"per-item scores max difference {item_diff:.3g}; killed rank 1 after epoch {kept[-1]}: the job stopped "
          f"{stopped:.1f} s later with {ours[0][:90]!r}...; times: 1 process {t_ref:.1f} s, killed run "
          f"{t_killed:.1f} s, resumed run {t_resumed:.1f} s (load {os.getloadavg()[0]:.1f})")
