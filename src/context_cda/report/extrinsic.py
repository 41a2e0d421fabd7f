"""Table 2 of the report (extrinsic bias, downstream quality, next-token balance): its columns, the chance
baselines beside the next-token numbers, and a mark on every number computed under a deviation from the
published protocol (the ``deviations`` list in each benchmark's ``aggregate.json``,
:mod:`context_cda.evaluate.extrinsic.deviations`), so that no one reads a toy figure as an effect.

The marks are letters after the number (``56.25<sup>H,N</sup>``), explained under each table; ``table2.csv``
carries them machine-readably in its ``deviations`` column.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# flat metric -> column title; a column shows when any row has it (chance baselines next to what they calibrate)
EXTRINSIC: dict[str, str] = {
    "glue_sst2_acc": "SST-2", "glue_rte_acc": "RTE", "glue_qnli_acc": "QNLI",
    "biasbios_acc": "Bios acc", "biasbios_tpr_gap_rms": "Bios TPR-gap RMS",
    "stsb_pearson": "STS-B r", "stsb_diff": "STS diff", "stsb_gt_0_1": "STS >0.1", "stsb_gt_0_3": "STS >0.3",
    "stsb_gt_0_5": "STS >0.5", "stsb_gt_0_7": "STS >0.7",
    "nli_bias_dev_acc": "NLI acc", "nli_bias_net_neutral": "NN", "nli_bias_fraction_neutral": "FN",
    "nli_bias_tau_0_5": "T:0.5", "nli_bias_nn_gap": "NN m-f",
    "next_token_imbalance": "NT imbalance", "next_token_chance_imbalance": "NT imbalance (chance)",
    "next_token_male_share": "NT male share", "next_token_chance_male_share": "NT male share (chance)",
    "next_token_male_share_std": "NT share std",
    "winogender_acc": "WG acc", "winogender_gap": "WG he−she", "winobias_gap1": "WB gap 1", "winobias_gap2": "WB gap 2",
}
NOTE = (
    "Accuracies (%) and STS-B r (x100): higher is better. Bios TPR-gap RMS, STS diff (STS-B 0-5 scale) and the "
    "shares of pairs above 0.1/0.3/0.5/0.7: lower is better (0 ideal). NN, FN, T:0.5 (NLI-Bias neutrality): higher "
    "is better; NN m-f is best at 0. NT (next-token): the measured imbalance and male share of the top-k gender "
    "words, each beside its chance value, what a model with no gender preference shows with the same candidate "
    "words and k (docs/evaluation.md); compare with the chance value, not with 0 and 0.5. WG (WinoGender) accuracy "
    "is better higher, its he−she gap and WB's (WinoBias) pro − anti gaps are best at 0; their intervals and paired "
    "differences are in the WinoGender and WinoBias section."
)
# deviation code -> (mark, legend)
MARKS: dict[str, tuple[str, str]] = {
    "dev_holdout": ("H", "the head trained on part of the dev set (no train file) and was scored on the rest"),
    "small_sample": ("N", "a small set (< 1000 training examples or bias probes, < 200 scored examples)"),
    "subsample": ("S", "a seeded sample of the benchmark's set, not all of it"),
    "near_chance": ("C", "the head scores near chance on its own task, so its bias numbers say nothing"),
    "linear_probe": ("P", "a linear probe on the frozen model, not full fine-tuning"),
    "other_train_set": ("T", "the NLI head was not trained on SNLI (Dev et al.'s training set): what it was "
                        "trained on is said below"),
}
_DETAILED = ("near_chance", "dev_holdout", "other_train_set")  # listed under the table with their numbers


def read_deviations(folders: Mapping[tuple[str, str], Path]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """``{(target, model): [deviation, ...]}`` from each evaluation folder's ``aggregate.json`` (every benchmark's
    ``deviations`` list; folders without one are skipped)."""
    from ..errors import InputError
    from ..io import read_json

    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key, folder in folders.items():
        try:
            data = read_json(Path(folder) / "aggregate.json")
        except InputError:
            continue
        benches = data.get("benchmarks") if isinstance(data, dict) else None
        devs = [d for b in (benches or {}).values() if isinstance(b, dict) for d in b.get("deviations") or []
                if isinstance(d, dict) and d.get("code") in MARKS]
        if devs:
            out[key] = devs
    return out


def marks_by_metric(devs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{flat metric: [mark letters]}`` (in :data:`MARKS` order, each once)."""
    order = list(MARKS)
    codes: dict[str, set[str]] = {}
    for d in devs:
        for m in d.get("metrics") or []:
            codes.setdefault(m, set()).add(d["code"])
    return {m: [MARKS[c][0] for c in sorted(cs, key=order.index)] for m, cs in codes.items()}


def with_marks(t2: pd.DataFrame, devs: Mapping[tuple[str, str], list[dict[str, Any]]]) -> pd.DataFrame:
    """Table 2 with a ``deviations`` column (``"metric:HN; metric:C"``, machine-readable for table2.csv) and the
    marks and deviation details in ``attrs`` for :func:`cell` and :func:`notes`."""
    t2 = t2.copy()
    marks = {key: marks_by_metric(d) for key, d in devs.items()}
    t2["deviations"] = [
        "; ".join(f"{m}:{''.join(ls)}" for m, ls in sorted(marks.get((r.target, r.model), {}).items())
                  if m in t2.columns)
        for r in t2.itertuples()
    ]
    t2.attrs["marks"] = marks
    t2.attrs["deviations"] = {key: list(v) for key, v in devs.items()}
    return t2


def _fmt(v: Any) -> str:
    """Percent-scale values with 2 decimals, fractions with 3."""
    if v is None or v != v:
        return "–"
    return f"{float(v):.2f}" if abs(float(v)) >= 1.5 else f"{float(v):.3f}"


def cell(t2: pd.DataFrame, row: Any, metric: str, fmt: str = "md") -> str:
    """The formatted value of ``metric`` in ``row`` with its deviation marks (``fmt``: md or html)."""
    text = _fmt(row[metric])
    letters = t2.attrs.get("marks", {}).get((row["target"], row["model"]), {}).get(metric, [])
    if fmt == "html":
        text = html.escape(text)
    if letters and text != "–":
        text += f"<sup>{','.join(letters)}</sup>"
    return text


def notes(t2: pd.DataFrame, target: str, fmt: str = "md", label=str) -> list[str]:
    """Lines under a target's table: the legend of the marks used and the details of the deviations that decide
    how a number reads (near chance, dev hold-out, another NLI training set), each once."""
    keys = [(target, m) for m in t2[t2["target"] == target]["model"]]
    devs = [(k, d) for k in keys for d in t2.attrs.get("deviations", {}).get(k, [])]
    used = sorted({d["code"] for _, d in devs}, key=list(MARKS).index)
    if not used:
        return []
    legend = "Marks: " + "; ".join(f"{MARKS[c][0]} = {MARKS[c][1]}" for c in used) + "."
    details: dict[str, list[str]] = {}
    for (_, model), d in devs:
        if d["code"] in _DETAILED:
            details.setdefault(d["detail"], []).append(label(model))
    items = [f"{', '.join(dict.fromkeys(models))}: {text}" for text, models in details.items()]
    if fmt == "html":
        e = html.escape
        return [f"<p>{e(legend)}</p>"] + ([f"<ul>{''.join(f'<li>{e(i)}</li>' for i in items)}</ul>"] if items else [])
    return [legend, ""] + ([*(f"- {i}" for i in items), ""] if items else [])
