"""The lexicon-only gender-neutral rewrite (cda.mode: neutral, the cda-neutral arm): pronouns by role, verb
agreement, neutral nouns with their number and article, and the words it cannot rewrite."""

from __future__ import annotations

import pandas as pd
import pytest

from context_cda.cda.lexicon import load_lexicon
from context_cda.cda.neutral import NeutralRewriter
from context_cda.config import LexiconConfig, load_config

CASES = {
    "He is a doctor.": "They are a doctor.",
    "She was the chairwoman of the board.": "They were the chairperson of the board.",
    "He walks to work with his brother.": "They walk to work with their sibling.",
    "She also carries the bags.": "They also carry the bags.",
    "She watches TV and he reads.": "They watch TV and they read.",
    "He has two sons.": "They have two children.",
    "She doesn't know.": "They don't know.",
    "He's been there, and she's tired.": "They've been there, and they're tired.",
    "She'll call her mother.": "They'll call their parent.",
    "The book is hers, not his.": "The book is theirs, not theirs.",
    "Her mother told him a story.": "Their parent told them a story.",
    "He himself doesn't care.": "They themselves don't care.",
    "An uncle and a waitress came.": "A relative and a server came.",
    "The man's hat was red.": "The person's hat was red.",
    "Mr. Smith met Mrs. Jones.": "Mx. Smith met Mx. Jones.",
    "She saw a man.": "They saw a person.",
    "The actress thanked her fans.": "The actor thanked their fans.",
    "He said he was happy.": "They said they were happy.",
}


@pytest.fixture(scope="module")
def rewriter():
    return NeutralRewriter(load_lexicon(LexiconConfig()))


@pytest.mark.parametrize("src", list(CASES))
def test_rewrites(rewriter, src):
    res = rewriter.rewrite(src)
    assert res.text == CASES[src] and not res.left


def test_words_without_a_neutral_form_are_listed(rewriter):
    res = rewriter.rewrite("The masculine style suited him.")
    assert res.text == "The masculine style suited them." and res.left == ["masculine"]


def test_cda_neutral_mode_and_its_validation(tmp_path):
    from context_cda.cda.stage import run_cda
    from context_cda.validation import run_validate

    cfg = load_config(overrides=[f"run.run_dir={tmp_path}", "cda.mode=neutral"])
    src = tmp_path / "s.parquet"
    pd.DataFrame({"id": ["a", "b", "c"], "text": ["He thanked his sister for the help.", "The weather was fine.",
                                                  "The masculine hero thanked her."]}).to_parquet(src)
    summary = run_cda(cfg, {"sentences": src}, tmp_path / "cda")
    df = pd.read_parquet(tmp_path / "cda" / "counterfactuals.parquet")
    assert summary["rows_out"] == 2 and summary["rows_rejected"] == 1 and summary["left_alone"] == {
        "no-neutral-form": 1}
    assert df.counterfactual.tolist() == ["They thanked their sibling for the help.", "The masculine hero thanked them."]
    res = run_validate(cfg, {"cda": tmp_path / "cda" / "counterfactuals.parquet"}, tmp_path / "v", boundary="cda")
    assert res["quarantined_by_reason"] == {"gendered-word-left": 1}
    from context_cda.cda import training_rows

    assert training_rows(df, "neutral")["text"].tolist() == df.counterfactual.tolist()
