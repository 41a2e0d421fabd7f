"""Clean a generated rephrasing before it is reviewed.

:func:`clean` strips what chat models wrap around an answer (preambles such as "Here is the rephrased sentence:",
quotes, markdown, trailing notes, leaked end-of-turn tokens). Whether the cleaned text is acceptable is decided by
:func:`context_cda.augment.checks.review` only.
"""

from __future__ import annotations

import re

from ...generation.base import SPECIAL_STOP_TOKENS

_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok|absolutely)[!,.]?\s*)?"
    r"(?:(?:here(?:'s| is| are)|this is|below is)\b[^:\n]{0,80}[:\n]"
    r"|(?:rephrased|rephrasing|paraphrased?|rewritten|revised|new|output|answer|result|contextual|sentence|text)"
    r"[^:\n]{0,30}:)\s*",
    re.IGNORECASE,
)
_LEADING_ACK = re.compile(r"^\s*(?:sure|certainly|of course|okay|absolutely)[!.,]\s*", re.IGNORECASE)
_TRAILING_NOTE = re.compile(
    r"\s*(?:\(|\[)?\b(?:note|explanation|this (?:rephrased|rewritten|revised|sentence|version)|i (?:have|kept|added|"
    r"changed|made|hope)|the (?:rephrased|rewritten|revised) sentence)\b.*$",
    re.IGNORECASE | re.DOTALL,
)
_MARKDOWN = re.compile(r"(\*\*|__|`+|^#+\s*|^\s*[-*•]\s+|^\s*\d+[.)]\s+)", re.MULTILINE)
_BOUNDARY = re.compile(r"(?<=[.!?\"”])\s+(?=[(\[A-Z])")
_QUOTES = "\"'“”‘’«»"


def clean(text: str) -> str:
    """Strip preambles, quotes, markdown, leaked special tokens and trailing commentary; keep one paragraph."""
    t = text or ""
    for tok in SPECIAL_STOP_TOKENS:
        t = t.replace(tok, "\n\n")
    t = t.strip()
    t = _LEADING_ACK.sub("", t) if not _PREAMBLE.match(t) else t
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", t) if p.strip()]
    # a lead-in paragraph ("To make it more vivid, I'll rephrase it:") is not the answer: skip to the next one
    while len(paragraphs) > 1 and (paragraphs[0].endswith(":") or not _PREAMBLE.sub("", paragraphs[0]).strip()):
        paragraphs.pop(0)
    t = _PREAMBLE.sub("", paragraphs[0], count=1).strip() if paragraphs else ""
    t = t.split("\n\n")[0]
    t = _MARKDOWN.sub("", t)
    t = " ".join(t.split())
    # a note after the sentence ("... spring. Note: I kept ...", "... spring. (I added ...)")
    for m in _BOUNDARY.finditer(t):
        if _TRAILING_NOTE.match(t[m.end():]):
            t = t[: m.start()]
            break
    return _strip_quotes(t.strip())


def _strip_quotes(t: str) -> str:
    """'"Text."' -> 'Text.'; '"Text".' -> 'Text.'; inner quotes stay."""
    while len(t) >= 2 and t[0] in _QUOTES:
        if t[-1] in _QUOTES:
            t = t[1:-1].strip()
        elif len(t) >= 3 and t[-1] in ".!?" and t[-2] in _QUOTES:
            t = (t[1:-2] + t[-1]).strip()
        else:
            break
    return t
