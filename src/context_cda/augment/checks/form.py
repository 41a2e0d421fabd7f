"""Form: one complete rephrasing, nothing of the prompt or the chat machinery in it.

* ``list``: the raw output offers several versions: two or more list items (``1.``, ``-``, ``Option 2:``), an
  "Alternatively"/"Another version" marker, or two paragraphs that are each a rephrasing of the input;
* ``prompt-echo``: the output repeats the instruction ("Rephrase the following sentence ...") or a worked
  example: ``echo_words`` words in a row shared with the prompt and not with the input, or a leading imperative
  "Rephrase/Rewrite/Paraphrase ...", or a "Sentence:"/"Text:" label;
* ``meta``: talk about the answer ("This rephrased sentence keeps ...", "I added ...", "Note:"), or a title
  before a colon that the input does not have ("Slightly edited: ...");
* ``special-token``: chat-template tokens or role labels left in the text (``<|im_start|>``, ``[INST]``, ``</s>``,
  ``assistant:``) that the input does not contain;
* ``truncated``: the answer stops mid-sentence: the engine hit the token limit inside it (and it has no final
  punctuation), or it has no final punctuation where the input has one, ends on a dangling "and"/"the", or leaves
  a bracket or quote open;
* ``too-short`` / ``too-long``: character length outside ``min..max`` times the input's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from ...generation.base import SPECIAL_STOP_TOKENS
from .text import prefix_set
from .words import words

REFUSAL = re.compile(
    r"\b(?:i(?:'m| am) sorry|i (?:can(?:no|')t|cannot|won't|will not|am unable|'m unable|am not able)"
    r"|as an ai\b|i apologi[sz]e|unable to (?:help|assist|comply)|i must decline)",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•]|\(?[a-h]\)|(?:option|version|alternative)\s*\d+\s*[:.)-]?)\s+\S",
                        re.IGNORECASE | re.MULTILINE)
_ALTERNATIVE = re.compile(r"\b(?:alternatively|another (?:version|option|way|rephrasing)|or (?:alternatively|"
                          r"perhaps)\s*:|option \d|version \d)\b", re.IGNORECASE)
_ECHO = re.compile(r"^\s*(?:please\s+)?(?:rephrase|rewrite|paraphrase|reword)\b|(?:^|\s)(?:sentence|text|input|"
                   r"output|rephrased text|original)\s*:", re.IGNORECASE)
_META = re.compile(
    r"\b(?:(?:this|the|my) (?:rephrased|rewritten|revised|new|original|paraphrased) (?:sentence|version|text)"
    r"|this (?:rephrasing|rewrite|version|paraphrase)|in this (?:version|rephrasing)"
    r"|(?:^|\s)(?:note|explanation|changes)\s*:"
    r"|here (?:is|'s|are) (?:the|a|my|your) (?:\w+ )?(?:version|sentence|rephrasing|rewrite|text)"
    r"|(?:rephrased|rewritten|paraphrased) (?:as|to|it)\b"
    r"|\b(?:in|of) the (?:original|given|above|following) (?:sentence|text)\b|\bin the sentence\W*$)",
    re.IGNORECASE,
)
# first-person talk about the edit; only meta when the input itself has no first person
_META_I = re.compile(r"\bi (?:have |'ve )?(?:added|kept|changed|rephrased|rewrote|rewritten|made|used|included|"
                     r"replaced|hope)\b", re.IGNORECASE)
_SPECIAL = re.compile(
    r"<\|[^|<>\s]{1,40}\|>|</?s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|<(?:pad|unk|mask|bos|eos)>"
    r"|\[(?:CLS|SEP|PAD|MASK|UNK)\]|^(?:assistant|user|system)\s*[:\n]|<\|?(?:assistant|user|system)\|?>",
    re.IGNORECASE,
)
# words one of the patterns above needs: a text without any of them cannot match (the patterns are costly)
_META_KEYS = ("sentence", "version", "text", "rephras", "rewrit", "paraphras", "note", "explanation", "changes")
_ALT_KEYS = ("alternativ", "another", "option", "version", ":")
_REFUSAL_KEYS = ("sorry", "i ", "i'", "unable", "apologi", "as an ai", "cannot")


def may_match(text: str, keys: Sequence[str]) -> bool:
    """Whether lower-cased ``text`` holds one of ``keys`` (a cheap test before a costly pattern)."""
    low = text.lower()
    return any(k in low for k in keys)


def is_refusal(text: str) -> bool:
    return may_match(text, _REFUSAL_KEYS) and REFUSAL.search(text) is not None


_DANGLING = frozenset("a an the and or but of to with for from in on at by as that which who whose my his her "
                      "their its our your is was were are".split())
_OPENERS = {"(": ")", "[": "]", "“": "”", "«": "»"}


def _items(raw: str) -> list[str]:
    """The raw output up to the first end-of-turn token, as paragraphs."""
    cut = len(raw)
    for tok in SPECIAL_STOP_TOKENS:
        i = raw.find(tok)
        if 0 <= i < cut:
            cut = i
    return [p.strip() for p in re.split(r"\n\s*\n", raw[:cut]) if p.strip()]


def content_share(prefixes: set[str], stems: Sequence[str]) -> float:
    """Share of ``stems`` (the input's content words, :func:`~.text.stem`) found among ``prefixes``
    (:func:`~.text.prefix_set` of the output's words)."""
    return sum(s in prefixes for s in stems) / len(stems) if stems else 1.0


def list_problem(raw: str, stems: Sequence[str]) -> str:
    if "\n" in raw and len(_LIST_ITEM.findall(raw)) >= 2:
        return "list: numbered or bulleted alternatives"
    if may_match(raw, _ALT_KEYS) and _ALTERNATIVE.search(raw):
        return "list: alternatives offered"
    if len(stems) >= 2 and "\n" in raw:
        versions = [p for p in _items(raw) if content_share(prefix_set(words(p)), stems) >= 0.6]
        if len(versions) >= 2:
            return f"list: {len(versions)} versions"
    return ""


def _grams(ws: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(ws[i: i + n]) for i in range(len(ws) - n + 1)}


@lru_cache(maxsize=64)
def _prompt_index(prompt_texts: tuple[str, ...], examples: tuple[tuple[str, str], ...], n: int
                  ) -> tuple[frozenset[tuple[str, ...]], tuple[tuple[frozenset[str], frozenset[tuple[str, ...]]], ...]]:
    """The instruction n-grams, and per worked example (its sentence's words, its n-grams)."""
    base: set[tuple[str, ...]] = set()
    for t in prompt_texts:
        base |= _grams(words(t.replace("{sentence}", " ").replace("{text}", " ")), n)
    per = tuple((frozenset(words(src)), frozenset(_grams(words(src), n) | _grams(words(ans), n)))
                for src, ans in examples)
    return frozenset(base), per


def _unlike(a: frozenset[str], b: frozenset[str], gendered: frozenset[str]) -> bool:
    """Two sentences share less than half their (gender-neutral) words."""
    x, y = a - gendered, b - gendered
    return len(x & y) < 0.5 * max(1, len(x | y))


@lru_cache(maxsize=8192)
def _echo_grams(source_words: tuple[str, ...], prompt_texts: tuple[str, ...], examples: tuple[tuple[str, str], ...],
                n: int, gendered: frozenset[str]) -> frozenset[tuple[str, ...]]:
    """The n-grams that make an echo for this input: the instructions', and the worked examples' whose sentence
    is unlike the input, less the input's own."""
    base, per = _prompt_index(prompt_texts, examples, n)
    src = frozenset(source_words)
    grams = set(base)
    for ex_words, g in per:
        if _unlike(ex_words, src, gendered):
            grams |= g
    return frozenset(grams - _grams(source_words, n))


def echo_problem(text: str, ws: Sequence[str], source_words: tuple[str, ...], prompt_texts: tuple[str, ...],
                 examples: tuple[tuple[str, str], ...], n: int, gendered: frozenset[str] = frozenset()) -> str:
    """An instruction or label repeated, or ``n`` words in a row from the prompt that the input lacks
    (``ws``: the output's words).

    A worked example counts only when its sentence is unlike the input: for an input that *is* the example's
    sentence (genders aside), an answer like the example's is a fine answer.
    """
    if (":" in text or may_match(text[:12], ("rephrase", "rewrite", "paraphrase", "reword", "please"))) and (
            _ECHO.search(text)):
        return "prompt-echo: instruction or label"
    if len(ws) < n or not (prompt_texts or examples):
        return ""
    grams = _echo_grams(source_words, prompt_texts, examples, n, gendered)
    for i in range(len(ws) - n + 1):
        g = tuple(ws[i: i + n])
        if g in grams:
            return f"prompt-echo: '{' '.join(g)}'"
    return ""


_LABEL = re.compile(r"^\s*([A-Z][^\s:.!?]*(?:\s+[^\s:.!?]+){0,4}):\s+\S")


def meta_problem(text: str, source: str, source_words: frozenset[str], words_: Sequence[str] = ()) -> str:
    m = (_META.search(text) if may_match(text, _META_KEYS) else None) or (
        None if {"i", "my", "me"} & source_words or (words_ and "i" not in words_) else _META_I.search(text))
    if m and not (_META.search(source) or _META_I.search(source)):
        return f"meta: '{m.group(0).strip()}'"
    label = _LABEL.match(text) if ":" in text[:60] else None
    if label and label.group(1) not in source:  # "The Greatest Race-A-Day: On his trials, ..."
        return f"meta: leading label '{label.group(1)}:'"
    return ""


def special_token_problem(text: str, source: str) -> str:
    if "<" not in text and "[" not in text and not may_match(text[:8], ("assistant", "user", "system")):
        return ""
    found = [t for t in _SPECIAL.findall(text) if t not in source]
    return f"special-token: {found[0].strip()}" if found else ""


def truncation_problem(text: str, ws: Sequence[str], raw: str, finish_reason: str | None,
                       source_ends_sentence: bool) -> str:
    t = text.rstrip()
    ended = t.endswith((".", "!", "?", '"', "”", "'", "’", ")", "…", "]", "»"))
    if finish_reason == "length" and not ended and _items(raw) and _items(raw)[-1].rstrip().endswith(t[-20:]):
        return "truncated: token limit"
    if ws and ws[-1] in _DANGLING and not t.endswith((".", "!", "?")):
        return f"truncated: ends on '{ws[-1]}'"
    if source_ends_sentence and not ended:
        return "truncated: no final punctuation"
    for o, c in _OPENERS.items():
        if t.count(o) > t.count(c):
            return f"truncated: unclosed {o}"
    return ""


def length_problem(text: str, source: str, lo: float, hi: float) -> str:
    ratio = len(text) / max(1, len(source))
    if ratio < lo:
        return f"too-short: {ratio:.2f}x input"
    if ratio > hi:
        return f"too-long: {ratio:.2f}x input"
    return ""


def first(problems: Iterable[str]) -> list[str]:
    """The non-empty reasons."""
    return [p for p in problems if p]
