"""`ccda cda`: sentences with words of the run's attribute -> counterfactuals (or neutral rewrites)."""

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
    given_file,
    print_summary,
    resolve_config,
    run_step,
)


def register(app: typer.Typer) -> None:
    @app.command("cda")
    def cda(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        mode: Annotated[str | None, typer.Option(help="two-sided | one-sided | cds | neutral (gender: singular they "
                                                 "and neutral nouns).")] = None,
        attribute: Annotated[str | None, typer.Option(help="gender | race | religion (run.attribute).")] = None,
        mapping: Annotated[str | None, typer.Option(help="race, religion: permutations | bias-bench.")] = None,
        swap_names: Annotated[bool | None, typer.Option("--swap-names/--no-swap-names", help="Swap first names.")] = None,
        names_path: Annotated[Path | None, typer.Option(help="JSON list of [name, name] pairs.")] = None,
        lexicon: Annotated[str | None, typer.Option(help="default | zhao2018 | bias-bench | lu2018 | winobias | FILE "
                                                    "(race, religion: default | bias-bench | FILE.json).")] = None,
        lexicon_path: Annotated[Path | None, typer.Option(help="File/folder for a published lexicon.")] = None,
        input: Annotated[Path | None, typer.Option("--input", callback=given_file, help="sentences.parquet (default: <run_dir>/ingest).")] = None,
        out: Annotated[Path | None, typer.Option(help="Output folder (default: <run_dir>/cda).")] = None,
        force: ForceOpt = False,
    ) -> None:
        """Swap the attribute's words (case, possessives and roles kept) in every ingested sentence: gender's
        counterpart, or one counterfactual per other group for race and religion (docs/cda.md)."""
        from ..cda.stage import attribute_lexicon
        from ._common import console

        cfg = resolve_config(
            profile, sets, run_dir, params,
            cda={"mode": mode, "mapping": mapping, "swap_names": swap_names,
                 "names_path": str(names_path) if names_path else None},
            lexicon={"source": lexicon, "path": str(lexicon_path) if lexicon_path else None},
            run={"attribute": attribute},
        )
        lex = attribute_lexicon(cfg)
        if lex.issues and cfg.lexicon.on_conflict == "report":
            c = console()
            c.print(f"[yellow]lexicon {lex.source}: {len(lex.issues)} conflict(s), first mapping kept:[/]")
            for issue in lex.issues[:20]:
                c.print(f"  {issue}", highlight=False)
            if len(lex.issues) > 20:
                c.print(f"  ... and {len(lex.issues) - 20} more")
        summary, _ = run_step(cfg, "cda", {"sentences": input}, out, force)
        print_summary("cda", summary)
