"""Nothing lost, nothing doubled, nobody in twice: run-folder locks, error items (not results) in the sample step
and augment, and how the runner treats a step that ended with errors."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.envelope import enveloped
from tests.helpers.lock_holder import other_process_holds
from tests.unit.test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config, make_input
from tests.unit.test_pipeline_runner import calls, cfg  # noqa: F401  (fixtures)

from context_cda import layout as L
from context_cda import pipeline, stages, steps
from context_cda import schemas as S
from context_cda.entropy import run_entropy, run_sample
from context_cda.errors import ItemErrors, LockHeld
from context_cda.generation.base import GenerationResult
from context_cda.io import file_lock, write_text
from context_cda.steps import Counts

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ locks


def test_a_held_lock_refuses_another_process_and_names_the_holder(tmp_path):
    folder = tmp_path / "finetune" / "t" / "cda" / "seed-13"
    with other_process_holds(folder, "finetune[t/cda/seed-13]") as holder:
        with pytest.raises(LockHeld) as e, file_lock(folder / L.LOCK_FILE, "finetune[t/cda/seed-13]"):
            pass
        msg = str(e.value)
        assert f"pid {holder.pid} on {socket.gethostname()}" in msg and "running finetune[t/cda/seed-13]" in msg
        assert "lock_holder.py" in msg and re.search(r"started \d{4}-\d\d-\d\dT", msg)
        assert "Wait for it to finish, or use another run folder" in msg
        assert LockHeld.exit_code == 75
    with file_lock(folder / L.LOCK_FILE, "again") as lock:  # released with its holder
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not (folder / L.LOCK_FILE).exists()  # removed on release: the step folder's hash is unchanged


def test_a_stale_lock_of_a_killed_process_is_taken_over(tmp_path, caplog):
    folder = tmp_path / "entropy" / "t"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "helpers" / "lock_holder.py"), str(folder),
                             "entropy[t]"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert json.loads((folder / L.LOCK_FILE).read_text())["pid"] == proc.pid  # left behind by kill -9
    with caplog.at_level("WARNING", logger="context_cda"), file_lock(folder / L.LOCK_FILE, "entropy[t]") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert f"taking over a stale lock (pid {proc.pid} on {socket.gethostname()}" in caplog.text


def test_the_holding_thread_may_lock_again_another_thread_may_not(tmp_path):
    seen = []
    with file_lock(tmp_path / L.LOCK_FILE, "outer"), file_lock(tmp_path / L.LOCK_FILE, "inner (same thread)"):
        def other():
            try:
                with file_lock(tmp_path / L.LOCK_FILE, "other thread"):
                    seen.append("got it")
            except LockHeld as e:
                seen.append(str(e))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(seen) == 1 and "another process is working in this folder" in seen[0]


# ------------------------------------------------------------------------------------------------ concurrency


@pytest.mark.parametrize("step", ["sample", "entropy"])
def test_a_second_run_on_the_same_folder_is_refused(tmp_path, step):
    conf = config(tmp_path, shard_size=2)
    src = make_input(tmp_path, n=8)
    samples = tmp_path / "run" / "sample"
    if step == "entropy":
        run_sample(conf, {"augmented": src}, samples, generator=FakeGenerator(), judge=FakeJudge())
    out = samples if step == "sample" else tmp_path / "run" / "entropy" / "fake"

    def go(delay=0.0):
        if step == "sample":  # each through the step envelope, which holds the folder's lock
            return enveloped(conf, "sample", run_sample, {"augmented": src}, out, generator=SlowGenerator(delay),
                             judge=FakeJudge())
        return enveloped(conf, "entropy", run_entropy, {"samples": samples}, out, {"target": "fake"}, target="fake",
                         scorer=FakeScorer(delay=delay))

    first: dict = {}
    t = threading.Thread(target=lambda: first.update(summary=go(0.3)))
    t.start()
    deadline = time.time() + 30
    while not (out / L.LOCK_FILE).exists() and time.time() < deadline:
        time.sleep(0.005)
    what = "sample" if step == "sample" else r"entropy\[fake\]"
    with pytest.raises(LockHeld, match=what + r" cannot start: another process is working in this folder"):
        go()
    t.join(timeout=60)
    s = first["summary"]
    assert s["sampled" if step == "sample" else "scored"] == 8 and s["processed_items"] == 8  # not disturbed


class SlowGenerator(FakeGenerator):
    def __init__(self, delay):
        super().__init__()
        self.delay = delay

    def generate(self, prompts, params):
        time.sleep(self.delay)
        return super().generate(prompts, params)


def _finetune_cmd(tmp_path: Path, corpus: Path) -> list[str]:
    return [sys.executable, "-m", "context_cda.cli", "finetune", "--params", str(ROOT / "params.yaml"),
            "--profile", "tiny", "--run-dir", str(tmp_path / "run"), "--input", str(corpus), "--arm", "cda",
            "--seed", "13", "--no-eval", "--set", "train.epochs=3", "--set", "tracking.enabled=false",
            "--set", "run.device=cpu", "--set", "train.max_seq_len=16"]


def test_a_second_finetune_on_the_same_folder_is_refused(tmp_path):
    """Two `ccda finetune` of one target/arm/seed: the second exits 75 naming the first; the first finishes."""
    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": ["He said that his mother was tired after the long day at work."] * 12}).to_parquet(corpus)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("CCDA_PARAMS", None)
    step = tmp_path / "run" / "finetune" / "tiny-gpt2" / "cda" / "seed-13"
    first = subprocess.Popen(_finetune_cmd(tmp_path, corpus), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (step / L.LOCK_FILE).exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert (step / L.LOCK_FILE).exists(), "the first fine-tuning never took its lock"
    second = subprocess.run(_finetune_cmd(tmp_path, corpus), cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 75, second.stderr[-3000:]
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr
    assert "finetune[tiny-gpt2/cda/seed-13] cannot start" in second.stderr and "Traceback" not in second.stderr
    assert (step / "final" / "model.safetensors").is_file() and not list(step.glob("checkpoints/.*.tmp"))
    assert not (step / "checkpoints").exists()  # finished: the resume state is gone (train.keep_resume_state)


def test_the_runner_refuses_a_step_another_process_holds(cfg, calls):  # noqa: F811
    L.RunLayout.of(cfg).check()
    part = cfg.run_dir() / "augment-parts" / "part-0"
    with other_process_holds(part, "augment"), pytest.raises(LockHeld):
        pipeline.run_pipeline(cfg)
    assert [c.split(":")[0] for c in calls if not c.startswith("tracking")] == ["ingest", "cda", "validate-cda"]
    assert not (part / steps.MARKER).exists()
    res = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}  # free again: it resumes there
    assert res["cda"] == "skipped" and res["augment-part[part-0]"] == res["augment"] == "ran"


# ------------------------------------------------------------------------------------------------ entropy errors


class FailingGenerator(FakeGenerator):
    """FakeGenerator, except texts marked [FAIL] get a rate-limit error (as the openai backend after its retries)."""

    def __init__(self):
        super().__init__()
        self.asked: list[str] = []

    def generate(self, prompts, params):
        out = []
        for conv in prompts:
            text = conv[-1]["content"].rsplit("Text: ", 1)[-1]
            self.asked.append(text)
            if "[FAIL]" in text:
                out.append(GenerationResult(error="HTTP 429 (after 6 attempts)"))
            else:
                out.extend(super().generate([conv], params))
        return out


class CountingGenerator(FakeGenerator):
    def __init__(self):
        super().__init__()
        self.asked: list[str] = []

    def generate(self, prompts, params):
        self.asked += [conv[-1]["content"].rsplit("Text: ", 1)[-1] for conv in prompts]
        return super().generate(prompts, params)


def _entropy_input(tmp_path, n=10, fail=(1, 4, 7)):
    path = make_input(tmp_path, n=n, empty_ids=(9,))
    df = pd.read_parquet(path)
    for i in fail:
        df.loc[i, "augmented"] = df.loc[i, "augmented"] + " [FAIL]"
    df.to_parquet(path)
    return path, [f"id{i:03d}" for i in fail]


def test_sample_generator_failures_are_errors_and_only_they_are_retried(tmp_path):
    src, failing = _entropy_input(tmp_path)
    out = tmp_path / "s"
    conf = config(tmp_path, shard_size=4)
    with pytest.raises(ItemErrors, match=r"sample: 3 of 10 items failed for a transient reason "
                                         r"\(HTTP 429 x3\).*errors\.parquet") as e:
        enveloped(conf, "sample", run_sample, {"augmented": src}, out, generator=FailingGenerator(), judge=FakeJudge())
    assert e.value.count == 3 and e.value.exit_code == 75
    errors = pd.read_parquet(out / L.ERRORS_FILE)
    assert errors[S.ID].tolist() == failing and (errors[S.REASON] == "generator: HTTP 429 (after 6 attempts)").all()
    rejected = pd.read_parquet(out / "rejected.parquet")
    assert rejected[S.ID].tolist() == ["id009"]  # no usable sample: a real rejection, final
    assert not set(failing) & set(pd.read_parquet(out / L.SAMPLES_FILE)[S.ID])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["summary"]["errors"] == 3 and manifest["counts"]["errors"] == 3

    healed = CountingGenerator()  # the server is healthy again: the rerun samples exactly the failed items
    s = run_sample(conf, {"augmented": src}, out, generator=healed, judge=FakeJudge())
    assert sorted(t.split(" [FAIL]")[0] for t in healed.asked) == sorted(
        f"Sentence number {i} about her day." for i in (1, 4, 7))
    assert s["processed_items"] == 3 and s["resumed_items"] == 7 and s["errors"] == 0
    e = run_entropy(conf, {"samples": out}, tmp_path / "e", "fake", scorer=FakeScorer())
    scores = pd.read_parquet(tmp_path / "e" / L.SCORES_FILE)
    assert scores[S.ID].is_unique and len(scores) + e["rejected"] == 10
    assert set(scores[S.ID]) | {"id009"} == {f"id{i:03d}" for i in range(10)}
    assert len(pd.read_parquet(out / L.ERRORS_FILE)) == 0 and e["errors"] == 0


def test_sample_allow_errors_goes_on_loudly_and_a_failed_draw_is_drawn_again(tmp_path, caplog):
    src, failing = _entropy_input(tmp_path, fail=(2,))
    out = tmp_path / "s"
    conf = config(tmp_path)
    conf.run.allow_errors = True
    with caplog.at_level("WARNING", logger="context_cda"):
        s = enveloped(conf, "sample", run_sample, {"augmented": src}, out, generator=FailingGenerator(),
                      judge=FakeJudge())
    assert s["errors"] == 1 and s["error_reasons"] == {"HTTP 429": 1} and "WARNING sample: 1 of 10" in caplog.text
    e = run_entropy(conf, {"samples": out}, tmp_path / "e", "fake", scorer=FakeScorer())
    assert e["scored"] == 8 and e["errors"] == 0  # the target scores what was sampled; the error waits upstream
    gen = CountingGenerator()  # the failed draw is not in the draws cache: drawn again, nothing else
    s2 = run_sample(conf, {"augmented": src}, out, generator=gen, judge=FakeJudge())
    assert len(gen.asked) == 1 and "[FAIL]" in gen.asked[0] and s2["errors"] == 0 and s2["processed_items"] == 1


# ------------------------------------------------------------------------------------------------ augment errors


class ServerGenerator:
    """Answers like the fake server; while ``down`` every prompt of a sentence marked [DOWN] gets HTTP 503."""

    backend, model_id = "fake", "scripted"

    def __init__(self, down: bool):
        self.down = down
        self.asked: list[str] = []

    def generate(self, prompts, params):
        out = []
        for conv in prompts:
            s = conv[-1]["content"].rsplit("Sentence:", 1)[-1].strip()
            self.asked.append(s)
            if self.down and "[DOWN]" in s:
                out.append(GenerationResult(error="HTTP 503 (after 6 attempts)"))
            else:
                out.append(GenerationResult(texts=[f"In the quiet town, {s}"] * params.n, completion_tokens=8))
        return out

    def close(self):
        pass


def test_augment_errors_exit_75_and_the_rerun_sends_exactly_them(tmp_path):
    from tests.helpers.cda_table import openai_config, write_cda_table

    from context_cda.augment import run_augment

    src = write_cda_table(tmp_path / "cda.parquet", 10, {2: "[DOWN]", 5: "[DOWN]", 6: "[REFUSE]"})
    conf = openai_config("http://127.0.0.1:9/v1", tmp_path)
    with pytest.raises(ItemErrors, match=r"augment: 2 of 10 items failed .*\(HTTP 503 x2\)"):
        enveloped(conf, "augment", run_augment, {"counterfactuals": src}, tmp_path / "a",
                  generator=ServerGenerator(down=True))
    assert pd.read_parquet(tmp_path / "a" / L.ERRORS_FILE)["cda_id"].tolist() == ["cda0002", "cda0005"]
    healthy = ServerGenerator(down=False)
    s = run_augment(conf, {"counterfactuals": src}, tmp_path / "a", generator=healthy)
    assert sorted(set(healthy.asked)) == sorted(
        c for c in pd.read_parquet(src)["counterfactual"] if "[DOWN]" in c)  # exactly the error items
    assert s["processed_items"] == 2 and s["errors"] == 0
    aug = pd.read_parquet(tmp_path / "a" / L.AUGMENTED_FILE)
    rej = pd.read_parquet(tmp_path / "a" / "rejected.parquet")
    assert aug["cda_id"].is_unique and not set(aug["cda_id"]) & set(rej["cda_id"])
    assert len(aug) + len(rej) == 10 and (rej[S.REASON] != "").all()


# ------------------------------------------------------------------------------------------------ the runner


def _fake_with_errors(monkeypatch, calls, errors_by_call: list[int], items: int = 10):  # noqa: F811
    """Make the fake augment stage report ``errors_by_call[k]`` error items on its k-th call."""
    orig = stages.get_stage
    seen = {"n": 0}

    def get(stage):
        fn = orig(stage)
        if stage != "augment":
            return fn

        def augment(config, inputs, out_dir, **options):
            n = errors_by_call[min(seen["n"], len(errors_by_call) - 1)]
            seen["n"] += 1
            fn(config, inputs, out_dir, **options)
            summary = {"items": items, "accepted": items - n, "errors": n}
            rec = steps._ACTIVE.get()  # the envelope's recorder (the stand-in stage above reported to it)
            rec.finish(Counts(items_in=items, out=items - n, errors=n), rec.outputs, summary)
            return summary

        return augment

    monkeypatch.setattr(stages, "get_stage", get)


def test_a_step_with_errors_stops_the_run(cfg, calls, monkeypatch):  # noqa: F811
    _fake_with_errors(monkeypatch, calls, [3])
    with pytest.raises(ItemErrors, match="augment: 3 of 10"):
        pipeline.run_pipeline(cfg)
    assert not any(c.startswith(("sample", "entropy", "finetune")) for c in calls)
    assert not (cfg.run_dir() / "augment" / steps.MARKER).exists()


def test_allowed_errors_go_on_but_the_step_is_never_fresh_until_clean(cfg, calls, monkeypatch):  # noqa: F811
    cfg.run.max_error_fraction = 0.5
    _fake_with_errors(monkeypatch, calls, [2, 0])
    first = {r.step.name: r for r in pipeline.run_pipeline(cfg, allow_errors=True)}
    assert first["augment"].status == "errors" and first["augment"].errors == 2
    assert first["report"].status == "ran"
    assert not (cfg.run_dir() / "augment" / steps.MARKER).exists()
    assert not pipeline.is_fresh(first["augment"].step, cfg)
    second = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}
    assert second["augment"] == "ran" and second["ingest"] == "skipped"  # retried (the stage retries its errors)
    third = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}
    assert third["augment"] == "skipped"


def test_too_many_errors_stop_the_run_before_training(cfg, calls, monkeypatch):  # noqa: F811
    cfg.run.max_error_fraction = 0.2
    _fake_with_errors(monkeypatch, calls, [4])
    with pytest.raises(ItemErrors, match=r"finetune\[a/cda/seed-13\]: not started: 40% of the items planned for "
                                         r"its corpus ended as errors \(augment: 4 of 10\), more than "
                                         r"run\.max_error_fraction=0\.2"):
        pipeline.run_pipeline(cfg, allow_errors=True)
    assert any(c.startswith("filter") for c in calls) and not any(c.startswith("finetune") for c in calls)


def test_a_forced_rerun_that_fails_leaves_the_step_not_fresh(cfg, calls, monkeypatch):  # noqa: F811
    pipeline.run_pipeline(cfg)
    step = next(s for s in pipeline.plan(cfg) if s.name == "augment")
    assert pipeline.is_fresh(step, cfg)
    _fake_with_errors(monkeypatch, calls, [1])
    with pytest.raises(ItemErrors):
        pipeline.run_pipeline(cfg, only=["augment"], force=True)
    assert not pipeline.is_fresh(step, cfg)


def test_until_augment_runs_no_later_validation(cfg, calls):  # noqa: F811
    res = pipeline.run_pipeline(cfg, until="augment")
    assert [r.step.name for r in res] == ["ingest", "cda", "validate-cda", "augment-part[part-0]", "augment",
                                          "validate-augment"]
    assert not any(c.startswith(("validate-entropy", "entropy")) for c in calls)


def test_requirements_are_checked_before_any_step(cfg, calls, tmp_path):  # noqa: F811
    from context_cda.errors import ModelError

    bad = write_text(tmp_path / "x.gguf", "not a model")
    cfg.run.targets = {"a": str(bad), "b": "tiny:bert"}
    with pytest.raises(ModelError, match=r"run\.targets\.a: .*x\.gguf: not a GGUF file"):
        pipeline.run_pipeline(cfg)
    assert calls == []



def test_a_second_register_of_a_target_is_refused(tmp_path, capsys):
    from context_cda.cli import main

    run_dir = tmp_path / "run"
    L.RunLayout(run_dir).check()
    with other_process_holds(run_dir / "register" / "tiny-gpt2", "register[tiny-gpt2]") as holder:
        code = main(["register", "--params", str(ROOT / "params.yaml"), "--profile", "tiny", "--run-dir",
                     str(run_dir)])
    err = capsys.readouterr().err
    assert code == 75 and f"pid {holder.pid}" in err and "register[tiny-gpt2] cannot start" in err, err


# ------------------------------------------------------------------------------------------------ SIGTERM


def test_sigterm_in_a_step_stops_the_run_and_the_rerun_resumes_from_it(cfg, calls, monkeypatch):  # noqa: F811
    """A real SIGTERM while the runner is inside a step (under the CLI's handler): the run stops there, the step's
    lock is released, the pipeline's MLflow run is marked KILLED, the step gets no up-to-date marker; the next
    run skips the steps that finished and starts from the interrupted one."""
    from context_cda.runtime.signals import EXIT_CODE, Terminated, sigterm_raises

    fake = stages.get_stage
    seen: list[str] = []

    def get_stage(step):
        fn = fake(step)
        if step != "finetune":
            return fn

        def interrupted(config, inputs, out_dir, **options):
            seen.append(str(out_dir))
            if len(seen) == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # delivered at the next instruction: inside the step
                time.sleep(5)
            return fn(config, inputs, out_dir, **options)

        return interrupted

    monkeypatch.setattr(stages, "get_stage", get_stage)
    with sigterm_raises(), pytest.raises(Terminated) as info:
        pipeline.run_pipeline(cfg)
    assert info.value.exit_code == EXIT_CODE == 143 and calls[-1] == "tracking:KILLED"
    first = Path(seen[0])
    assert not list(cfg.run_dir().rglob(L.LOCK_FILE)) and not (first / steps.MARKER).exists()
    ran_before = [c for c in calls if not c.startswith("tracking")]
    results = pipeline.run_pipeline(cfg, until="finetune")
    status = {r.step.name: r.status for r in results}
    before = [r.step.name for r in results if r.step.row.step != "finetune"]
    assert before and all(status[n] == "skipped" for n in before), status  # finished steps are not redone
    assert seen[1] == seen[0] and all(r.status == "ran" for r in results if r.step.row.step == "finetune")
    assert len([c for c in calls if not c.startswith("tracking")]) - len(ran_before) == len(seen) - 1


def test_sigterm_waits_for_a_deferred_block_and_a_second_one_is_ignored():
    from context_cda.runtime.signals import Terminated, deferred, sigterm_raises

    done = []
    with sigterm_raises(), pytest.raises(Terminated):
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            done.append("the block finished")
        done.append("not reached")
    assert done == ["the block finished"]
    with sigterm_raises(), pytest.raises(Terminated):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # while unwinding: ignored, the clean-up goes on
            time.sleep(0.05)
            done.append("clean-up finished")
    assert done[-1] == "clean-up finished"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the previous handler is back


@pytest.mark.parametrize("where", ["callback", "new_loop"])
def test_sigterm_inside_an_event_loop_cancels_it_and_raises_after(monkeypatch, where):
    """signals.run_async (the openai client's requests): a SIGTERM that lands in the loop's own code - a callback,
    or the loop being made - is not raised there (where it broke anyio's cancel scopes in httpx, or left a
    half-made loop), but cancels the coroutine inside the loop; Terminated comes once the loop is closed, and the
    CLI's handler is in place again."""
    import asyncio

    from context_cda.runtime.signals import Terminated, run_async, sigterm_raises

    done: list[str] = []

    def kill_then_work() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100_000))  # many instructions after the signal: a raising handler would land here
        done.append(where)

    if where == "new_loop":
        make = asyncio.events.new_event_loop

        def new_event_loop():
            loop = make()
            kill_then_work()
            return loop

        monkeypatch.setattr(asyncio.events, "new_event_loop", new_event_loop)

    async def main() -> None:
        if where == "callback":
            asyncio.get_running_loop().call_soon(kill_then_work)
        try:
            await asyncio.sleep(5)
        finally:
            done.append("main cancelled")

    t0 = time.time()
    with sigterm_raises():
        handler = signal.getsignal(signal.SIGTERM)
        with pytest.raises(Terminated):
            run_async(main())
        assert signal.getsignal(signal.SIGTERM) is handler
    assert done[0] == where and time.time() - t0 < 4
    assert done[1:] == (["main cancelled"] if where == "callback" else [])  # cancelled before it started
