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
    from components.control import arm_matrix, collect_arms, record_status
    from components.entropy import entropy
    from components.evaluate import evaluate, evaluate_target
    from components.filter import filter  # noqa: A004
    from components.finetune import finetune
    from components.ingest import ingest
    from components.register import register
    from components.report import report
    from components.validate import validate

    #: stage name (context_cda.stages.STAGES) -> component
    STAGE_COMPONENTS = {
        "ingest": ingest,
        "cda": cda,
        "validate": validate,
        "augment": augment,
        "entropy": entropy,
        "filter": filter,
        "finetune": finetune,
        "evaluate": evaluate,
        "register": register,
        "report": report,
    }

    #: stage -> its further components (same stage, other inputs): evaluate_target scores the vanilla target
    EXTRA_COMPONENTS = {"evaluate": (evaluate_target,)}

    #: stages that run on GPU nodes in the cluster pipeline (augment only when it runs vLLM in-process);
    #: a stage's extra components (EXTRA_COMPONENTS) run like the stage
    GPU_STAGES = frozenset({"augment", "entropy", "finetune", "evaluate"})

__all__ = [
    "EXTRA_COMPONENTS",
    "GPU_STAGES",
    "STAGE_COMPONENTS",
    "arm_matrix",
    "augment",
    "cda",
    "collect_arms",
    "entropy",
    "evaluate",
    "evaluate_target",
    "filter",
    "finetune",
    "ingest",
    "record_status",
    "register",
    "report",
    "validate",
]
