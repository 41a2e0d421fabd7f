"""`ccda data list|fetch|verify`: the datasets a profile reads, where each would be found, a mirror folder for an
air-gapped machine, and their checksums (:mod:`context_cda.data.datasets`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, SetOpt, resolve_config

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

NamesArg = Annotated[list[str] | None, typer.Argument(help="Dataset names (default: what --profile reads).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every dataset in the registry.")]


def profile_datasets(config: Config) -> list[tuple[str, str, str, str | None]]:
    """(dataset, used by, config key of the explicit path, its value) for everything ``config`` reads
    (:func:`context_cda.tools.preflight.needed_datasets`: the same rows ``ccda run`` checks before its first step)."""
    from ..tools.preflight import needed_datasets

    return needed_datasets(config)


def _chosen(config: Config, names: list[str] | None, every: bool) -> list[str]:
    from ..data.datasets import DATASETS, get

    if every:
        return list(DATASETS)
    if names:
        return [get(n).name for n in names]
    return list(dict.fromkeys(ds for ds, _, _, explicit in profile_datasets(config) if not explicit))


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(help="Datasets by name: list, fetch into a mirror, verify checksums.", no_args_is_help=True)
    app.add_typer(data_app, name="data")

    @data_app.command("list")
    def list_cmd(profile: ProfileOpt = None, sets: SetOpt = None, params: ParamsOpt = None,
                 every: AllOpt = False) -> None:
        """What the profile reads and where each dataset would be found now (nothing is downloaded)."""
        from ..data.datasets import DATA_DIR_ENV, DATASETS, data_cache_dir, data_dir, get, where

        cfg = resolve_config(profile, sets, params=params)
        cache = cfg.run.data_cache
        typer.echo(f"mirror (${DATA_DIR_ENV}): {data_dir() or 'not set'}; data cache: {data_cache_dir(cache)}")
        rows = ([(n, "", "", None) for n in _chosen(cfg, None, True)] if every else profile_datasets(cfg))
        for name, used_by, key, explicit in rows:
            user = f" [{used_by}]" if used_by else ""
            if explicit and name not in DATASETS:  # e.g. ingest.corpus: path
                typer.echo(f"{key}{user}\n    found: explicit {key}={explicit}")
                continue
            ds = get(name)
            found = f"explicit {key}={explicit}" if explicit else "{}: {}".format(*where(ds, cache))
            typer.echo(f"{name}{user}  {ds.description}\n    mirror path {ds.path}; checksums {ds.checksums}; "
                       f"from {ds.provenance}\n    found: {found}")

    @data_app.command("fetch")
    def fetch_cmd(
        names: NamesArg = None, profile: ProfileOpt = None, sets: SetOpt = None, params: ParamsOpt = None,
        every: AllOpt = False,
        to: Annotated[Path | None, typer.Option("--to", help="Mirror folder to fill (default: the data cache).")] = None,
        force: Annotated[bool, typer.Option("--force", help="Download again even when a copy is there.")] = False,
    ) -> None:
        """Fetch datasets into a mirror folder (for an air-gapped cluster or the model-cache PVC: then set
        CCDA_DATA_DIR to it) or into the data cache, checksums checked."""
        from ..data.datasets import fetch, get
        from ..errors import CCDAError, InputError

        cfg = resolve_config(profile, sets, params=params)
        failed, chosen = [], _chosen(cfg, names, every)
        if not chosen:
            typer.echo("nothing to fetch: every dataset the profile reads is an explicit path.")
        for name in chosen:
            try:
                root, how = fetch(get(name), to, cache=cfg.run.data_cache, force=force)
            except CCDAError as e:
                failed.append(name)
                typer.echo(f"{name}: FAILED: {e}", err=True)
                continue
            typer.echo(f"{name}: {how} -> {get(name).location(root)}")
        if failed:
            raise InputError(f"{len(failed)} dataset(s) not fetched: {', '.join(failed)} (reasons above).")

    @data_app.command("verify")
    def verify_cmd(
        names: NamesArg = None, profile: ProfileOpt = None, sets: SetOpt = None, params: ParamsOpt = None,
        every: AllOpt = False,
        folder: Annotated[Path | None, typer.Option("--dir", help="Mirror folder (default: $CCDA_DATA_DIR when it "
                                                    "is a folder, else the data cache).")] = None,
    ) -> None:
        """Check every file of the datasets against its published SHA-256 (or the one pinned at its download)."""
        from ..data.datasets import check, default_root, get
        from ..errors import InputError

        cfg = resolve_config(profile, sets, params=params)
        root = folder.expanduser() if folder else default_root(cfg.run.data_cache)
        bad: list[str] = []
        for name in _chosen(cfg, names, every):
            checks = check(get(name), root)
            if every and all(c.status.endswith("missing") for c in checks):
                typer.echo(f"{name}: not there")
                continue
            for c in checks:
                if c.status in ("mismatch", "missing"):
                    bad.append(f"{c.path} ({c.status})")
                detail = f" (got {c.got}, expected {c.expected})" if c.status == "mismatch" else ""
                typer.echo(f"{name}: {c.status:16} {c.path}{detail}")
        if bad:
            raise InputError(f"{root}: {len(bad)} file(s) missing or changed: {'; '.join(bad[:5])}"
                             f"{' ...' if len(bad) > 5 else ''}. Fetch them: ccda data fetch NAME --to {root} --force.")
