"""Facts about the built images (cpu, train on CPU torch, mlflow): what a cluster and a reviewer rely on.

Non-root user; no secret or key-like string in any layer or in the image history (the CA bundle pip used during
the build, a build secret, is in none); no compilers in the runtime images; the command a caller gives runs as
given (no entrypoint that eats it: KFP gives `sh -c ...`); the run profiles and params.yaml are inside;
`ccda --help` answers in under a second in the CPU image. Sizes and build times: the session's closing summary.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from context_cda.config import find_params_file  # noqa: F401  (the package is importable: the venv is the host)

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

RUNTIME_IMAGES = ("cpu", "train", "mlflow")
PIPELINE_IMAGES = ("cpu", "train")
# A key-like string is a whole token: a PEM private key header *with* a base64 body after it (a library's parser
# holds the bare header as a constant: libgnutls does), and token formats not embedded in longer base64 runs
# (PIL holds a font as base64 that happens to contain "AKIA" and 16 capitals).
_EDGE_L, _EDGE_R = rb"(?<![A-Za-z0-9+/_])", rb"(?![A-Za-z0-9+/_])"
SECRET_PATTERNS = [
    re.compile(rb"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n]{64}"),
    re.compile(_EDGE_L + rb"(?:AKIA|ASIA)[0-9A-Z]{16}" + _EDGE_R),  # AWS access key id
    re.compile(_EDGE_L + rb"hf_[A-Za-z0-9]{34}" + _EDGE_R),  # Hugging Face token
    re.compile(_EDGE_L + rb"gh[pousr]_[A-Za-z0-9]{36}" + _EDGE_R),  # GitHub token
]
# Key-like strings that third-party files ship on purpose, none a credential of ours: (file, the string).
KNOWN_TEST_KEYS = (
    # AWS's documented example key ids (AKIA...EXAMPLE), in boto3's docs and botocore's API examples
    (re.compile(r"site-packages/(boto3|botocore)/"), re.compile(rb"AKIA[0-9A-Z]{9}EXAMPLE")),
    # transformers' testing_utils: the published token of its CI user for the hf-internal-testing org
    (re.compile(r"site-packages/transformers/(__pycache__/)?testing_utils"), re.compile(rb"hf_[A-Za-z0-9]{34}")),
    # GnuTLS (Debian's libgnutls30): the private key of its built-in FIPS self-tests
    (re.compile(r"usr/lib/[^/]+/libgnutls\.so"), re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)
PREFILTER = (b"PRIVATE KEY-----", b"AKIA", b"ASIA", b"hf_", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_")
_SCANNED: set[str] = set()  # layer contents (diff ids) already scanned this session: cpu and train share most
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "ld", "as", "make")


def _ca_bundle() -> Path | None:
    out = subprocess.run(["python3", "-m", "pip", "config", "get", "global.cert"], capture_output=True, text=True)
    path = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    return path if path and path.is_file() else None


def _pem_blocks(data: bytes) -> set[bytes]:
    return set(re.findall(rb"-----BEGIN CERTIFICATE-----\s+(.*?)-----END CERTIFICATE-----", data, flags=re.S))


def _layer_files(engine, image: str):
    """(layer, path, bytes) of every regular file of every layer of ``image`` whose content was not scanned before:
    ``save`` streamed into tarfile, each layer tar spooled to disk while its sha256 (the layer's diff id, what the
    engine names a layer's content by) is taken, and read only when that content is new. The cpu and train images
    share the venv and base layers under different layer names (the legacy ``save`` names a layer by its parent
    chain and history), so the venv's 2 GB are read once, not twice."""
    proc = subprocess.Popen([*engine.cmd, "save", image], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
            for member in outer:
                if not member.name.endswith(".tar") or not member.isfile():
                    continue
                with tempfile.TemporaryFile() as spool:
                    digest = _spool(outer.extractfile(member), spool)
                    if digest in _SCANNED:
                        continue
                    spool.seek(0)
                    with tarfile.open(fileobj=spool, mode="r|") as layer:
                        for f in layer:
                            if f.isfile():
                                yield member.name, f.name, layer.extractfile(f).read()
                _SCANNED.add(digest)
    finally:
        proc.stdout.close()
        assert proc.wait(timeout=600) == 0


def _spool(source, spool, chunk: int = 1 << 20) -> str:
    """Copy ``source`` into ``spool``; the sha256 of what was copied."""
    digest = hashlib.sha256()
    while block := source.read(chunk):
        digest.update(block)
        spool.write(block)
    return "sha256:" + digest.hexdigest()


def _known(path: str, match: bytes) -> bool:
    return any(where.search(path) and what.search(match) for where, what in KNOWN_TEST_KEYS)


@pytest.mark.parametrize("name", RUNTIME_IMAGES)
def test_runs_as_a_non_root_user(container_engine, project_images, name):
    image = project_images[name]
    assert container_engine.run("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip() == \
        "10001:10001"
    ids = container_engine.container(image, "id", "-u", entrypoint="").stdout.split()
    assert ids == ["10001"]


@pytest.mark.parametrize("name", RUNTIME_IMAGES)
def test_no_compilers_in_the_runtime_image(container_engine, project_images, name):
    probe = " ".join(f'command -v {c} || true;' for c in COMPILERS)
    found = container_engine.container(project_images[name], "sh", "-c", probe, entrypoint="").stdout.split()
    assert found == [], f"{name}: compilers in the runtime image: {found}"


@pytest.mark.parametrize("name", RUNTIME_IMAGES)
def test_no_secret_in_any_layer_or_in_the_history(container_engine, project_images, name):
    image = project_images[name]
    history = container_engine.run("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    config = json.loads(container_engine.run("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    meta = history + "\n" + "\n".join(config.get("Env") or [])
    assert not re.search(r"(?i)(PASSWORD|SECRET|TOKEN|ACCESS_KEY)\w*=\S", meta), meta
    assert "PIP_CERT=" not in "\n".join(config.get("Env") or []), "pip's CA setting leaked into the image's env"
    for pat in SECRET_PATTERNS:
        assert not pat.search(meta.encode()), pat.pattern

    bundle = _ca_bundle()
    host_blocks = _pem_blocks(bundle.read_bytes()) if bundle else set()
    bundle_size = bundle.stat().st_size if bundle else -1
    bundle_digest = hashlib.sha256(bundle.read_bytes()).hexdigest() if bundle else None
    # the image's own CA bundle (Debian's ca-certificates): what the base ships, whatever the build trusted
    own = container_engine.container(image, "cat", "/etc/ssl/certs/ca-certificates.crt", entrypoint="").stdout
    image_blocks = _pem_blocks(own.encode())
    files: list[tuple[str, str, bytes]] = []  # files that may hold a certificate, looked at after the scan
    hits = []
    for layer, path, data in _layer_files(container_engine, image):
        if any(s in data for s in PREFILTER):
            for pat in SECRET_PATTERNS:
                hits += [f"{layer}:{path}: {m.group(0)[:40]!r}" for m in pat.finditer(data)
                         if not _known(path, m.group(0))]
        if len(data) == bundle_size and hashlib.sha256(data).hexdigest() == bundle_digest:
            hits.append(f"{layer}:{path}: the build's CA bundle ({bundle})")
        if b"-----BEGIN CERTIFICATE-----" in data:
            files.append((layer, path, data))
    # certificates the build trusted that the image's own (Debian/certifi) bundles do not hold: the proxy's CA
    # of this machine; none of them may be anywhere in the image
    extra = host_blocks - image_blocks
    for layer, path, data in files:
        if extra & _pem_blocks(data):
            hits.append(f"{layer}:{path}: a certificate of the build's CA bundle that the base does not ship")
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("name", PIPELINE_IMAGES)
def test_the_given_command_runs_as_given(container_engine, project_images, name):
    """KFP starts a component as `sh -c ...`; an ENTRYPOINT would turn that into `ccda sh -c ...`."""
    image = project_images[name]
    entry = container_engine.run("image", "inspect", "--format", "{{json .Config.Entrypoint}}", image).stdout
    assert entry.strip() in ("null", "[]"), entry
    assert container_engine.container(image, "sh", "-c", "echo $((6 * 7))").stdout.strip() == "42"
    assert "Usage: ccda" in container_engine.container(image).stdout  # the default command: the CLI's help
    # KFP's executor and the components are importable as the generated component code imports them
    container_engine.container(image, "python3", "-c", "import kfp.dsl.executor_main, components.artifacts, "
                               "components._runtime, pipelines")


@pytest.mark.parametrize("profile", ["demo", "paper", "tiny"])
def test_the_profiles_ship_in_the_image(container_engine, project_images, profile):
    out = container_engine.container(project_images["cpu"], "ccda", "config", "show", "--profile", profile).stdout
    assert "run_dir:" in out and "targets:" in out


def test_ccda_help_answers_within_a_second_in_the_cpu_image(container_engine, project_images):
    """Best of three, in CPU seconds of the `ccda --help` process (user + system): on an idle machine that is
    its wall-clock time; on a busy shared one the wall clock also counts the waits for a core."""
    probe = ("import os, resource, subprocess, time\n"
             "cpu, wall = [], []\n"
             "for _ in range(3):\n"
             "    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()\n"
             "    subprocess.run(['ccda', '--help'], stdout=subprocess.DEVNULL, check=True)\n"
             "    r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()\n"
             "    cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)\n"
             "    wall.append(t1 - t0)\n"
             "print(min(cpu), min(wall), os.getloadavg()[0])\n")
    out = container_engine.container(project_images["cpu"], "python3", "-c", probe).stdout.split()
    cpu, wall, load = map(float, out)
    print(f"ccda --help in {project_images['cpu']}: {cpu:.2f} s CPU, {wall:.2f} s wall (best of 3, load {load:.1f})")
    assert cpu < 1.0


@pytest.mark.parametrize(("password", "names"), [(None, "needs MLFLOW_AUTH_ADMIN_PASSWORD"),
                                                 ("password1234", "MLFLOW_AUTH_ADMIN_PASSWORD is MLflow's published")])
def test_the_mlflow_image_refuses_to_start_without_an_admin_password(container_engine, project_images, password,
                                                                    names):
    """With basic auth (the default) and no admin password, or MLflow's old published default, the server does not
    start: exit 2 and one line naming the variable, before anything connects to the database."""
    env = {"MLFLOW_BACKEND_STORE_URI": "sqlite:////tmp/mlflow.db", "MLFLOW_FLASK_SERVER_SECRET_KEY": "k",
           **({"MLFLOW_AUTH_ADMIN_PASSWORD": password} if password else {})}
    proc = container_engine.container(project_images["mlflow"], env=env, check=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and names in lines[0], proc.stderr
