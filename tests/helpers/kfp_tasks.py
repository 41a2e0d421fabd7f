"""Run the tiny pipeline under kfp.local up to a step, as a kubelet would see it: each task's process id when it
starts and its exit code when it ends are printed (``TASK START <pid> <function>``, ``TASK END <pid> <function>
rc=<code>``), so a test can send SIGTERM to the task's own process - KFP's ``sh -ec`` command, which ``exec``s
python (components.images.exec_python), the process a pod's PID 1 is - and read how it ended. With ``docker``
the tasks run in their images (DockerRunner; no pid lines: the test signals the container).

    python kfp_tasks.py CONFIG.json PIPELINE_ROOT LAST_STAGE [docker]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_local_subprocess(full_command, env_vars=None) -> int:
    """kfp.local's own task runner (SubprocessRunner), with the task's pid and exit code printed."""
    env = {**os.environ, **env_vars} if env_vars else None
    function = full_command[full_command.index("--function_to_execute") + 1]
    with subprocess.Popen(full_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                          env=env) as process:
        print(f"TASK START {process.pid} {function}", flush=True)
        for line in iter(process.stdout.readline, ""):
            print(line, end="", flush=True)
        rc = process.wait()
    print(f"TASK END {process.pid} {function} rc={rc}", flush=True)
    return rc


def _docker_runner(root: str):
    """kfp.local's DockerRunner as the image tests use it: host networking (the test server on 127.0.0.1), the
    fixtures mounted read-only, the pipeline root (made writable by the images' user) at its own path."""
    import docker
    from kfp import local

    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from container_images import RUN_ENV, writable_by_image_user

    writable_by_image_user(Path(root))
    fixtures = ROOT / "tests" / "fixtures"
    mounts = [docker.types.Mount(str(fixtures), str(fixtures), type="bind", read_only=True)]
    env = dict(RUN_ENV)
    if os.environ.get("CCDA_TEST_SLOW"):  # the test's stage delays (tests/helpers/slow_stages) in the containers
        slow = ROOT / "tests" / "helpers" / "slow_stages"
        mounts.append(docker.types.Mount(str(slow), str(slow), type="bind", read_only=True))
        env.update(CCDA_TEST_SLOW=os.environ["CCDA_TEST_SLOW"], PYTHONPATH=f"/opt/ccda:{slow}")
    return local.DockerRunner(network_mode="host", mounts=mounts, environment=env)


def main(config_file: str, root: str, last_stage: str, docker: bool = False) -> int:
    sys.path.insert(0, str(ROOT))
    from kfp import local
    from kfp.local import subprocess_task_handler

    from context_cda.config import Config
    from pipelines import build_pipeline

    subprocess_task_handler.run_local_subprocess = run_local_subprocess
    runner = _docker_runner(root) if docker else local.SubprocessRunner(use_venv=False)
    # with the task cache, as a cluster's KFP: a second run serves the tasks that finished and runs the rest
    local.init(runner=runner, pipeline_root=root, raise_on_error=True, enable_caching=True)
    cfg = Config.model_validate(json.loads(Path(config_file).read_text()))
    try:
        build_pipeline("cpu", cfg, last_stage=last_stage)()
    except RuntimeError as e:
        print(f"PIPELINE FAILED: {e}", flush=True)
        return 1
    print("PIPELINE SUCCEEDED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "docker"))
