"""``run_augment``: rephrase every CDA counterfactual with a generator, review it, retry, store exactly once.

The stage runs five named steps: :func:`load` (read and check the CDA table, one item per counterfactual),
:func:`plan` (settings, sampling, review, cache and the item engine's pass), :func:`run` (generate and review the
pending items shard by shard), :func:`assemble` (``augmented.parquet`` and ``rejected.parquet`` from the shards)
and :func:`record` (summary and manifest). Shards, resuming and the error policy are the item engine's
(:mod:`context_cda.items`): this module keeps only the generation, the review and the retries.

Per shard of ``augment.shard_size`` pending items: for attempt 1..(1 + max_retries) build each item's prompt,
look the request up in the cache, generate the misses (``batch_size`` prompts per ``generate`` call), review
every completion with :func:`~context_cda.augment.review` (the first accepted one wins), and retry the
still-rejected items with a prompt that says what was wrong and adapted sampling (:mod:`.retry`). The shard's
final rows (accepted, rejected with every reason, or ``error`` when the backend gave up) are then appended
atomically. The manifest counts the reasons per attempt.

Errors are not results: an item whose every attempt failed in the generator (connection, HTTP 5xx/429,
timeout, a malformed reply — after the backend's own retries) is ``error``, listed in ``errors.parquet``, never in
``rejected.parquet``. An item with a reviewed earlier attempt whose later attempts failed in the generator is
rejected for that attempt's reasons. A prompt no retry can help (empty, longer than the model's context: the
generator marks the result ``permanent``) is a final rejection named by its kind (``prompt-too-long``,
``empty-prompt``), not an error. The stage still writes its outputs (every accepted and rejected item), then raises
:class:`~context_cda.errors.ItemErrors` (exit code 75) unless ``run.allow_errors`` is set; either way the next
run retries exactly the error items. Accepted and rejected rows are final for the current settings.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import items as I
from .. import layout as L
from .. import schemas as S
from ..errors import InputError
from ..generation.base import Generator, SamplingParams
from ..io import json_hash, read_table, require_columns, require_rows, stable_id, write_table
from ..steps import Counts, Recorder, recorder
from .checks import ReviewSettings, review_many
from .checks.meaning import judge_model_ref, make_meaning_judge
from .checks.words import default_lexicon, parse_swaps, swap_terms
from .prompts import build_messages, get_prompt
from .retry import feedback, next_params
from .store import GenerationCache, cache_key

ACCEPTED, REJECTED, ERROR = I.DONE, I.REJECTED, I.ERROR
OUTPUT_COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.AUGMENTED, S.ATTEMPTS, S.GEN_MODEL, S.PROMPT_VERSION,
                  S.RAW_OUTPUT, S.ORIGINAL, S.SWAPPED_TERMS]
REJECTED_COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.RAW_OUTPUT, S.ATTEMPTS, "status", S.REASON]
ERROR_COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.ATTEMPTS, "status", S.REASON]
ATTEMPT_REASONS = "attempt_reasons"  # shard column: JSON list, one list of reasons per rejected attempt


@dataclass
class _Item:
    key: str
    cda_id: str
    text: str
    swaps: list[tuple[str, str]]
    swapped_terms: list[str]
    original: str | None
    status: str = ""
    augmented: str = ""
    raw: str = ""
    reason: str = ""
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    history: list[list[str]] = field(default_factory=list)  # reasons of each rejected attempt
    params: SamplingParams | None = None  # the next attempt's sampling
    feedback: str = ""  # the next attempt's note on the previous answer
    final: bool = False  # no further attempt (a permanent generator error)
    gen_error: bool = False  # this attempt failed in the generator after an earlier one was reviewed


@dataclass
class Loaded:
    """:func:`load`'s result: the items to augment and the rows rejected before generation."""

    source: Path
    rows_in: int
    items: list[_Item]
    skipped: list[dict[str, Any]]


@dataclass
class Plan:
    """:func:`plan`'s result: everything the generation loop needs."""

    config: Any
    task: Task
    params: SamplingParams
    max_attempts: int
    backend: str
    gen_model: str
    review: ReviewSettings
    lexicon: Any
    run: I.ItemRun
    cache: GenerationCache
    get_generator: Callable[[], Generator]
    get_judge: Callable[[], Any]
    close: Callable[[], None]
    stats: dict[str, Any] = field(default_factory=lambda: {"generated_tokens": 0, "prompt_tokens": 0,
                                                           "generate_s": 0.0})


REPHRASE, NEUTRAL = "rephrase", "neutral"


@dataclass(frozen=True)
class Task:
    """What the generator is asked for: ``rephrase`` (the augment step: a contextual rephrasing of each
    counterfactual) or ``neutral`` (the neutral step: a gender-neutral rewrite of each original sentence)."""

    name: str
    prompt_version: str
    few_shot: bool
    limit: int | None
    max_retries: int

    @classmethod
    def of(cls, config: Any, name: str = REPHRASE) -> Task:
        a, n = config.augment, config.neutral
        if name == NEUTRAL:
            return cls(NEUTRAL, n.prompt_version, n.few_shot, n.limit,
                       a.max_retries if n.max_retries is None else n.max_retries)
        return cls(REPHRASE, a.prompt_version, a.few_shot, a.limit, a.max_retries)

    def prompt(self, attribute: str):
        return get_prompt(self.prompt_version, attribute, self.name)


def load_attribute_lexicon(config: Any) -> Any:
    """The run attribute's lexicon (:func:`context_cda.cda.stage.attribute_lexicon`: gender pairs, or race /
    religion groups), or a small built-in gender pair list without the cda package."""
    try:
        from ..cda.stage import attribute_lexicon
    except ImportError:
        return default_lexicon()
    return attribute_lexicon(config)


def review_settings(config: Any, task: str = REPHRASE) -> ReviewSettings:
    """The review of ``task``'s outputs: ``augment.review`` and the length ratios, for the run's attribute."""
    return ReviewSettings.from_config(config.augment, config.run.attribute, task)


def settings_for(config: Any, task: str = REPHRASE) -> dict[str, Any]:
    """Everything that changes an item's result; its hash is part of every item key."""
    a, t = config.augment, Task.of(config, task)
    review = review_settings(config, task).to_dict()
    if a.review.meaning != "off":
        review["meaning_model"] = judge_model_ref(config)
    out = {
        "backend": a.backend,
        "model": a.model,
        "prompt_version": t.prompt_version,
        "prompt_hash": t.prompt(config.run.attribute).hash(t.few_shot),
        "few_shot": t.few_shot,
        "sampling": a.sampling.model_dump(mode="json"),
        "max_retries": t.max_retries,
        "retry_feedback": a.retry_feedback,
        "review": review,
        "lexicon": config.lexicon.model_dump(mode="json"),
    }
    if config.run.attribute != "gender" or task != REPHRASE:  # a gender rephrasing's keys stay as they were
        out.update(attribute=config.run.attribute, task=task)
    return out


def _input_path(inputs: Mapping[str, Path | str]) -> Path:
    for name in ("counterfactuals", "cda", "valid"):
        if name in inputs:
            return Path(inputs[name])
    raise InputError(f"augment: inputs must name 'counterfactuals' (got {', '.join(inputs) or 'nothing'}).")


# ------------------------------------------------------------------------------------------------ the steps


def eligible(config: Any, inputs: Mapping[str, Path | str], part: int | None = None, task: str = REPHRASE):
    """The CDA table's rows this call augments: every row (``part`` None) or one generation part's
    (:mod:`context_cda.items`), the first ``augment.limit`` of the table; the merge expects exactly these.
    ``task`` neutral: one row per original sentence (its first CDA row), the first ``neutral.limit``."""
    from ..items import part_of

    src = _input_path(inputs)
    df = read_table(src)
    require_columns(df, {S.ID: "id", S.COUNTERFACTUAL: "text", S.SWAPPED_TERMS: "terms",
                         **({S.ORIGINAL: "text"} if task == NEUTRAL else {})}, src)
    require_rows(df, src, "Nothing to augment: check the CDA and validation steps (their quarantine and rejected "
                 "tables say why rows were dropped).")
    if task == NEUTRAL:
        df = df.drop_duplicates(S.ORIGINAL).drop(columns=["applied"], errors="ignore")
    limit = Task.of(config, task).limit
    if limit is not None and "applied" in df.columns:  # the first `limit` applied rows, and every unapplied one
        applied = df["applied"].fillna(False).astype(bool)
        df = df[~applied | (applied.cumsum() <= limit)]
    elif limit is not None:
        df = df.head(limit)
    if part is not None:
        parts = config.pipeline.generation_shards
        df = df[[part_of(str(i), parts) == part for i in df[S.ID]]]
    return src, df


def load(config: Any, inputs: Mapping[str, Path | str], part: int | None = None, task: str = REPHRASE) -> Loaded:
    """Read the CDA table; unapplied rows are rejected here; one item (keyed by every setting) per row (``task``
    neutral: per original sentence, which is the text the generator rewrites)."""
    src, df = eligible(config, inputs, part, task)
    skipped: list[dict[str, Any]] = []
    if "applied" in df.columns:
        mask = df["applied"].fillna(False).astype(bool)
        for r in df.loc[~mask].itertuples(index=False):
            skipped.append({S.ID: None, S.CDA_ID: r.id, S.COUNTERFACTUAL: getattr(r, S.COUNTERFACTUAL),
                            "status": REJECTED, S.REASON: "not-applied: the CDA row has no swap"})
        df = df.loc[mask]
    if df[S.ID].duplicated().any():
        dup = df.loc[df[S.ID].duplicated(), S.ID].iloc[0]
        raise InputError(f"{src}: duplicate id {dup!r}; ids must be unique.")
    shash = json_hash(settings_for(config, task))
    items = []
    for r in df.to_dict("records"):
        terms = [] if task == NEUTRAL else swap_terms(r[S.SWAPPED_TERMS])
        original = r.get(S.ORIGINAL) if task == REPHRASE else None
        text = str(r[S.ORIGINAL] if task == NEUTRAL else r[S.COUNTERFACTUAL])
        items.append(_Item(key=stable_id("augment", r[S.ID], text, shash), cda_id=str(r[S.ID]),
                           text=text, swaps=parse_swaps(terms), swapped_terms=terms,
                           original=original if isinstance(original, str) else None))
    return Loaded(src, int(len(df) + len(skipped)), items, skipped)


def plan(config: Any, out_dir: Path, rec: Recorder, generator: Generator | None = None,
         judge: Any = None, what: str = "augment", progress: bool = False, task: str = REPHRASE) -> Plan:
    """Sampling, attempts, review settings and lazily built generator and meaning judge."""
    a, t = config.augment, Task.of(config, task)
    params = SamplingParams.from_config(a.sampling)
    # a greedy retry repeats the same output unless its prompt changes
    max_attempts = 1 if params.greedy and not a.retry_feedback else 1 + t.max_retries
    held: dict[str, Any] = {}

    def get_generator() -> Generator:
        if generator is not None:
            return generator
        if "g" not in held:
            from ..generation import make_generator

            with rec.timed("load_model"):
                held["g"] = make_generator(
                    a.backend, a.model, device=config.run.device, model_cache=config.run.model_cache,
                    batch_size=a.batch_size, openai=a.openai, engine_args=a.engine_args,
                    tensor_parallel_size=a.tensor_parallel_size, pipeline_parallel_size=a.pipeline_parallel_size,
                )
        return held["g"]

    def get_judge() -> Any:
        if judge is not None or a.review.meaning == "off":
            return judge
        if "j" not in held:
            with rec.timed("load_judge"):
                held["j"] = make_meaning_judge(config)
        return held["j"]

    def close() -> None:
        if "g" in held:
            held["g"].close()

    shash = json_hash(settings_for(config, task))  # the settings: the checkpoints' fingerprint (and in every key)
    run = I.ItemRun(what, I.Checkpoints.of(out_dir, shash), a.shard_size, lambda it: it.key, progress)
    return Plan(config, t, params, max_attempts, generator.backend if generator is not None else a.backend,
                generator.model_id if generator is not None else a.model, review_settings(config, task),
                load_attribute_lexicon(config), run, GenerationCache(a.cache_dir or out_dir / "cache"), get_generator,
                get_judge, close)


def run(p: Plan, items: list[_Item]) -> I.Pass:
    """Generate and review every item without a final row, one shard at a time (the item engine's pass)."""
    counts = {"rejected": 0}

    def work(chunk: list[_Item], bar: Any) -> list[dict[str, Any]]:
        _process_chunk(p, chunk, bar, counts)
        return [_row(it, p.gen_model, p.task.prompt_version) for it in chunk]

    try:
        return I.run_items(p.run, items, work)
    finally:
        p.close()


def assemble(p: Plan, loaded: Loaded, out_dir: Path) -> tuple[I.Outcome, Any]:
    """Write ``augmented.parquet``, ``rejected.parquet`` and ``errors.parquet`` from the shards (input order, one
    row per item); returns the outcome and every item's final row (for the counts per attempt)."""
    import pandas as pd

    outcome = I.Outcome.of(p.run.what, p.run.store, [it.key for it in loaded.items])
    for frame in (outcome.done, outcome.rejected, outcome.errors):
        for col in (S.ORIGINAL, S.SWAPPED_TERMS):  # shards written before these columns existed
            if col not in frame.columns:
                frame[col] = None
    aug = outcome.done.reindex(columns=OUTPUT_COLUMNS).astype({S.ATTEMPTS: "int64"})
    rej = pd.concat([outcome.rejected.reindex(columns=REJECTED_COLUMNS),
                     pd.DataFrame(loaded.skipped, columns=REJECTED_COLUMNS)], ignore_index=True)
    if p.task.name == NEUTRAL:  # the context-neutral arm trains on these rewrites: no evaluation item may pass
        from ..evaluate.decontam import drop_overlaps

        order = {it.cda_id: i for i, it in enumerate(loaded.items)}
        aug, rej, p.stats["eval_overlap_by_benchmark"] = drop_overlaps(
            p.config, aug, S.AUGMENTED, rej, lambda row: order.get(str(row[S.CDA_ID]), len(order)))
    every = pd.concat([outcome.done, outcome.rejected, outcome.errors], ignore_index=True)
    outcome.paths["augmented"] = write_table(aug, out_dir / L.AUGMENTED_FILE)
    outcome.write(out_dir, rej, outcome.errors.reindex(columns=ERROR_COLUMNS))
    outcome.done, outcome.rejected = aug, rej
    return outcome, every


def attempt_counts(merged: Any) -> dict[str, dict[str, int]]:
    """Reasons per attempt: ``{"1": {"language": 3, ...}, "2": {...}}`` over every item's rejected attempts."""
    per: dict[str, Counter[str]] = {}
    if ATTEMPT_REASONS not in getattr(merged, "columns", ()):
        return {}
    for raw in merged[ATTEMPT_REASONS].dropna():
        for n, reasons in enumerate(json.loads(raw), start=1):
            per.setdefault(str(n), Counter()).update({r.split(":", 1)[0].strip() for r in reasons})
    return {k: dict(v.most_common()) for k, v in per.items()}


def record(rec: Recorder, p: Plan, loaded: Loaded, assembled: tuple[I.Outcome, Any], done: I.Pass
           ) -> dict[str, Any]:
    """The stage summary (also written to the manifest)."""
    outcome, every = assembled
    aug, rej = outcome.done, outcome.rejected
    gen_s, processed, elapsed = p.stats["generate_s"], done.processed, done.seconds
    summary = {
        "rows_in": loaded.rows_in,
        "items": len(loaded.items),
        "accepted": int(len(aug)),
        "rejected": int(len(rej)),
        "errors": int(len(outcome.errors)),
        "error_reasons": outcome.error_reasons(),
        "reject_reasons": I.reason_kinds(rej[S.REASON]),
        "reasons_per_attempt": attempt_counts(every),
        "accepted_per_attempt": {str(k): int(v) for k, v in aug[S.ATTEMPTS].value_counts().sort_index().items()},
        "resumed_items": done.resumed,
        "processed_items": processed,
        "duplicates_dropped": outcome.duplicates,
        "cache_hits": p.cache.hits,
        "cache_misses": p.cache.misses,
        "generated_tokens": p.stats["generated_tokens"],
        "prompt_tokens": p.stats["prompt_tokens"],
        "items_per_s": round(processed / elapsed, 3) if elapsed > 0 and processed else 0.0,
        "tokens_per_s": round(p.stats["generated_tokens"] / gen_s, 2) if gen_s > 0 else 0.0,
        "gen_model": p.gen_model,
        "backend": p.backend,
        "task": p.task.name,
        "attribute": p.config.run.attribute,
        "prompt_version": p.task.prompt_version,
        "review": {"meaning": p.config.augment.review.meaning},
    }
    if p.task.name == NEUTRAL:
        overlaps = p.stats.get("eval_overlap_by_benchmark", {})
        summary.update(eval_overlap=sum(overlaps.values()), eval_overlap_by_benchmark=overlaps)
    rec.finish(
        Counts(items_in=summary["rows_in"], out=summary["accepted"], rejected=summary["rejected"],
               errors=summary["errors"], error_reasons=summary["error_reasons"]),
        outputs=dict(outcome.paths),
        summary=summary,
    )
    return summary


def run_augment(
    config: Any,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    shard: int | None = None,
    *,
    generator: Generator | None = None,
    judge: Any = None,
    progress: bool = False,
    task: str = REPHRASE,
) -> dict[str, Any]:
    """Augment ``inputs['counterfactuals']`` into ``out_dir/augmented.parquet`` (see the module docstring): every
    row, or with ``shard`` only generation part ``shard`` of ``pipeline.generation_shards``
    (:func:`context_cda.items.part_of`; :func:`run_augment_merge` joins the parts). ``task`` neutral: the
    neutral rewrite of each original (:func:`run_neutral`).

    ``generator`` overrides the configured backend and ``judge`` the configured meaning judge (tests, or a
    caller that already holds a model).
    """
    out_dir = Path(out_dir)
    loaded = load(config, inputs, shard, task)  # a bad input fails here, before anything is written
    rec = recorder(out_dir, versions=("transformers", "torch", "httpx", "vllm", "py3langid"))
    what = task if task == NEUTRAL else ("augment" if shard is None else f"augment[part-{shard}]")
    p = plan(config, out_dir, rec, generator, judge, what, progress, task)
    done = run(p, loaded.items)
    with rec.timed("merge"):
        assembled = assemble(p, loaded, out_dir)
    return record(rec, p, loaded, assembled, done)


def run_neutral(config: Any, inputs: Mapping[str, Path | str] | None = None, out_dir: Path | str | None = None,
                **kw: Any) -> dict[str, Any]:
    """The ``neutral`` step: the generator rewrites each original sentence of the validated CDA table in
    gender-neutral language (singular they, neutral nouns: ``neutral.prompt_version``), every rewrite reviewed
    (no gendered word left, nothing else changed: :meth:`~context_cda.augment.ReviewSettings.for_neutral`),
    retried and stored exactly once like the augment step's. Writes the same tables (``augmented`` holds the
    rewrite, ``counterfactual`` the original it rewrote); the context-neutral arm trains on what validation
    keeps of them."""
    from ..stages import resolve_io

    inputs, out = resolve_io(config, "neutral", inputs, out_dir)
    return run_augment(config, inputs, out, None, task=NEUTRAL, **kw)


# ------------------------------------------------------------------------------------------------ one shard


def _process_chunk(p: Plan, chunk: list[_Item], bar: Any, counts: dict[str, int]) -> None:
    """Run all attempts for one shard's items; the progress bar moves as items reach their final state."""
    todo = list(chunk)
    for it in todo:
        it.params, it.feedback = p.params.with_seed(_seed(p, 0)), ""
    for attempt in range(p.max_attempts):
        if not todo:
            break
        last = attempt + 1 == p.max_attempts
        still: list[_Item] = []
        for batch, results in _generate(p, todo, attempt):
            _review_batch(p, batch, results, attempt)
            finished = 0
            for it in batch:
                if it.status == ACCEPTED or last or it.final:
                    finished += 1
                    counts["rejected"] += it.status != ACCEPTED
                    continue
                _aim(p, it, attempt + 1)
                still.append(it)
            if bar is not None:
                bar.update(finished)
                _postfix(bar, p.stats, counts["rejected"])
        todo = still


def _seed(p: Plan, attempt: int) -> int | None:
    return None if p.params.seed is None else p.params.seed + attempt


def _aim(p: Plan, it: _Item, attempt: int) -> None:
    """The next attempt's prompt note and sampling (a generation error is retried as it was, with a new seed)."""
    prev = it.params or p.params
    if it.status == ERROR or it.gen_error or not p.config.augment.retry_feedback:
        it.params = prev.with_seed(_seed(p, attempt))
        return
    it.feedback = feedback(it.history[-1], it.text)
    it.params = next_params(it.history[-1], prev, _seed(p, attempt))


def _generate(p: Plan, todo: list[_Item], attempt: int):
    """Yield (items, results) batches: cached results first, then the misses, ``batch_size`` prompts per call,
    grouped by the items' sampling parameters (a retry may change them per item)."""
    a, t = p.config.augment, p.task
    convs = [build_messages(it.text, t.prompt_version, t.few_shot, it.feedback or None, p.config.run.attribute, t.name)
             for it in todo]
    params = [it.params or p.params for it in todo]
    keys = [cache_key(p.backend, p.gen_model, m, q) + (f"-a{attempt}" if q.seed is None else "")
            for m, q in zip(convs, params, strict=True)]
    results = [p.cache.get(k) for k in keys]
    hit = [i for i, r in enumerate(results) if r is not None]
    if hit:
        yield [todo[i] for i in hit], [results[i] for i in hit]
    groups: dict[SamplingParams, list[int]] = {}
    for i, r in enumerate(results):
        if r is None:
            groups.setdefault(params[i], []).append(i)
    for q, idx in groups.items():
        for b in range(0, len(idx), a.batch_size):
            miss = idx[b: b + a.batch_size]
            t = time.perf_counter()
            out = p.get_generator().generate([convs[i] for i in miss], q)
            p.stats["generate_s"] += time.perf_counter() - t
            for i, r in zip(miss, out, strict=True):
                p.cache.put(keys[i], r)
                p.stats["generated_tokens"] += r.completion_tokens
                p.stats["prompt_tokens"] += r.prompt_tokens
            yield [todo[i] for i in miss], out


def _review_batch(p: Plan, batch: list[_Item], results: list[Any], attempt: int) -> None:
    """Record one attempt's outcome on each item: the first accepted completion wins; a rejected item keeps the
    first completion and every one of its reasons."""
    cands: list[tuple[_Item, str, str | None]] = []
    for it, r in zip(batch, results, strict=True):
        it.attempts = attempt + 1
        it.prompt_tokens += r.prompt_tokens
        it.completion_tokens += r.completion_tokens
        it.gen_error = False
        if r.error:
            _generation_error(it, r)
            continue
        ends = list(r.finish_reasons or [])
        cands += [(it, t, ends[k] if k < len(ends) else None) for k, t in enumerate(list(r.texts) or [""])]
    if not cands:
        return
    verdicts = review_many([it.original for it, _, _ in cands], [it.text for it, _, _ in cands],
                           [t for _, t, _ in cands], lexicon=p.lexicon, judge=p.get_judge(), settings=p.review,
                           swaps=[it.swaps for it, _, _ in cands], finish_reasons=[f for _, _, f in cands])
    by_item: dict[int, list[tuple[str, Any]]] = {}
    for (it, raw, _), v in zip(cands, verdicts, strict=True):
        by_item.setdefault(id(it), []).append((raw, v))
    for it in batch:
        got = by_item.get(id(it))
        if not got:
            continue
        raw, v = next(((raw, v) for raw, v in got if v.accepted), got[0])
        if v.accepted:
            it.status, it.augmented, it.raw, it.reason = ACCEPTED, v.text, raw, ""
        else:
            it.status, it.raw, it.reason = REJECTED, raw, v.reason
            it.history.append(list(v.reasons))


def _generation_error(it: _Item, r: Any) -> None:
    """Record a generator failure: after an earlier reviewed attempt the item stays rejected for that attempt's
    reasons (a transient failure is retried as it was, a permanent one ends it); otherwise a permanent failure
    (the prompt itself, :data:`~context_cda.generation.base.PERMANENT_KINDS`) rejects it for its kind, and a
    transient one makes it an ``error`` unless a later attempt succeeds."""
    if it.history:
        it.gen_error, it.final = True, bool(r.permanent)
    elif r.permanent:
        it.status, it.reason, it.raw, it.final = REJECTED, r.error, "", True
        it.history.append([r.error])
    else:
        it.status, it.reason, it.raw = ERROR, f"generation-error: {r.error}", ""


def _postfix(bar: Any, stats: dict[str, Any], n_rejected: int) -> None:
    gen_s = stats["generate_s"]
    bar.set_postfix(tok_s=f"{stats['generated_tokens'] / gen_s:.1f}" if gen_s else "-", rejected=n_rejected,
                    refresh=False)


def _row(it: _Item, gen_model: str, prompt_version: str) -> dict[str, Any]:
    return {
        "item_key": it.key,
        S.ID: stable_id("augmented", it.cda_id, it.key),
        S.CDA_ID: it.cda_id,
        S.COUNTERFACTUAL: it.text,
        S.AUGMENTED: it.augmented if it.status == ACCEPTED else None,
        S.ATTEMPTS: it.attempts,
        S.GEN_MODEL: gen_model,
        S.PROMPT_VERSION: prompt_version,
        S.RAW_OUTPUT: it.raw,
        S.ORIGINAL: it.original,
        S.SWAPPED_TERMS: it.swapped_terms,
        "status": it.status,
        S.REASON: it.reason,
        ATTEMPT_REASONS: json.dumps(it.history),
        "prompt_tokens": it.prompt_tokens,
        "completion_tokens": it.completion_tokens,
        "finished_at": time.time(),
    }
