"""The one-line errors that containers run into: a mounted folder owned by another user, an MLflow server that
refuses the container's credentials (tests/images/ sees both for real in the images)."""

from __future__ import annotations

import os

import pytest

from context_cda.cli import _tracking_refusal
from context_cda.io import owner_hint


def test_owner_hint_names_the_owner_of_the_nearest_existing_folder(tmp_path):
    assert owner_hint(tmp_path / "run" / "ingest") == ""  # ours
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user needs root")
    other = tmp_path / "mounted"
    other.mkdir()
    os.chown(other, 12345, 12345)
    assert owner_hint(other / "run" / "ingest") == f"; {other} belongs to uid 12345, this process runs as uid 0"


def test_mlflow_refusals_are_one_line_naming_the_user(monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    requests = pytest.importorskip("requests")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "someone-else")
    denied = mlflow.exceptions.MlflowException(
        "API request to endpoint /api/2.0/mlflow/registered-models/alias failed with error code 403 != 200. "
        "Response body: 'Permission denied'")
    line = _tracking_refusal(denied)
    assert line.startswith("the MLflow server refused this as user someone-else (403 permission denied")
    assert "\n" not in line and "ccda-mlflow-auth" in line
    response = requests.models.Response()
    response.status_code = 403
    upload = requests.exceptions.HTTPError(
        "403 Client Error: Forbidden for url: http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1/x",
        response=response)
    assert _tracking_refusal(upload).startswith("the MLflow server refused this as user someone-else (403")
    unauth = mlflow.exceptions.MlflowException("API request failed with error code 401 != 200")
    assert "asks for credentials (401)" in _tracking_refusal(unauth)
    response.status_code = 500
    assert _tracking_refusal(requests.exceptions.HTTPError("500 for url /api/2.0/mlflow/x", response=response)) is None
    assert _tracking_refusal(ValueError("403")) is None


def test_main_prints_the_refusal_of_an_artifact_upload_as_one_line(monkeypatch, capsys):
    """requests' HTTPError is an OSError: main() must not take it for a disk error and re-raise it."""
    requests = pytest.importorskip("requests")
    from context_cda import cli

    response = requests.models.Response()
    response.status_code = 403

    def refuse(**_):
        raise requests.exceptions.HTTPError(
            "403 Client Error: Forbidden for url: http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1/x",
            response=response)

    monkeypatch.setattr(cli, "app", refuse)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "someone-else")
    assert cli.main(["register"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the MLflow server refused this as user someone-else (403")
