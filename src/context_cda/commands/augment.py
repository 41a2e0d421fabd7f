"""`ccda augment`: rephrase each CDA counterfactual with natural context (resumable, cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, RunDirOpt, SetOpt, console, print_summary, resolve_config


def default_augment_input(run_dir: Path) -> Path:
    """The validated CDA table when the validate stage ran, else the CDA stage's output."""
    from .. import schemas as S

    valid = run_dir / "validate" / "cda" / S.VALID_FILE
    return valid if valid.is_file() else run_dir / "cda" / S.CDA_FILE


def register(app: typer.Typer) -> None:
    @app.command("augment")
    def augment(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        input_path: Annotated[
            Path | None,
            typer.Option("--input", help="CDA table (default: validate/cda/valid.parquet if present, else "
                         "cda/counterfactuals.parquet)."),
        ] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run_dir>/augment).")] = None,
        backend: Annotated[str | None, typer.Option("--backend", help="hf | vllm | openai.")] = None,
        model: Annotated[str | None, typer.Option("--model", help="Generator model reference / served name.")] = None,
        base_url: Annotated[str | None, typer.Option("--base-url", help="openai backend endpoint.")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="Only the first N counterfactuals.")] = None,
        batch_size: Annotated[int | None, typer.Option("--batch-size", help="Prompts per generate call.")] = None,
        no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    ) -> None:
        """Contextual counterfactuals: a generator LM rephrases each CDA counterfactual (kill and rerun to resume)."""
        from ..augment import run_augment

        flags = {"backend": backend, "model": model, "limit": limit, "batch_size": batch_size}
        sets = list(sets or [])
        if base_url:
            sets.append(f"augment.openai.base_url={base_url}")
        cfg = resolve_config(profile, sets, run_dir, params, augment=flags)
        rd = cfg.run_dir()
        src = input_path or default_augment_input(rd)
        out_dir = out or rd / "augment"
        summary = run_augment(cfg, {"counterfactuals": src}, out_dir, progress=not no_progress)
        print_summary("augment", summary)
        console().print(f"wrote {out_dir / 'augmented.parquet'} and {out_dir / 'rejected.parquet'}")
