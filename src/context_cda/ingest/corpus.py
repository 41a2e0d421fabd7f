"""Ingest: read a corpus, normalise, split into sentences, keep those with words of the run's attribute
(``run.attribute``: gendered words by default), deduplicate, sample.

Inputs: ``.txt`` (one sentence or paragraph per line), ``.jsonl``, ``.csv``, ``.parquet``, each optionally
``.gz``; or a folder of such files (local, or ``s3://``). Named corpora (``ingest.corpus``) are datasets of
:mod:`context_cda.data.datasets`: read from the mirror ($CCDA_DATA_DIR) or the data cache, else downloaded once
(pinned, checksum-checked).

Nothing is dropped silently: every line or sentence that does not make it into ``sentences.parquet`` is in
``rejected.parquet`` with a reason (``line-too-long``, ``invalid-json``, ``missing-text``, ``too-short``,
``too-long``, ``eval-overlap`` (the sentence holds a benchmark item: :mod:`context_cda.evaluate.decontam`),
``no-<attribute>-term`` (``no-gender-term``, ``no-race-term`` ...), ``duplicate``, ``not-sampled``), and the summary
counts them.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..config import Config
from ..data.datasets import DATASETS, local_path, resolve
from ..errors import InputError
from ..io import BOM, path_hash, read_text, stable_id, text_lines, write_rejected, write_table
from ..layout import SENTENCES_FILE

SUPPORTED = (".txt", ".jsonl", ".csv", ".parquet")
#: what an error about undecodable bytes in a corpus tells the user to do
ENCODING_FIX = ("Pass --encoding-errors replace to substitute U+FFFD and go on, or --encoding with the file's "
                "encoding.")


def corpus_dataset(cfg: Config) -> str | None:
    """The named corpus ingest reads (a corpus in :data:`context_cda.data.datasets.DATASETS`), or None when
    ``ingest.path`` names the input instead."""
    if cfg.ingest.path:
        return None
    name = cfg.ingest.corpus
    if name == "path":
        raise InputError("ingest.corpus is 'path' but no --path (ingest.path) was given.")
    known = [d.name for d in DATASETS.values() if d.kind == "corpus"]
    if name not in known:
        raise InputError(f"Unknown corpus {name!r}. Known: {', '.join(known)}; or pass --path FILE (ingest.path).")
    return name


def corpus_files(cfg: Config, path: Path | str | None = None) -> list[Path]:
    """The files to read: ``path`` / ``ingest.path`` if given (a file or folder, local or ``s3://``), else the
    named corpus (``ingest.corpus``) from the mirror ($CCDA_DATA_DIR), the data cache or its download."""
    p = path or cfg.ingest.path
    if p:
        p = local_path(p, cfg.run.data_cache)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and _kind(f) in SUPPORTED)
            if not files:
                raise InputError(f"{p}: folder holds no {', '.join(SUPPORTED)} files (optionally .gz).")
            return files
        if not p.is_file():
            raise InputError(f"{p}: no such file. Check --path (or ingest.path in the config).")
        return [p]
    name = corpus_dataset(cfg)
    return [resolve(str(name), cache=cfg.run.data_cache, key="ingest.path")]


# ------------------------------------------------------------------------------------------------ reading


def _kind(path: Path) -> str:
    suffixes = path.suffixes
    if suffixes and suffixes[-1] == ".gz":
        return suffixes[-2] if len(suffixes) > 1 else ".txt"
    return path.suffix or ".txt"


@dataclass
class RawLine:
    text: str | None
    source: str
    line: int
    problem: str | None = None  # a reason when the line itself is rejected


def read_lines(path: Path, cfg: Config, stats: Counter) -> Iterator[RawLine]:
    """Yield the texts of one file with their line/row numbers (1-based)."""
    ic = cfg.ingest
    kind = _kind(path)
    src = path.name
    if kind == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types
            raise InputError(f"{path}: not a readable Parquet file ({e}).") from e
        if ic.text_column not in table.column_names:
            raise InputError(
                f"{path}: no column {ic.text_column!r}; columns are {', '.join(table.column_names)}. "
                "Pass --text-column NAME."
            )
        kind_of = table.schema.field(ic.text_column).type
        if not (pa.types.is_string(kind_of) or pa.types.is_large_string(kind_of) or pa.types.is_null(kind_of)):
            raise InputError(f"{path}: column {ic.text_column!r} holds {kind_of}, not text (strings). Pass the "
                             "column with the text (--text-column NAME) or convert it (df[col].astype(str)).")
        for i, value in enumerate(table.column(ic.text_column).to_pylist(), start=1):
            yield _checked(value, src, i, ic.max_line_chars)
        return
    if kind == ".csv":
        yield from _read_csv(path, cfg, stats)
        return
    for i, text, replaced, too_long in text_lines(path, ic.encoding, ic.encoding_errors, max_bytes=ic.max_line_chars * 4,
                                        fix=ENCODING_FIX):
        stats["lines_with_replaced_bytes"] += replaced
        if too_long:  # rejected before it is decoded
            yield RawLine(text, src, i, "line-too-long")
        elif kind != ".jsonl":
            yield _checked(text, src, i, ic.max_line_chars)
        elif text.strip():
            yield _jsonl_line(text, src, i, ic)


def _jsonl_line(text: str, src: str, line: int, ic: Any) -> RawLine:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return RawLine(text[:200], src, line, f"invalid-json: {e.msg}")
    if not isinstance(obj, dict) or ic.text_column not in obj:
        return RawLine(text[:200], src, line, f"missing-text: no key {ic.text_column!r}")
    return _checked(obj[ic.text_column], src, line, ic.max_line_chars)


def _checked(value: Any, src: str, line: int, max_chars: int) -> RawLine:
    if value is None or (isinstance(value, float) and value != value):
        return RawLine(None, src, line, "missing-text: empty value")
    text = str(value)
    if len(text) > max_chars:
        return RawLine(text[:200], src, line, "line-too-long")
    return RawLine(text, src, line)


def _read_csv(path: Path, cfg: Config, stats: Counter) -> Iterator[RawLine]:
    ic = cfg.ingest
    csv.field_size_limit(max(ic.max_line_chars * 4, 131072))
    text = read_text(path, ic.encoding, ic.encoding_errors, fix=ENCODING_FIX)
    if ic.encoding_errors == "replace":
        stats["lines_with_replaced_bytes"] += sum("\ufffd" in ln for ln in text.split("\n"))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames is None:
        raise InputError(f"{path}: empty CSV file (no header row).")
    if ic.text_column not in reader.fieldnames:
        raise InputError(
            f"{path}: the header has no column {ic.text_column!r} (columns: {', '.join(reader.fieldnames)}). "
            "Pass --text-column NAME."
        )
    for row in reader:
        yield _checked(row.get(ic.text_column), path.name, reader.line_num, ic.max_line_chars)


# ------------------------------------------------------------------------------------------------ normalising

_WT_JOINERS = [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")]
_SPACE_BEFORE = re.compile(r" ([.,;:!?%)\]}])")
_SPACE_AFTER = re.compile(r"([(\[{$]) ")
_CLITICS = re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b")
_HEADING = re.compile(r"^\s*=( =)* .* =( =)*\s*$")
_WS = re.compile(r"\s+")


def _pair_quotes(text: str) -> str:
    """WikiText spaces both sides of every double quote: attach opening quotes to the next word and closing
    quotes to the previous one (only when the quotes pair up)."""
    parts = text.split('"')
    if len(parts) < 3 or len(parts) % 2 == 0:
        return text
    for k in range(len(parts) - 1):  # quote k sits between parts[k] and parts[k + 1]
        if k % 2 == 0:
            parts[k + 1] = parts[k + 1].lstrip()
        else:
            parts[k] = parts[k].rstrip()
    return '"'.join(parts)


def normalise(text: str, cfg: Config) -> str | None:
    """NFC, U+FEFF removed, WikiText detokenisation (optional), whitespace collapse. None for headings (when dropped)."""
    text = unicodedata.normalize("NFC", text).replace(BOM, "")  # a stray byte-order mark inside a text cell
    if cfg.ingest.drop_headings and _HEADING.match(text):
        return None
    if cfg.ingest.detokenize_wikitext:
        for a, b in _WT_JOINERS:
            text = text.replace(a, b)
        text = _SPACE_BEFORE.sub(r"\1", text)
        text = _SPACE_AFTER.sub(r"\1", text)
        text = _CLITICS.sub(r"\1", text)
        text = _pair_quotes(text)
    return _WS.sub(" ", text).strip()


# ------------------------------------------------------------------------------------------------ the stage


class _Selection:
    """The sentences kept so far (by id, first occurrence wins) and every rejected line or sentence, with why."""

    def __init__(self, config: Config, index: Any = None) -> None:
        from ..cda.stage import make_swapper

        self.ic = config.ingest
        self.attribute = config.run.attribute
        self.no_term = f"no-{config.run.attribute}-term"
        plain = config.model_copy(update={"cda": config.cda.model_copy(update={"swap_names": False})})
        self.swapper = make_swapper(plain)  # the words a counterfactual swaps (names excluded)
        self.index = index  # decontamination (context_cda.evaluate.decontam.EvalIndex), None: off
        self.kept: dict[str, dict[str, Any]] = {}
        self.rejected: list[dict[str, Any]] = []
        self.overlaps: Counter = Counter()
        self.left_alone: Counter = Counter()  # rejected sentences per reason a word was left alone (race, religion)

    def reject(self, text: str | None, source: str, line: int, reason: str, rid: str | None = None) -> None:
        self.rejected.append({S.ID: rid or stable_id("rejected", source, line, text), S.TEXT: text,
                              S.SOURCE: source, S.LINE: line, S.REASON: reason})

    def consider(self, sent: str, source: str, line: int) -> None:
        n_words, sid = len(sent.split()), stable_id("sentence", sent)
        terms = self.swapper.find_terms(sent)
        reason = ("too-short" if n_words < self.ic.min_words else "too-long" if n_words > self.ic.max_words
                  else self._overlap(sent) or (self._no_term(sent) if self.ic.require_gendered and not terms
                                               else "duplicate" if sid in self.kept else None))
        if reason:
            self.reject(sent, source, line, reason, sid)
            return
        self.kept[sid] = {S.ID: sid, S.TEXT: sent, S.SOURCE: source, S.LINE: line, S.N_WORDS: n_words,
                          S.ATTRIBUTE_TERMS: terms}


    def _no_term(self, sent: str) -> str:
        """``no-<attribute>-term``; for race and religion with the words the sense rules left alone and why
        (``no-religion-term: left alone: Christians (bound), Easter (no-counterpart)``), counted in the summary."""
        left = self.swapper.skipped(sent) if self.attribute != "gender" else []
        if not left:
            return self.no_term
        self.left_alone.update({why for _, why in left})
        return f"{self.no_term}: left alone: " + ", ".join(f"{w} ({why})" for w, why in left)

    def _overlap(self, sent: str) -> str | None:
        """``eval-overlap: ...`` when the sentence holds an evaluation item (checked before the gender filter, so
        the neutral sentences INLP reads from the rejected rows are clean too)."""
        match = self.index.match(sent) if self.index is not None else None
        if match is None:
            return None
        self.overlaps[match.benchmark] += 1
        return match.reason


def _read_sentences(files: list[Path], config: Config, sel: _Selection, stats: Counter) -> None:
    """Every line of every file: normalised, split into sentences, each kept or rejected."""
    import pysbd

    from ..runtime.progress import iterate

    segmenter = pysbd.Segmenter(language="en", clean=False)
    for path in files:
        for raw in iterate(read_lines(path, config, stats), f"ingest {path.name}", "line"):
            stats["lines"] += 1
            if raw.problem:
                sel.reject(raw.text, raw.source, raw.line, raw.problem)
                continue
            para = normalise(raw.text or "", config)
            if not para:
                stats["empty_or_heading_lines"] += 1
                continue
            for sent in segmenter.segment(para):
                if sent.strip():
                    stats["sentences"] += 1
                    sel.consider(sent.strip(), raw.source, raw.line)


def _sample(sel: _Selection, sample_n: int | None, seed: int) -> list[dict[str, Any]]:
    rows = list(sel.kept.values())
    if sample_n is None or sample_n >= len(rows):
        return rows
    chosen = set(random.Random(seed).sample(range(len(rows)), sample_n))
    for i, r in enumerate(rows):
        if i not in chosen:
            sel.reject(r[S.TEXT], r[S.SOURCE], r[S.LINE], "not-sampled", r[S.ID])
    return [r for i, r in enumerate(rows) if i in chosen]


#: what the error for a corpus without a kept sentence asks for, per attribute
_NEEDS = {"gender": "gendered sentences: check that the corpus is English text with gendered words (he, she, "
                    "mother, ...)",
          "race": "sentences that name a race or ethnicity of people: check that the corpus is English text with "
                  "such words (Black voters, white residents, Asian families, ...; docs/attributes.md)",
          "religion": "sentences with religion words: check that the corpus is English text with such words "
                      "(Jewish, Christians, church, mosque, ...; docs/attributes.md)"}


def _nothing_kept(files: list[Path], stats: Counter, sel: _Selection) -> InputError:
    reasons = Counter(r[S.REASON].split(":")[0] for r in sel.rejected)
    why = ", ".join(f"{n} {r}" for r, n in reasons.most_common()) or "none"
    return InputError(
        f"{', '.join(map(str, files))}: no sentence kept ({stats['lines']} lines, {stats['sentences']} sentences; "
        f"rejected: {why}). The pipeline needs {_NEEDS[sel.attribute]}, ingest.min_words/max_words, "
        "ingest.text_column and the lexicon."
    )


def run_ingest(
    config: Config, inputs: Mapping[str, Path] | None = None, out_dir: Path | None = None, **_: Any
) -> dict[str, Any]:
    """Read → normalise → split → filter → dedupe → sample; write ``sentences.parquet`` + ``rejected.parquet``."""
    import pandas as pd

    from ..stages import resolve_io
    from ..steps import Counts, recorder

    inputs, out = resolve_io(config, "ingest", inputs, out_dir)
    files = corpus_files(config, inputs.get("corpus"))
    ic = config.ingest
    rec = recorder(out)
    from ..evaluate.decontam import index_for

    with rec.timed("decontamination_index"):
        sel, stats = _Selection(config, index_for(config)), Counter()
    with rec.timed("read_split_filter"):
        _read_sentences(files, config, sel, stats)
    if stats["lines"] == 0:
        raise InputError(f"{', '.join(map(str, files))}: the corpus is empty (no lines).")
    if not sel.kept:
        raise _nothing_kept(files, stats, sel)
    rows = _sample(sel, ic.sample_n, config.run.seed)
    df = pd.DataFrame(rows, columns=[S.ID, S.TEXT, S.SOURCE, S.LINE, S.N_WORDS, S.ATTRIBUTE_TERMS])
    out_file = write_table(df, out / SENTENCES_FILE)
    rejected = sel.rejected
    rej_file = write_rejected(pd.DataFrame(rejected, columns=[S.ID, S.TEXT, S.SOURCE, S.LINE, S.REASON]), out)
    reasons = Counter(r[S.REASON].split(":")[0] for r in rejected)
    summary = {
        "files": len(files),
        "corpus_files": {f.name: {"path": str(f), "sha256": path_hash(f)} for f in files},
        "lines": stats["lines"],
        "sentences": stats["sentences"],
        "rows_out": len(df),
        "rows_rejected": len(rejected),
        "rejected_by_reason": dict(sorted(reasons.items())),
        "lines_with_replaced_bytes": stats["lines_with_replaced_bytes"],
        "eval_overlap": sum(sel.overlaps.values()),
        "eval_overlap_by_benchmark": dict(sel.overlaps),
        "top_attribute_terms": dict(Counter(t for r in rows for t in r[S.ATTRIBUTE_TERMS]).most_common(10)),
        **({"left_alone": dict(sel.left_alone.most_common())} if config.run.attribute != "gender" else {}),
    }
    rec.finish(
        Counts(items_in=stats["lines"], out=len(df), rejected=len(rejected)),
        outputs={"sentences": out_file, "rejected": rej_file},
        summary=summary,
    )
    return summary
