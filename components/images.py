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


#: the line of KFP's component command that starts python, and the same line with ``exec``
_STARTS_PYTHON = "_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main"
_EXECS_PYTHON = "_KFP_RUNTIME=true exec python3 -m kfp.dsl.executor_main"


def exec_python(component):
    """The component with ``exec`` before python in its command. KFP's command is ``sh -ec '... python3 -m
    kfp.dsl.executor_main ...'``: with no ENTRYPOINT in the image that ``sh`` is the pod's PID 1 and python its
    child, so the SIGTERM Kubernetes sends when it stops a pod reaches ``sh`` and never python (which goes on
    until the SIGKILL, with no stop line and no clean exit). With ``exec`` python replaces the shell and is the
    process that gets the signal (:func:`components._runtime.run_stage` stops the stage cleanly, exit code 143)."""
    command = component.component_spec.implementation.container.command
    at = next((i for i, part in enumerate(command) if _STARTS_PYTHON in part), None)
    if at is None:
        raise RuntimeError(f"component {component.name}: KFP's command no longer holds {_STARTS_PYTHON!r}; "
                           "update components.images.exec_python for this kfp version.")
    command[at] = command[at].replace(_STARTS_PYTHON, _EXECS_PYTHON)
    return component


def cpu_component(func):
    """``@dsl.component`` in the CPU image (the image's own kfp, no install at the task's start; python
    ``exec``-ed, :func:`exec_python`)."""
    return exec_python(dsl.component(func, base_image=CPU_IMAGE, install_kfp_package=False))


def gpu_component(func):
    """``@dsl.component`` in the train image (the image's own kfp, no install at the task's start; python
    ``exec``-ed, :func:`exec_python`)."""
    return exec_python(dsl.component(func, base_image=GPU_IMAGE, install_kfp_package=False))
