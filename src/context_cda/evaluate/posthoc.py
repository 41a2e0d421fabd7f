"""The arms applied to the vanilla model at evaluation time (the ``evaluate-posthoc`` step), and published checkpoints.

* a projection arm (``inlp``, ``sentence-debias``): the vanilla target with its ``debias`` step's matrix hooked on
  the last hidden states (:mod:`context_cda.scoring.interventions`), for every benchmark (the task heads of the
  extrinsic ones read the projected states too);
* ``self-debias``: the vanilla target scored through :mod:`context_cda.scoring.self_debias`; only the benchmarks that
  read the LM's token probabilities through the scorer (StereoSet, CrowS-Pairs) apply, the others are listed as
  not applicable in the aggregate;
* a published checkpoint (``baselines.published``): its own weights, every benchmark; when it cannot be loaded
  (offline, gated, gone) the step writes an aggregate that says so and why, instead of failing the run.

With ``evaluate.after_training`` off only the per-epoch benchmarks run (as the trained arms get then).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import arms as A
from ..errors import ConfigError, InputError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config, EvaluateConfig

#: benchmarks whose scores come from the scorer's token log-probabilities (what self-debias changes)
SCORER_BENCHMARKS = ("stereoset", "stereoset-inter", "crows")


def arm_of(config: Config, target: str | None, arm: str | None, seed: int | None) -> A.Arm | None:
    """The post-hoc arm an evaluation is for (None: vanilla, or a fine-tuned arm's model)."""
    if not arm or arm == "vanilla" or seed is not None:
        return None
    spec = A.parse(arm, config.train.k, A.published_refs(config, target) if target else None)
    return spec if spec.posthoc else None


def model_of(config: Config, target: str | None, spec: A.Arm, model: str | None) -> str:
    """The model a post-hoc arm scores: a published checkpoint's reference, else the vanilla target."""
    if spec.kind == "published":
        return A.published_refs(config, str(target))[spec.name]
    if model:
        return model
    if target is None or target not in config.run.targets:
        raise ConfigError(f"evaluate --arm {spec.name}: name the target (--target) or the model (--model) it applies to.")
    return config.run.targets[target]


def benchmarks_for(cfg: EvaluateConfig, spec: A.Arm | None, after_training: bool = True, arm: str | None = None
                   ) -> tuple[list[str], dict[str, str]]:
    """(benchmarks to run, {benchmark: why it does not apply}) for an evaluation of ``spec`` (a post-hoc arm) or of
    ``arm`` (a fine-tuned arm's model; None: the vanilla model): what the arm cannot take, then what
    ``evaluate.arm_benchmarks`` leaves out for it."""
    from .registry import check_names, get_benchmark

    names = list(cfg.benchmarks)
    skipped: dict[str, str] = {}
    if spec is not None and not after_training:
        skipped.update({b: "evaluate.after_training is off: only the per-epoch benchmarks run"
                        for b in names if not get_benchmark(b).per_epoch})
    if spec is not None and spec.kind == "scoring":
        skipped.update({b: "the arm changes the scoring of token probabilities, which this benchmark does not read "
                        "through the scorer" for b in names if b not in SCORER_BENCHMARKS})
    arm = spec.name if spec is not None else arm
    if arm in cfg.arm_benchmarks:
        check_names(cfg.arm_benchmarks[arm], f"evaluate.arm_benchmarks.{arm}")
        kept = cfg.benchmarks_of(arm)
        skipped.update({b: "evaluate.arm_benchmarks leaves it out for the arm" for b in names
                        if b not in kept and b not in skipped})
    return [b for b in names if b not in skipped], skipped


def precheck(config: Config, spec: A.Arm | None, model: str, who: str,
             inputs: Mapping[str, Path | str] | None = None) -> Any:
    """Before anything is loaded, one line for an arm the model's family cannot take (e.g. self-debias on a
    seq2seq model), when the model's config can be read without a download; for a projection arm, its matrix
    loaded and checked (:meth:`~context_cda.scoring.interventions.Projection.validate`: the arm's tensor, finite,
    keeping and removing dimensions) against the model's width. Returns that projection (None for other arms)."""
    from ..models import family_of_config, peek_config

    if spec is None or spec.kind == "published":
        return None
    cfg = peek_config(model, config.run.model_cache)
    if cfg is not None:
        A.check_family(spec.name, family_of_config(cfg), who)
    if spec.kind != "projection":
        return None
    from ..scoring.interventions import Projection, config_width

    proj = Projection.load(_artifact(inputs or {}, spec, who), spec.name)
    proj.check_width(config_width(cfg) if cfg is not None else None, f"evaluate {spec.name} on {who}")
    return proj


def apply(scorer: Any, config: Config, spec: A.Arm | None, inputs: Mapping[str, Path | str], who: str,
          proj: Any = None) -> tuple[Any, dict[str, Any]]:
    """(the scorer with the arm applied, what was applied) - a projection hooked (``proj``: the one
    :func:`precheck` loaded), or a self-debias scorer."""
    if spec is None or spec.kind == "published":
        return scorer, {}
    A.check_family(spec.name, scorer.family, who)
    if spec.kind == "projection":
        from ..scoring.interventions import Projection

        proj = proj or Projection.load(_artifact(inputs, spec, who), spec.name)
        proj.check(scorer.model, f"evaluate {spec.name} on {who}")
        proj.attach(scorer.model)
        scorer.intervention = proj
        return scorer, {"intervention": spec.name, "artifact": proj.source, "dim": proj.dim,
                        "removed": proj.removed, **_most_removed(proj, spec, who)}
    from ..scoring.self_debias import SelfDebiasSettings, self_debias_scorer

    sd = config.baselines.self_debias
    bias = config.evaluate.bias_type
    if bias not in sd.prefixes:
        raise ConfigError(f"self-debias: no debiasing prefix for evaluate.bias_type={bias!r} in "
                          f"baselines.self_debias.prefixes ({', '.join(sd.prefixes)}); add one.")
    from ..scoring.self_debias import BIAS_BENCH_POSITIONS

    settings = SelfDebiasSettings((sd.prefixes[bias],), sd.decay_constant, sd.epsilon, config.baselines.mode,
                                  BIAS_BENCH_POSITIONS.get(bias))
    out = self_debias_scorer(scorer, settings, scorer.progress)
    return out, {"intervention": spec.name, "prefix": sd.prefixes[bias], "decay_constant": sd.decay_constant,
                 "epsilon": sd.epsilon, "mode": config.baselines.mode,
                 **({"prefix_tokens": out.prefix_length} if scorer.family == "causal" else {})}


def _most_removed(proj: Any, spec: A.Arm, who: str) -> dict[str, str]:
    """A warning (logged, and kept in the aggregate for the report) when a projection removes most dimensions of
    the hidden states: what the LM head reads is then mostly gone, and a low bias score may only mean that."""
    if proj.removed * 2 <= proj.dim:
        return {}
    import logging

    text = (f"{spec.name} on {who} removes {proj.removed} of the {proj.dim} dimensions of the hidden states: its "
            "scores measure a model with most of its representation gone (fewer classifiers, "
            "baselines.inlp.n_classifiers, or fewer components keep more)")
    logging.getLogger("context_cda").warning("WARNING %s.", text)
    return {"warning": text}


def _artifact(inputs: Mapping[str, Path | str], spec: A.Arm, target: str) -> Path:
    """The arm's matrix: ``inputs["artifact"]`` (a file), else in ``inputs["debias"]`` (the target's debias
    folders, or the arm's own folder)."""
    from .. import layout as L

    if inputs.get("artifact"):
        return Path(inputs["artifact"])
    if inputs.get("debias"):
        own = Path(inputs["debias"]) / str(spec.artifact)
        return own if own.is_file() else L.within(inputs["debias"], "debias", {"target": target}, arm=spec.name) / str(
            spec.artifact)
    raise InputError(f"evaluate --arm {spec.name}: no projection given; run `ccda debias --arm {spec.name}` for the "
                     "target first, or pass --artifact FILE.")


def unavailable(aggregate_file: Path) -> str | None:
    """Why an evaluation folder holds no scores (a published checkpoint that could not be loaded), else None."""
    import json

    try:
        data = json.loads(Path(aggregate_file).read_text())
    except (OSError, ValueError):
        return None
    reason = data.get("unavailable") if isinstance(data, dict) else None
    return str(reason) if reason else None


def available(config: Config, out_dir: Path | str, **keys: Any) -> bool:
    """The runner's extra up-to-date check of ``evaluate-posthoc``: a published checkpoint that could not be
    loaded is tried again by the next run."""
    from ..layout import AGGREGATE_FILE

    return unavailable(Path(out_dir) / AGGREGATE_FILE) is None
