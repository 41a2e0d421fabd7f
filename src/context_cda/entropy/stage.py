"""``run_entropy``: one target model's semantic entropy of every sampled item, checkpointed per shard.

The samples and their entailment clusters come from the sample step (:mod:`.samples`), drawn and clustered once
for every target; this step only scores each sample under the target (``config.run.targets[target]``,
:mod:`.likelihood`) and applies the estimators (:mod:`.estimators`). Below ``out_dir``::

    scores (layout.SCORES_FILE)  id, text, se, se_eq1, se_plogp, se_discrete, n_clusters, n_samples
    audit (layout.AUDIT_FILE)    id, sample_idx, sample, cluster, loglik_sum, loglik_mean, n_tokens
    rejected.parquet   id, text, reason   the sample step's rejections (empty text, too few samples, a prompt the
                                          generator can never take) and this step's: non-finite likelihoods
    errors (layout.ERRORS_FILE)  id, text, reason   (none of its own: the sample step's errors are retried there)
    shards/<fingerprint>/shard-*.parquet   checkpoints (the item engine's, :mod:`context_cda.items`)
    manifest.json

An item's key is a hash of its samples and clusters, and the fingerprint one of the target and the estimator
settings: new samples, another judge or another target never reuse a score, and a killed run loses at most the
shard in flight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import items as I
from .. import layout as L
from .. import schemas as S
from ..errors import ConfigError, InputError
from ..io import (
    REJECTED,
    json_hash,
    read_json,
    read_table,
    require_columns,
    stable_id,
    write_table,
)
from ..steps import Counts, Recorder, recorder
from .estimators import semantic_entropies
from .likelihood import sample_logliks

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config, EntropyConfig
    from ..scoring import Scorer

SCORE_COLUMNS = [S.ID, S.TEXT, S.SE, S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE, S.N_CLUSTERS, "n_samples"]
AUDIT_COLUMNS = [S.ID, "sample_idx", "sample", "cluster", "loglik_sum", "loglik_mean", "n_tokens"]
ITEM_COLUMNS = [S.ID, S.TEXT, S.REASON]
#: the entropy settings that change a score (the others change the samples: the sample step's)
SCORE_KEYS = ("estimator", "length_normalised")


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    samples: tuple[str, ...]
    clusters: tuple[int, ...]

    @property
    def key(self) -> str:
        return stable_id("entropy", self.id, self.text, *self.samples, *self.clusters)


def fingerprint(config: Config, target_ref: str) -> str:
    """Hash of what changes a score beside the samples and clusters (in the item keys): the target model and
    the estimator settings (not batch or shard sizes)."""
    return json_hash({"target": target_ref, **{k: getattr(config.entropy, k) for k in SCORE_KEYS}})


# ------------------------------------------------------------------------------------------ the items


def read_samples(folder: Path) -> tuple[list[Item], pd.DataFrame]:
    """The sample step's items (in its order) and its rejected rows, from its folder."""
    import pandas as pd

    path = folder / L.SAMPLES_FILE
    if not path.is_file():
        raise InputError(f"{folder}: no {L.SAMPLES_FILE}; run the sample step first (`ccda sample`), or pass its "
                         f"folder ({L.FOLDERS['sample']}).")
    df = read_table(path)
    require_columns(df, {S.ID: "id", S.TEXT: "text", "sample": "text"}, path)
    missing = {"sample_idx", "cluster"} - set(df.columns)
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(sorted(missing))}: not a sample step's table.")
    items = [Item(str(i), str(g[S.TEXT].iloc[0]), tuple(map(str, g["sample"])), tuple(map(int, g["cluster"])))
             for i, g in df.groupby(S.ID, sort=False)]
    rej_path = folder / REJECTED
    rejected = read_table(rej_path) if rej_path.is_file() else pd.DataFrame(columns=ITEM_COLUMNS)
    return items, rejected.reindex(columns=ITEM_COLUMNS)


# ------------------------------------------------------------------------------------------ one shard


def score_chunk(chunk: Sequence[Item], scorer: Scorer, cfg: EntropyConfig) -> list[dict[str, Any]]:
    """The engine's work for one shard: every sample's log-likelihood under the target, then the estimators; one
    row per sample (the item's score columns on each), or one rejected row when a likelihood is not finite."""
    logliks = sample_logliks(scorer, [it.text for it in chunk], [list(it.samples) for it in chunk])
    rows: list[dict[str, Any]] = []
    for it, lls in zip(chunk, logliks, strict=True):
        base = {I.KEY: it.key, S.ID: it.id, S.TEXT: it.text}
        values = [ll.mean if cfg.length_normalised else ll.sum for ll in lls]
        if not all(math.isfinite(v) for v in values) or any(ll.n_tokens <= 0 for ll in lls):
            why = f"non-finite-loglik: a sample scored {values} (n_tokens {[ll.n_tokens for ll in lls]})"
            rows.append({**base, I.STATUS: I.REJECTED, I.REASON: why})
            continue
        est = semantic_entropies(values, list(it.clusters))
        score = {S.SE: est[cfg.estimator], S.SE_EQ1: est["eq1"], S.SE_PLOGP: est["plogp"],
                 S.SE_DISCRETE: est["discrete"], S.N_CLUSTERS: est["n_clusters"], "n_samples": len(it.samples)}
        rows += [{**base, I.STATUS: I.DONE, I.REASON: "", **score, "sample_idx": j, "sample": s, "cluster": c,
                  "loglik_sum": float(ll.sum), "loglik_mean": float(ll.mean), "n_tokens": int(ll.n_tokens)}
                 for j, (s, c, ll) in enumerate(zip(it.samples, it.clusters, lls, strict=True))]
    return rows


def process_items(items: Sequence[Item], scorer: Scorer, cfg: EntropyConfig, batched: bool = True
                  ) -> list[dict[str, Any]]:
    """:func:`score_chunk` with the scorer one sequence at a time when not ``batched`` (the reference path)."""
    sc = scorer if batched or not hasattr(scorer, "with_batch_size") else scorer.with_batch_size(1)
    return score_chunk(items, sc, cfg)


# ------------------------------------------------------------------------------------------ the stage


@dataclass
class _Scorer:
    """The target's scorer, loaded on first use (only when there is work left) unless passed in."""

    config: Config
    ref: str
    scorer: Scorer | None = None
    loaded: bool = False

    def get(self) -> Scorer:
        if self.scorer is None:
            from ..scoring import load_scorer

            c = self.config
            self.scorer = load_scorer(self.ref, device=c.run.device, batch_size=c.entropy.batch_size,
                                      cache=c.run.model_cache)
            self.loaded = True
        return self.scorer


def run_entropy(
    config: Config,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    target: str,
    *,
    scorer: Scorer | None = None,
    batched: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Semantic entropy of every sampled item under target model ``target``.

    ``inputs["samples"]``: the sample step's folder (``samples.parquet`` and its ``rejected.parquet``). ``scorer``
    may be passed in (tests, benchmarks); otherwise it is loaded from the config, and only when there is work
    left. ``batched=False`` scores one sequence at a time (the reference path of the benchmarks).
    """
    if target not in config.run.targets:
        raise ConfigError(
            f"entropy: unknown target {target!r}; run.targets has {', '.join(config.run.targets) or 'none'}."
        )
    if "samples" not in inputs:
        raise InputError("run_entropy needs inputs={'samples': <the sample step's folder>}.")
    out, folder, ref = Path(out_dir), Path(inputs["samples"]), config.run.targets[target]
    items, rejected_in = read_samples(folder)
    what = f"entropy[{target}]"
    fp = fingerprint(config, ref)
    run = I.ItemRun(what, I.Checkpoints.of(out, fp), config.entropy.shard_size, lambda it: it.key, progress)
    model = _Scorer(config, ref, scorer)
    scored = [0]  # samples scored in this pass

    def work(chunk: list[Item], bar: Any) -> list[dict[str, Any]]:
        scored[0] += sum(len(it.samples) for it in chunk)
        return process_items(chunk, model.get(), config.entropy, batched)

    rec = recorder(out, versions=("torch", "transformers"))
    done = I.run_items(run, items, work)
    outcome, tables = assemble(run, items, rejected_in, out)
    return record(rec, config, target, fp, folder, outcome, tables, done, scored[0])


def assemble(run: I.ItemRun, items: Sequence[Item], rejected_in: pd.DataFrame, out: Path
             ) -> tuple[I.Outcome, dict[str, pd.DataFrame]]:
    """scores, audit, rejected and errors from the finished shards, in the sample step's order."""
    import pandas as pd

    outcome = I.Outcome.of(run.what, run.store, [it.key for it in items], then="sample_idx")
    outcome.items += len(rejected_in)
    rows = outcome.done
    scores = rows.drop_duplicates(I.KEY).reindex(columns=SCORE_COLUMNS).astype(
        {S.N_CLUSTERS: "int64", "n_samples": "int64"}).reset_index(drop=True)
    audit = rows.reindex(columns=AUDIT_COLUMNS).astype(
        {"sample_idx": "int64", "cluster": "int64", "n_tokens": "int64"}).reset_index(drop=True)
    rejected = pd.concat([rejected_in, outcome.rejected.reindex(columns=ITEM_COLUMNS)], ignore_index=True)
    outcome.paths.update(scores=write_table(scores, out / L.SCORES_FILE), audit=write_table(audit, out / L.AUDIT_FILE))
    outcome.write(out, rejected, outcome.errors.reindex(columns=ITEM_COLUMNS))
    return outcome, {"scores": scores, "rejected": rejected}


def score_stats(scores: pd.DataFrame) -> dict[str, float]:
    """The summary's averages over a scores table (NaN when it is empty)."""
    n = len(scores)
    return {
        "se_mean": float(scores[S.SE].mean()) if n else float("nan"),
        "se_median": float(scores[S.SE].median()) if n else float("nan"),
        "n_clusters_mean": float(scores[S.N_CLUSTERS].mean()) if n else float("nan"),
    }


def record(rec: Recorder, config: Config, target: str, fp: str, folder: Path, outcome: I.Outcome,
           tables: dict[str, pd.DataFrame], done: I.Pass, samples_scored: int) -> dict[str, Any]:
    """The summary (also the manifest's): the scores' averages, and how much this pass scored."""
    scores = tables["scores"]
    manifest = folder / "manifest.json"
    upstream = read_json(manifest).get("summary", {}) if manifest.is_file() else {}
    summary = {
        "target": target, "target_model": config.run.targets[target], "estimator": config.entropy.estimator,
        "items_in": outcome.items, "scored": int(len(scores)), "rejected": int(len(tables["rejected"])),
        "errors": int(len(outcome.errors)), "error_reasons": outcome.error_reasons(),
        "resumed_items": done.resumed, "processed_items": done.processed, "shards_written": done.shards,
        "samples_scored": samples_scored,
        "sample_fingerprint": upstream.get("fingerprint"), "fingerprint": fp, **score_stats(scores),
        "seconds_scoring": round(done.seconds, 3),
    }
    rec.finish(Counts(items_in=summary["items_in"], out=summary["scored"], rejected=summary["rejected"],
                      errors=summary["errors"], error_reasons=summary["error_reasons"]),
               outputs=dict(outcome.paths), summary=summary)
    return summary
