"""The run's attribute at the checks after CDA: the great-expectations suites of the cda and augment boundaries,
and the entropy sampler's prompt, review and cache key, for race and religion (gender's are pinned elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from context_cda.config import load_config
from context_cda.generation import GenerationResult

ROOT = Path(__file__).resolve().parents[2]


def cfg_for(attribute: str, tmp_path: Path, *extra: str):
    return load_config(overrides=[f"run.attribute={attribute}", f"run.run_dir={tmp_path / 'run'}", *extra],
                       params_file=ROOT / "params.yaml")


# ------------------------------------------------------------------------------------------------ cda boundary

CDA_ROWS = {
    # attribute: (original, counterfactual, expected reason ('' = valid))
    "race": [
        ("Black voters waited in line.", "White voters waited in line.", ""),
        ("Black voters drank white wine.", "White voters drank white wine.", ""),  # the wine stays: no leftover
        ("Black and Asian voters met.", "White and Asian voters met.", "original-race-term-left"),
        ("The Hispanic family moved.", "The Hispanic family moved.", "unchanged"),
        ("Asian students spoke.", "Hispanic students spoke.", ""),
    ],
    "religion": [
        ("The Muslim family prayed at the mosque.", "The Jewish family prayed at the synagogue.", ""),
        ("A Christian and a Jew met.", "A Muslim and a Jew met.", "original-religion-term-left"),
        ("The church bells rang.", "The church bells rang.", "unchanged"),
        ("Jewish leaders met in Ohio.", "Christian leaders met in Ohio.", ""),
    ],
}


@pytest.mark.parametrize("attribute", sorted(CDA_ROWS))
def test_the_cda_suite_judges_the_run_attribute(attribute, tmp_path):
    pytest.importorskip("great_expectations")
    from context_cda.validation import cda as suite
    from context_cda.validation import run_validate

    rows = CDA_ROWS[attribute]
    df = pd.DataFrame([{"id": f"r{i}", "original": o, "counterfactual": c, "n_swaps": 1}
                       for i, (o, c, _) in enumerate(rows)])
    src = tmp_path / "counterfactuals.parquet"
    df.to_parquet(src)
    cfg = cfg_for(attribute, tmp_path)
    names = {c.reason for c in suite.checks(cfg)}
    assert f"original-{attribute}-term-left" in names and "original-gender-term-left" not in names
    s = run_validate(cfg, {"cda": src}, tmp_path / "v", boundary="cda")
    q = pd.read_parquet(tmp_path / "v" / "quarantine.parquet").set_index("id")
    want = {f"r{i}": why for i, (_, _, why) in enumerate(rows) if why}
    assert set(q.index) == set(want) and s["rows_valid"] == len(rows) - len(want)
    for rid, why in want.items():
        assert why in q.loc[rid, "reason"], (rid, q.loc[rid, "reason"])


def test_the_cda_suite_passes_what_the_race_cda_wrote(tmp_path):
    """One source of truth: every counterfactual the race CDA writes (all permutations) passes its boundary."""
    pytest.importorskip("great_expectations")
    from context_cda.cda.stage import run_cda
    from context_cda.validation import run_validate

    cfg = cfg_for("race", tmp_path)
    src = tmp_path / "s.parquet"
    pd.DataFrame({"id": ["a", "b", "c"], "text": [
        "Black and white residents met the Asian mayor by the Black Sea.",
        "Hispanic workers drank white wine after the shift.",
        "Her grandmother was Black and her grandfather was Hispanic."]}).to_parquet(src)
    s = run_cda(cfg, {"sentences": src}, tmp_path / "cda")
    assert s["rows_out"] == 9  # one counterfactual per other group (4 groups)
    v = run_validate(cfg, {"cda": tmp_path / "cda" / "counterfactuals.parquet"}, tmp_path / "v", boundary="cda")
    assert v["rows_valid"] == 9 and v["rows_quarantined"] == 0


# ------------------------------------------------------------------------------------------------ augment boundary

AUG_ROWS = [
    # id, original, counterfactual, swap, augmented, expected reason ('' = valid)
    ("a1", "Black voters waited in line in Ohio.", "White voters waited in line in Ohio.", "Black->White",
     "On a cold morning, white voters waited in line in Ohio.", ""),
    ("a2", "Black voters waited in line in Ohio.", "White voters waited in line in Ohio.", "Black->White",
     "On a cold morning, voters waited in line in Ohio.", "group-missing"),
    ("a3", "Black voters waited in line in Ohio.", "White voters waited in line in Ohio.", "Black->White",
     "On a cold morning, Black voters waited in line in Ohio.", "group-contradiction"),
    ("a4", "Black voters waited in line in Ohio.", "White voters waited in line in Ohio.", "Black->White",
     "White voters waited in line in Ohio beside their Hispanic neighbours.", "group-added"),
    ("a5", "The Hispanic family moved to Denver.", "The Asian family moved to Denver.", "Hispanic->Asian",
     "The Asian family moved to Denver and painted their house white.", ""),  # a colour is no group word
]


def test_the_augment_suite_quarantines_by_the_group_review(tmp_path):
    pytest.importorskip("great_expectations")
    from context_cda.validation import run_validate

    df = pd.DataFrame([{"id": i, "cda_id": f"c{i}", "original": o, "counterfactual": c, "swapped_terms": [t],
                        "augmented": a, "attempts": 1, "gen_model": "m", "prompt_version": "v2", "raw_output": a}
                       for i, o, c, t, a, _ in AUG_ROWS])
    src = tmp_path / "augmented.parquet"
    df.to_parquet(src)
    s = run_validate(cfg_for("race", tmp_path), {"augment": src}, tmp_path / "v", boundary="augment")
    q = pd.read_parquet(tmp_path / "v" / "quarantine.parquet").set_index("id")
    want = {i: why for i, *_, why in AUG_ROWS if why}
    assert set(q.index) == set(want) and s["rows_valid"] == len(AUG_ROWS) - len(want)
    for rid, why in want.items():
        assert why in q.loc[rid, "reason"], (rid, q.loc[rid, "reason"])
    # the same table under a gender run: the gender review has no group rules (nothing gendered was swapped)
    g = run_validate(cfg_for("gender", tmp_path), {"augment": src}, tmp_path / "g", boundary="augment")
    assert g["rows_valid"] == len(AUG_ROWS)


# ------------------------------------------------------------------------------------------------ the sampler


class Recording:
    """Every sample drops the group word ("Voters waited ..."): the sampler keeps it, since such changes are
    what semantic entropy measures; records the system prompts."""

    backend = "fake"
    model_id = "fake"

    def __init__(self):
        self.systems: list[str] = []

    def generate(self, prompts, params):
        self.systems += [c[0]["content"] for c in prompts]
        return [GenerationResult(texts=[f"Voters waited in line, {w} in the cold." for w in ("one by one", "calmly",
                                                                                     "patiently")[:params.n]])
                for _ in prompts]

    def close(self):
        pass


class SameJudge:
    name = "fake"
    symmetric = False

    def judge(self, pairs):
        return ["entailment"] * len(pairs)


@pytest.mark.parametrize("attribute,phrase", [("race", "race or ethnicity"), ("religion", "religion"),
                                              ("gender", "the gender of any person")])
def test_the_sample_step_asks_by_the_run_attribute_and_keeps_attribute_changes(attribute, phrase, tmp_path):
    from context_cda.entropy import run_sample

    cfg = cfg_for(attribute, tmp_path, "entropy.n_samples=3", "entropy.min_samples=2")
    src = tmp_path / "augmented.parquet"
    pd.DataFrame({"id": ["x1", "x2"], "cda_id": ["c1", "c2"],
                  "augmented": ["White voters waited in line.", "The Muslim family moved to Ohio."]}).to_parquet(src)
    gen = Recording()
    s = run_sample(cfg, {"augmented": src}, tmp_path / "sample", generator=gen, judge=SameJudge())
    assert len(gen.systems) == 2 and all(phrase in t for t in gen.systems)
    assert s["rejected"] == 0 and s["sampled"] == 2, s
    samples = pd.read_parquet(tmp_path / "sample" / "samples.parquet")
    assert len(samples) == 6 and samples["sample"].str.startswith("Voters waited").all()


def test_the_sample_cache_is_keyed_by_the_attribute(tmp_path):
    """Samples drawn under the race prompt are never reused by a religion or gender run; a gender run's key is
    the one it had before the attribute axis (no attribute in its review settings)."""
    from context_cda.entropy.samples import sample_fingerprint, sample_settings

    keys = {a: sample_fingerprint(cfg_for(a, tmp_path)) for a in ("gender", "race", "religion")}
    assert len(set(keys.values())) == 3
    assert "attribute" not in sample_settings(cfg_for("gender", tmp_path)).to_dict()
    assert sample_settings(cfg_for("race", tmp_path)).to_dict()["attribute"] == "race"
