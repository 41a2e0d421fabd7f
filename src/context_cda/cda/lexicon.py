"""Gender lexicon: one-to-one [male, female] word pairs, and loaders for the published lists.

Our default list (:data:`DEFAULT_PAIRS`) was written for this project. Rules it follows:

* one-to-one: every word has exactly one counterpart, so swapping twice gives the input back;
* singular and plural are separate pairs (``man/woman``, ``men/women``); possessives need no entries, because
  the swapper keeps a trailing ``'s`` / ``'`` (``man's`` -> ``woman's``);
* the pronouns are special: English ``her`` is both the object (``him``) and the possessive determiner (``his``),
  and ``his`` is both a determiner (``her``) and a pronoun (``hers``). They are not in the pair list; the swapper
  resolves them by context (see :mod:`context_cda.cda.swap`), and :data:`PRONOUNS` documents the mapping;
* words whose counterpart is not a gendered word of the same sense are left out (``sir/madam`` is in,
  ``master/mistress`` is out because ``mistress`` mostly means something else; ``lord/lady`` is out because
  ``lady`` already pairs with ``gentleman``; ``count``, ``host`` and ``master`` are left out because their common
  senses are not gendered).

Published lists (loaders below) are *not* one-to-one: Zhao et al. (2018) pair ``his`` with both ``her`` and
``hers``, and ``lady`` with ``gentleman``, ``lord`` and ``fella``. :func:`build_lexicon` reports every such
conflict and many-to-one mapping instead of letting the last one win.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, InputError
from ..io import read_text

#: pronoun forms handled by rule in the swapper: word -> counterparts by syntactic role
PRONOUNS: dict[str, dict[str, str]] = {
    "he": {"subject": "she"},
    "she": {"subject": "he"},
    "him": {"object": "her"},
    "her": {"object": "him", "possessive": "his"},
    "his": {"possessive": "her", "pronoun": "hers"},
    "hers": {"pronoun": "his"},
    "himself": {"reflexive": "herself"},
    "herself": {"reflexive": "himself"},
}

#: The project's default one-to-one pairs (male, female). Pronouns are in :data:`PRONOUNS`.
DEFAULT_PAIRS: list[tuple[str, str]] = [
    # people, family
    ("man", "woman"), ("men", "women"), ("boy", "girl"), ("boys", "girls"),
    ("gentleman", "lady"), ("gentlemen", "ladies"), ("guy", "gal"), ("guys", "gals"),
    ("male", "female"), ("males", "females"), ("masculine", "feminine"),
    ("father", "mother"), ("fathers", "mothers"), ("dad", "mom"), ("dads", "moms"),
    ("daddy", "mommy"), ("daddies", "mommies"), ("papa", "mama"), ("grandpa", "grandma"),
    ("grandpas", "grandmas"), ("son", "daughter"), ("sons", "daughters"),
    ("brother", "sister"), ("brothers", "sisters"), ("husband", "wife"), ("husbands", "wives"),
    ("uncle", "aunt"), ("uncles", "aunts"), ("nephew", "niece"), ("nephews", "nieces"),
    ("grandfather", "grandmother"), ("grandfathers", "grandmothers"),
    ("grandson", "granddaughter"), ("grandsons", "granddaughters"),
    ("stepfather", "stepmother"), ("stepfathers", "stepmothers"), ("stepson", "stepdaughter"),
    ("stepsons", "stepdaughters"), ("father-in-law", "mother-in-law"), ("son-in-law", "daughter-in-law"),
    ("brother-in-law", "sister-in-law"), ("boyfriend", "girlfriend"), ("boyfriends", "girlfriends"),
    ("fiance", "fiancee"), ("fiances", "fiancees"), ("groom", "bride"), ("grooms", "brides"),
    ("widower", "widow"), ("widowers", "widows"), ("bachelor", "bachelorette"),
    ("schoolboy", "schoolgirl"), ("schoolboys", "schoolgirls"), ("boyhood", "girlhood"),
    ("fatherhood", "motherhood"), ("paternal", "maternal"), ("paternity", "maternity"),
    ("brotherhood", "sisterhood"), ("fraternity", "sorority"), ("fraternities", "sororities"),
    ("godfather", "godmother"), ("patriarch", "matriarch"),
    # titles, roles
    ("mr", "mrs"), ("mr.", "mrs."), ("sir", "madam"), ("king", "queen"), ("kings", "queens"),
    ("prince", "princess"), ("princes", "princesses"), ("duke", "duchess"), ("dukes", "duchesses"),
    ("emperor", "empress"), ("emperors", "empresses"), ("baron", "baroness"), ("barons", "baronesses"),
    ("monk", "nun"), ("monks", "nuns"), ("priest", "priestess"),
    ("priests", "priestesses"), ("god", "goddess"), ("gods", "goddesses"), ("abbot", "abbess"),
    ("actor", "actress"), ("actors", "actresses"), ("waiter", "waitress"), ("waiters", "waitresses"),
    ("steward", "stewardess"), ("stewards", "stewardesses"),
    ("hero", "heroine"), ("heroes", "heroines"), ("heir", "heiress"), ("heirs", "heiresses"),
    ("wizard", "witch"), ("wizards", "witches"), ("headmaster", "headmistress"),
    ("headmasters", "headmistresses"), ("landlord", "landlady"), ("landlords", "landladies"),
    ("businessman", "businesswoman"), ("businessmen", "businesswomen"),
    ("chairman", "chairwoman"), ("chairmen", "chairwomen"), ("spokesman", "spokeswoman"),
    ("spokesmen", "spokeswomen"), ("congressman", "congresswoman"), ("congressmen", "congresswomen"),
    ("councilman", "councilwoman"), ("councilmen", "councilwomen"), ("policeman", "policewoman"),
    ("policemen", "policewomen"), ("salesman", "saleswoman"), ("salesmen", "saleswomen"),
    ("statesman", "stateswoman"), ("statesmen", "stateswomen"), ("cameraman", "camerawoman"),
    ("cameramen", "camerawomen"), ("countryman", "countrywoman"), ("countrymen", "countrywomen"),
    ("sportsman", "sportswoman"), ("sportsmen", "sportswomen"), ("airman", "airwoman"),
    ("airmen", "airwomen"), ("horseman", "horsewoman"), ("horsemen", "horsewomen"),
    ("postman", "postwoman"), ("cowboy", "cowgirl"), ("cowboys", "cowgirls"),
]


@dataclass(frozen=True)
class Pair:
    male: str
    female: str
    origin: str  # "file:line" or "default"


@dataclass
class LexiconIssue:
    kind: str  # "conflict" (a word mapped to two counterparts) | "many-to-one" (two words to one counterpart)
    word: str
    kept: str
    dropped: str
    origin: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.word!r} -> {self.kept!r} kept, -> {self.dropped!r} dropped ({self.origin})"


@dataclass
class Lexicon:
    """A one-to-one male<->female mapping plus the rule-resolved pronouns."""

    m2f: dict[str, str]
    f2m: dict[str, str]
    issues: list[LexiconIssue] = field(default_factory=list)
    source: str = "default"

    @property
    def male_words(self) -> set[str]:
        return set(self.m2f) | {w for w in ("he", "him", "his", "himself")}

    @property
    def female_words(self) -> set[str]:
        return set(self.f2m) | {w for w in ("she", "her", "hers", "herself")}

    @property
    def words(self) -> set[str]:
        return self.male_words | self.female_words

    def counterpart(self, word: str) -> str | None:
        """The counterpart of a (lower-case) word; for ambiguous pronouns the most frequent reading."""
        w = word.lower()
        if w in PRONOUNS:
            return next(iter(PRONOUNS[w].values()))
        return self.m2f.get(w) or self.f2m.get(w)

    def gender_of(self, word: str) -> str | None:
        w = word.lower()
        if w in self.male_words:
            return "male"
        if w in self.female_words:
            return "female"
        return None


def build_lexicon(
    pairs: Iterable[Pair], on_conflict: str = "report", source: str = "custom"
) -> Lexicon:
    """Build a one-to-one lexicon. A word already mapped elsewhere is a conflict: ``error`` raises, otherwise
    the first mapping is kept and the clash is recorded in ``issues`` (``report`` and ``keep-first`` differ only
    in whether the CLI prints them)."""
    m2f: dict[str, str] = {}
    f2m: dict[str, str] = {}
    origins: dict[tuple[str, str], str] = {}
    issues: list[LexiconIssue] = []
    for p in pairs:
        m, f = _norm(p.male), _norm(p.female)
        if not m or not f or m == f:
            continue
        if m in PRONOUNS or f in PRONOUNS:
            # pronouns are resolved by rule; a list that pairs his->hers or her->him is consistent with it
            continue
        clash = None
        if m in m2f and m2f[m] != f:
            clash = LexiconIssue("conflict", m, m2f[m], f, p.origin)
        elif f in f2m and f2m[f] != m:
            clash = LexiconIssue("many-to-one", f, f2m[f], m, p.origin)
        elif m in f2m or f in m2f:
            word = m if m in f2m else f
            clash = LexiconIssue("conflict", word, "(listed with the other gender)", f"{m}/{f}", p.origin)
        if clash:
            if on_conflict == "error":
                raise ConfigError(
                    f"Lexicon {source}: {clash}. Fix the list, or set lexicon.on_conflict to report or keep-first."
                )
            issues.append(clash)
            continue
        if m in m2f:  # exact duplicate
            continue
        m2f[m] = f
        f2m[f] = m
        origins[(m, f)] = p.origin
    return Lexicon(m2f=m2f, f2m=f2m, issues=issues, source=source)


def _norm(word: str) -> str:
    return word.strip().lower().replace("_", " ")


# ------------------------------------------------------------------------------------------------------ loaders


def default_pairs() -> list[Pair]:
    return [Pair(m, f, "default") for m, f in DEFAULT_PAIRS]


def read_json_list(path: Path):
    """A word-list file's JSON (one error line for a missing file or bad JSON); the lexicons of every attribute
    read their files through it."""
    if not Path(path).exists():
        raise InputError(f"{path}: word-list file not found.")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno}: not valid JSON ({e.msg}).") from e


def load_json_pairs(path: Path, key: str | None = None) -> list[Pair]:
    """A JSON list of [male, female] pairs (Lu et al. via Hall Maudslay et al.), or ``{key: [...]}``
    (bias-bench's ``bias_attribute_words.json``, key ``gender``)."""
    data = read_json_list(path)
    if isinstance(data, dict):
        if key is None:
            raise InputError(f"{path}: a JSON object ({', '.join(map(str, list(data)[:5]))}, ...); expected a JSON "
                             'list of [male, female] pairs, e.g. [["he", "she"], ["king", "queen"]].')
        if key not in data:
            raise InputError(f"{path}: expected a key {key!r} holding the pair list; found {list(data)}.")
        data = data[key]
    out = []
    for i, item in enumerate(data):
        if not (isinstance(item, list) and len(item) >= 2 and all(isinstance(w, str) for w in item[:2])):
            raise InputError(f"{path}: entry {i}: expected [male, female] strings, got {item!r}.")
        out.append(Pair(item[0], item[1], f"{Path(path).name}#{i}"))
    return out


def load_aligned_files(male_file: Path, female_file: Path) -> list[Pair]:
    """Zhao et al. (2018): line i of the male file pairs with line i of the female file."""
    for f in (male_file, female_file):
        if not Path(f).exists():
            raise InputError(f"{f}: word-list file not found.")
    males = read_text(male_file).splitlines()
    females = read_text(female_file).splitlines()
    while males and not males[-1].strip():
        males.pop()
    while females and not females[-1].strip():
        females.pop()
    if len(males) != len(females):
        raise InputError(
            f"{male_file} has {len(males)} lines but {female_file} has {len(females)}: the files must be "
            "line-aligned (line i of one is the counterpart of line i of the other)."
        )
    return [
        Pair(m, f, f"{Path(male_file).name}:{i}")
        for i, (m, f) in enumerate(zip(males, females, strict=True), start=1)
        if m.strip() and f.strip()
    ]


def load_tsv_pairs(path: Path) -> list[Pair]:
    """``male<TAB>female`` lines (WinoBias swap lists; stray spaces stripped). Lines listing both directions
    (``actress<TAB>actor`` after ``actor<TAB>actress``) are folded into one pair."""
    out = []
    seen: set[frozenset[str]] = set()
    if not Path(path).exists():
        raise InputError(f"{path}: word-list file not found.")
    for i, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split("\t") if p.strip()]
        if len(parts) != 2:
            raise InputError(f"{path}:{i}: expected 'male<TAB>female', got {line!r}.")
        key = frozenset(p.lower() for p in parts)
        if key in seen:
            continue
        seen.add(key)
        out.append(Pair(parts[0], parts[1], f"{Path(path).name}:{i}"))
    return out


def load_lexicon(cfg) -> Lexicon:
    """Build the lexicon a :class:`~context_cda.config.LexiconConfig` asks for."""
    return build_lexicon(load_pairs(cfg), on_conflict=cfg.on_conflict, source=cfg.source)


#: the pronoun pairs a list of word pairs implies (our default list leaves them to the swapper's rules)
PRONOUN_PAIRS: list[tuple[str, str]] = [("he", "she"), ("him", "her"), ("his", "her"), ("his", "hers"),
                                        ("himself", "herself")]


def attribute_pairs(cfg) -> list[tuple[str, str]]:
    """The source's [male, female] word pairs as listed (lower-case, file order, duplicates and conflicts kept),
    pronouns included (the default list: :data:`PRONOUN_PAIRS` first): the attribute words bias-bench's INLP and
    SentenceDebias match on (its ``bias_attribute_words.json`` is the ``bias-bench`` source)."""
    pairs = [(_norm(p.male), _norm(p.female)) for p in load_pairs(cfg)]
    if cfg.source == "default":
        pairs = [*PRONOUN_PAIRS, *pairs]
    return [(m, f) for m, f in pairs if m and f and m != f]


def load_pairs(cfg) -> list[Pair]:
    """The word pairs of the source a :class:`~context_cda.config.LexiconConfig` names, as listed."""
    src = cfg.source
    path = Path(cfg.path).expanduser() if cfg.path else None

    def need_path(what: str, dataset: str | None = None) -> Path:
        if path is None and dataset is not None:  # a registered word list: the mirror, the cache or its download
            from ..data.datasets import resolve

            return resolve(dataset, key="lexicon.path")
        if path is None:
            raise ConfigError(f"lexicon.source={src!r} needs lexicon.path: {what}.")
        return path

    if src == "default":
        pairs = default_pairs()
    elif src == "zhao2018":
        p = need_path("the folder holding male_word_file.txt and female_word_file.txt", "gender-words")
        pairs = load_aligned_files(p / "male_word_file.txt", p / "female_word_file.txt")
    elif src == "bias-bench":
        pairs = load_json_pairs(need_path("bias_attribute_words.json", "bias-bench-words"), key="gender")
    elif src == "lu2018":
        pairs = load_json_pairs(need_path("cda_default_pairs.json"))
    elif src == "winobias":
        pairs = load_tsv_pairs(need_path("generalized_swaps.txt"))
    else:
        p = Path(src).expanduser()
        pairs = load_json_pairs(p) if p.suffix == ".json" else load_tsv_pairs(p)
    return pairs + [Pair(m, f, "lexicon.extra_pairs") for m, f in cfg.extra_pairs]


def load_name_pairs(path: Path | str) -> dict[str, str]:
    """First-name pairs (Hall Maudslay et al. 2019, JSON list of [name, name]) as a symmetric mapping."""
    mapping: dict[str, str] = {}
    for p in load_json_pairs(Path(path)):
        a, b = _norm(p.male), _norm(p.female)
        mapping.setdefault(a, b)
        mapping.setdefault(b, a)
    return mapping
