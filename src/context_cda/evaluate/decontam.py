"""Decontamination: no text any arm trains on may contain an evaluation item.

A generator asked to rephrase a counterfactual can reproduce a benchmark sentence, a swap can turn a corpus
sentence into a StereoSet candidate, a neutral rewrite can land on a WinoGender sentence, and a corpus can quote a
benchmark: a model trained on such text is scored on items it has seen. So every text that can reach training -
ingest's sentences (they are the CDA, dropout, INLP and SentenceDebias corpora, and INLP's neutral class), CDA's
counterfactuals, augment's rephrasings, the ``neutral`` step's rewrites (the context-neutral arm) and the lexicon's
neutral rewrites (the cda-neutral arm, made by its finetune step) - is compared with every item of the benchmarks in
``decontaminate.benchmarks`` (StereoSet contexts and candidate sentences of both tasks, CrowS-Pairs sentences, every
bias type; WinoGender sentences; WinoBias sentences of ``evaluate.winobias.split``), and a text that overlaps one goes
to its step's ``rejected.parquet`` with reason ``eval-overlap: <benchmark>:<item id> <overlap>``; each step's summary
counts them (``eval_overlap``, ``eval_overlap_by_benchmark``).

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

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


def _stereoset(config: Config) -> list[tuple[str, str, str]]:
    from .data import benchmark_file, load_stereoset

    out = []
    path = benchmark_file("stereoset", config.evaluate.stereoset_path, config.run.data_cache)
    for ex in load_stereoset(path, bias_type="all", split="all"):  # both tasks' contexts and sentences
        out.append(("stereoset", ex.id, ex.context.replace("BLANK", " ")))
        out += [("stereoset", ex.sentence_ids.get(lab) or f"{ex.id}/{lab}", s) for lab, s in ex.sentences.items()]
    return out


def _crows(config: Config) -> list[tuple[str, str, str]]:
    from .data import benchmark_file, load_crows

    path = benchmark_file("crows", config.evaluate.crows_path, config.run.data_cache)
    return [("crows", p.id, s) for p in load_crows(path, bias_type="all") for s in (p.sent_more, p.sent_less)]


def _winogender(config: Config) -> list[tuple[str, str, str]]:
    from ..data.datasets import resolve
    from . import winogender

    folder = resolve("winogender", config.evaluate.winogender.path, cache=config.run.data_cache,
                     key="evaluate.winogender.path")
    return [("winogender", it.id, it.sentence) for it in winogender.load(folder)]


def _winobias(config: Config) -> list[tuple[str, str, str]]:
    """Every scored sentence of the evaluated split (a sentence WinoBias's evaluation cannot score is no item)."""
    from ..data.datasets import resolve
    from . import winobias

    folder = resolve("winobias", config.evaluate.winobias.path, cache=config.run.data_cache,
                     key="evaluate.winobias.path")
    return [("winobias", it.id, it.sentence) for it in winobias.load(folder, config.evaluate.winobias.split)
            if isinstance(it, winobias.WinoBiasItem)]


#: benchmark -> its items' (benchmark, item id, text)
ITEMS = {"stereoset": _stereoset, "crows": _crows, "winogender": _winogender, "winobias": _winobias}


def eval_items(config: Config) -> list[tuple[str, str, str]]:
    """(benchmark, item id, text) of every item of ``decontaminate.benchmarks`` (see the module docstring)."""
    return [item for name in config.decontaminate.benchmarks for item in ITEMS[name](config)]


#: key (settings and where the files are) -> index: a step that checks several tables builds it once
_INDEXES: dict[str, EvalIndex] = {}


def index_for(config: Config) -> EvalIndex | None:
    """The run's evaluation index (None when ``decontaminate.enabled`` is off)."""
    import json
    import os

    d = config.decontaminate
    if not d.enabled:
        return None
    ev = config.evaluate
    key = json.dumps([d.model_dump(mode="json"), ev.stereoset_path, ev.crows_path, ev.winogender.path,
                      ev.winobias.path, ev.winobias.split, config.run.data_cache, os.environ.get("CCDA_DATA_DIR")])
    if key not in _INDEXES:
        if len(_INDEXES) > 8:
            _INDEXES.clear()
        _INDEXES[key] = EvalIndex(eval_items(config), d.ngram, d.threshold, d.min_words)
    return _INDEXES[key]


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


def drop_overlaps(config: Config, accepted: Any, text_column: str, rejected: Any,
                  order: Callable[[Any], Any] | None = None) -> tuple[Any, Any, dict[str, int]]:
    """Move the rows of table ``accepted`` whose ``text_column`` holds an evaluation item to table ``rejected``
    (``reason``: the match's reason; the row keeps its other columns), sorted by ``order`` (a key of a rejected row)
    when given. Returns (accepted, rejected, rejections per benchmark); the tables as they were without an index or
    a match."""
    import pandas as pd

    from ..schemas import REASON

    index = index_for(config)
    if index is None or accepted.empty:
        return accepted, rejected, {}
    matches = split(index, list(accepted[text_column]))
    hit = pd.Series([m is not None for m in matches], index=accepted.index)
    if not hit.any():
        return accepted, rejected, {}
    moved = accepted[hit].assign(**{REASON: [m.reason for m in matches if m is not None]})
    rej = pd.concat([rejected, moved], ignore_index=True)
    if order is not None:
        rej = rej.iloc[sorted(range(len(rej)), key=lambda i: order(rej.iloc[i]))].reset_index(drop=True)
    return accepted[~hit].reset_index(drop=True), rej, counted(matches)
