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
    run directory (``finetune/<target>/<arm>/metrics.csv``, ``register/<target>/<arm>/``).
    """
    from components._runtime import load_config, run_stage, run_view

    links = {}
    for s in summaries:
        target = s.metadata["target"]
        links.update({f"finetune/{target}": f"{s.path}/finetune/{target}",
                      f"register/{target}": f"{s.path}/register/{target}"})
    return run_stage("report", load_config(config_yaml, overrides), {"run_dir": run_view(links)}, report.path)
