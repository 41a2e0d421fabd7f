"""Lexicons of n-ary attributes (race, religion): aligned rows holding one word per group.

A row such as ``("synagogue", "church", "mosque")`` says that the word of group *i* becomes the word of group *j*
when a sentence's group *i* is mapped to group *j* (:mod:`context_cda.cda.group_swap`). Our default rows
(:data:`DEFAULT_ROWS`) were written for this project; the rules they follow:

* aligned forms: singular and plural are separate rows, so number is kept; possessives need no entries (the
  swapper keeps a trailing ``'s`` / ``'``), and case is copied from the text (``Muslims`` -> ``Jews``);
* multi-word and hyphenated terms are rows of their own (``african american`` / ``african-american``), matched
  before their parts;
* a word can head a noun phrase or stand alone: ``a Christian family`` -> ``a Jewish family`` but ``became a
  Christian`` -> ``became a Jew``. Such words are listed in two rows with a *role* (``adjective`` / ``noun``), and
  the swapper picks the row by the next word, as it picks ``her`` -> ``his`` / ``him`` for gender;
* words that are also common words (``black`` and ``white`` as colours) are marked *ambiguous* and swapped only
  where they refer to people (see the swapper); lower-case nouns (``church``) written with a capital inside a
  sentence are taken as part of a name (``St Mary's Church``) and left alone;
* people nouns (``Asians``, ``Hispanics``, ``blacks``/``whites``) and origin adjectives and demonyms (``African``,
  ``European``, ``Latin American``: :data:`ORIGIN`, words for people unless they qualify a thing or a place) are
  rows of their own; a second word for a group (``Caucasian``, ``Latino``, ``Islamic``) sits in a *one-way* row
  (:data:`DEFAULT_ROWS`) that says what it becomes without making it anyone's counterpart;
* words bound to one group with no counterpart in the others (:data:`BOUND`: ``Catholic``, ``Easter``, ``Talmud``)
  are no rows: a sentence holding one is left alone as a unit by the swapper (never a "Catholic mosque");
* no country or continent names: swapping ``Africa`` for ``Asia`` changes a fact about a place, not a person
  (bias-bench's lists do it; load them with ``lexicon.source: bias-bench``).

Published lists are checked as they load (:func:`build_groups`): a row of the wrong length, a word listed for two
groups (the groups *overlap*: the word's group would be undefined) and a word listed twice in one group with
different counterparts (a *conflict*: the first is kept and the clash reported, or ``lexicon.on_conflict: error``
stops) are named with the row they come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, InputError
from .lexicon import LexiconIssue, read_json_list

#: attribute -> its group names (in column order of its rows)
DEFAULT_GROUPS: dict[str, tuple[str, ...]] = {
    "race": ("black", "white", "asian", "hispanic"),
    "religion": ("jewish", "christian", "muslim"),
}

#: attribute -> rows: (words of each group, role or None[, the groups whose word takes the row as its own]). A row
#: with that third element is *one-way*: ``("black", "caucasian", "asian", "hispanic")`` owned by group 1 says what
#: *Caucasian* becomes, while *black*, *Asian* and *Hispanic* keep their own rows (where white is their counterpart):
#: a second word for a group (Caucasian beside white, Latino beside Hispanic, Islamic beside Muslim) is swapped
#: without becoming anyone's counterpart.
DEFAULT_ROWS: dict[str, tuple[tuple, ...]] = {
    "race": (
        (("black", "white", "asian", "hispanic"), None),
        (("blacks", "whites", "asians", "hispanics"), None),
        (("african american", "european american", "asian american", "hispanic american"), None),
        (("african americans", "european americans", "asian americans", "hispanic americans"), None),
        (("african-american", "european-american", "asian-american", "hispanic-american"), None),
        (("african-americans", "european-americans", "asian-americans", "hispanic-americans"), None),
        (("afro-american", "european-american", "asian-american", "hispanic-american"), None, (0,)),
        (("afro-americans", "european-americans", "asian-americans", "hispanic-americans"), None, (0,)),
        # origin adjectives and demonyms (bias-bench's african, caucasian; their continents are not people)
        (("african", "european", "asian", "latin american"), None, (0, 1, 3)),
        (("africans", "europeans", "asians", "latin americans"), None, (0, 1, 3)),
        (("black", "caucasian", "asian", "hispanic"), None, (1,)),
        (("blacks", "caucasians", "asians", "hispanics"), None, (1,)),
        (("black", "white", "asian", "latino"), None, (3,)),
        (("blacks", "whites", "asians", "latinos"), None, (3,)),
        (("black", "white", "asian", "latina"), None, (3,)),
        (("blacks", "whites", "asians", "latinas"), None, (3,)),
    ),
    "religion": (
        (("jewish", "christian", "muslim"), "adjective"),
        (("jew", "christian", "muslim"), "noun"),
        (("jews", "christians", "muslims"), None),
        (("judaism", "christianity", "islam"), None),
        (("synagogue", "church", "mosque"), None),
        (("synagogues", "churches", "mosques"), None),
        (("rabbi", "priest", "imam"), None),
        (("rabbis", "priests", "imams"), None),
        (("torah", "bible", "quran"), None),
        (("torahs", "bibles", "qurans"), None),
        (("jewish", "christian", "islamic"), None, (2,)),
        (("jewish", "christian", "moslem"), "adjective", (2,)),
        (("jew", "christian", "moslem"), "noun", (2,)),
        (("jews", "christians", "moslems"), None, (2,)),
        (("torah", "bible", "koran"), None, (2,)),
        (("torah", "bible", "qur'an"), None, (2,)),
        # observances (:data:`OBSERVANCES`): swapped with the group words of their sentence, never on their own
        (("passover", "easter", "eid al-adha"), None),
        (("hanukkah", "christmas", "eid al-fitr"), None),
        (("yom kippur", "lent", "ramadan"), None),
        (("pesach", "easter", "eid al-adha"), None, (0,)),
        (("chanukah", "christmas", "eid al-fitr"), None, (0,)),
        (("hanukkah", "christmas", "eid"), None, (2,)),
    ),
}

#: observances (a holiday, a fast) with a counterpart in every group: rows of their own, but *companions*: swapped
#: only in a sentence that names a group with a word of its own (``Jews celebrate Passover`` -> ``Christians
#: celebrate Easter`` -> ``Muslims celebrate Eid al-Adha``; ``a Christmas single`` names no group and is no religion
#: sentence). Observances without a counterpart (Purim, Sukkot, Pentecost, Hajj ...) are neither rows nor bound:
#: they stay as written beside a swapped group word, where before they left the sentence alone.
OBSERVANCES: dict[str, frozenset[str]] = {
    "race": frozenset(),
    "religion": frozenset({"passover", "pesach", "hanukkah", "chanukah", "yom kippur", "easter", "christmas", "lent",
                           "ramadan", "eid", "eid al-fitr", "eid al-adha"}),
}
#: words that count only where they are capitalised (``lent`` is a verb, ``Lent`` the fast)
CAPITALISED_ONLY: dict[str, frozenset[str]] = {"race": frozenset(), "religion": frozenset({"lent"})}
#: how English writes a multi-word proper name that the case rules cannot derive (``Eid al-Fitr``)
SPELLING: dict[str, str] = {"eid al-fitr": "Eid al-Fitr", "eid al-adha": "Eid al-Adha"}

#: words that are also common words: swapped only where they refer to people (``cda.ambiguous``)
AMBIGUOUS: dict[str, frozenset[str]] = {
    "race": frozenset({"black", "white", "brown", "blacks", "whites", "colored", "coloured"}),
    "religion": frozenset(),
}

#: origin adjectives: words for people unless they qualify a thing or a place (``Asian families`` but not ``Asian
#: elephants``, ``European waters``, ``African countries``): a continent's (and the Caucasus's) adjectives.
#: *Hispanic*, *Latino* and *Latina* name no place, so they count wherever they stand (``a Hispanic market``).
ORIGIN: dict[str, frozenset[str]] = {
    "race": frozenset({"african", "european", "asian", "caucasian", "latin american"}),
    "religion": frozenset(),
}

#: words written lower-case in running text: capitalised inside a sentence they are part of a name
COMMON_NOUNS: dict[str, frozenset[str]] = {
    "race": frozenset(),
    "religion": frozenset({"synagogue", "synagogues", "church", "churches", "mosque", "mosques", "rabbi", "rabbis",
                           "priest", "priests", "imam", "imams"}),
}

#: words and phrases bound to one group that have no counterpart in the others (a denomination, a text, a practice,
#: an office, a place, an event): a sentence holding one cannot be swapped as a coherent unit (never a "Catholic
#: mosque"), so it is left alone and counted (``bound``). Matched as whole words in any case; a few
#: (``Conservative``, ``Reform``) only before a word of Jewish life. Observances are not bound (:data:`OBSERVANCES`).
_BOUND_RELIGION = """
talmud talmudic mishna mishnah tanakh midrash kabbalah halakha halakhah halacha halakhic kosher kashrut
mitzvah yarmulke kippah tallit tefillin
menorah mezuzah mechitza yeshiva yeshivas rabbinical rabbinic rabbinate hasidic hasidim haredi ultra-orthodox orthodox
ashkenazi ashkenazic sephardi sephardic zionism zionist zionists antisemitism antisemitic anti-semitism anti-semitic
anti-semite anti-semites holocaust shoah kibbutz amidah aleynu aleinu kaddish gentile gentiles reconstructionist
catholic catholics catholicism protestant protestants protestantism anglican anglicans episcopal episcopalian
methodist methodists baptist baptists lutheran lutherans presbyterian presbyterians calvinist calvinists evangelical
evangelicals pentecostal mormon mormons quaker quakers puritan puritans jesuit jesuits franciscan franciscans
benedictine benedictines coptic pope popes papal papacy vatican archbishop archbishops bishop bishops diocese dioceses
archdiocese diocesan parish parishes parishioner parishioners vicar vicars pastor pastors deacon deacons cathedral
cathedrals chapel chapels basilica basilicas abbey abbeys convent convents eucharist baptism baptised baptized
christening crucifix crucifixion jesus christ gospel gospels apostle apostles
antichrist christendom crusade crusades crusader crusaders sacrament sacraments catechism rosary biblical messiah
mecca medina kaaba halal hijab hijabs niqab burqa mufti muftis ayatollah caliph caliphs
caliphate mullah mullahs sharia shariah hadith sunni sunnis shia shiite shiites sufi sufis sufism wahhabi salafi
jihad jihadist jihadists madrasa madrasah madrassa minaret minarets muezzin allah muhammad mohammed quranic koranic
masjid islamist islamists islamism islamophobia mahdi fatwa zakat ummah judeo-christian abrahamic
"""
_BOUND_RELIGION_PHRASES = ("chosen people", "temple beth", "beth israel", "latter-day saints", "new testament",
                           "old testament")
BOUND: dict[str, frozenset[str]] = {
    "race": frozenset(),
    "religion": frozenset(_BOUND_RELIGION.split()) | frozenset(_BOUND_RELIGION_PHRASES),
}
#: bound words that are common words in lower case (mass): bound only when capitalised
BOUND_CAPITALISED: dict[str, frozenset[str]] = {"race": frozenset(), "religion": frozenset({"mass"})}
#: denominations named by a word that is common otherwise: bound only before a word of Jewish life
BOUND_BEFORE: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "religion": (frozenset({"conservative", "reform", "reformed", "liberal", "progressive"}),
                 frozenset({"judaism", "jew", "jews", "jewish", "synagogue", "synagogues", "congregation",
                            "congregations", "rabbi", "rabbis", "temple", "temples"})),
}

ROLES = ("adjective", "noun")


@dataclass(frozen=True)
class GroupRow:
    words: tuple[str, ...]
    origin: str  # "file#entry", "default" or "lexicon.extra_groups"
    role: str | None = None
    own: tuple[int, ...] | None = None  # the groups whose word takes this row as its own; None: every group

    def owns(self, g: int) -> bool:
        return self.own is None or g in self.own


@dataclass
class GroupLexicon:
    """The words of an n-ary attribute: each word's group, and its row (per role) of counterparts."""

    attribute: str
    groups: tuple[str, ...]
    rows: tuple[GroupRow, ...]  # as listed (bias-bench mode reads them in order)
    group: dict[str, int]  # word -> group index
    entries: dict[str, dict[str | None, tuple[str, ...]]]  # word -> role -> the row's words
    ambiguous: frozenset[str] = frozenset()
    common_nouns: frozenset[str] = frozenset()
    issues: list[LexiconIssue] = field(default_factory=list)
    source: str = "default"
    origin: frozenset[str] = frozenset()  # origin adjectives (:data:`ORIGIN`)
    bound: frozenset[str] = frozenset()  # words and phrases bound to one group (:data:`BOUND`)
    companions: frozenset[str] = frozenset()  # swapped only beside a group word of their own (:data:`OBSERVANCES`)
    capitalised: frozenset[str] = frozenset()  # counted only where capitalised (:data:`CAPITALISED_ONLY`)

    @property
    def words(self) -> set[str]:
        return set(self.group)

    def group_of(self, word: str) -> int | None:
        return self.group.get(word.lower())

    def roles(self, word: str) -> tuple[str | None, ...]:
        return tuple(self.entries.get(word.lower(), {}))

    def counterpart(self, word: str, target: int, role: str | None = None) -> str:
        """The word of group ``target`` in ``word``'s row (of ``role`` when the word has rows of several roles)."""
        rows = self.entries[word.lower()]
        row = rows.get(role) if role in rows else next(iter(rows.values()))
        return row[target]


def _norm(word: str) -> str:
    return " ".join(str(word).strip().lower().replace("_", " ").split())


def build_groups(attribute: str, groups: Sequence[str], rows: Iterable[GroupRow], on_conflict: str = "report",
                 source: str = "custom", ambiguous: Iterable[str] | None = None,
                 common_nouns: Iterable[str] | None = None, bound: Iterable[str] | None = None) -> GroupLexicon:
    """Check and index ``rows`` (see the module docstring): a row of another length than ``groups`` or groups
    that overlap stop with an :class:`~context_cda.errors.InputError` naming the rows; conflicts are reported
    (``on_conflict`` error: a :class:`~context_cda.errors.ConfigError`)."""
    groups = tuple(_norm(g) for g in groups)
    if len(groups) < 2:
        raise InputError(f"lexicon {source}: {attribute} needs at least two groups, got {list(groups)}.")
    group: dict[str, int] = {}
    first_seen: dict[str, str] = {}
    entries: dict[str, dict[str | None, tuple[str, ...]]] = {}
    issues: list[LexiconIssue] = []
    kept: list[GroupRow] = []
    for row in rows:
        words = tuple(_norm(w) for w in row.words)
        _check_row(attribute, groups, row, words)
        for g, w in enumerate(words):
            if w in group and group[w] != g:
                raise InputError(
                    f"lexicon {source}: {w!r} is listed for group {groups[group[w]]!r} ({first_seen[w]}) and for "
                    f"group {groups[g]!r} ({row.origin}): the groups of {attribute} overlap. Keep the word in one "
                    "group only.")
            group.setdefault(w, g)
            first_seen.setdefault(w, row.origin)
            have = entries.setdefault(w, {}) if row.owns(g) else {}
            if row.owns(g) and row.role in have and have[row.role] != words:
                clash = LexiconIssue("conflict", w, "/".join(have[row.role]), "/".join(words), row.origin)
                if on_conflict == "error":
                    raise ConfigError(f"Lexicon {source}: {clash}. Fix the list, or set lexicon.on_conflict to "
                                      "report or keep-first.")
                issues.append(clash)
                continue
            have.setdefault(row.role, words)
        kept.append(GroupRow(words, row.origin, row.role, row.own))
    _check_owned(source, group, entries, first_seen)
    known = set(group)
    return GroupLexicon(attribute, groups, tuple(kept), group, entries, _ambiguous(attribute, ambiguous, known, source),
                        _given_or_built_in(common_nouns, COMMON_NOUNS, attribute) & known, issues, source,
                        frozenset(ORIGIN.get(attribute, ())) & known,
                        _given_or_built_in(bound, BOUND, attribute) - known,
                        frozenset(OBSERVANCES.get(attribute, ())) & known,
                        frozenset(CAPITALISED_ONLY.get(attribute, ())) & known)


def _given_or_built_in(given: Iterable[str] | None, built_in: dict[str, frozenset[str]], attribute: str
                       ) -> frozenset[str]:
    return frozenset(built_in.get(attribute, ()) if given is None else map(_norm, given))


def _check_owned(source: str, group: dict[str, int], entries: dict, first_seen: dict[str, str]) -> None:
    """Every word a one-way row lists as a counterpart only has a row of its own."""
    orphan = sorted(w for w in group if not entries.get(w))
    if orphan:
        raise InputError(f"lexicon {source}: {', '.join(map(repr, orphan))} ({first_seen[orphan[0]]}) only stand in "
                         "one-way rows as counterparts: give each a row of its own.")


def _ambiguous(attribute: str, given: Iterable[str] | None, known: set[str], source: str) -> frozenset[str]:
    """The ambiguous words: ``given`` (``lexicon.ambiguous``, which replaces the built-in list), each a word of the
    lexicon; else the attribute's built-in ones the lexicon has. A word the lexicon lacks is refused: the list it
    replaces would be silently emptied (black and white then swapped as colours: "a glass of Asian wine")."""
    import difflib

    if given is None:
        return frozenset(AMBIGUOUS.get(attribute, ())) & known
    words = {_norm(w) for w in given}
    unknown = sorted(words - known)
    if unknown:
        hints = [f"{w!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(w, known, 1, 0.75)) else "")
                 for w in unknown]
        builtin = ", ".join(sorted(AMBIGUOUS.get(attribute, ()))) or "none"
        raise ConfigError(f"lexicon.ambiguous: {', '.join(hints)} {'is' if len(unknown) == 1 else 'are'} not in the "
                          f"{attribute} lexicon ({source}); the list replaces the built-in one ({builtin}), so name "
                          "words the lexicon swaps (or null for the built-in list).")
    return frozenset(words)


def _check_row(attribute: str, groups: tuple[str, ...], row: GroupRow, words: tuple[str, ...]) -> None:
    if len(words) != len(groups):
        raise InputError(f"{row.origin}: a {attribute} row needs one word per group ({len(groups)}: "
                         f"{', '.join(groups)}), got {len(words)}: {list(row.words)}.")
    if any(not w for w in words):
        raise InputError(f"{row.origin}: empty word in {list(row.words)}; every group needs a word.")
    if len(set(words)) != len(words):
        dup = next(w for w in words if words.count(w) > 1)
        raise InputError(f"{row.origin}: {dup!r} is listed for two groups of one row {list(row.words)}: the groups "
                         f"of {attribute} overlap. Keep the word in one group only.")
    if row.role is not None and row.role not in ROLES:
        raise InputError(f"{row.origin}: unknown role {row.role!r}; use one of {', '.join(ROLES)} or none.")


# ------------------------------------------------------------------------------------------------------ loaders


def default_rows(attribute: str) -> list[GroupRow]:
    return [GroupRow(spec[0], "default", spec[1], spec[2] if len(spec) > 2 else None)
            for spec in DEFAULT_ROWS[attribute]]


def load_json_rows(path: Path, attribute: str) -> tuple[tuple[str, ...], list[GroupRow]]:
    """Rows from a JSON file: bias-bench's ``bias_attribute_words.json`` (``{attribute: [[w1, w2, w3], ...]}``),
    or a plain list of rows. The group names are the first row's words."""
    data = read_json_list(path)
    if isinstance(data, dict):
        if attribute not in data:
            raise InputError(f"{path}: no {attribute!r} word lists (keys: {', '.join(map(str, data)) or 'none'}): "
                             f"the attribute has no lexicon there. Add a {attribute!r} key holding rows of one word "
                             "per group, or use lexicon.source: default.")
        data = data[attribute]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of rows (one word per group), e.g. "
                         '[["jewish", "christian", "muslim"], ["synagogue", "church", "mosque"]].')
    rows = []
    for i, item in enumerate(data):
        if not (isinstance(item, list) and len(item) >= 2 and all(isinstance(w, str) for w in item)):
            raise InputError(f"{path}: {attribute} entry {i}: expected a list of at least two words, got {item!r}.")
        rows.append(GroupRow(tuple(item), f"{Path(path).name}#{attribute}[{i}]"))
    return tuple(rows[0].words), rows


def load_groups(attribute: str, cfg) -> GroupLexicon:
    """The n-ary lexicon a :class:`~context_cda.config.LexiconConfig` asks for (``default`` | ``bias-bench`` | a
    JSON file), plus ``lexicon.extra_groups``."""
    src = cfg.source
    if src == "default":
        groups, rows = DEFAULT_GROUPS[attribute], default_rows(attribute)
    elif src == "bias-bench":  # lexicon.path, else the bias-bench-words dataset (mirror, cache, download)
        from ..data.datasets import resolve

        path = Path(cfg.path).expanduser() if cfg.path else resolve("bias-bench-words", key="lexicon.path")
        groups, rows = load_json_rows(path, attribute)
    elif src.endswith(".json"):
        groups, rows = load_json_rows(Path(src).expanduser(), attribute)
    else:
        raise ConfigError(f"lexicon.source={src!r} is a gender list; run.attribute={attribute} reads default, "
                          f"bias-bench (lexicon.path: bias_attribute_words.json) or a JSON file of {attribute} rows.")
    rows = rows + [GroupRow(tuple(r), f"lexicon.extra_groups[{i}]") for i, r in enumerate(cfg.extra_groups)]
    return build_groups(attribute, groups, rows, on_conflict=cfg.on_conflict, source=src,
                        ambiguous=cfg.ambiguous, bound=cfg.bound)
