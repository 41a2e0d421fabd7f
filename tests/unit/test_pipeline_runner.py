"""The local runner's planning and up-to-date logic, with stand-in stage functions that write real files."""

import json
from pathlib import Path

import pytest

from context_cda import pipeline, stages, steps
from context_cda.errors import ConfigError
from context_cda.io import write_text
from context_cda.steps import Counts, recorder

OUTPUT = {"ingest": "sentences.parquet", "cda": "counterfactuals.parquet", "validate-cda": "valid.parquet",
          "augment-part": "augmented.parquet", "augment": "augmented.parquet", "validate-augment": "valid.parquet",
          "sample-part": "samples.parquet", "sample": "samples.parquet", "entropy": "scores.parquet", "budget": "budget.json",
          "validate-entropy": "valid.parquet", "finetune": "final/model.safetensors",
          "evaluate-vanilla": "aggregate.json", "evaluate": "aggregate.json", "register": "decision.json",
          "report": "report.md"}


@pytest.fixture()
def calls(monkeypatch):
    log: list[str] = []

    def fake(stage):
        def run(config, inputs, out_dir, **options):
            out_dir = Path(out_dir)
            log.append(f"{stage}:{json.dumps(options, sort_keys=True, default=str)}")
            content = json.dumps({"stage": stage, "options": options,
                                  "inputs": {k: Path(v).read_text() if Path(v).is_file() else "" for k, v in inputs.items()},
                                  "filter_k": config.filter.k if stage == "filter" else None}, default=str)
            if stage == "filter":
                for k in config.filter.k:
                    write_text(out_dir / f"k{k:g}" / "corpus.parquet", content)
                outs = {f"k{k:g}": out_dir / f"k{k:g}" / "corpus.parquet" for k in config.filter.k}
            else:
                outs = {"out": write_text(out_dir / OUTPUT[stage], content)}
            if stage == "finetune":
                write_text(out_dir / "metrics.csv", "epoch,arm,target,stereoset_ss\n0,a,t,60.0\n1,a,t,55.0\n")
            recorder(out_dir).finish(Counts(items_in=1, out=1), outputs=outs, summary={"rows_out": 1})
            return {"rows_out": 1}

        return run

    monkeypatch.setattr(stages, "get_stage", fake)
    monkeypatch.setattr(pipeline, "_finish_tracking", lambda config, status: log.append(f"tracking:{status}"))
    monkeypatch.setattr(pipeline, "preflight_problems", lambda config, steps: [])  # the fakes read no datasets
    return log


@pytest.fixture()
def cfg(cfg_factory):
    return cfg_factory(run={"targets": {"a": "tiny:gpt2", "b": "tiny:bert"}},
                       tracking={"enabled": True}, train={"arms": ["cda", "context-cda"]})


def names(steps):
    return [s.name for s in steps]


def test_plan_order_and_fan_out(cfg):
    steps = pipeline.plan(cfg)
    assert names(steps)[:6] == ["ingest", "cda", "validate-cda", "augment-part[part-0]", "augment",
                                "validate-augment"]
    assert names(steps)[6:9] == ["sample-part[part-0]", "sample", "entropy[a]"]  # the samples: once, for a and b
    assert "entropy[b]" in names(steps) and "finetune[b/context-cda/seed-13]" in names(steps)
    assert names(steps)[-1] == "report"
    ft = next(s for s in steps if s.name == "finetune[a/context-cda/seed-13]")
    rd = cfg.run_dir()
    # every arm of a target gets the same inputs (the validated tables and the target's filtered corpora)
    # each arm reads its own corpus (context-cda: the target's filtered corpora) and its token budget
    assert ft.inputs == {"filtered": rd / "filter/a", "budget": rd / "budget/a/context-cda/budget.json"}
    assert next(s for s in steps if s.name == "finetune[a/cda/seed-13]").inputs == {
        "cda": rd / "validate/cda/valid.parquet", "budget": rd / "budget/a/cda/budget.json"}
    assert next(s for s in steps if s.name == "budget[a/cda]").inputs == {  # the budget group's corpora
        "cda": rd / "validate/cda/valid.parquet", "filtered": rd / "filter/a"}
    assert ft.out_dir == rd / "finetune/a/context-cda/seed-13"
    assert next(s for s in steps if s.name == "filter[a]").inputs == {"scores": rd / "validate/entropy/a/valid.parquet"}
    assert next(s for s in steps if s.name == "sample-part[part-0]").inputs == {
        "augmented": rd / "validate/augment/valid.parquet"}
    assert next(s for s in steps if s.name == "sample").inputs == {  # the merge reads the parts
        "parts": rd / "sample-parts", "augmented": rd / "validate/augment/valid.parquet"}
    assert next(s for s in steps if s.name == "entropy[a]").inputs == {"samples": rd / "sample"}
    assert next(s for s in steps if s.name == "entropy[b]").inputs == {"samples": rd / "sample"}  # one folder
    assert names(pipeline.plan(cfg, ["b"])).count("entropy[b]") == 1
    assert "entropy[a]" not in names(pipeline.plan(cfg, ["b"]))
    with pytest.raises(ConfigError, match="unknown target"):
        pipeline.plan(cfg, ["zzz"])


def test_second_run_skips_everything_up_to_date(cfg, calls):
    first = pipeline.run_pipeline(cfg)
    assert all(r.status == "ran" for r in first)
    calls.clear()
    second = pipeline.run_pipeline(cfg)
    ran = [r.step.name for r in second if r.status == "ran"]
    assert ran == []


def test_changing_a_param_reruns_only_downstream(cfg, calls, cfg_factory):
    pipeline.run_pipeline(cfg)
    cfg2 = cfg.model_copy(deep=True)
    cfg2.filter.k = [30.0, 20.0]
    res = {r.step.name: r.status for r in pipeline.run_pipeline(cfg2)}
    assert res["ingest"] == res["augment"] == res["sample"] == res["entropy[a]"] == "skipped"
    assert res["filter[a]"] == res["filter[b]"] == "ran"
    # the filter folders changed: the arm that trains on them reruns, and so do the budget steps that count them;
    # the cda arm's budget came out the same, and its corpus is not in those folders: not retrained
    assert res["finetune[a/context-cda/seed-13]"] == res["budget[a/cda]"] == "ran"
    assert res["finetune[a/cda/seed-13]"] == "skipped"


def test_killed_step_is_rerun(cfg, calls):
    pipeline.run_pipeline(cfg)
    (cfg.run_dir() / "augment" / steps.MARKER).unlink()  # as if killed before the marker was written
    res = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}
    assert res["augment"] == "ran" and res["cda"] == "skipped"


def test_only_and_until(cfg, calls):
    res = pipeline.run_pipeline(cfg, until="cda")
    assert names(r.step for r in res) == ["ingest", "cda", "validate-cda"]  # with the validation of its output
    res = pipeline.run_pipeline(cfg, until="augment")
    assert names(r.step for r in res) == ["ingest", "cda", "validate-cda", "augment-part[part-0]", "augment",
                                          "validate-augment"]
    res = pipeline.run_pipeline(cfg, only=["validate"])
    assert names(r.step for r in res) == ["validate-cda", "validate-augment", "validate-entropy[a]",
                                          "validate-entropy[b]"]
    res = pipeline.run_pipeline(cfg, only=["cda"], force=True)
    assert names(r.step for r in res) == ["cda"] and res[0].status == "ran"
    with pytest.raises(ConfigError, match="unknown stage"):
        pipeline.run_pipeline(cfg, until="nope")


def test_vanilla_metrics_are_reused_across_arms(cfg, calls, monkeypatch):
    pipeline.run_pipeline(cfg, until="finetune")
    ft = [c for c in calls if c.startswith("finetune")]
    assert len(ft) == 4
    # the vanilla model (epoch 0) is evaluated once per target; later arms get its metrics
    assert ["vanilla_metrics" in json.loads(c.split(":", 1)[1]) for c in ft] == [False, True, False, True]


def test_failure_stops_the_run_and_is_reported(cfg, calls, monkeypatch):
    orig = stages.get_stage

    def failing(stage):
        if stage == "augment-part":
            def boom(*a, **k):
                raise RuntimeError("generator crashed")
            return boom
        return orig(stage)

    monkeypatch.setattr(stages, "get_stage", failing)
    events = []
    with pytest.raises(RuntimeError, match="generator crashed"):
        pipeline.run_pipeline(cfg, on_event=lambda kind, step, res: events.append((kind, step.name)))
    assert ("failed", "augment-part[part-0]") in events and not any(n.startswith(("sample", "entropy"))
                                                                     for _, n in events)


def test_seeds_fan_out_the_arms(cfg_factory, calls):
    cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda", "context-cda"], "seeds": [1, 2]},
                      tracking={"enabled": False})
    steps = [s.name for s in pipeline.plan(cfg)]
    assert [s for s in steps if s.startswith("finetune")] == [
        "finetune[a/cda/seed-1]", "finetune[a/cda/seed-2]", "finetune[a/context-cda/seed-1]",
        "finetune[a/context-cda/seed-2]"]
    assert "evaluate[a/context-cda/seed-2]" in steps and "evaluate-vanilla[a]" in steps
    assert not any(s.startswith("register") for s in steps)  # tracking off: the table's `when`


def test_generation_parts_fan_out_augment_and_sample(cfg_factory, calls):
    cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, pipeline={"generation_shards": 3},
                      tracking={"enabled": False})
    steps = [s.name for s in pipeline.plan(cfg)]
    assert [s for s in steps if s.startswith("augment")] == [
        "augment-part[part-0]", "augment-part[part-1]", "augment-part[part-2]", "augment"]
    assert [s for s in steps if s.startswith(("sample", "entropy"))] == [
        "sample-part[part-0]", "sample-part[part-1]", "sample-part[part-2]", "sample", "entropy[a]"]
    part = next(s for s in pipeline.plan(cfg) if s.name == "augment-part[part-2]")
    assert part.options == {"shard": 2} and part.out_dir == cfg.run_dir() / "augment-parts" / "part-2"
