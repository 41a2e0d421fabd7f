"""``run_sample``: the M rephrasings of every contextual counterfactual and their entailment clusters, once per run.

Neither depends on the target model: the generator draws the samples (:mod:`.sampling`: the rephrase prompt and the
review every sample passes) and the entailment judge clusters them (:mod:`.clustering`). So the sample step does
both once, in generation parts (``pipeline.generation_shards``; :func:`~.merge.run_sample_merge` joins them), and
each target's entropy step (:mod:`.stage`) only scores the samples and applies the estimators. Below ``out_dir``::

    samples (layout.SAMPLES_FILE)  id, text, sample_idx, sample, cluster   one row per reviewed sample
    rejected.parquet   id, text, reason   final: empty-text, too-few-samples, a prompt the generator can never
                                          take (prompt-too-long, empty-prompt)
    errors (layout.ERRORS_FILE)    id, text, reason   the generator failed for a transient reason (retried)
    draws/<fingerprint>/shard-*.parquet    the drawn samples: reused when only the judge, rule or clustering
                                           changes (generation is the costly part)
    shards/<fingerprint>/shard-*.parquet   the clustered items (the resume points)
    manifest.json       the counts: items drawn, samples drawn, judge calls

The shards, resuming and the error policy are the item engine's (:mod:`context_cda.items`): a kill loses at most
the shard in flight. Every item's samples are drawn with ``run.seed`` per prompt (the backends keep a stream per
prompt), so they do not depend on the shard, the limit or the generation part the item falls in.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import items as I
from .. import layout as L
from .. import schemas as S
from ..errors import InputError
from ..generation.judges import EntailmentJudge, PairDecider
from ..io import json_hash, read_table, require_columns, require_rows, stable_id, write_table
from ..steps import Counts, Recorder, recorder
from .clustering import Query, cluster_ids
from .sampling import REPHRASE_PROMPT_VERSION, sample_and_review, sample_review_settings

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config
    from ..generation.base import Generator

# how the sampling seed is derived: run.seed for every prompt (the backends keep a stream per prompt)
SEEDING = "per-prompt"
DRAWS_DIR = "draws"
SAMPLE_COLUMNS = [S.ID, S.TEXT, "sample_idx", "sample", "cluster"]
ITEM_COLUMNS = [S.ID, S.TEXT, S.REASON]


# ------------------------------------------------------------------------------------------ fingerprints


def sample_settings(config: Config):
    """The review every sample passes: ``augment.review``'s switches, with the sampler's own rules
    (:func:`~context_cda.entropy.sampling.sample_review_settings`)."""
    from ..augment import ReviewSettings

    return sample_review_settings(ReviewSettings.from_config(config.augment, config.run.attribute))


def sample_fingerprint(config: Config) -> str:
    """Hash of what determines the drawn rephrasings (not the target, judge, rule or estimator); the review
    settings included, so samples drawn under another review are not reused unreviewed."""
    e = config.entropy
    backend, model = config.sample_generator()
    return json_hash({"review": sample_settings(config).to_dict(), "backend": backend, "model": model,
                      "prompt": REPHRASE_PROMPT_VERSION, "m": e.n_samples, "temperature": e.temperature,
                      "top_p": e.top_p, "max_tokens": e.max_tokens, "seed": config.run.seed, "seeding": SEEDING})


def cluster_fingerprint(config: Config) -> str:
    """Hash of what determines an item's samples and clusters: the draws and the judge's settings."""
    e = config.entropy
    judge = {k: getattr(e, k) for k in ("judge", "judge_model", "rule", "embedding_threshold", "condition_on_x",
                                         "clustering", "min_samples")}
    return json_hash({"draws": sample_fingerprint(config), "judge": judge})


# ------------------------------------------------------------------------------------------ clustering


def cluster_samples(
    decider: PairDecider,
    samples: Sequence[Sequence[str]],
    contexts: Sequence[str | None],
    batched: bool = True,
    method: str = "greedy",
) -> list[list[int]]:
    """Bidirectional-entailment cluster ids for each item's samples (``method``: ``entropy.clustering``, see
    :mod:`.clustering`).

    ``batched``: all items in lock-step, one judge batch per step; otherwise one item and one pair at a time.
    Both give the same ids.
    """
    one, many = cluster_ids(method)
    if not batched:
        return [
            one(len(ss), lambda f, j, ss=ss, c=c: decider.equivalent(ss[f], ss[j], c))
            for ss, c in zip(samples, contexts, strict=True)
        ]

    def decide(queries: list[Query]) -> list[bool]:
        pairs = [(samples[k][f], samples[k][j]) for k, f, j in queries]
        return decider.equivalent_many(pairs, [contexts[k] for k, _, _ in queries])

    return many([len(ss) for ss in samples], decide)


# ------------------------------------------------------------------------------------------ the items


def read_items(path: Path, limit: int | None, part: int | None = None, parts: int = 1
               ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The items to sample (the first ``limit``; with ``part``, only that generation part's) and the rejected
    empty ones."""
    df = read_table(path)
    col = S.AUGMENTED if S.AUGMENTED in df.columns else S.TEXT if S.TEXT in df.columns else None
    if S.ID not in df.columns or col is None:
        raise InputError(
            f"{path}: the sample step needs columns {S.ID} and {S.AUGMENTED} (or {S.TEXT}); found "
            f"{', '.join(map(str, df.columns))}. Pass the augmented table that validation kept "
            f"({L.FOLDERS['validate-augment']}/{L.VALID_FILE})."
        )
    require_columns(df, {S.ID: "id", col: "text"}, path)
    require_rows(df, path, "Nothing to sample: augment accepted no item, or validation quarantined them all.")
    df = df[[S.ID, col]].rename(columns={col: S.TEXT})
    dup = df[S.ID].duplicated()
    if dup.any():
        raise InputError(f"{path}: duplicate ids, e.g. row {int(dup.idxmax())} ({df[S.ID][dup].iloc[0]!r}).")
    if limit is not None:
        df = df.head(limit)
    if part is not None:
        from ..items import part_of

        df = df[[part_of(str(i), parts) == part for i in df[S.ID]]]
    df = df.assign(**{S.ID: df[S.ID].astype(str), S.TEXT: df[S.TEXT].fillna("").astype(str)})
    empty = df[S.TEXT].str.strip() == ""
    rejected = [{S.ID: i, S.TEXT: t, S.REASON: "empty-text"}
                for i, t in zip(df[S.ID][empty], df[S.TEXT][empty], strict=True)]
    return df[~empty].reset_index(drop=True), rejected


@dataclass(frozen=True)
class Item:
    id: str
    text: str

    @property
    def key(self) -> str:
        return stable_id("sample", self.id, self.text)


# ------------------------------------------------------------------------------------------ the models


@dataclass
class Models:
    """The generator and the judge of one sample run, built from the config on first use (only when there is
    work left) unless the caller passed them in."""

    config: Config
    generator: Generator | None = None
    judge: EntailmentJudge | None = None
    own_generator: bool = False

    def get_generator(self) -> Generator:
        if self.generator is None:
            from ..generation import make_generator

            c = self.config
            backend, ref = c.sample_generator()
            self.generator = make_generator(backend, ref, device=c.run.device, model_cache=c.run.model_cache,
                                            batch_size=c.entropy.batch_size, openai=c.augment.openai,
                                            engine_args=c.augment.engine_args,
                                            tensor_parallel_size=c.augment.tensor_parallel_size,
                                            pipeline_parallel_size=c.augment.pipeline_parallel_size)
            self.own_generator = True
        return self.generator

    def get_decider(self, batched: bool) -> PairDecider:
        if self.judge is None:
            from ..generation import make_generator
            from ..generation.judges import make_judge

            c = self.config
            self.judge = make_judge(c.entropy, device=c.run.device, model_cache=c.run.model_cache,
                                    generator_factory=lambda ref: make_generator(
                                        "hf", ref, device=c.run.device, model_cache=c.run.model_cache))
        return PairDecider(self.judge, self.config.entropy.rule,
                           batch_size=self.config.entropy.batch_size if batched else 1)

    def close(self) -> None:
        if self.own_generator and self.generator is not None:
            self.generator.close()


# ------------------------------------------------------------------------------------------ one shard


@dataclass
class Sampler:
    """What one pass needs: the config, the models, the drawn-samples cache, and the counters."""

    config: Config
    models: Models
    draws: I.Checkpoints
    batched: bool = True
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)  # draw key -> its row (done or rejected)
    decider: PairDecider | None = None
    stats: dict[str, float] = field(default_factory=lambda: {"items_drawn": 0, "samples_drawn": 0,
                                                             "seconds_sampling": 0.0, "seconds_clustering": 0.0})

    def load_cache(self, items: Sequence[Item]) -> None:
        rows, _ = I.final_rows(self.draws.read(), [it.key for it in items])
        self.cache = {r[I.KEY]: r for r in rows.to_dict("records") if r[I.STATUS] in I.FINAL}


def draw(s: Sampler, chunk: Sequence[Item]) -> dict[str, dict[str, Any]]:
    """Each item's draw (samples, or a rejection or error): the cached one, else drawn now; new draws are saved
    (atomically) before clustering starts, so a kill while clustering keeps them."""
    need = [it for it in chunk if it.key not in s.cache]
    fresh: dict[str, dict[str, Any]] = {}
    if need:
        e = s.config.entropy
        t0 = time.perf_counter()
        got = sample_and_review(s.models.get_generator(), [it.text for it in need], e.n_samples,
                                temperature=e.temperature, top_p=e.top_p, max_tokens=e.max_tokens,
                                seed=s.config.run.seed, review_settings=sample_settings(s.config))
        s.stats["seconds_sampling"] += time.perf_counter() - t0
        s.stats["items_drawn"] += len(need)
        s.stats["samples_drawn"] += e.n_samples * sum(not (x or y) for x, y in zip(got.errors, got.rejections,
                                                                                   strict=True))
        for it, ss, err, rej in zip(need, got.samples, got.errors, got.rejections, strict=True):
            status = I.REJECTED if rej else I.ERROR if err else I.DONE
            fresh[it.key] = {I.KEY: it.key, I.STATUS: status, I.REASON: rej or (f"generator: {err}" if err else ""),
                             S.ID: it.id, S.TEXT: it.text, "samples": list(ss)}
        s.draws.append([r for r in fresh.values() if r[I.STATUS] in I.FINAL])
        s.cache.update({k: r for k, r in fresh.items() if r[I.STATUS] in I.FINAL})
    return {it.key: fresh.get(it.key) or s.cache[it.key] for it in chunk}


def sample_chunk(s: Sampler, chunk: list[Item], bar: Any = None) -> list[dict[str, Any]]:
    """The engine's work for one shard: draw, then reject (too few samples, a permanent generator error) or
    cluster; one row per sample of a clustered item, one row per rejected or error item."""
    s.decider = s.decider or s.models.get_decider(s.batched)  # a judge that cannot load fails before generation
    drawn = draw(s, chunk)
    e = s.config.entropy
    rows: list[dict[str, Any]] = []
    keep: list[tuple[Item, list[str]]] = []
    for it in chunk:
        d = drawn[it.key]
        if d[I.STATUS] != I.DONE:
            rows.append(_item_row(it, d[I.STATUS], d[I.REASON]))
        elif len(d["samples"]) < e.min_samples:
            why = f"too-few-samples: {len(d['samples'])} non-empty rephrasings < entropy.min_samples={e.min_samples}"
            rows.append(_item_row(it, I.REJECTED, why))
        else:
            keep.append((it, list(d["samples"])))
    if keep:
        t0 = time.perf_counter()
        contexts = [it.text if e.condition_on_x else None for it, _ in keep]
        clusters = cluster_samples(s.decider, [ss for _, ss in keep], contexts, batched=s.batched,
                                   method=e.clustering)
        s.stats["seconds_clustering"] += time.perf_counter() - t0
        for (it, ss), cids in zip(keep, clusters, strict=True):
            rows += [{**_item_row(it, I.DONE, ""), "sample_idx": j, "sample": x, "cluster": int(c)}
                     for j, (x, c) in enumerate(zip(ss, cids, strict=True))]
    return rows


def _item_row(it: Item, status: str, reason: str) -> dict[str, Any]:
    return {I.KEY: it.key, I.STATUS: status, I.REASON: reason, S.ID: it.id, S.TEXT: it.text}


# ------------------------------------------------------------------------------------------ the stage


def run_sample(
    config: Config,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    shard: int | None = None,
    *,
    generator: Generator | None = None,
    judge: EntailmentJudge | None = None,
    batched: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """The samples and clusters of every validated contextual counterfactual (with ``shard``: of generation part
    ``shard`` of ``pipeline.generation_shards`` only).

    ``inputs["augmented"]``: the augment stage's validated table (columns ``id``, ``augmented``). ``generator`` and
    ``judge`` may be passed in (tests, benchmarks); otherwise they are built from the config, and only when there
    is work left. ``batched=False`` is the one-pair-at-a-time reference path (benchmarks).
    """
    if "augmented" not in inputs:
        raise InputError("run_sample needs inputs={'augmented': <the validated augmented table>}.")
    out, src = Path(out_dir), Path(inputs["augmented"])
    df, rejected_input = read_items(src, config.entropy.limit, shard, config.pipeline.generation_shards)
    items = [Item(i, t) for i, t in zip(df[S.ID], df[S.TEXT], strict=True)]
    what = "sample" if shard is None else f"sample[part-{shard}]"
    fp = cluster_fingerprint(config)
    s = Sampler(config, Models(config, generator, judge), I.Checkpoints.of(out, sample_fingerprint(config),
                                                                           DRAWS_DIR), batched)
    run = I.ItemRun(what, I.Checkpoints.of(out, fp), config.entropy.shard_size, lambda it: it.key, progress)
    rec = recorder(out, versions=("torch", "transformers", "vllm"))
    s.load_cache(items)
    try:
        done = I.run_items(run, items, lambda chunk, bar: sample_chunk(s, chunk, bar))
    finally:
        s.models.close()
    outcome = assemble(run, items, rejected_input, out)
    return record(rec, s, outcome, done, fp, rejected_input, out)


def assemble(run: I.ItemRun, items: Sequence[Item], rejected_input: list[dict[str, Any]], out: Path) -> I.Outcome:
    """The step's tables from the finished shards, in the input's order."""
    import pandas as pd

    outcome = I.Outcome.of(run.what, run.store, [it.key for it in items], then="sample_idx")
    outcome.items += len(rejected_input)
    samples = _typed(outcome.done.reindex(columns=SAMPLE_COLUMNS))
    rejected = pd.concat([pd.DataFrame(rejected_input, columns=ITEM_COLUMNS),
                          outcome.rejected.reindex(columns=ITEM_COLUMNS)], ignore_index=True)
    outcome.paths["samples"] = write_table(samples, out / L.SAMPLES_FILE)
    outcome.write(out, rejected, outcome.errors.reindex(columns=ITEM_COLUMNS))
    outcome.done, outcome.rejected = samples, rejected
    return outcome


def _typed(samples: pd.DataFrame) -> pd.DataFrame:
    return samples.astype({S.ID: str, S.TEXT: str, "sample_idx": "int64", "sample": str, "cluster": "int64"})


def record(rec: Recorder, s: Sampler, outcome: I.Outcome, done: I.Pass, fp: str,
           rejected_input: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The summary (also the manifest's): what the generator drew and the judge decided in this pass."""
    judged = s.decider.stats() if s.decider else {"judge_calls": 0, "judge_requests": 0, "judge_batches": 0}
    sampled = int(outcome.done[S.ID].nunique()) if len(outcome.done) else 0
    e = s.config.entropy
    backend, model = s.config.sample_generator()
    summary = {
        "items_in": outcome.items, "sampled": sampled, "samples": int(len(outcome.done)),
        "rejected": int(len(outcome.rejected)), "errors": int(len(outcome.errors)),
        "error_reasons": outcome.error_reasons(), "reject_reasons": I.reason_kinds(outcome.rejected[S.REASON]),
        "resumed_items": done.resumed, "processed_items": done.processed, "shards_written": done.shards,
        "items_drawn": int(s.stats["items_drawn"]), "samples_drawn": int(s.stats["samples_drawn"]),
        "generator_backend": backend, "generator_model": model, "judge": e.judge, "rule": e.rule,
        "n_samples": e.n_samples, "fingerprint": fp, **judged,
        **per_item_stats(s.config, judged["judge_calls"], done.processed),
        "seconds_sampling": round(s.stats["seconds_sampling"], 3),
        "seconds_clustering": round(s.stats["seconds_clustering"], 3),
    }
    rec.finish(Counts(items_in=summary["items_in"], out=sampled, rejected=summary["rejected"],
                      errors=summary["errors"], error_reasons=summary["error_reasons"]),
               outputs=dict(outcome.paths), summary=summary)
    return summary


def per_item_stats(config: Config, judge_calls: int, processed: int) -> dict[str, float]:
    """Judge calls per processed item, and the pairs an all-pairs clustering would judge per item."""
    m = config.entropy.n_samples
    return {"judge_calls_per_item": round(judge_calls / processed, 3) if processed else 0.0,
            "all_pairs_per_item": m * m}
