"""`ccda export`: a registered version as a folder to upload to a model hub, or the project's StereoSet and CrowS-Pairs
scoring as lm-evaluation-harness tasks (:mod:`context_cda.publish`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, SetOpt, console, resolve_config

ToOpt = Annotated[Path | None, typer.Option("--to", help="A new or empty folder to write.")]


def export_version_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", help="Registered model name, e.g. gpt2-debiased.")] = None,
    version: Annotated[str | None, typer.Option("--version", help="Its version number.")] = None,
    to: ToOpt = None,
    license_id: Annotated[str | None, typer.Option(
        "--license", help="The base model's licence (a Hub licence id such as apache-2.0), when its files do not "
        "record one (tracking.card.licenses names it in the config).")] = None,
    repo_id: Annotated[str | None, typer.Option(
        "--repo-id", help="The Hub repository the folder will be uploaded to (OWNER/NAME): the evaluation results "
        "name its page as their source.")] = None,
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    params: ParamsOpt = None,
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: see tracking.uri).")
    ] = None,
) -> None:
    """Write a registered version as a folder a user can upload to a model hub as is: weights (safetensors),
    tokenizer, model card (README.md) and evaluation results (.eval_results/); no pickles."""
    if ctx.invoked_subcommand is not None:
        return
    from ..errors import ConfigError
    from ..publish.export import export_version

    missing = [flag for flag, value in (("--model", model), ("--version", version), ("--to", to)) if not value]
    if missing:
        raise ConfigError(f"ccda export: name {', '.join(missing)} (ccda export --model NAME --version N --to DIR), "
                          "or use `ccda export lm-eval-tasks --to DIR`.")
    cfg = resolve_config(profile, sets, params=params, tracking={"uri": tracking_uri})
    summary = export_version(cfg, str(model), str(version), Path(str(to)), license_id=license_id, repo_id=repo_id)
    console().print(f"{summary['model']} v{summary['version']} -> {summary['to']}: {len(summary['files'])} files "
                    f"(card, {summary['eval_results']} evaluation results)")


def lmeval_tasks_cmd(
    to: ToOpt = None,
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    params: ParamsOpt = None,
) -> None:
    """Write StereoSet and CrowS-Pairs as lm-evaluation-harness tasks (YAML, utils.py and the items) that score a
    causal LM as `ccda evaluate` does in bias-bench mode; the folder's README says how to run them."""
    from ..errors import ConfigError
    from ..publish.lmeval import export_lmeval_tasks

    if to is None:
        raise ConfigError("ccda export lm-eval-tasks: name the folder to write (--to DIR).")
    cfg = resolve_config(profile, sets, params=params)
    summary = export_lmeval_tasks(cfg, to)
    items = ", ".join(f"{b} {n}" for b, n in summary["items"].items())
    console().print(f"lm-eval tasks {', '.join(summary['tasks'])} (tag {summary['tag']}; items: {items}) -> "
                    f"{summary['to']}\nrun: lm_eval --model hf --model_args pretrained=MODEL --include_path "
                    f"{summary['to']} --tasks {summary['tag']}")


def register(app: typer.Typer) -> None:
    export_app = typer.Typer(help="Export a registered version for a model hub, or the bias benchmarks as "
                             "lm-evaluation-harness tasks.", invoke_without_command=True, no_args_is_help=False)
    export_app.callback()(export_version_cmd)
    export_app.command("lm-eval-tasks")(lmeval_tasks_cmd)
    app.add_typer(export_app, name="export")
