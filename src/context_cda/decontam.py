"""Decontamination: no text any arm trains on may contain an evaluation item.

A generator asked to rephrase a counterfactual can reproduce a benchmark sentence, a swap can turn a corpus
sentence into a StereoSet candidate, and a corpus can quote a benchmark: a model trained on such text is scored on
items it has seen. So every text that can reach training - ingest's sentences (they are the CDA, dropout, INLP and
SentenceDebias corpora, and INLP's neutral class), CDA's counterfactuals and augment's rephrasings - is compared
with every item of the benchmarks in ``decontaminate.benchmarks`` (StereoSet contexts and candidate sentences,
CrowS-Pairs sentences, every bias type), and a text that overlaps one goes to its stage's ``rejected.parquet`` with
reason ``eval-overlap: <benchmark>:<item id> <overlap>``; each stage's summary counts them (``eval_overlap``).

Overlap: texts are lower-cased, NFKC-normalised and split into words with punctuation dropped; an item's word
n-grams (``decontaminate.ngram``; an item shorter than n words is one n-gram, the whole item) are looked up in the
text, and the text overlaps the item when more than ``decontaminate.threshold`` of them occur in it: a text that
holds most of the item verbatim. Items under ``decontaminate.min_words`` words are not matched (too common to mean
anything). A StereoSet context is matched without its BLANK.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

REASON = "eval-overlap"
_NON_WORD = re.compile(r"[^\w']+|(?<!\w)'|'(?!\w)")


def words(text: str) -> list[str]:
    """The normalised words of ``text``: NFKC, lower case, curly apostrophes straightened, punctuation dropped
    (apostrophes inside words kept)."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return [w for w in _NON_WORD.sub(" ", text).split() if w]


def ngrams(seq: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}


@dataclass(frozen=True)
class Match:
    benchmark: str
    item: str
    overlap: float

    @property
    def reason(self) -> str:
        return f"{REASON}: {self.benchmark}:{self.item} {self.overlap:.2f}"


class EvalIndex:
    """Every evaluation item's n-grams, for :meth:`match`."""

    def __init__(self, items: Iterable[tuple[str, str, str]], ngram: int = 8, threshold: float = 0.5,
                 min_words: int = 4) -> None:
        """``items``: (benchmark, item id, text)."""
        self.threshold = threshold
        self.labels: list[tuple[str, str]] = []
        self.totals: list[int] = []
        self.index: dict[int, dict[tuple[str, ...], list[int]]] = defaultdict(lambda: defaultdict(list))
        for bench, item_id, text in items:
            w = words(text)
            if len(w) < min_words:
                continue
            n = min(ngram, len(w))
            grams = ngrams(w, n)
            k = len(self.labels)
            self.labels.append((bench, item_id))
            self.totals.append(len(grams))
            for g in grams:
                self.index[n][g].append(k)
        self.index = {n: dict(v) for n, v in self.index.items()}

    def __len__(self) -> int:
        return len(self.labels)

    def match(self, text: str) -> Match | None:
        """The item ``text`` overlaps most, when that overlap exceeds the threshold; else None."""
        w = words(text)
        hits: dict[int, int] = defaultdict(int)
        for n, table in self.index.items():
            for g in ngrams(w, n):
                for k in table.get(g, ()):
                    hits[k] += 1
        if not hits:
            return None
        k, share = max(((k, c / self.totals[k]) for k, c in hits.items()), key=lambda kv: (kv[1], -kv[0]))
        return Match(*self.labels[k], round(share, 4)) if share > self.threshold else None


def eval_items(config: Config) -> list[tuple[str, str, str]]:
    """(benchmark, item id, text) of every item of ``decontaminate.benchmarks``, every bias type: StereoSet
    contexts (BLANK removed) and candidate sentences, CrowS-Pairs sentences."""
    from .evaluate.data import benchmark_file, load_crows, load_stereoset

    ev, out = config.evaluate, []
    for name in config.decontaminate.benchmarks:
        path = benchmark_file(name, getattr(ev, f"{name}_path"), config.run.data_cache)
        if name == "stereoset":
            for ex in load_stereoset(path, bias_type="all"):
                out.append((name, ex.id, ex.context.replace("BLANK", " ")))
                out += [(name, ex.sentence_ids.get(lab) or f"{ex.id}/{lab}", s) for lab, s in ex.sentences.items()]
        else:
            for p in load_crows(path, bias_type="all"):
                out += [(name, p.id, p.sent_more), (name, p.id, p.sent_less)]
    return out


def index_for(config: Config) -> EvalIndex | None:
    """The run's evaluation index (None when ``decontaminate.enabled`` is off)."""
    d = config.decontaminate
    if not d.enabled:
        return None
    return EvalIndex(eval_items(config), d.ngram, d.threshold, d.min_words)


def split(index: EvalIndex | None, texts: Sequence[Any]) -> list[Match | None]:
    """The match of each text (None: clean, or a missing text); all None without an index."""
    if index is None:
        return [None] * len(texts)
    return [index.match(t) if isinstance(t, str) and t else None for t in texts]


def counted(matches: Iterable[Match | None]) -> dict[str, int]:
    """Rejections per benchmark, for a stage summary's ``eval_overlap_by_benchmark``."""
    out: dict[str, int] = defaultdict(int)
    for m in matches:
        if m is not None:
            out[m.benchmark] += 1
    return dict(out)
