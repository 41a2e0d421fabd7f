"""The ``cda`` stage: swap gendered words in every ingested sentence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..config import Config
from ..io import (
    read_table,
    require_columns,
    require_rows,
    stable_id,
    write_rejected,
    write_table,
)
from ..layout import COUNTERFACTUALS_FILE
from .lexicon import load_lexicon, load_name_pairs
from .swap import Swapper, cds_decision

COLUMNS = [S.ID, S.SOURCE_ID, S.ORIGINAL, S.COUNTERFACTUAL, S.SWAPPED_TERMS, S.N_SWAPS, S.DIRECTION, "applied",
           S.SKIPPED_TERMS]


def attribute_lexicon(config: Config) -> Any:
    """The run attribute's lexicon: gender pairs (:class:`~.lexicon.Lexicon`) or n-ary groups
    (:class:`~.groups.GroupLexicon`)."""
    if config.run.attribute == "gender":
        return load_lexicon(config.lexicon)
    from .groups import load_groups

    return load_groups(config.run.attribute, config.lexicon)


def make_swapper(config: Config) -> Any:
    """The run attribute's swapper: :class:`~.swap.Swapper` (gender, names optional) or
    :class:`~.group_swap.GroupSwapper` (race, religion)."""
    if config.run.attribute != "gender":
        from .group_swap import GroupSwapper

        return GroupSwapper(attribute_lexicon(config), config.cda.mapping, config.cda.ambiguous, config.run.seed)
    names = None
    if config.cda.swap_names:
        if not config.cda.names_path:
            from ..errors import ConfigError

            raise ConfigError("cda.swap_names is true but cda.names_path is not set (a JSON list of name pairs).")
        names = load_name_pairs(config.cda.names_path)
    return Swapper(load_lexicon(config.lexicon), names=names, her_rule=config.cda.her_rule)


def counterfactual_rows(texts: list[str], ids: list[str], config: Config, swapper: Any) -> tuple[list, list]:
    """Swap each text (one row per counterfactual: gender's one, or one per other group); return (rows,
    rejected). Pure apart from the swapper: the benchmark times this."""
    if config.cda.mode == "neutral":
        return _neutral_rows(texts, ids, swapper)
    rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    mode = config.cda.mode
    seed, prob = config.run.seed, config.cda.cds_probability
    direction = swapper.direction
    for sid, text in zip(ids, texts, strict=True):
        cfs, skipped = swapper.counterfactuals(text, sid)
        left = [f"{w}: {why}" for w, why in skipped]
        if not cfs:
            why = f"no-swappable-term (left alone: {', '.join(left)})" if left else "no-swappable-term"
            rejected.append({S.ID: sid, S.TEXT: text, S.REASON: why})
            continue
        for cf in cfs:
            key = (sid, mode) if not cf.tag else (sid, mode, cf.tag)
            rows.append({
                S.ID: stable_id("cda", *key),
                S.SOURCE_ID: sid,
                S.ORIGINAL: text,
                S.COUNTERFACTUAL: cf.result.text,
                S.SWAPPED_TERMS: [f"{a}->{b}" for a, b in cf.result.swaps],
                S.N_SWAPS: len(cf.result.swaps),
                S.DIRECTION: direction(cf.result.swaps),
                "applied": mode != "cds" or cds_decision(":".join(key[:1] + key[2:]), seed, prob),
                S.SKIPPED_TERMS: left,
            })
    return rows, rejected


def _neutral_rows(texts: list[str], ids: list[str], swapper: Any) -> tuple[list, list]:
    """``cda.mode: neutral``: each text's lexicon-only neutral rewrite (:mod:`.neutral`); the gendered words it
    could not rewrite are listed (the cda boundary quarantines such rows)."""
    from .neutral import NeutralRewriter

    rewriter = NeutralRewriter(swapper.lexicon)
    rows, rejected = [], []
    for sid, text in zip(ids, texts, strict=True):
        res = rewriter.rewrite(text)
        if not res.swaps:
            rejected.append({S.ID: sid, S.TEXT: text, S.REASON: "no-swappable-term"})
            continue
        rows.append({S.ID: stable_id("cda", sid, "neutral"), S.SOURCE_ID: sid, S.ORIGINAL: text,
                     S.COUNTERFACTUAL: res.text, S.SWAPPED_TERMS: [f"{a}->{b}" for a, b in res.swaps],
                     S.N_SWAPS: len(res.swaps), S.DIRECTION: "neutral", "applied": True,
                     S.SKIPPED_TERMS: [f"{w}: no-neutral-form" for w in res.left]})
    return rows, rejected


def drop_eval_overlap(config: Config, rows: list[dict[str, Any]], rejected: list[dict[str, Any]]
                      ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The rows whose original and counterfactual hold no evaluation item (a swap can turn a corpus sentence into
    a benchmark candidate: :mod:`context_cda.evaluate.decontam`); the others go to ``rejected`` (reason eval-overlap)."""
    from ..evaluate.decontam import counted, index_for

    index = index_for(config)
    if index is None:
        return rows, {}
    keep, found = [], []
    for row in rows:
        m = index.match(row[S.COUNTERFACTUAL]) or index.match(row[S.ORIGINAL])
        if m is None:
            keep.append(row)
        else:
            found.append(m)
            rejected.append({S.ID: row[S.SOURCE_ID], S.TEXT: row[S.COUNTERFACTUAL], S.REASON: m.reason})
    return keep, counted(found)


def training_rows(df, mode: str):
    """What a CDA-trained model sees, one row per text (``id`` of the counterfactual row, ``text``, ``side``):
    two-sided = every distinct original plus every counterfactual that differs from it (the paper); one-sided and
    neutral = the counterfactuals (neutral: the rewrites); cds = the counterfactual where the seeded coin said swap (``applied``), else the
    original. The CDA arm's corpus and the stage summary both count these rows."""
    import pandas as pd

    ids = df[S.ID].astype(str)
    if mode == "two-sided":
        originals = pd.DataFrame({S.ID: ids, S.TEXT: df[S.ORIGINAL], "side": "original"})
        originals = originals.drop_duplicates(S.TEXT)
        changed = df[S.COUNTERFACTUAL] != df[S.ORIGINAL]
        cfs = pd.DataFrame({S.ID: ids[changed], S.TEXT: df[S.COUNTERFACTUAL][changed], "side": "counterfactual"})
        return pd.concat([originals, cfs], ignore_index=True)
    if mode in ("one-sided", "neutral"):
        return pd.DataFrame({S.ID: ids, S.TEXT: df[S.COUNTERFACTUAL], "side": "counterfactual"})
    if "applied" not in df.columns:
        from ..errors import InputError

        raise InputError("cda.mode=cds: the counterfactual table has no 'applied' column; rerun `ccda cda`.")
    applied = df["applied"].astype(bool)
    text = df[S.COUNTERFACTUAL].where(applied, df[S.ORIGINAL])
    return pd.DataFrame({S.ID: ids, S.TEXT: text, "side": applied.map({True: "counterfactual", False: "original"})})


def _left_alone(table, rejected: list[dict[str, Any]]) -> dict[str, int]:
    """How often each reason left an attribute word alone (``not-a-person``, ``name``, ``no-neutral-form``), once
    per sentence: over the counterfactual rows (by source) and the rejected ones."""
    seen: dict[str, list[str]] = {}
    for sid, terms in zip(table[S.SOURCE_ID], table[S.SKIPPED_TERMS], strict=True):
        seen.setdefault(str(sid), list(terms))
    c: Counter[str] = Counter(t.rsplit(": ", 1)[-1] for terms in seen.values() for t in terms)
    for r in rejected:
        if "(left alone: " in r[S.REASON]:
            c.update(t.rsplit(": ", 1)[-1] for t in r[S.REASON].split("(left alone: ", 1)[1].rstrip(")").split(", "))
    return dict(c.most_common())


def run_cda(config: Config, inputs: Mapping[str, Path] | None = None, out_dir: Path | None = None,
            **_: Any) -> dict[str, Any]:
    import pandas as pd

    from ..stages import resolve_io
    from ..steps import Counts, recorder

    inputs, out = resolve_io(config, "cda", inputs, out_dir)
    src = inputs["sentences"]
    rec = recorder(out)
    df = read_table(src)
    require_columns(df, {S.ID: "id", S.TEXT: "text"}, src)
    require_rows(df, src, "Nothing to swap: ingest kept no sentence (its rejected table says why).")
    swapper = make_swapper(config)
    with rec.timed("swap"):
        rows, rejected = counterfactual_rows(df[S.TEXT].tolist(), df[S.ID].tolist(), config, swapper)
    with rec.timed("decontaminate"):
        rows, overlaps = drop_eval_overlap(config, rows, rejected)
    table = pd.DataFrame(rows, columns=COLUMNS)
    out_file = write_table(table, out / COUNTERFACTUALS_FILE)
    rej_file = write_rejected(pd.DataFrame(rejected, columns=[S.ID, S.TEXT, S.REASON]), out)
    swapped = Counter(t.lower() for terms in table[S.SWAPPED_TERMS] for t in terms)
    summary = {
        "attribute": config.run.attribute,
        "mode": config.cda.mode,
        **({"mapping": config.cda.mapping, "ambiguous": config.cda.ambiguous}
           if config.run.attribute != "gender" else {}),
        "rows_in": len(df),
        "rows_out": len(table),
        "rows_rejected": len(rejected),
        "swaps": int(table[S.N_SWAPS].sum()) if len(table) else 0,
        "direction": dict(Counter(table[S.DIRECTION])) if len(table) else {},
        "training_texts": len(training_rows(table, config.cda.mode)) if len(table) else 0,
        "top_swapped_terms": dict(swapped.most_common(10)),
        "lexicon_issues": len(swapper.lexicon.issues),
        "left_alone": _left_alone(table, rejected),
        "eval_overlap": sum(overlaps.values()),
        "eval_overlap_by_benchmark": overlaps,
    }
    rec.finish(Counts(items_in=len(df), out=len(table), rejected=len(rejected)),
               outputs={"counterfactuals": out_file, "rejected": rej_file}, summary=summary)
    return summary
