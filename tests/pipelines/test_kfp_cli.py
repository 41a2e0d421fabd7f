"""`ccda pipeline compile|submit|schedule`: compile writes a package; submit/schedule fail clearly without a host."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kfp")

from context_cda.cli import main  # noqa: E402
from context_cda.commands.pipeline import kfp_cron  # noqa: E402
from context_cda.errors import ConfigError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("KFP_HOST", raising=False)


@pytest.mark.parametrize("variant", ["gpu", "cpu"])
def test_compile_writes_a_package(tmp_path, variant):
    out = tmp_path / f"p-{variant}.yaml"
    assert main(["pipeline", "compile", "--out", str(out), "--variant", variant, "--profile", "tiny"]) == 0
    docs = list(yaml.safe_load_all(out.read_text()))
    assert docs[0]["pipelineInfo"]["name"] == f"context-cda-{variant}"
    assert (len(docs) == 2) == (variant == "gpu")  # Kubernetes platform spec only on the cluster variant
    cfg = yaml.safe_load(docs[0]["root"]["inputDefinitions"]["parameters"]["config_yaml"]["defaultValue"])
    assert cfg["run"]["targets"] == {"tiny-gpt2": "tiny:gpt2"}  # the profile's config travels with the package


def test_compile_rejects_unknown_variant(tmp_path, capsys):
    assert main(["pipeline", "compile", "--out", str(tmp_path / "x.yaml"), "--variant", "tpu"]) == 2
    assert "variant" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(60)
def test_submit_to_unreachable_host_is_one_clear_error(capsys):
    rc = main(["pipeline", "submit", "--host", f"http://127.0.0.1:{_closed_port()}", "--profile", "tiny"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "unreachable" in err and "Traceback" not in err


def test_submit_without_host_says_how_to_set_one(capsys):
    assert main(["pipeline", "submit", "--profile", "tiny"]) == 2
    assert "--host" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_schedule_validates_cron_and_host(capsys):
    assert main(["pipeline", "schedule", "--cron", "1 2 3", "--host", "http://127.0.0.1:9"]) == 2
    assert "--cron" in capsys.readouterr().err
    rc = main(["pipeline", "schedule", "--cron", "0 3 * * 1", "--host", f"http://127.0.0.1:{_closed_port()}",
               "--profile", "tiny"])
    assert rc == 2 and "unreachable" in capsys.readouterr().err


def test_kfp_cron():
    assert kfp_cron("0 3 * * 1") == "0 0 3 * * 1"
    assert kfp_cron("30 0 3 * * *") == "30 0 3 * * *"
    with pytest.raises(ConfigError):
        kfp_cron("* *")


def test_missing_kfp_extra_is_reported(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "kfp" or name.startswith("kfp."):
            raise ImportError("No module named 'kfp'", name="kfp")
        return real_import(name, *args, **kwargs)

    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda n, *a: fake_import(n))
    assert main(["pipeline", "compile", "--out", "/tmp/never.yaml"]) == 2
    assert "context-cda[kfp]" in capsys.readouterr().err


def test_compile_reports_bad_cluster_settings_in_one_line(tmp_path, capsys):
    rc = main(["pipeline", "compile", "--out", str(tmp_path / "x.yaml"), "--profile", "tiny",
               "--set", "pipeline.shm_size=20Gi"])
    err = capsys.readouterr().err
    assert rc == 2 and "pipeline.shm_size" in err and "Traceback" not in err
    assert not (tmp_path / "x.yaml").exists()
