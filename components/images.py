"""Default container images of the components: the project's images, tagged with the package version.

The pipeline overrides them per task from ``config.pipeline.image`` / ``config.pipeline.cpu_image`` (see
``pipelines/context_cda_pipeline.py``); these defaults make every component usable on its own.
"""

from __future__ import annotations

from context_cda import __version__

CPU_IMAGE_REPO = "ghcr.io/context-cda/context-cda-cpu"
GPU_IMAGE_REPO = "ghcr.io/context-cda/context-cda-train"


def tagged(repo: str, tag: str = __version__) -> str:
    """``repo:tag``; a repo that already carries a tag or digest is returned unchanged."""
    last = repo.rsplit("/", 1)[-1]
    return repo if (":" in last or "@" in repo) else f"{repo}:{tag}"


CPU_IMAGE = tagged(CPU_IMAGE_REPO)
GPU_IMAGE = tagged(GPU_IMAGE_REPO)
