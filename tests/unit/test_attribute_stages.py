"""The attribute axis through the stages: ingest and cda for race/religion, the neutral step and its boundary,
the arms' corpora, and the stage table's neutral rows (switched on by the context-neutral arm)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from cda_table import openai_config, write_cda_table  # noqa: E402

from context_cda import stages as T  # noqa: E402
from context_cda.config import load_config  # noqa: E402
from context_cda.generation import GenerationResult  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Rewriter:
    """Answers the neutral prompt: pronouns and a few nouns made neutral, or (marker [KEEP]) nothing changed;
    the rephrase prompt: "In the quiet town, <sentence>" (marker [ADD] adds an Asian neighbour)."""

    backend = "fake"
    model_id = "rewriter"

    def __init__(self):
        self.systems = []

    def generate(self, prompts, params):
        out = []
        for conv in prompts:
            self.systems.append(conv[0]["content"])
            s = conv[-1]["content"].rsplit("Sentence:", 1)[-1].strip()
            if "gender-neutral" in conv[0]["content"] and "[KEEP]" not in s:
                for a, b in (("He ", "They "), ("Her ", "Their "), ("She ", "They "), (" his ", " their "), (" her ", " their "),
                             ("father", "parent"), ("mother", "parent"), ("sister", "sibling"),
                             ("brother", "sibling"), ("wife", "spouse"), ("husband", "spouse"),
                             ("The king", "The monarch"), ("The queen", "The monarch"), (" he ", " they "),
                             (" she ", " they "), ("actress", "actor"), ("uncle", "relative"), ("aunt", "relative")):
                    s = s.replace(a, b)
                text = s
            elif "[ADD]" in s:
                text = f"In the quiet town, {s[:-1]} beside their Asian neighbours."
            else:
                text = f"In the quiet town, {s}" if "gender-neutral" not in conv[0]["content"] else s
            out.append(GenerationResult(texts=[text] * params.n, prompt_tokens=10, completion_tokens=8))
        return out

    def close(self):
        pass


def test_the_neutral_step_rewrites_reviews_and_feeds_the_context_neutral_arm(tmp_path):
    from context_cda.augment import run_neutral
    from context_cda.train.corpus import arm_corpus, load_arm_rows
    from context_cda.validation import run_validate

    src = write_cda_table(tmp_path / "cda.parquet", 5)
    df = pd.read_parquet(src)
    df.loc[4, "original"] = "My uncle and his wife moved to Paris [KEEP]."
    df.to_parquet(src)
    cfg = openai_config("http://127.0.0.1:9/v1", tmp_path, max_retries=0)
    gen = Rewriter()
    s = run_neutral(cfg, {"counterfactuals": src}, tmp_path / "neutral", generator=gen)
    assert s["task"] == "neutral" and s["accepted"] == 4 and s["rejected"] == 1
    assert all("gender-neutral" in x for x in gen.systems)
    aug = pd.read_parquet(tmp_path / "neutral" / "augmented.parquet")
    assert aug["augmented"].iloc[0] == "They thanked their parent for the advice."
    assert (aug["prompt_version"] == "n1").all()
    rej = pd.read_parquet(tmp_path / "neutral" / "rejected.parquet")
    assert "gendered-word-left: uncle, his, wife" in rej["reason"].iloc[0]
    v = run_validate(cfg, {"neutral": tmp_path / "neutral" / "augmented.parquet"}, tmp_path / "v", boundary="neutral")
    assert v["rows_valid"] == 4 and v["rows_quarantined"] == 0
    kind, path = arm_corpus({"neutral": tmp_path / "v" / "valid.parquet", "cda": src}, "context-neutral", 30)
    rows = load_arm_rows(kind, path)
    assert len(rows) == 4 and "They thanked their parent" in rows["text"].iloc[0]
    kind, path = arm_corpus({"cda": src, "neutral": tmp_path / "v"}, "cda-neutral", 30)
    assert kind == "cda-neutral"
    lexical = load_arm_rows(kind, path)
    assert lexical["text"].iloc[0] == "They thanked their parent for the advice." and (lexical["side"] == "neutral").all()


def test_race_augment_uses_the_race_prompt_and_the_group_review(tmp_path):
    from context_cda.augment import run_augment

    rows = [{"id": f"c{i}", "source_id": f"s{i}", "original": o, "counterfactual": c, "swapped_terms": t, "n_swaps": 1,
             "direction": "black->white", "applied": True}
            for i, (o, c, t) in enumerate([
                ("Black voters waited in line in Ohio.", "White voters waited in line in Ohio.", ["Black->White"]),
                ("Black voters met in Ohio [ADD].", "White voters met in Ohio [ADD].", ["Black->White"])])]
    src = tmp_path / "cda.parquet"
    pd.DataFrame(rows).to_parquet(src)
    cfg = openai_config("http://127.0.0.1:9/v1", tmp_path, max_retries=0)
    cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"attribute": "race"})})
    gen = Rewriter()
    s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "aug", generator=gen)
    assert "race or ethnicity" in gen.systems[0] and s["attribute"] == "race"
    rej = pd.read_parquet(tmp_path / "aug" / "rejected.parquet")
    assert s["accepted"] == 1 and rej["reason"].iloc[0].startswith("group-added: asian")


def test_stage_table_runs_the_neutral_step_only_for_its_arm():
    cfg = load_config(params_file=ROOT / "params.yaml")
    assert not T.get("neutral").enabled(cfg) and not T.get("validate-neutral").enabled(cfg)
    assert "neutral" not in T.step_inputs(cfg, "finetune", target="smollm2-135m", arm="cda", seed=13)
    on = load_config(overrides=["train.arms=[cda, context-neutral]"], params_file=ROOT / "params.yaml")
    assert T.get("neutral").enabled(on) and T.get("validate-neutral").enabled(on)
    inputs = T.step_inputs(on, "finetune", target="smollm2-135m", arm="context-neutral", seed=13)
    assert inputs["neutral"].parts[-3:] == ("validate", "neutral", "valid.parquet")
    from context_cda.pipeline import plan

    steps = [s.stage for s in plan(on)]
    assert steps.index("neutral") < steps.index("validate-neutral") < steps.index("finetune")


@pytest.mark.parametrize("attribute,text,kept", [
    ("race", "Black voters waited in line. She drank white wine. The White House spoke.", 1),
    ("religion", "The mosque opened in 1990. St Mary's Church is old. He met a rabbi.", 2),
])
def test_ingest_keeps_the_attribute_sentences(tmp_path, attribute, text, kept):
    from context_cda.ingest.corpus import run_ingest

    corpus = tmp_path / "c.txt"
    corpus.write_text(text.replace(". ", ".\n") + "\n")
    cfg = load_config(overrides=[f"run.attribute={attribute}", "ingest.min_words=3", f"run.run_dir={tmp_path}"],
                      params_file=ROOT / "params.yaml")
    s = run_ingest(cfg, {"corpus": corpus}, tmp_path / "ingest")
    assert s["rows_out"] == kept and s["rejected_by_reason"] == {f"no-{attribute}-term": 3 - kept}


def test_cda_counts_what_it_left_alone(tmp_path):
    from context_cda.cda.stage import run_cda

    cfg = load_config(overrides=["run.attribute=race", f"run.run_dir={tmp_path}"], params_file=ROOT / "params.yaml")
    src = tmp_path / "s.parquet"
    pd.DataFrame({"id": ["a", "b"], "text": ["Black voters drank white wine by the Black Sea.",
                                             "She poured white wine."]}).to_parquet(src)
    s = run_cda(cfg, {"sentences": src}, tmp_path / "cda")
    df = pd.read_parquet(tmp_path / "cda" / "counterfactuals.parquet")
    assert s["rows_out"] == 3 and s["left_alone"] == {"not-a-person": 2, "name": 1}
    assert list(df["skipped_terms"].iloc[0]) == ["white: not-a-person", "Black: name"]
    assert df["counterfactual"].tolist()[0] == "White voters drank white wine by the Black Sea."
    rej = pd.read_parquet(tmp_path / "cda" / "rejected.parquet")
    assert rej["reason"].iloc[0] == "no-swappable-term (left alone: white: not-a-person)"


def test_ingest_keeps_a_group_named_only_as_a_people_noun_and_cda_swaps_it(tmp_path):
    """``Hispanics`` is the only race word of the first sentence: ingest keeps it, cda writes one counterfactual per
    other group. A sentence bound to one group is rejected with what was left alone and why, and counted."""
    from context_cda.cda.stage import run_cda
    from context_cda.ingest.corpus import run_ingest

    corpus = tmp_path / "c.txt"
    corpus.write_text("Hispanics are the largest minority in the state.\nAsian elephants live in the forest.\n")
    cfg = load_config(overrides=["run.attribute=race", "ingest.min_words=3", f"run.run_dir={tmp_path}"],
                      params_file=ROOT / "params.yaml")
    s = run_ingest(cfg, {"corpus": corpus}, tmp_path / "ingest")
    kept = pd.read_parquet(tmp_path / "ingest" / "sentences.parquet")
    assert kept["text"].tolist() == ["Hispanics are the largest minority in the state."]
    assert list(kept["attribute_terms"].iloc[0]) == ["hispanics"]
    rej = pd.read_parquet(tmp_path / "ingest" / "rejected.parquet")
    assert rej["reason"].tolist() == ["no-race-term: left alone: Asian (not-a-person)"]
    assert s["rejected_by_reason"] == {"no-race-term": 1} and s["left_alone"] == {"not-a-person": 1}
    run_cda(cfg, {"sentences": tmp_path / "ingest" / "sentences.parquet"}, tmp_path / "cda")
    cf = pd.read_parquet(tmp_path / "cda" / "counterfactuals.parquet")
    assert cf["counterfactual"].tolist() == ["Blacks are the largest minority in the state.",
                                             "Whites are the largest minority in the state.",
                                             "Asians are the largest minority in the state."]


def test_ingest_counts_a_religion_sentence_left_alone_as_a_unit(tmp_path):
    from context_cda.ingest.corpus import run_ingest

    corpus = tmp_path / "c.txt"
    corpus.write_text("The Catholic church opened a school.\nThe mosque opened in 1990.\n"
                      "Christians celebrate Easter every spring.\n")
    cfg = load_config(overrides=["run.attribute=religion", "ingest.min_words=3", f"run.run_dir={tmp_path}"],
                      params_file=ROOT / "params.yaml")
    s = run_ingest(cfg, {"corpus": corpus}, tmp_path / "ingest")
    rej = pd.read_parquet(tmp_path / "ingest" / "rejected.parquet")
    assert rej["reason"].tolist() == ["no-religion-term: left alone: church (bound), Catholic (no-counterpart)"]
    # an observance with its group is no longer left alone (issue 47): Easter swaps with Christians
    assert s["rows_out"] == 2 and s["left_alone"] == {"bound": 1, "no-counterpart": 1}
