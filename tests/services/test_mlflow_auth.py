"""The MLflow server as the image starts it (docker/mlflow-entrypoint.sh), with basic auth, on 127.0.0.1.

What the cluster relies on: no API call without credentials; the pipeline's user (a non-admin the admin creates)
registers a model and moves its ``champion`` alias; any other user can read it but not move the alias; /health
stays open for the probes; the database password (PGPASSWORD) is on no process's command line. SQLite stands in
for PostgreSQL here (the URI the entrypoint builds for PostgreSQL is checked in tests/pipelines/test_dockerfiles.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF (pip install 'mlflow[auth]')")

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "mlflow-entrypoint.sh"
ADMIN = ("ccda-admin", "admin-pass-1234")
PIPELINE = ("ccda-pipeline", "pipeline-pass-1234")
READER = ("someone-else", "reader-pass-1234")
PG_PASSWORD = "pg-password-never-in-argv"

# about two minutes on a busy 2-core machine (MLflow starts slowly; every request hashes a password): opt in
pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(400)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow-auth")
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp),
        "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{tmp / 'mlflow.db'}",
        "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN[0],
        "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN[1],
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-csrf-key",
        "PGPASSWORD": PG_PASSWORD,
        "MLFLOW_SERVER_ALLOWED_HOSTS": f"127.0.0.1:{port}",
    }
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_AUTH"):
        env.pop(key, None)
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(
        ["sh", str(ENTRYPOINT), "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--serve-artifacts", "--artifacts-destination", str(tmp / "artifacts")],
        env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, tmp / "server.log")
        yield url, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"mlflow server not healthy after {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def _as(user: tuple[str, str] | None, monkeypatch) -> None:
    if user is None:
        monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
        monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user[0])
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", user[1])


def test_health_is_open_and_the_api_is_not(server):
    import httpx

    url, _ = server
    get = lambda *a, **kw: httpx.get(*a, timeout=60, **kw)  # noqa: E731  (password hashing is slow on a busy CPU)
    assert get(f"{url}/health").status_code == 200
    search = f"{url}/api/2.0/mlflow/registered-models/search"
    assert get(search).status_code == 401
    assert get(search, auth=("nobody", "wrong")).status_code == 401
    assert get(search, auth=ADMIN).status_code == 200


def test_only_the_pipeline_user_moves_the_champion_alias(server, tmp_path, monkeypatch):
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
    from mlflow.server.auth.client import AuthServiceClient

    url, _ = server
    _as(ADMIN, monkeypatch)
    auth = AuthServiceClient(url)
    for user, password in (PIPELINE, READER):
        auth.create_user(user, password)

    _as(PIPELINE, monkeypatch)  # what the pipeline's register step does, with Secret ccda-mlflow-auth
    client = MlflowClient(tracking_uri=url)
    exp = client.create_experiment("context-cda")
    run = client.create_run(exp)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    client.log_artifacts(run.info.run_id, str(tmp_path / "model"), "model")
    client.create_registered_model("tiny-debiased")
    version = client.create_model_version("tiny-debiased", f"{run.info.artifact_uri}/model", run.info.run_id)
    client.set_registered_model_alias("tiny-debiased", "champion", version.version)

    _as(READER, monkeypatch)  # any other credentials: may read, may not promote
    other = MlflowClient(tracking_uri=url)
    assert other.get_model_version_by_alias("tiny-debiased", "champion").version == version.version
    with pytest.raises(MlflowException, match="error code 403"):
        other.set_registered_model_alias("tiny-debiased", "champion", version.version)
    with pytest.raises(MlflowException, match="error code 403"):
        other.delete_registered_model_alias("tiny-debiased", "champion")
    _as(PIPELINE, monkeypatch)
    assert client.get_model_version_by_alias("tiny-debiased", "champion").version == version.version  # unmoved

    _as(None, monkeypatch)  # no credentials at all
    with pytest.raises(MlflowException, match="error code 401"):
        MlflowClient(tracking_uri=url).set_registered_model_alias("tiny-debiased", "champion", version.version)


def test_database_password_is_on_no_command_line(server):
    _, proc = server
    group = os.getpgid(proc.pid)
    seen = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != group:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ProcessLookupError):
            continue
        seen += 1
        assert PG_PASSWORD not in cmdline, cmdline
    assert seen >= 1  # the server's processes were inspected
