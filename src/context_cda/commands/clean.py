"""`ccda clean RUN_DIR`: remove what a finished run no longer needs (the resume state of finished steps)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import console


def register(app: typer.Typer) -> None:
    @app.command("clean")
    def clean_cmd(
        run_dir: Annotated[Path, typer.Argument(help="Run folder (run.run_dir, e.g. runs/demo).")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
    ) -> None:
        """Remove the resume state of finished steps (fine-tuning checkpoints; the augment and sample parts' shards,
        generation cache and drawn samples; the entropy steps' shards); tables, final models, metrics, predictions, the report and the registry stay, and the
        steps stay up to date."""
        from rich.markup import escape

        from ..tools.clean import clean, human, size_of

        before = size_of(run_dir) if run_dir.is_dir() else 0
        done = clean(run_dir, dry_run=dry_run)
        c = console()
        for path, n in done.removed:
            c.print(f"{'would remove' if dry_run else 'removed'} {escape(str(path))} ({human(n)})", highlight=False, soft_wrap=True)
        for path, why in done.kept:
            c.print(f"kept {escape(str(path))}: {escape(why)}", highlight=False, soft_wrap=True)
        verb = "would free" if dry_run else "freed"
        c.print(f"{run_dir}: {human(before)} before; {verb} {human(done.freed)}"
                + ("" if dry_run else f"; {human(size_of(run_dir))} now") + ".", highlight=False, soft_wrap=True)
