"""`ccda report RUN_DIR`: Table 1 and per-epoch curves (Markdown + HTML + PNG) for a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, SetOpt, console, resolve_config, step_io


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run_dir: Annotated[Path, typer.Argument(help="Run folder (its finetune, evaluate and register steps).")],
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: RUN_DIR/report).")] = None,
        no_tracking: Annotated[bool, typer.Option("--no-tracking", help="Do not log the report to MLflow.")] = False,
    ) -> None:
        """Write report.md, report.html, table1.csv and the per-epoch PNGs (also logged to MLflow)."""
        from ..layout import RunLayout
        from ..report import run_report

        cfg = resolve_config(profile, sets, run_dir, params, tracking={"enabled": False if no_tracking else None})
        RunLayout.of(cfg).existing("ccda report")  # reads a run: a folder that holds none is refused, not created
        inputs, out_dir = step_io(cfg, "report", out=out)
        summary = run_report(cfg, inputs, out_dir)
        from rich.table import Table

        table = Table(title="Table 1", header_style="bold")
        for col in ("target", "model", "epoch", "SS", "LMS", "ICAT", "CS"):
            table.add_column(col, justify="right" if col not in ("target", "model") else "left")
        for r in summary["table1"]:
            vals = [r.get(k) for k in ("stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs")]
            table.add_row(str(r["target"]), str(r["model"]), _epoch(r.get("epoch")),
                          *("–" if v is None else f"{v:.2f}" for v in vals))
        console().print(table)
        console().print(f"wrote {out_dir / 'report.md'}, {out_dir / 'report.html'} and {len(summary['plots'])} plots")


def _epoch(value: object) -> str:
    """An epoch as a whole number; – for a row without epochs (a post-hoc arm, a published checkpoint)."""
    import numbers

    return f"{float(value):g}" if isinstance(value, numbers.Real) and value == value else "–"
