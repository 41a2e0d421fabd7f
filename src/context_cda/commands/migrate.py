"""`ccda migrate`: bring a run folder of an older layout up to this one, in place (context_cda.tools.migrate)."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, RunDirOpt, SetOpt, console, resolve_config


def migrate(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")] = False,
) -> None:
    """Migrate the run folder to this version's layout, keeping its outputs (pass the run's --profile/--set)."""
    from ..tools.migrate import migrate_run

    cfg = resolve_config(profile, sets, run_dir, params)
    done = migrate_run(cfg, dry_run=dry_run)
    c = console()
    if not done["actions"] and done["from"] in (None, done["to"]):
        c.print(f"{done['run_dir']}: already layout {done['to']}; nothing to do.", highlight=False)
        return
    for what in done["actions"]:
        c.print(f"  {'would ' if dry_run else ''}{what}", highlight=False)
    verb = "would migrate" if dry_run else "migrated"
    c.print(f"{verb} {done['run_dir']}: layout {done['from']} -> {done['to']}; next: `ccda run` (same options).",
            highlight=False)


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
