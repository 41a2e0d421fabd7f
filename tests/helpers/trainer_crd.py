"""Validate objects against Kubeflow Trainer's CRDs vendored in k8s/trainer/crds/<version> (no cluster).

What an API server does with a custom resource on create, here: the CRD's ``openAPIV3Schema`` (JSON Schema, via
``jsonschema``) made strict the way ``kubectl apply --validate=strict`` / ``fieldValidation=Strict`` is (a field the
schema does not declare is an error, not silently pruned; ``x-kubernetes-preserve-unknown-fields`` keeps its
subtree open), and every CEL rule (``x-kubernetes-validations``) that applies on create (those without
``oldSelf``), evaluated with cel-python on the value it is attached to."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "k8s" / "trainer" / "crds"


def crd_file(kind: str, version: str) -> Path:
    plural = {"TrainJob": "trainjobs", "ClusterTrainingRuntime": "clustertrainingruntimes"}[kind]
    return CRDS / version / f"trainer.kubeflow.org_{plural}.yaml"


@cache
def schema(kind: str, version: str) -> dict[str, Any]:
    docs = [d for d in yaml.load_all(crd_file(kind, version).read_text(), Loader=yaml.CSafeLoader) if d]
    (crd,) = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return served["schema"]["openAPIV3Schema"]


def _strict(node: Any) -> Any:
    """The schema with ``additionalProperties: false`` on every object that lists its properties (and keeps no
    unknown fields)."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@cache
def _validator(kind: str, version: str):
    import jsonschema

    return jsonschema.Draft7Validator(_strict(copy.deepcopy(schema(kind, version))))


def _cel_rules(node: dict[str, Any], value: Any, path: str, errors: list[str]) -> None:
    """Evaluate the CEL rules of ``node`` on ``value`` and recurse into the properties, items and maps present."""
    import celpy

    for rule in node.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue  # transition rules (immutability) apply to updates only
        env = celpy.Environment()
        ok = env.program(env.compile(rule["rule"])).evaluate({"self": celpy.json_to_cel(value)})
        if not bool(ok):
            errors.append(f"{path or '<root>'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in node.get("properties", {}):
                _cel_rules(node["properties"][key], sub, f"{path}.{key}", errors)
            elif isinstance(node.get("additionalProperties"), dict):
                _cel_rules(node["additionalProperties"], sub, f"{path}.{key}", errors)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, sub in enumerate(value):
            _cel_rules(node["items"], sub, f"{path}[{i}]", errors)


def problems(obj: dict[str, Any], version: str) -> list[str]:
    """Every reason the API server would refuse ``obj`` (a TrainJob or ClusterTrainingRuntime) on create."""
    kind = obj.get("kind")
    if obj.get("apiVersion") != "trainer.kubeflow.org/v1alpha1":
        return [f"apiVersion {obj.get('apiVersion')!r} is not trainer.kubeflow.org/v1alpha1"]
    errors = [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
              for e in _validator(kind, version).iter_errors(obj)]
    if not errors:
        _cel_rules(schema(kind, version), obj, "", errors)
    return errors
