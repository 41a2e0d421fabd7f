"""A real `mlflow server` on 127.0.0.1 for tests (SQLite backend, proxied artifacts), started and stopped here."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(root: Path, artifacts: str, env: Mapping[str, str] | None = None,
                  timeout: float = 180) -> Iterator[str]:
    """Serve ``sqlite:///<root>/mlflow.db`` with artifacts in ``artifacts`` (a folder or ``s3://...``; ``env``
    reaches only the server, e.g. its S3 endpoint and keys); yields the URL, stops the server afterwards."""
    import httpx

    port = _free_port()
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    cmd = [exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
           "--serve-artifacts", "--artifacts-destination", artifacts]
    log_path = root / "server.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    # MLflow 3's job runner (about ten huey consumer processes, each importing mlflow: ~40 s of CPU at every start
    # here) serves GenAI jobs this project never submits
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                            env={**os.environ, "MLFLOW_TRACKING_URI": "", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
                                 **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"mlflow server not ready: {log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
