import pytest

from context_cda.cda.lexicon import load_lexicon
from context_cda.cda.swap import Swapper, cds_decision, match_case
from context_cda.config import LexiconConfig


@pytest.fixture(scope="module")
def swapper():
    return Swapper(load_lexicon(LexiconConfig()))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He gave her the book.", "She gave him the book."),
        ("She saw her car and her own house.", "He saw his car and his own house."),
        ("HE said his mother's friend was hers.", "SHE said her father's friend was his."),
        ("The man's wife told him that her son-in-law was a policeman.",
         "The woman's husband told her that his daughter-in-law was a policewoman."),
        ("The book is his. His dog and her cat.", "The book is hers. Her dog and his cat."),
        ("Mr. Smith met the ex-husband.", "Mrs. Smith met the ex-wife."),
        ("Ask her to go. I told her that. Her!", "Ask him to go. I told him that. Him!"),
        ("The men's team beat the women's team.", "The women's team beat the men's team."),
        ('"Her," he said, "is not his problem."', '"Him," she said, "is not her problem."'),
        ("She loves her.", "He loves him."),
        ("They saw her again and her brother too.", "They saw him again and his sister too."),
        ("The sherlock theme: hero, heroes, heroine.", "The sherlock theme: heroine, heroines, hero."),
        ("his and hers towels", "hers and his towels"),
        ("Men, women, MEN, Women.", "Women, men, WOMEN, Men."),
    ],
)
def test_swaps(swapper, text, expected):
    assert swapper.swap(text).text == expected


def test_no_partial_words(swapper):
    text = "Shepherds and theme parks in Manchester: the mankind of heroics."
    assert swapper.swap(text).text == text


def test_swap_record_and_direction(swapper):
    r = swapper.swap("He loves his son.")
    assert r.swaps == [("He", "She"), ("his", "her"), ("son", "daughter")]
    assert swapper.direction(r.swaps) == "m2f"
    assert swapper.direction(swapper.swap("She and he").swaps) == "mixed"


def test_swap_twice_is_identity_for_one_to_one_words(swapper):
    text = "The king and his brothers visited the duchess and her nieces."
    assert swapper.swap(swapper.swap(text).text).text == text


def test_her_rules():
    lex = load_lexicon(LexiconConfig())
    assert Swapper(lex, her_rule="possessive").swap("I saw her.").text == "I saw his."
    assert Swapper(lex, her_rule="object").swap("her car").text == "him car"


def test_name_swapping_only_capitalised():
    sw = Swapper(load_lexicon(LexiconConfig()), names={"john": "mary", "mary": "john", "will": "wilma"})
    assert sw.swap("John told Mary he will come.").text == "Mary told John she will come."


def test_case_helpers_and_cds():
    assert match_case("HE", "she") == "SHE" and match_case("He", "she") == "She" and match_case("he", "she") == "she"
    decisions = [cds_decision(f"id{i}", 13, 0.5) for i in range(1000)]
    assert 400 < sum(decisions) < 600
    assert decisions == [cds_decision(f"id{i}", 13, 0.5) for i in range(1000)]
