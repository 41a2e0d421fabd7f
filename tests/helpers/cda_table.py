"""Tiny hand-made CDA tables (the columns of <run_dir>/cda/counterfactuals.parquet) for augment tests."""

from __future__ import annotations

from pathlib import Path

BASE = [
    ("He thanked his father for the advice.", "She thanked her mother for the advice.",
     ["He->She", "his->her", "father->mother"], "m2f"),
    ("The king said he would return in spring.", "The queen said she would return in spring.",
     ["king->queen", "he->she"], "m2f"),
    ("Her sister worked at the hospital.", "His brother worked at the hospital.",
     ["Her->His", "sister->brother"], "f2m"),
    ("The actress thanked her fans.", "The actor thanked his fans.", ["actress->actor", "her->his"], "f2m"),
    ("My uncle and his wife moved to Paris.", "My aunt and her husband moved to Paris.",
     ["uncle->aunt", "his->her", "wife->husband"], "mixed"),
]


def cda_rows(n: int, markers: dict[int, str] | None = None) -> list[dict]:
    """``n`` rows cycling through BASE, each made unique by a number; ``markers`` appends e.g. "[F500]"."""
    rows = []
    for i in range(n):
        orig, cf, swaps, direction = BASE[i % len(BASE)]
        tag = f" ({i})" if i >= len(BASE) else ""
        cf_i = cf[:-1] + tag + (f" {markers[i]}" if markers and i in markers else "") + cf[-1]
        rows.append({
            "id": f"cda{i:04d}", "source_id": f"s{i:04d}", "original": orig[:-1] + tag + orig[-1],
            "counterfactual": cf_i, "swapped_terms": swaps, "n_swaps": len(swaps), "direction": direction,
            "applied": True,
        })
    return rows


def write_cda_table(path: Path, n: int, markers: dict[int, str] | None = None, unapplied: int = 0) -> Path:
    import pandas as pd

    rows = cda_rows(n, markers)
    for j in range(unapplied):
        rows.append({"id": f"noswap{j}", "source_id": f"ns{j}", "original": "The weather was fine.",
                     "counterfactual": "The weather was fine.", "swapped_terms": [], "n_swaps": 0,
                     "direction": "none", "applied": False})
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def openai_config(base_url: str, run_dir: Path, **augment):
    """A Config for the openai backend against a test server, with short timeouts and fast backoff."""
    from context_cda.config import Config

    aug = {"backend": "openai", "model": "fake-model", "few_shot": False, "shard_size": 4, "batch_size": 4,
           "max_retries": 2,
           "openai": {"base_url": base_url, "timeout_s": 0.5, "max_attempts": 4, "backoff_base_s": 0.01,
                      "backoff_max_s": 0.05, "concurrency": 4}}
    for k, v in augment.items():
        if k == "openai":
            aug["openai"].update(v)
        else:
            aug[k] = v
    return Config.model_validate({"run": {"run_dir": str(run_dir)}, "augment": aug})
