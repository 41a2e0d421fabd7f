"""``run_augment``: rephrase every CDA counterfactual with a generator, check it, retry, store exactly once.

Flow per shard of ``augment.shard_size`` pending items: for attempt 1..(1 + max_retries) build the prompt,
look the request up in the cache, generate the misses (``batch_size`` prompts per ``generate`` call), clean
and check every completion (the first acceptable one wins), and retry the still-rejected items with the next
seed. The shard's final rows (accepted, rejected with reason, or ``error`` when the backend gave up) are then
appended atomically. Rows with ``error`` are retried by the next run; accepted/rejected rows are final for the
current settings. ``augmented.parquet`` and ``rejected.parquet`` are rebuilt from the shards at the end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..errors import InputError
from ..generation.base import Generator, SamplingParams
from ..io import StageRecorder, json_hash, read_table, require_columns, stable_id, write_rejected, write_table
from .postprocess import CheckSettings, check, clean, default_lexicon, parse_swaps
from .prompts import build_messages, get_prompt
from .store import GenerationCache, ShardStore, cache_key

ACCEPTED, REJECTED, ERROR = "accepted", "rejected", "error"
OUTPUT_COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.AUGMENTED, S.ATTEMPTS, S.GEN_MODEL, S.PROMPT_VERSION,
                  S.RAW_OUTPUT]


@dataclass
class _Item:
    key: str
    cda_id: str
    text: str
    swaps: list[tuple[str, str]]
    direction: str | None
    status: str = ""
    augmented: str = ""
    raw: str = ""
    reason: str = ""
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def load_gender_lexicon(config: Any) -> Any:
    """The project's gender lexicon (context_cda.cda.lexicon), or a small built-in pair list without it."""
    try:
        from ..cda.lexicon import load_lexicon
    except ImportError:
        return default_lexicon()
    return load_lexicon(config.lexicon)


def settings_for(config: Any) -> dict[str, Any]:
    """Everything that changes an item's result; its hash is part of every item key."""
    a = config.augment
    return {
        "backend": a.backend,
        "model": a.model,
        "prompt_version": a.prompt_version,
        "prompt_hash": get_prompt(a.prompt_version).hash(a.few_shot),
        "few_shot": a.few_shot,
        "sampling": a.sampling.model_dump(mode="json"),
        "max_retries": a.max_retries,
        "checks": [a.min_length_ratio, a.max_length_ratio],
        "lexicon": config.lexicon.model_dump(mode="json"),
    }


def _input_path(inputs: Mapping[str, Path | str]) -> Path:
    for name in ("counterfactuals", "cda", "valid"):
        if name in inputs:
            return Path(inputs[name])
    raise InputError(f"augment: inputs must name 'counterfactuals' (got {', '.join(inputs) or 'nothing'}).")


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="item", desc="augment", dynamic_ncols=True, smoothing=0.1)


def run_augment(
    config: Any,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    *,
    generator: Generator | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Augment ``inputs['counterfactuals']`` into ``out_dir/augmented.parquet`` (see the module docstring).

    ``generator`` overrides the configured backend (tests, or a caller that already holds a model).
    """
    import pandas as pd

    a = config.augment
    out_dir = Path(out_dir)
    src = _input_path(inputs)
    rec = StageRecorder("augment", out_dir, {"augment": a.model_dump(mode="json"),
                                             "lexicon": config.lexicon.model_dump(mode="json")},
                        inputs={"counterfactuals": src}, versions=("transformers", "torch", "httpx", "vllm"))
    df = read_table(src)
    require_columns(df, [S.ID, S.COUNTERFACTUAL, S.SWAPPED_TERMS], src)
    skipped_rows: list[dict[str, Any]] = []
    if "applied" in df.columns:
        mask = df["applied"].fillna(False).astype(bool)
        for r in df.loc[~mask].itertuples(index=False):
            skipped_rows.append({S.ID: None, S.CDA_ID: r.id, S.COUNTERFACTUAL: getattr(r, S.COUNTERFACTUAL),
                                 "status": REJECTED, S.REASON: "not-applied: the CDA row has no swap"})
        df = df.loc[mask]
    if a.limit is not None:
        df = df.head(a.limit)
    if df[S.ID].duplicated().any():
        dup = df.loc[df[S.ID].duplicated(), S.ID].iloc[0]
        raise InputError(f"{src}: duplicate id {dup!r}; ids must be unique.")

    settings = settings_for(config)
    shash = json_hash(settings)
    items = [
        _Item(
            key=stable_id("augment", r[S.ID], r[S.COUNTERFACTUAL], shash),
            cda_id=str(r[S.ID]),
            text=str(r[S.COUNTERFACTUAL]),
            swaps=parse_swaps(r[S.SWAPPED_TERMS]),
            direction=r.get(S.DIRECTION) if hasattr(r, "get") else None,
        )
        for r in df.to_dict("records")
    ]
    lexicon = load_gender_lexicon(config)
    csettings = CheckSettings(a.min_length_ratio, a.max_length_ratio)
    params = SamplingParams.from_config(a.sampling)
    max_attempts = 1 if params.greedy else 1 + a.max_retries  # greedy retries would repeat the same output
    gen_model = generator.model_id if generator is not None else a.model
    backend = generator.backend if generator is not None else a.backend
    store = ShardStore(out_dir / "shards")
    cache = GenerationCache(a.cache_dir or out_dir / "cache")
    gen_holder: dict[str, Generator] = {}

    def get_generator() -> Generator:
        if generator is not None:
            return generator
        if "g" not in gen_holder:
            from ..generation import make_generator

            with rec.timed("load_model"):
                gen_holder["g"] = make_generator(
                    a.backend, a.model, device=config.run.device, model_cache=config.run.model_cache,
                    batch_size=a.batch_size, openai=a.openai, engine_args=a.engine_args,
                )
        return gen_holder["g"]

    stats = {"generated_tokens": 0, "prompt_tokens": 0, "generate_s": 0.0}
    t0 = time.perf_counter()
    with store.locked():
        prior = store.read()
        done: set[str] = set()
        if len(prior):
            final = prior[prior["status"].isin([ACCEPTED, REJECTED])]
            done = set(final["item_key"])
        pending = [it for it in items if it.key not in done]
        resumed = len(items) - len(pending)
        bar = _progress_bar(len(pending), progress)
        n_rejected = 0
        try:
            for c in range(0, len(pending), a.shard_size):
                chunk = pending[c: c + a.shard_size]
                _process_chunk(chunk, a, params, max_attempts, backend, gen_model, cache, get_generator,
                               lexicon, csettings, stats, bar, n_rejected)
                rows = [_row(it, gen_model, a.prompt_version) for it in chunk]
                store.append(rows)
                n_rejected += sum(it.status != ACCEPTED for it in chunk)
        finally:
            if bar is not None:
                bar.close()
            for g in gen_holder.values():
                g.close()
        elapsed = time.perf_counter() - t0

        with rec.timed("merge"):
            merged, duplicates = _final_rows(store.read(), [it.key for it in items])
        order = {it.key: i for i, it in enumerate(items)}
        merged = merged.assign(_o=merged["item_key"].map(order)).sort_values("_o")
        acc = merged[merged["status"] == ACCEPTED]
        aug = acc[OUTPUT_COLUMNS].reset_index(drop=True)
        aug[S.ATTEMPTS] = aug[S.ATTEMPTS].astype("int64")
        rej_cols = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.RAW_OUTPUT, S.ATTEMPTS, "status", S.REASON]
        rej = merged[merged["status"] != ACCEPTED][rej_cols]
        if skipped_rows:
            rej = pd.concat([rej, pd.DataFrame(skipped_rows)], ignore_index=True)
        write_table(aug, out_dir / S.AUGMENT_FILE)
        write_rejected(rej.reset_index(drop=True), out_dir)

    reasons = rej[S.REASON].fillna("").str.split(":").str[0].value_counts().to_dict() if len(rej) else {}
    gen_s = stats["generate_s"]
    summary = {
        "rows_in": int(len(df) + len(skipped_rows)),
        "items": len(items),
        "accepted": int(len(aug)),
        "rejected": int(len(rej)),
        "errors": int((merged["status"] == ERROR).sum()) if len(merged) else 0,
        "reject_reasons": {str(k): int(v) for k, v in reasons.items()},
        "resumed_items": resumed,
        "processed_items": len(pending),
        "duplicates_dropped": duplicates,
        "cache_hits": cache.hits,
        "cache_misses": cache.misses,
        "generated_tokens": stats["generated_tokens"],
        "prompt_tokens": stats["prompt_tokens"],
        "items_per_s": round(len(pending) / elapsed, 3) if elapsed > 0 and pending else 0.0,
        "tokens_per_s": round(stats["generated_tokens"] / gen_s, 2) if gen_s > 0 else 0.0,
        "gen_model": gen_model,
        "backend": backend,
        "prompt_version": a.prompt_version,
    }
    rec.finish(
        counts={"in": summary["rows_in"], "out": summary["accepted"], "rejected": summary["rejected"]},
        outputs={"augmented": out_dir / S.AUGMENT_FILE, "rejected": out_dir / "rejected.parquet"},
        summary=summary,
    )
    return summary


def _postfix(bar: Any, stats: dict[str, Any], n_rejected: int) -> None:
    gen_s = stats["generate_s"]
    bar.set_postfix(tok_s=f"{stats['generated_tokens'] / gen_s:.1f}" if gen_s else "-", rejected=n_rejected,
                    refresh=False)


def _process_chunk(chunk, a, params, max_attempts, backend, gen_model, cache, get_generator, lexicon,
                   csettings, stats, bar, n_rejected) -> None:
    """Run all attempts for one shard's items; the progress bar moves as items reach their final state."""
    todo = list(chunk)
    for attempt in range(max_attempts):
        if not todo:
            break
        last = attempt + 1 == max_attempts
        p = params.with_seed(None if params.seed is None else params.seed + attempt)
        convs = [build_messages(it.text, a.prompt_version, a.few_shot) for it in todo]
        keys = [cache_key(backend, gen_model, m, p) + (f"-a{attempt}" if p.seed is None else "") for m in convs]
        results = [cache.get(k) for k in keys]
        pending = [i for i, r in enumerate(results) if r is None]
        # cached results first, then the misses in generate() batches
        batches = [[i for i, r in enumerate(results) if r is not None]]
        batches += [pending[b: b + a.batch_size] for b in range(0, len(pending), a.batch_size)]
        still = []
        for idx in batches:
            if not idx:
                continue
            miss = [i for i in idx if results[i] is None]
            if miss:
                t = time.perf_counter()
                out = get_generator().generate([convs[i] for i in miss], p)
                stats["generate_s"] += time.perf_counter() - t
                for i, r in zip(miss, out, strict=True):
                    results[i] = r
                    cache.put(keys[i], r)
                    stats["generated_tokens"] += r.completion_tokens
                    stats["prompt_tokens"] += r.prompt_tokens
            finished = 0
            for i in idx:
                it, r = todo[i], results[i]
                _judge(it, r, attempt, lexicon, csettings)
                if it.status == ACCEPTED or last:
                    finished += 1
                    n_rejected += it.status != ACCEPTED
                else:
                    still.append(it)
            if bar is not None:
                bar.update(finished)
                _postfix(bar, stats, n_rejected)
        todo = still


def _judge(it: _Item, r: Any, attempt: int, lexicon: Any, csettings: CheckSettings) -> None:
    """Record one attempt's outcome on the item: the first acceptable completion wins."""
    it.attempts = attempt + 1
    it.prompt_tokens += r.prompt_tokens
    it.completion_tokens += r.completion_tokens
    if r.error:
        it.status, it.reason, it.raw = ERROR, f"generation-error: {r.error}", ""
        return
    first_reason, first_raw = "", ""
    for text in r.texts:
        cleaned = clean(text)
        reason = check(cleaned, it.text, it.swaps, lexicon, csettings, it.direction)
        if not reason:
            it.status, it.augmented, it.raw, it.reason = ACCEPTED, cleaned, text, ""
            return
        if not first_reason:
            first_reason, first_raw = reason, text
    it.status, it.reason, it.raw = REJECTED, first_reason or "empty", first_raw


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
        "status": it.status,
        S.REASON: it.reason,
        "prompt_tokens": it.prompt_tokens,
        "completion_tokens": it.completion_tokens,
        "finished_at": time.time(),
    }


def _final_rows(shards: Any, keys: list[str]) -> tuple[Any, int]:
    """One row per current item key: its final (accepted/rejected) row, else its latest error row."""
    import pandas as pd

    if not len(shards):
        return pd.DataFrame(columns=[*OUTPUT_COLUMNS, "item_key", "status", S.REASON]), 0
    cur = shards[shards["item_key"].isin(set(keys))]
    final = cur[cur["status"].isin([ACCEPTED, REJECTED])]
    duplicates = int(final["item_key"].duplicated().sum())
    final = final.drop_duplicates("item_key", keep="first")
    errs = cur[(cur["status"] == ERROR) & ~cur["item_key"].isin(set(final["item_key"]))]
    errs = errs.drop_duplicates("item_key", keep="last")
    return pd.concat([final, errs], ignore_index=True), duplicates
