"""`ccda register`: log fine-tuned models to MLflow, register them and run the promotion gate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    ArmsOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    TargetsOpt,
    console,
    pick,
    print_summary,
    resolve_config,
    step_io,
)


def register_cmd(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    target: TargetsOpt = None,
    arm: ArmsOpt = None,
    evaluation: Annotated[
        Path | None,
        typer.Option("--evaluation", help="JSON {metric: value} overriding metrics.csv's last epoch "
                     "(one target and arm only)."),
    ] = None,
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: see tracking.uri).")
    ] = None,
) -> None:
    """Register <target>-debiased versions with bias-metric tags; candidate/champion aliases by the gate."""
    from ..errors import ConfigError
    from ..io import file_lock
    from ..layout import LOCK_FILE
    from ..publish import run_register_target

    cfg = resolve_config(profile, sets, run_dir, params, tracking={"uri": tracking_uri})
    targets = pick(target, list(cfg.run.targets), "--target")
    arms = pick(arm, list(cfg.train.arms), "--arm")
    if evaluation and len(targets) * len(arms) != 1:
        raise ConfigError("--evaluation needs exactly one --target and one --arm.")
    for t in targets:
        folders, step_dir = step_io(cfg, "register", target=t)
        with file_lock(step_dir / LOCK_FILE, f"register[{t}]"):  # the runner's register step holds the same lock
            result = run_register_target(cfg, folders, step_dir, t, arms=arms, evaluation=evaluation)
        for a, summary in result["arms"].items():
            print_summary(f"register {t}/{a}", {k: v for k, v in summary.items()
                                                if k not in ("decision", "verdict", "note")})
            console().print(register_line(summary, a), highlight=False, markup=False)


def register_line(summary: dict, arm: str) -> str:
    """``smollm2-135m-debiased v3 (context-cda): refused: not shown (underpowered: ...) - kept as candidate``: the
    gate's verdict (the two-word decision for a summary that has none) and where the version went."""
    from ..tracking.decisions import decision, verdict_line

    registered = summary.get("version") is not None
    where = ("promoted to champion" if summary.get("promote") else "kept as candidate") if registered else (
        "not registered (tracking off): no alias moved")
    verdict = summary.get("verdict") or summary.get("decision") or decision(bool(summary.get("promote")))
    version = f" v{summary['version']}" if registered else ""
    return f"{summary['model_name']}{version} ({arm}): {verdict_line(verdict, summary.get('note', ''))} - {where}"


def register(app: typer.Typer) -> None:
    app.command("register")(register_cmd)
