"""The container engine and the project's images for the image tests (``-m images``, ``make test-images``).

:func:`engine_session` starts the engine when none runs (``scripts/engine.sh start``: dockerd with host
networking on machines without systemd) and stops it afterwards if it started it; when no engine can run it
raises :class:`NoEngine` with the one line ``scripts/engine.sh`` printed. :func:`build_images` builds through
``scripts/build-images.sh`` (the script users run: one build per image, layer caching makes a rebuild seconds),
with the train image on CPU torch so it runs without a GPU.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
ENGINE_SH = ROOT / "scripts" / "engine.sh"
BUILD_SH = ROOT / "scripts" / "build-images.sh"
#: the images' user (Dockerfile USER; the pipeline's run_as_user)
IMAGE_UID = 10001


def tag(name: str) -> str:
    return f"context-cda-{name}:{VERSION}"


class NoEngine(RuntimeError):
    """No container engine can run here; the message says why."""


@dataclass
class Engine:
    """A container engine's command line (``docker`` or ``podman ...``) with a few helpers."""

    name: str
    cmd: list[str]
    started: bool = False
    built: dict[str, dict] = field(default_factory=dict)  # image -> {"tag", "seconds", "size_mb"}

    def run(self, *args: str, check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.cmd, *args], capture_output=True, text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"{shlex.join([*self.cmd, *args])} -> {proc.returncode}\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def container(self, image: str, *command: str, user: str | None = None, env: dict[str, str] | None = None,
                  volumes: Sequence[tuple[str | Path, str, str]] = (), check: bool = True,
                  timeout: float = 900, entrypoint: str | None = None, network: str = "host"
                  ) -> subprocess.CompletedProcess:
        """``run --rm --network host`` of ``image`` with ``command`` (host networking: the test servers listen
        on 127.0.0.1; ``network="none"``: no network at all); ``volumes``: (host path, container path,
        "ro"|"rw"); ``entrypoint=""`` sets a server image's entrypoint aside."""
        args = ["run", "--rm", "--network", network]
        if entrypoint is not None:
            args += ["--entrypoint", entrypoint]
        if user:
            args += ["--user", user]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        for host, inside, mode in volumes:
            args += ["-v", f"{host}:{inside}:{mode}"]
        return self.run(*args, image, *command, check=check, timeout=timeout)

    def size_mb(self, image: str) -> int:
        return int(self.run("image", "inspect", "--format", "{{.Size}}", image).stdout.strip()) // 1_000_000


def _engine_sh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ENGINE_SH), *args], capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def engine_session() -> Iterator[Engine]:
    """The engine, started for the session when none runs and stopped again if this started it."""
    status = _engine_sh("status")
    started = False
    if status.returncode != 0 and os.geteuid() == 0:
        start = _engine_sh("start")
        started = start.returncode == 0 and "started dockerd" in start.stderr
        status = _engine_sh("status")
    if status.returncode != 0:
        raise NoEngine(status.stderr.strip() or status.stdout.strip())
    desc = status.stdout.strip()
    name = desc.split()[0]
    if name == "docker":
        cmd = [re.search(r"\((\S+?),", desc).group(1)]
    else:
        cmd = ["podman", *(["--runtime", "runc"] if "runc" in desc else []), "--cgroup-manager", "cgroupfs"]
    try:
        yield Engine(name, cmd, started)
    finally:
        _bound_build_cache(name, cmd)
        if started:
            _engine_sh("stop", timeout=60)


def _bound_build_cache(name: str, cmd: list[str]) -> None:
    """CCDA_BUILD_CACHE_KEEP (e.g. ``10GB``, set by .ci/run): docker's build cache is cut to that size after the
    session (the most recently used layers stay), so repeated runs on one machine don't fill its disk."""
    keep = os.environ.get("CCDA_BUILD_CACHE_KEEP")
    if keep and name == "docker":
        subprocess.run([*cmd, "builder", "prune", "-f", "--keep-storage", keep], capture_output=True, timeout=600)


def build_images(engine: Engine, names: Sequence[str], **env: str) -> subprocess.CompletedProcess:
    """``scripts/build-images.sh NAMES`` with the train image on CPU torch; records build seconds and sizes."""
    full = {**os.environ, "CCDA_ENGINE": engine.name, "TORCH_BUILD": "cpu", **env}
    start = time.monotonic()
    proc = subprocess.run(["bash", str(BUILD_SH), *names], capture_output=True, text=True, env=full,
                          timeout=3600)
    for m in re.finditer(r"built (\S+) in (\d+) s, (\d+) MB", proc.stderr):
        name = m.group(1).split(":")[0].removeprefix("context-cda-")
        engine.built[name] = {"tag": m.group(1), "seconds": int(m.group(2)), "size_mb": int(m.group(3))}
    engine.built.setdefault("_total", {"seconds": 0})["seconds"] += round(time.monotonic() - start)
    return proc


#: the environment the tests give the project's processes, in the venv and in the containers alike
RUN_ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "GX_ANALYTICS_ENABLED": "False", "TRANSFORMERS_VERBOSITY": "error"}


def set_flags(overrides: dict, prefix: str = "") -> list[str]:
    """``{"augment": {"openai": {"base_url": u}}}`` -> ``["--set", "augment.openai.base_url=u", ...]``."""
    import json

    flags: list[str] = []
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flags += set_flags(value, f"{name}.")
        else:
            flags += ["--set", f"{name}={value if isinstance(value, str) else json.dumps(value)}"]
    return flags


def writable_by_image_user(path: Path) -> Path:
    """``path`` (created) owned by the images' user when this runs as root, else open to everyone: a folder the
    container writes into through a bind mount."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, IMAGE_UID, IMAGE_UID)
    else:
        path.chmod(0o777)
    return path
