"""`ccda sample`, `ccda entropy` and `ccda filter`: the M samples and their clusters (once), semantic entropy per
target model, then the top-k % filter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    AllowErrorsOpt,
    ForceOpt,
    MergeOpt,
    NoProgressOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    ShardOpt,
    given_file,
    pick,
    print_summary,
    resolve_config,
    run_parts,
    run_step,
)

TargetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target", "-t", help="Target model short name from run.targets (repeatable; default: all)."
    ),
]


def parse_k(value: str | None) -> list[float] | None:
    """``"30"`` -> [30.0]; ``"20,30,40"`` -> [20.0, 30.0, 40.0]."""
    from ..errors import ConfigError

    if value is None:
        return None
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(
            f"--k {value!r}: expected a percentage or a comma-separated list, e.g. 30 or 20,30,40."
        ) from None




def sample(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    input_path: Annotated[
        Path | None,
        typer.Option("--input", callback=given_file, help="Augmented table (default: the one validation kept, in the run folder)."),
    ] = None,
    n_samples: Annotated[int | None, typer.Option("--n-samples", "-m", help="M rephrasings per item.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="nli | embedding | llm.")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="Judge model reference.")] = None,
    rule: Annotated[str | None, typer.Option("--rule", help="strict | lenient.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N items.")] = None,
    no_progress: NoProgressOpt = False,
    allow_errors: AllowErrorsOpt = None,
    shard: ShardOpt = None,
    merge: MergeOpt = False,
    force: ForceOpt = False,
) -> None:
    """The M rephrasings of each contextual counterfactual and their entailment clusters, drawn once for every
    target (resumable): every generation part (pipeline.generation_shards), then their merge; --shard N runs one
    part, --merge only the merge."""
    flags = {"n_samples": n_samples, "judge": judge, "judge_model": judge_model, "rule": rule, "limit": limit}
    cfg = resolve_config(profile, sets, run_dir, params, entropy=flags, run={"allow_errors": allow_errors})
    summary, _ = run_parts(cfg, "sample", shard, merge, {"augmented": input_path}, None, force,
                           {"progress": not no_progress})
    if summary is not None:
        print_summary("sample", summary)


def entropy(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    target: TargetOpt = None,
    samples: Annotated[
        Path | None,
        typer.Option("--samples", callback=given_file, help="The sample step's folder (default: the run folder's)."),
    ] = None,
    estimator: Annotated[str | None, typer.Option("--estimator", help="eq1 | plogp | discrete.")] = None,
    no_progress: NoProgressOpt = False,
    force: ForceOpt = False,
) -> None:
    """Semantic entropy of each sampled item under each target model (resumable): the target scores the samples
    the sample step drew and clustered once; the estimators do the rest."""
    cfg = resolve_config(profile, sets, run_dir, params, entropy={"estimator": estimator})
    for name in pick(target, list(cfg.run.targets), "--target"):
        summary, _ = run_step(cfg, "entropy", {"samples": samples}, None, force,
                              extra={"progress": not no_progress}, target=name)
        print_summary(f"entropy [{name}]", summary)


def filter_(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    target: TargetOpt = None,
    k: Annotated[
        str | None,
        typer.Option("--k", help="Percent with the highest SE to drop: 30, or 20,30,40 (one corpus each)."),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Keep items with SE below this value instead.")
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Drop the top k % of items by semantic entropy (from the validated scores): one corpus per k and target."""
    cfg = resolve_config(profile, sets, run_dir, params, filter={"k": parse_k(k), "threshold": threshold})
    for name in pick(target, list(cfg.run.targets), "--target"):
        summary, _ = run_step(cfg, "filter", None, None, force, target=name)
        print_summary(f"filter [{name}]", summary)


def register(app: typer.Typer) -> None:
    app.command("sample")(sample)
    app.command("entropy")(entropy)
    app.command("filter")(filter_)
