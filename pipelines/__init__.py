"""Kubeflow Pipelines v2 wiring of the components (``components/``) into the Context-CDA pipeline."""

from pipelines.context_cda_pipeline import (
    DAG_STAGES,
    VARIANTS,
    ClusterSettings,
    build_pipeline,
    compile_pipeline,
    config_yaml,
)

__all__ = ["DAG_STAGES", "VARIANTS", "ClusterSettings", "build_pipeline", "compile_pipeline", "config_yaml"]
