"""``run_entropy``: sample, score, cluster and estimate semantic entropy per item, checkpointed per shard.

Per target model (``config.run.targets[target]``) the stage writes below ``out_dir``::

    scores (layout.SCORES_FILE)  id, text, se, se_eq1, se_plogp, se_discrete, n_clusters, n_samples
    audit (layout.AUDIT_FILE)    id, sample_idx, sample, cluster, loglik_sum, loglik_mean, n_tokens
    rejected.parquet   id, text, reason  (final: too few usable samples, non-finite likelihoods, empty text, a
                                            prompt the generator can never take: prompt-too-long, empty-prompt)
    errors (layout.ERRORS_FILE)  id, text, reason  (the generator failed for a transient reason: retried next run)
    shards/<fingerprint>/shard-*.parquet   checkpoints (one atomic file per shard of items)
    samples/<fingerprint>/samples-*.parquet the M rephrasings per item, reused when only the judge, rule,
                                            estimator or threshold changes (generation is the costly part)
    manifest.json

Resuming: every finished shard is one atomically written file holding its items' rows, keyed by item id, in a
folder named by a fingerprint of everything that changes the results (entropy config, target model, generator,
seed). A restarted run reads the finished shards, skips their ids and processes only the rest, so a kill loses at
most the shard in flight and never duplicates an item.

Errors are not results: an item whose rephrasings the generator could not produce (connection, HTTP 5xx/429,
timeout, after the backend's own retries) is an *error*: it goes into no shard and its cached samples are not
reused, so the next run samples and scores it (and only it) again. The stage writes its outputs for every other
item, then raises :class:`~context_cda.errors.ItemErrors` (exit code 75) unless ``run.allow_errors`` is set. The
stage holds its folder's lock (:func:`context_cda.io.file_lock`) while it runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from .. import schemas as S
from ..errors import ConfigError, InputError, check_item_errors, error_kinds
from ..io import (
    StageRecorder,
    file_lock,
    json_hash,
    read_table,
    require_columns,
    require_rows,
    stable_id,
    write_rejected,
    write_table,
)
from ..judges import EntailmentJudge, PairDecider
from ..progress import Progress
from .clustering import Query, cluster_ids
from .estimators import semantic_entropies
from .likelihood import sample_logliks
from .sampling import REPHRASE_PROMPT_VERSION, sample_and_review, sample_review_settings

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config, EntropyConfig
    from ..generation.base import Generator
    from ..scoring import Scorer

log = logging.getLogger(__name__)

# how the sampling seed is derived: run.seed for every prompt (the backends keep a stream per prompt); samples and
# scores drawn under the earlier per-shard seeds are not reused
SEEDING = "per-prompt"
SHARDS_DIR = "shards"
SAMPLES_DIR = "samples"
SCORE_COLUMNS = [S.ID, S.TEXT, S.SE, S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE, S.N_CLUSTERS, "n_samples"]
AUDIT_COLUMNS = [S.ID, "sample_idx", "sample", "cluster", "loglik_sum", "loglik_mean", "n_tokens"]
_EST_COLUMN = {"eq1": S.SE_EQ1, "plogp": S.SE_PLOGP, "discrete": S.SE_DISCRETE}


# ------------------------------------------------------------------------------------------ per-item processing


@dataclass
class ItemsResult:
    """What processing a batch of items produced: score rows, audit rows, rejected rows (final) and error rows
    (the generator failed: not results, retried by the next run)."""

    scores: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


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


def process_items(
    ids: Sequence[str],
    texts: Sequence[str],
    samples: Sequence[Sequence[str]],
    scorer: Scorer,
    decider: PairDecider,
    cfg: EntropyConfig,
    *,
    batched: bool = True,
    sample_errors: Sequence[str | None] | None = None,
    sample_rejections: Sequence[str | None] | None = None,
) -> ItemsResult:
    """Score, cluster and estimate SE for items whose samples are already drawn (the stage's inner loop).
    ``sample_errors``: the generator's transient error per item (an error row, retried next run);
    ``sample_rejections``: its permanent one (``"prompt-too-long: ..."``: a final rejection for that reason)."""
    res = ItemsResult()
    errs = list(sample_errors) if sample_errors is not None else [None] * len(ids)
    perm = list(sample_rejections) if sample_rejections is not None else [None] * len(ids)
    keep: list[int] = []
    for i, ss in enumerate(samples):
        if perm[i]:
            res.rejected.append({S.ID: ids[i], S.TEXT: texts[i], S.REASON: perm[i]})
        elif errs[i]:
            res.errors.append({S.ID: ids[i], S.TEXT: texts[i], S.REASON: f"generator: {errs[i]}"})
        elif len(ss) < cfg.min_samples:
            why = f"too-few-samples: {len(ss)} non-empty rephrasings < entropy.min_samples={cfg.min_samples}"
            res.rejected.append({S.ID: ids[i], S.TEXT: texts[i], S.REASON: why})
        else:
            keep.append(i)
    if not keep:
        return res
    k_ids = [ids[i] for i in keep]
    k_texts = [texts[i] for i in keep]
    k_samples = [list(samples[i]) for i in keep]
    sc = scorer if batched else scorer.with_batch_size(1) if hasattr(scorer, "with_batch_size") else scorer
    logliks = sample_logliks(sc, k_texts, k_samples)
    contexts = [t if cfg.condition_on_x else None for t in k_texts]
    clusters = cluster_samples(decider, k_samples, contexts, batched=batched, method=cfg.clustering)
    for item_id, text, ss, lls, cids in zip(k_ids, k_texts, k_samples, logliks, clusters, strict=True):
        values = [ll.mean if cfg.length_normalised else ll.sum for ll in lls]
        if not all(math.isfinite(v) for v in values) or any(ll.n_tokens <= 0 for ll in lls):
            res.rejected.append(
                {
                    S.ID: item_id,
                    S.TEXT: text,
                    S.REASON: "non-finite-loglik: a sample scored "
                    f"{values} (n_tokens {[ll.n_tokens for ll in lls]})",
                }
            )
            continue
        est = semantic_entropies(values, cids)
        res.scores.append(
            {
                S.ID: item_id,
                S.TEXT: text,
                S.SE: est[cfg.estimator],
                S.SE_EQ1: est["eq1"],
                S.SE_PLOGP: est["plogp"],
                S.SE_DISCRETE: est["discrete"],
                S.N_CLUSTERS: est["n_clusters"],
                "n_samples": len(ss),
            }
        )
        for j, (s, ll, c) in enumerate(zip(ss, lls, cids, strict=True)):
            res.audit.append(
                {
                    S.ID: item_id,
                    "sample_idx": j,
                    "sample": s,
                    "cluster": int(c),
                    "loglik_sum": float(ll.sum),
                    "loglik_mean": float(ll.mean),
                    "n_tokens": int(ll.n_tokens),
                }
            )
    return res


# ------------------------------------------------------------------------------------------ shards


def _shard_frame(res: ItemsResult) -> pd.DataFrame:
    """One table per shard: audit rows carrying their item's score columns, plus rejected items (reason set)."""
    import pandas as pd

    by_id = {r[S.ID]: r for r in res.scores}
    rows = []
    for a in res.audit:
        rows.append({**by_id[a[S.ID]], **a, S.REASON: ""})
    for r in res.rejected:
        rows.append({S.ID: r[S.ID], S.TEXT: r[S.TEXT], S.REASON: r[S.REASON], "sample_idx": -1})
    cols = list(dict.fromkeys([*SCORE_COLUMNS, *AUDIT_COLUMNS, S.REASON]))
    return pd.DataFrame(rows, columns=cols)


def read_shards(shard_dir: Path) -> pd.DataFrame:
    import pandas as pd

    files = sorted(shard_dir.glob("shard-*.parquet"))
    if not files:
        return pd.DataFrame(columns=list(dict.fromkeys([*SCORE_COLUMNS, *AUDIT_COLUMNS, S.REASON])))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def fingerprint(config: Config, target_ref: str) -> str:
    """Hash of everything that changes an item's result (not batch sizes, shard size or the item limit)."""
    e = config.entropy.model_dump(mode="json", exclude={"batch_size", "shard_size", "limit"})
    gen = {
        "backend": config.entropy.generator_backend or config.augment.backend,
        "model": config.entropy.generator_model or config.augment.model,
        "prompt": REPHRASE_PROMPT_VERSION,
    }
    return json_hash({"entropy": e, "target": target_ref, "generator": gen, "seed": config.run.seed,
                      "seeding": SEEDING})


def sample_settings(config: Config):
    """The review every sample passes: ``augment.review``'s switches, with the sampler's own rules
    (:func:`~context_cda.entropy.sampling.sample_review_settings`)."""
    from ..augment import ReviewSettings

    return sample_review_settings(ReviewSettings.from_config(config.augment))


def sample_fingerprint(config: Config) -> str:
    """Hash of what determines the sampled rephrasings (not the target, judge, rule or estimator); the review
    settings included, so samples cached under another review are not reused unreviewed."""
    e = config.entropy
    return json_hash(
        {
            "review": sample_settings(config).to_dict(),
            "backend": e.generator_backend or config.augment.backend,
            "model": e.generator_model or config.augment.model,
            "prompt": REPHRASE_PROMPT_VERSION,
            "m": e.n_samples,
            "temperature": e.temperature,
            "top_p": e.top_p,
            "max_tokens": e.max_tokens,
            "seed": config.run.seed,
            "seeding": SEEDING,
        }
    )


CachedSamples = tuple[str, list[str], str | None, str | None]  # text, samples, transient error, permanent error


def read_sample_cache(sample_dir: Path) -> dict[str, CachedSamples]:
    """id -> (text, samples, transient generator error, permanent generator error) from every finished samples
    file."""
    import pandas as pd

    def text_or_none(v: Any) -> str | None:
        return v if isinstance(v, str) and v else None

    out: dict[str, CachedSamples] = {}
    for f in sorted(sample_dir.glob("samples-*.parquet")):
        for r in pd.read_parquet(f).itertuples(index=False):
            out[str(r.id)] = (r.text, [str(x) for x in r.samples], text_or_none(r.error),
                              text_or_none(getattr(r, "rejection", None)))
    return out


# ------------------------------------------------------------------------------------------ the stage


def _read_items(path: Path, limit: int | None, part: int | None = None, parts: int = 1
                ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The items to score (the first ``limit``; with ``part``, only that generation part's) and the rejected
    empty ones."""
    df = read_table(path)
    col = S.AUGMENTED if S.AUGMENTED in df.columns else S.TEXT if S.TEXT in df.columns else None
    if S.ID not in df.columns or col is None:
        raise InputError(
            f"{path}: the entropy stage needs columns {S.ID} and {S.AUGMENTED} (or {S.TEXT}); found "
            f"{', '.join(map(str, df.columns))}. Pass the augmented table that validation kept "
            f"({L.FOLDERS['validate-augment']}/{L.VALID_FILE})."
        )
    require_columns(df, {S.ID: "id", col: "text"}, path)
    require_rows(df, path, "Nothing to score: augment accepted no item, or validation quarantined them all.")
    df = df[[S.ID, col]].rename(columns={col: S.TEXT})
    dup = df[S.ID].duplicated()
    if dup.any():
        raise InputError(f"{path}: duplicate ids, e.g. row {int(dup.idxmax())} ({df[S.ID][dup].iloc[0]!r}).")
    if limit is not None:
        df = df.head(limit)
    if part is not None:
        from ..shards import part_of

        df = df[[part_of(str(i), parts) == part for i in df[S.ID]]]
    df[S.TEXT] = df[S.TEXT].fillna("").astype(str)
    empty = df[S.TEXT].str.strip() == ""
    rejected = [
        {S.ID: i, S.TEXT: t, S.REASON: "empty-text"}
        for i, t in zip(df[S.ID][empty], df[S.TEXT][empty], strict=True)
    ]
    return df[~empty].reset_index(drop=True), rejected


@dataclass
class _Models:
    """The generator, scorer and judge of one entropy run, built from the config on first use (only when there
    is work left) unless the caller passed them in."""

    config: Config
    target_ref: str
    generator: Generator | None = None
    scorer: Scorer | None = None
    judge: EntailmentJudge | None = None
    own_generator: bool = False

    def get_scorer(self) -> Scorer:
        if self.scorer is None:
            from ..scoring import load_scorer

            c = self.config
            self.scorer = load_scorer(self.target_ref, device=c.run.device, batch_size=c.entropy.batch_size,
                                      cache=c.run.model_cache)
        return self.scorer

    def get_generator(self) -> Generator:
        if self.generator is None:
            from ..generation import make_generator

            c, e = self.config, self.config.entropy
            backend, ref = e.generator_backend or c.augment.backend, e.generator_model or c.augment.model
            sc = self.get_scorer()
            shared = getattr(sc, "model", None) if getattr(sc, "family", None) == "causal" else None
            # the target samples its own rephrasings (the demo): one copy of the weights, not two
            loaded = (shared, sc.tokenizer) if backend == "hf" and ref == self.target_ref and shared is not None else None
            self.generator = make_generator(backend, ref, device=c.run.device, model_cache=c.run.model_cache,
                                            batch_size=e.batch_size, openai=c.augment.openai, loaded=loaded)
            self.own_generator = True
        return self.generator

    def get_decider(self, batched: bool) -> PairDecider:
        if self.judge is None:
            from ..generation import make_generator
            from ..judges import make_judge

            c = self.config
            self.judge = make_judge(c.entropy, device=c.run.device, model_cache=c.run.model_cache,
                                    generator_factory=lambda ref: make_generator(
                                        "hf", ref, device=c.run.device, model_cache=c.run.model_cache))
        return PairDecider(self.judge, self.config.entropy.rule,
                           batch_size=self.config.entropy.batch_size if batched else 1)

    def close(self) -> None:
        if self.own_generator and self.generator is not None:
            self.generator.close()


@dataclass
class _Progress:
    t_sample: float = 0.0
    t_score: float = 0.0
    shards_written: int = 0
    generated: int = 0
    decider: PairDecider | None = None
    errors: dict[str, str] = field(default_factory=dict)  # id -> why its generation failed (this run)
    bar: Progress | None = None  # done / rate / ETA (context_cda.progress)


def run_entropy(
    config: Config,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    target: str,
    shard: int | None = None,
    *,
    generator: Generator | None = None,
    scorer: Scorer | None = None,
    judge: EntailmentJudge | None = None,
    batched: bool = True,
) -> dict[str, Any]:
    """Semantic entropy of every contextual counterfactual under target model ``target`` (with ``shard``: of
    generation part ``shard`` of ``pipeline.generation_shards`` only; :func:`run_entropy_merge` joins the parts).

    ``inputs["augmented"]``: the augment stage's (validated) table (columns ``id``, ``augmented``).
    ``generator``, ``scorer`` and ``judge`` may be passed in (tests, benchmarks, notebooks); otherwise they are
    built from the config, and only when there is work left. ``batched=False`` is the one-pair-at-a-time
    reference path (benchmarks).
    """
    if target not in config.run.targets:
        raise ConfigError(
            f"entropy: unknown target {target!r}; run.targets has {', '.join(config.run.targets) or 'none'}."
        )
    if "augmented" not in inputs:
        raise InputError("run_entropy needs inputs={'augmented': <the validated augmented table>}.")
    out = Path(out_dir)
    with file_lock(out / L.LOCK_FILE, f"entropy[{target}]"):
        return _run_entropy(config, inputs, out, target, shard, _Models(config, config.run.targets[target],
                                                                          generator, scorer, judge), batched)


def _run_entropy(config: Config, inputs: Mapping[str, Path | str], out: Path, target: str, shard: int | None,
                 models: _Models, batched: bool) -> dict[str, Any]:
    target_ref, in_path = config.run.targets[target], Path(inputs["augmented"])
    items, rejected_input = _read_items(in_path, config.entropy.limit, shard, config.pipeline.generation_shards)
    rec = StageRecorder("entropy", out, config, inputs={"augmented": in_path}, versions=("torch", "transformers"))
    fp = fingerprint(config, target_ref)
    shard_dir = out / SHARDS_DIR / fp
    shard_dir.mkdir(parents=True, exist_ok=True)
    done_ids = set(read_shards(shard_dir)[S.ID].astype(str))
    todo = items[~items[S.ID].astype(str).isin(done_ids)].reset_index(drop=True)
    log.info("entropy[%s]: %d items, %d already done, %d to do", target, len(items), len(items) - len(todo),
             len(todo))
    progress = _Progress()
    if len(todo):
        try:
            _process_shards(config, todo, models, out, shard_dir, batched, progress, target)
        finally:
            models.close()
            if progress.bar is not None:
                progress.bar.close()
    scores, audit, rejected = _assemble(shard_dir, items, rejected_input)
    errors = _errors(shard_dir, items, progress)
    scores_path = write_table(scores, out / L.SCORES_FILE)
    audit_path = write_table(audit, out / L.AUDIT_FILE)
    write_rejected(rejected, out)
    errors_path = write_table(errors, out / L.ERRORS_FILE)
    summary = _summary(config, target, target_ref, fp, items, rejected_input, scores, rejected, todo, progress)
    summary.update(errors=int(len(errors)), error_reasons=error_kinds(errors[S.REASON]))
    rec.finish(
        counts={"in": summary["items_in"], "out": len(scores), "rejected": summary["rejected"],
                "errors": summary["errors"]},
        outputs={"scores": scores_path, "audit": audit_path, "errors": errors_path},
        summary=summary,
    )
    check_item_errors(f"entropy[{target}]", summary["errors"], summary["items_in"], summary["error_reasons"],
                      errors_path, config.run.allow_errors)
    return summary


def _errors(shard_dir: Path, items: pd.DataFrame, progress: _Progress) -> pd.DataFrame:
    """The items without a finished row (their generation failed in this run): id, text, reason."""
    import pandas as pd

    done = set(read_shards(shard_dir)[S.ID].astype(str))
    left = items[~items[S.ID].astype(str).isin(done)]
    reasons = [progress.errors.get(str(i), "generator: not processed") for i in left[S.ID]]
    return pd.DataFrame({S.ID: left[S.ID].tolist(), S.TEXT: left[S.TEXT].tolist(), S.REASON: reasons},
                        columns=[S.ID, S.TEXT, S.REASON])


def _process_shards(config: Config, todo: pd.DataFrame, models: _Models, out: Path, shard_dir: Path,
                    batched: bool, progress: _Progress, target: str) -> None:
    """Sample (or reuse cached samples), score, cluster and estimate, one atomically written shard at a time."""
    cfg = config.entropy
    sample_dir = out / SAMPLES_DIR / sample_fingerprint(config)
    sample_dir.mkdir(parents=True, exist_ok=True)
    sample_cache = read_sample_cache(sample_dir)
    progress.bar = Progress(len(todo), f"entropy[{target}]", "item")  # closed by _run_entropy; loads are work too
    progress.decider = decider = models.get_decider(batched)
    scorer = models.get_scorer()
    seq = len(list(shard_dir.glob("shard-*.parquet")))
    for start in range(0, len(todo), cfg.shard_size):
        part = todo.iloc[start : start + cfg.shard_size]
        ids, texts = part[S.ID].astype(str).tolist(), part[S.TEXT].tolist()
        t0 = time.perf_counter()
        progress.generated += _draw_samples(config, ids, texts, models, sample_dir, sample_cache)
        t1 = time.perf_counter()
        res = process_items(ids, texts, [sample_cache[i][1] for i in ids], scorer, decider, cfg, batched=batched,
                            sample_errors=[sample_cache[i][2] for i in ids],
                            sample_rejections=[sample_cache[i][3] for i in ids])
        progress.t_sample += t1 - t0
        progress.t_score += time.perf_counter() - t1
        progress.errors.update({str(r[S.ID]): r[S.REASON] for r in res.errors})
        name = f"shard-{seq:05d}-{stable_id(*ids)}.parquet"
        write_table(_shard_frame(res), shard_dir / name)  # atomic: the shard is done or absent
        seq += 1
        progress.shards_written += 1
        progress.bar.update(len(ids))
        progress.bar.set_postfix(sampled=progress.generated, errors=len(progress.errors))
        log.debug("entropy[%s]: shard %s: %d items", target, name, len(ids))


def _draw_samples(config: Config, ids: list[str], texts: list[str], models: _Models, sample_dir: Path,
                  sample_cache: dict[str, CachedSamples]) -> int:
    """Sample the M rephrasings of the items that have none cached; the new samples are saved (atomically)
    before scoring starts, so a kill during scoring keeps them. Returns how many items were sampled."""
    import pandas as pd

    cfg = config.entropy
    need = [k for k, (i, t) in enumerate(zip(ids, texts, strict=True))  # a cached failure is sampled again
            if i not in sample_cache or sample_cache[i][0] != t or sample_cache[i][2]]
    if not need:
        return 0
    # one seed for every item: the backends draw per prompt (hf: a stream per seed, prompt and sample; vLLM and
    # an OpenAI server: a per-request seed), so an item's samples do not depend on its shard, the limit or the
    # generation part it landed in
    got = sample_and_review(
        models.get_generator(), [texts[k] for k in need], cfg.n_samples, temperature=cfg.temperature,
        top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=config.run.seed, review_settings=sample_settings(config),
    )
    fresh = pd.DataFrame({S.ID: [ids[k] for k in need], S.TEXT: [texts[k] for k in need],
                          "samples": got.samples, "error": [e or "" for e in got.errors],
                          "rejection": [r or "" for r in got.rejections]})
    n_files = len(list(sample_dir.glob("samples-*.parquet")))
    write_table(fresh, sample_dir / f"samples-{n_files:05d}-{stable_id(*fresh[S.ID])}.parquet")
    for k, ss, e, r in zip(need, got.samples, got.errors, got.rejections, strict=True):
        sample_cache[ids[k]] = (texts[k], ss, e, r)
    return len(need)


def _assemble(shard_dir: Path, items: pd.DataFrame, rejected_input: list[dict[str, Any]]):
    """(scores, audit, rejected) from every finished shard of this fingerprint that belongs to the input, in the
    input's order."""
    import pandas as pd

    allrows = read_shards(shard_dir)
    allrows = allrows[allrows[S.ID].astype(str).isin(set(items[S.ID].astype(str)))]
    ok_rows = allrows[allrows[S.REASON].fillna("") == ""]
    scores = (ok_rows.drop_duplicates(S.ID)[SCORE_COLUMNS]
              .astype({S.N_CLUSTERS: "int64", "n_samples": "int64"}).reset_index(drop=True))
    audit = (ok_rows.drop_duplicates([S.ID, "sample_idx"])[AUDIT_COLUMNS]
             .astype({"sample_idx": "int64", "cluster": "int64", "n_tokens": "int64"}).reset_index(drop=True))
    rej = allrows[allrows[S.REASON].fillna("") != ""].drop_duplicates(S.ID)[[S.ID, S.TEXT, S.REASON]]
    rejected = pd.concat([pd.DataFrame(rejected_input, columns=[S.ID, S.TEXT, S.REASON]), rej], ignore_index=True)
    order = {i: n for n, i in enumerate(items[S.ID].astype(str))}
    scores = scores.sort_values(S.ID, key=lambda s: s.astype(str).map(order)).reset_index(drop=True)
    audit = audit.sort_values([S.ID, "sample_idx"],
                              key=lambda s: s.astype(str).map(order) if s.name == S.ID else s)
    return scores, audit.reset_index(drop=True), rejected


def score_stats(scores: pd.DataFrame) -> dict[str, float]:
    """The summary's averages over a scores table (NaN when it is empty)."""
    n = len(scores)
    return {
        "se_mean": float(scores[S.SE].mean()) if n else float("nan"),
        "se_median": float(scores[S.SE].median()) if n else float("nan"),
        "n_clusters_mean": float(scores[S.N_CLUSTERS].mean()) if n else float("nan"),
    }


def per_item_stats(config: Config, judge_calls: int, processed: int) -> dict[str, float]:
    """Judge calls per processed item, and the pairs an all-pairs clustering would judge per item."""
    m = config.entropy.n_samples
    return {"judge_calls_per_item": round(judge_calls / processed, 3) if processed else 0.0,
            "all_pairs_per_item": m * m}


def _summary(config: Config, target: str, target_ref: str, fp: str, items, rejected_input, scores, rejected,
             todo, progress: _Progress) -> dict[str, Any]:
    cfg = config.entropy
    n_items = len(scores)
    decider = progress.decider
    stats = decider.stats() if decider else {"judge_calls": 0, "judge_requests": 0, "judge_batches": 0}
    return {
        "target": target,
        "target_model": target_ref,
        "judge": cfg.judge,
        "rule": cfg.rule,
        "estimator": cfg.estimator,
        "items_in": int(len(items) + len(rejected_input)),
        "scored": n_items,
        "rejected": int(len(rejected)),
        "resumed_items": int(len(items) - len(todo)),
        "processed_items": int(len(todo)),
        "shards_written": progress.shards_written,
        "items_sampled": progress.generated,
        "fingerprint": fp,
        **stats,
        **per_item_stats(config, stats["judge_calls"], len(todo)),
        **score_stats(scores),
        "seconds_sampling": round(progress.t_sample, 3),
        "seconds_scoring_clustering": round(progress.t_score, 3),
    }
