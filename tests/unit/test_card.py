"""The model card of a registered version: written by the register step from the run's evidence, its metadata
valid for huggingface_hub's card classes, every number the run's aggregate.json's, the gate's verdict and reasons as
the gate wrote them (never recomputed), the licences of the base model and of every dataset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from tests.helpers.card_run import card_config, crafted_run

from context_cda import layout as L

pytest.importorskip("huggingface_hub")

NUM = r"-?\d+\.\d+"


def _register(tmp_path: Path, **tracking):
    from context_cda.publish import run_register_target
    from context_cda.stages import step_inputs

    run = tmp_path / "run"
    agg = crafted_run(run, "tg", "tiny:gpt2")
    cfg = card_config(run, {"tg": "tiny:gpt2"}, **({"enabled": False} | tracking))
    out = run / "register" / "tg"
    result = run_register_target(cfg, step_inputs(cfg, "register", target="tg"), out, "tg")
    return cfg, agg, out / "cda", result["arms"]["cda"]


def test_the_card_is_written_from_the_evidence_and_its_metadata_loads(tmp_path):
    from huggingface_hub import ModelCard, parse_eval_result_entries

    cfg, agg, arm_dir, summary = _register(tmp_path)
    card_dir = arm_dir / L.CARD_DIR
    assert summary["card"] == str(card_dir)
    card = ModelCard.load(card_dir / L.CARD_FILE)
    assert card.data.license == "apache-2.0" and card.data.pipeline_tag == "text-generation"
    assert {"context-cda", "debiasing", "gender-bias", "cda"} <= set(card.data.tags)
    metrics = {k: v for k, v in agg["metrics"].items() if "_ci_" not in k}
    results = {r.metric_type: r for r in card.data.eval_results}
    assert set(results) == set(metrics)  # every metric of the evaluation, nothing else
    for name, value in metrics.items():  # the value and its interval, as aggregate.json has them
        text = str(results[name].metric_value)
        numbers = re.findall(NUM, text)
        want = [value] + ([agg["metrics"][f"{name}_ci_low"], agg["metrics"][f"{name}_ci_high"]]
                          if f"{name}_ci_low" in agg["metrics"] else [])
        assert [float(n) for n in numbers if n != "95"] == pytest.approx([round(v, 2) for v in want], abs=1e-9), text
        assert results[name].dataset_type == ("McGill-NLP/stereoset" if name.startswith("stereoset")
                                              else "nyu-mll/crows_pairs")
    files = sorted((card_dir / L.EVAL_RESULTS_DIR).glob("*.yaml"))
    assert [p.name for p in files] == ["crows.yaml", "stereoset.yaml"]
    entries = [e for p in files for e in parse_eval_result_entries(yaml.safe_load(p.read_text()))]
    assert {e.task_id: e.value for e in entries} == metrics  # exactly the evaluation's numbers
    assert all(e.dataset_id in ("McGill-NLP/stereoset", "nyu-mll/crows_pairs") and e.notes for e in entries)


def test_the_card_says_how_it_was_made_and_what_it_cannot_show(tmp_path):
    cfg, agg, arm_dir, _ = _register(tmp_path)
    text = (arm_dir / L.CARD_DIR / L.CARD_FILE).read_text()
    record = json.loads((arm_dir / L.PROMOTION_FILE).read_text())
    assert f"**Verdict: {record['verdict']}**" in text and record["verdict"]  # the gate's own four-state word
    for reason in record["reasons"]:
        assert f"- {reason}" in text
    assert "## Bias, Risks, and Limitations" in text and "120 items" in text
    assert record["detectable_shift"]  # the gate's power statement, quoted per benchmark
    for metric, shift in record["detectable_shift"].items():
        assert f"{metric} {shift:.2f}" in text
    assert "- Token budget: 600 tokens" in text and "training seeds 13" in text
    assert "`tiny:gpt2`" in text and "float32" in text and "apache-2.0" in text
    for name, user in (("stereoset", "stereoset"), ("crows-pairs", "crows")):  # each dataset with its licence
        assert re.search(rf"\| {name} \| [^|]*\b{user}\b[^|]* \| CC BY-SA 4\.0 \|", text), name
    # the paired difference from vanilla: this model's items against vanilla's (52 % vs 75 % stereotyped clusters)
    facts = json.loads((arm_dir / L.CARD_DIR / L.CARD_FACTS_FILE).read_text())
    ss = facts["evaluation"]["benchmarks"]["stereoset"]["metrics"]["stereoset_ss"]
    assert ss["vs_vanilla"]["diff"] == pytest.approx(ss["value"] - ss["vanilla"])
    assert ss["vs_vanilla"]["ci"][1] < 0 and f"{ss['vs_vanilla']['diff']:+.2f} [" in text


def test_the_card_is_rendered_again_from_its_facts(tmp_path):
    """card.json holds every fact: the same card comes out of it (what ccda export does, without the run)."""
    from context_cda.publish.register import write_card_files

    _, _, arm_dir, _ = _register(tmp_path)
    facts = json.loads((arm_dir / L.CARD_DIR / L.CARD_FACTS_FILE).read_text())
    again = tmp_path / "again"
    again.mkdir()
    write_card_files(facts, again)
    for rel in (L.CARD_FILE, f"{L.EVAL_RESULTS_DIR}/stereoset.yaml", f"{L.EVAL_RESULTS_DIR}/crows.yaml"):
        assert (again / rel).read_text() == (arm_dir / L.CARD_DIR / rel).read_text()


def test_the_card_reads_the_gates_verdict_and_power_where_it_states_them():
    """The verdict is the gate's word (a gate that states a verdict state and the smallest detectable shift per
    metric has them quoted; one that states neither has its decision and a note), never the card's own."""
    from context_cda.publish.card import gate_section, limits_section
    from context_cda.publish.facts import decision

    record = {"decision": "refused", "promote": False, "reasons": ["r1"], "aliases": ["candidate"],
              "verdict": "refused: not shown", "note": "underpowered: SS vs vanilla: detectable shift ≥ 4.25",
              "detectable_shift": {"stereoset_ss": 4.25, "crows_cs": 9.5}}
    d = decision(record)
    assert d["verdict"] == "refused: not shown" and d["detectable"] == {"stereoset_ss": 4.25, "crows_cs": 9.5}
    assert gate_section({"decision": d})[2].startswith("**Verdict: refused: not shown** — underpowered: SS vs")
    facts = {"model": {"attribute": "gender"}, "arm": {"corpus": "cda"}, "generation": {}, "decision": d,
             "evaluation": {"benchmarks": {"stereoset": {"items": 255}}, "not_scored": {}, "max_items": None}}
    text = "\n".join(limits_section(facts))
    assert "stereoset: 255 items; smallest shift toward 50 it could show, in points (the gate's power statement): stereoset_ss 4.25" in text
    assert decision({"decision": "promoted", "promote": True})["verdict"] == "promoted"
    facts["decision"] = decision({"decision": "refused"})
    assert "states no smallest detectable shift" in "\n".join(limits_section(facts))


def test_no_card_when_cards_are_off(tmp_path):
    _, _, arm_dir, summary = _register(tmp_path, card={"enabled": False})
    assert "card" not in summary and not (arm_dir / L.CARD_DIR).exists()


def test_each_metric_names_the_dataset_it_was_measured_on():
    from context_cda.publish.card import dataset_of

    facts = {"datasets": [
        {"name": "glue-sst2", "used_by": "glue", "hub_id": "nyu-mll/glue", "description": "SST-2"},
        {"name": "glue-rte", "used_by": "glue", "hub_id": "nyu-mll/glue", "description": "RTE"},
        {"name": "stereoset", "used_by": "stereoset, next-token", "hub_id": "McGill-NLP/stereoset",
         "description": "StereoSet"},
        {"name": "glue-qnli", "used_by": "glue", "hub_id": None, "description": "QNLI"}]}
    assert dataset_of(facts, "glue", "glue_rte_acc") == ("nyu-mll/glue", "RTE")
    assert dataset_of(facts, "glue", "glue_qnli_acc") == ("glue-qnli", "QNLI")  # an explicit file: no Hub id
    assert dataset_of(facts, "glue", "glue_avg_acc") == ("nyu-mll/glue", "SST-2")
    assert dataset_of(facts, "next-token", "next_token_imbalance") == ("McGill-NLP/stereoset", "StereoSet")
    assert dataset_of(facts, "winobias", "winobias_acc") == ("winobias", "winobias")  # nothing recorded
