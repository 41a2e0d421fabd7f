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
    view = data.pop(VIEW_KEY, None)  # one step's view (task_config): its keys only, checked as a part
    _deep_update(data, parse_overrides([expand_env(o) for o in overrides or []]))
    return Config.model_validate(data, context={"partial": view is not None})


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
    """A temporary folder laid out like a run folder, whose entries link to artifact folders.

    ``{"finetune/gpt2/cda/seed-13": <artifact path>}`` -> ``<tmp>/finetune/gpt2/cda/seed-13`` (a symlink). The
    relative paths come from :mod:`context_cda.layout`, so a stage reading a fan-in folder (register: every arm
    of a target; report: every target) finds each artifact where the layout puts it.
    """
    root = Path(tempfile.mkdtemp(prefix="ccda-run-")) / "run"  # private parent: run_dir/../mlflow.db stays inside
    root.mkdir()
    for rel, target in links.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(Path(target).resolve(), target_is_directory=Path(target).is_dir())
    return root


def artifact_keys(artifact) -> dict[str, Any]:
    """The fan-out keys a component stored on its output artifact (see :func:`run_table_step`); KFP keeps
    numbers in metadata as floats, so the seed is made an int again."""
    meta = dict(artifact.metadata or {})
    keys = {k: meta[k] for k in ("target", "arm", "seed", "shard") if k in meta}
    for k in ("seed", "shard"):
        if k in keys:
            keys[k] = int(float(keys[k]))
    return keys


def table_inputs(step: str, artifacts: Mapping[str, Any], keys: Mapping[str, Any], config=None,
                 given: tuple[str, ...] = ()) -> dict[str, Path]:
    """The stage's ``inputs`` from its input artifacts, by the stage table (:mod:`context_cda.stages`).

    A single artifact is the producer's step folder (the input is it, or the table's file inside it); a list
    of artifacts (a fan-in, e.g. every fine-tuned arm of a target) is laid out in a run-folder view by each
    artifact's stored step and keys, and the input is the view's fan-in folder. Optional inputs may be None, and
    so may the arm corpora the step does not read (with ``config``) and the inputs ``given`` as parameters.
    """
    from context_cda import layout as L
    from context_cda import stages as T

    row = T.get(step)
    corpora = T.corpus_inputs(config, row, keys) if config is not None else None
    inputs: dict[str, Path] = {}
    for inp in row.inputs:
        art = artifacts.get(inp.name)
        if corpora is not None and inp.name in CORPUS_NAMES and inp.name not in corpora:
            continue
        if art is None:
            if inp.optional or inp.name in given:
                continue
            raise ValueError(f"step {step}: input artifact {inp.name!r} missing")
        if isinstance(art, list | tuple):
            links = {L.folder(a.metadata["step"], {k: str(v) for k, v in artifact_keys(a).items()}): a.path
                     for a in art}
            have = {k: str(keys[k]) for k in inp.keys}
            inputs[inp.name] = run_view(links) / L.folder(inp.step, have, fanin=True)
        else:
            inputs[inp.name] = Path(art.path) / inp.file if inp.file else Path(art.path)
    return inputs


def run_table_step(step: str, config, artifacts: Mapping[str, Any], output, given: Mapping[str, Any] | None = None,
                   **keys: Any) -> str:
    """Run one step of the stage table: inputs from ``artifacts``, outputs into ``output`` (an artifact whose
    metadata records the step and its keys for the components downstream); ``given``: stage options that stand
    for an input (finetune's ``token_budget``, the budget step's number); returns the summary as JSON."""
    output.metadata.update({"step": step, **keys})
    inputs = table_inputs(step, artifacts, keys, config, tuple(GIVEN_AS.get(k, k) for k in given or {}))
    return run_stage(step, config, inputs, output.path, extra=dict(given or {}), **keys)


#: the arm-corpus inputs of the table (a step reads those of its arm or budget group: stages.corpus_inputs)
CORPUS_NAMES = ("cda", "augmented", "filtered", "neutral")
#: a stage option -> the input it stands for when a task is given it as a parameter
GIVEN_AS = {"token_budget": "budget"}
#: the key of a task's config that marks it as one step's view (task_config)
VIEW_KEY = "_step_view"
#: the pseudo-step of the per-target loop: one item per target, each carrying the views of the per-target steps
TARGETS = "targets"


def step_matrix(config, step: str, fixed: Mapping[str, Any], also: tuple[str, ...] = ()) -> list[dict]:
    """The ParallelFor items of ``step`` (or :data:`TARGETS`: one per target): its fan-out keys' values from
    ``config`` (``fixed`` keys kept), each with the step's view of the config as ``config`` (:func:`task_config`)
    and the views of the ``also`` steps run in the same loop as ``config_<step>`` (``-`` as ``_``)."""
    from context_cda import stages as T

    if step == TARGETS:
        items = [{"target": t} for t in T.fanout_values(config, "target")]
    else:
        row = T.get(step)
        targets = [str(fixed["target"])] if "target" in fixed and "target" in row.fanout else None
        items = [{k: fixed.get(k, v) for k, v in keys.items()} for keys in T.step_keys(config, row, targets)]
    out = []
    for keys in items:
        views = {f"config_{s.replace('-', '_')}": task_config(config, s, keys) for s in also}
        out.append({**keys, **({"config": task_config(config, step, keys)} if step != TARGETS else {}), **views})
    return out


def task_config(config, step: str, keys: Mapping[str, Any]) -> str:
    """The config a Kubeflow task of ``step`` gets (a one-line JSON string): every config key the row reads, as the
    step sees it (:func:`context_cda.stages.step_view`: its own target, arm and seed; its row's narrowing), every
    other key at its default. A task's cache key then changes only with what its output depends on: adding an arm,
    a seed or a benchmark leaves the finished tasks' keys as they were, so KFP serves them from its cache."""
    from context_cda import stages as T
    from context_cda.config import defaults_dict

    row = T.get(step)
    keys = {k: keys[k] for k in row.fanout if k in keys}
    view = T.step_view(config, row, keys)
    data = defaults_dict()
    data["evaluate"]["bias_type"] = view.evaluate.bias_type
    for key in (*T.sections_of(row, keys), *T.ENV_KEYS):
        value = T.config_value(view, key)
        parts = key.split(".")
        if parts[:2] == ["run", "targets"] and len(parts) == 3:  # run.targets.<t>: the target alone
            data["run"]["targets"] = {parts[2]: value}
            continue
        node = data
        for part in parts[:-1]:
            node = node["validate" if node is data and part == "validate" else part]
        node[parts[-1]] = value
    data[VIEW_KEY] = step
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def config_json(config) -> str:
    """The config as a pipeline parameter: YAML in flow style, i.e. one line of JSON (``yaml.safe_load`` reads it)."""
    return json.dumps(config.to_dict(), ensure_ascii=False, separators=(",", ":"))


def run_stage(step: str, config, inputs: Mapping[str, Any], out_dir: str, extra: Mapping[str, Any] | None = None,
              body=None, **keys: Any) -> str:
    """Run step ``step`` (with fan-out ``keys``) in ``out_dir`` through the step envelope every door shares
    (:func:`context_cda.steps.run`: lock, SIGTERM guard, manifest, item-error policy, marker) and return its
    summary as JSON (the component's output). The input check is left out: the DAG hands each task its producer's
    artifact of the same run. A SIGTERM (Kubernetes stopping the pod: the component's command ``exec``s python, so
    python is the process that gets it, :mod:`components.images`) stops the stage cleanly, as in the CLI: finished
    shards and epochs stay in ``out_dir``, locks are released, and the task exits with code 143 and one line."""
    import sys

    from context_cda import steps as E
    from context_cda.runtime.signals import Terminated

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = E.given(step, inputs, out, **keys)
    try:
        ran = E.run(st, config, check=False, body=body, **dict(extra or {}))
    except Terminated as e:
        print(f"error: {st.name} stopped by SIGTERM; its finished shards and epochs are kept in {out}; rerun the "
              "task (or the pipeline run) to resume.", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    return json.dumps(ran.summary, default=str, sort_keys=True)


def run_trainjob(config, config_yaml: str, cluster: str, artifacts: Mapping[str, Any], output, token_budget: int,
                 **keys: Any) -> str:
    """The finetune step as a TrainJob: inputs from ``artifacts``, the step folder into ``output``, through the step
    envelope with the launcher as its body (:func:`context_cda.train.trainjob.run_launcher`; a SIGTERM deletes the
    TrainJob, then the task exits 143 with one line, as :func:`run_stage`)."""
    from context_cda.train.trainjob import run_launcher

    output.metadata.update({"step": "finetune", **keys})
    inputs = table_inputs("finetune", artifacts, keys, config, ("budget",))
    return run_stage("finetune", config, inputs, output.path, extra={"token_budget": int(token_budget),
                     "cluster": cluster, "config_json": config_yaml}, body=run_launcher, **keys)


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
    # the metrics as a file too, at the artifact's path: KFP keeps them in its metadata, and kfp.local's task cache
    # takes an output artifact with no file for a lost one (the cached fine-tuning would be run again)
    path = Path(metrics.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(metrics.metadata), sort_keys=True, default=str))
