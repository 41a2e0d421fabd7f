"""Script and language: the output is written in the input's script(s) and language.

* Script: every letter's Unicode script (the first word of its Unicode name: LATIN, CYRILLIC, CJK, HIRAGANA,
  ...). The share of the output's letters that are in a script the input uses must reach
  ``script_min_share``. One CJK ideograph, kana or hangul syllable carries about a word, so it weighs 3 letters
  ("安洁德县在洉洮西安哪？ (She spent the three years …)" is 30 : 21 against the input's Latin).
* Language: `py3langid <https://github.com/adbar/py3langid>`_ (a maintained, BSD-licensed fork of langid.py:
  a naive-Bayes model over byte n-grams for 97 languages that ships inside the wheel, pure Python + numpy, no
  download at run time, ~0.03 ms for a sentence). An output is rejected when py3langid gives another language
  than the input's a probability of at least ``language_min_confidence``; when the input's own language is
  unclear (probability < 0.5, e.g. "OK.") the check abstains. Short or name-heavy English outputs get low
  confidences, so they are never rejected on a guess. Fast paths, where py3langid is not asked (it would take a
  third of the review's time): the output keeps 60 % of the input's distinct words (three or more), so it is in
  the input's language; or input and output both consist of at least four words of which 30 % or more are
  English function words (the, and, of, she, ...: never that common in another language).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

_WIDE = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")
_INPUT_MIN_CONFIDENCE = 0.5
LANGUAGE_NAMES = {
    "en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic",
    "pl": "Polish", "sv": "Swedish", "tr": "Turkish", "cs": "Czech", "da": "Danish", "no": "Norwegian",
}


@lru_cache(maxsize=4096)
def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else "UNKNOWN"


def script_weights(text: str) -> dict[str, float]:
    """Letters of ``text`` per script, CJK/kana/hangul weighing 3."""
    if text.isascii():
        n = sum(c.isalpha() for c in text)
        return {"LATIN": float(n)} if n else {}
    out: dict[str, float] = {}
    for c in text:
        if c.isalpha():
            s = "LATIN" if c.isascii() else _script(c)
            out[s] = out.get(s, 0.0) + (3.0 if s in _WIDE else 1.0)
    return out


def script_problem(source: str, output: str, min_share: float) -> str:
    """'' or ``script: 59% CJK, input LATIN``."""
    if source.isascii() and output.isascii():
        return ""
    src, out = script_weights(source), script_weights(output)
    total = sum(out.values())
    if not src or not total:
        return ""
    share = sum(v for s, v in out.items() if s in src) / total
    if share >= min_share:
        return ""
    foreign = max((s for s in out if s not in src), key=lambda s: out[s])
    return f"script: {out[foreign] / total:.0%} {foreign}, input {'+'.join(sorted(src))}"


@lru_cache(maxsize=1)
def _identifier() -> Any:
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError as e:  # pragma: no cover - a core dependency
        from ...errors import ConfigError

        raise ConfigError(
            "augment.review.language needs py3langid (a core dependency: `pip install py3langid`), or set "
            "augment.review.language=false."
        ) from e
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@lru_cache(maxsize=16384)
def identify(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) from py3langid."""
    lang, p = _identifier().classify(text)
    return str(lang), float(p)


_ENGLISH = frozenset(
    "the a an and or but of to in on at for with from by as is are was were be been has have had it its this that "
    "these those he she his her him they them their we our you your i my not no would will could should after "
    "before when while who which what there here into over about than then so".split()
)


def looks_english(ws: Sequence[str]) -> bool:
    """Four or more words, 30 % of them English function words."""
    return len(ws) >= 4 and sum(w in _ENGLISH for w in ws) >= 0.3 * len(ws)


def keeps_words(source_words: Sequence[str], output_words: Sequence[str]) -> bool:
    """The output holds 60 % of the input's distinct words (at least three): the same language, whichever."""
    src = set(source_words)
    return len(src) >= 3 and len(src.intersection(output_words)) >= 0.6 * len(src)


def language_problem(source: str, output: str, min_confidence: float, source_words: Sequence[str] = (),
                     output_words: Sequence[str] = ()) -> str:
    """'' or ``language: fr (p=0.99), input en`` (``*_words``: the texts' words, for the fast paths)."""
    if keeps_words(source_words, output_words) or (looks_english(output_words) and looks_english(source_words)):
        return ""
    src_lang, src_p = identify(source)
    if src_p < _INPUT_MIN_CONFIDENCE:
        return ""
    lang, p = identify(output)
    if lang == src_lang or p < min_confidence:
        return ""
    return f"language: {lang} (p={p:.2f}), input {src_lang}"


def language_name(source: str) -> str:
    """The input's language in words (for retry feedback), 'the language of the sentence' when unsure."""
    lang, p = identify(source)
    return LANGUAGE_NAMES.get(lang, "the language of the sentence") if p >= _INPUT_MIN_CONFIDENCE else (
        "the language of the sentence")
