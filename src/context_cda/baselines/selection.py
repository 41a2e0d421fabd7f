"""What the projection arms learn from: the run's own sentences, selected the way McGill-NLP/bias-bench selects them.

The *lines* are the run's corpus after ingest (one sentence per line): the gendered sentences ingest kept, then
the corpus's sentences without a gender term (ingest's ``no-gender-term`` rows, the neutral class), at most
``max_per_class`` of those (a seeded sample). They are written to the debias step's ``lines.txt``: the file
bias-bench's code reads as ``data/text/wikipedia-2.5.txt`` in the fidelity test.

INLP (bias-bench ``load_inlp_data``): the lines are shuffled with ``random.Random(seed)``; a sentence of at least 5
space-separated words is *male* when it holds a male attribute word and no female one, *female* the other way
round, *neutral* with neither (both: skipped); a gendered sentence is cut after a random word at or after its
attribute word, a neutral one after a random 4th..last word; at most ``max_per_class`` per class, duplicates of a
gendered sentence skipped. SentenceDebias (bias-bench ``_gender_augment_func``): one (male, female) pair per
attribute word pair a sentence holds, the other word swapped in for it.

``mode="bias-bench"`` does exactly what that code does: each line split into sentences by nltk's punkt (it splits
"No. 20" after "No."; the punkt tables come from NLTK_DATA), lower-cased, words split on single spaces and matched
as they are (``he,`` is not ``he``), pairs made by plain word replacement. The default mode keeps case
(cased tokenizers see the text as written), matches a word with its punctuation and possessive stripped, and takes
SentenceDebias's pairs from the run's CDA stage (its token-aware swaps, validated), not from word replacement.
The attribute words are the lexicon's pairs as listed (:func:`context_cda.cda.lexicon.attribute_pairs`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import schemas as S
from ..errors import InputError
from ..io import REJECTED, read_table
from ..layout import SENTENCES_FILE

NEUTRAL_REASON = "no-gender-term"  # ingest's reason for a sentence without a lexicon word
_EDGE = re.compile(r"^[^\w]+|[^\w]+$")


@dataclass
class Lines:
    """The corpus lines a projection is learnt from: ``texts`` in order, with the ingest row ids."""

    texts: list[str]
    ids: list[str]
    n_gendered: int
    n_neutral_pool: int = 0


@dataclass
class InlpSentences:
    """The three classes of INLP's classifier (cut sentences) and the line each came from."""

    classes: dict[str, list[str]] = field(default_factory=lambda: {"male": [], "female": [], "neutral": []})
    sources: dict[str, list[int]] = field(default_factory=lambda: {"male": [], "female": [], "neutral": []})

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.classes.items()}


def corpus_lines(ingest_dir: Path | str, max_neutral: int, seed: int, neutral: bool = True) -> Lines:
    """The gendered sentences of the ingest step (``sentences.parquet``) and, with ``neutral``, a seeded sample of
    at most ``max_neutral`` of its sentences without a gender term (``rejected.parquet``, in corpus order)."""
    folder = Path(ingest_dir)
    sentences = folder / SENTENCES_FILE
    if not sentences.is_file():
        raise InputError(f"{sentences}: not found; run `ccda ingest` first (the projection arms learn from the "
                         "run's corpus).")
    df = read_table(sentences, columns=[S.ID, S.TEXT])
    texts, ids = df[S.TEXT].astype(str).tolist(), df[S.ID].astype(str).tolist()
    pool = 0
    if neutral:
        rej = folder / REJECTED
        if rej.is_file():
            r = read_table(rej)
            r = r[(r[S.REASON] == NEUTRAL_REASON) & r[S.TEXT].notna()] if S.REASON in r.columns else r.iloc[:0]
            pool = len(r)
            keep = sorted(random.Random(seed).sample(range(pool), min(pool, max_neutral)))
            texts += r[S.TEXT].astype(str).iloc[keep].tolist()
            ids += r[S.ID].astype(str).iloc[keep].tolist()
    return Lines(texts, ids, len(df), pool)


def _word_key(token: str, mode: str) -> str:
    return token if mode == "bias-bench" else re.sub(r"'s?$", "", _EDGE.sub("", token.lower()))


def split_sentences(line: str, mode: str) -> list[str]:
    """The sentences of one line: the line itself (default: ingest split the corpus already), or what nltk's
    punkt makes of it (bias-bench mode, as its loaders call ``nltk.sent_tokenize``)."""
    if mode != "bias-bench":
        return [line.rstrip("\n")]
    try:
        import nltk

        return nltk.sent_tokenize(line)
    except ImportError:
        raise InputError("baselines.mode=bias-bench splits lines into sentences with nltk, as bias-bench does: "
                         "pip install nltk.") from None
    except LookupError:
        raise InputError("baselines.mode=bias-bench needs nltk's punkt tables (tokenizers/punkt_tab), which nltk "
                         "cannot download offline: point NLTK_DATA at a folder holding them (scripts/"
                         "setup-biasbench.sh installs one, see docs/baselines.md).") from None


def inlp_sentences(lines: Sequence[str], pairs: Sequence[tuple[str, str]], max_per_class: int, seed: int,
                   mode: str = "default", split: Callable[[str], list[str]] | None = None) -> InlpSentences:
    """bias-bench's INLP sentence selection over ``lines`` (see the module docstring); ``split`` replaces the
    mode's sentence splitter."""
    split = split or (lambda line: split_sentences(line, mode))
    rng = random.Random(seed)
    order = list(range(len(lines)))
    rng.shuffle(order)  # random.seed(seed); random.shuffle(lines) - the same permutation
    male, female = {m for m, _ in pairs}, {f for _, f in pairs}
    out, seen = InlpSentences(), {"male": set(), "female": set()}
    for i in order:
        for sentence in split(lines[i]):
            _consider(out, seen, sentence, i, rng, male, female, max_per_class, mode)
        if all(len(v) == max_per_class for v in out.classes.values()):
            break
    return out


def _consider(out: InlpSentences, seen: dict[str, set[str]], sentence: str, line: int, rng: random.Random,
              male: set[str], female: set[str], max_per_class: int, mode: str) -> None:
    """One sentence of bias-bench's loop: classified, cut at a random word, kept when its class has room."""
    tokens = sentence.split(" ")
    if mode == "bias-bench":
        tokens = [t.lower() for t in tokens]
    if len(tokens) < 5:
        return
    kind, idx = _gender_of(tokens, male, female, mode)
    if kind is None:
        return
    if kind == "neutral":
        if len(out.classes["neutral"]) < max_per_class:
            cut = rng.randint(4, len(tokens))
            out.classes["neutral"].append(" ".join(tokens[:cut]))
            out.sources["neutral"].append(line)
        return
    if len(out.classes[kind]) < max_per_class and sentence not in seen[kind]:
        seen[kind].add(sentence)
        cut = rng.randint(idx, len(tokens))
        out.classes[kind].append(" ".join(tokens[: cut + 1]))
        out.sources[kind].append(line)


def _gender_of(tokens: list[str], male: set[str], female: set[str], mode: str) -> tuple[str | None, int]:
    """("male" | "female" | "neutral" | None for both, index of the last attribute word found), as bias-bench
    scans a sentence (``idx`` is the first position of the last matching word)."""
    keys = [_word_key(t, mode) for t in tokens]
    m = f = False
    idx = -1
    for key in keys:
        if key in male:
            m, idx = True, keys.index(key)
        if key in female:
            f, idx = True, keys.index(key)
        if m and f:
            return None, idx
    return ("male" if m else "female" if f else "neutral"), idx


def bias_bench_pairs(lines: Sequence[str], pairs: Sequence[tuple[str, str]],
                     split: Callable[[str], list[str]] | None = None) -> list[tuple[str, str]]:
    """bias-bench's SentenceDebias examples (``_GenericDataset`` + ``_gender_augment_func``) from ``lines``:
    (male, female) sentence pairs, lower-cased, one per word pair a sentence holds."""
    out: list[tuple[str, str]] = []
    split = split or (lambda line: split_sentences(line, "bias-bench"))
    sentences = [s for line in lines for s in split(line.lower())]
    for sentence in sentences:
        text = sentence.lower().strip()
        words = text.split(" ")
        for w0, w1 in pairs:  # bias-bench names them (female_word, male_word) although the list is [male, female]
            if w0 in words:
                out.append((" ".join(w1 if w == w0 else w for w in words), text))
            if w1 in words:
                out.append((text, " ".join(w0 if w == w1 else w for w in words)))
    return out


def cda_pairs(cda_table: Path | str) -> list[tuple[str, str]]:
    """(original, counterfactual) of every validated CDA row whose counterfactual differs (default mode)."""
    df = read_table(cda_table, columns=[S.ORIGINAL, S.COUNTERFACTUAL])
    df = df[df[S.ORIGINAL].notna() & df[S.COUNTERFACTUAL].notna() & (df[S.ORIGINAL] != df[S.COUNTERFACTUAL])]
    return list(zip(df[S.ORIGINAL].astype(str), df[S.COUNTERFACTUAL].astype(str), strict=True))
