"""The CPU variant of the Kubeflow pipeline runs under kfp.local (SubprocessRunner, this venv) on the tiny profile.

Each component runs in its own subprocess exactly as in a cluster pod (the same executor code, artifacts as
folders, the config as the ``config_yaml`` parameter), minus Kubernetes. The default tests run the corpus stages
and the exit handler on success and on failure; ``-m slow`` runs the whole DAG (train, evaluate, register,
report) on tiny models once, with kfp.local's task cache on (as a cluster's KFP caches), and reads that run for
three checks: the end-to-end outputs, the kfp.local door of the doors check (tests/helpers/doors.py), and two more
pipeline runs that add an arm and a seed (tests/pipelines/test_reruns.py's claim for this door: the cache serves
every finished fine-tuning).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("kfp")

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))
import tiny_pipeline as tp  # noqa: E402
from doors import ARMS, check_kfp_door, exclude_rows  # noqa: E402

if str(tp.ROOT) not in sys.path:
    sys.path.insert(0, str(tp.ROOT))

from kfp import local  # noqa: E402

from pipelines import build_pipeline  # noqa: E402


@pytest.fixture()
def kfp_local(tmp_path, monkeypatch):
    """kfp.local in this venv; the component subprocesses find `components` through PYTHONPATH (as in the image)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tp.ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = tmp_path / "pipeline_root"
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root), raise_on_error=True)
    return root


def _one(root: Path, pattern: str) -> Path:
    found = sorted(root.rglob(pattern))
    assert found, f"no {pattern} under {root}"
    return found[-1]


def _status(root: Path) -> dict:
    return json.loads(_one(root, "status.json").read_text())


@pytest.mark.services
@pytest.mark.timeout(300)
def test_cpu_pipeline_corpus_stages_under_kfp_local(kfp_local, tmp_path, fake_llm):
    import pandas as pd

    cfg = tp.tiny_config(fake_llm.base_url, run_dir=tmp_path / "run")
    build_pipeline("cpu", cfg, last_stage="cda")()

    sentences = pd.read_parquet(_one(kfp_local, "sentences.parquet"))
    counterfactuals = pd.read_parquet(_one(kfp_local, "counterfactuals.parquet"))
    valid = pd.read_parquet(_one(kfp_local, "valid.parquet"))
    assert len(sentences) > 0 and {"id", "text"} <= set(sentences.columns)
    assert set(counterfactuals["source_id"]) <= set(sentences["id"])
    assert len(valid) > 0
    for manifest in kfp_local.rglob("manifest.json"):  # every stage folder carries its manifest
        assert json.loads(manifest.read_text())["stage"]
    assert _status(kfp_local)["state"] == "SUCCEEDED"


@pytest.mark.services
@pytest.mark.timeout(300)
def test_exit_handler_records_a_failed_run(kfp_local, tmp_path, fake_llm):
    cfg = tp.tiny_config(fake_llm.base_url, run_dir=tmp_path / "run")
    cfg.ingest.path = str(tmp_path / "no-such-corpus.txt")
    with pytest.raises(RuntimeError, match="FAILURE"):
        build_pipeline("cpu", cfg, last_stage="ingest")()
    status = _status(kfp_local)
    assert status["state"] == "FAILED"
    assert status["error_message"]


POSTHOC = "sentence-debias"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cpu_pipeline_end_to_end_under_kfp_local_then_its_cache_serves_the_finished_fine_tunings(
        kfp_local, tmp_path, fake_llm, excluded, runner_door):
    """Every step of the stage table, through ParallelFor over the generation parts, targets and (arm, seed), to
    the report; augment and the sample step in three parts each (``pipeline.generation_shards``), merged once; a
    row excluded at each validation boundary, and the fine-tunings on the runner door's ids. Then the pipeline
    again with an arm added (every task gets its step's view of the config: the finished tasks keep their cache
    keys, no fine-tuning executes) and with a seed added (only the new seed's fine-tunings execute)."""
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(kfp_local), raise_on_error=True,
               enable_caching=True)

    def config(arms=ARMS, seeds=(13,)):
        cfg = exclude_rows(tp.tiny_config(fake_llm.base_url, run_dir=tmp_path / "run"), excluded)
        cfg.pipeline.generation_shards = 3
        cfg.baselines.sentence_debias.min_pairs = 2  # the tiny corpus's pairs
        cfg.train.arms, cfg.train.seeds = list(arms), list(seeds)
        return cfg

    cfg = config()
    first = _pipeline_run(kfp_local, cfg, "report")
    assert _status(first)["state"] == "SUCCEEDED"
    expected = {"augment": "augmented.parquet", "sample": "samples.parquet", "entropy": "scores.parquet",
                "filter": "corpus.parquet",
                "finetune": "metrics.csv", "evaluate": "aggregate.json", "register": "promotion.json",
                "report": "report.md"}
    for stage, name in expected.items():
        assert list(first.rglob(name)), f"{stage}: no {name}"
    _check_generation_parts_merged_once(first)
    _check_evaluations_reach_register_and_report(first, cfg)
    ids = check_kfp_door(first, excluded, runner_door)  # one fine-tuning task per arm
    arm = _finetunings(_pipeline_run(kfp_local, config([*ARMS, POSTHOC]), "finetune"))
    seed = _finetunings(_pipeline_run(kfp_local, config([*ARMS, POSTHOC], (13, 14)), "finetune"))
    print(f"kfp.local: train ids per arm {', '.join(f'{a}: {len(v)}' for a, v in sorted(ids.items()))}; "
          f"+{POSTHOC} {arm} fine-tuning tasks executed; +seed {seed}")
    assert arm == 0 and seed == 2


def _pipeline_run(root: Path, cfg, last_stage: str) -> Path:
    """Run the pipeline to ``last_stage``; the folder of this pipeline run under ``root``."""
    before = set(root.iterdir()) if root.exists() else set()
    build_pipeline("cpu", cfg, last_stage=last_stage)()
    return next(p for p in root.iterdir() if p not in before and p.is_dir() and not p.name.startswith("."))


def _finetunings(run: Path) -> int:
    """The fine-tuning tasks a pipeline run to ``finetune`` executed (those its cache served left no folder in
    it; a run to the report also holds collect_arms' copies of their manifests)."""
    return sum(1 for m in run.rglob("manifest.json") if json.loads(m.read_text()).get("stage") == "finetune")


def _check_evaluations_reach_register_and_report(root: Path, cfg) -> None:
    """The vanilla target and every arm were evaluated; register read both aggregates; collect_arms carried
    their aggregate.json (not the predictions) to the report, whose Table 1 took its values from them."""
    import pandas as pd

    seed = cfg.train.seeds[0]
    models = ("vanilla", *(f"{arm}/seed-{seed}" for arm in cfg.train.arms))
    manifests = [json.loads(p.read_text()) for p in root.rglob("manifest.json")]
    for target in cfg.run.targets:
        # register's manifests (the task's own and the copy in the summary) list the evaluations among its inputs,
        # and every arm has its promotion decision
        regs = [m for m in manifests if m["stage"] == "register" and m["keys"]["target"] == target]
        assert regs
        for m in regs:
            assert "evaluations" in m["inputs"], m["inputs"]
        assert set(cfg.train.arms) <= {p.parent.name for p in root.rglob("promotion.json")}
        for model in models:  # the collect_arms summary, laid out like a run directory
            found = sorted(root.rglob(f"evaluate/{target}/{model}/aggregate.json"))
            assert found, f"summary: no evaluate/{target}/{model}/aggregate.json"
            summary_eval = found[-1].parent
            assert json.loads(found[-1].read_text())["metrics"]
            for bench in cfg.evaluate.benchmarks:
                assert (summary_eval / bench / "aggregate.json").is_file(), (model, bench)
            # aggregates, plus the intrinsic per-item scores the report's paired comparisons read
            assert {p.parent.name for p in summary_eval.rglob("*.parquet")} <= {"stereoset", "crows"}
    t1 = pd.read_csv(_one(root, "table1.csv"))
    assert set(t1["model"]) == {"vanilla", *cfg.train.arms}
    assert set(t1["source"]) == {"evaluate"}


def _check_generation_parts_merged_once(kfp_local: Path) -> None:
    """pipeline.generation_shards = 3: augment and the sample step ran as three parts each (a ParallelFor read from
    the config), merged once; every item of the input ends in exactly one part and the merged tables hold each
    once; the target's entropy scores the merged samples."""
    import pandas as pd

    parts = {}
    for manifest in kfp_local.rglob("manifest.json"):
        m = json.loads(manifest.read_text())
        if m["stage"] == "augment-part":
            parts[m["keys"]["shard"]] = manifest.parent
    assert sorted(parts) == [0, 1, 2]
    per_part = [set(pd.read_parquet(d / "augmented.parquet")["cda_id"]) | set(pd.read_parquet(d / "rejected.parquet")
                                                                                ["cda_id"]) for d in parts.values()]
    assert sum(len(p) for p in per_part) == len(set().union(*per_part))  # no item in two parts
    merged = next(m.parent for m in kfp_local.rglob("manifest.json")
                  if json.loads(m.read_text())["stage"] == "augment")
    aug = pd.read_parquet(merged / "augmented.parquet")
    assert aug["id"].is_unique and json.loads((merged / "manifest.json").read_text())["summary"]["parts"] == 3
    samples = next(m.parent for m in kfp_local.rglob("manifest.json")
                   if json.loads(m.read_text())["stage"] == "sample")
    assert json.loads((samples / "manifest.json").read_text())["summary"]["parts"] == 3
    assert not pd.read_parquet(samples / "samples.parquet").duplicated(["id", "sample_idx"]).any()
    scores = next(p for p in kfp_local.rglob("scores.parquet")
                  if json.loads((p.parent / "manifest.json").read_text())["stage"] == "entropy")
    assert set(pd.read_parquet(scores)["id"]) <= set(aug["id"])
