"""The ``cda`` stage: swap gendered words in every ingested sentence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..config import Config
from ..io import StageRecorder, read_table, require_columns, stable_id, write_rejected, write_table
from .lexicon import load_lexicon, load_name_pairs
from .swap import Swapper, cds_decision

COLUMNS = [S.ID, S.SOURCE_ID, S.ORIGINAL, S.COUNTERFACTUAL, S.SWAPPED_TERMS, S.N_SWAPS, S.DIRECTION, "applied"]


def make_swapper(config: Config) -> Swapper:
    names = None
    if config.cda.swap_names:
        if not config.cda.names_path:
            from ..errors import ConfigError

            raise ConfigError("cda.swap_names is true but cda.names_path is not set (a JSON list of name pairs).")
        names = load_name_pairs(config.cda.names_path)
    return Swapper(load_lexicon(config.lexicon), names=names, her_rule=config.cda.her_rule)


def counterfactual_rows(texts: list[str], ids: list[str], config: Config, swapper: Swapper) -> tuple[list, list]:
    """Swap each text; return (rows, rejected). Pure apart from the swapper: the benchmark times this."""
    rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    mode = config.cda.mode
    seed, prob = config.run.seed, config.cda.cds_probability
    swap, direction = swapper.swap, swapper.direction
    for sid, text in zip(ids, texts, strict=True):
        res = swap(text)
        swaps = res.swaps
        if not swaps:
            rejected.append({S.ID: sid, S.TEXT: text, S.REASON: "no-swappable-term"})
            continue
        rows.append({
            S.ID: stable_id("cda", sid, mode),
            S.SOURCE_ID: sid,
            S.ORIGINAL: text,
            S.COUNTERFACTUAL: res.text,
            S.SWAPPED_TERMS: [f"{a}->{b}" for a, b in swaps],
            S.N_SWAPS: len(swaps),
            S.DIRECTION: direction(swaps),
            "applied": mode != "cds" or cds_decision(sid, seed, prob),
        })
    return rows, rejected


def training_texts(df, mode: str) -> list[str]:
    """The texts a CDA-trained model sees: two-sided = originals + counterfactuals; one-sided = counterfactuals;
    cds = the counterfactual where the coin said swap, else the original."""
    if mode == "two-sided":
        return list(df[S.ORIGINAL]) + list(df[S.COUNTERFACTUAL])
    if mode == "one-sided":
        return list(df[S.COUNTERFACTUAL])
    return [c if a else o for o, c, a in zip(df[S.ORIGINAL], df[S.COUNTERFACTUAL], df["applied"], strict=True)]


def run_cda(config: Config, inputs: Mapping[str, Path], out_dir: Path | None = None, **_: Any) -> dict[str, Any]:
    import pandas as pd

    src = Path(inputs.get("sentences") or config.run_dir() / "ingest" / S.INGEST_FILE)
    out = Path(out_dir) if out_dir else config.run_dir() / "cda"
    rec = StageRecorder(
        "cda", out, {"cda": config.cda.model_dump(), "lexicon": config.lexicon.model_dump(), "seed": config.run.seed},
        {"sentences": src},
    )
    df = read_table(src)
    require_columns(df, [S.ID, S.TEXT], src)
    swapper = make_swapper(config)
    with rec.timed("swap"):
        rows, rejected = counterfactual_rows(df[S.TEXT].tolist(), df[S.ID].tolist(), config, swapper)
    table = pd.DataFrame(rows, columns=COLUMNS)
    out_file = write_table(table, out / S.CDA_FILE)
    rej_file = write_rejected(pd.DataFrame(rejected, columns=[S.ID, S.TEXT, S.REASON]), out)
    swapped = Counter(t.lower() for terms in table[S.SWAPPED_TERMS] for t in terms)
    summary = {
        "mode": config.cda.mode,
        "rows_in": len(df),
        "rows_out": len(table),
        "rows_rejected": len(rejected),
        "swaps": int(table[S.N_SWAPS].sum()) if len(table) else 0,
        "direction": dict(Counter(table[S.DIRECTION])) if len(table) else {},
        "training_texts": len(training_texts(table, config.cda.mode)),
        "top_swapped_terms": dict(swapped.most_common(10)),
        "lexicon_issues": len(swapper.lexicon.issues),
    }
    rec.finish({"rows_in": len(df), "rows_out": len(table), "rows_rejected": len(rejected)},
               outputs={"counterfactuals": out_file, "rejected": rej_file}, summary=summary)
    return summary
