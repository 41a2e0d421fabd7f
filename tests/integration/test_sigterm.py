"""SIGTERM (what Kubernetes sends first) mid-stage: augment, entropy and finetune stop within seconds with exit
code 143 and one line saying how to resume, keep every finished shard / epoch, release their locks, and the next
run finishes the work with nothing lost and nothing done twice (:mod:`context_cda.signals`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
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
from context_cda.signals import EXIT_CODE  # noqa: E402

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


# ------------------------------------------------------------------------------------------------ entropy


ENTROPY_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {unit!r})
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config
    from context_cda.entropy import run_entropy, run_sample
    from context_cda.signals import Terminated, resume_hint, sigterm_raises

    class SlowGenerator(FakeGenerator):
        def generate(self, prompts, params):
            time.sleep(0.4)
            return super().generate(prompts, params)

    tmp = Path({tmp!r})
    cfg = config(tmp, shard_size=2)
    try:
        with sigterm_raises():  # what context_cda.cli.main holds around every command
            if {step!r} == "sample":
                run_sample(cfg, {{"augmented": tmp / "augmented.parquet"}}, tmp / "s", generator=SlowGenerator(),
                           judge=FakeJudge())
            else:
                run_entropy(cfg, {{"samples": tmp / "s"}}, tmp / "e", "fake", scorer=FakeScorer(delay=0.4))
    except Terminated as e:
        print("error: " + resume_hint([{step!r}]), file=sys.stderr)
        sys.exit(e.exit_code)
    """
)


@pytest.mark.parametrize("step", ["sample", "entropy"])
def test_sigterm_stops_entropy_and_the_rerun_finishes_exactly_once(tmp_path, step):
    """The entropy stage's two steps: the shared sample step (generator + judge) and a target's entropy step
    (scoring), both on the item engine (:mod:`context_cda.items`)."""
    sys.path.insert(0, str(HERE.parents[1] / "unit"))
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config
    from test_entropy_tiny import write_augmented

    from context_cda.entropy import run_entropy, run_sample
    from context_cda.items import Checkpoints

    n = 16
    src = write_augmented(tmp_path / "augmented.parquet", n)
    if step == "entropy":
        run_sample(config(tmp_path, shard_size=2), {"augmented": src}, tmp_path / "s", generator=FakeGenerator(),
                   judge=FakeJudge())
    out = tmp_path / ("s" if step == "sample" else "e")
    shard_root = out / "shards"
    before = len(list(shard_root.glob("*/shard-*.parquet")))
    script = ENTROPY_SCRIPT.format(unit=str(HERE.parents[1] / "unit"), tmp=str(tmp_path), step=step)
    proc = subprocess.Popen([sys.executable, "-c", script], env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: len(list(shard_root.glob("*/shard-*.parquet"))) >= before + 2, proc)
    seconds, err = _terminate(proc)
    _assert_clean_stop(proc, seconds, err, out)
    shard_dirs = [d for d in shard_root.iterdir() if d.is_dir()]
    done = set(pd.concat([Checkpoints(d).read() for d in shard_dirs])[S.ID])
    final = L.SAMPLES_FILE if step == "sample" else L.SCORES_FILE
    assert 4 <= len(done) < n and not (out / final).exists()
    assert not list(shard_root.rglob(".*.tmp"))
    if step == "sample":
        s = run_sample(config(tmp_path, shard_size=2), {"augmented": src}, out, generator=FakeGenerator(),
                       judge=FakeJudge())
    else:
        s = run_entropy(config(tmp_path, shard_size=2), {"samples": tmp_path / "s"}, out, "fake",
                        scorer=FakeScorer())
    assert s["resumed_items"] == len(done) and s["processed_items"] == n - len(done)
    table = pd.read_parquet(out / final)
    assert table[S.ID].nunique() == n  # 0 lost
    assert not table.duplicated([S.ID, "sample_idx"] if step == "sample" else [S.ID]).any()  # 0 duplicated
    print(f"{step}: stopped {seconds:.2f} s after SIGTERM, {len(done)} of {n} items kept, "
          f"{s['processed_items']} done by the rerun, {table[S.ID].nunique()} items in the output, 0 duplicated")


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
