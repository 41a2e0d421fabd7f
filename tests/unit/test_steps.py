"""The step envelope (context_cda.steps): what running a step means, the same for every door: the manifest (config =
the row's key sections, one typed Counts record), the item-error policy, the up-to-date marker, and the check that
every table a step reads came from its own run's producer step."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tests.unit.test_pipeline_runner import calls, cfg  # noqa: F401  (fixtures: stand-in stages that write files)

from context_cda import pipeline, stages, steps
from context_cda.errors import InputError, ItemErrors
from context_cda.io import write_table
from context_cda.steps import Counts, recorder


def _body(counts: Counts, file: str = "out.txt"):
    def run(config, inputs, out_dir, **options):
        (Path(out_dir) / file).write_text("x")
        recorder(out_dir).finish(counts, {"out": Path(out_dir) / file}, {"n": counts.out})
        return {"n": counts.out}

    return run


def test_the_manifest_holds_the_key_sections_and_the_counts_and_the_marker_makes_the_step_fresh(cfg_factory):
    conf = cfg_factory()
    step = steps.make(conf, "filter", target=next(iter(conf.run.targets)))
    _table(step.inputs["scores"], ["a"])
    ran = steps.run(step, conf, check=False, body=_body(Counts(items_in=10, out=7, rejected=3)))
    manifest = json.loads((step.out_dir / "manifest.json").read_text())
    assert manifest["config"] == stages.key_sections(conf, step.row, step.keys) == {"filter": conf.filter.model_dump(
        mode="json")}
    assert manifest["counts"] == {"items_in": 10, "out": 7, "rejected": 3, "errors": 0, "error_reasons": {}}
    assert manifest["keys"] == step.keys and manifest["summary"] == {"n": 7} and ran.counts.out == 7
    assert (step.out_dir / steps.MARKER).is_file() and steps.is_fresh(step, conf)
    (step.out_dir / "out.txt").unlink()  # an output gone: not fresh
    assert not steps.is_fresh(step, conf)


def test_error_items_exit_75_with_the_manifest_written_and_no_marker(cfg_factory, caplog):
    conf = cfg_factory()
    step = steps.make(conf, "augment")
    body = _body(Counts(items_in=4, out=3, errors=1, error_reasons={"HTTP 500": 1}))
    with pytest.raises(ItemErrors, match=r"augment: 1 of 4 items failed for a transient reason \(HTTP 500 x1\)") as e:
        steps.run(step, conf, check=False, body=body)
    assert e.value.exit_code == 75 and str(step.out_dir / "errors.parquet") in str(e.value)
    assert json.loads((step.out_dir / "manifest.json").read_text())["counts"]["errors"] == 1
    assert not (step.out_dir / steps.MARKER).exists()
    conf.run.allow_errors = True  # --allow-errors: a warning, the run goes on; the step is still not up to date
    with caplog.at_level("WARNING", logger="context_cda"):
        assert steps.run(step, conf, check=False, body=body).counts.errors == 1
    assert "WARNING augment: 1 of 4" in caplog.text and not steps.is_fresh(step, conf)


def test_a_stage_command_leaves_the_marker_the_runner_reads_and_invalidates_it_when_it_reruns(cfg, calls,  # noqa: F811
                                                                                          tmp_path, monkeypatch):
    """Every door leaves the same marker: `ccda cda` by hand, then `ccda run` skips it; `ccda cda` with other
    settings rewrites the folder and its marker, so the runner reruns what follows it."""
    from context_cda.cli import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(cfg.to_dict()))
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "--params", str(params)]) == 0 and main(["cda", "--params", str(params)]) == 0
    assert [c.split(":")[0] for c in calls] == ["ingest", "cda"]
    assert main(["cda", "--params", str(params)]) == 0 and len(calls) == 2  # up to date: skipped
    res = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}
    assert res["ingest"] == res["cda"] == "skipped" and res["validate-cda"] == "ran"
    before = len(calls)
    assert main(["cda", "--params", str(params), "--mode", "one-sided"]) == 0  # the folder now holds another cda
    assert len(calls) == before + 1
    res = {r.step.name: r.status for r in pipeline.run_pipeline(cfg)}  # done again with the run's settings
    assert res["ingest"] == "skipped" and res["cda"] == "ran"


# ------------------------------------------------------------------------------------------------ provenance


def _table(path: Path, ids: list[str], **cols) -> Path:
    return write_table(pd.DataFrame({"id": ids, **cols}), path)


def _ran(conf, name: str, table: str, ids: list[str], **keys):
    """Step ``name`` as if it had run: its table (``ids``), its manifest and marker, through the envelope."""
    step = steps.make(conf, name, **keys)

    def body(config, inputs, out_dir, **options):
        out = _table(Path(out_dir) / table, ids, text=[f"t {i}" for i in ids], source_id=ids, cda_id=ids,
                     augmented=[f"a {i}" for i in ids])
        recorder(out_dir).finish(Counts(items_in=len(ids), out=len(ids)), {"table": out})

    steps.run(step, conf, check=False, body=body)
    return step


def test_a_table_made_with_other_settings_is_refused_naming_the_step_to_rerun(cfg_factory):
    conf = cfg_factory()
    _ran(conf, "ingest", "sentences.parquet", ["s1", "s2"])
    race = conf.model_copy(deep=True)
    race.run.attribute = "race"
    with pytest.raises(InputError, match=r"cda: its input sentences .* was made by ingest with other settings "
                                         r"\(run\.attribute: \"gender\" there, \"race\" here\); rerun `ccda ingest` "):
        steps.check_inputs(steps.make(race, "cda"), race)
    other_corpus = conf.model_copy(deep=True)  # a setting only ingest reads: the next command does not undo it
    other_corpus.ingest.min_words = 9
    steps.check_inputs(steps.make(other_corpus, "cda"), other_corpus)


def test_samples_drawn_with_another_m_are_refused(cfg_factory):
    conf = cfg_factory(entropy={"n_samples": 3})
    _ran(conf, "sample", "samples.parquet", ["a1"])
    five = conf.model_copy(deep=True)
    five.entropy.n_samples = 5
    target = next(iter(conf.run.targets))
    with pytest.raises(InputError, match=r"entropy\[.*\]: its input samples .*\(entropy\.n_samples: 3 there, 5 here\); "
                                         r"rerun `ccda sample --merge`"):
        steps.check_inputs(steps.make(five, "entropy", target=target), five)


def test_another_runs_samples_are_refused(cfg_factory, tmp_path):
    """`ccda entropy --samples OTHER/sample`: drawn from another run's table, or holding ids this run does not
    have."""
    conf = cfg_factory()
    target = next(iter(conf.run.targets))
    _ran(conf, "validate-augment", "valid.parquet", ["a1", "a2"])
    other = conf.model_copy(deep=True)
    other.run.run_dir = str(tmp_path / "other")
    _ran(other, "validate-augment", "valid.parquet", ["b1", "b2"])
    foreign = _ran(other, "sample", "samples.parquet", ["b1", "b2"])
    with pytest.raises(InputError, match=r"was made from another run's augmented .*not from this run's "
                                         r".*validate/augment/valid\.parquet; rerun `ccda sample --merge`"):
        steps.check_inputs(steps.make(conf, "entropy", inputs={"samples": foreign.out_dir}, target=target), conf)
    bare = tmp_path / "bare"  # no manifest (a user's own table): its ids must still be this run's
    _table(bare / "samples.parquet", ["a1", "zz"])
    with pytest.raises(InputError, match=r"holds 1 id\(s\) that are not in .*valid\.parquet, e\.g\. 'zz'"):
        steps.check_inputs(steps.make(conf, "entropy", inputs={"samples": bare}, target=target), conf)
    _table(bare / "samples.parquet", ["a1"])
    steps.check_inputs(steps.make(conf, "entropy", inputs={"samples": bare}, target=target), conf)
