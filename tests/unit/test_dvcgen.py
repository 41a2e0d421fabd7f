"""dvc.yaml from the stage table: what DVC tracks, so a `dvc pull` elsewhere has what register and report read."""

import pytest

from context_cda import layout as L
from context_cda.stages import TABLE, get
from context_cda.tools.dvcgen import dvc_name, stage_entry
from context_cda.tracking.evidence import BENCHMARKS


def _paths(entry):
    """Every path a DVC stage writes (outs, metrics, plots), as strings."""
    out = []
    for kind in ("outs", "metrics", "plots"):
        for o in entry.get(kind, []):
            out.append(o if isinstance(o, str) else next(iter(o)))
    return out


@pytest.fixture()
def cfg(cfg_factory):
    return cfg_factory(evaluate={"after_training": True, "benchmarks": ["stereoset", "crows", "next-token"]},
                       tracking={"enabled": True})


def test_the_paired_evidence_is_tracked(cfg):
    """register and report read <benchmark>/predictions.parquet of the evaluate steps (and of the per-epoch
    predictions of the finetune steps as a fallback), the report also <benchmark>/aggregate.json."""
    for step in ("evaluate", "evaluate-vanilla"):
        paths = _paths(stage_entry(get(step), cfg))
        for b in ["next-token", *BENCHMARKS]:  # the benchmark's folder, or the file itself
            assert any(p.endswith(f"/{b}") or p.endswith(f"/{b}/{L.PREDICTIONS_FILE}") for p in paths), (step, b)
        assert any(p.endswith("/" + L.AGGREGATE_FILE) for p in paths)  # still a metric
    ft = _paths(stage_entry(get("finetune"), cfg))
    assert any(p.endswith("/" + L.EPOCH_PREDICTIONS_DIR) for p in ft), ft


def test_no_out_lies_inside_another(cfg):
    """DVC refuses overlapping outputs (a path inside another output's folder), within a stage and across."""
    everything = [(dvc_name(r.step), p) for r in TABLE if r.enabled(cfg) for p in _paths(stage_entry(r, cfg))]
    for i, (a, p) in enumerate(everything):
        for b, q in everything[i + 1:]:
            assert p != q and not q.startswith(p + "/") and not p.startswith(q + "/"), (a, p, b, q)


def test_a_benchmark_list_expands_to_one_out_each(cfg_factory):
    cfg = cfg_factory(evaluate={"after_training": True, "benchmarks": ["stereoset", "stereoset", "glue"]})
    outs = stage_entry(get("evaluate-vanilla"), cfg)["outs"]
    assert [o.rsplit("/", 1)[-1] for o in outs] == ["stereoset", "glue"]
    none = cfg_factory(evaluate={"after_training": True, "benchmarks": []})
    assert "outs" not in stage_entry(get("evaluate-vanilla"), none)  # never the step folder over its own metric
