"""The gender word lists the next-token analysis reads (Zhao et al. 2018, uclanlp/gn_glove): the ``gender-words``
dataset, its two files and :class:`GenderWords` (below :mod:`.next_token` and :mod:`.next_token_vocab`, which
both read them, and :mod:`.data`, which lists the dataset).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..data.datasets import resolve
from ..errors import InputError
from ..io import read_text

log = logging.getLogger("context_cda.evaluate.next_token")

GENDER_WORDS_DATASET = "gender-words"  # its name in context_cda.data.datasets (uclanlp/gn_glove, pinned commit)
GENDER_WORDS_FILES = {"male": "male_word_file.txt", "female": "female_word_file.txt"}
GENDERS = ("male", "female")


@dataclass(frozen=True)
class GenderWords:
    """Male and female word lists (deduplicated, disjoint). ``removed``: words listed under both genders
    (dropped from both); ``duplicates``: repeated entries dropped within a list; ``pairs``: the (male, female)
    counterparts when the two files are aligned line by line (line i of one is the counterpart of line i of the
    other, as in Zhao et al.'s files), each pair once, pairs holding a removed word left out; () otherwise."""

    male: tuple[str, ...]
    female: tuple[str, ...]
    source: str
    removed: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()


def _read_words(path: Path) -> list[str]:
    if not path.exists():
        raise InputError(f"{path}: word-list file not found.")
    lines = read_text(path, fix="Save it as UTF-8, one word per line.").splitlines()
    return [w.strip() for w in lines if w.strip() and not w.lstrip().startswith("#")]


def _gender_files(path: str | os.PathLike[str] | None, cache: str | None) -> tuple[dict[str, Path], str]:
    """{gender: word-list file} from a folder (local or ``s3://``), else the ``gender-words`` dataset (mirror,
    cache or download)."""
    folder = resolve(GENDER_WORDS_DATASET, path, cache=cache, key="evaluate.next_token.words_path")
    if not folder.is_dir():
        raise InputError(
            f"{folder}: not a folder. Pass the folder that holds {GENDER_WORDS_FILES['male']} and "
            f"{GENDER_WORDS_FILES['female']} (Zhao et al. 2018, uclanlp/gn_glove wordlist/)."
        )
    files = {g: folder / name for g, name in GENDER_WORDS_FILES.items()}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise InputError(
            f"{', '.join(missing)}: word-list file not found. The folder must hold "
            f"{GENDER_WORDS_FILES['male']} and {GENDER_WORDS_FILES['female']} (one word per line)."
        )
    return files, str(folder)


def load_gender_words(path: str | os.PathLike[str] | None = None, cache: str | None = None) -> GenderWords:
    """The Zhao et al. (2018) gender word lists.

    ``path``: a folder holding ``male_word_file.txt`` and ``female_word_file.txt`` (one word per line). Without
    it the ``gender-words`` dataset (:mod:`context_cda.data.datasets`: the mirror, the data cache, or uclanlp/gn_glove
    at a pinned commit). Repeated words are kept once; words listed under
    both genders are dropped from both (and reported in ``removed``); equal-length files also give ``pairs``."""
    files, source = _gender_files(path, cache)
    raw: dict[str, list[str]] = {}
    lists: dict[str, list[str]] = {}
    dups: list[str] = []
    for g, p in files.items():
        raw[g] = _read_words(p)
        if not raw[g]:
            raise InputError(f"{p}: empty word list; expected one {g} word per line.")
        lists[g] = list(dict.fromkeys(raw[g]))
        seen: set[str] = set()
        for w in raw[g]:
            if w in seen:
                dups.append(w)
            seen.add(w)
    both = set(lists["male"]) & set(lists["female"])
    removed = tuple(w for w in lists["male"] if w in both)
    if removed:
        log.warning("%s: %d word(s) listed as both male and female, dropped: %s", source, len(removed),
                    ", ".join(removed))
    male = tuple(w for w in lists["male"] if w not in both)
    female = tuple(w for w in lists["female"] if w not in both)
    for g, ws in (("male", male), ("female", female)):
        if not ws:
            raise InputError(f"{files[g]}: no {g} words left after dropping words listed under both genders.")
    pairs: tuple[tuple[str, str], ...] = ()
    if len(raw["male"]) == len(raw["female"]):
        aligned = zip(raw["male"], raw["female"], strict=True)
        pairs = tuple(dict.fromkeys((m, f) for m, f in aligned if m not in both and f not in both))
    return GenderWords(male=male, female=female, source=source, removed=removed, duplicates=tuple(dups),
                       pairs=pairs)
