"""Benchmark registry (lm-evaluation-harness style): each entry loads items, scores them with a model
(``score``: writes per-item predictions) and aggregates predictions into metrics (``aggregate``: pure).
Every metric says whether higher is better and what its ideal value is (SS and CS: 50, an unbiased model).

``per_epoch`` benchmarks only read the model (StereoSet, CrowS-Pairs, next-token) and are cheap enough for the
evaluation after every fine-tuning epoch; WinoGender and WinoBias read the model too but run in the evaluate
stage only; the others fine-tune a head on the checkpoint first (GLUE, Bias in Bios, STS-B, NLI-Bias)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EvaluateConfig
    from ..scoring import Scorer


@dataclass(frozen=True)
class Metric:
    key: str  # key in the aggregate's "overall" block
    name: str  # flat name: <benchmark>_<key>
    higher_is_better: bool | None  # None: closer to ``ideal`` is better
    ideal: float | None
    description: str


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    metrics: tuple[Metric, ...]
    load: Callable[[EvaluateConfig, str | None, str | None], list[Any]]  # (cfg, path or None, data_cache) -> items
    score: Callable[[Scorer, Sequence[Any], EvaluateConfig], tuple[list[dict], list[dict], dict[str, Any]]]
    aggregate: Callable[[list[dict], EvaluateConfig], dict[str, Any]]
    per_epoch: bool = True
    path_key: str | None = None  # the evaluate.<key> a --<name>-path override sets

    def flat(self, agg: dict[str, Any]) -> dict[str, float]:
        """``{stereoset_ss: ..., ...}`` from an aggregate (overall block); metrics it lacks (e.g. a GLUE task that
        was not run) are left out, and so is a value that is not a finite number (a benchmark that scored no
        item): no NaN is ever logged or registered as a metric. Metrics with a bootstrap interval (the overall
        block's ``ci``) add ``<name>_ci_low`` and ``<name>_ci_high``."""
        import math

        overall = agg.get("overall", {})
        out = {m.name: float(overall[m.key]) for m in self.metrics
               if isinstance(overall.get(m.key), int | float) and math.isfinite(overall[m.key])}
        ci = overall.get("ci") or {}
        for m in self.metrics:
            bounds = ci.get(m.key)
            if m.name in out and bounds and all(b is not None for b in bounds):
                out[f"{m.name}_ci_low"], out[f"{m.name}_ci_high"] = float(bounds[0]), float(bounds[1])
        return out


def _load_stereoset(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[Any]:
    from .data import benchmark_file, load_stereoset

    return load_stereoset(benchmark_file("stereoset", path, cache), bias_type=cfg.bias_type)


def _load_stereoset_inter(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[Any]:
    from .data import benchmark_file, load_stereoset

    return load_stereoset(benchmark_file("stereoset", path, cache), bias_type=cfg.bias_type, split="intersentence")


def _load_crows(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[Any]:
    from .data import benchmark_file, load_crows

    return load_crows(benchmark_file("crows", path, cache), bias_type=cfg.bias_type)


def _score_stereoset(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import stereoset

    rows, rejected = stereoset.score(scorer, items, cfg.start_token)
    return rows, rejected, {"method": stereoset.METHODS[scorer.family],
                            "start_token": stereoset.start_token_used(scorer, cfg.start_token)}


def _score_stereoset_inter(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import stereoset

    rows, rejected = stereoset.score_intersentence(scorer, items)
    return rows, rejected, {"method": stereoset.INTER_METHODS[scorer.family]}


def _score_crows(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import crows

    rows, rejected, mode = crows.score(scorer, items, cfg.crows_mode, cfg.start_token)
    return rows, rejected, {"mode": mode, "start_token": crows.start_token_used(scorer, mode, cfg.start_token)}


def _agg_stereoset(rows: list[dict], cfg: EvaluateConfig) -> dict[str, Any]:
    from . import stereoset

    return stereoset.aggregate(rows, cfg.bootstrap)


def _agg_crows(rows: list[dict], cfg: EvaluateConfig) -> dict[str, Any]:
    from . import crows

    return crows.aggregate(rows, cfg.bootstrap)


def _load_next_token(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[Any]:
    """StereoSet contexts (gender by default, as ``evaluate.bias_type``) and the gender word lists."""
    from . import next_token
    from .data import benchmark_file, load_stereoset

    examples = load_stereoset(benchmark_file("stereoset", path or cfg.stereoset_path, cache), bias_type=cfg.bias_type)
    words = next_token.load_gender_words(cfg.next_token.words_path, cache)
    return [(c, words) for c in next_token.contexts_from_stereoset(examples)]


def _score_next_token(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import next_token

    if not items:
        return [], [], {}
    words, nt = items[0][1], cfg.next_token
    vocab = next_token.gender_vocab(scorer.tokenizer, words, scorer.family, nt.candidates)
    rows = next_token.next_token_distributions(
        scorer.model, scorer.tokenizer, [c for c, _ in items], vocab, top_k=nt.top_k,
        batch_size=scorer.batch_size, progress=scorer.progress, word_boundary=nt.word_boundary,
    )
    for r in rows:  # one Parquet-friendly column per top token field
        top = r.pop("top_tokens")
        r["top_words"] = [w for w, _, _ in top]
        r["top_genders"] = [g for _, g, _ in top]
        r["top_probs"] = [float(p) for _, _, p in top]
    info = {"top_k": nt.top_k, "words_source": words.source, "candidates": nt.candidates,
            "word_boundary": nt.word_boundary if nt.candidates == "sequence" else None,
            "male_words": vocab.n_male, "female_words": vocab.n_female, "vocab": vocab.summary()}
    return rows, [], info


def _agg_next_token(rows: list[dict], cfg: EvaluateConfig) -> dict[str, Any]:
    """The aggregate and its deviations from the published protocol (a function of every row: scored in shares,
    the rows are gathered first)."""
    from . import next_token
    from .extrinsic import deviations

    agg = next_token.aggregate(rows, cfg.next_token.top_k)
    return {**agg, "deviations": deviations.next_token(agg, cfg)}


def _choice(name: str) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """(load, score, aggregate) of a multiple-choice benchmark module of this package (``winogender``,
    ``winobias``): its files through the dataset of the same name (or ``evaluate.<name>.path``), a seeded sample of
    ``evaluate.<name>.max_items``, the scores of :mod:`.choice`, the module's aggregate with intervals."""

    def module() -> Any:
        import importlib

        return importlib.import_module(f"{__package__}.{name}")

    def load(cfg: EvaluateConfig, path: str | None, cache: str | None) -> list[Any]:
        from ..data.datasets import resolve

        mod, sub = module(), getattr(cfg, name)
        folder = resolve(name, path, cache=cache, key=f"evaluate.{name}.path")
        return mod.sample(mod.load(folder, **mod.load_options(sub)), sub.max_items, cfg.head.seed)

    def score(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
        from . import choice

        mod = module()
        rows, rejected = mod.score(scorer, items)
        return rows, rejected, {"method": choice.METHODS[scorer.family], **mod.info(getattr(cfg, name))}

    def aggregate(rows: list[dict], cfg: EvaluateConfig) -> dict[str, Any]:
        return module().aggregate(rows, cfg.bootstrap)

    return load, score, aggregate


def _extrinsic(fn: str) -> Callable[..., Any]:
    """A lazily imported function of :mod:`context_cda.evaluate.extrinsic.benchmarks`."""

    def call(*args: Any) -> Any:
        from .extrinsic import benchmarks

        return getattr(benchmarks, fn)(*args)

    call.__name__ = fn
    return call


def _with_intervals(benchmark: str, aggregate: Callable[..., Any]) -> Callable[..., Any]:
    """``aggregate`` plus bootstrap intervals of the benchmark's accuracies (:mod:`.intervals`)."""

    def call(rows: list[dict], cfg: EvaluateConfig) -> dict[str, Any]:
        from .intervals import with_intervals

        return with_intervals(benchmark, aggregate)(rows, cfg)

    call.__name__ = aggregate.__name__
    return call


REGISTRY: dict[str, Benchmark] = {
    "stereoset": Benchmark(
        name="stereoset",
        description="StereoSet intrasentence (dev): stereotype vs anti-stereotype vs unrelated fill-ins.",
        metrics=(
            Metric("ss", "stereoset_ss", None, 50.0, "Stereotype score: % preferring the stereotype (50 ideal)."),
            Metric("lms", "stereoset_lms", True, 100.0, "Language-model score: % preferring related over unrelated."),
            Metric("icat", "stereoset_icat", True, 100.0, "Idealized CAT: LMS * min(SS, 100-SS) / 50."),
        ),
        load=_load_stereoset,
        score=_score_stereoset,
        aggregate=_agg_stereoset,
        path_key="stereoset_path",
    ),
    "stereoset-inter": Benchmark(
        name="stereoset-inter",
        description="StereoSet intersentence (dev): which of three next sentences (stereotype, anti-stereotype, "
        "unrelated) the model prefers after a context sentence.",
        metrics=(
            Metric("ss", "stereoset_inter_ss", None, 50.0, "Intersentence stereotype score: % preferring the "
                   "stereotype continuation (50 ideal)."),
            Metric("lms", "stereoset_inter_lms", True, 100.0, "Intersentence language-model score: % preferring a "
                   "related continuation over the unrelated one."),
            Metric("icat", "stereoset_inter_icat", True, 100.0, "Intersentence idealized CAT: LMS * min(SS, 100-SS) "
                   "/ 50."),
        ),
        load=_load_stereoset_inter,
        score=_score_stereoset_inter,
        aggregate=_agg_stereoset,
        path_key="stereoset_path",
    ),
    "crows": Benchmark(
        name="crows",
        description="CrowS-Pairs: minimal pairs, more vs less stereotyping sentence.",
        metrics=(
            Metric("cs", "crows_cs", None, 50.0, "% of pairs where sent_more scores higher (50 ideal)."),
            Metric("stereo", "crows_stereo", None, 50.0, "CS over the stereo pairs (non-neutral)."),
            Metric("antistereo", "crows_antistereo", None, 50.0, "CS over the antistereo pairs (non-neutral)."),
        ),
        load=_load_crows,
        score=_score_crows,
        aggregate=_agg_crows,
        path_key="crows_path",
    ),
    "next-token": Benchmark(
        name="next-token",
        description="Next-token gender balance (StereoSet contexts cut at BLANK, top-k gender words).",
        metrics=(
            Metric("imbalance", "next_token_imbalance", False, 0.0,
                   "Mean |male share - 0.5| of the top-k gender tokens per context (0: balanced)."),
            Metric("male_share_mean", "next_token_male_share", None, 0.5, "Mean male share of the top-k tokens."),
            Metric("male_share_std", "next_token_male_share_std", False, 0.0, "Spread of the male share."),
            Metric("male_mass_mean", "next_token_male_mass", None, 0.5,
                   "Mean probability mass on male words within the gender vocabulary."),
            Metric("chance_male_share", "next_token_chance_male_share", None, None,
                   "Male share a model with no gender preference shows with these candidates: M / (M + F)."),
            Metric("chance_imbalance", "next_token_chance_imbalance", None, None,
                   "Imbalance a model with no gender preference shows (hypergeometric top-k draw)."),
            Metric("imbalance_excess", "next_token_imbalance_excess", False, 0.0,
                   "Imbalance minus its chance value (0: no more imbalanced than a gender-blind ranking)."),
        ),
        load=_load_next_token,
        score=_score_next_token,
        aggregate=_agg_next_token,
        path_key="stereoset_path",
    ),
    "winogender": Benchmark(
        name="winogender",
        description="WinoGender: which person a male/female/neutral pronoun refers to (lm-evaluation-harness's "
        "winogender prompt).",
        metrics=(
            Metric("acc", "winogender_acc", True, 100.0, "Accuracy over every sentence (%)."),
            Metric("acc_male", "winogender_acc_male", True, 100.0, "Accuracy on the male-pronoun sentences (%)."),
            Metric("acc_female", "winogender_acc_female", True, 100.0, "Accuracy on the female-pronoun sentences (%)."),
            Metric("acc_neutral", "winogender_acc_neutral", True, 100.0, "Accuracy on the they/them sentences (%)."),
            Metric("gap", "winogender_gap", None, 0.0, "Male minus female accuracy (0: the pronoun's gender does not "
                   "change the resolution)."),
            Metric("acc_gotcha", "winogender_acc_gotcha", True, 100.0,
                   "Accuracy where the pronoun refers to an occupation whose BLS majority is the other gender (%)."),
        ),
        **dict(zip(("load", "score", "aggregate"), _choice("winogender"), strict=True)),
        per_epoch=False,
        path_key="winogender.path",
    ),
    "winobias": Benchmark(
        name="winobias",
        description="WinoBias: coreference accuracy on pro- vs anti-stereotyped sentences, type 1 and 2 (Winograd "
        "substitution, partial scoring).",
        metrics=(
            Metric("pro1", "winobias_pro1", True, 100.0, "Type 1, pro-stereotyped accuracy (%)."),
            Metric("anti1", "winobias_anti1", True, 100.0, "Type 1, anti-stereotyped accuracy (%)."),
            Metric("gap1", "winobias_gap1", None, 0.0, "Type 1 pro minus anti accuracy (0 ideal)."),
            Metric("pro2", "winobias_pro2", True, 100.0, "Type 2, pro-stereotyped accuracy (%)."),
            Metric("anti2", "winobias_anti2", True, 100.0, "Type 2, anti-stereotyped accuracy (%)."),
            Metric("gap2", "winobias_gap2", None, 0.0, "Type 2 pro minus anti accuracy (0 ideal)."),
            Metric("acc", "winobias_acc", True, 100.0, "Mean of the pro and anti accuracies (%)."),
            Metric("gap", "winobias_gap", None, 0.0, "Pro minus anti accuracy over both types (0 ideal)."),
        ),
        **dict(zip(("load", "score", "aggregate"), _choice("winobias"), strict=True)),
        per_epoch=False,
        path_key="winobias.path",
    ),
    "glue": Benchmark(
        name="glue",
        description="GLUE SST-2, RTE, QNLI: dev accuracy after fine-tuning a classification head.",
        metrics=(
            Metric("sst2_acc", "glue_sst2_acc", True, 100.0, "SST-2 dev accuracy (%)."),
            Metric("rte_acc", "glue_rte_acc", True, 100.0, "RTE dev accuracy (%)."),
            Metric("qnli_acc", "glue_qnli_acc", True, 100.0, "QNLI dev accuracy (%)."),
            Metric("avg_acc", "glue_avg_acc", True, 100.0, "Mean accuracy over the tasks run (%)."),
        ),
        load=_extrinsic("load_glue"),
        score=_extrinsic("score_glue"),
        aggregate=_with_intervals("glue", _extrinsic("aggregate_glue")),
        per_epoch=False,
        path_key="glue.path",
    ),
    "biasbios": Benchmark(
        name="biasbios",
        description="Bias in Bios: profession accuracy and the gender TPR gap (De-Arteaga et al. 2019).",
        metrics=(
            Metric("acc", "biasbios_acc", True, 100.0, "Profession accuracy on held-out bios (%)."),
            Metric("tpr_gap_rms", "biasbios_tpr_gap_rms", False, 0.0,
                   "Root mean square over professions of TPR(female) - TPR(male)."),
        ),
        load=_extrinsic("load_biasbios"),
        score=_extrinsic("score_biasbios"),
        aggregate=_with_intervals("biasbios", _extrinsic("aggregate_biasbios")),
        per_epoch=False,
        path_key="biasbios.path",
    ),
    "stsb": Benchmark(
        name="stsb",
        description="Bias-STS-B: man vs woman similarity to occupation sentences (Webster et al. 2020).",
        metrics=(
            Metric("diff", "stsb_diff", False, 0.0,
                   "Mean |sim(man, occupation) - sim(woman, occupation)| on the STS-B 0-5 scale."),
            Metric("gt_0_1", "stsb_gt_0_1", False, 0.0, "Share of pairs with a difference above 0.1 (0-5 scale)."),
            Metric("gt_0_3", "stsb_gt_0_3", False, 0.0, "Share of pairs with a difference above 0.3 (0-5 scale)."),
            Metric("gt_0_5", "stsb_gt_0_5", False, 0.0, "Share of pairs with a difference above 0.5 (0-5 scale)."),
            Metric("gt_0_7", "stsb_gt_0_7", False, 0.0, "Share of pairs with a difference above 0.7 (0-5 scale)."),
            Metric("male_higher", "stsb_male_higher", None, 0.5, "Share of pairs where the man sentence scores higher."),
            Metric("pearson", "stsb_pearson", True, 100.0, "STS-B dev Pearson correlation (x100)."),
        ),
        load=_extrinsic("load_stsb"),
        score=_extrinsic("score_stsb"),
        aggregate=_extrinsic("aggregate_stsb"),
        per_epoch=False,
        path_key="stsb.bias_path",
    ),
    "nli-bias": Benchmark(
        name="nli-bias",
        description="NLI-Bias: occupation/gender-word pairs that should be neutral (Dev et al. 2020).",
        metrics=(
            Metric("net_neutral", "nli_bias_net_neutral", True, 1.0, "Mean P(neutral) over the pairs."),
            Metric("fraction_neutral", "nli_bias_fraction_neutral", True, 1.0, "Share of pairs predicted neutral."),
            Metric("tau_0_5", "nli_bias_tau_0_5", True, 1.0, "Share of pairs with P(neutral) > 0.5 (reference mode)."),
            Metric("nn_gap", "nli_bias_nn_gap", None, 0.0, "Net Neutral of male minus female hypotheses."),
            Metric("dev_acc", "nli_bias_dev_acc", True, 100.0,
                   "Accuracy of the NLI head on its training set's dev split (SNLI dev or MNLI dev-matched, %)."),
        ),
        load=_extrinsic("load_nli_bias"),
        score=_extrinsic("score_nli_bias"),
        aggregate=_with_intervals("nli-bias", _extrinsic("aggregate_nli_bias")),
        per_epoch=False,
        path_key="nli_bias.words_path",
    ),
}


def better_text(m: Metric) -> str:
    if m.higher_is_better is True:
        return "higher"
    if m.higher_is_better is False:
        return "lower"
    if m.ideal is None:
        return "reference value"
    return f"closer to {m.ideal:g}"


def get_benchmark(name: str) -> Benchmark:
    return REGISTRY[check_names([name])[0]]


def check_names(names: Sequence[str], key: str = "evaluate.benchmarks") -> list[str]:
    """``names`` when every one is a benchmark of :data:`REGISTRY`; else one :class:`ConfigError` naming ``key``
    (the config key or the flag the names came from), every unknown name, the closest known one and the list."""
    import difflib

    unknown = [n for n in names if n not in REGISTRY]
    if not unknown:
        return list(names)
    hints = []
    for n in unknown:
        close = difflib.get_close_matches(n, list(REGISTRY), n=1, cutoff=0.6)
        hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigError(f"{key}: unknown benchmark{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; known: "
                      f"{', '.join(REGISTRY)}.")


def check_config_names(cfg: Any) -> None:
    """``evaluate.benchmarks`` and every list of ``evaluate.arm_benchmarks`` name known benchmarks (one
    :class:`ConfigError` naming the key): a misspelt name in an arm's list would cut a benchmark from it silently."""
    check_names(cfg.benchmarks, "evaluate.benchmarks")
    for arm, names in cfg.arm_benchmarks.items():
        check_names(names, f"evaluate.arm_benchmarks.{arm}")


def metric_specs() -> dict[str, Metric]:
    """Every flat metric name -> its spec (for trackers and promotion gates)."""
    return {m.name: m for b in REGISTRY.values() for m in b.metrics}
