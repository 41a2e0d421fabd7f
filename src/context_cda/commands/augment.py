"""`ccda augment`: rephrase each CDA counterfactual with natural context (resumable, cached);
`ccda augment review --input FILE`: review the outputs of any generator and write a verdict table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    AllowErrorsOpt,
    ForceOpt,
    MergeOpt,
    NoProgressOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    ShardOpt,
    console,
    given_file,
    print_summary,
    resolve_config,
    run_parts,
)


def register(app: typer.Typer) -> None:
    group = typer.Typer(add_completion=False, no_args_is_help=False)
    app.add_typer(group, name="augment")

    @group.callback(invoke_without_command=True)
    def augment(
        ctx: typer.Context,
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        input_path: Annotated[
            Path | None,
            typer.Option("--input", callback=given_file, help="CDA table (default: the one validation kept, in the run folder)."),
        ] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run_dir>/augment).")] = None,
        backend: Annotated[str | None, typer.Option("--backend", help="hf | vllm | openai.")] = None,
        model: Annotated[str | None, typer.Option("--model", help="Generator model reference / served name.")] = None,
        base_url: Annotated[str | None, typer.Option("--base-url", help="openai backend endpoint.")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="Only the first N counterfactuals.")] = None,
        batch_size: Annotated[int | None, typer.Option("--batch-size", help="Prompts per generate call.")] = None,
        no_progress: NoProgressOpt = False,
        allow_errors: AllowErrorsOpt = None,
        shard: ShardOpt = None,
        merge: MergeOpt = False,
        force: ForceOpt = False,
    ) -> None:
        """Contextual counterfactuals: a generator LM rephrases each CDA counterfactual (kill and rerun to resume).

        Runs every generation part (pipeline.generation_shards) and merges them; --shard N runs one part, --merge
        only the merge. `ccda augment review --input FILE` reviews outputs of any generator instead.
        """
        if ctx.invoked_subcommand is not None:
            return
        flags = {"backend": backend, "model": model, "limit": limit, "batch_size": batch_size}
        sets = list(sets or [])
        if base_url:
            sets.append(f"augment.openai.base_url={base_url}")
        cfg = resolve_config(profile, sets, run_dir, params, augment=flags, run={"allow_errors": allow_errors})
        summary, out_dir = run_parts(cfg, "augment", shard, merge, {"counterfactuals": input_path}, out, force,
                                     {"progress": not no_progress})
        if summary is not None:
            print_summary("augment", summary)
        console().print(f"wrote {out_dir} (augmented, rejected and error tables)")

    @group.command("review")
    def review(
        input_path: Annotated[
            Path, typer.Option("--input", callback=given_file, help="Outputs to review: .parquet, .jsonl or .csv with columns "
                               "counterfactual and output (or augmented); original, swapped_terms optional."),
        ],
        out: Annotated[Path | None, typer.Option(
            "--out", help="Verdict table, .parquet or .jsonl (default: <input>.review.parquet beside the input).")
        ] = None,
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
        judge: Annotated[str | None, typer.Option(
            "--judge", help="Meaning judge: off | nli | embedding | llm (default: augment.review.meaning).")] = None,
        output_column: Annotated[str | None, typer.Option(
            "--output-column", help="Column holding the generated text (default: output, else augmented).")] = None,
        counterfactual_column: Annotated[str | None, typer.Option(
            "--counterfactual-column", help="Column holding the rephrased sentence (default: counterfactual).")
        ] = None,
    ) -> None:
        """Review generated rephrasings from a file (any generator): one verdict row per output, every reason."""
        from ..augment.verdicts import review_file

        sets = list(sets or [])
        if judge:
            sets.append(f"augment.review.meaning={judge}")
        cfg = resolve_config(profile, sets, None, params)
        summary = review_file(cfg, input_path, out, output_column=output_column,
                              counterfactual_column=counterfactual_column)
        print_summary("augment review", summary)
