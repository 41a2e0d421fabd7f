"""Counterfactuals for n-ary attributes: every group of a sentence mapped to another group, consistently.

Two mappings (``cda.mapping``):

* ``permutations`` (default, deterministic): one counterfactual per other group. With groups ``0..n-1``,
  counterfactual *k* (k = 1..n-1) maps group *i* to group *(i + k) mod n*: a sentence about one group is written
  once for each of the others, and a sentence that names two groups keeps them distinct (each shift is a
  permutation without a fixed point). Words are matched as the gender swapper matches them: whole words, any of
  lower, Title and UPPER case (copied onto the replacement, part by part for multi-word terms), possessives and
  punctuation kept, multi-word terms before their parts.
* ``bias-bench`` (McGill-NLP/bias-bench's ``ternary_counterfactual_augmentation``, reproduced): one
  counterfactual per sentence; for each group *i* a random other group is drawn (``random.choice`` of the other
  indices in order, from a generator seeded with ``run.seed`` and the row id), independently per group, so two
  groups may map to the same one; the sentence is split on whitespace and a token is replaced when it equals a
  row's word exactly (case-sensitive) or that word followed by one of ``. , ? ! ; :``; when a token is in several
  rows the last row wins; the output is the tokens joined by single spaces. No sense rules apply.

Which occurrences count (``permutations`` only; ``cda.ambiguous`` = ``person``, the default):

* a **name**: an attribute word inside a capitalised name is left alone: the next word is capitalised and is
  neither an attribute word nor a word for people (``Black Sea``, ``Asian Games``, ``Christian Dior``), or the
  previous word is capitalised inside the sentence (``North African``, ``Hans Christian``), or a word written
  lower-case in running text (``church``) is capitalised inside the sentence (``St Mary's Church``);
* an **ambiguous** word (the lexicon's ``ambiguous``: ``black``, ``white`` as colours) counts only where it refers
  to people: followed by a word for people (:data:`PEOPLE`: ``women``, ``voters``, ``community``, ``Americans``
  ...), possibly through a coordination of attribute words (``black and white residents``) and at most one
  modifier of :data:`PERSON_MODIFIERS` (``black female students``), or after a copula whose subject is a pronoun
  or a word for people (``his mother was white``), or compounded with a people suffix (``Black-owned``), or
  capitalised inside a sentence before a lower-case word (``a Black lawyer``: the race is capitalised there, a colour
  is not, and a name goes on with a capital: ``Black Sea``).
  ``white wine``, ``a black cat``, ``black-and-white film`` and ``White House`` stay.

* an **origin adjective** (the lexicon's ``origin``: ``African``, ``European``, ``Asian``) counts unless it qualifies a
  thing or a place: it counts standing alone (``an Asian``, ``the japanese asian went``), before a word for people
  or ancestry (past a list of group and nationality words: ``European, American and African collectors``; past one
  or two modifiers: ``the Asian medical student``), before a community's place or thing (:data:`COMMUNITY`: ``the
  African shop``, ``an Asian neighbourhood``), after a copula with a person for its subject (``he is Asian and
  nerdy``) or in ``-born``; ``Asian elephants``, ``European waters`` and ``an African nation`` stay. The colour words
  also count before a community's place with no colour idiom (:data:`AMBIGUOUS_PLACES`), as a noun before a modal
  (``a white would``) and after a negated or contracted copula; not in a comparison (``black as the night``). The
  people nouns ``blacks`` / ``whites`` count unless they are tones or things (``the whites of``, ``egg whites``, a
  sentence about paint, light or images: :data:`COLOUR_CONTEXT`);
* an **observance** (the lexicon's ``companions``: ``Passover``, ``Easter``, ``Ramadan``) is swapped with the group
  words of its sentence and never on its own: a sentence whose only words are observances names no group;
* a sentence that cannot be swapped as a **unit** is left alone whole (reason ``bound``): it holds a word bound to one
  group (the lexicon's ``bound``: ``Catholic``, ``Talmud``; reported as ``no-counterpart``), or a group word inside a
  name (not a first name, not a colour, not an observance) beside a swappable word of the same group (``the Jewish
  Federation`` and ``the synagogue``).

``cda.ambiguous: swap`` swaps every occurrence (no sense or unit rules), ``skip`` never swaps the ambiguous words.
Every occurrence left alone is reported with its reason (``name``, ``not-a-person``, ``bound``; the bound words as
``no-counterpart``), and the ingest and cda stages count them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..attributes import CLOSED_CLASS
from .groups import SPELLING, GroupLexicon
from .swap import Counterfactual, SwapResult, _trie_pattern

#: nouns for people (singular; plurals and possessives are derived): they make an ambiguous colour word a race word
_PEOPLE_SINGULAR = """
person man woman boy girl child kid baby youth teen teenager adult family community population resident citizen voter
student pupil worker employee player athlete actor actress artist writer author musician singer leader politician
candidate officer soldier veteran neighbor neighbour couple parent mother father son daughter customer patient doctor
nurse teacher professor farmer civilian settler immigrant refugee american briton neighborhood neighbourhood
congregation church school college culture history identity voice owner business journalist lawyer judge juror
suspect victim defendant applicant male female individual guy lady gentleman colleague friend grandmother grandfather
grandparent wife husband sister brother aunt uncle cousin nephew niece engineer technician scientist manager executive
employer staff clerk driver police policeman policewoman scholar priest clergy member delegate representative pilot
firefighter surgeon lawmaker activist protester inmate prisoner troop novelist poet comedian volunteer violinist
pianist captain coach photographer reporter editor mayor governor senator president minister councillor councilor
boxer sculptor painter dancer chef cook baker tailor carpenter mechanic plumber electrician janitor cleaner guard
sheriff detective lawman attorney banker accountant architect dentist pharmacist therapist counselor counsellor
psychologist librarian secretary receptionist cashier salesperson supervisor analyst designer developer programmer
entrepreneur shopkeeper merchant trader landlord tenant homeowner household crew team club union party congregant
parishioner worshipper believer pastor preacher missionary monk nun bishop student-athlete fan audience crowd
generation majority minority man's woman's collector explorer colonist colonizer coloniser migrant emigrant slave
servant descendant ancestor native tribe laborer labourer miner sailor nobleman aristocrat peasant pioneer diplomat
traveler traveller tourist visitor pilgrim convert trader intellectual elite
gardener official shopper consumer buyer taxpayer commuter passenger pedestrian motorist rider renter borrower lender
investor professional academic researcher physician caregiver midwife graduate undergraduate freshman senior junior
toddler infant newborn mom mum dad dude bride groom spouse partner boyfriend girlfriend classmate roommate coworker
co-worker elder retiree pensioner heroine survivor inventor founder vendor peddler businessman businesswoman salesman
theologian cleric worshiper protestor demonstrator rioter gang gangster thug dealer criminal offender convict felon
terrorist extremist militant fundamentalist radical fighter rebel insurgent gunman foreigner stranger outsider local
inhabitant national expatriate expat supporter follower adherent constituent legislator congressman congresswoman
councilman cop rapper model celebrity filmmaker director producer nanny maid housekeeper housewife farmworker runner
swimmer golfer footballer cricketer wrestler sprinter waiter waitress bartender homemaker caretaker guardian orphan
widow widower heir heiress schoolboy schoolgirl schoolchild youngster adolescent newcomer
reveller reveler partygoer roisterer hacker gamer blogger vlogger influencer
muslim jew christian hindu sikh buddhist catholic protestant
descent ancestry origin heritage extraction lineage parentage background roots ethnicity
"""


def _plural(w: str) -> str:
    if w.endswith("man") and w not in ("human",):
        return w[:-3] + "men"
    if w.endswith("wife"):
        return w[:-2] + "ves"
    if w in ("child", "person", "staff", "police", "clergy", "crew", "audience", "crowd", "youth", "schoolchild",
             "roots"):
        return {"child": "children", "person": "people", "schoolchild": "schoolchildren", "youth": "youths"}.get(w, w)
    if w.endswith("y") and w[-2:-1] not in "aeiou":
        return w[:-1] + "ies"
    if w.endswith(("s", "x", "ch", "sh")):
        return w + "es"
    return w + "s"


def _people(singulars: str) -> frozenset[str]:
    out: set[str] = set()
    for w in singulars.split():
        for form in (w, _plural(w)):
            out |= {form, form + "'s", form + "'", form + "’s"}
    return frozenset(out | {"persons", "folks", "folk", "kinfolk"})


#: words for people (and groups of people) that make an ambiguous colour word a race word
PEOPLE: frozenset[str] = _people(_PEOPLE_SINGULAR) | {"alumni", "alumnus", "heroes"}
#: things and places of a community that a group adjective names as the community's own (``the African shop``, ``an
#: Asian neighbourhood``, ``Asian food``): they make an origin adjective a word for people, as a word for people does
_COMMUNITY_SINGULAR = """
shop store grocery grocer supermarket restaurant cafe café bakery deli takeaway eatery diner salon barbershop boutique
bookshop bookstore neighbourhood neighborhood district quarter enclave ghetto barrio hood suburb township festival
parade carnival wedding funeral cemetery graveyard temple centre center association organisation organization
society charity fraternity sorority food cuisine dish tradition custom
"""
COMMUNITY: frozenset[str] = _people(_COMMUNITY_SINGULAR) | {"foods", "dishes"}
#: the community words a colour word takes as the race without a capital (``black neighbourhoods``, ``white-run
#: shops``): those with no colour idiom (not ``white wedding``, ``black hood``, ``white food``)
AMBIGUOUS_PLACES: frozenset[str] = _people("""
shop store grocery supermarket restaurant cafe bakery deli takeaway eatery salon barbershop boutique bookshop
bookstore neighbourhood neighborhood enclave ghetto barrio suburb township cemetery graveyard association
organisation organization society charity fraternity sorority newspaper magazine radio
""")
#: modifiers that may stand between an ambiguous word and its people word (``black female students``)
PERSON_MODIFIERS: frozenset[str] = frozenset(
    "male female young old older elderly poor wealthy rich low-income working-class middle-class local rural urban "
    "gay lesbian queer transgender trans unarmed undocumented southern northern police working single married "
    "unemployed homeless disabled pregnant skilled unskilled educated college-educated first-generation "
    "second-generation middle-aged teenage retired professional small".split()
)
#: verbs that follow a plural or singular subject (``the Muslim seem to``): a group word before one is a noun
SUBJECT_VERBS: frozenset[str] = frozenset(
    "seem seems seemed believe believes believed know knows knew live lives lived pray prays prayed worship "
    "worships worshipped celebrate celebrates celebrated hate hates hated".split())
#: what follows a group word used as a noun for a person (``a white would``, ``the japanese asian went``): a modal,
#: an auxiliary of the perfect or a verb of saying and doing
NOUN_NEXT: frozenset[str] = frozenset(
    "would could can will shall should might must may did does had has said says went goes thought thinks wanted "
    "wants walked ran looked told asked came comes got".split())
#: hyphenated suffixes that make a compound about people (``Black-owned``)
PEOPLE_SUFFIXES: frozenset[str] = frozenset({"owned", "led", "majority", "run", "only"})
COPULAS: frozenset[str] = frozenset({"is", "was", "are", "were", "be", "been", "being", "became", "become", "seemed",
                                     "isn't", "wasn't", "aren't", "weren't"})
#: a pronoun and its copula in one token (``she's white``)
SUBJECT_COPULAS: frozenset[str] = frozenset({"he's", "she's", "they're", "i'm", "we're", "you're"})
SUBJECTS: frozenset[str] = frozenset({"he", "she", "they", "i", "we", "you", "who", "both", "all", "many", "most",
                                      "everyone", "everybody", "someone", "somebody", "nobody"})
ADVERBS: frozenset[str] = frozenset(
    "not also mostly mainly largely predominantly all both usually often always still very really quite so too "
    "typically generally primarily clearly obviously visibly half partly fully never just only probably".split())
COORDINATORS: frozenset[str] = frozenset({"and", "or", "&", ","})
#: ambiguous words that are plural nouns: people unless the sentence is about colours (:func:`_plural_about_people`)
PLURAL_NOUNS: frozenset[str] = frozenset({"blacks", "whites"})
#: words of a sentence about paint, light, images or things that are black or white: its blacks and whites are tones
COLOUR_CONTEXT: frozenset[str] = frozenset(
    "paint paints painting painted colour colours color colors tone tones shade shades hue hues light lights lighting "
    "lit contrast photograph photographs photography film films print prints ink pixel pixels image images screen "
    "egg eggs yolk yolks eye eyes chess snooker cricket wine wines pieces keys stripes feathers fur plumage".split())
#: words before ``whites`` / ``blacks`` that make them things (egg whites, cricket whites)
NOT_PEOPLE_BEFORE: frozenset[str] = frozenset({"egg", "eggs", "cricket", "tennis", "snooker"})
#: group words that are also first names: inside a name they say nothing about the sentence's group
FIRST_NAMES: frozenset[str] = frozenset({"christian"})

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’]*(?:-[A-Za-z][A-Za-z'’]*)*|[^\sA-Za-z]")
_BB_PUNCT = (".", ",", "?", "!", ";", ":")


@dataclass
class Hit:
    start: int
    end: int
    surface: str
    word: str  # lower-case lexicon word
    group: int
    role: str | None = None
    skip: str | None = None  # why it is left alone (name | not-a-person), None: swapped


def _title(w: str) -> str:
    """Every part capitalised: ``african-american`` -> ``African-American``."""
    return re.sub(r"(^|[\s-])([a-z])", lambda m: m.group(1) + m.group(2).upper(), w)


def _forms(w: str) -> tuple[str, ...]:
    """lower, Capitalised, Every-Part-Title (multi-word and hyphenated), UPPER."""
    return tuple(dict.fromkeys((w, w[:1].upper() + w[1:], _title(w), w.upper())))


def case_like(surface: str, target: str) -> str:
    """``target`` in the case pattern of ``surface`` (part by part for multi-word terms)."""
    letters = [c for c in surface if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return target.upper()
    parts = re.split(r"([\s-])", surface)
    words = [p for p in parts if p and p not in " -"]
    if len(words) > 1 and all(p[:1].isupper() for p in words):
        return _title(target)
    if surface[:1].isupper():
        return target[:1].upper() + target[1:]
    return target


class GroupSwapper:
    """Swap the groups of a :class:`~context_cda.cda.groups.GroupLexicon` in text (see the module docstring)."""

    def __init__(self, lexicon: GroupLexicon, mapping: str = "permutations", ambiguous: str = "person",
                 seed: int = 0) -> None:
        self.lexicon = lexicon
        self.mapping = mapping
        self.ambiguous = ambiguous
        self.seed = seed
        self.n = len(lexicon.groups)
        surface = {f for w in lexicon.words for f in _forms(w)} | {SPELLING[w] for w in lexicon.words if w in SPELLING}
        self._pattern = re.compile(r"(?<!\w)(?:" + _trie_pattern(surface) + r")(?!\w)")
        self._bb_table = self._bias_bench_table() if mapping == "bias-bench" else []
        #: words English always capitalises (everything but the ambiguous words and the lower-case nouns)
        self._proper = lexicon.words - lexicon.ambiguous - lexicon.common_nouns
        self._bound = _bound_pattern(lexicon)

    # -------------------------------------------------------------------------------------------- finding

    def scan(self, text: str) -> list[Hit]:
        """Every attribute word in ``text``, with its group and role and, when left alone, why."""
        return self._scan(text)[0]

    def _scan(self, text: str) -> tuple[list[Hit], list[str]]:
        """:meth:`scan`'s hits, and the bound words that left the sentence alone (none unless they did)."""
        if self.mapping == "bias-bench":
            return self._bb_hits(text), []
        hits = self._matches(text)
        if not hits:  # most sentences: no tokenising
            return hits, []
        ctx = _Context(text, [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)],
                       {h.start: h.end for h in hits})
        for h in hits:
            at, after = ctx.index(h.start), ctx.index(h.end, after=True)
            h.role = _role_of(ctx, at, after, h) if len(self.lexicon.roles(h.word)) > 1 else None
            h.skip = self._skip(ctx, at, after, h)
        if not any(h.skip is None and h.word not in self.lexicon.companions for h in hits):
            hits = [h for h in hits if h.word not in self.lexicon.companions]  # an observance names no group
        return hits, self._bind(text, hits)

    def bound_terms(self, text: str) -> list[str]:
        """The words of ``text`` bound to one group without a counterpart (:data:`~.groups.BOUND`), as written."""
        if self._bound is None or self.ambiguous == "swap":
            return []
        return [m.group(0) for m in self._bound.finditer(text)]

    def _bind(self, text: str, hits: list[Hit]) -> list[str]:
        """Leave the whole sentence alone (reason ``bound``) when it cannot be swapped as a coherent unit: it holds
        a word bound to one group (``Easter``, ``Catholic``), or a group word inside a name (``Jewish Federation``)
        beside a swappable word of the same group. Returns the bound words that did it."""
        live = [h for h in hits if h.skip is None]
        if not live:
            return []
        terms = self.bound_terms(text)
        named = {h.group for h in hits if h.skip == "name" and h.word not in self.lexicon.ambiguous
                 and h.word not in FIRST_NAMES and h.word not in self.lexicon.companions}
        if terms or any(h.group in named for h in live):
            for h in live:
                h.skip = "bound"
        return terms

    def find_terms(self, text: str) -> list[str]:
        """The attribute words of ``text`` that a counterfactual swaps (lower-case, in order)."""
        return [h.word for h in self.scan(text) if h.skip is None]

    def leftovers(self, original: str, counterfactual: str) -> int:
        """How many of ``original``'s swappable words the counterfactual still holds in their place (the cda
        boundary's check). The attribute words of both texts are paired in order (every occurrence, in or out of
        its sense: a counterfactual replaces words one for one); a swappable word of the original whose partner is
        the same word is left over, and so is every occurrence without a partner. The counterfactual's words are
        not re-judged by the sense rules (a ``Black`` put before ``volunteers`` is a swap)."""
        a = self.scan(original)
        b = self.scan(counterfactual) if self.mapping == "bias-bench" else self._matches(counterfactual)
        paired = sum(x.skip is None and x.word == y.word for x, y in zip(a, b, strict=False))
        return paired + abs(len(a) - len(b))

    def _matches(self, text: str) -> list[Hit]:
        caps = self.lexicon.capitalised
        return [Hit(m.start(), m.end(), m.group(0), m.group(0).lower(), self.lexicon.group[m.group(0).lower()])
                for m in self._pattern.finditer(text) if m.group(0) not in caps]  # "lent": the verb

    def skipped(self, text: str) -> list[tuple[str, str]]:
        """(surface, reason) of every attribute word left alone, then each bound word that left the sentence alone
        (reason ``no-counterpart``)."""
        hits, bound = self._scan(text)
        return [(h.surface, h.skip) for h in hits if h.skip] + [(w, "no-counterpart") for w in bound]

    # -------------------------------------------------------------------------------------------- rules

    def _skip(self, ctx: _Context, at: int, after: int, h: Hit) -> str | None:
        if self.ambiguous == "swap":
            return None
        if _in_name(ctx, at, after, h, self.lexicon.common_nouns):
            return "name"
        if h.word in self.lexicon.ambiguous:
            if self.ambiguous == "skip":
                return "not-a-person"
            people = _plural_about_people if h.word in PLURAL_NOUNS else _about_people
            return None if people(ctx, at, after, h) else "not-a-person"
        if h.word in self.lexicon.origin and not _origin_about_people(ctx, at, after, h):
            return "not-a-person"
        return None

    # -------------------------------------------------------------------------------------------- swapping

    def counterfactuals(self, text: str, row_id: str = "") -> tuple[list[Counterfactual], list[tuple[str, str]]]:
        """The counterfactuals of ``text`` (none when it has no swappable word) and the words left alone."""
        if self.mapping == "bias-bench":
            return self._bias_bench(text, row_id)
        hits, bound = self._scan(text)
        live = [h for h in hits if h.skip is None]
        skipped = [(h.surface, h.skip) for h in hits if h.skip] + [(w, "no-counterpart") for w in bound]
        if not live:
            return [], skipped
        out = []
        for k in range(1, self.n):
            mapping = {g: (g + k) % self.n for g in range(self.n)}
            out.append(Counterfactual(f"k{k}", self._apply(text, live, mapping), mapping))
        return out, skipped

    def _apply(self, text: str, hits: list[Hit], mapping: dict[int, int]) -> SwapResult:
        from .neutral import fix_article

        pieces, swaps, pos = [], [], 0
        for h in hits:
            target = self.lexicon.counterpart(h.word, mapping[h.group], h.role)
            new = case_like(h.surface, target)
            if target in self._proper and not new.isupper():  # Asian, Yom Kippur: capitalised wherever they stand
                new = _title(target)
            if target in SPELLING and not new.isupper():  # Eid al-Fitr
                new = SPELLING[target]
            pieces += [fix_article(text[pos:h.start], new), new]
            swaps.append((h.surface, new))
            pos = h.end
        pieces.append(text[pos:])
        return SwapResult("".join(pieces), swaps)

    def direction(self, swaps: list[tuple[str, str]]) -> str:
        """``black->white`` (every swap between the same two groups), ``mixed`` or ``none``."""
        pairs = set()
        for a, b in swaps:
            ga, gb = self._group_of(a), self._group_of(b)
            if ga is not None and gb is not None:
                pairs.add(f"{self.lexicon.groups[ga]}->{self.lexicon.groups[gb]}")
        if not pairs:
            return "none"
        return pairs.pop() if len(pairs) == 1 else "mixed"

    def _group_of(self, surface: str) -> int | None:
        w = surface.lower()
        if self.mapping == "bias-bench":
            w = w.rstrip("".join(_BB_PUNCT))
        return self.lexicon.group.get(w)

    # -------------------------------------------------------------------------------------------- bias-bench

    def _bias_bench_table(self) -> list[tuple[str, ...]]:
        """bias-bench's ``_create_bias_attribute_words``: the rows, then every row with each punctuation mark
        appended (rows in file order, punctuation in its order)."""
        rows = [r.words for r in self.lexicon.rows]
        return rows + [tuple(w + p for w in r) for p in _BB_PUNCT for r in rows]

    def _bb_hits(self, text: str) -> list[Hit]:
        hits, pos = [], 0
        for tok in text.split():
            start = text.index(tok, pos)
            pos = start + len(tok)
            g = next((g for row in self._bb_table for g, w in enumerate(row) if w == tok), None)
            if g is not None:
                hits.append(Hit(start, pos, tok, tok.rstrip("".join(_BB_PUNCT)), g))
        return hits

    def _bias_bench(self, text: str, row_id: str) -> tuple[list[Counterfactual], list[tuple[str, str]]]:
        rng = random.Random(f"{self.seed}:{row_id}")
        choice = {i: rng.choice([j for j in range(self.n) if j != i]) for i in range(self.n)}
        words = text.split()
        out = list(words)
        swaps: list[tuple[str, str]] = []
        for position, word in enumerate(words):
            new = None
            for row in self._bb_table:  # every row, every group: the last match wins, as there
                for g, w in enumerate(row):
                    if w == word:
                        new = row[choice[g]]
            if new is not None:
                out[position] = new
                swaps.append((word, new))
        if not swaps:
            return [], []
        return [Counterfactual("bias-bench", SwapResult(" ".join(out), swaps), choice)], []


# ------------------------------------------------------------------------------------------------ token helpers

#: capitalised nationality words that may precede or follow an attribute word without making a name
DEMONYM = re.compile(r"(?:an|ans|ian|ians|ish|ese|i|is|ist|ists)$")  # American, Jewish, Israeli, Baptist ...
#: capitalised words that qualify a group word without making a name (denominations, directions of a faith)
QUALIFIERS: frozenset[str] = frozenset({"catholic", "catholics", "orthodox", "protestant", "protestants", "evangelical",
                                        "evangelicals", "sunni", "shia", "shiite", "reform", "conservative"})
DETERMINERS: frozenset[str] = frozenset({"a", "an", "the", "every", "each", "one", "no", "any", "another", "this",
                                         "that", "devout", "practising", "practicing", "observant", "fellow"})


@dataclass
class _Context:
    """The tokens of a text and where its attribute words are (token start offset -> end offset)."""

    text: str
    tokens: list[tuple[int, int, str]]
    ends: dict[int, int]

    def index(self, offset: int, after: bool = False) -> int:
        """The token holding ``offset`` (``after``: the first token starting at or after it)."""
        for i, (s, e, _) in enumerate(self.tokens):
            if (s >= offset) if after else (s <= offset < e):
                return i
        return len(self.tokens)

    def word(self, i: int) -> str | None:
        return self.tokens[i][2] if 0 <= i < len(self.tokens) else None

    def is_term(self, i: int) -> bool:
        return 0 <= i < len(self.tokens) and self.tokens[i][0] in self.ends

    def sentence_initial(self, i: int) -> bool:
        """No word before token ``i`` in its sentence (only quotes or brackets)."""
        j = i - 1
        while j >= 0 and not self.tokens[j][2][0].isalnum():
            if self.tokens[j][2] in ".!?":
                return True
            j -= 1
        return j < 0

    def chain_end(self, i: int) -> int:
        """From token ``i`` (just after an attribute word), past a coordination of further attribute words
        (``and white people`` -> the index of ``people``)."""
        while (i + 1 < len(self.tokens) and self.tokens[i][2].lower() in COORDINATORS and self.is_term(i + 1)):
            i = self.index(self.ends[self.tokens[i + 1][0]], after=True)
        return i


def _capitalised_other(ctx: _Context, i: int) -> bool:
    """Token ``i`` is a capitalised word that is neither an attribute word, a word for people nor a demonym."""
    w = ctx.word(i)
    low = w.lower().replace("’", "'") if w else ""
    return bool(w and w[0].isupper() and not ctx.is_term(i) and low not in PEOPLE and w != "I"
                and low not in QUALIFIERS and not DEMONYM.search(low) and not low.endswith(("'s", "'")))


#: words that often open a sentence before an attribute word without being a name (``Many Asian families``)
OPENERS: frozenset[str] = frozenset(
    "many most several few other others two three four five six seven eight nine ten first last new old former "
    "early late more fewer unlike like although because when while after before during since within among amongst "
    "across despite throughout toward towards upon beyond inside outside near".split())


def _opens_sentence_as_name(ctx: _Context, i: int, before_people: bool = False) -> bool:
    """Token ``i`` opens its sentence and reads as the first part of a name (``Dana White``), not as a function
    word, a quantifier or a modifier (``The``, ``Many``, ``Young``, ``Historically``; before a word for people, a
    word formed as an adjective: ``Skilled Hispanic workers``, ``Devoted Muslim students``)."""
    w = ctx.word(i) or ""
    low = w.lower()
    adjectival = before_people and len(low) > 4 and low.endswith(("ed", "ing", "ous", "ful", "less"))
    return (ctx.sentence_initial(i) and _capitalised_other(ctx, i) and low not in CLOSED_CLASS and low not in OPENERS
            and low not in PERSON_MODIFIERS and low not in DETERMINERS and not low.endswith("ly") and not adjectival)


def _in_name(ctx: _Context, at: int, after: int, h: Hit, common: frozenset[str]) -> bool:
    before_people = (ctx.word(ctx.chain_end(after)) or "").lower() in PEOPLE
    if _capitalised_other(ctx, at - 1) and (not ctx.sentence_initial(at - 1)
                                            or _opens_sentence_as_name(ctx, at - 1, before_people)):
        return True
    if _capitalised_other(ctx, after) or _titled_people_word(ctx, after):
        return True
    return h.word in common and h.surface[:1].isupper() and not ctx.sentence_initial(at)


def _titled_people_word(ctx: _Context, i: int) -> bool:
    """Token ``i`` is a capitalised word for people followed by another capitalised word: a name (``Jewish Family
    Service``, ``Black Student Union``)."""
    w, nxt = ctx.word(i) or "", ctx.word(i + 1) or ""
    return (w[:1].isupper() and w.lower() in PEOPLE and nxt[:1].isupper() and nxt != "I" and not ctx.is_term(i + 1)
            and not ctx.sentence_initial(i + 1))


def _role_of(ctx: _Context, at: int, after: int, h: Hit) -> str:
    """adjective before a word that can start a noun phrase (past a coordination) or after a copula; noun
    after a determiner, before a possessive, or before punctuation, the end or a closed-class word."""
    if ctx.text[h.end:h.end + 1] in ("'", "’"):
        return "noun"
    prev = (ctx.word(at - 1) or "").lower()
    if prev in COPULAS or (prev in ADVERBS and (ctx.word(at - 2) or "").lower() in COPULAS):
        return "adjective"
    nxt = ctx.word(ctx.chain_end(after))
    if nxt is not None and nxt[0].isalpha() and nxt.lower() not in CLOSED_CLASS | NOUN_NEXT | SUBJECT_VERBS:
        return "adjective"
    return "noun"


def _about_people(ctx: _Context, at: int, after: int, h: Hit) -> bool:
    """An ambiguous word (``black``, ``white``) names people: in a people compound; not in a colour comparison
    (``black as the night``); capitalised inside a sentence before a lower-case word; before a word for people or a
    community's place (past one modifier); as a noun after a determiner and before a modal or a verb (``a white
    would``); or after a copula whose subject is a person (:func:`_after_copula`)."""
    if ctx.text[h.end:h.end + 1] == "-":  # a compound: Black-owned, black-and-white
        suffix = re.match(r"-([A-Za-z]+)", ctx.text[h.end:])
        return bool(suffix and suffix.group(1).lower() in PEOPLE_SUFFIXES)
    i = ctx.chain_end(after)
    nxt_word = ctx.word(i) or ""
    nxt = nxt_word.lower()
    if nxt == "as" and (ctx.word(i + 1) or "").lower() != "well":
        return False  # white as snow
    if h.surface[:1].isupper() and not ctx.sentence_initial(at) and nxt_word[:1].islower():
        return True  # Black / White capitalised inside a sentence before a common noun: the race (a name's next word
        # is capitalised: Black Sea, White House)
    if nxt in PERSON_MODIFIERS and nxt not in PEOPLE:
        nxt = (ctx.word(i + 1) or "").lower()
    if nxt in PEOPLE or nxt in AMBIGUOUS_PLACES:
        return True
    return (nxt in NOUN_NEXT and _after_determiner(ctx, at)) or _after_copula(ctx, at)


#: words before a group word used as a noun (``a white``, ``the angry white``)
NOUN_DETERMINERS: frozenset[str] = frozenset({"a", "an", "the", "this", "that", "every", "each", "one", "any",
                                              "another"})


def _after_determiner(ctx: _Context, at: int) -> bool:
    """Token ``at`` follows a determiner, directly or past one lower-case adjective (``An athletic black``)."""
    prev, before = (ctx.word(at - 1) or "").lower(), (ctx.word(at - 2) or "").lower()
    adjective = (ctx.word(at - 1) or "")[:1].islower() and prev not in CLOSED_CLASS
    return prev in NOUN_DETERMINERS or (adjective and before in NOUN_DETERMINERS)


def _after_copula(ctx: _Context, at: int) -> bool:
    """Token ``at`` follows a copula (past adverbs) whose subject is a pronoun or a word for people (``his mother
    was white``, ``she wasn't white enough``, ``he's Asian``)."""
    back = at - 1
    while back >= 0 and ctx.tokens[back][2].lower() in ADVERBS:
        back -= 1
    word = ctx.tokens[back][2].lower().replace("’", "'") if back >= 0 else ""
    if word in SUBJECT_COPULAS:
        return True
    if back >= 1 and word in COPULAS:
        subject = ctx.tokens[back - 1][2].lower()
        return subject in SUBJECTS or subject in PEOPLE
    return False


def _plural_about_people(ctx: _Context, at: int, after: int, h: Hit) -> bool:
    """``blacks`` / ``whites`` name people unless they are tones or things: ``the whites of``, ``egg whites``, or a
    sentence about paint, light or images (:data:`COLOUR_CONTEXT`: ``painting in the blacks and whites``)."""
    if (ctx.word(after) or "").lower() == "of" or (ctx.word(at - 1) or "").lower() in NOT_PEOPLE_BEFORE:
        return False
    return not any(t[2].lower() in COLOUR_CONTEXT for t in ctx.tokens)


def _past_qualifiers(ctx: _Context, i: int) -> int:
    """From token ``i``, past a list of further group words and capitalised nationality words (``, American and
    African collectors`` -> the index of ``collectors``)."""
    while i < len(ctx.tokens):
        start, _, w = ctx.tokens[i]
        if start in ctx.ends:
            i = ctx.index(ctx.ends[start], after=True)
        elif w.lower() in COORDINATORS or (w[:1].isupper() and DEMONYM.search(w.lower())):
            i += 1
        else:
            break
    return i


def _origin_about_people(ctx: _Context, at: int, after: int, h: Hit) -> bool:
    """An origin adjective (``African``, ``European``, ``Asian``) is about people unless it qualifies a thing or a
    place: people when it stands alone (``an Asian``, ``were Asian.``, ``the first Asian to``, ``the japanese asian
    went``), before a word for people or ancestry (past a list of group and nationality words and one or two
    modifiers: ``European, American and African collectors``, ``the Asian medical student``) or a community's place
    or thing (``the African shop``, ``an Asian neighbourhood``, ``Asian food``), after a copula with a person for its
    subject (``he is Asian and nerdy``), or in a people compound (``African-born``); not before any other word
    (``European waters``, ``Asian elephants``, ``Latin American countries``, ``an African nation``)."""
    rest = ctx.text[h.end:]
    if rest[:1] == "-":
        suffix = re.match(r"-([A-Za-z]+)", rest)
        return bool(suffix and suffix.group(1).lower() in PEOPLE_SUFFIXES | {"born"})
    i = _past_qualifiers(ctx, after)
    nxt = ctx.word(i)
    if nxt is None or not nxt[0].isalpha() or nxt.lower() in CLOSED_CLASS:
        return True
    low = nxt.lower()
    if low in PERSON_MODIFIERS and low not in PEOPLE:
        low = (ctx.word(i + 1) or "").lower()
    if low in PEOPLE or low in COMMUNITY or low in NOUN_NEXT or _people_past_modifiers(ctx, i):
        return True
    return _after_copula(ctx, at)


def _people_past_modifiers(ctx: _Context, i: int, most: int = 2) -> bool:
    """Tokens ``i`` ... are at most ``most`` lower-case modifiers followed by a word for people (``medical
    student``, ``football player``)."""
    for j in range(i, i + most):
        w = ctx.word(j) or ""
        if not w[:1].islower() or w.lower() in CLOSED_CLASS or ctx.is_term(j):
            return False
        if (ctx.word(j + 1) or "").lower() in PEOPLE:
            return True
    return False


def _bound_pattern(lexicon: GroupLexicon) -> re.Pattern[str] | None:
    """One pattern for the lexicon's bound words and phrases (any case), :data:`~.groups.BOUND_CAPITALISED` (only
    capitalised) and :data:`~.groups.BOUND_BEFORE` (a denomination's word before a word of its community)."""
    from .groups import BOUND_BEFORE, BOUND_CAPITALISED

    def alternation(words) -> str:
        return "|".join(r"\s+".join(map(re.escape, w.split())) for w in sorted(words, key=len, reverse=True))

    parts = [f"(?i:{alternation(lexicon.bound)})"] if lexicon.bound else []
    caps = BOUND_CAPITALISED.get(lexicon.attribute, frozenset())
    parts += [alternation(w.capitalize() for w in caps)] if caps else []
    before = BOUND_BEFORE.get(lexicon.attribute)
    parts += [rf"(?i:(?:{alternation(before[0])})\s+(?:{alternation(before[1])}))"] if before else []
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)") if parts else None
