"""`ccda ingest`: corpus -> gendered sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    ForceOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    print_summary,
    resolve_config,
    run_step,
)


def register(app: typer.Typer) -> None:
    @app.command("ingest")
    def ingest(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        corpus: Annotated[str | None, typer.Option(help="Known corpus name (news-commentary-v15, wikitext-2-test).")] = None,
        path: Annotated[Path | None, typer.Option(help="Local file or folder to read instead of a download.")] = None,
        text_column: Annotated[str | None, typer.Option(help="Text column of .jsonl/.csv/.parquet input.")] = None,
        encoding: Annotated[str | None, typer.Option(help="Encoding of text inputs.")] = None,
        encoding_errors: Annotated[str | None, typer.Option(help="strict | replace (undecodable bytes).")] = None,
        sample_n: Annotated[int | None, typer.Option("--sample-n", "-n", help="Sample N sentences (seeded).")] = None,
        out: Annotated[Path | None, typer.Option(help="Output folder (default: <run_dir>/ingest).")] = None,
        force: ForceOpt = False,
    ) -> None:
        """Read a corpus, split it into sentences, keep the gendered ones, dedupe and sample."""
        flags = {"corpus": corpus, "path": str(path) if path else None, "text_column": text_column,
                 "encoding": encoding, "encoding_errors": encoding_errors, "sample_n": sample_n}
        cfg = resolve_config(profile, sets, run_dir, params, ingest=flags)
        summary, _ = run_step(cfg, "ingest", None, out, force)
        print_summary("ingest", summary)
