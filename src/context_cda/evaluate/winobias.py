"""WinoBias (Zhao et al., 2018) for language models: pro- vs anti-stereotyped coreference accuracy, type 1 and 2.

Each sentence names two occupations and a pronoun that refers to one of them (the bracketed mention); in the
*pro-stereotyped* files the pronoun's gender matches the occupation's U.S. majority, in the *anti-stereotyped*
files it does not, and line *i* of the two files is the same sentence with the pronoun's gender flipped. Type 1
sentences need world knowledge, type 2 sentences are resolvable by syntax.

The likelihood formulation is the Winograd substitution of Trinh & Le (2018), with partial scoring as
lm-evaluation-harness's ``winogrande`` task uses it: the first bracketed pronoun is replaced by each occupation
(``the designer``; ``the designer's`` for a possessive his/her), and the candidate whose context makes the rest
of the sentence more likely (summed log-likelihood of the unchanged continuation, :mod:`.choice`) is the
model's answer. A tie is a wrong answer. Masked LMs score the continuation by its pseudo-log-likelihood.

Metrics (percent): the accuracy on pro and anti sentences of each type, and the gaps pro - anti (0 ideal: a
model that resolves pronouns regardless of stereotypes); intervals: seeded bootstrap over pro/anti sentence
pairs, within their type. The harness itself has no WinoBias task of this kind (its
``inverse_scaling_winobias_antistereotype`` is another dataset), so there is no per-item reference to compare.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..io import read_text

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..scoring import Scorer
    from .stats import Items, Means, Settings

KINDS = ("pro", "anti")
TYPES = (1, 2)
PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
OCCUPATION_FILES = ("male_occupations.txt", "female_occupations.txt")
_LINE = re.compile(r"^(\d+)\s+(\S.*)$")
_SPAN = re.compile(r"\[([^\[\]]+)\]")
_DET = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


def file_name(kind: str, typ: int, split: str) -> str:
    return f"{kind}_stereotyped_type{typ}.txt.{split}"


@dataclass(frozen=True)
class WinoBiasItem:
    id: str  # type1/test/12/pro
    pair: str  # type1/test/12 (the pro and anti sentence of one line)
    kind: str  # pro | anti
    type: int
    sentence: str  # brackets removed
    gold: str  # the occupation the pronoun refers to
    other: str
    prefix: str  # the sentence before the resolved pronoun
    pronoun: str
    rest: str  # the sentence after it
    possessive: bool
    source: str

    def candidate(self, occupation: str) -> str:
        """The sentence up to the pronoun, with ``the <occupation>`` (``'s`` for a possessive) in its place."""
        return f"{self.prefix}the {occupation}" + ("'s" if self.possessive else "")


@dataclass(frozen=True)
class Rejected:
    """A sentence that cannot be scored (its reason given); it goes to the evaluate step's rejected table."""

    id: str
    source: str
    reason: str


def load_occupations(folder: Path) -> list[str]:
    out: list[str] = []
    for name in OCCUPATION_FILES:
        p = folder / name
        if not p.is_file():
            raise InputError(f"{p}: WinoBias occupation list not found (the folder needs {', '.join(OCCUPATION_FILES)} "
                             "beside the {pro,anti}_stereotyped_type{1,2}.txt.{dev,test} files).")
        words = [w.strip() for w in read_text(p, fix=_FIX).splitlines() if w.strip()]
        if not words:
            raise InputError(f"{p}: an empty occupation list; the second occupation of every sentence is looked up "
                             "there. Restore the file from the WinoBias repository.")
        out += words
    return sorted(set(out), key=len, reverse=True)


_FIX = "Save the WinoBias files as UTF-8."


def load(folder: str | Path, split: str = "test") -> list[WinoBiasItem | Rejected]:
    """Every sentence of the four files of ``split``: an item, or :class:`Rejected` when its second occupation
    cannot be told. Stops with an :class:`~context_cda.errors.InputError` naming the file and line: a file of
    another shape or with no sentences, a sentence number or a sentence given twice in one file, a pro sentence
    without its anti sentence (or the other way round) or a pair whose two sentences name different occupations."""
    folder = Path(folder)
    if folder.is_file():
        folder = folder.parent
    occupations = load_occupations(folder)
    items: list[WinoBiasItem | Rejected] = []
    for typ in TYPES:
        files = {kind: _read_file(folder / file_name(kind, typ, split), kind, typ, split, occupations)
                 for kind in KINDS}
        _check_pairs(files, folder, typ, split)
        items += [it for kind in KINDS for it in files[kind].values()]
    return items


def _read_file(path: Path, kind: str, typ: int, split: str, occupations: Sequence[str]
               ) -> dict[str, WinoBiasItem | Rejected]:
    """pair id -> the file's sentence of that pair, in file order; a number or a sentence given twice refused."""
    if not path.is_file():
        raise InputError(f"{path}: WinoBias file not found (evaluate.winobias.split={split}; the folder needs "
                         f"{file_name('pro', 1, split)} and its three siblings).")
    out: dict[str, WinoBiasItem | Rejected] = {}
    lines: dict[str, int] = {}
    texts: dict[str, int] = {}
    for line_no, text in enumerate(read_text(path, fix=_FIX).splitlines(), start=1):
        if not text.strip():
            continue
        it = _parse(text, line_no, path, kind, typ, split, occupations)
        pair = _pair(it)
        body = _LINE.match(text.strip()).group(2).strip()  # type: ignore[union-attr]  # _parse checked the shape
        for seen, key, what in ((lines, pair, f"sentence number {pair.rsplit('/', 1)[1]}"),
                                (texts, body, f"the sentence {body[:60]!r}")):
            if key in seen:
                raise InputError(f"{path}:{line_no}: {what} given twice (first at line {seen[key]}); each sentence "
                                 "must appear once, or it is scored twice. Remove one of the two.")
            seen[key] = line_no
        out[pair] = it
    if not out:
        raise InputError(f"{path}: no sentences; the benchmark needs all four files of the split (pro and anti, types "
                         "1 and 2). Restore it from the WinoBias repository.")
    return out


def _check_pairs(files: Mapping[str, Mapping[str, WinoBiasItem | Rejected]], folder: Path, typ: int,
                 split: str) -> None:
    """Line N of the pro file and line N of the anti file are one sentence with the pronoun's gender flipped: each
    number in both files, the same occupation resolved in both (the pro - anti gap compares them)."""
    for kind, other in (KINDS, KINDS[::-1]):
        alone = [p for p in files[kind] if p not in files[other]]
        if alone:
            first = files[kind][alone[0]]
            raise InputError(
                f"{folder / first.source}: sentence {alone[0].rsplit('/', 1)[1]} has no {other}-stereotyped "
                f"counterpart in {file_name(other, typ, split)} ({len(alone)} of {len(files[kind])} {kind} sentences "
                f"unpaired; that file has {len(files[other])}). The two files must hold the same sentence numbers: "
                "restore the missing lines.")
    for pair, pro in files["pro"].items():
        anti = files["anti"][pair]
        if isinstance(pro, WinoBiasItem) and isinstance(anti, WinoBiasItem) and {pro.gold, pro.other} != {
                anti.gold, anti.other}:
            raise InputError(f"{folder / anti.source}: sentence {pair.rsplit('/', 1)[1]} is about {anti.gold!r} and "
                             f"{anti.other!r}, and its pro-stereotyped counterpart ({pro.source}) about {pro.gold!r} "
                             f"and {pro.other!r}: not one sentence pair. Line N of the two files must be the same "
                             "sentence with the pronoun flipped.")


def _parse(text: str, line_no: int, path: Path, kind: str, typ: int, split: str,
           occupations: Sequence[str]) -> WinoBiasItem | Rejected:
    m = _LINE.match(text.strip())
    spans = list(_SPAN.finditer(m.group(2))) if m else []
    pron = next((s for s in spans if s.group(1).strip().lower() in PRONOUNS), None)
    gold = next((s for s in spans if s.group(1).strip().lower() not in PRONOUNS), None)
    if m is None or pron is None or gold is None or gold.start() > pron.start():
        raise InputError(f"{path}:{line_no}: expected 'N sentence' with a bracketed mention before a bracketed "
                         f"pronoun (e.g. '1 [The developer] argued with the designer because [he] ...'), got "
                         f"{text.strip()[:80]!r}: not a WinoBias file.")
    body = m.group(2)
    plain = _SPAN.sub(lambda s: s.group(1), body)
    gold_occ = _DET.sub("", gold.group(1).strip()).lower()
    before = _SPAN.sub(lambda s: s.group(1), body[: pron.start()])
    others = [o for o in occupations if o.lower() != gold_occ and re.search(rf"\b{re.escape(o.lower())}\b",
                                                                             before.lower())]
    others = [o for o in others if not any(o != p and o.lower() in p.lower() for p in others)]
    ident = f"type{typ}/{split}/{m.group(1)}"
    if len(others) != 1:
        return Rejected(f"{ident}/{kind}", f"{path.name}:{line_no}",
                        f"{len(others)} other occupations before the pronoun ({', '.join(others) or 'none'})")
    rest = _SPAN.sub(lambda s: s.group(1), body[pron.end():])
    pronoun = pron.group(1).strip()
    return WinoBiasItem(f"{ident}/{kind}", ident, kind, typ, plain, gold_occ, others[0].lower(), before, pronoun,
                        rest, _possessive(pronoun, rest), f"{path.name}:{line_no}")


def _possessive(pronoun: str, rest: str) -> bool:
    """his, hers, and a her before a word that starts a noun phrase (the gender swapper's next-word rule)."""
    from ..attributes import CLOSED_CLASS

    p = pronoun.lower()
    if p in ("his", "hers"):
        return True
    if p != "her":
        return False
    nxt = re.match(r"\s*([A-Za-z][A-Za-z'-]*)", rest)
    return bool(nxt) and nxt.group(1).lower() not in CLOSED_CLASS


def load_options(cfg: Any) -> dict[str, Any]:
    """:func:`load`'s options from ``evaluate.winobias``: the split."""
    return {"split": cfg.split}


def info(cfg: Any) -> dict[str, Any]:
    """What the aggregate records about the formulation."""
    return {"split": cfg.split, "formulation": "Winograd substitution, partial scoring (Trinh & Le 2018)"}


def sample(items: Sequence[WinoBiasItem | Rejected], n: int | None, seed: int) -> list[WinoBiasItem | Rejected]:
    """A seeded sample of ``n`` pro/anti pairs per type (both sentences of each), in file order."""
    import random

    if n is None:
        return list(items)
    keep: set[str] = set()
    for typ in TYPES:
        pairs = list(dict.fromkeys(_pair(it) for it in items if _pair(it).startswith(f"type{typ}/")))
        keep |= set(random.Random(f"{seed}:{typ}").sample(pairs, min(n, len(pairs))))
    return [it for it in items if _pair(it) in keep]


def _pair(it: WinoBiasItem | Rejected) -> str:
    return it.pair if isinstance(it, WinoBiasItem) else it.id.rsplit("/", 1)[0]


# ------------------------------------------------------------------------------------------------ scoring


def score(scorer: Scorer, entries: Sequence[WinoBiasItem | Rejected]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One row per sentence: the continuation's log-likelihood after each candidate, and whether the gold
    occupation's is higher; the rejected sentences as rejected rows."""
    from .choice import continuation_logliks

    items = [it for it in entries if isinstance(it, WinoBiasItem)]
    rejected = [{"id": r.id, "source": r.source, "reason": r.reason} for r in entries if isinstance(r, Rejected)]
    contexts = [it.candidate(o) for it in items for o in (it.gold, it.other)]
    conts = [it.rest for it in items for _ in (0, 1)]
    lls = continuation_logliks(scorer, contexts, conts)
    rows = []
    for k, it in enumerate(items):
        g, o = lls[2 * k], lls[2 * k + 1]
        rows.append({"id": it.id, "pair": it.pair, "kind": it.kind, "type": it.type, "gold": it.gold,
                     "other": it.other, "pronoun": it.pronoun, "sentence": it.sentence, "ll_gold": g.sum,
                     "ll_other": o.sum, "n_tokens": g.n_tokens, "correct": int(g.sum > o.sum),
                     "tie": int(g.sum == o.sum)})
    return rows, rejected


def item_scores(rows: Iterable[Mapping[str, Any]]) -> Items:
    """One item per pro/anti pair, grouped by type: ``pro``/``anti`` correct (0/1) and ``has_pro``/``has_anti``."""
    from .stats import Items

    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = per.setdefault(str(r["pair"]), {"type": f"type{int(r['type'])}", "pro": 0.0, "anti": 0.0,
                                            "has_pro": 0.0, "has_anti": 0.0})
        d[r["kind"]] += float(r["correct"])
        d[f"has_{r['kind']}"] += 1.0
    cols = {k: [d[k] for d in per.values()] for k in ("pro", "anti", "has_pro", "has_anti")}
    return Items.build(list(per), [d["type"] for d in per.values()], **cols)


def metrics(m: Means) -> dict[str, np.ndarray]:
    out = {}
    for t in TYPES:
        for kind in KINDS:
            out[f"{kind}{t}"] = 100.0 * m.group(kind, f"has_{kind}", name=f"type{t}")
        out[f"gap{t}"] = out[f"pro{t}"] - out[f"anti{t}"]
    out["pro"] = 100.0 * m("pro", "has_pro")
    out["anti"] = 100.0 * m("anti", "has_anti")
    out["acc"] = (out["pro"] + out["anti"]) / 2.0
    out["gap"] = out["pro"] - out["anti"]
    return out


#: the pro - anti gaps are best at 0
IDEALS = {"gap": 0.0, "gap1": 0.0, "gap2": 0.0}


def aggregate(rows: Iterable[Mapping[str, Any]], bootstrap: Settings | Any = None) -> dict[str, Any]:
    """Pro and anti accuracy per type, their gaps and the means over types, with bootstrap intervals."""
    from .choice import point_and_intervals

    rows = list(rows)
    if not rows:
        return {"overall": {"count": 0}}
    items = item_scores(rows)
    overall = point_and_intervals(items, metrics, bootstrap)
    overall.update(count=len(rows), n_pairs=len(items), ties=int(sum(r.get("tie", 0) for r in rows)))
    return {"overall": overall}
