"""`ccda config show|defaults|dvc|stages`: the resolved configuration, the dvc.yaml the stage table makes, the
table itself."""

from __future__ import annotations

import typer

from ._common import ParamsOpt, ProfileOpt, SetOpt, resolve_config


def register(app: typer.Typer) -> None:
    cfg_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
    app.add_typer(cfg_app, name="config")

    @cfg_app.command("show")
    def show(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
        section: str | None = typer.Option(None, "--section", help="Print only this section."),
    ) -> None:
        """Print the resolved config (defaults < params.yaml < profile < flags) as YAML."""
        from ..config import dump_yaml

        cfg = resolve_config(profile, sets, params=params)
        data = cfg.to_dict()
        if section:
            if section not in data:
                raise typer.BadParameter(f"unknown section {section!r}; known: {', '.join(data)}")
            data = {section: data[section]}
        typer.echo(dump_yaml(data), nl=False)

    @cfg_app.command("defaults")
    def defaults() -> None:
        """Print every default (this is what params.yaml holds)."""
        from ..config import defaults_dict, dump_yaml

        typer.echo(dump_yaml(defaults_dict()), nl=False)

    @cfg_app.command("dvc")
    def dvc(profile: ProfileOpt = None, sets: SetOpt = None, params: ParamsOpt = None) -> None:
        """Print dvc.yaml as the stage table generates it (`ccda config dvc > dvc.yaml`)."""
        from ..tools.dvcgen import dvc_yaml

        typer.echo(dvc_yaml(resolve_config(profile, sets, params=params)), nl=False)

    @cfg_app.command("stages")
    def stages_cmd() -> None:
        """Print the stage table (steps, functions, config keys, fan-out, inputs, folders) as Markdown."""
        from ..stages import markdown

        typer.echo(markdown(), nl=False)
