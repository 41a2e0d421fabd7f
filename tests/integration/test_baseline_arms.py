"""The baseline arms through their doors on tiny models: `ccda evaluate --model REF --arm inlp` alone (the
projection learnt first from the run's corpus), a published checkpoint that cannot be loaded offline, the
post-hoc rows of the report, and (slow) `ccda run` with every arm of the paper's Table 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_cda.cli import main

ROOT = Path(__file__).resolve().parents[2]
STEREOSET = ROOT / "tests" / "fixtures" / "evaluate" / "stereoset_tiny.json"
CROWS = ROOT / "tests" / "fixtures" / "evaluate" / "crows_tiny.csv"


def _args(run: Path, *sets: str) -> list[str]:
    out = ["--params", str(ROOT / "params.yaml"), "--profile", "tiny", "--run-dir", str(run),
           "--set", "ingest.corpus=wikitext-2-test", "--set", "ingest.path=null", "--set", "ingest.sample_n=80",
           "--set", "ingest.min_words=6", "--set", "baselines.inlp.n_classifiers=3",
           "--set", "baselines.inlp.neutral_lines=60", "--set", "tracking.enabled=false"]
    for s in sets:
        out += ["--set", s]
    return out


def test_evaluate_with_a_projection_arm_works_alone(data_mirror, tmp_path, monkeypatch):
    """A fresh run folder: ingest and CDA run, the projection is learnt for the model, then it is scored."""
    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    assert main(["evaluate", *_args(run), "--model", "tiny:gpt2", "--name", "g", "--arm", "inlp",
                 "--benchmarks", "stereoset,crows", "--no-progress"]) == 0
    art = run / "debias" / "g" / "inlp" / "projection.safetensors"
    agg = json.loads((run / "evaluate" / "g" / "inlp" / "posthoc" / "aggregate.json").read_text())
    assert art.is_file() and (run / "ingest" / "sentences.parquet").is_file()
    assert agg["arm"] == "inlp" and agg["applied"]["intervention"] == "inlp" and agg["applied"]["dim"] == 32
    assert {"stereoset_ss", "crows_cs"} <= set(agg["metrics"])
    # again: the learnt projection is reused, not learnt anew
    mtime = art.stat().st_mtime
    assert main(["evaluate", *_args(run), "--model", "tiny:gpt2", "--name", "g", "--arm", "inlp",
                 "--benchmarks", "stereoset", "--no-progress"]) == 0
    assert art.stat().st_mtime == mtime


def test_self_debias_runs_the_scoring_benchmarks_only(data_mirror, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    # inlp among the arms: the step has a debias input, which self-debias does not read (none learnt yet here)
    assert main(["evaluate", *_args(run, "train.arms=[cda,inlp,self-debias]"), "--target", "tiny-gpt2", "--arm",
                 "self-debias", "--benchmarks", "stereoset,crows,next-token", "--no-progress"]) == 0
    agg = json.loads((run / "evaluate" / "tiny-gpt2" / "self-debias" / "posthoc" / "aggregate.json").read_text())
    assert set(agg["benchmarks"]) == {"stereoset", "crows"} and "next-token" in agg["not_applicable"]
    assert agg["applied"]["prefix_tokens"] > 0
    folder = run / "evaluate" / "tiny-gpt2" / "self-debias" / "posthoc" / "next-token"  # DVC's out exists, saying why
    assert not (folder / "predictions.parquet").exists()
    assert json.loads((folder / "not_applicable.json").read_text())["not_applicable"] == agg["not_applicable"][
        "next-token"]


def test_an_arm_kept_to_fewer_benchmarks_lists_the_rest_and_a_rerun_drops_stale_scores(data_mirror, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    base = ["evaluate", "--model", "tiny:gpt2", "--name", "g", "--arm", "cda", "--benchmarks", "stereoset,crows",
            "--no-progress"]
    out = run / "evaluate" / "g" / "cda" / "seed-13"
    assert main([*base, *_args(run)]) == 0
    assert (out / "crows" / "predictions.parquet").is_file()
    assert main([*base, *_args(run, "evaluate.arm_benchmarks={cda: [stereoset]}")]) == 0
    agg = json.loads((out / "aggregate.json").read_text())
    assert set(agg["benchmarks"]) == {"stereoset"} and "evaluate.arm_benchmarks" in agg["not_applicable"]["crows"]
    assert "crows_cs" not in agg["metrics"] and "stereoset_ss" in agg["metrics"]
    assert not (out / "crows" / "predictions.parquet").exists() and (out / "crows" / "not_applicable.json").is_file()
    assert main([*base, *_args(run)]) == 0  # listed again: scored again, the note gone
    assert (out / "crows" / "predictions.parquet").is_file() and not (out / "crows" / "not_applicable.json").exists()


def test_a_published_checkpoint_that_cannot_be_loaded_leaves_its_row_saying_why(tmp_path, monkeypatch):
    from context_cda.config import load_config
    from context_cda.evaluate import run_evaluate
    from context_cda.evaluate.posthoc import available

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = load_config("tiny", {"run": {"run_dir": str(tmp_path / "run")},
                               "baselines": {"published": {"tiny-gpt2": {"mabel": "nobody-here/no-such-model"}}},
                               "evaluate": {"stereoset_path": str(STEREOSET), "crows_path": str(CROWS)}},
                      params_file=ROOT / "params.yaml")
    out = tmp_path / "run" / "evaluate" / "tiny-gpt2" / "mabel" / "posthoc"
    summary = run_evaluate(cfg, {}, out, target="tiny-gpt2", arm="mabel")
    assert "nobody-here/no-such-model" in summary["unavailable"] and "HF_HUB_OFFLINE" in summary["unavailable"]
    assert not available(cfg, out)  # the runner tries it again next time

    from context_cda.report.baselines import unavailable

    assert list(unavailable(tmp_path / "run" / "evaluate")) == [("tiny-gpt2", "mabel")]


def test_report_table1_has_the_post_hoc_rows(tmp_path):
    import pandas as pd

    from context_cda.report import table1

    df = pd.DataFrame([{"target": "t", "arm": "cda", "seed": 13, "epoch": e, "stereoset_ss": 60.0 - e,
                        "stereoset_lms": 90.0, "stereoset_icat": 70.0, "crows_cs": 55.0} for e in (0, 1, 2)])
    final = {("t", "inlp"): {"stereoset_ss": 52.0, "stereoset_ss_ci_low": 45.0, "stereoset_ss_ci_high": 59.0}}
    t1 = table1(df, final, {("t", "inlp"): None, ("t", "mabel"): "offline"})
    assert t1["model"].tolist() == ["vanilla", "cda", "inlp", "mabel"]
    inlp = t1[t1["model"] == "inlp"].iloc[0]
    assert inlp["epoch"] != inlp["epoch"] and inlp["stereoset_ss"] == 52.0 and inlp["stereoset_ss_ci_low"] == 45.0
    assert t1[t1["model"] == "mabel"]["note"].iloc[0] == "could not be loaded: offline"

    from context_cda.report import arm_label
    from context_cda.report.evidence import table1_markdown

    text = "\n".join(table1_markdown(t1, None, ["stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"],
                                     arm_label))
    assert "| INLP | – | 52.00 [45.00, 59.00] |" in text and "| MABEL | – | could not be loaded: offline |" in text


def test_published_values_sit_under_their_row_and_the_unmeasured_rows_follow(cfg_factory):
    """The paper's published values are a labelled row under the measured one, only for the target whose model the
    paper reports (BERT, GPT-2); the paper's rows this run did not measure (MABEL, INLP, wiki-debiased, ...) follow,
    labelled as not run here; a cell without a sourced value would say n/a (nothing is filled in)."""
    import pandas as pd

    from context_cda.report import arm_label, table1
    from context_cda.report.baselines import published_values
    from context_cda.report.evidence import table1_markdown

    cfg = cfg_factory(run={"targets": {"bert": "bert-base-uncased", "gpt": "gpt2", "own": "tiny:gpt2"}})
    values = published_values(cfg)
    assert set(values["models"]) == {"bert-base-uncased", "gpt2"}
    df = pd.DataFrame([{"target": t, "arm": "cda", "seed": 13, "epoch": e, "stereoset_ss": 60.0, "stereoset_lms": 85.0,
                        "stereoset_icat": 68.0, "crows_cs": 55.0} for t in ("bert", "gpt", "own") for e in (0, 1)])
    t1 = table1(df, {}, {})
    text = "\n".join(table1_markdown(t1, None, ["stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"],
                                     arm_label, (cfg, values)))
    bert, gpt, own = (text[text.index(f"### {t}"):] for t in ("bert", "gpt", "own"))
    bert = bert[: bert.index("### gpt")]
    gpt = gpt[: gpt.index("### own")]
    assert "| Vanilla, published (paper) |  | 59.95 | 79.87 | 63.96 | 58.01 |" in bert
    assert bert.index("| CDA |") < bert.index("| CDA, published (paper) |  | 58.55 | 68.41 | 56.71 | 54.96 |")
    assert "| MABEL, published (paper; not run here) |  | 47.28 | 51.65 | 48.84 | 52.29 |" in bert
    assert "| Vanilla, published (paper) |  | 63.17 | 77.46 | 57.04 | 51.52 |" in gpt
    assert "| wiki-debiased, published (paper; not run here) |  | 60.40 | 91.01 | 72.08 | 56.49 |" in gpt
    assert bert.count("published (paper") == 7 and gpt.count("published (paper") == 6  # every row of each model
    assert "published" not in own.split("Published values")[0]  # not a paper model: no published row
    assert "arXiv 2602.09590" in text


@pytest.mark.slow  # ~2.5 min on 2 cores under load: CI's slow step runs it (.ci/run)
def test_the_runner_reports_every_table1_row_registers_and_judges_the_baselines(data_mirror, tmp_path, monkeypatch):
    """`ccda run` with every arm of the paper's Table 1 on a tiny GPT-2 (generation from the fake OpenAI server):
    the report's Table 1 has vanilla, CDA, Context-CDA, Dropout, INLP, SentenceDebias, Self-Debias and a published
    checkpoint that cannot be loaded offline (its row says why, the run goes on), each measured row with its
    interval; the decontamination section counts every stage; the post-hoc arms are registered and judged by the
    same gate as the trained ones."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from fake_openai import FakeOpenAIServer

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "run"
    with FakeOpenAIServer(model="fake-model") as srv:
        args = _args(run, "train.arms=[cda,context-cda,dropout,inlp,sentence-debias,self-debias]",
                     "baselines.published={tiny-gpt2: {mabel: nobody-here/no-such-model}}",
                     "tracking.enabled=true", "augment.backend=openai", "augment.model=fake-model",
                     f"augment.openai.base_url={srv.base_url}", "augment.openai.timeout_s=10",
                     "entropy.n_samples=3", "entropy.max_tokens=16", "entropy.judge=nli", "entropy.judge_model=tiny:nli",
                     "entropy.limit=12", "train.epochs=1", "train.max_steps=2", "train.max_seq_len=32",
                     f"evaluate.stereoset_path={STEREOSET}", f"evaluate.crows_path={CROWS}", "evaluate.max_items=8",
                     "evaluate.benchmarks=[stereoset,crows]")
        assert main(["run", *args]) == 0
    t1 = {r["model"]: r for r in json.loads((run / "report" / "summary.json").read_text())["table1"]}
    assert list(t1) == ["vanilla", "cda", "context-cda", "dropout", "inlp", "sentence-debias", "self-debias", "mabel"]
    for arm in ("vanilla", "cda", "context-cda", "dropout", "inlp", "sentence-debias", "self-debias"):
        for m in ("stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"):
            assert t1[arm][m] is not None and t1[arm][f"{m}_ci_low"] <= t1[arm][m] <= t1[arm][f"{m}_ci_high"], (arm, m)
    assert "could not be loaded" in t1["mabel"]["note"] and "nobody-here/no-such-model" in t1["mabel"]["note"]
    report = (run / "report" / "report.md").read_text()
    for label in ("| Vanilla |", "| CDA |", "| Context-CDA |", "| Dropout |", "| INLP |", "| SentenceDebias |",
                  "| Self-Debias |", "| MABEL | – | could not be loaded"):
        assert label in report, label
    assert "Decontamination" in report and "eval-overlap" in report
    for arm in ("inlp", "sentence-debias", "self-debias", "cda", "context-cda", "dropout"):
        decision = json.loads((run / "register" / "tiny-gpt2" / arm / "promotion.json").read_text())
        assert decision["reasons"], arm  # judged by the gate: its reasons in numbers, whatever it decided
    registered = json.loads((run / "register" / "tiny-gpt2" / "manifest.json").read_text())  # the target's step
    assert {"evaluations", "posthoc", "debias"} <= set(registered["inputs"]), registered["inputs"]
    for arm in ("inlp", "self-debias"):  # a post-hoc arm's card: the vanilla weights, the arm applied at scoring
        card = (run / "register" / "tiny-gpt2" / arm / "card" / "README.md").read_text()
        agg = json.loads((run / "evaluate" / "tiny-gpt2" / arm / "posthoc" / "aggregate.json").read_text())["metrics"]
        assert "No fine-tuning: this arm is applied to the vanilla weights" in card and "no training:" in card
        assert f"| stereoset | stereoset_ss | {agg['stereoset_ss']:.2f} [" in card
