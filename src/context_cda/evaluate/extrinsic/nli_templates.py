"""NLI-bias probe pairs (Dev, Li, Phillips & Srikumar, "On Measuring and Mitigating Biased Inferences of Word
Embeddings", AAAI 2020), generated from the authors' word lists.

Each template is a (verb, object) combination; a sentence is ``"<Article> <X> <verb> <article> <object> ."`` with
"An"/"an" before a word starting with a vowel letter (a, e, i, o, u) and "A"/"a" otherwise (the letter rule of the
authors' template code: "An accountant", "a SUV"). In the ``reference`` mode (default) the sentence ends with " ."
exactly as the authors' ``SubjectTemplate`` writes it (``verb + " " + article + object + " ."``: a separate token
for BPE tokenizers); ``plain`` ends it with "." attached. The word lists hold past-tense or present verb phrases
("bought", "spoke to", "can afford") and bare nouns (no article). Templates, as in the authors' code
(``Templates.__init__`` in ``stereotypes/templates.py``):

* every commerce verb x every object (the union of all ``nouns/objects`` lists),
* every interaction verb x every person (``person_hyponyms`` + ``rulers``),
* every driving verb x every vehicle, every eating verb x every food.

On the published lists that is 10 x 95 + 10 x 89 + 2 x 9 + 5 x 22 = 1,968 templates. The gender probe fills X with an
occupation (164) in one sentence and a gendered word (gentleman, girl, guy, lady, man, woman) in the other:
1,968 x 164 x 6 = 1,936,512 pairs. Which word goes in the premise is not fixed by the authors' code: their generator
(``generate_templates.py --noun --p <list> --h <list>``) takes the premise's and the hypothesis's word list as
arguments. The occupation-gender invocation reproductions publish (``--p occupations --h gendered_words``) and the
Dev-derived data in AllenNLP's fairness guide put the occupation in the premise ("An accountant bought a bagel ." /
"A woman bought a bagel ."), the default here; ``premise="gender"`` swaps the sentences. Either way the pair is
neither entailed nor contradicted, so an unbiased model says "neutral".
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from ...data.datasets import resolve
from ...errors import InputError
from ...io import read_text, stable_id
from .data import PathArg

NLI_WORDS_DATASET = "nli-bias-words"  # its name in context_cda.data.datasets (the authors' repository, pinned commit)
NLI_WORDS_HINT = "Point evaluate.nli_bias.words_path (or --nli-words-path) at a local copy of the word_lists folder"

VERB_LISTS = ("commerce_verbs", "driving_verbs", "eating_verbs", "interaction_verbs")
OBJECT_LISTS = ("clothes", "farm_animals", "food", "furniture", "household", "vehicles")
PEOPLE_LISTS = ("gendered_words", "occupations", "person_hyponyms", "rulers")
WORD_FILES: dict[str, tuple[str, ...]] = {
    "verbs": VERB_LISTS,
    "nouns/objects": OBJECT_LISTS,
    "nouns/people": PEOPLE_LISTS,
}
GENDER_OF = {
    "man": "male", "guy": "male", "gentleman": "male",
    "woman": "female", "girl": "female", "lady": "female",
}  # fmt: skip
VOWELS = frozenset("aeiouAEIOU")


@dataclass(frozen=True)
class NliWordLists:
    """The word lists, each deduplicated and sorted: ``verbs["eating_verbs"]``, ``objects["food"]``,
    ``people["occupations"]`` ... ``source`` is the folder they were read from."""

    verbs: dict[str, tuple[str, ...]]
    objects: dict[str, tuple[str, ...]]
    people: dict[str, tuple[str, ...]]
    source: str = ""


def load_nli_word_lists(path: PathArg | None = None, cache: str | None = None) -> NliWordLists:
    """Read the ``word_lists`` folder (``verbs/``, ``nouns/objects/``, ``nouns/people/``; one entry a line).
    ``path``: local or ``s3://``; without one the ``nli-bias-words`` dataset from the mirror, the cache or the
    authors' repository (pinned commit)."""
    root = resolve(NLI_WORDS_DATASET, path, cache=cache, key="evaluate.nli_bias.words_path")
    if not root.is_dir():
        raise InputError(f"{root}: NLI-bias word_lists folder not found. {NLI_WORDS_HINT}.")
    groups: list[dict[str, tuple[str, ...]]] = []
    for sub, names in WORD_FILES.items():
        group = {}
        for name in names:
            f = root / sub / name
            if not f.is_file():
                raise InputError(f"{f}: NLI-bias word list missing (expected {sub}/{name} under {root}).")
            words = {line.strip() for line in read_text(f).splitlines() if line.strip()}
            if not words:
                raise InputError(f"{f}: empty word list.")
            group[name] = tuple(sorted(words))
        groups.append(group)
    verbs, objects, people = groups
    unknown = [w for w in people["gendered_words"] if w.lower() not in GENDER_OF]
    if unknown:
        raise InputError(
            f"{root / 'nouns/people/gendered_words'}: unknown gendered word(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(GENDER_OF))}."
        )
    return NliWordLists(verbs, objects, people, str(root))


def _union(*lists: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({w for lst in lists for w in lst}))


def nli_templates(words: NliWordLists) -> list[tuple[str, str]]:
    """(verb, object) combinations in a fixed order: commerce verbs x all objects, interaction verbs x persons
    (person_hyponyms + rulers), driving verbs x vehicles, eating verbs x food; duplicates dropped."""
    v, o, p = words.verbs, words.objects, words.people
    groups = [
        (v["commerce_verbs"], _union(*o.values())),
        (v["interaction_verbs"], _union(p["person_hyponyms"], p["rulers"])),
        (v["driving_verbs"], o["vehicles"]),
        (v["eating_verbs"], o["food"]),
    ]
    seen: dict[tuple[str, str], None] = {}
    for verbs, objects in groups:
        for verb in verbs:
            for obj in objects:
                seen.setdefault((verb, obj), None)
    return list(seen)


def article(word: str, *, capital: bool = False) -> str:
    """ "an" before a word starting with a vowel letter, else "a" (capitalised for the sentence start)."""
    a = "an" if word[:1] in VOWELS else "a"
    return a.capitalize() if capital else a


#: how a sentence ends per mode: the authors' " ." (reference) or an attached "." (plain)
ENDINGS = {"reference": " .", "plain": "."}


def sentence(subject: str, verb: str, obj: str, mode: Literal["reference", "plain"] = "reference") -> str:
    """ "An accountant ate a bagel ." (reference, the authors' string) or "An accountant ate a bagel." (plain)."""
    if mode not in ENDINGS:
        raise ValueError(f"mode must be 'reference' or 'plain', got {mode!r}.")
    return f"{article(subject, capital=True)} {subject} {verb} {article(obj)} {obj}{ENDINGS[mode]}"


@dataclass(frozen=True)
class NliBiasPair:
    id: str
    premise: str
    hypothesis: str
    occupation: str
    gender_word: str
    gender: str  # "male" | "female"
    template: str  # the predicate shared by both sentences, e.g. "ate a bagel"


def nli_bias_space_size(words: NliWordLists) -> int:
    """templates x gendered words x occupations (1,968 x 6 x 164 = 1,936,512 on the published lists)."""
    return len(nli_templates(words)) * len(words.people["gendered_words"]) * len(words.people["occupations"])


def generate_nli_bias(
    words: NliWordLists,
    *,
    max_pairs: int | None = 20000,
    seed: int = 0,
    premise: Literal["occupation", "gender"] = "occupation",
    mode: Literal["reference", "plain"] = "reference",
) -> list[NliBiasPair]:
    """Premise/hypothesis pairs for the gender-occupation probe, all of them or a seeded sample.

    Sampling scheme: the unit is a (template, occupation) cell; every chosen cell contributes one pair per gendered
    word (6: 3 male, 3 female), so male and female pairs are balanced and paired (same template and occupation,
    only the gendered word differs). When ``max_pairs`` is below the full space, ``max_pairs // n_gendered_words``
    cells are drawn uniformly without replacement from the ``n_templates * n_occupations`` cells with
    ``random.Random(seed).sample(range(...))`` (index arithmetic: cell c -> template c // n_occupations, occupation
    c % n_occupations, so the 1.9M pairs are never materialised). Cells are emitted in index order, gendered words
    in sorted order. Deterministic for a seed; ``max_pairs=None`` (or >= the space) gives every pair. ``mode``:
    the sentence ending (:func:`sentence`).
    """
    if premise not in ("occupation", "gender"):
        raise ValueError(f"premise must be 'occupation' or 'gender', got {premise!r}.")
    templates = nli_templates(words)
    occupations = words.people["occupations"]
    gendered = words.people["gendered_words"]
    n_cells = len(templates) * len(occupations)
    if max_pairs is None or max_pairs >= n_cells * len(gendered):
        cells: list[int] | range = range(n_cells)
    else:
        k = max_pairs // len(gendered)
        if k < 1:
            raise ValueError(
                f"max_pairs={max_pairs} is below the number of gendered words ({len(gendered)}): each sampled "
                "(template, occupation) gets one pair per gendered word."
            )
        cells = sorted(random.Random(seed).sample(range(n_cells), k))
    out = []
    for c in cells:
        verb, obj = templates[c // len(occupations)]
        occ = occupations[c % len(occupations)]
        occ_sentence = sentence(occ, verb, obj, mode)
        predicate = f"{verb} {article(obj)} {obj}"
        for gw in gendered:
            g_sentence = sentence(gw, verb, obj, mode)
            p, h = (occ_sentence, g_sentence) if premise == "occupation" else (g_sentence, occ_sentence)
            out.append(NliBiasPair(stable_id("nli_bias", p, h), p, h, occ, gw, GENDER_OF[gw.lower()], predicate))
    return out
