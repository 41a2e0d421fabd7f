"""report: tables and plots over every target and arm of the run."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Report
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def report(
    config_yaml: str,
    summaries: Input[list[dsl.Dataset]],
    report: Output[Report],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Render report.md/report.html (context_cda.report.run_report) over the targets' run summaries.

    ``summaries`` are the per-target folders of :func:`components.control.collect_arms`, each laid out like a
    run directory (``finetune/<target>/<arm>/metrics.csv``, ``register/<target>/<arm>/``,
    ``evaluate/<target>/<arm|vanilla>/aggregate.json``).
    """
    from pathlib import Path

    from components._runtime import load_config, run_stage, run_view

    links = {}
    for s in summaries:
        target = s.metadata["target"]
        for stage in ("finetune", "register", "evaluate"):
            if (Path(s.path) / stage / target).is_dir():
                links[f"{stage}/{target}"] = f"{s.path}/{stage}/{target}"
    return run_stage("report", load_config(config_yaml, overrides), {"run_dir": run_view(links)}, report.path)
