"""scripts/install-venv.sh (`make install`): uv is given pip's own settings of the machine, and bad settings are
refused before anything is created."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-venv.sh"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**base, "PYTHON": sys.executable, **env})


def test_pip_settings_become_uv_flags(tmp_path):
    links = tmp_path / "wheels"
    links.mkdir()
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\n"
                    f"find-links = {links} {tmp_path / 'missing'}\n"
                    f"extra-index-url = file://{tmp_path / 'no-index'} https://mirror.example/simple\n"
                    f"constraint = {tmp_path / 'c.txt'}\n"
                    "index-url = https://pypi.example/simple\n")
    proc = _run(tmp_path, str(tmp_path / "venv"), "demo", "torch", PIP_CONFIG_FILE=str(conf), PRINT_UV_FLAGS="1")
    assert proc.returncode == 0, proc.stderr
    flags = proc.stdout.split()
    pairs = list(zip(flags[::2], flags[1::2], strict=True))
    assert ("--index-url", "https://pypi.example/simple") in pairs
    assert ("--extra-index-url", "https://mirror.example/simple") in pairs
    assert ("--find-links", str(links)) in pairs
    assert ("--constraint", str(tmp_path / "c.txt")) in pairs
    assert ("--index-strategy", "unsafe-best-match") in pairs  # pip's choice across every index
    # a file:// index or a find-links folder that does not exist is skipped, as pip skips it
    assert str(tmp_path / "missing") not in flags and not any("no-index" in f for f in flags)


def test_an_unknown_installer_is_refused_before_the_venv_is_made(tmp_path):
    proc = _run(tmp_path, str(tmp_path / "venv"), "demo", "torch", INSTALLER="conda")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "install-venv: INSTALLER=conda: use uv or pip"
    assert not (tmp_path / "venv").exists()


def test_missing_arguments_print_the_usage(tmp_path):
    proc = _run(tmp_path, str(tmp_path / "venv"))
    assert proc.returncode == 2 and proc.stderr.startswith("usage: ")
