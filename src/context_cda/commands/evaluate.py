"""`ccda evaluate`: bias and downstream benchmarks (see the registry) for a model reference or a target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import ParamsOpt, ProfileOpt, RunDirOpt, SetOpt, console, resolve_config


def print_metrics(title: str, summary: dict[str, Any], aggregate: dict[str, Any]) -> None:
    """One row per metric: benchmark, metric, value, ideal/direction, items."""
    from rich.table import Table

    from ..evaluate import get_benchmark
    from ..evaluate.registry import better_text

    table = Table(title=title, header_style="bold")
    for col, just in (("benchmark", "left"), ("metric", "left"), ("value", "right"), ("better", "left"),
                      ("N", "right"), ("notes", "left")):
        table.add_column(col, justify=just)
    for bname, agg in aggregate.get("benchmarks", {}).items():
        bench = get_benchmark(bname)
        overall = agg.get("overall", {})
        note = f"mode={agg['mode']}" if "mode" in agg else ""
        if bname == "crows":
            note += f"; neutral={overall.get('neutral')}"
        if "seconds" in agg:
            note += ("; " if note else "") + f"{agg['seconds']:.0f} s"
        for j, m in enumerate(bench.metrics):
            v = overall.get(m.key)
            if v is None or v != v:
                continue
            digits = 2 if abs(v) >= 1.5 or m.ideal in (50.0, 100.0) else 4
            table.add_row(bname if j == 0 else "", m.key.upper(), f"{v:.{digits}f}", better_text(m),
                          str(overall.get("count", "")) if j == 0 else "", note if j == 0 else "")
        for bt, sub in agg.get("by_bias_type", {}).items():
            if len(agg.get("by_bias_type", {})) > 1:
                for m in bench.metrics[:1]:
                    table.add_row(bname, f"{m.key.upper()} [{bt}]", f"{sub.get(m.key, float('nan')):.2f}", "",
                                  str(sub.get("count", "")), "")
    console().print(table)
    console().print(
        f"model={summary['model']} family={summary['family']} bias_type={summary['bias_type']}", highlight=False
    )


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        model: Annotated[
            str | None,
            typer.Option("--model", "-m", help="Model reference (hub id, folder, .gguf, package:NAME, tiny:ARCH). "
                         "Default: every model in run.targets (or those named with --target)."),
        ] = None,
        target: Annotated[
            list[str] | None, typer.Option("--target", "-t", help="Target short name from run.targets (repeatable).")
        ] = None,
        name: Annotated[str | None, typer.Option("--name", help="Short name for outputs (default: from --model).")] = None,
        arm: Annotated[str, typer.Option("--arm", help="Arm label for the output folder.")] = "vanilla",
        benchmarks: Annotated[
            str | None,
            typer.Option("--benchmarks", "-b", help="Comma-separated: stereoset,crows,next-token (model only); "
                         "glue,biasbios,stsb,nli-bias (fine-tune a head first).")
        ] = None,
        bias_type: Annotated[
            str | None, typer.Option("--bias-type", help="gender | race | religion | profession | ... | all.")
        ] = None,
        crows_mode: Annotated[
            str | None, typer.Option("--crows-mode", help="auto | nangia | bias-bench | lm-eval.")
        ] = None,
        stereoset_path: Annotated[
            Path | None, typer.Option("--stereoset-path", help="Local StereoSet file (JSON or flattened JSONL).")
        ] = None,
        crows_path: Annotated[Path | None, typer.Option("--crows-path", help="Local CrowS-Pairs CSV.")] = None,
        glue_path: Annotated[
            Path | None, typer.Option("--glue-path", help="Local GLUE root (SST-2/, RTE/, QNLI/).")
        ] = None,
        biasbios_path: Annotated[
            Path | None, typer.Option("--biasbios-path", help="Local Bias in Bios CSV/folder/parquet.")
        ] = None,
        stsb_path: Annotated[Path | None, typer.Option("--stsb-path", help="Local STS-B folder.")] = None,
        stsb_bias_path: Annotated[
            Path | None, typer.Option("--stsb-bias-path", help="Local Bias-STS-B pairs TSV.")
        ] = None,
        mnli_path: Annotated[
            Path | None, typer.Option("--mnli-path", help="Local MNLI folder (NLI-Bias head training).")
        ] = None,
        nli_words_path: Annotated[
            Path | None, typer.Option("--nli-words-path", help="Local Dev et al. (2020) word_lists folder.")
        ] = None,
        gender_words_path: Annotated[
            Path | None, typer.Option("--gender-words-path", help="Folder with male_word_file.txt/female_word_file.txt.")
        ] = None,
        batch_size: Annotated[int | None, typer.Option("--batch-size", help="Sequences per forward pass.")] = None,
        max_items: Annotated[int | None, typer.Option("--max-items", help="Only the first N items.")] = None,
        out_dir: Annotated[
            Path | None, typer.Option("--out-dir", help="Output folder (default: <run_dir>/evaluate/<name>/<arm>).")
        ] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
    ) -> None:
        """Score a model on bias and downstream benchmarks; writes predictions + aggregate.json per benchmark.

        StereoSet (SS, LMS, ICAT), CrowS-Pairs (CS) and next-token gender balance read the model as it is; GLUE,
        Bias in Bios, STS-B and NLI-Bias fine-tune a fresh head on it first (settings: evaluate.head.*)."""
        from ..errors import ConfigError
        from ..evaluate import run_evaluate
        from ..io import read_json

        flags = {
            "benchmarks": [b.strip() for b in benchmarks.split(",") if b.strip()] if benchmarks else None,
            "bias_type": bias_type,
            "crows_mode": crows_mode,
            "stereoset_path": str(stereoset_path) if stereoset_path else None,
            "crows_path": str(crows_path) if crows_path else None,
            "batch_size": batch_size,
            "max_items": max_items,
        }
        nested = {
            ("glue", "path"): glue_path, ("biasbios", "path"): biasbios_path, ("stsb", "path"): stsb_path,
            ("stsb", "bias_path"): stsb_bias_path, ("nli_bias", "train_path"): mnli_path,
            ("nli_bias", "words_path"): nli_words_path, ("next_token", "words_path"): gender_words_path,
        }
        for (sec, key), value in nested.items():
            if value is not None:
                flags.setdefault(sec, {})[key] = str(value)
        cfg = resolve_config(profile, sets, run_dir, params, evaluate=flags)
        if model:
            jobs = [(name, model)]
        else:
            names = target or list(cfg.run.targets)
            unknown = [n for n in names if n not in cfg.run.targets]
            if unknown:
                raise ConfigError(f"--target {', '.join(unknown)}: not in run.targets ({', '.join(cfg.run.targets)}).")
            jobs = [(n, cfg.run.targets[n]) for n in names]
        for short, ref in jobs:
            from ..models import parse_ref

            short = short or parse_ref(ref).name
            if out_dir:
                dest = out_dir if len(jobs) == 1 else out_dir / short
            else:
                dest = cfg.run_dir() / "evaluate" / short / arm
            summary = run_evaluate(cfg, {}, dest, ref, name=short, progress=progress)
            print_metrics(f"evaluate [{short}]", summary, read_json(Path(dest) / "aggregate.json"))
            console().print(f"outputs: {dest}", highlight=False)
