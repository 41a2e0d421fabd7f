"""The evidence in the report: Table 1's intervals and direction marks, per-seed rows with mean ± std, and the
paired comparisons of every arm with vanilla and with every other arm.

* Cells are ``value [low, high]``: the bootstrap interval at ``evaluate.bootstrap.level`` of the metric (from the
  evaluate step's aggregate, else the per-epoch ``metrics.csv``; both carry ``<metric>_ci_low/_ci_high``).
* ▲ / ▼ on SS, CS and LMS are the promotion gate's own judgement (:func:`context_cda.tracking.gate.judge`, the
  function the register step decides with, on the same per-item evidence and policy): against vanilla, SS and CS
  ▲ when less biased (a significant shift toward 50, Holm-corrected over the metrics vanilla is biased on, not
  crossing 50 as far as vanilla was), ▼ when more biased on evidence (shifted away from 50, significantly farther
  past 50 than vanilla's distance, or - where vanilla is within noise - moved significantly across 50 to lie
  farther from it); LMS ▲ when significantly higher, ▼ when significantly lower and not non-inferior. Between two arms the earlier one is the reference (the champion's rules,
  margin 0). ICAT, which the gate does not decide on, is marked by its paired difference (higher is better; a
  benchmark added later adds its directed keys to :data:`DIRECTION`). ΔSS and ΔCS, which have no better side, get a
  ``*`` when significant.
* With several training seeds, Table 1's arm row is the first seed's (the registered model), and one row per
  seed and a ``mean ± std`` row follow it (std over seeds, ddof 1); the mark then sits on the mean row, as the
  comparison is of the seeds' pooled evidence, not of the first seed alone.
* The paired comparisons use the per-item scores (:mod:`context_cda.tracking.evidence`): an arm's seeds pooled
  (each metric the mean of the seeds' metrics on the same resampled items), vanilla's from its evaluate step or
  the epoch-0 predictions.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config
    from ..evaluate.stats import Difference
    from ..tracking.gate import Judgement
    from ..tracking.promotion import Decision, PromotionPolicy

#: Table 1's metrics the gate judges (their marks are its outcomes); the others are marked by a paired difference
GATE_MARKED = ("stereoset_ss", "crows_cs", "stereoset_lms")
MARKED_BY = {"stereoset_icat": "icat"}
#: the paired-comparison table's columns: (benchmark, key, title); a key of the gate (``stereoset_ss`` ...) shows
#: the gate's statistic (the shift toward 50, the LMS difference) with the gate's mark
COLUMNS = (("stereoset", "ss", "ΔSS"), ("stereoset", "stereoset_ss", "SS shift toward 50"),
           ("stereoset", "stereoset_lms", "ΔLMS"), ("stereoset", "icat", "ΔICAT"), ("crows", "cs", "ΔCS"),
           ("crows", "crows_cs", "CS shift toward 50"))
#: paired difference key -> (+1: higher is better, -1: lower is better; its name; the plain words for better, for
#: worse), for the metrics the gate does not judge. A key without an entry (the signed ΔSS, ΔCS) has no direction:
#: which way is better depends on the side of 50 a model is on. Benchmarks added later add their keys here (the
#: findings are written from this table and from the gate's judgements).
DIRECTION: dict[str, tuple[int, str, str, str]] = {
    "icat": (+1, "ICAT", "higher ICAT", "lower ICAT"),
}
BETTER, WORSE = "▲", "▼"  # better / worse: the gate's judgement, or a significant difference
#: the gate's outcome -> its mark
OUTCOME_MARK = {"better": f" {BETTER}", "worse": f" {WORSE}"}


def direction(key: str, d: Difference | None) -> str:
    """``better``, ``worse`` (significant, in ``key``'s direction), ``significant`` (no direction), or ``""``."""
    if d is None or not d.significant:
        return ""
    if key not in DIRECTION:
        return "significant"
    return "better" if d.point * DIRECTION[key][0] > 0 else "worse"


def mark_of(key: str, d: Difference | None) -> str:
    """The cell mark of a difference: ▲ better, ▼ worse, * significant without a direction, "" otherwise."""
    return {"better": f" {BETTER}", "worse": f" {WORSE}", "significant": "*"}.get(direction(key, d), "")


def gate_mark(judgement: Judgement | None, metric: str) -> str:
    """The mark of a gate metric (SS, CS, LMS): the gate's outcome, ▲ better, ▼ worse, "" otherwise."""
    if judgement is None:
        return ""
    return OUTCOME_MARK.get(judgement.outcomes().get(metric, ""), "")


@dataclass
class Evidence:
    """What the report shows beyond the point values: per (target, a, b) the paired differences and the gate's
    judgement of a against b (b: vanilla or an earlier arm)."""

    level: float
    seeds: list[int]
    per_seed: dict[tuple[str, str], dict[int, dict[str, float]]] = field(default_factory=dict)  # (target, arm)
    # (target, a, b) -> {key: Difference}; b is "vanilla" or another arm
    pairs: dict[tuple[str, str, str], dict[str, Difference]] = field(default_factory=dict)
    judgements: dict[tuple[str, str, str], Judgement] = field(default_factory=dict)
    # (target, arm) -> the gate's decision against vanilla (context_cda.tracking.promotion.decide, no champion):
    # the verdict and reasons the report quotes for an arm the register step did not decide
    decisions: dict[tuple[str, str], Decision] = field(default_factory=dict)
    # (target, model) -> its per-item evidence (an arm's seeds pooled), the gate's benchmarks and the reported ones
    models: dict[tuple[str, str], Any] = field(default_factory=dict)

    def judgement(self, target: str, a: str, b: str = L.VANILLA) -> Judgement | None:
        return self.judgements.get((target, a, b))

    def mark(self, target: str, model: str, metric: str) -> str:
        """▲ / ▼ on an arm's cell: the gate's judgement against vanilla (SS, CS, LMS), else the paired difference
        from vanilla, significantly better / worse."""
        if metric in GATE_MARKED:
            return gate_mark(self.judgement(target, model), metric)
        key = MARKED_BY.get(metric, "")
        return mark_of(key, self.pairs.get((target, model, L.VANILLA), {}).get(key))


# ------------------------------------------------------------------------------------------------ collecting


def _seed_metrics(finetune_df: pd.DataFrame, evaluations: Path | None) -> dict[tuple[str, str], dict[int, dict]]:
    """Per (target, arm), per seed: the evaluate step's flat metrics where present, else the last epoch's."""
    from ..errors import InputError
    from ..io import read_json

    out: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    for (target, arm, seed), g in finetune_df[finetune_df["epoch"] > 0].groupby(["target", "arm", "seed"]):
        last = g.sort_values("epoch").iloc[-1]
        out.setdefault((str(target), str(arm)), {})[int(seed)] = {
            k: float(v) for k, v in last.items() if k not in ("epoch", "arm", "target", "seed") and v == v}
    for keys, folder in L.discover(evaluations, "evaluate") if evaluations and evaluations.is_dir() else []:
        try:
            metrics = read_json(folder / L.AGGREGATE_FILE).get("metrics", {})
        except (InputError, AttributeError):
            continue
        slot = out.setdefault((keys["target"], keys["arm"]), {}).setdefault(int(keys["seed"]), {})
        slot.update({k: float(v) for k, v in metrics.items() if isinstance(v, int | float)})
    return out


def _models(folders: Mapping[str, Path], target: str, arms: list[str], seeds: list[int]) -> dict[str, Any]:
    """{vanilla / arm: its per-item evidence} of one target, found where the register step finds it (an arm's
    seeds pooled; a post-hoc arm's one evaluation)."""
    from ..tracking import evidence as E

    ev_dir, ft_dir = _of_target(folders.get("evaluations"), "evaluate", target), _of_target(
        folders["finetune"], "finetune", target)
    models: dict[str, E.Evidence] = {}
    read = (*E.BENCHMARKS, *E.REPORTED)
    van = E.vanilla_items_dir(ev_dir, ft_dir, target)
    if van is not None:
        models[L.VANILLA] = E.load([van], read)
    for arm in arms:
        found = {s: d for s in seeds if (d := E.model_items_dir(ev_dir, ft_dir, target, arm, s)) is not None}
        post = L.within(ev_dir, "evaluate", {"target": target}, "evaluate-posthoc", arm=arm) if ev_dir else None
        if found:
            models[arm] = E.load(found, read)
        elif post is not None and E.has_predictions(post):  # a post-hoc arm: one evaluation, no seeds
            models[arm] = E.load([post], read)
    return models


def compare(models: Mapping[str, Any], names: list[str], policy: PromotionPolicy, target: str
            ) -> tuple[dict[tuple[str, str, str], dict[str, Difference]], dict[tuple[str, str, str], Judgement]]:
    """Every model of ``names`` against every earlier one (vanilla first): the paired differences of every metric
    and the gate's judgement (:func:`context_cda.tracking.gate.judge`; against vanilla with the policy's margins,
    against an earlier arm with the champion's rules)."""
    from ..tracking import evidence as E
    from ..tracking.gate import CHAMPION, VANILLA, judge

    pairs: dict[tuple[str, str, str], dict[str, Difference]] = {}
    judgements: dict[tuple[str, str, str], Judgement] = {}
    for b, a in itertools.combinations([m for m in names if m in models], 2):  # a - b, b earlier
        diffs = E.paired_differences(models[a], models[b], policy.settings)
        if diffs:
            pairs[(target, a, b)] = diffs
            role = VANILLA if b == L.VANILLA else CHAMPION
            judgements[(target, a, b)] = judge(models[a], models[b], policy, role, b)
    return pairs, judgements


def decisions_of(models: Mapping[str, Any], names: list[str], policy: PromotionPolicy, target: str
                 ) -> dict[tuple[str, str], Decision]:
    """Each arm of ``names`` against vanilla as the gate decides it (:func:`context_cda.tracking.promotion.decide`,
    no champion): the verdict, its note, every reason in numbers and the detectable shifts, from the one function
    the register step decides with."""
    from ..tracking.promotion import decide

    van = models.get(L.VANILLA)
    if van is None:
        return {}
    return {(target, a): decide(models[a], None, van, policy) for a in names if a != L.VANILLA and a in models}


def _of_target(parent: Path | None, step: str, target: str) -> Path | None:
    """The fan-in folder of ``step`` for one target inside the fan-in folder of all targets (``parent``)."""
    if parent is None:
        return None
    top = L.fanin_dir(Path("/"), step, {})
    return Path(parent) / L.fanin_dir(Path("/"), step, {"target": target}).relative_to(top)


def collect(config: Config, folders: Mapping[str, Path], finetune_df: pd.DataFrame) -> Evidence:
    """The report's evidence from the run's finetune and evaluate folders, judged with the register step's
    policy (``tracking.promotion``, ``evaluate.bootstrap``, ``evaluate.bias_type``)."""
    from ..arms import for_target
    from ..tracking.promotion import PromotionPolicy

    policy = PromotionPolicy.from_config(config.tracking.promotion, config.evaluate.bootstrap,
                                         config.evaluate.bias_type)
    seeds = list(config.train.seeds)
    ev = Evidence(level=policy.level, seeds=seeds)
    ev.per_seed = _seed_metrics(finetune_df, folders.get("evaluations"))
    targets = sorted({str(t) for t in finetune_df["target"].unique()})
    arms = [a for a in config.train.arms if any((t, a) in ev.per_seed for t in targets)]
    arms += sorted({a for _, a in ev.per_seed} - set(arms))
    arms += [a for t in targets for a in for_target(config, t, ("projection", "scoring", "published")) if a not in arms]
    for target in targets:
        models = _models(folders, target, arms, seeds)
        pairs, judgements = compare(models, [L.VANILLA, *arms], policy, target)
        ev.pairs.update(pairs)
        ev.judgements.update(judgements)
        ev.decisions.update(decisions_of(models, arms, policy, target))
        ev.models.update({(target, name): m for name, m in models.items()})
    return ev


# ------------------------------------------------------------------------------------------------ cells


def cell(values: Mapping[str, Any], metric: str, mark: str = "") -> str:
    """``61.20 [55.10, 67.30]*`` (the interval where the values carry one; – when the value is missing)."""
    v = values.get(metric)
    if v is None or v != v:
        return "–"
    lo, hi = values.get(f"{metric}_ci_low"), values.get(f"{metric}_ci_high")
    text = f"{float(v):.2f}"
    if lo is not None and hi is not None and lo == lo and hi == hi:
        text += f" [{float(lo):.2f}, {float(hi):.2f}]"
    return text + mark


def seed_rows(ev: Evidence, target: str, arm: str, metrics: list[str],
              marks: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """(label, cells) per seed and the ``mean ± std`` row (with ``marks``), when the arm has several seeds."""
    from ..evaluate.stats import mean_std

    per = ev.per_seed.get((target, arm), {})
    if len(per) < 2:
        return []
    rows = [(f"seed {s}", [cell(per[s], m) for m in metrics]) for s in sorted(per)]
    cells = []
    for m, mark in zip(metrics, marks or [""] * len(metrics), strict=True):
        mean, std, n = mean_std(per[s].get(m) for s in per)
        cells.append("–" if n == 0 else f"{mean:.2f} ± {std:.2f}{mark}")
    rows.append((f"mean ± std ({len(per)} seeds)", cells))
    return rows


def _diff_cell(key: str, d: Difference | None, mark: str | None = None) -> str:
    if d is None:
        return "–"
    return f"{d.point:+.2f} [{d.low:+.2f}, {d.high:+.2f}]" + (mark_of(key, d) if mark is None else mark)


def _gate_cell(j: Judgement | None, metric: str) -> str:
    """The gate's statistic of ``metric`` with the gate's mark: the shift toward 50 (SS, CS), the LMS difference."""
    if j is None:
        return "–"
    if metric in j.bias:
        return _diff_cell(metric, j.bias[metric].shift, gate_mark(j, metric))
    return _diff_cell(metric, j.lms.diff, gate_mark(j, metric)) if j.lms is not None else "–"


def comparison_rows(ev: Evidence, target: str, label) -> list[tuple[str, list[str]]]:
    rows = []
    for (t, a, b), diffs in ev.pairs.items():
        if t == target:
            j = ev.judgements.get((t, a, b))
            rows.append((f"{label(a)} − {label(b)}", [_gate_cell(j, k) if k.startswith(("stereoset_", "crows_"))
                                                      else _diff_cell(k, diffs.get(k)) for _, k, _ in COLUMNS]))
    return rows


GATE_WORDS = ("the promotion gate's own judgement ({fn}, on the same per-item evidence and policy as the register "
              "step): SS and CS {up} less biased (a significant paired shift toward 50, Holm-corrected over the "
              "metrics the reference is demonstrably biased on, not crossing 50 as far as the reference was), {down} "
              "more biased on evidence (shifted significantly away from 50, significantly farther past 50 than the "
              "reference's distance, or - where the reference is within noise - moved significantly across 50 to "
              "lie farther from it); LMS {up} significantly higher, {down} significantly lower{margin}")


def gate_words(level: float, margin: str) -> str:
    return GATE_WORDS.format(fn="`context_cda.tracking.gate.judge`", up=BETTER, down=WORSE, margin=margin) + (
        f"; ICAT {BETTER} / {WORSE} a paired difference significant at {level:.0%}, higher / lower")


def note(ev: Evidence) -> str:
    return (f"Cells: value [low, high], the {ev.level:.0%} seeded bootstrap interval (StereoSet resampled within "
            f"target terms, CrowS over pairs). {BETTER} / {WORSE} on an arm against vanilla: "
            + gate_words(ev.level, " and not non-inferior (tracking.promotion.lms_delta)") + ". No mark: neither "
            "shown (the Findings say how small a shift this run could have shown). With several seeds the arm row is "
            "the first seed's (the registered model), followed by each seed and the mean ± std over seeds; the mark "
            "then sits on the mean row (the comparison pools the seeds).")


# ------------------------------------------------------------------------------------------------ sections


def markdown(ev: Evidence, targets: list[str], label) -> list[str]:
    """The paired-comparison section (Markdown lines)."""
    lines = ["## Paired comparisons", "",
             f"Differences a − b on the items both models were scored on, with the {ev.level:.0%} paired bootstrap "
             "interval; the shift toward 50 is b's side of 50 times (b − a), the statistic the promotion gate decides "
             f"on. Marks: {gate_words(ev.level, '')} (against vanilla with the policy's margins, against an earlier "
             "arm with the champion's rules); * on ΔSS and ΔCS (no better side: that depends on the side of 50 a "
             "model is on): the interval excludes 0. No mark: no difference shown. An arm trained with several seeds "
             "enters with its seeds' pooled per-item scores.", ""]
    for target in targets:
        rows = comparison_rows(ev, target, label)
        if not rows:
            continue
        titles = [t.replace("|", "\\|") for _, _, t in COLUMNS]  # a | inside a Markdown cell ends it
        lines += [f"### {target}", "", "| a − b | " + " | ".join(titles) + " |",
                  "|---|" + "---:|" * len(COLUMNS)]
        lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
        lines.append("")
    return lines if len(lines) > 5 else []


def comparisons_frame(ev: Evidence) -> pd.DataFrame:
    """``comparisons.csv``: target, a, b, metric, diff, ci_low, ci_high, p, n, significant (a - b), and for the
    gate's metrics (``stereoset_ss`` and ``crows_cs``: the shift toward 50; ``stereoset_lms``) its outcome, the
    reference's regime, the sign-flip and Holm-adjusted p-values and the detectable shift."""
    import pandas as pd

    rows = [{"target": t, "a": a, "b": b, "metric": k, "diff": d.point, "ci_low": d.low, "ci_high": d.high,
             "p": d.p, "n": d.n, "significant": d.significant}
            for (t, a, b), diffs in ev.pairs.items() for k, d in diffs.items()]
    for (t, a, b), j in ev.judgements.items():
        for m, c in j.bias.items():
            d = c.shift
            rows.append({"target": t, "a": a, "b": b, "metric": m, "statistic": "shift toward 50", "diff": d.point,
                         "ci_low": d.low, "ci_high": d.high, "p": d.p, "n": d.n, "significant": d.significant,
                         "outcome": c.outcome, "regime": c.regime, "sign_test_p": c.sign.p, "p_holm": c.p_holm,
                         "detectable_shift": c.detectable})
        if j.lms is not None:
            d = j.lms.diff
            rows.append({"target": t, "a": a, "b": b, "metric": "stereoset_lms", "statistic": "LMS difference",
                         "diff": d.point, "ci_low": d.low, "ci_high": d.high, "p": d.p, "n": d.n,
                         "significant": d.significant, "outcome": j.lms.outcome, "p_holm": j.lms.p_holm})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ Table 1


def _rows(t1: pd.DataFrame, ev: Evidence | None, target: str, metrics: list[str], label, published=None):
    """(model label, epoch text, cells) of one target's Table 1: each row, its seeds' rows, the paper's published
    values of the row (``published``: (config, values)), labelled as such; then the paper's rows for the target's
    model that this run did not measure (e.g. a published checkpoint it did not score)."""
    from .baselines import published_row, published_rows

    measured = set()
    for _, r in t1[t1["target"] == target].iterrows():
        model = str(r["model"])
        measured.add(model)
        marks = [ev.mark(target, model, m) if ev and model != L.VANILLA else "" for m in metrics]
        several = ev is not None and len(ev.per_seed.get((target, model), {})) > 1
        first = [""] * len(metrics) if several else marks
        epoch = "–" if r["epoch"] is None or r["epoch"] != r["epoch"] else str(int(r["epoch"]))
        note_text = r.get("note") if "note" in r else None
        if isinstance(note_text, str) and note_text:
            yield label(model), epoch, [note_text, *[""] * (len(metrics) - 1)]
        else:
            yield label(model), epoch, [cell(r, m, k) for m, k in zip(metrics, first, strict=True)]
        for name, cells in seed_rows(ev, target, model, metrics, marks) if ev else []:
            yield f"{label(model)}, {name}", "", cells
        quoted = published_row(published[0], published[1], target, model) if published else None
        if quoted:  # a cell the paper's table does not give here (or that is not sourced) says so: n/a
            yield f"{label(model)}, published (paper)", "", [cell(quoted, m) if m in quoted else "n/a" for m in metrics]
    for model, quoted in (published_rows(published[0], published[1], target) if published else {}).items():
        if model not in measured:
            yield (f"{label(model)}, published (paper; not run here)", "",
                   [cell(quoted, m) if m in quoted else "n/a" for m in metrics])


def table1_markdown(t1: pd.DataFrame, ev: Evidence | None, metrics: list[str], label, published=None) -> list[str]:
    lines = [note(ev), ""] if ev else []
    for target in sorted(t1["target"].unique()):
        lines += [f"### {target}", "", "| Model | Epoch | SS | LMS | ICAT | CS |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {name} | {epoch} | " + " | ".join(cells) + " |"
                  for name, epoch, cells in _rows(t1, ev, str(target), metrics, label, published)]
        lines.append("")
    if published and published[1].get("source"):
        lines += [f"Published values: {published[1]['source']}; a row appears where the paper reports this target's "
                  "model, n/a where it gives no sourced value for the cell.", ""]
    return lines
