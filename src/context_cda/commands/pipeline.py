"""`ccda pipeline compile|submit|schedule`: the Kubeflow Pipelines front door.

The pipeline itself (``pipelines/``, built from ``components/``) lives beside the package in the project checkout
and in the project images; kfp is imported only inside these commands (extra ``context-cda[kfp]``).
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import CCDAError, ConfigError, ServiceError
from ._common import ParamsOpt, ProfileOpt, SetOpt, console, resolve_config

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

VariantOpt = Annotated[
    str, typer.Option("--variant", help="gpu: cluster pipeline (GPU nodes, secrets, PVC); cpu: no GPU settings.")
]
HostOpt = Annotated[
    str | None,
    typer.Option("--host", help="KFP API URL, e.g. http://ml-pipeline-ui.kubeflow (default: pipeline.host, $KFP_HOST)."),
]
PackageOpt = Annotated[
    Path | None, typer.Option("--package", help="A compiled pipeline YAML to use instead of compiling now.")
]


class MissingExtraError(CCDAError):
    """An optional dependency group is not installed."""


def _require_kfp() -> None:
    try:
        importlib.import_module("kfp")
        importlib.import_module("kfp.kubernetes")
    except ImportError as e:
        raise MissingExtraError(
            f"`ccda pipeline` needs Kubeflow Pipelines' SDK ({e.name or e}): pip install 'context-cda[kfp]'."
        ) from None


def _project_root() -> Path:
    """The checkout (or image folder) that holds ``pipelines/`` and ``components/``; put it on sys.path."""
    candidates: list[Path] = []
    if os.environ.get("CCDA_PROJECT_ROOT"):
        candidates.append(Path(os.environ["CCDA_PROJECT_ROOT"]))
    here = Path.cwd().resolve()
    candidates += [here, *here.parents]
    candidates.append(Path(__file__).resolve().parents[3])  # src/context_cda/commands -> checkout (editable)
    for root in candidates:
        if (root / "pipelines" / "context_cda_pipeline.py").is_file() and (root / "components").is_dir():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            return root
    raise ConfigError(
        "`ccda pipeline` needs the project's pipelines/ and components/ folders: run it from the project "
        "checkout or set CCDA_PROJECT_ROOT to the folder that holds them."
    )


def _pipelines():
    _require_kfp()
    _project_root()
    return importlib.import_module("pipelines")


def _compile(cfg: Config, variant: str, out: Path) -> Path:
    if variant not in ("gpu", "cpu"):
        raise ConfigError(f"--variant {variant!r}: unknown variant; use gpu or cpu.")
    return _pipelines().compile_pipeline(out, variant=variant, config=cfg)


def _client(host: str | None, cfg: Config):
    host = host or cfg.pipeline.host or os.environ.get("KFP_HOST")
    if not host:
        raise ConfigError("No KFP host: pass --host URL, set pipeline.host in the config, or set $KFP_HOST.")
    _require_kfp()
    import warnings

    from kfp import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "only works with KFP >= 2.0.0-beta.2": we need v2 anyway
        return _call(host, "connect", Client, host=host, namespace=cfg.pipeline.namespace), host


def _call(host: str, what: str, fn, /, *args: Any, **kwargs: Any):
    """Run a KFP API call; connection failures and API errors become one-line ServiceErrors."""
    import urllib3

    try:
        from kfp_server_api.exceptions import ApiException
    except ImportError:  # pragma: no cover
        ApiException = RuntimeError  # noqa: N806
    try:
        return fn(*args, **kwargs)
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise ServiceError(
            f"KFP API at {host} is unreachable ({type(e).__name__}) while trying to {what}. Check --host "
            f"(e.g. `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80` then --host http://127.0.0.1:8080)."
        ) from None
    except ApiException as e:
        raise ServiceError(f"KFP API at {host} refused to {what}: HTTP {e.status} {e.reason}: {e.body}") from None


def _package(cfg: Config, variant: str, package: Path | None) -> Path:
    if package is not None:
        if not package.is_file():
            raise ConfigError(f"--package {package}: no such file (compile it with `ccda pipeline compile`).")
        return package
    tmp = Path(tempfile.mkdtemp(prefix="ccda-kfp-")) / f"context-cda-{variant}.yaml"
    return _compile(cfg, variant, tmp)


def kfp_cron(expr: str) -> str:
    """KFP wants 6-field cron (seconds first); a classic 5-field expression gets ``0`` seconds."""
    fields = expr.split()
    if len(fields) == 5:
        return "0 " + " ".join(fields)
    if len(fields) == 6:
        return " ".join(fields)
    raise ConfigError(
        f"--cron {expr!r}: expected 5 fields (min hour day month weekday) or 6 (sec min hour day month weekday)."
    )


def register(app: typer.Typer) -> None:
    pipe = typer.Typer(help="Kubeflow Pipelines: compile, submit and schedule the pipeline.", no_args_is_help=True)
    app.add_typer(pipe, name="pipeline")

    @pipe.command("compile")
    def compile_(
        out: Annotated[Path | None, typer.Option("--out", help="Output YAML (default: context-cda-<variant>.yaml).")] = None,
        variant: VariantOpt = "gpu",
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
    ) -> None:
        """Write the pipeline as a KFP package (the resolved config is its default `config_yaml`)."""
        cfg = resolve_config(profile, sets, params=params)
        path = _compile(cfg, variant, out or Path(f"context-cda-{variant}.yaml"))
        console().print(f"compiled {variant} pipeline -> {path}", highlight=False)

    @pipe.command("submit")
    def submit(
        host: HostOpt = None,
        variant: VariantOpt = "gpu",
        package: PackageOpt = None,
        experiment: Annotated[str, typer.Option(help="KFP experiment name.")] = "context-cda",
        run_name: Annotated[str | None, typer.Option(help="Run name (default: KFP's).")] = None,
        service_account: Annotated[str | None, typer.Option(help="Service account of the run's pods.")] = "ccda-pipeline-runner",
        cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse cached step results.")] = True,
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
    ) -> None:
        """Start one run of the pipeline on a KFP cluster."""
        cfg = resolve_config(profile, sets, params=params)
        client, url = _client(host, cfg)
        pkg = _package(cfg, variant, package)
        run = _call(url, "create a run", client.create_run_from_pipeline_package, str(pkg),
                    arguments={}, run_name=run_name, experiment_name=experiment,
                    namespace=cfg.pipeline.namespace, enable_caching=cache, service_account=service_account)
        console().print(f"submitted run {getattr(run, 'run_id', run)} to {url}", highlight=False)

    @pipe.command("schedule")
    def schedule(
        cron: Annotated[str, typer.Option("--cron", help='Cron schedule, e.g. "0 3 * * 1" (5 or 6 fields).')],
        host: HostOpt = None,
        variant: VariantOpt = "gpu",
        package: PackageOpt = None,
        job_name: Annotated[str, typer.Option(help="Recurring run name.")] = "context-cda-scheduled",
        experiment: Annotated[str, typer.Option(help="KFP experiment name.")] = "context-cda",
        max_concurrency: Annotated[int, typer.Option(min=1, help="Runs of this schedule at once.")] = 1,
        catchup: Annotated[bool, typer.Option("--catchup/--no-catchup", help="Backfill missed runs.")] = False,
        service_account: Annotated[str | None, typer.Option(help="Service account of the run's pods.")] = "ccda-pipeline-runner",
        cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse cached step results.")] = True,
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        params: ParamsOpt = None,
    ) -> None:
        """Create a recurring run (how the pipeline is operated): one run per cron tick."""
        expr = kfp_cron(cron)
        cfg = resolve_config(profile, sets, params=params)
        client, url = _client(host, cfg)
        pkg = _package(cfg, variant, package)
        exp = _call(url, "create the experiment", client.create_experiment, experiment,
                    namespace=cfg.pipeline.namespace)
        job = _call(url, "create the recurring run", client.create_recurring_run,
                    experiment_id=exp.experiment_id, job_name=job_name, cron_expression=expr,
                    max_concurrency=max_concurrency, no_catchup=not catchup, pipeline_package_path=str(pkg),
                    params={}, enable_caching=cache, service_account=service_account)
        console().print(
            f"scheduled {job_name!r} ({expr}) as recurring run {getattr(job, 'recurring_run_id', job)} on {url}",
            highlight=False,
        )
