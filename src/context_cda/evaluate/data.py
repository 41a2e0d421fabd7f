"""Benchmark files: StereoSet (original JSON or flattened JSONL) and CrowS-Pairs (CSV).

Each loader takes a local path; :func:`benchmark_file` finds that path: an explicit override, else the file cached
under ``run.data_cache``, else a download from the public source (cached atomically for next time).
"""

from __future__ import annotations

import csv
import json
import os
import string
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path, stable_id

STEREOSET_URL = "https://raw.githubusercontent.com/moinnadeem/StereoSet/master/data/dev.json"
CROWS_URL = "https://raw.githubusercontent.com/nyu-mll/crows-pairs/master/data/crows_pairs_anonymized.csv"
SOURCES: dict[str, tuple[str, str]] = {
    "stereoset": (STEREOSET_URL, "stereoset/dev.json"),
    "crows": (CROWS_URL, "crows_pairs/crows_pairs_anonymized.csv"),
}
DEFAULT_DATA_CACHE = "~/.cache/context-cda/data"

GOLD_LABELS = ("stereotype", "anti-stereotype", "unrelated")
STEREOSET_BIAS_TYPES = ("gender", "profession", "race", "religion")
# CrowS-Pairs spells some bias types differently from StereoSet (bias-bench maps race -> race-color too).
CROWS_ALIASES = {"race": "race-color"}


def data_cache_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    return Path(os.environ.get("CCDA_DATA_CACHE") or cache or DEFAULT_DATA_CACHE).expanduser()


def download(url: str, dest: Path, timeout: float = 120.0) -> None:
    """Stream ``url`` into ``dest`` atomically: an interrupted download never leaves a half-written file."""
    import httpx

    with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as r:
        r.raise_for_status()
        with atomic_path(dest) as tmp, open(tmp, "wb") as f:
            for chunk in r.iter_bytes():
                f.write(chunk)


def fetch(url: str, dest: Path, *, what: str, hint: str, download_fn=None) -> Path:
    """``dest`` if it is already cached, else download ``url`` there; a failure raises an :class:`InputError` that
    ends with ``hint`` (how to use a local copy). ``download_fn`` stands in for :func:`download` (modules pass their
    own module-global name for it, which tests replace to stay offline)."""
    if dest.is_file():
        return dest
    try:
        (download_fn or download)(url, dest)
    except Exception as e:  # network errors, HTTP errors
        raise InputError(
            f"{what}: could not download {url} ({e}). Offline? {hint}, or place the file at {dest}."
        ) from e
    return dest


def benchmark_file(name: str, path: str | os.PathLike[str] | None = None, cache: str | None = None) -> Path:
    """The local file for benchmark ``name``: ``path`` if given, else the cached copy, else a download."""
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            raise InputError(f"{p}: {name} file not found (set evaluate.{name}_path to an existing file).")
        return p
    url, rel = SOURCES[name]
    hint = f"Point evaluate.{name}_path (or --{name}-path) at a local copy"
    return fetch(url, data_cache_dir(cache) / rel, what=name, hint=hint)


# ------------------------------------------------------------------------------------------------- StereoSet


@dataclass(frozen=True)
class StereoSetExample:
    """One intrasentence cluster: a context with ``BLANK`` and three candidate sentences."""

    id: str
    target: str
    bias_type: str
    context: str
    sentences: dict[str, str]  # gold label -> sentence
    sentence_ids: dict[str, str] = field(default_factory=dict)
    source: str = ""  # file:line or file:data.intrasentence[i]

    def template_word(self, label: str) -> str:
        """The word that fills BLANK, as StereoSet's loader finds it: the sentence word at the (last) context
        word containing BLANK, punctuation stripped."""
        words = self.context.split(" ")
        idx = None
        for i, w in enumerate(words):
            if "BLANK" in w:
                idx = i
        if idx is None:
            raise InputError(f"{self.source}: the context has no BLANK: {self.context!r}")
        sent_words = self.sentences[label].split(" ")
        if idx >= len(sent_words):
            raise InputError(
                f"{self.source}: the {label} sentence has fewer words than the context, so the BLANK word "
                f"cannot be found: {self.sentences[label]!r}"
            )
        return sent_words[idx].translate(str.maketrans("", "", string.punctuation))


def _bias_filter(bias_type: str | None) -> str | None:
    return None if bias_type in (None, "", "all") else bias_type


def load_stereoset(
    path: str | os.PathLike[str], bias_type: str | None = "gender", split: str = "intrasentence"
) -> list[StereoSetExample]:
    """Read StereoSet (original ``{"version", "data": {...}}`` JSON, or the flattened JSONL), keep one split
    (only ``intrasentence`` is scored) and one bias type (``all`` keeps every type)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: StereoSet file not found.")
    text = p.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{p}: empty StereoSet file.")
    flat = p.suffix == ".jsonl"
    if not flat:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            if stripped.startswith("{") and "\n" in stripped.strip():
                flat = True  # JSON lines under a .json name
            else:
                raise InputError(f"{p}: line {e.lineno}: not valid JSON ({e.msg}).") from e
    examples = _stereoset_flat(p, text, split) if flat else _stereoset_original(p, doc, split)
    want = _bias_filter(bias_type)
    if want is not None:
        kept = [e for e in examples if e.bias_type == want]
        if not kept and examples:
            known = sorted({e.bias_type for e in examples})
            raise InputError(f"{p}: no {split} examples with bias_type {want!r}; found: {', '.join(known)}.")
        examples = kept
    return examples


def json_objects(
    p: Path, lines: Iterable[tuple[int, str]], keys: Sequence[str]
) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank JSON line, each an object holding ``keys``; errors name the line."""
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{p}: line {lineno}: not valid JSON ({e.msg}).") from e
        if not isinstance(row, dict):
            raise InputError(f"{p}: line {lineno}: expected a JSON object, got {type(row).__name__}.")
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(f"{p}: line {lineno}: missing key(s) {', '.join(missing)}; expected {', '.join(keys)}.")
        yield lineno, row


def _stereoset_flat(p: Path, text: str, split: str) -> list[StereoSetExample]:
    out = []
    keys = ("type", "target", "bias_type", "context", *GOLD_LABELS)
    for lineno, row in json_objects(p, enumerate(text.splitlines(), 1), keys):
        bad = [k for k in keys if not isinstance(row[k], str)]
        if bad:
            raise InputError(f"{p}: line {lineno}: key(s) {', '.join(bad)} must be strings.")
        if row["type"] != split:
            continue
        if split == "intrasentence" and "BLANK" not in row["context"]:
            raise InputError(f"{p}: line {lineno}: intrasentence context has no BLANK: {row['context']!r}")
        cid = stable_id("stereoset", row["target"], row["context"], row["stereotype"])
        out.append(
            StereoSetExample(
                id=cid,
                target=row["target"],
                bias_type=row["bias_type"],
                context=row["context"],
                sentences={lab: row[lab] for lab in GOLD_LABELS},
                sentence_ids={lab: f"{cid}-{lab}" for lab in GOLD_LABELS},
                source=f"{p}:{lineno}",
            )
        )
    return out


def _stereoset_original(p: Path, doc: object, split: str) -> list[StereoSetExample]:
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise InputError(
            f"{p}: not a StereoSet file: expected {{\"version\", \"data\": {{\"intrasentence\": [...]}}}} "
            "or JSON lines with type/target/bias_type/context/stereotype/anti-stereotype/unrelated."
        )
    clusters = doc["data"].get(split)
    if not isinstance(clusters, list):
        raise InputError(f"{p}: data.{split} is missing or not a list.")
    out = []
    for i, c in enumerate(clusters):
        where = f"{p}:data.{split}[{i}]"
        if not isinstance(c, dict):
            raise InputError(f"{where}: expected an object.")
        missing = [k for k in ("id", "target", "bias_type", "context", "sentences") if k not in c]
        if missing:
            raise InputError(f"{where}: missing key(s) {', '.join(missing)}.")
        sents, sids = {}, {}
        for j, s in enumerate(c["sentences"]):
            if not isinstance(s, dict) or "sentence" not in s or "gold_label" not in s:
                raise InputError(f"{where}.sentences[{j}]: needs 'sentence' and 'gold_label'.")
            lab = s["gold_label"]
            if lab not in GOLD_LABELS:
                raise InputError(f"{where}.sentences[{j}]: gold_label {lab!r} is not one of {', '.join(GOLD_LABELS)}.")
            if lab in sents:
                raise InputError(f"{where}: two sentences with gold_label {lab!r}.")
            sents[lab] = s["sentence"]
            sids[lab] = str(s.get("id", f"{c['id']}-{lab}"))
        if set(sents) != set(GOLD_LABELS):
            raise InputError(f"{where}: needs one sentence per gold label ({', '.join(GOLD_LABELS)}).")
        if split == "intrasentence" and "BLANK" not in c["context"]:
            raise InputError(f"{where}: intrasentence context has no BLANK: {c['context']!r}")
        out.append(
            StereoSetExample(
                id=str(c["id"]),
                target=c["target"],
                bias_type=c["bias_type"],
                context=c["context"],
                sentences=sents,
                sentence_ids=sids,
                source=where,
            )
        )
    return out


# ------------------------------------------------------------------------------------------------- CrowS-Pairs


@dataclass(frozen=True)
class CrowsPair:
    id: str
    sent_more: str
    sent_less: str
    direction: str  # stereo | antistereo
    bias_type: str
    source: str = ""


CROWS_COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")


def load_crows(path: str | os.PathLike[str], bias_type: str | None = "gender") -> list[CrowsPair]:
    """Read the CrowS-Pairs CSV (a real CSV parser: one quoted field spans two lines) and filter by bias type."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: CrowS-Pairs file not found.")
    want = _bias_filter(bias_type)
    want = CROWS_ALIASES.get(want, want) if want else None
    out, seen_types = [], set()
    with open(p, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in CROWS_COLUMNS if c not in header]
        if missing:
            raise InputError(
                f"{p}: line 1: missing column(s) {', '.join(missing)}; found {', '.join(map(str, header))}."
            )
        start = reader.line_num + 1
        try:
            for k, row in enumerate(reader):
                line = start
                start = reader.line_num + 1
                if None in row or any(row.get(c) is None for c in CROWS_COLUMNS):
                    raise InputError(f"{p}: line {line}: expected {len(header)} fields, got a different number.")
                direction = row["stereo_antistereo"].strip()
                if direction not in ("stereo", "antistereo"):
                    raise InputError(
                        f"{p}: line {line}: stereo_antistereo must be 'stereo' or 'antistereo', got {direction!r}."
                    )
                if not row["sent_more"].strip() or not row["sent_less"].strip():
                    raise InputError(f"{p}: line {line}: empty sent_more or sent_less.")
                bt = row["bias_type"].strip()
                seen_types.add(bt)
                if want is not None and bt != want:
                    continue
                rid = row.get("") or row.get("id") or str(k)
                out.append(
                    CrowsPair(
                        id=f"crows-{rid}",
                        sent_more=row["sent_more"],
                        sent_less=row["sent_less"],
                        direction=direction,
                        bias_type=bt,
                        source=f"{p}:{line}",
                    )
                )
        except csv.Error as e:
            raise InputError(f"{p}: line {reader.line_num}: malformed CSV ({e}).") from e
    if want is not None and not out and seen_types:
        raise InputError(f"{p}: no pairs with bias_type {want!r}; found: {', '.join(sorted(seen_types))}.")
    return out
