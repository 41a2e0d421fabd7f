"""Kubeflow Pipelines v2 components: one per stage, each a typed signature and a call to the library.

Every component body resolves the config it is given (the YAML of ``context_cda.config.Config``), builds the
stage's ``inputs`` from its input artifacts and calls ``context_cda.stages.get_stage(<stage>)`` with the output
artifact's folder as ``out_dir`` (via :mod:`components._runtime`). No method logic lives here.

Images: the project's ``cpu`` and ``train`` images tagged with the package version (:mod:`components.images`);
they must carry this package on ``PYTHONPATH`` (the component code imports ``components.artifacts`` and
``components._runtime``).
"""

import os

# Inside a component's container KFP sets _KFP_RUNTIME=true and ships a reduced kfp.dsl without the decorators;
# there the component bodies only import components.artifacts and components._runtime, so skip the definitions.
if not os.environ.get("_KFP_RUNTIME"):
    from components.augment import augment
    from components.cda import cda
    from components.control import collect_arms, collect_debias, matrix, record_status, view
    from components.debias import debias
    from components.entropy import entropy, sample
    from components.evaluate import evaluate, evaluate_posthoc, evaluate_target
    from components.filter import filter  # noqa: A004
    from components.finetune import budget, finetune
    from components.ingest import ingest
    from components.merge import augment_merge, sample_merge
    from components.neutral import neutral
    from components.register import register
    from components.report import report
    from components.validate import validate

    #: step of the stage table (context_cda.stages.TABLE) -> its component
    STAGE_COMPONENTS = {
        "ingest": ingest,
        "cda": cda,
        "validate-cda": validate,
        "augment-part": augment,
        "augment": augment_merge,
        "validate-augment": validate,
        "neutral": neutral,
        "validate-neutral": validate,
        "sample-part": sample,
        "sample": sample_merge,
        "entropy": entropy,
        "validate-entropy": validate,
        "filter": filter,
        "debias": debias,
        "budget": budget,
        "finetune": finetune,
        "evaluate-vanilla": evaluate_target,
        "evaluate": evaluate,
        "evaluate-posthoc": evaluate_posthoc,
        "register": register,
        "report": report,
    }

__all__ = [
    "STAGE_COMPONENTS",
    "augment",
    "augment_merge",
    "budget",
    "cda",
    "collect_arms",
    "collect_debias",
    "debias",
    "entropy",
    "evaluate",
    "evaluate_posthoc",
    "evaluate_target",
    "filter",
    "finetune",
    "ingest",
    "matrix",
    "neutral",
    "record_status",
    "register",
    "report",
    "sample",
    "sample_merge",
    "validate",
    "view",
]
