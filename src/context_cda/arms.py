"""The arms of a run, in one place: each arm's name, kind, corpus, model families, label and artifact.

An *arm* is one way of debiasing a target model; every arm is compared with the vanilla target on the same
benchmark items. Kinds:

* ``trained``: fine-tuned on a corpus with the same token budget (:mod:`context_cda.train`): ``cda`` (the
  validated counterfactuals), ``context-cda`` (the semantic-entropy filtered corpus at ``train.k``),
  ``context-cda-k<K>`` (another k), ``context-cda-nofilter`` (the validated augmented table), ``dropout``
  (the corpus's original sentences, with raised dropout: Webster et al. 2020 as McGill-NLP/bias-bench runs it),
  ``cda-neutral`` (the lexicon's gender-neutral rewrite of the validated counterfactuals' originals) and
  ``context-neutral`` (the generator's reviewed neutral rewrite, the ``neutral`` step's table); and any of them with
  a **dose**, ``<arm>-<N>k`` / ``<arm>-<N>M`` (``cda-4k``: the CDA corpus, fine-tuned on 4,000 tokens of it): the
  same arm on a token budget of its own instead of its budget group's, so that a run can fan one arm out over
  growing budgets (a dose-response curve, the report's "Dose response") through the ordinary stage table;
* ``projection``: post-hoc, no training; a matrix learnt from the run's corpus is applied to the model's last
  hidden states at scoring time: ``inlp`` (iterative nullspace projection, Ravfogel et al. 2020) and
  ``sentence-debias`` (the bias subspace of counterfactual sentence pairs, Liang et al. 2020). The ``debias``
  step writes the matrix (:mod:`context_cda.baselines`);
* ``scoring``: a change of the scoring itself: ``self-debias`` (Schick et al. 2021: the model's next-token
  distribution decayed where a debiasing prefix makes a token more likely);
* ``published``: a published debiased checkpoint (e.g. MABEL's BERT) named in ``baselines.published``, scored by
  the same benchmarks as every other row.

The stage table fans each step out over the arms of the kinds it handles (:data:`STEP_KINDS`); the report labels
rows with :func:`label`; the bad-input checks (:func:`check_family`) refuse an arm the target's family cannot
take before anything is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .errors import ConfigError
from .layout import BIAS_DIRECTION_FILE, PROJECTION_FILE

Kind = Literal["trained", "projection", "scoring", "published"]

#: arm names of train.arms: the trained, projection and scoring arms (published ones come from their own key); a
#: trained arm with a dose suffix (``cda-4k``, ``context-cda-k20-16k``, ``dropout-1.5M``) is that arm fine-tuned on a
#: token budget of its own, one point of a dose-response curve
ARM_PATTERN = re.compile(
    r"^(?:(?P<trained>cda|cda-neutral|context-neutral|context-cda|context-cda-nofilter|"
    r"context-cda-k(?P<k>\d+(?:\.\d+)?)|dropout)(?:-(?P<dose>\d+(?:\.\d+)?)(?P<unit>[kM]))?|"
    r"inlp|sentence-debias|self-debias)$"
)
ARM_HELP = ("cda, cda-neutral, context-cda, context-cda-nofilter, context-cda-k<K> (0 < K < 100), context-neutral, "
            "dropout, inlp, sentence-debias or self-debias; a trained arm with a token dose, <arm>-<N>k or "
            "<arm>-<N>M (cda-4k: CDA on 4,000 tokens)")
#: a dose suffix's unit -> tokens
DOSE_UNITS = {"k": 1_000, "M": 1_000_000}
#: the arms that rewrite gendered words into neutral ones (gender runs only): the lexicon's rewrite of the validated
#: counterfactuals' originals, and the generator's reviewed rewrite (the neutral step's table)
NEUTRAL_ARMS = ("cda-neutral", "context-neutral")
LM_FAMILIES = ("masked", "causal")
ALL_FAMILIES = ("masked", "causal", "seq2seq")


@dataclass(frozen=True)
class Arm:
    """What one arm is. ``corpus``: the table a trained arm reads (cda | augmented | filtered | original);
    ``k``: the filtered corpus's k; ``artifact``: the file a projection arm's ``debias`` step writes."""

    name: str
    kind: Kind
    label: str
    families: tuple[str, ...] = ALL_FAMILIES
    corpus: str | None = None
    k: float | None = None
    artifact: str | None = None
    tokens: int | None = None  # a dose arm's own token budget (``cda-4k``: 4000); None: its budget group's
    base: str | None = None  # a dose arm's arm without the dose (``cda``)

    @property
    def baseline(self) -> bool:
        """A comparison arm of train.arms (not the method or its ablations): ``baselines.targets`` limits these to
        some targets (a published checkpoint belongs to its own target already)."""
        return self.kind in ("projection", "scoring") or self.corpus == "original"

    @property
    def trained(self) -> bool:
        return self.kind == "trained"

    @property
    def budget_group(self) -> str:
        """The trained arms that share one token budget: the swapping arms (CDA, Context-CDA and its cuts,
        dropout) and, apart, the neutral-rewrite arms, so a small neutral table does not shrink the others'. A dose
        arm is a group of its own: its budget is its dose."""
        if self.tokens is not None:
            return f"dose:{self.name}"
        return "neutral" if self.name in NEUTRAL_ARMS else "swap"

    @property
    def posthoc(self) -> bool:
        """No fine-tuning: evaluated by the ``evaluate-posthoc`` step, not per epoch."""
        return self.kind != "trained"


_FIXED: dict[str, Arm] = {
    "cda": Arm("cda", "trained", "CDA", corpus="cda"),
    "context-cda-nofilter": Arm("context-cda-nofilter", "trained", "Context-CDA (no filter)", corpus="augmented"),
    "cda-neutral": Arm("cda-neutral", "trained", "Neutral (lexicon)", corpus="cda-neutral"),
    "context-neutral": Arm("context-neutral", "trained", "Context-neutral", corpus="neutral"),
    "dropout": Arm("dropout", "trained", "Dropout", corpus="original"),
    "inlp": Arm("inlp", "projection", "INLP", LM_FAMILIES, artifact=PROJECTION_FILE),
    "sentence-debias": Arm("sentence-debias", "projection", "SentenceDebias", LM_FAMILIES,
                           artifact=BIAS_DIRECTION_FILE),
    "self-debias": Arm("self-debias", "scoring", "Self-Debias", LM_FAMILIES),
}

#: the arms' fixed names (context-cda-k<K> aside), for "did you mean" hints
ARM_NAMES = ("context-cda", *_FIXED)

#: which arm kinds each arm-fanned step of the stage table iterates
STEP_KINDS: dict[str, tuple[Kind, ...]] = {
    "finetune": ("trained",),
    "evaluate": ("trained",),
    "debias": ("projection",),
    "evaluate-posthoc": ("projection", "scoring", "published"),
}


def parse(arm: str, default_k: float = 30.0, published: Mapping[str, Any] | None = None) -> Arm:
    """The :class:`Arm` of a name: one of train.arms' names, or a published checkpoint's name
    (``published``: the names of ``baselines.published`` for the target, name -> model reference)."""
    if arm in _FIXED:
        return _FIXED[arm]
    m = ARM_PATTERN.match(arm)
    if m is not None and m.group("dose"):
        base = parse(m.group("trained"), default_k)
        return replace(base, name=arm, label=f"{base.label} ({m.group('dose')}{m.group('unit')} tokens)",
                       tokens=dose_tokens(m), base=base.name)
    if m is not None:
        k = float(m.group("k")) if m.group("k") else float(default_k)
        label = "Context-CDA" if not m.group("k") else f"Context-CDA (k={m.group('k')}%)"
        return Arm(arm, "trained", label, corpus="filtered", k=k)
    if published and arm in published:
        return Arm(arm, "published", published_label(arm), ALL_FAMILIES)
    raise ConfigError(f"train.arms: unknown arm {arm!r}; use {ARM_HELP}.")


def dose_tokens(m: re.Match[str]) -> int:
    """The tokens a dose suffix names (``4k`` -> 4000, ``1.5M`` -> 1500000)."""
    return round(float(m.group("dose")) * DOSE_UNITS[m.group("unit")])


def doses(arms: Iterable[str], base: str, default_k: float = 30.0) -> list[str]:
    """The dose arms of ``base`` among ``arms`` (``cda-1k``, ``cda-4k`` ... of ``cda``), by their tokens."""
    found = [a for a in arms if parse(a, default_k).base == base]
    return sorted(found, key=lambda a: parse(a, default_k).tokens or 0)


def published_label(name: str) -> str:
    """A published checkpoint's row label: its name as given, upper-cased when it is one word (``mabel`` ->
    ``MABEL``)."""
    return name.upper() if re.fullmatch(r"[a-z]+", name) else name


#: the stage-table input each trained arm's corpus comes from, by Arm.corpus (a filtered arm: "filtered")
CORPUS_INPUTS = {"cda": "cda", "original": "cda", "cda-neutral": "cda", "augmented": "augmented", "neutral": "neutral",
                 "filtered": "filtered"}


def corpus_input(arm: str, default_k: float = 30.0) -> str:
    """The input (``cda``, ``augmented``, ``filtered``, ``neutral``) a trained arm's corpus is read from."""
    spec = parse(arm, default_k)
    if not spec.trained:
        raise ConfigError(f"arm {arm}: a {spec.kind} arm trains on no corpus.")
    return CORPUS_INPUTS[str(spec.corpus)]


def budget_group(config: Any, arm: str) -> list[str]:
    """The trained arms of train.arms in ``arm``'s budget group (:attr:`Arm.budget_group`), in their order: the
    arms whose corpora set its token budget."""
    group = parse(arm, config.train.k).budget_group
    return [a for a in of_kinds(config.train.arms, ("trained",), config.train.k)
            if parse(a, config.train.k).budget_group == group]


def arm_k(arm: str, default_k: float) -> float | None:
    """The filtered corpus (k %) an arm trains on: ``context-cda-k<K>`` -> K, ``context-cda`` -> ``default_k``;
    None for the arms that read no filtered corpus."""
    return parse(arm, default_k).k


def arms_k_problem(arms: list[str], train_k: float, filter_k: list[float], threshold: float | None) -> str | None:
    """Why the arms' k (``train.k`` for ``context-cda``, K of ``context-cda-k<K>``) and the filter's k
    (``filter.k``) disagree, or None when every corpus an arm trains on is one the filter writes (checked when the
    config loads, before any step)."""
    wanted = {a: k for a in arms if (k := arm_k(a, train_k)) is not None}
    if not wanted:
        return None
    if threshold is not None:
        others = ", ".join(name for name, spec in _FIXED.items() if spec.k is None)
        return (f"train.arms {', '.join(wanted)} train on a top-k filtered corpus, but filter.threshold = "
                f"{threshold:g} writes a threshold corpus instead of the filter.k ones; unset filter.threshold or "
                f"train only arms that read no filtered corpus ({others})")
    have = {float(k) for k in filter_k}
    missing = {a: k for a, k in wanted.items() if float(k) not in have}
    if not missing:
        return None
    names = ", ".join(f"{a} (k = {k:g}" + (", from train.k)" if a == "context-cda" else ")") for a, k in missing.items())
    need = sorted(have | set(missing.values()))

    def listed(ks: Any) -> str:
        return "[" + ", ".join(f"{k:g}" for k in sorted(ks)) + "]"

    return (f"train.arms {names} would train on a corpus that filter.k = {listed(have)} does not write; add it to "
            f"filter.k (e.g. filter.k={listed(need)}) or change train.k / train.arms")


def check_names(arms: Iterable[str]) -> list[str]:
    """``train.arms`` checked: known names, each once, k in (0, 100); returns the list (a ValueError names the
    problem, for the config validator)."""
    arms = list(arms)
    bad = [a for a in arms if not ARM_PATTERN.match(a)]
    if bad:
        raise ValueError(f"unknown arm(s) {', '.join(map(repr, bad))}; use {ARM_HELP}")
    if not arms or len(set(arms)) != len(arms):
        raise ValueError("list at least one arm, each once")
    for a in arms:
        m = ARM_PATTERN.match(a)
        if m and m.group("k") and not 0 < float(m.group("k")) < 100:
            raise ValueError(f"arm {a}: k must lie in (0, 100)")
        if m and m.group("dose") and dose_tokens(m) < 2:
            raise ValueError(f"arm {a}: a dose of {dose_tokens(m)} tokens is too small to train on (at least 2)")
    return arms


def of_kinds(arms: Iterable[str], kinds: Iterable[str], default_k: float = 30.0) -> list[str]:
    """The arms among ``arms`` whose kind is one of ``kinds`` (in their order)."""
    wanted = set(kinds)
    return [a for a in arms if parse(a, default_k).kind in wanted]


def for_target(config: Any, target: str, kinds: Iterable[str] | None = None) -> list[str]:
    """The arms of one target, in order: ``train.arms`` (its baseline arms only when ``baselines.targets`` is null
    or names the target), then the target's published checkpoints (``baselines.published[target]``); ``kinds``
    keeps those kinds only."""
    only = config.baselines.targets
    published = dict(config.baselines.published.get(target, {}))
    out = []
    for name in [*config.train.arms, *published]:
        spec = parse(name, config.train.k, published)
        if spec.baseline and only is not None and target not in only:
            continue
        if kinds is None or spec.kind in set(kinds):
            out.append(name)
    return out


def published_refs(config: Any, target: str) -> dict[str, str]:
    """``{name: model reference}`` of a target's published checkpoints."""
    return dict(config.baselines.published.get(target, {}))


def label(arm: str) -> str:
    """The row label of an arm (``vanilla`` -> Vanilla; a published name as :func:`published_label`)."""
    if arm == "vanilla":
        return "Vanilla"
    try:
        return parse(arm).label
    except ConfigError:
        return published_label(arm)


#: what an arm does to the model, in words (model cards, docs), by its kind or the corpus a trained arm reads
_DOES = {
    "cda": "fine-tuned on the run's validated counterfactuals: each corpus sentence with its {attribute} terms "
           "swapped (classic CDA)",
    "filtered": "fine-tuned on Context-CDA's corpus: each counterfactual rephrased in context by the generator, "
                "reviewed, then filtered: the {k:g} % of items with the highest semantic entropy under the target "
                "are dropped",
    "augmented": "fine-tuned on Context-CDA's reviewed, context-augmented counterfactuals without the "
                 "semantic-entropy filter (ablation)",
    "original": "dropout debiasing (Webster et al. 2020, as bias-bench runs it): fine-tuned on the corpus's original "
                "sentences with raised dropout",
    "cda-neutral": "fine-tuned on the lexicon's gender-neutral rewrite of the counterfactuals' original sentences",
    "neutral": "fine-tuned on the generator's reviewed gender-neutral rewrites of the corpus sentences",
    "projection": "no training: a projection learnt from the run's corpus removes the bias subspace from the last "
                  "hidden states at scoring time (the weights are the vanilla model's, unchanged)",
    "scoring": "no training: the next-token distribution is decayed where a debiasing prefix makes a token more "
               "likely (Schick et al. 2021; the weights are the vanilla model's, unchanged)",
    "published": "a published debiased checkpoint, scored by the same benchmarks",
}


def what_it_does(arm: str, default_k: float = 30.0, published: Mapping[str, Any] | None = None,
                 attribute: str = "gender") -> str:
    """What ``arm`` does to the model, in one sentence (every trained arm of a budget group trains on the same token
    budget; a dose arm on its dose)."""
    spec = parse(arm, default_k, published)
    text = _DOES.get(spec.corpus or "", _DOES.get(spec.kind, spec.label))
    dose = f", on a token budget of its own: {spec.tokens:,} tokens (a dose-response point)" if spec.tokens else ""
    return text.format(k=spec.k or default_k, attribute=attribute) + dose


def check_family(arm: str, family: str, target: str) -> None:
    """One clear error when ``arm`` cannot run on a model of ``family`` (e.g. self-debias on a seq2seq model)."""
    spec = parse(arm, published={arm: ""})
    if family in spec.families:
        return
    fix = {"projection": "its projection acts on the last hidden states that a masked or causal LM head reads",
           "scoring": "it rescores a masked or causal LM's next-token distribution"}.get(spec.kind, "")
    raise ConfigError(
        f"arm {arm} on target {target}: {arm} is defined for {' and '.join(spec.families)} LMs, and {target} is a "
        f"{family} model ({fix}). Drop {arm} from train.arms for this target (ccda run --targets ...), or use a "
        f"{' or '.join(spec.families)} target."
    )
