"""report: tables and plots over every target, arm and seed of the run."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus, Report
from components.images import cpu_component


@cpu_component
def report(
    config_yaml: str,
    summaries: Input[list[dsl.Dataset]],
    report: Output[Report],
    augmented: Input[Corpus] = None,
    sentences: Input[Corpus] = None,
    counterfactuals: Input[Corpus] = None,
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Render report.md/report.html (context_cda.report.run_report) over the targets' run summaries.

    ``summaries`` are the per-target folders of :func:`components.control.collect_arms`, each laid out like a
    slice of the run folder; with the augment step's folder they make one run-folder view, and the report reads
    its stage-table inputs from that view.
    """
    from pathlib import Path

    from components._runtime import load_config, run_stage, run_view
    from context_cda.layout import RunLayout
    from context_cda.stages import step_inputs

    config = load_config(config_yaml, overrides)
    links = {name: a.path for name, a in (("augment", augmented), ("ingest", sentences), ("cda", counterfactuals))
             if a is not None}  # the decontamination counts come from ingest, cda and augment (when it ran)
    for s in summaries:
        for top in Path(s.path).iterdir():
            for sub in top.iterdir():
                links[f"{top.name}/{sub.name}"] = str(sub)
    view = run_view(links)
    report.metadata.update({"step": "report"})
    return run_stage("report", config, step_inputs(config, "report", RunLayout(view)), report.path)
