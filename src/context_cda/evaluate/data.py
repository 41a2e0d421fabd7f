"""Benchmark files: StereoSet (original JSON or flattened JSONL) and CrowS-Pairs (CSV).

Each loader takes a local path; :func:`benchmark_file` finds that path by dataset name through
:mod:`context_cda.data.datasets`: an explicit override (``evaluate.<name>_path``), else the mirror ($CCDA_DATA_DIR), the
data cache (``run.data_cache``) or the public download, checksums checked. :func:`benchmark_datasets` lists the
datasets the configured benchmarks read (``ccda data list --profile ...``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.datasets import resolve
from ..errors import InputError
from ..io import json_objects, read_text, stable_id

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EvaluateConfig

# benchmark -> the dataset its file comes from (context_cda.data.datasets.DATASETS)
DATASETS = {"stereoset": "stereoset", "crows": "crows-pairs"}

GOLD_LABELS = ("stereotype", "anti-stereotype", "unrelated")
STEREOSET_BIAS_TYPES = ("gender", "profession", "race", "religion")
# CrowS-Pairs spells some bias types differently from StereoSet (bias-bench maps race -> race-color too).
CROWS_ALIASES = {"race": "race-color"}


def benchmark_file(name: str, path: str | os.PathLike[str] | None = None, cache: str | None = None) -> Path:
    """The local file for benchmark ``name`` (stereoset, crows): ``path`` if given (a file or ``s3://`` URI),
    else its dataset from the mirror, the cache or the download."""
    p = resolve(DATASETS[name], path, cache=cache, key=f"evaluate.{name}_path")
    if not p.is_file():
        raise InputError(f"{p}: {name} file not found (set evaluate.{name}_path to an existing file).")
    return p


def local_benchmark_file(name: str, path: str | os.PathLike[str] | None = None, cache: str | None = None) -> Path | None:
    """The local file of benchmark ``name`` when it is here without a download: ``path`` (a local file), else its
    dataset in the mirror or the data cache; None otherwise (an ``s3://`` path, a dataset not fetched yet)."""
    from ..data import datasets, s3

    if path:
        return None if s3.is_s3(path) else Path(path).expanduser()
    ds = datasets.get(DATASETS[name])
    root = datasets.find(ds, cache)
    return ds.location(root) if root is not None else None


def benchmark_datasets(cfg: EvaluateConfig) -> list[tuple[str, str, str, str | None]]:
    """(dataset, benchmark, config key of the explicit path, its value) for every dataset the configured
    benchmarks read, in benchmark order; an explicit path replaces the dataset."""
    from .extrinsic.data import GLUE_TASKS, STS_BIAS_DATASET
    from .extrinsic.nli_templates import NLI_WORDS_DATASET
    from .gender_words import GENDER_WORDS_DATASET

    def key(dotted: str) -> tuple[str, str | None]:
        obj: object = cfg
        for part in dotted.split("."):
            obj = getattr(obj, part)
        return f"evaluate.{dotted}", obj  # type: ignore[return-value]

    wanted: dict[str, list[tuple[str, str]]] = {
        "stereoset": [(DATASETS["stereoset"], "stereoset_path")],
        "stereoset-inter": [(DATASETS["stereoset"], "stereoset_path")],
        "crows": [(DATASETS["crows"], "crows_path")],
        "next-token": [(DATASETS["stereoset"], "stereoset_path"), (GENDER_WORDS_DATASET, "next_token.words_path")],
        "glue": [(GLUE_TASKS[t].dataset, "glue.path") for t in cfg.glue.tasks],
        "biasbios": [(cfg.biasbios.dataset, "biasbios.path")],
        "stsb": [(GLUE_TASKS["stsb"].dataset, "stsb.path"), (STS_BIAS_DATASET, "stsb.bias_path")],
        "nli-bias": [(GLUE_TASKS[cfg.nli_bias.train_set].dataset, "nli_bias.train_path"),
                     (NLI_WORDS_DATASET, "nli_bias.words_path")],
        "winogender": [("winogender", "winogender.path")],
        "winobias": [("winobias", "winobias.path")],
    }
    return [(ds, bench, *key(k)) for bench in cfg.benchmarks for ds, k in wanted.get(bench, [])]


# ------------------------------------------------------------------------------------------------- StereoSet


@dataclass(frozen=True)
class StereoSetExample:
    """One cluster: an intrasentence context with ``BLANK`` and the three sentences that fill it, or an
    intersentence context sentence and three candidate next sentences."""

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
    (``intrasentence``: the ``stereoset`` benchmark; ``intersentence``: ``stereoset-inter``; ``all``: both, as
    decontamination reads them) and one bias type (``all`` keeps every type)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: StereoSet file not found.")
    text = read_text(p)
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
    if not examples:
        raise InputError(f"{p}: no {split} examples (the file holds none of that split); pass a StereoSet file with "
                         f"{split} clusters (evaluate.stereoset_path).")
    unique_ids(examples, "cluster")
    want = _bias_filter(bias_type)
    if want is not None:
        kept = [e for e in examples if e.bias_type == want]
        if not kept and examples:
            known = sorted({e.bias_type for e in examples})
            raise InputError(f"{p}: no {split} examples with bias_type {want!r}; found: {', '.join(known)}.")
        examples = kept
    return examples


def _flat_id(row: dict, taken: dict[str, tuple]) -> str:
    """A flattened cluster's id: a hash of its target, context and stereotype sentence (stable across versions of
    the file); two different clusters that share those three (StereoSet dev has such pairs, differing in the
    anti-stereotype) get the id of all five sentences for the later one. An exact copy keeps its id (and is
    refused as a duplicate)."""
    content = tuple(row[k] for k in ("target", "context", *GOLD_LABELS))
    cid = stable_id("stereoset", row["target"], row["context"], row["stereotype"])
    if cid in taken and taken[cid] != content:
        cid = stable_id("stereoset", *content)
    taken.setdefault(cid, content)
    return cid


def _stereoset_flat(p: Path, text: str, split: str) -> list[StereoSetExample]:
    out: list[StereoSetExample] = []
    taken: dict[str, tuple] = {}
    keys = ("type", "target", "bias_type", "context", *GOLD_LABELS)
    for lineno, row in json_objects(p, enumerate(text.splitlines(), 1), keys):
        bad = [k for k in keys if not isinstance(row[k], str)]
        if bad:
            raise InputError(f"{p}: line {lineno}: key(s) {', '.join(bad)} must be strings.")
        if split not in ("all", row["type"]):
            continue
        if row["type"] == "intrasentence" and "BLANK" not in row["context"]:
            raise InputError(f"{p}: line {lineno}: intrasentence context has no BLANK: {row['context']!r}")
        cid = _flat_id(row, taken)
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
    splits = ("intrasentence", "intersentence") if split == "all" else (split,)
    clusters = [(name, i, c) for name in splits for i, c in enumerate(doc["data"].get(name) or [])]
    for name in splits:
        if not isinstance(doc["data"].get(name, [] if split == "all" else None), list):
            raise InputError(f"{p}: data.{name} is missing or not a list.")
    out = []
    for name, i, c in clusters:
        where = f"{p}:data.{name}[{i}]"
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
        if name == "intrasentence" and "BLANK" not in c["context"]:
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
    with io.StringIO(read_text(p), newline="") as f:
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
    if not seen_types:
        raise InputError(f"{p}: a header and no pairs; pass the CrowS-Pairs CSV with its rows (evaluate.crows_path).")
    if want is not None and not out:
        raise InputError(f"{p}: no pairs with bias_type {want!r}; found: {', '.join(sorted(seen_types))}.")
    unique_ids(out, "pair")
    return out


def unique_ids(items: Sequence[StereoSetExample] | Sequence[CrowsPair], what: str) -> None:
    """Every benchmark item once: an id seen twice (a copied cluster or pair) would be scored twice and count
    double in SS / CS, so it is an :class:`InputError` naming both places."""
    first: dict[str, str] = {}
    for it in items:
        if it.id in first:
            raise InputError(f"{it.source}: duplicate {what} id {it.id!r} (first at {first[it.id]}); each item must "
                             f"appear once, or it is scored twice. Remove one of the two.")
        first[it.id] = it.source
