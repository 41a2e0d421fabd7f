"""Lexicon-only gender-neutral rewriting (``cda.mode: neutral``): singular *they* and neutral nouns.

The cheap baseline of the ``context-neutral`` arm (where an instruct LM rewrites the sentence). Rules:

* pronouns by role: ``he``/``she`` -> ``they``, ``him`` -> ``them``, ``his``/``her`` determiner -> ``their``,
  ``her`` object -> ``them`` (the gender swapper's next-word rule decides which ``her`` is which),
  ``his``/``hers`` standing alone -> ``theirs``, ``himself``/``herself`` -> ``themselves``; contractions follow
  (``he's`` -> ``they're``, or ``they've`` before a participle; ``she'll`` -> ``they'll``);
* **agreement** with a subject *they*: the verb after it (past adverbs such as *also*, *never*) moves to the
  plural: ``is/was/has/does`` -> ``are/were/have/do``, ``isn't`` -> ``aren't``, a present-tense verb loses its
  third-person ``-s`` (``walks`` -> ``walk``, ``carries`` -> ``carry``, ``watches`` -> ``watch``); past tenses and
  modals need nothing. Only the first verb after the pronoun is changed (``she walks and talks`` -> ``they walk
  and talks`` is a known miss);
* gendered nouns and titles -> neutral nouns of the same number (:data:`NEUTRAL`: ``chairman`` -> ``chairperson``,
  ``sister`` -> ``sibling``, ``mothers`` -> ``parents``, ``Mrs.`` -> ``Mx.``), with the article adjusted (``an
  uncle`` -> ``a relative``); case and possessives are kept as the swapper keeps them;
* lexicon words without a neutral form (``masculine``, ``sir``, ...) are left and listed, so the validation at
  the cda boundary quarantines the row (``gendered-word-left``) instead of training on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..attributes import CLOSED_CLASS
from .lexicon import Lexicon
from .swap import match_case

#: gendered noun (either gender) -> its neutral form (same number)
NEUTRAL: dict[str, str] = {
    **dict.fromkeys(("man", "woman", "gentleman", "lady", "guy", "gal"), "person"),
    **dict.fromkeys(("men", "women", "gentlemen", "ladies", "guys", "gals"), "people"),
    **dict.fromkeys(("boy", "girl", "son", "daughter"), "child"),
    **dict.fromkeys(("boys", "girls", "sons", "daughters"), "children"),
    **dict.fromkeys(("schoolboy", "schoolgirl"), "pupil"), **dict.fromkeys(("schoolboys", "schoolgirls"), "pupils"),
    **dict.fromkeys(("father", "mother", "dad", "mom", "daddy", "mommy", "papa", "mama"), "parent"),
    **dict.fromkeys(("fathers", "mothers", "dads", "moms", "daddies", "mommies"), "parents"),
    **dict.fromkeys(("grandfather", "grandmother", "grandpa", "grandma"), "grandparent"),
    **dict.fromkeys(("grandfathers", "grandmothers", "grandpas", "grandmas"), "grandparents"),
    **dict.fromkeys(("grandson", "granddaughter"), "grandchild"),
    **dict.fromkeys(("grandsons", "granddaughters"), "grandchildren"),
    **dict.fromkeys(("stepfather", "stepmother"), "stepparent"),
    **dict.fromkeys(("stepfathers", "stepmothers"), "stepparents"),
    **dict.fromkeys(("stepson", "stepdaughter"), "stepchild"),
    **dict.fromkeys(("stepsons", "stepdaughters"), "stepchildren"),
    **dict.fromkeys(("brother", "sister"), "sibling"), **dict.fromkeys(("brothers", "sisters"), "siblings"),
    **dict.fromkeys(("husband", "wife"), "spouse"), **dict.fromkeys(("husbands", "wives"), "spouses"),
    **dict.fromkeys(("uncle", "aunt", "nephew", "niece"), "relative"),
    **dict.fromkeys(("uncles", "aunts", "nephews", "nieces"), "relatives"),
    **dict.fromkeys(("boyfriend", "girlfriend", "fiance", "fiancee"), "partner"),
    **dict.fromkeys(("boyfriends", "girlfriends", "fiances", "fiancees"), "partners"),
    **dict.fromkeys(("groom", "bride"), "spouse"), **dict.fromkeys(("grooms", "brides"), "spouses"),
    **dict.fromkeys(("widower", "widow"), "widowed spouse"),
    **dict.fromkeys(("father-in-law", "mother-in-law"), "parent-in-law"),
    **dict.fromkeys(("son-in-law", "daughter-in-law"), "child-in-law"),
    **dict.fromkeys(("brother-in-law", "sister-in-law"), "sibling-in-law"),
    **dict.fromkeys(("fatherhood", "motherhood"), "parenthood"), **dict.fromkeys(("paternal", "maternal"), "parental"),
    **dict.fromkeys(("paternity", "maternity"), "parental"), **dict.fromkeys(("boyhood", "girlhood"), "childhood"),
    **dict.fromkeys(("brotherhood", "sisterhood"), "community"),
    **dict.fromkeys(("king", "queen"), "monarch"), **dict.fromkeys(("kings", "queens"), "monarchs"),
    **dict.fromkeys(("prince", "princess"), "royal"), **dict.fromkeys(("princes", "princesses"), "royals"),
    **dict.fromkeys(("emperor", "empress"), "ruler"), **dict.fromkeys(("emperors", "empresses"), "rulers"),
    **dict.fromkeys(("duke", "duchess", "baron", "baroness"), "noble"),
    **dict.fromkeys(("dukes", "duchesses", "barons", "baronesses"), "nobles"),
    **dict.fromkeys(("monk", "nun"), "monastic"), **dict.fromkeys(("monks", "nuns"), "monastics"),
    **dict.fromkeys(("priest", "priestess"), "priest"), **dict.fromkeys(("priests", "priestesses"), "priests"),
    **dict.fromkeys(("god", "goddess"), "deity"), **dict.fromkeys(("gods", "goddesses"), "deities"),
    **dict.fromkeys(("abbot", "abbess"), "superior"),
    **dict.fromkeys(("actor", "actress"), "actor"), **dict.fromkeys(("actors", "actresses"), "actors"),
    **dict.fromkeys(("waiter", "waitress"), "server"), **dict.fromkeys(("waiters", "waitresses"), "servers"),
    **dict.fromkeys(("steward", "stewardess"), "flight attendant"),
    **dict.fromkeys(("stewards", "stewardesses"), "flight attendants"),
    **dict.fromkeys(("hero", "heroine"), "hero"), **dict.fromkeys(("heroes", "heroines"), "heroes"),
    **dict.fromkeys(("heir", "heiress"), "heir"), **dict.fromkeys(("heirs", "heiresses"), "heirs"),
    **dict.fromkeys(("wizard", "witch"), "magician"), **dict.fromkeys(("wizards", "witches"), "magicians"),
    **dict.fromkeys(("headmaster", "headmistress"), "head teacher"),
    **dict.fromkeys(("headmasters", "headmistresses"), "head teachers"),
    **dict.fromkeys(("landlord", "landlady"), "landlord"), **dict.fromkeys(("landlords", "landladies"), "landlords"),
    **dict.fromkeys(("businessman", "businesswoman"), "businessperson"),
    **dict.fromkeys(("businessmen", "businesswomen"), "businesspeople"),
    **dict.fromkeys(("chairman", "chairwoman"), "chairperson"),
    **dict.fromkeys(("chairmen", "chairwomen"), "chairpersons"),
    **dict.fromkeys(("spokesman", "spokeswoman"), "spokesperson"),
    **dict.fromkeys(("spokesmen", "spokeswomen"), "spokespeople"),
    **dict.fromkeys(("congressman", "congresswoman"), "member of congress"),
    **dict.fromkeys(("congressmen", "congresswomen"), "members of congress"),
    **dict.fromkeys(("councilman", "councilwoman"), "councillor"),
    **dict.fromkeys(("councilmen", "councilwomen"), "councillors"),
    **dict.fromkeys(("policeman", "policewoman"), "police officer"),
    **dict.fromkeys(("policemen", "policewomen"), "police officers"),
    **dict.fromkeys(("salesman", "saleswoman"), "salesperson"),
    **dict.fromkeys(("salesmen", "saleswomen"), "salespeople"),
    **dict.fromkeys(("statesman", "stateswoman"), "politician"),
    **dict.fromkeys(("statesmen", "stateswomen"), "politicians"),
    **dict.fromkeys(("cameraman", "camerawoman"), "camera operator"),
    **dict.fromkeys(("cameramen", "camerawomen"), "camera operators"),
    **dict.fromkeys(("countryman", "countrywoman"), "compatriot"),
    **dict.fromkeys(("countrymen", "countrywomen"), "compatriots"),
    **dict.fromkeys(("sportsman", "sportswoman"), "athlete"),
    **dict.fromkeys(("sportsmen", "sportswomen"), "athletes"),
    **dict.fromkeys(("airman", "airwoman"), "aviator"), **dict.fromkeys(("airmen", "airwomen"), "aviators"),
    **dict.fromkeys(("horseman", "horsewoman"), "rider"), **dict.fromkeys(("horsemen", "horsewomen"), "riders"),
    **dict.fromkeys(("postman", "postwoman"), "mail carrier"),
    **dict.fromkeys(("cowboy", "cowgirl"), "rancher"), **dict.fromkeys(("cowboys", "cowgirls"), "ranchers"),
    **dict.fromkeys(("patriarch", "matriarch"), "elder"), **dict.fromkeys(("godfather", "godmother"), "godparent"),
    **dict.fromkeys(("fraternity", "sorority"), "society"),
    **dict.fromkeys(("fraternities", "sororities"), "societies"),
    **dict.fromkeys(("bachelor", "bachelorette"), "single person"),
    **dict.fromkeys(("mr", "mrs", "ms"), "mx"), **dict.fromkeys(("mr.", "mrs.", "ms."), "mx."),
}
#: pronouns whose neutral form needs no role (``her`` and ``his`` are decided by the next word)
PRONOUNS = {"he": "they", "she": "they", "him": "them", "hers": "theirs", "himself": "themselves",
            "herself": "themselves"}
SUBJECT = frozenset({"he", "she"})
#: verb forms after a subject ``they``
AGREEMENT = {"is": "are", "was": "were", "has": "have", "does": "do", "goes": "go", "isn't": "aren't",
             "wasn't": "weren't", "hasn't": "haven't", "doesn't": "don't", "says": "say"}
#: words that may stand between the pronoun and its verb
SKIP = frozenset("also never always often still just only then later soon now usually sometimes already even "
                 "really thus therefore eventually finally once again quickly immediately rarely seldom "
                 "frequently himself herself".split())
#: words after which ``'s`` is ``has`` (``he's been`` -> ``they've been``)
PARTICIPLES = frozenset("been gone got done had made seen taken become given known left written won lost "
                        "found told shown".split())
_NOT_VERBS = frozenset({"this", "thus", "us", "as", "was", "has", "is", "its", "his", "hers", "perhaps", "always",
                        "sometimes", "nevertheless", "towards", "afterwards", "besides"})

_WORD = re.compile(r"[A-Za-z]+(?:[-.][A-Za-z]+)*\.?(?:['’][A-Za-z]+)?")


@dataclass
class NeutralResult:
    text: str
    swaps: list[tuple[str, str]] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # gendered words that have no neutral form here


class NeutralRewriter:
    """Rewrite the gendered words of a :class:`~context_cda.cda.lexicon.Lexicon` into neutral ones."""

    def __init__(self, lexicon: Lexicon) -> None:
        self.lexicon = lexicon
        self.gendered = {w.lower() for w in lexicon.words}

    def rewrite(self, text: str) -> NeutralResult:
        tokens = list(_WORD.finditer(text))
        out: list[str] = []
        res = NeutralResult("")
        pos = 0
        agree_at: int | None = None  # token index of the verb that must agree with a new subject ``they``
        for i, m in enumerate(tokens):
            word = m.group(0)
            new = self._neutral(word, tokens, i)
            if new is None and agree_at == i:
                core = word[:-1] if word.endswith(".") else word
                new = _agree(core)
                new = None if new is None else new + word[len(core):]
            if new is None:
                if self._is_gendered(word):
                    res.left.append(word.lower())
                continue
            if word.lower().split("'")[0].split("’")[0] in SUBJECT:
                agree_at = _verb_index(tokens, i)
            out.append(fix_article(text[pos:m.start()], new))
            out.append(match_case(word, new) if new != word else new)
            res.swaps.append((word, out[-1]))
            pos = m.end()
        out.append(text[pos:])
        res.text = "".join(out)
        return res

    def _is_gendered(self, word: str) -> bool:
        w = _core(word)[0]
        base = re.sub(r"'(?:s|ll|d|re|ve|m)?$", "", w)
        return w in self.gendered or base in self.gendered or base in ("her", "his")

    def _neutral(self, word: str, tokens, i: int) -> str | None:
        """The neutral form of one token (None: not a gendered word), its possessive or contraction kept."""
        w, dot = _core(word)
        new = self._neutral_core(w, tokens, i)
        return None if new is None else new + dot

    def _neutral_core(self, w: str, tokens, i: int) -> str | None:
        base, _, clitic = w.partition("'")
        if base in SUBJECT and clitic:
            return {"s": _has_or_is(tokens, i), "ll": "they'll", "d": "they'd"}.get(clitic)
        if base in ("her", "his") and not clitic:
            nxt = tokens[i + 1].group(0).lower() if i + 1 < len(tokens) and _adjacent(tokens, i) else None
            standalone = nxt is None or nxt in CLOSED_CLASS
            return ("them" if base == "her" else "theirs") if standalone else "their"
        if w in PRONOUNS:
            return PRONOUNS[w]
        noun = NEUTRAL.get(w) or NEUTRAL.get(base)
        if noun is None:
            return None
        return noun + ("'s" if clitic == "s" else "'" if w.endswith("'") else "")


def _core(word: str) -> tuple[str, str]:
    """(the lower-case word, a sentence-final dot the word pattern took with it); titles keep their dot."""
    w = word.lower().replace("’", "'")
    if w.endswith(".") and w not in NEUTRAL:
        return w[:-1], "."
    return w, ""


def _adjacent(tokens, i: int) -> bool:
    """The next word follows token ``i`` with only spaces between (no punctuation)."""
    gap = tokens[i].string[tokens[i].end():tokens[i + 1].start()]
    return not gap.strip()


def _has_or_is(tokens, i: int) -> str:
    nxt = tokens[i + 1].group(0).lower() if i + 1 < len(tokens) else ""
    return "they've" if nxt in PARTICIPLES else "they're"


def _verb_index(tokens, i: int) -> int | None:
    """The token that must agree with a subject pronoun at ``i``: the next word past a few adverbs, when it follows
    in the same clause (no punctuation between)."""
    j = i + 1
    while j < len(tokens) and tokens[j].group(0).lower() in SKIP and _adjacent(tokens, j - 1):
        j += 1
    if j >= len(tokens) or not _adjacent(tokens, j - 1):
        return None
    return j


def _agree(word: str) -> str | None:
    """The plural present of a third-person singular verb (None: nothing to change)."""
    w = word.lower()
    if w in AGREEMENT:
        return match_case(word, AGREEMENT[w])
    if w in _NOT_VERBS or w in CLOSED_CLASS or not w.endswith("s") or w.endswith(("ss", "us", "is", "'s")):
        return None
    if w.endswith("ies") and len(w) > 4:
        return match_case(word, w[:-3] + "y")
    if w.endswith(("ches", "shes", "sses", "xes", "zes", "oes")):
        return match_case(word, w[:-2])
    return match_case(word, w[:-1])


def fix_article(gap: str, new: str) -> str:
    """The text before a replaced word, with ``a``/``an`` in front of it matching the new word's first sound
    (a vowel letter, except *uni-*, *one*, *eu-*; the gender-neutral and the group swaps share it)."""
    m = re.search(r"\b(a|an|A|An)(\s+)$", gap)
    if not m:
        return gap
    vowel = new[:1].lower() in "aeiou" and not new.lower().startswith(("uni", "one", "eu"))
    art = ("an" if vowel else "a")
    art = art.capitalize() if m.group(1)[0].isupper() else art
    return gap[: m.start(1)] + art + m.group(2)
