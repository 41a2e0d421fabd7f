"""`ccda run`: the whole pipeline locally, skipping what is up to date."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    AllowErrorsOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    console,
    console_err,
    resolve_config,
)


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        targets: Annotated[str | None, typer.Option(help="Comma-separated target names (default: all).")] = None,
        only: Annotated[str | None, typer.Option(help="Run only these stages (comma-separated).")] = None,
        until: Annotated[str | None, typer.Option(help="Stop after this stage.")] = None,
        force: Annotated[bool, typer.Option("--force", help="Re-run steps even when up to date.")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="List the steps and whether they are up to date.")] = False,
        allow_errors: AllowErrorsOpt = None,
    ) -> None:
        """ingest → cda → validate → augment → validate → sample → entropy → validate → filter → finetune →
        evaluate → register → report."""
        from rich.markup import escape
        from rich.table import Table

        from ..layout import REPORT_FILE, RunLayout
        from ..pipeline import is_fresh, plan, rows_out, run_pipeline, select, with_errors

        cfg = resolve_config(profile, sets, run_dir, params, run={"allow_errors": allow_errors})
        tlist = [t.strip() for t in targets.split(",")] if targets else None
        olist = [s.strip() for s in only.split(",")] if only else None
        from ..runtime.progress import filtered_note

        c = console()
        c.print(f"[bold]context-cda run[/] profile={cfg.profile or '-'} run_dir={cfg.run_dir()}")
        if filtered_note():
            c.print(f"[dim]{escape(filtered_note())}[/]", soft_wrap=True)
        if dry_run:  # refuses what the run would refuse without starting anything: the folder, names, families
            RunLayout.of(cfg).check(create=False)
            _dry_run_checks(cfg, select(plan(cfg, tlist), olist, until))
            for step in select(plan(cfg, tlist), olist, until):
                c.print(f"  {'up to date' if is_fresh(step, cfg) else 'to run':>10}  {escape(step.name)}")
            return

        def on_event(kind, step, res):
            if kind == "start":
                c.rule(f"[bold cyan]{escape(step.name)}")
            elif kind == "done" and res.errors:
                c.print(f"[bold yellow]! {escape(step.name)} in {res.seconds:.1f}s with {res.errors} ERROR items "
                        f"(allowed; not marked up to date)[/] {rows_out(res.summary)}")
            elif kind == "done":
                c.print(f"[green]✓[/] {escape(step.name)} in {res.seconds:.1f}s {rows_out(res.summary)}")
            elif kind == "skipped":
                c.print(f"[dim]- {escape(step.name)} up to date, skipped[/]")
            elif kind == "failed":
                c.print(f"[red]✗ {escape(step.name)} failed after {res.seconds:.1f}s[/]")

        results = run_pipeline(cfg, tlist, olist, until, force, on_event)
        table = Table(title="context-cda run", header_style="bold")
        for col in ("step", "status", "seconds", "output"):
            table.add_column(col, justify="right" if col == "seconds" else "left")
        for r in results:
            table.add_row(escape(r.step.name), r.status, f"{r.seconds:.1f}", rows_out(r.summary))
        c.print(table)
        report = RunLayout.of(cfg).report_dir / REPORT_FILE
        if report.is_file():
            c.print(f"report: {report}  (HTML beside it)")
        failed = with_errors(results)  # each error item once (a part's errors are in its merge's too)
        if failed:
            parts = ", ".join(f"{escape(r.step.name)}: {r.errors}" for r in failed)
            console_err().print(f"[bold red]WARNING: {sum(r.errors for r in failed)} items ended as errors "
                                f"(transient failures, let through by --allow-errors): {parts}. Those steps are not "
                                "up to date: rerun `ccda run` to retry exactly these items.[/]")


def _dry_run_checks(cfg, steps) -> None:
    """The run's own checks that need no download, model or server: the benchmark names the steps score, the
    post-hoc arms' model families and a lexicon that is built in or a local file (its words, its ambiguous words)."""
    from pathlib import Path

    from ..errors import ConfigError
    from ..pipeline import check_arm_families
    from ..tools.preflight import check_benchmarks

    problems = check_benchmarks(cfg, [s.row.step for s in steps])
    if problems:
        raise ConfigError(" ".join(problems))
    check_arm_families(cfg, steps)
    local = cfg.lexicon.source == "default" or Path(cfg.lexicon.source).expanduser().is_file()
    if local and any(s.row.step in ("ingest", "cda") for s in steps):
        from ..cda.stage import attribute_lexicon

        attribute_lexicon(cfg)
