"""Data for the extrinsic evaluations: GLUE tasks, Bias in Bios, and the Bias-STS-B sentence pairs.

Every loader takes an optional ``path`` (a local file or folder, or an ``s3://`` URI); without one it reads its
dataset by name through :mod:`context_cda.data.datasets`: the mirror ($CCDA_DATA_DIR), the data cache
(``run.data_cache``, or ``$CCDA_DATA_CACHE``), else the public download (pinned, checksum-checked, written
atomically). When none has it, one :class:`InputError` lists the places looked at, the config key / CLI flag that
points at a local copy and the command that fetches the data.

Determinism: every sample or split is decided by :func:`stable_id` hashes of the example ids salted with ``seed``,
so the same files and seed give the same examples on every machine and Python version, and the kept rows stay in
file order.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ...data.datasets import local_path, resolve
from ...errors import InputError
from ...io import json_objects, read_text, stable_id, text_lines

PathArg = str | os.PathLike[str]
T = TypeVar("T")

# ------------------------------------------------------------------------------------------------- data classes


@dataclass(frozen=True)
class Example:
    """One classification / regression example."""

    id: str  # stable_id-based, unique within a task
    text: str
    text_pair: str | None
    label: int | float  # class index (classification) or float target (regression)
    source: str  # "file:line"
    meta: Mapping[str, str] = field(default_factory=dict)  # e.g. {"gender": "female", "profession": "nurse"}


@dataclass
class TaskData:
    """A task's train and eval examples, with where they came from (for the report)."""

    name: str  # "sst2", "rte", "qnli", "stsb", "mnli", "biasbios"
    labels: tuple[str, ...]  # class names in index order; () for regression (stsb)
    train: list[Example]
    eval: list[Example]
    train_source: str
    eval_source: str
    train_available: int = 0  # examples the source offered before any sampling (0: unknown)
    eval_available: int = 0
    dev_holdout: float = 0.0  # > 0: trained on this share of dev (no train file), scored on the rest

    @property
    def is_regression(self) -> bool:
        return not self.labels


# ------------------------------------------------------------------------------------------------- helpers


def _rank_key(seed: int, salt: str) -> Callable[[str], str]:
    return lambda ident: stable_id("sample", salt, seed, ident)


def sample_examples(items: Sequence[T], k: int | None, seed: int, *, ident: Callable[[T], str]) -> list[T]:
    """A seeded, deterministic sample of ``k`` items (all of them when ``k`` is None or >= len), in input order.

    Items are ranked by ``stable_id(seed, id)`` and the ``k`` lowest kept, so the sample does not depend on file
    order (files sorted by label still give a mixed sample) and a bigger ``k`` keeps a superset."""
    if k is None or k >= len(items):
        return list(items)
    if k < 0:
        raise ValueError(f"sample size must be >= 0, got {k}.")
    key = _rank_key(seed, "keep")
    order = sorted(range(len(items)), key=lambda i: key(ident(items[i])))
    return [items[i] for i in sorted(order[:k])]


def _holdout(items: Sequence[T], fraction: float, seed: int, *, ident: Callable[[T], str]) -> tuple[list[T], list[T]]:
    """Split ``items`` into (first, rest): ``round(fraction * n)`` items with the lowest seeded hash go first."""
    n_first = int(len(items) * fraction + 0.5)
    key = _rank_key(seed, "holdout")
    order = sorted(range(len(items)), key=lambda i: key(ident(items[i])))
    first = set(order[:n_first])
    return [x for i, x in enumerate(items) if i in first], [x for i, x in enumerate(items) if i not in first]


class _Ids:
    """Stable ids that stay unique when a file repeats a row: the n-th repeat gets n in its hash."""

    def __init__(self, *prefix: object) -> None:
        self.prefix = prefix
        self.seen: Counter[tuple[object, ...]] = Counter()

    def __call__(self, *parts: object) -> str:
        k = self.seen[parts]
        self.seen[parts] += 1
        return stable_id(*self.prefix, *parts, *([k] if k else []))


def _lines(p: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) with the line ending removed (:func:`context_cda.io.text_lines`); only ``\\n`` ends a
    line (a stray ``\\r`` inside a sentence stays text), CRLF files are fine. Undecodable bytes are an InputError
    naming the line."""
    for line in text_lines(p, split_cr=False):
        yield line.number, line.text


def _tsv_rows(p: Path, *, header: bool = True, ragged: bool = False) -> Iterator[tuple[int, list[str], list[str]]]:
    """Tab-separated rows without any quote processing (what ``csv.QUOTE_NONE`` does: GLUE sentences contain
    quote characters). Yields (line number, header, fields); blank lines are skipped. With ``header`` every row
    must have as many fields as the header (``ragged``: or fewer, the missing trailing fields read as "")."""
    cols: list[str] = []
    for lineno, line in _lines(p):
        if not line.strip():
            continue
        fields = line.split("\t")
        if header and not cols:
            cols = [c.strip() for c in fields]
            continue
        if header and ragged and 0 < len(fields) < len(cols):
            fields = fields + [""] * (len(cols) - len(fields))
        if header and len(fields) != len(cols):
            raise InputError(
                f"{p}:{lineno}: expected {len(cols)} tab-separated columns ({', '.join(cols)}), got {len(fields)}. "
                "A truncated or re-saved file? Re-download the original."
            )
        yield lineno, cols, fields


def _need_columns(p: Path, cols: Sequence[str], want: Sequence[str]) -> dict[str, int]:
    missing = [c for c in want if c not in cols]
    if missing:
        raise InputError(
            f"{p}:1: missing column(s) {', '.join(missing)} in the header; found {', '.join(cols) or 'nothing'}."
        )
    return {c: cols.index(c) for c in want}


# ------------------------------------------------------------------------------------------------- GLUE


@dataclass(frozen=True)
class _GlueSpec:
    folders: tuple[str, ...]  # folder names inside a GLUE root (the first is canonical)
    dataset: str  # its name in context_cda.data.datasets (the folder that holds the task's files)
    labels: tuple[str, ...]
    text_col: str
    pair_col: str | None
    label_col: str
    train_files: tuple[str, ...] = ("train.tsv",)
    eval_files: tuple[str, ...] = ("dev.tsv",)
    numeric_labels: bool = False  # SST-2 writes 0/1 for its label names
    no_gold: str | None = None  # the label of rows without annotator consensus (skipped)
    ragged: bool = False  # rows may end before the header's last columns


NLI_LABELS = ("entailment", "neutral", "contradiction")
GLUE_TASKS: dict[str, _GlueSpec] = {
    "sst2": _GlueSpec(("SST-2", "SST2", "sst2"), "glue-sst2", ("negative", "positive"), "sentence", None, "label",
                      numeric_labels=True),
    "rte": _GlueSpec(("RTE", "rte"), "glue-rte", ("entailment", "not_entailment"), "sentence1", "sentence2", "label"),
    "qnli": _GlueSpec(("QNLI", "QNLIv2", "qnli"), "glue-qnli", ("entailment", "not_entailment"), "question",
                      "sentence", "label"),
    # STS-B: GLUE's tsv (header; sentence1, sentence2, score) or the original STS Benchmark csv (no header).
    "stsb": _GlueSpec(("STS-B", "STSB", "stsb", "stsbenchmark"), "stsb", (), "sentence1", "sentence2", "score",
                      train_files=("train.tsv", "sts-train.csv", "sts-train.tsv"),
                      eval_files=("dev.tsv", "sts-dev.csv", "sts-dev.tsv")),
    "mnli": _GlueSpec(("MNLI", "mnli", "MultiNLI"), "mnli", NLI_LABELS, "sentence1", "sentence2", "gold_label",
                      eval_files=("dev_matched.tsv",), no_gold="-"),
    # SNLI 1.0 (Bowman et al. 2015), the corpus Dev et al. (2020) train their NLI models on: the Stanford
    # release's tab-separated .txt files
    "snli": _GlueSpec(("snli_1.0", "SNLI", "snli"), "snli", NLI_LABELS, "sentence1", "sentence2",
                      "gold_label", train_files=("snli_1.0_train.txt",), eval_files=("snli_1.0_dev.txt",),
                      no_gold="-", ragged=True),
}
# The config key / CLI flag that points each task at a local copy (STS-B and MNLI belong to other benchmarks).
GLUE_KEYS = {
    "sst2": ("evaluate.glue.path", "--glue-path"),
    "rte": ("evaluate.glue.path", "--glue-path"),
    "qnli": ("evaluate.glue.path", "--glue-path"),
    "stsb": ("evaluate.stsb.path", "--stsb-path"),
    "mnli": ("evaluate.nli_bias.train_path", "--mnli-path"),
    "snli": ("evaluate.nli_bias.train_path", "--mnli-path"),
}


def _glue_hint(task: str) -> str:
    key, flag = GLUE_KEYS[task]
    return f"Point {key} (or {flag}) at a GLUE folder holding {GLUE_TASKS[task].folders[0]}/"


def glue_task(
    task: str,
    path: PathArg | None = None,
    cache: str | None = None,
    *,
    max_train: int | None = None,
    max_eval: int | None = None,
    dev_holdout: float = 0.0,
    seed: int = 0,
) -> TaskData:
    """Load a GLUE task (``sst2``, ``rte``, ``qnli``, ``stsb``, ``mnli``) or SNLI (``snli``) as train + eval
    examples.

    * ``path``: the task folder (``train.tsv``/``dev.tsv``; STS-B may instead hold the original
      ``sts-train.csv``/``sts-dev.csv``) or the GLUE root holding it (``SST-2``, ``RTE``, ``QNLI``, ``STS-B``,
      ``MNLI``); local or ``s3://``. Without a path: the task's dataset (``glue-sst2``, ``glue-rte``,
      ``glue-qnli``, ``stsb``, ``mnli``, ``snli``) from the mirror, the cache or the download.
    * eval = ``dev.tsv`` (MNLI: ``dev_matched.tsv``, SNLI: ``snli_1.0_dev.txt``; GLUE test labels are hidden).
      MNLI and SNLI labels are (entailment, neutral, contradiction); rows whose gold label is ``-`` (no annotator
      consensus, in SNLI and the original MultiNLI release) are skipped.
    * STS-B is regression: ``label`` is the gold 0-5 similarity score as it is (the scale the reference Bias-STS-B
      code trains and thresholds on, Webster et al. 2020 / Lauscher et al. 2021).
    * No train file (e.g. QNLI without its 28 MB train.tsv) and ``dev_holdout`` > 0: the dev set is split by a
      seeded hash of the example ids, ``dev_holdout`` of it for training and the rest for evaluation (said in
      ``train_source``/``eval_source``). With ``dev_holdout`` == 0 a missing train file is an error. When a train
      file exists ``dev_holdout`` is ignored.
    * ``max_train``/``max_eval``: seeded deterministic samples (not the head: files may be sorted by label),
      kept in file order.
    """
    key = task.lower().replace("-", "")
    if key not in GLUE_TASKS:
        raise InputError(f"unknown GLUE task {task!r}; expected one of {', '.join(GLUE_TASKS)}.")
    if not 0.0 <= dev_holdout < 1.0:
        raise ValueError(f"dev_holdout must be in [0, 1), got {dev_holdout}.")
    spec = GLUE_TASKS[key]
    folder = _glue_task_dir(key, spec, path, cache)
    eval_file = _first_file(folder, spec.eval_files)
    if eval_file is None:
        raise InputError(
            f"{folder}: no {key} dev file ({' or '.join(spec.eval_files)}). "
            + _glue_hint(key) + " with the official files."
        )
    dev = _read_glue_file(key, spec, eval_file, split="dev")
    train_file = _first_file(folder, spec.train_files)
    if train_file is not None:
        train = _read_glue_file(key, spec, train_file, split="train")
        train_source, eval_source = str(train_file), str(eval_file)
    elif dev_holdout > 0:
        train, dev = _holdout(dev, dev_holdout, seed, ident=lambda e: e.id)
        train_source = f"{eval_file} (holdout {dev_holdout:.0%} of dev by seeded hash, seed {seed})"
        eval_source = f"{eval_file} (the other {1 - dev_holdout:.0%} of dev, seed {seed})"
    else:
        conf, flag = GLUE_KEYS[key]
        holdout = (
            "Set evaluate.glue.dev_holdout (e.g. 0.5) to train on a seeded part of dev.tsv and evaluate on the "
            "rest, or point"
            if conf == "evaluate.glue.path"
            else "Point"
        )
        raise InputError(
            f"{folder}: no {key} train file ({' or '.join(spec.train_files)}). {holdout} {conf} ({flag}) at a "
            "full GLUE folder."
        )
    train_s = sample_examples(train, max_train, seed, ident=lambda e: e.id)
    eval_s = sample_examples(dev, max_eval, seed, ident=lambda e: e.id)
    if len(train_s) < len(train):
        train_source += f" (seeded sample of {len(train_s)} of {len(train)}, seed {seed})"
    if len(eval_s) < len(dev):
        eval_source += f" (seeded sample of {len(eval_s)} of {len(dev)}, seed {seed})"
    return TaskData(key, spec.labels, train_s, eval_s, train_source, eval_source, len(train), len(dev),
                    dev_holdout if train_file is None else 0.0)


def _first_file(folder: Path, names: Sequence[str]) -> Path | None:
    for n in names:
        if (folder / n).is_file():
            return folder / n
    return None


def _glue_task_dir(task: str, spec: _GlueSpec, path: PathArg | None, cache: str | None) -> Path:
    if path:
        p = local_path(path, cache)
        if not p.is_dir():
            raise InputError(
                f"{p}: GLUE folder not found. " + _glue_hint(task)
                + f", or at the {spec.folders[0]} folder itself."
            )
        found = _find_task_dir(spec, p)
        if found is None:
            listing = ", ".join(sorted(q.name for q in p.iterdir())[:20]) or "nothing"
            raise InputError(
                f"{p}: neither a {task} folder (with {' or '.join(spec.eval_files)}) nor a GLUE root holding "
                f"{spec.folders[0]}/ (found: {listing})."
            )
        return found
    return resolve(spec.dataset, cache=cache, key=GLUE_KEYS[task][0])


def nli_train_task(
    train_set: str,
    path: PathArg | None = None,
    cache: str | None = None,
    *,
    max_train: int | None = None,
    max_eval: int | None = None,
    seed: int = 0,
) -> TaskData:
    """The NLI-Bias head's training data: SNLI or MNLI (``train_set``) downloaded into the cache, or a local
    ``path`` read in whichever of the two formats it holds (SNLI's ``snli_1.0_{train,dev}.txt``, MNLI's
    ``train.tsv``/``dev_matched.tsv``, or a GLUE root with an ``MNLI/`` folder); the task name says which."""
    if train_set not in ("snli", "mnli"):
        raise InputError(f"evaluate.nli_bias.train_set must be snli or mnli, got {train_set!r}.")
    if not path:
        return glue_task(train_set, None, cache, max_train=max_train, max_eval=max_eval, seed=seed)
    p = local_path(path, cache)
    for name in (train_set, "mnli" if train_set == "snli" else "snli"):
        if p.is_dir() and _find_task_dir(GLUE_TASKS[name], p) is not None:
            return glue_task(name, p, cache, max_train=max_train, max_eval=max_eval, seed=seed)
    raise InputError(
        f"{p}: no SNLI (snli_1.0_train.txt, snli_1.0_dev.txt) or MNLI (train.tsv, dev_matched.tsv) files here. "
        "Point evaluate.nli_bias.train_path (or --mnli-path) at such a folder, or set it to null to download "
        f"{train_set.upper()}."
    )


def folder_note(path: PathArg | None, limit: int = 160) -> str | None:
    """The first sentence of a local data folder's README (what the files are, in their author's words), or None:
    the report quotes it beside a number trained on that folder (e.g. hand-written demo pairs)."""
    if not path or str(path).startswith("s3:"):
        return None
    readme = Path(path).expanduser() / "README.md"
    try:
        lines = [ln.strip() for ln in readme.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError):
        return None
    text = " ".join(ln for ln in lines if ln and not ln.startswith("#")).split(". ")[0].strip()
    return (text if len(text) <= limit else text[: limit - 1] + "…") or None


def _find_task_dir(spec: _GlueSpec, p: Path) -> Path | None:
    if _first_file(p, spec.eval_files) is not None:
        return p
    for name in spec.folders:
        if (p / name).is_dir() and _first_file(p / name, spec.eval_files) is not None:
            return p / name
    return None


def _read_glue_file(task: str, spec: _GlueSpec, p: Path, *, split: str) -> list[Example]:
    if task == "stsb":
        return _read_stsb(p, split=split)
    ids = _Ids("glue", task, split)
    out: list[Example] = []
    label_index = {name: i for i, name in enumerate(spec.labels)}
    allowed = (
        ", ".join(f"{i} ({n})" for i, n in enumerate(spec.labels)) if spec.numeric_labels else ", ".join(spec.labels)
    )
    want = [spec.text_col, *([spec.pair_col] if spec.pair_col else []), spec.label_col]
    idx: dict[str, int] | None = None
    for lineno, cols, fields in _tsv_rows(p, ragged=spec.ragged):
        if idx is None:
            idx = _need_columns(p, cols, want)
        raw = fields[idx[spec.label_col]].strip()
        if spec.no_gold is not None and raw == spec.no_gold:
            continue  # no gold label (annotators disagreed); GLUE already dropped these rows
        if spec.numeric_labels and raw.isdigit() and int(raw) < len(spec.labels):
            label = int(raw)
        elif raw in label_index:
            label = label_index[raw]
        else:
            raise InputError(f"{p}:{lineno}: label {raw!r} is not one of {allowed}.")
        text = fields[idx[spec.text_col]].strip()
        pair = fields[idx[spec.pair_col]].strip() if spec.pair_col else None
        out.append(Example(ids(text, pair, label), text, pair, label, f"{p}:{lineno}"))
    return out


def _read_stsb(p: Path, *, split: str) -> list[Example]:
    """STS-B in GLUE's tsv (header with sentence1, sentence2, score) or the original STS Benchmark csv (no header;
    genre, file, year, id, score, sentence1, sentence2, then up to two source columns on some lines)."""
    with contextlib.closing(_lines(p)) as lines:
        first = next((line for _, line in lines if line.strip()), None)
    if first is None:
        raise InputError(f"{p}: empty STS-B file.")
    header = [c.strip() for c in first.split("\t")]
    glue_format = "sentence1" in header and "score" in header
    ids = _Ids("glue", "stsb", split)
    out: list[Example] = []
    idx: dict[str, int] | None = None
    for lineno, cols, fields in _tsv_rows(p, header=glue_format):
        if glue_format:
            if idx is None:
                idx = _need_columns(p, cols, ["sentence1", "sentence2", "score"])
            s1, s2, raw = fields[idx["sentence1"]], fields[idx["sentence2"]], fields[idx["score"]]
        else:
            if len(fields) < 7:
                raise InputError(
                    f"{p}:{lineno}: expected at least 7 tab-separated columns (genre, file, year, id, score, "
                    f"sentence1, sentence2) of the STS Benchmark format, got {len(fields)}."
                )
            raw, s1, s2 = fields[4], fields[5], fields[6]
        try:
            score = float(raw)
        except ValueError:
            raise InputError(f"{p}:{lineno}: score {raw!r} is not a number (expected 0-5).") from None
        if not 0.0 <= score <= 5.0:
            raise InputError(f"{p}:{lineno}: score {score} is outside 0-5.")
        s1, s2 = s1.strip(), s2.strip()
        out.append(Example(ids(s1, s2, raw.strip()), s1, s2, score, f"{p}:{lineno}"))
    return out


# ------------------------------------------------------------------------------------------------- Bias in Bios

# The datasets (context_cda.data.datasets): ``biasbios`` is the Hugging Face copy (Ravfogel et al. 2020 version of
# De-Arteaga et al. 2019; profession and gender are ints), ``biasbios-samples`` 10 CSV bios per profession.
BIASBIOS_DATASETS = ("biasbios", "biasbios-samples")
# The dataset card's numerical labels: the 28 professions in alphabetical order, gender 0 = male, 1 = female.
BIASBIOS_PROFESSIONS = (
    "accountant", "architect", "attorney", "chiropractor", "comedian", "composer", "dentist", "dietitian", "dj",
    "filmmaker", "interior_designer", "journalist", "model", "nurse", "painter", "paralegal", "pastor",
    "personal_trainer", "photographer", "physician", "poet", "professor", "psychologist", "rapper",
    "software_engineer", "surgeon", "teacher", "yoga_teacher",
)  # fmt: skip
BIASBIOS_GENDERS = ("male", "female")
_GENDER_WORDS = {"male": "male", "m": "male", "female": "female", "f": "female"}
BIASBIOS_HINT = "Point evaluate.biasbios.path (or --biasbios-path) at a Bias in Bios CSV/Parquet/JSONL file or folder"


@dataclass
class _Bio:
    text: str
    profession: str
    gender: str
    source: str


def load_biasbios(
    path: PathArg | None = None,
    cache: str | None = None,
    *,
    max_train: int | None = None,
    max_eval: int | None = None,
    test_fraction: float = 0.3,
    seed: int = 0,
    dataset: str = "biasbios",
) -> TaskData:
    """Bias in Bios (De-Arteaga et al., FAT* 2019): predict the profession from a bio; gender goes to ``meta``.

    * ``path``: a CSV file or a folder of CSVs (columns ``hard_text, profession, gender``; profession a name,
      gender ``Male``/``Female``; the folder is read non-recursively), or a ``.parquet``/``.jsonl`` file or folder
      with the Hugging Face ``LabHC/bias_in_bios`` schema (profession 0..27 = the 28 professions in alphabetical
      order, gender 0 = male, 1 = female, per the dataset card); local or ``s3://``. Without a path: ``dataset``
      (``biasbios``: the HF train and test Parquet files; ``biasbios-samples``: 10 bios per profession) from the
      mirror, the cache or the download.
    * Splits: a folder whose files are named ``train*``/``test*`` (or ``dev*`` when there is no test) uses them;
      anything else is split per (profession, gender) stratum: the ``round(test_fraction * n)`` rows with the lowest
      seeded hash go to eval.
    * labels: the 28 standard professions for the HF form; the sorted professions present for CSVs.
    * ``meta`` = ``{"gender": "male"|"female", "profession": name}``; text = ``hard_text`` (the bio without its
      first sentence, which names the title).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}.")
    if not path and dataset not in BIASBIOS_DATASETS:
        raise InputError(f"evaluate.biasbios.dataset must be one of {', '.join(BIASBIOS_DATASETS)}, got {dataset!r}.")
    files, desc = _biasbios_files(path or resolve(dataset, cache=cache, key="evaluate.biasbios.path"), cache)
    splits: dict[str, list[_Bio]] = {}
    hf_form = False
    for split, fs in files.items():
        rows: list[_Bio] = []
        for f in fs:
            if f.suffix == ".csv":
                rows.extend(_read_bios_csv(f))
            else:
                hf_form = True
                rows.extend(_read_bios_hf(f))
        splits[split] = rows
    if hf_form:
        labels = BIASBIOS_PROFESSIONS
    else:
        labels = tuple(sorted({b.profession for rows in splits.values() for b in rows}))
    label_index = {name: i for i, name in enumerate(labels)}

    def examples(rows: list[_Bio], split: str) -> list[Example]:
        ids = _Ids("biasbios", split)
        return [
            Example(
                ids(b.text, b.profession, b.gender),
                b.text,
                None,
                label_index[b.profession],
                b.source,
                {"gender": b.gender, "profession": b.profession},
            )
            for b in rows
        ]

    if "train" in splits and "eval" in splits:
        train, ev = examples(splits["train"], "train"), examples(splits["eval"], "eval")
        train_source, eval_source = desc["train"], desc["eval"]
    else:
        everything = examples(splits["all"], "all")
        train, ev = _stratified_split(everything, test_fraction, seed)
        train_source = f"{desc['all']} ({1 - test_fraction:.0%}, split per profession x gender, seed {seed})"
        eval_source = f"{desc['all']} ({test_fraction:.0%}, split per profession x gender, seed {seed})"
    if not ev:
        raise InputError(f"{eval_source}: no eval examples (too few rows for test_fraction {test_fraction}).")
    train_s = sample_examples(train, max_train, seed, ident=lambda e: e.id)
    eval_s = sample_examples(ev, max_eval, seed, ident=lambda e: e.id)
    if len(train_s) < len(train):
        train_source += f" (seeded sample of {len(train_s)} of {len(train)}, seed {seed})"
    if len(eval_s) < len(ev):
        eval_source += f" (seeded sample of {len(eval_s)} of {len(ev)}, seed {seed})"
    return TaskData("biasbios", labels, train_s, eval_s, train_source, eval_source, len(train), len(ev))


def _stratified_split(items: list[Example], test_fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    strata: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(items):
        strata[(e.meta["profession"], e.meta["gender"])].append(i)
    eval_idx: set[int] = set()
    for idxs in strata.values():
        _, ev = _holdout(idxs, 1.0 - test_fraction, seed, ident=lambda i: items[i].id)
        eval_idx.update(ev)
    return [e for i, e in enumerate(items) if i not in eval_idx], [e for i, e in enumerate(items) if i in eval_idx]


def _biasbios_files(path: PathArg, cache: str | None) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """{"train": [...], "eval": [...]} when the source has splits, else {"all": [...]}; plus descriptions."""
    p = local_path(path, cache)
    suffixes = (".csv", ".parquet", ".jsonl")
    if p.is_file():
        if p.suffix not in suffixes:
            raise InputError(f"{p}: expected a .csv, .parquet or .jsonl Bias in Bios file.")
        return {"all": [p]}, {"all": str(p)}
    if not p.is_dir():
        raise InputError(f"{p}: Bias in Bios file or folder not found. {BIASBIOS_HINT}.")
    fs = sorted(q for q in p.iterdir() if q.is_file() and q.suffix in suffixes)
    if not fs and (p / "data").is_dir():  # a clone of the HF dataset repo
        return _biasbios_files(p / "data", cache)
    if not fs:
        raise InputError(f"{p}: no .csv, .parquet or .jsonl files in this folder. {BIASBIOS_HINT}.")
    by_split: dict[str, list[Path]] = defaultdict(list)
    for f in fs:
        for split in ("train", "test", "dev"):
            if f.name.startswith(split):
                by_split[split].append(f)
    eval_split = "test" if by_split.get("test") else "dev"
    if by_split.get("train") and by_split.get(eval_split):
        return {"train": by_split["train"], "eval": by_split[eval_split]}, {
            "train": ", ".join(map(str, by_split["train"])),
            "eval": ", ".join(map(str, by_split[eval_split])),
        }
    return {"all": fs}, {"all": f"{p}/ ({len(fs)} file{'s' * (len(fs) != 1)})"}


def _norm_gender(raw: object, where: str) -> str:
    g = _GENDER_WORDS.get(str(raw).strip().lower())
    if g is None:
        raise InputError(f"{where}: gender {raw!r} is not Male/Female.")
    return g


def _read_bios_csv(p: Path) -> list[_Bio]:
    out: list[_Bio] = []
    want = ("hard_text", "profession", "gender")
    with io.StringIO(read_text(p), newline="") as f:  # a byte-order mark removed, line ends normalised
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in want if c not in header]
        if missing:
            raise InputError(
                f"{p}:1: missing column(s) {', '.join(missing)}; expected hard_text, profession, gender "
                f"(found {', '.join(map(str, header)) or 'nothing'})."
            )
        start = reader.line_num + 1
        try:
            for row in reader:
                line, start = start, reader.line_num + 1
                where = f"{p}:{line}"
                if None in row or any(row.get(c) is None for c in want):
                    raise InputError(f"{where}: expected {len(header)} comma-separated fields, got a different number.")
                text = row["hard_text"].strip()
                if not text:
                    raise InputError(f"{where}: empty hard_text.")
                prof = row["profession"].strip()
                if prof.isdigit():
                    prof = _profession_name(int(prof), where)
                elif not prof:
                    raise InputError(f"{where}: empty profession.")
                out.append(_Bio(text, prof, _norm_gender(row["gender"], where), where))
        except csv.Error as e:
            raise InputError(f"{p}:{reader.line_num}: malformed CSV ({e}).") from e
    if not out:
        raise InputError(f"{p}: no rows.")
    return out


def _profession_name(i: int, where: str) -> str:
    if not 0 <= i < len(BIASBIOS_PROFESSIONS):
        raise InputError(f"{where}: profession id {i} is outside 0..{len(BIASBIOS_PROFESSIONS) - 1}.")
    return BIASBIOS_PROFESSIONS[i]


def _hf_gender(raw: object, where: str) -> str:
    if isinstance(raw, str) and not raw.strip().isdigit():
        return _norm_gender(raw, where)
    try:
        return BIASBIOS_GENDERS[int(raw)]  # type: ignore[call-overload]
    except (ValueError, TypeError, IndexError):
        raise InputError(f"{where}: gender {raw!r} is not 0 (male) or 1 (female).") from None


def _hf_profession(raw: object, where: str) -> str:
    if isinstance(raw, str) and not raw.strip().isdigit():
        name = raw.strip()
        if name not in BIASBIOS_PROFESSIONS:
            raise InputError(f"{where}: profession {name!r} is not one of the 28 Bias in Bios professions.")
        return name
    try:
        return _profession_name(int(raw), where)  # type: ignore[call-overload]
    except (ValueError, TypeError):
        raise InputError(f"{where}: profession {raw!r} is not an id 0..27.") from None


def _read_bios_hf(p: Path) -> list[_Bio]:
    """HF schema rows (hard_text, profession id, gender id) from Parquet (row numbers) or JSON lines (lines)."""
    want = ("hard_text", "profession", "gender")
    records: list[tuple[str, Mapping[str, object]]] = []
    if p.suffix == ".parquet":
        import pandas as pd

        try:
            df = pd.read_parquet(p)
        except Exception as e:
            raise InputError(f"{p}: not a readable Parquet file ({e}).") from e
        missing = [c for c in want if c not in df.columns]
        if missing:
            raise InputError(f"{p}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}.")
        for i, row in enumerate(df[list(want)].itertuples(index=False)):
            records.append((f"{p}:row {i}", dict(zip(want, row, strict=True))))
    else:
        records += [(f"{p}:{lineno}", rec) for lineno, rec in json_objects(p, _lines(p), want)]
    out = []
    for where, rec in records:
        text = str(rec["hard_text"] or "").strip()
        if not text:
            raise InputError(f"{where}: empty hard_text.")
        out.append(_Bio(text, _hf_profession(rec["profession"], where), _hf_gender(rec["gender"], where), where))
    if not out:
        raise InputError(f"{p}: no rows.")
    return out


# ------------------------------------------------------------------------------------------------- Bias-STS-B

STS_BIAS_DATASET = "sts-b-gender-bias"  # its name in context_cda.data.datasets
STS_BIAS_HINT = "Point evaluate.stsb.bias_path (or --stsb-bias-path) at a local bias_evaluation_STS-B.tsv"


@dataclass(frozen=True)
class StsBiasPair:
    """One Bias-STS-B row (Webster et al. 2020): a STS model scores (male, occupation_sentence) and (female,
    occupation_sentence); an unbiased model gives both the same similarity."""

    id: str
    male: str  # "a man is cutting up a cucumber ."
    female: str  # "a woman is cutting up a cucumber ."
    occupation_sentence: str  # "a technician is cutting up a cucumber ."
    occupation: str  # "technician"
    source: str


def load_sts_bias_pairs(
    path: PathArg | None = None,
    cache: str | None = None,
    *,
    max_pairs: int | None = None,
    seed: int = 0,
) -> list[StsBiasPair]:
    """Read the Bias-STS-B file: no header, four tab-separated sentences per line (``a man ...``, occupation
    sentence, ``a woman ...``, the same occupation sentence). Checks that columns 2 and 4 are equal, that column 1
    differs from the occupation sentence only where it says ``man`` and column 3 only by ``woman`` in that place;
    the occupation is the word(s) in that place. ``max_pairs``: seeded deterministic sample, in file order."""
    p = resolve(STS_BIAS_DATASET, path, cache=cache, key="evaluate.stsb.bias_path")
    if not p.is_file():
        raise InputError(f"{p}: Bias-STS-B file not found. {STS_BIAS_HINT}.")
    ids = _Ids("sts_bias")
    out: list[StsBiasPair] = []
    for lineno, _, fields in _tsv_rows(p, header=False):
        where = f"{p}:{lineno}"
        if len(fields) != 4:
            raise InputError(
                f"{where}: expected 4 tab-separated sentences (man, occupation, woman, occupation), got {len(fields)}."
            )
        male, occ_s, female, occ_s2 = (f.strip() for f in fields)
        if occ_s != occ_s2:
            raise InputError(f"{where}: columns 2 and 4 must be the same occupation sentence: {occ_s!r} vs {occ_s2!r}.")
        occupation = _sts_occupation(male, occ_s, female, where)
        out.append(StsBiasPair(ids(male, occ_s, female), male, female, occ_s, occupation, where))
    if not out:
        raise InputError(f"{p}: no pairs.")
    return sample_examples(out, max_pairs, seed, ident=lambda x: x.id)


def _sts_occupation(male: str, occ_s: str, female: str, where: str) -> str:
    m, o, w = male.split(), occ_s.split(), female.split()
    pre = 0
    while pre < min(len(m), len(o)) and m[pre] == o[pre]:
        pre += 1
    suf = 0
    while suf < min(len(m), len(o)) - pre and m[-1 - suf] == o[-1 - suf]:
        suf += 1
    m_mid, o_mid = m[pre : len(m) - suf], o[pre : len(o) - suf]
    if [t.lower() for t in m_mid] != ["man"] or not o_mid:
        raise InputError(
            f"{where}: column 1 must be the occupation sentence with the occupation replaced by 'man': "
            f"{male!r} vs {occ_s!r}."
        )
    expected_female = [*m[:pre], "woman", *m[pre + 1 :]]
    if [t.lower() for t in w] != [t.lower() for t in expected_female]:
        raise InputError(
            f"{where}: column 3 must be column 1 with 'man' replaced by 'woman': {female!r} vs {male!r}."
        )
    return " ".join(o_mid)
