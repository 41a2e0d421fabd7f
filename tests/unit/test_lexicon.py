import pytest

from context_cda.cda.lexicon import (
    DEFAULT_PAIRS,
    Pair,
    build_lexicon,
    load_aligned_files,
    load_json_pairs,
    load_lexicon,
    load_tsv_pairs,
)
from context_cda.config import LexiconConfig
from context_cda.errors import ConfigError, InputError


def test_default_lexicon_is_one_to_one_and_has_plurals():
    lex = load_lexicon(LexiconConfig())
    assert lex.issues == []
    assert all(lex.f2m[f] == m for m, f in lex.m2f.items())
    assert lex.m2f["man"] == "woman" and lex.m2f["men"] == "women"
    assert len(lex.m2f) == len({f for _, f in DEFAULT_PAIRS})
    assert {"he", "him", "his", "himself"} <= lex.male_words
    assert {"she", "her", "hers", "herself"} <= lex.female_words


def test_conflicts_are_reported_not_overwritten():
    pairs = [Pair("lord", "lady", "a:1"), Pair("gentleman", "lady", "a:2"), Pair("lord", "dame", "a:3")]
    lex = build_lexicon(pairs)
    assert lex.m2f == {"lord": "lady"}
    kinds = sorted((i.kind, i.word) for i in lex.issues)
    assert kinds == [("conflict", "lord"), ("many-to-one", "lady")]
    assert "a:2" in str(lex.issues[0]) or "a:2" in str(lex.issues[1])
    with pytest.raises(ConfigError, match="lady"):
        build_lexicon(pairs, on_conflict="error")


def test_zhao_files_line_aligned(tmp_path, shared_data):
    folder = shared_data / "gn_glove_wordlists"
    pairs = load_aligned_files(folder / "male_word_file.txt", folder / "female_word_file.txt")
    assert len(pairs) == 222
    lex = load_lexicon(LexiconConfig(source="zhao2018", path=str(folder)))
    # the published list is not one-to-one: conflicts are listed, first mapping wins
    assert lex.issues and any(i.word == "lady" for i in lex.issues)
    assert lex.m2f["countryman"] == "countrywoman"


def test_zhao_mismatched_line_counts(tmp_path):
    (tmp_path / "m.txt").write_text("he\nman\nking\n")
    (tmp_path / "f.txt").write_text("she\nwoman\n")
    with pytest.raises(InputError, match="3 lines .* 2"):
        load_aligned_files(tmp_path / "m.txt", tmp_path / "f.txt")


def test_bias_bench_and_lu_lists(shared_data):
    bb = load_lexicon(LexiconConfig(source="bias-bench", path=str(shared_data / "bias_bench_words" / "bias_attribute_words.json")))
    assert bb.m2f["actor"] == "actress"
    assert any(i.word in {"guy", "guys", "sir", "mr."} for i in bb.issues)  # guy->gal and guy->girl, sir->ma'am/miss
    lu = load_lexicon(LexiconConfig(source="lu2018", path=str(shared_data / "cda_word_pairs" / "cda_default_pairs.json")))
    assert lu.m2f["sons-in-law"] == "daughters-in-law"
    wb = load_lexicon(LexiconConfig(source="winobias", path=str(shared_data / "cda_word_pairs" / "winobias_generalized_swaps.txt")))
    assert wb.m2f["actor"] == "actress"


def test_bad_word_list_files(tmp_path):
    (tmp_path / "bad.json").write_text('[["he", "she"], ["man"]]')
    with pytest.raises(InputError, match="entry 1"):
        load_json_pairs(tmp_path / "bad.json")
    (tmp_path / "bad.tsv").write_text("man\twoman\nking queen\n")
    with pytest.raises(InputError, match=r"bad.tsv:2"):
        load_tsv_pairs(tmp_path / "bad.tsv")
    with pytest.raises(InputError, match="not found"):
        load_json_pairs(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="lexicon.path"):
        load_lexicon(LexiconConfig(source="lu2018"))
