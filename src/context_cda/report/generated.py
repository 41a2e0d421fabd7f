"""The report's "Generated data" section: what the augment stage accepted and why it rejected the rest, and
which contextual counterfactuals the target models were most and least certain about.

* acceptance by reason: the augment manifest's counts (every reason of a rejected item counts; a retried item
  counts in every attempt it failed), and how many items each attempt accepted;
* examples, chosen fairly: a seeded random sample of the accepted rephrasings (not the first ones), and a seeded
  random rejected output for each reason, with every reason of its rejection;
* per target: the semantic-entropy histogram (the filter's cut marked for each k it wrote a corpus for) beside
  the highest- and lowest-entropy items.

:func:`collect` reads the augment step's folder and the entropy and filter fan-in folders (any may be missing:
the section shows what there is) and draws the histograms; :func:`markdown` renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import layout as L
from .. import schemas as S
from ..errors import InputError
from ..io import read_json

EXAMPLES = 3  # accepted examples shown (a seeded random sample)
REJECTED_PER_REASON = 1
EXTREMES = 3
_MAX_CHARS = 180


@dataclass
class TargetEntropy:
    target: str
    n: int
    highest: list[dict[str, Any]]
    lowest: list[dict[str, Any]]
    histogram: Path | None


@dataclass
class GeneratedData:
    summary: dict[str, Any] = field(default_factory=dict)
    accepted_examples: list[dict[str, str]] = field(default_factory=list)
    rejected_examples: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    entropy: list[TargetEntropy] = field(default_factory=list)
    seed: int = 0  # of the random choice of examples
    n_accepted: int = 0
    n_rejected: int = 0

    @property
    def empty(self) -> bool:
        return not (self.summary or self.entropy)


def _short(text: Any) -> str:
    t = " ".join(str(text or "").split())
    return t if len(t) <= _MAX_CHARS else t[: _MAX_CHARS - 1] + "…"


def _augment_part(step: Path, g: GeneratedData) -> None:
    import pandas as pd

    try:
        manifest = read_json(step / "manifest.json")
    except InputError:
        return
    g.summary = dict(manifest.get("summary") or {})
    if (step / L.AUGMENTED_FILE).is_file():
        acc = pd.read_parquet(step / L.AUGMENTED_FILE)
        g.n_accepted = len(acc)
        pick = acc.sample(n=min(EXAMPLES, len(acc)), random_state=g.seed) if len(acc) else acc
        g.accepted_examples = [{"input": _short(r[S.COUNTERFACTUAL]), "output": _short(r[S.AUGMENTED]),
                                "attempts": str(r.get(S.ATTEMPTS, ""))} for _, r in pick.iterrows()]
    if (step / "rejected.parquet").is_file():
        _rejected_examples(pd.read_parquet(step / "rejected.parquet"), g)


def _rejected_examples(rej: Any, g: GeneratedData) -> None:
    """A seeded random rejected output per first reason (every reason of the item shown with it)."""
    from ..augment import clean

    g.n_rejected = len(rej)
    shuffled = rej.sample(frac=1.0, random_state=g.seed) if len(rej) else rej
    for _, r in shuffled.iterrows():
        reason = str(r.get(S.REASON) or "")
        kind = reason.split(";")[0].split(":")[0].strip() or "unknown"
        shown = g.rejected_examples.setdefault(kind, [])
        if len(shown) < REJECTED_PER_REASON:
            raw = r.get(S.RAW_OUTPUT)
            shown.append({"input": _short(r.get(S.COUNTERFACTUAL)),
                          "output": _short(clean(raw) if isinstance(raw, str) else ""),
                          "reason": _short(reason)})
    g.rejected_examples = dict(sorted(g.rejected_examples.items()))


def _histogram(scores: Any, target: str, ks: Sequence[float], out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=110)
    ax.hist(scores[S.SE].astype(float), bins=20, color="#4a7ab7")
    for k in ks:
        cut = float(scores[S.SE].quantile(1 - float(k) / 100))
        ax.axvline(cut, color="#c0392b", linestyle="--", linewidth=1, label=f"top {k:g} % dropped above")
    ax.set_xlabel("semantic entropy")
    ax.set_ylabel("items")
    ax.set_title(f"{target}: semantic entropy of the contextual counterfactuals", fontsize=9)
    if ks:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / f"{''.join(c if c.isalnum() or c in '-_.' else '_' for c in target)}-se-hist.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def _filter_ks(filter_dir: Path | None, target: str) -> list[float]:
    """The k of every filtered corpus written for ``target`` (folders k30, k12.5, ...)."""
    if filter_dir is None:
        return []
    ks = []
    for p in sorted((filter_dir / target).glob("k*")):
        try:
            ks.append(float(p.name[1:]))
        except ValueError:
            continue
    return sorted(ks)


def _entropy_part(entropy_dir: Path, filter_dir: Path | None, out_dir: Path, g: GeneratedData) -> None:
    import pandas as pd

    for keys, folder in L.discover(entropy_dir, "entropy"):
        f = folder / L.SCORES_FILE
        if not f.is_file():
            continue
        scores = pd.read_parquet(f)
        if scores.empty or S.SE not in scores.columns:
            continue
        cols = [c for c in (S.ID, S.TEXT, S.SE, S.N_CLUSTERS) if c in scores.columns]
        ranked = scores.sort_values(S.SE, kind="stable")[cols]

        def rows(df: Any) -> list[dict[str, Any]]:
            return [{"text": _short(r.get(S.TEXT)), "se": float(r[S.SE]),
                     "clusters": int(r[S.N_CLUSTERS]) if S.N_CLUSTERS in r else None} for _, r in df.iterrows()]

        t = keys["target"]
        g.entropy.append(TargetEntropy(t, int(len(scores)), rows(ranked.tail(EXTREMES).iloc[::-1]),
                                       rows(ranked.head(EXTREMES)),
                                       _histogram(scores, t, _filter_ks(filter_dir, t), out_dir)))


def collect(augment_dir: Path | str | None, entropy_dir: Path | str | None, filter_dir: Path | str | None,
            out_dir: Path | str, seed: int = 0) -> GeneratedData:
    """Read what the augment, entropy and filter steps left (their folders: ``<run>/augment``, ``<run>/entropy``,
    ``<run>/filter``); draw the SE histograms into ``out_dir``. ``seed`` draws the examples shown."""
    g = GeneratedData(seed=seed)
    if augment_dir is not None:
        _augment_part(Path(augment_dir), g)
    if entropy_dir is not None and Path(entropy_dir).is_dir():
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        _entropy_part(Path(entropy_dir), Path(filter_dir) if filter_dir else None, Path(out_dir), g)
    return g


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _acceptance_rows(s: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    per = s.get("reasons_per_attempt") or {}
    attempts = sorted(per, key=int)
    header = ["Reason", "Rejected items", *[f"Attempt {a}" for a in attempts]]
    final = s.get("reject_reasons") or {}
    kinds = list(dict.fromkeys([*final, *(k for a in attempts for k in per[a])]))
    body = [[k, str(final.get(k, 0)), *[str(per[a].get(k, 0)) for a in attempts]] for k in kinds]
    return header, body


def markdown(g: GeneratedData) -> str:
    """The section as Markdown ('' when the run has no generated data)."""
    if g.empty:
        return ""
    lines = ["## Generated data", ""]
    s = g.summary
    if s:
        items, acc = int(s.get("items", 0)), int(s.get("accepted", 0))
        share = f" ({100 * acc / items:.0f} %)" if items else ""
        lines += [f"The augment stage rephrased {items} counterfactuals with `{s.get('gen_model')}` (prompt "
                  f"{s.get('prompt_version')}, meaning judge: {(s.get('review') or {}).get('meaning', 'off')}): "
                  f"{acc} accepted{share}, {s.get('rejected', 0)} rejected (rows in: {s.get('rows_in', items)}). "
                  "Accepted per attempt: "
                  + (", ".join(f"{k}: {v}" for k, v in (s.get("accepted_per_attempt") or {}).items()) or "–")
                  + ".", ""]
        header, body = _acceptance_rows(s)
        if body:
            lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
            lines.append("")
    if g.accepted_examples:
        lines += [f"Accepted examples: {len(g.accepted_examples)} drawn at random (seed {g.seed}) from the "
                  f"{g.n_accepted} accepted; every one passed the review, which checks names, numbers, genders, form "
                  "and (with a meaning judge) meaning, not every fact:", "",
                  "| Counterfactual (input) | Rephrasing (accepted) | Attempt |", "|---|---|---:|"]
        lines += [f"| {_cell(e['input'])} | {_cell(e['output'])} | {e.get('attempts') or '–'} |"
                  for e in g.accepted_examples]
        lines.append("")
    if g.rejected_examples:
        lines += [f"Rejected examples: one drawn at random (seed {g.seed}) for each first reason, from the "
                  f"{g.n_rejected} rejected, with every reason of its rejection:", "",
                  "| Reasons | Counterfactual (input) | Output (cleaned) |", "|---|---|---|"]
        for exs in g.rejected_examples.values():
            lines += [f"| {_cell(e['reason'])} | {_cell(e['input'])} | {_cell(e['output'])} |" for e in exs]
        lines.append("")
    for t in g.entropy:
        lines += [f"### Semantic entropy: {t.target} ({t.n} items)", ""]
        if t.histogram is not None:
            lines += [f"![{t.histogram.stem}]({t.histogram.name})", ""]
        for title, rows in (("Highest entropy (dropped first)", t.highest), ("Lowest entropy", t.lowest)):
            lines += [f"{title}:", "", "| SE | Clusters | Text |", "|---:|---:|---|"]
            lines += [f"| {r['se']:.3f} | {r['clusters'] if r['clusters'] is not None else '–'} | {_cell(r['text'])} |"
                      for r in rows]
            lines.append("")
    return "\n".join(lines)
