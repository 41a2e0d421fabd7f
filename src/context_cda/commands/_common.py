"""Options and helpers shared by the stage commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import Config, load_config

ProfileOpt = Annotated[
    str | None, typer.Option("--profile", "-p", help="Run profile: configs/<profile>.yaml (demo, paper, tiny).")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config value: --set section.key=value (repeatable)."),
]
RunDirOpt = Annotated[  # a str, not a Path: Path("") would silently become the current folder
    str | None, typer.Option("--run-dir", help="Run folder (default: run.run_dir from the config).")
]
TargetsOpt = Annotated[
    list[str] | None, typer.Option("--target", help="Target short name (repeatable; default: all).")
]
ArmsOpt = Annotated[list[str] | None, typer.Option("--arm", help="Arm (repeatable; default: train.arms).")]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]
AllowErrorsOpt = Annotated[
    bool | None,
    typer.Option("--allow-errors/--no-allow-errors",
                 help="Go on when items fail for a transient reason (server errors, rate limits, timeouts): they "
                 "are reported loudly and retried by the next run (default: run.allow_errors; without it such a "
                 "stage exits with code 75 after saving its finished items)."),
]
ParamsOpt = Annotated[
    Path | None, typer.Option("--params", help="params.yaml to read (default: nearest one, or $CCDA_PARAMS).")
]


def resolve_config(
    profile: str | None,
    sets: list[str] | None,
    run_dir: str | Path | None = None,
    params: Path | None = None,
    **section_flags: dict[str, Any],
) -> Config:
    """Load the config; explicit stage flags (non-None values) override --set, which overrides files."""
    from ..config import parse_overrides

    overrides = parse_overrides(sets)
    for section, values in section_flags.items():
        for key, value in values.items():
            if isinstance(value, dict):  # a nested section's flags (e.g. evaluate.glue.path): merge, key by key
                overrides.setdefault(section, {}).setdefault(key, {}).update(value)
            elif value is not None:
                overrides.setdefault(section, {})[key] = value
    if run_dir is not None:
        overrides.setdefault("run", {})["run_dir"] = str(run_dir)
    return load_config(profile, overrides, params_file=params)


def given_file(param: typer.CallbackParam, value: Path | None) -> Path | None:
    """The callback of an input option (``--input``, ``--samples``): a file or folder the user named must exist
    (the stages' own "run the stage that produces it first" is for the inputs they find in the run folder)."""
    if value is not None and not str(value).startswith("s3:") and not value.expanduser().exists():
        from ..errors import InputError

        flag = param.opts[0] if param.opts else "--input"
        raise InputError(f"{flag} {value}: no such file (relative paths start at {Path.cwd()}). Check the path, "
                         f"or leave {flag} out to read the stage's input from the run folder (--run-dir).")
    return value


ForceOpt = Annotated[
    bool, typer.Option("--force", help="Run the step even when it is up to date (its marker records this config "
                       "and these inputs: another command, `ccda run`, `dvc repro` or Kubeflow finished it).")
]


def run_step(cfg: Config, step: str, overrides: dict[str, Any] | None = None, out: Path | None = None,
             force: bool = False, inputs: dict[str, Path] | None = None, extra: dict[str, Any] | None = None,
             **keys: Any) -> tuple[dict[str, Any], Path]:
    """Run one step of the stage table through the step envelope (:func:`context_cda.steps.run`: the lock, the
    SIGTERM guard, the manifest, the item-error policy, the up-to-date marker), the same one the runner, DVC and
    Kubeflow use. Its inputs and folder come from the table; ``overrides`` (non-None values) replace inputs by
    name, ``inputs`` replaces them all, ``out`` the folder; ``extra`` goes to the stage function. A step that is
    up to date (whichever door finished it) is skipped unless ``force``. Returns (summary, folder). The run
    folder's layout version is checked (and recorded in a new folder)."""
    from .. import steps as E
    from ..layout import RunLayout

    layout = RunLayout.of(cfg).check()
    st = E.make(cfg, step, layout, overrides, out, **keys)
    if inputs is not None:
        st.inputs = {k: Path(v) for k, v in inputs.items()}
    if not force and E.agreed_fresh(st, cfg):
        from rich.markup import escape

        console().print(escape(f"{st.name}: up to date, skipped ({st.out_dir}; --force runs it again)"),
                        highlight=False)
        return E.summary_of(st.out_dir), st.out_dir
    return E.run(st, cfg, **(extra or {})).summary, st.out_dir


ShardOpt = Annotated[
    int | None,
    typer.Option("--shard", help="Run only this generation part (0..pipeline.generation_shards-1), no merge."),
]
MergeOpt = Annotated[bool, typer.Option("--merge", help="Only merge the generation parts that ran.")]


def run_parts(cfg: Config, step: str, shard: int | None, merge: bool, overrides: dict[str, Any],
              out: Path | None = None, force: bool = False, extra: dict[str, Any] | None = None,
              ) -> tuple[dict[str, Any] | None, Path]:
    """``ccda augment`` / ``ccda sample``: every generation part of ``<step>-part`` and then the merge ``step``
    (the default), one part (``--shard N``), or only the merge (``--merge``), each through the step envelope
    (``extra``: the parts' stage options). Returns the merge's summary (None after a single part) and the
    folder it wrote."""
    from ..errors import ConfigError

    parts = cfg.pipeline.generation_shards
    if shard is not None and (merge or not 0 <= shard < parts):
        raise ConfigError(f"--shard {shard}: pipeline.generation_shards is {parts}, so parts are 0..{parts - 1} "
                          "(and --shard runs one part, without --merge).")
    for i in ([] if merge else [shard] if shard is not None else range(parts)):
        summary, part_dir = run_step(cfg, f"{step}-part", overrides, None, force, extra=extra, shard=i)
        print_summary(f"{step} part {i}", summary)
        if shard is not None:
            return None, part_dir
    return run_step(cfg, step, overrides, out, force)


def pick(names: list[str] | None, known: list[str], what: str) -> list[str]:
    """``names`` (default: all ``known``), refusing unknown ones with the list of known ones."""
    from ..errors import ConfigError

    chosen = list(names or known)
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ConfigError(f"{what} {', '.join(unknown)}: not configured ({', '.join(known) or 'none'}).")
    return chosen


def pick_arms(cfg: Config, names: list[str] | None, step: str, target: str) -> list[str]:
    """The arms ``step`` runs for ``target``: ``names`` (default: all of them), each checked to be one of them; an
    arm of another kind is refused with the command that handles it."""
    from .. import arms as A
    from ..errors import ConfigError
    from ..stages import arm_values

    known = arm_values(cfg, step, target)
    for name in names or []:
        if name in known:
            continue
        spec = A.parse(name, cfg.train.k, A.published_refs(cfg, target))
        where = {"trained": "ccda finetune", "projection": "ccda debias, then ccda evaluate --arm",
                 "scoring": "ccda evaluate --arm", "published": "ccda evaluate --arm"}[spec.kind]
        if spec.kind not in A.STEP_KINDS.get(step, ("trained",)):
            raise ConfigError(f"--arm {name}: a {spec.kind} arm is not run by this command; use {where} {name}.")
        raise ConfigError(f"--arm {name}: not an arm of target {target} ({', '.join(known) or 'none'}); add it to "
                          "train.arms (baselines.targets limits the baseline arms to some targets).")
    return list(names or known)


#: the width of the console off a terminal (a log file, a pod): wide enough that a step's line is not broken
LOG_WIDTH = 120


def console():
    """stdout; off a terminal, lines are not wrapped at 80 columns (a log reads one event per line). The other
    ranks of a distributed job (torchrun) print nothing: rank 0 speaks for the job."""
    import os
    import sys

    from rich.console import Console

    if os.environ.get("RANK", "0") != "0":
        return Console(file=open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the console
    return Console() if sys.stdout.isatty() else Console(width=LOG_WIDTH, soft_wrap=True)


def console_err():
    import sys

    from rich.console import Console

    return Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=LOG_WIDTH, soft_wrap=True)


def print_summary(title: str, summary: dict[str, Any]) -> None:
    """Print a stage summary as a two-column table; nested mappings become 'key.sub' rows."""
    from rich.table import Table

    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                add(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, list | tuple):
            table.add_row(prefix, ", ".join(map(str, value)))
        elif isinstance(value, float):
            table.add_row(prefix, f"{value:.4g}")
        else:
            table.add_row(prefix, str(value))

    add("", summary)
    console().print(table)
