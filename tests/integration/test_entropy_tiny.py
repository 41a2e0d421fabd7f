"""The entropy + filter stages end to end: tiny random models of each family, and a killed-and-resumed run."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from context_cda import layout as L
from context_cda import schemas as S
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
def test_entropy_and_filter_on_tiny_models(tmp_path, target):
    pytest.importorskip("torch")
    from context_cda.entropy import run_entropy, run_filter
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
    s = run_entropy(cfg, {"augmented": src}, tmp_path / "entropy/t", "t")
    scores = pd.read_parquet(tmp_path / "entropy/t" / L.SCORES_FILE)
    audit = pd.read_parquet(tmp_path / "entropy/t" / L.AUDIT_FILE)
    assert s["scored"] + s["rejected"] == len(SENTENCES) and s["scored"] >= 4
    assert (row_checks(scores, cfg) == "").all()
    assert len(audit) == scores["n_samples"].sum()
    assert audit["n_tokens"].gt(0).all() and audit["loglik_sum"].le(0).all()
    assert 0 < s["judge_calls_per_item"] <= 4 * 4
    f = run_filter(cfg, {"scores": tmp_path / "entropy/t" / L.SCORES_FILE}, tmp_path / "filter/t", "t")
    for name in ("k20", "k40"):
        corpus = pd.read_parquet(tmp_path / "filter/t" / name / L.FILTERED_FILE)
        assert (
            len(corpus) == f["cuts"][name]["kept"]
            and (tmp_path / "filter/t" / name / "se_hist.png").is_file()
        )


SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {unit!r})
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config
    from context_cda.entropy import run_entropy

    tmp = Path({tmp!r})
    run_entropy(config(tmp, shard_size=2), {{"augmented": tmp / "augmented.parquet"}}, tmp / "e", "fake",
                generator=FakeGenerator(), scorer=FakeScorer(delay={delay}, log={log!r}), judge=FakeJudge())
    """
)


def test_killed_run_resumes_without_lost_or_duplicated_work(tmp_path):
    import sys as _sys

    unit = str(Path(__file__).resolve().parents[1] / "unit")
    _sys.path.insert(0, unit)
    from test_entropy_stage import FakeGenerator, FakeJudge, FakeScorer, config

    from context_cda.entropy import run_entropy
    from context_cda.entropy.stage import read_shards

    n = 14
    write_augmented(tmp_path / "augmented.parquet", n)
    log1, log2 = tmp_path / "run1.log", tmp_path / "run2.log"
    code = SCRIPT.format(unit=unit, tmp=str(tmp_path), delay=0.4, log=str(log1))
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True
    )
    shard_root = tmp_path / "e" / "shards"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if len(list(shard_root.glob("*/shard-*.parquet"))) >= 2 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    (shard_dir,) = list(shard_root.iterdir())
    done1 = set(read_shards(shard_dir)[S.ID])
    assert 2 <= len(done1) < n
    assert not list(tmp_path.glob("e/*.parquet"))  # no final outputs from the killed run
    s = run_entropy(
        config(tmp_path, shard_size=2),
        {"augmented": tmp_path / "augmented.parquet"},
        tmp_path / "e",
        "fake",
        generator=FakeGenerator(),
        scorer=FakeScorer(log=str(log2)),
        judge=FakeJudge(),
    )
    redone = set(log2.read_text().split("\n")) - {""}
    texts = pd.read_parquet(tmp_path / "augmented.parquet").set_index("id")["augmented"]
    assert redone.isdisjoint({texts[i] for i in done1})  # finished shards are not redone
    assert s["resumed_items"] == len(done1) and s["processed_items"] == n - len(done1)
    scores = pd.read_parquet(tmp_path / "e" / L.SCORES_FILE)
    assert len(scores) == n and scores[S.ID].is_unique  # nothing lost, nothing duplicated
    audit = pd.read_parquet(tmp_path / "e" / L.AUDIT_FILE)
    assert not audit.duplicated([S.ID, "sample_idx"]).any()
