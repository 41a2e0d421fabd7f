"""Default container images of the components: the project's images, tagged with the package version.

The pipeline overrides them per task from ``config.pipeline.image`` / ``config.pipeline.cpu_image`` (see
``pipelines/context_cda_pipeline.py``); these defaults make every component usable on its own.

``cpu_component`` / ``gpu_component`` are ``dsl.component`` in those images without KFP's runtime install of
``kfp``: the images carry it (the ``kfp`` extra), so a task starts without reaching a package index (which an
air-gapped cluster can't, and the images' non-root user could not write to their venv anyway).
"""

from __future__ import annotations

from kfp import dsl

from context_cda import __version__

CPU_IMAGE_REPO = "ghcr.io/context-cda/context-cda-cpu"
GPU_IMAGE_REPO = "ghcr.io/context-cda/context-cda-train"


def tagged(repo: str, tag: str = __version__) -> str:
    """``repo:tag``; a repo that already carries a tag or digest is returned unchanged."""
    last = repo.rsplit("/", 1)[-1]
    return repo if (":" in last or "@" in repo) else f"{repo}:{tag}"


CPU_IMAGE = tagged(CPU_IMAGE_REPO)
GPU_IMAGE = tagged(GPU_IMAGE_REPO)


def cpu_component(func):
    """``@dsl.component`` in the CPU image (the image's own kfp, no install at the task's start)."""
    return dsl.component(func, base_image=CPU_IMAGE, install_kfp_package=False)


def gpu_component(func):
    """``@dsl.component`` in the train image (the image's own kfp, no install at the task's start)."""
    return dsl.component(func, base_image=GPU_IMAGE, install_kfp_package=False)
