"""Glue the components share inside their containers. No method logic: config in, stage call, summary out.

Imported in the component bodies (``from components._runtime import ...``), so it must stay importable with only
``context_cda`` and ``kfp`` installed.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def load_config(config_yaml: str, overrides: list[str] | None = None):
    """The resolved config the pipeline was compiled/submitted with, plus ``section.key=value`` overrides."""
    import yaml

    from context_cda.config import Config, parse_overrides
    from context_cda.errors import ConfigError

    data = yaml.safe_load(config_yaml) or {}
    if not isinstance(data, dict):
        raise ConfigError("config_yaml: expected the YAML mapping written by `ccda config show`.")
    _deep_update(data, parse_overrides([expand_env(o) for o in overrides or []]))
    return Config.model_validate(data)


def expand_env(override: str) -> str:
    """``augment.openai.base_url=$CCDA_VLLM_BASE_URL`` -> the value of that variable in this pod (must be set)."""
    from context_cda.errors import ConfigError

    key, sep, value = override.partition("=")
    if sep and value.startswith("$"):
        name = value[1:].strip("{}")
        if name not in os.environ:
            raise ConfigError(
                f"override {key}: environment variable {name} is not set (it comes from the ConfigMap "
                "ccda-pipeline-config on the cluster)."
            )
        return f"{key}={os.environ[name]}"
    return override


def _deep_update(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _deep_update(dst[key], value)
        else:
            dst[key] = value


def run_view(links: Mapping[str, str | os.PathLike[str]]) -> Path:
    """A temporary folder laid out like a run directory, whose entries link to the input artifacts.

    ``{"cda": <artifact path>, "filter/gpt2": <artifact path>}`` -> ``<tmp>/cda``, ``<tmp>/filter/gpt2``. Stages
    and helpers that take a ``run_dir`` (train.corpus.arm_inputs, register, report) then work unchanged; set
    ``config.run.run_dir`` to it when the stage looks at sibling outputs (finetune's shared token budget).
    """
    root = Path(tempfile.mkdtemp(prefix="ccda-run-")) / "run"  # private parent: run_dir/../mlflow.db stays inside
    root.mkdir()
    for rel, target in links.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(Path(target).resolve(), target_is_directory=Path(target).is_dir())
    return root


def run_stage(stage: str, config, inputs: Mapping[str, Any], out_dir: str, **options: Any) -> str:
    """Call the library stage and return its summary as JSON (the component's string output)."""
    from context_cda.stages import get_stage

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = get_stage(stage)(config, {k: Path(v) for k, v in inputs.items()}, out, **options)
    return json.dumps(summary, default=str, sort_keys=True)


def log_metrics(metrics, summary_json: str, prefix: str = "") -> None:
    """Log every finite number of a stage summary to a ``dsl.Metrics`` artifact (nested keys joined by '.')."""

    def walk(key: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{key}.{k}" if key else str(k), v)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int | float) and math.isfinite(value):
            metrics.log_metric(key, float(value))

    walk(prefix, json.loads(summary_json))
