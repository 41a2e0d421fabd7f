"""The ``budget`` step: an arm's token budget, resolved once per (target, arm) before its fine-tunings.

Every trained arm of a budget group (:attr:`context_cda.arms.Arm.budget_group`: the swapping arms, and apart the
neutral arms) trains on the same number of tokens: ``train.token_budget``, or the smallest token count over the
group's corpora. A dose arm (``cda-4k``) is a group of its own and trains on its dose, which its corpus must hold
(:func:`check_dose`). The step writes that one number to ``budget/<target>/<arm>/budget.json`` (its manifest holds each
arm's count), and the arm's fine-tunings read it: a fine-tuning depends on its own corpus and this number, not on
the other arms. Adding an arm of another group, a post-hoc arm or a seed leaves it as it was; an arm of the same
group whose corpus is not the smallest reruns this step, which writes the same number, so no fine-tuning reruns.

It also holds the views (:func:`context_cda.stages.step_view`) of the config these steps see: a budget step sees its
group's arms; a fine-tuning its own arm, the corpus settings that arm reads and the per-epoch evaluation settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import arms as A
from .. import layout as L
from ..errors import ConfigError, InputError
from ..io import read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config, EvaluateConfig


def run_budget(config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str, target: str, arm: str,
               **_: Any) -> dict[str, Any]:
    """Resolve ``arm``'s token budget on ``target``'s tokenizer from the corpora of its budget group in
    ``inputs``; write ``budget.json``; return the summary (every arm's count)."""
    from ..steps import Counts, recorder

    out = Path(out_dir)
    rec = recorder(out, versions=("transformers", "tokenizers"))
    group = A.budget_group(config, arm) or [arm]
    name = A.corpus_input(arm, config.train.k)
    if name not in inputs or not Path(inputs[name]).exists():
        raise InputError(f"finetune {target}/{arm}: input {name} = {inputs.get(name, '(none)')} not found; run the "
                         "stage before (the arm's token budget is counted first).")
    counts: dict[str, int] = {}
    dose = A.parse(arm, config.train.k).tokens
    if dose is not None:  # a dose arm: its own budget, which its corpus must hold
        with rec.timed("count"):
            counts = group_token_counts(config, inputs, target, [arm])
        budget = check_dose(target, arm, dose, counts[arm])
        source = f"the arm's dose ({arm})"
    elif config.train.token_budget:
        budget, source = int(config.train.token_budget), "train.token_budget"
    else:
        with rec.timed("count"):
            counts = group_token_counts(config, inputs, target, group)
        budget, source = min(counts.values()), "the group's smallest corpus"
    path = write_json(out / L.BUDGET_FILE, {"token_budget": budget})  # only what a fine-tuning depends on
    summary = {"target": target, "arm": arm, "group": A.parse(arm, config.train.k).budget_group, "arms": group,
               "token_counts": counts, "token_budget": budget, "source": source}
    rec.finish(Counts(items_in=len(group), out=1), {"budget": path}, summary)
    return summary


def model_ref(config: Config, target: str) -> str:
    try:
        return config.run.targets[target]
    except KeyError:
        raise ConfigError(
            f"run.targets: no target named {target!r}; known: {', '.join(config.run.targets) or 'none'}."
        ) from None


def check_dose(target: str, arm: str, dose: int, available: int) -> int:
    """A dose arm's budget, ``dose``, when its corpus holds that many tokens (``available`` on the target's
    tokenizer); else an :class:`InputError` saying how to get there: a dose the corpus cannot give would train on
    fewer tokens than the arm's name says, and put the point in the wrong place on the curve."""
    if available < dose:
        raise InputError(f"finetune {target}/{arm}: the dose asks for {dose:,} tokens, but its corpus holds only "
                         f"{available:,} on {target}'s tokenizer; use a smaller dose (train.arms) or a larger corpus "
                         "(ingest.sample_n, augment.limit).")
    return dose


def group_token_counts(config: Config, inputs: Mapping[str, Path | str], target: str, group: list[str]
                       ) -> dict[str, int]:
    """Each arm of ``group`` whose corpus is in ``inputs``: its token count on ``target``'s tokenizer."""
    from transformers import AutoConfig, AutoTokenizer

    from ..models import family_of_config, resolve_pretrained

    path = resolve_pretrained(model_ref(config, target), config.run.model_cache)
    family = family_of_config(AutoConfig.from_pretrained(path))
    tok = AutoTokenizer.from_pretrained(path)
    from .corpus import arm_corpus, arm_token_count

    counts = {}
    for name in group:
        kind, table = arm_corpus(inputs, name, config.train.k)
        if table.exists():
            counts[name] = arm_token_count(config, kind, table, tok, family)
    if not counts:
        raise InputError(f"token budget of {target}: none of the corpora of {', '.join(group)} exist "
                         f"({', '.join(f'{k}={v}' for k, v in inputs.items())}); run the earlier stages or set "
                         "train.token_budget.")
    return counts


def read_budget(inputs: Mapping[str, Path | str]) -> int | None:
    """The token budget the budget step resolved (``inputs["budget"]``), or None when there is none."""
    path = inputs.get("budget")
    if path is None or not Path(path).is_file():
        return None
    return int(read_json(path)["token_budget"])


# ------------------------------------------------------------------------------------------------ views


def _unread(view: Config, reads: Mapping[str, bool]) -> None:
    """Reset to their defaults the settings a step does not read (``reads[name]`` False), so they are in neither
    its key nor its Kubeflow view."""
    from ..config import Config

    d = Config()
    if not reads["cda.mode"]:
        view.cda.mode = d.cda.mode
    if not reads["lexicon"]:
        view.lexicon = d.lexicon
    if not reads["train.k"]:
        view.train.k = d.train.k


def _reads(arms: list[str], k: float) -> dict[str, bool]:
    specs = [A.parse(a, k) for a in arms]
    return {"cda.mode": any(s.corpus == "cda" for s in specs),
            "lexicon": any(s.corpus == "cda-neutral" for s in specs),
            "train.k": any(s.corpus == "filtered" and not s.name.startswith("context-cda-k") for s in specs)}


def budget_view(view: Config, config: Config, keys: Mapping[str, Any]) -> Config:
    """A budget step sees its budget group's arms and the corpus settings they read."""
    view.train.arms = A.budget_group(config, str(keys["arm"])) or [str(keys["arm"])]
    _unread(view, _reads(view.train.arms, config.train.k))
    return view


def finetune_view(view: Config, config: Config, keys: Mapping[str, Any]) -> Config:
    """A fine-tuning sees its own arm (step_view), the corpus settings that arm reads (not ``train.launcher``: the
    Kubeflow pipeline is compiled with it, and the result is the same either way), the dropout settings when it
    is the dropout arm, and the per-epoch evaluation settings of its arm (:func:`per_epoch_settings`): adding a
    benchmark that is not scored per epoch (WinoGender, GLUE ...) or another arm's benchmark list retrains
    nothing."""
    from ..config import Config

    arm = str(keys["arm"])
    _unread(view, _reads([arm], config.train.k))
    view.train.launcher = Config().train.launcher  # how the pipeline runs it (compiled in), not what it makes
    if arm != "dropout":
        view.baselines.dropout = Config().baselines.dropout
    view.evaluate = _with_decontamination_files(per_epoch_settings(view.evaluate), view.evaluate)
    return view


def _with_decontamination_files(ev: EvaluateConfig, given: EvaluateConfig) -> EvaluateConfig:
    """``ev`` with the benchmark files the corpus is decontaminated against (:mod:`context_cda.evaluate.decontam`) as
    ``given`` names them: WinoGender and WinoBias are not scored per epoch, but a fine-tuning's corpus is checked
    against them, so a Kubeflow task must not read their default files instead of the run's."""
    return ev.model_copy(update={
        "winogender": ev.winogender.model_copy(update={"path": given.winogender.path}),
        "winobias": ev.winobias.model_copy(update={"path": given.winobias.path, "split": given.winobias.split})})


#: EvaluateConfig sections of the benchmarks, by benchmark name
_BENCHMARK_SECTIONS = {"glue": "glue", "biasbios": "biasbios", "stsb": "stsb", "nli-bias": "nli_bias",
                       "next-token": "next_token", "winogender": "winogender", "winobias": "winobias"}


def per_epoch_settings(ev: EvaluateConfig) -> EvaluateConfig:
    """The evaluation settings the per-epoch scoring reads: the benchmarks scored per epoch (StereoSet, CrowS,
    next-token; not those that fine-tune a head, nor WinoGender and WinoBias, which the evaluate step scores) and
    the settings of those; every other setting at its default. The per-epoch scores are part of a fine-tuning's
    output (metrics.csv), so a change here reruns it: the intermediate epochs' weights a rescoring would need are
    not kept (train.keep_epoch_weights), while the final model's scores under any settings come from the evaluate
    step without training again."""
    from ..config import EvaluateConfig
    from ..evaluate.registry import get_benchmark

    def per(names: list[str]) -> list[str]:
        return [b for b in names if get_benchmark(b).per_epoch]

    d = EvaluateConfig()
    scored = set(per(ev.benchmarks)) | {b for v in ev.arm_benchmarks.values() for b in per(v)}
    update: dict[str, Any] = {"benchmarks": per(ev.benchmarks), "after_training": d.after_training,
                              "arm_benchmarks": {a: per(v) for a, v in ev.arm_benchmarks.items()}, "head": d.head}
    update.update({field: getattr(d, field) for name, field in _BENCHMARK_SECTIONS.items() if name not in scored})
    return ev.model_copy(update=update)
