"""``dvc.yaml`` generated from the stage table (``ccda config dvc > dvc.yaml``; ``make dvc``).

Every row of :data:`context_cda.stages.TABLE` that is switched on becomes one DVC stage: ``cmd`` is the row's
``ccda <command>`` with its fan-out keys as flags, ``deps`` are its inputs (the same layout paths the runner and
Kubeflow use) and its library code, ``params`` the config keys it reads, ``outs``/``metrics``/``plots`` what it
writes (``persist`` where the row keeps resume state in them: DVC then leaves them when it reruns the stage, so a
killed `dvc repro` resumes, and the stage command skips a step its marker finds up to date instead of redoing it).
Only the rows the run plans are written (:func:`context_cda.stages.planned`). Fan-out keys become a DVC ``matrix`` over ``run.targets`` (its keys), ``train.arms`` and ``train.seeds``,
so ``params.yaml`` alone decides how many targets, arms and seeds run (a per-seed step's params leave out
``train.seeds``: adding a seed runs only the new seed's steps, :func:`context_cda.stages.param_keys`); the generation parts
(``pipeline.generation_shards``) and a row's ``when`` key (e.g. ``evaluate.after_training``) are read from the config
the file is generated with (regenerate after changing them). A test keeps the committed
``dvc.yaml`` equal to what this module generates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import layout as L
from .. import stages as T

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

RUN_DIR = "${run.run_dir}"
SRC = "src/context_cda"
#: fan-out key -> the params.yaml list (or mapping: its keys) DVC's matrix iterates
MATRIX = {"target": "${run.targets}", "arm": "${train.arms}", "seed": "${train.seeds}"}

HEADER = """\
# GENERATED from the stage table (src/context_cda/stages.py) by `ccda config dvc` (`make dvc`): do not edit.
# A test fails when this file differs from what the table generates.
#
# The pipeline as a DVC DAG: `dvc repro` runs what changed, `dvc push`/`dvc pull` move the data to/from S3.
# Every stage runs the same library function as the runner and the Kubeflow components (`cmd: ccda ...`), with
# the config taken from params.yaml (DVC reads it too: ${run.run_dir}, ${run.targets}, ${train.arms} and
# ${train.seeds} come from there). To run another profile through DVC, write its resolved config into
# params.yaml (and regenerate this file if the profile switches stages on or off):
#     ccda config show --profile demo > params.yaml && ccda config dvc > dvc.yaml && dvc repro
# `deps:` are the stage's inputs (the validated tables where validation ran) and its library code; `params:` the
# config keys it reads. Layout of the run folder: docs/architecture.md ("Run directory"); remotes: docs/dvc.md.
"""


def dvc_name(step: str) -> str:
    return step.replace("-", "_")


def _names(row: T.Stage) -> dict[str, str]:
    return {k: f"${{item.{k}}}" for k in row.fanout}


def _rel(row: T.Stage, inp: T.Input) -> str:
    names = {k: f"${{item.{k}}}" for k in inp.keys}
    producer = T.get(inp.step)
    fanin = not set(producer.fanout) <= set(inp.keys)
    path = f"{RUN_DIR}/{L.folder(inp.step, names, fanin=fanin)}"
    return f"{path}/{inp.file}" if inp.file else path


def _files(names: tuple[str, ...], folder: str, cache: bool = False, **extra: Any) -> list[Any]:
    return [{f"{folder}/{n}": {"cache": cache, **extra}} for n in names]


def stage_entry(row: T.Stage, config: Config) -> dict[str, Any]:
    """One DVC stage (``matrix`` included) for ``row``."""
    names = _names(row)
    folder = f"{RUN_DIR}/{L.folder(row.step, names)}"
    cmd = " ".join(["ccda", row.command, *row.cli_args, *(f"--{k} {v}" for k, v in names.items())])
    entry: dict[str, Any] = {}
    items = _items(row, config)
    if isinstance(items, dict):
        entry["matrix"] = items
    entry["cmd"] = cmd
    planned = T.planned(config)
    deps = [_rel(row, i) for i in row.inputs if i.step in planned]  # the producers the run plans
    files = [str(v) for k in row.config_files if (v := T.config_value(config, k))]  # e.g. a local corpus
    entry["deps"] = deps + files + [f"{SRC}/{c}" for c in row.code]
    entry["params"] = [s.replace("{target}", "${item.target}") for s in T.param_keys(config, row)]
    outs = [f"{folder}/{o}" for o in T.outs_of(row, config)]
    keep = {"persist": True} if row.persist else {}  # DVC leaves them when it reruns the stage (resume)
    if outs or not (row.outs or row.metrics or row.plots):
        outs = outs or [folder]  # none named: the whole step folder
        flags = {**({} if row.cache else {"cache": False}), **keep}
        entry["outs"] = [{o: flags} for o in outs] if flags else outs
    if row.metrics:
        entry["metrics"] = _files(row.metrics, folder, **keep)
    if row.plots:
        entry["plots"] = _files(row.plots, folder, x="epoch", template="linear", **keep)
    return {"foreach": items, "do": entry} if isinstance(items, list) else entry


def _items(row: T.Stage, config: Config) -> dict[str, Any] | list[dict[str, Any]] | None:
    """What a fanned-out row iterates: a ``matrix`` (each key's list: ``params.yaml``'s where the row runs every
    value of it, else a literal list - generation parts; the arms of one kind, when ``train.arms`` mixes kinds),
    or a ``foreach`` list of key combinations when a row's arms differ by target (published checkpoints,
    ``baselines.targets``). Regenerate after changing what the literal lists hold."""
    if not row.fanout:
        return None
    combos = T.step_keys(config, row)
    values = {k: list(dict.fromkeys(c[k] for c in combos)) for k in row.fanout}
    product = 1
    for v in values.values():
        product *= len(v)
    if product != len(combos):
        return [{k: c[k] for k in row.fanout} for c in combos]
    plain = {"target": list(config.run.targets), "arm": list(config.train.arms), "seed": list(config.train.seeds)}
    return {k: MATRIX[k] if k in MATRIX and values[k] == plain[k] else values[k] for k in row.fanout}


def dvc_yaml(config: Config) -> str:
    """The whole ``dvc.yaml`` text for ``config`` (its ``when`` switches)."""
    import yaml

    rows = T.planned(config)
    stages = {dvc_name(r.step): stage_entry(r, config) for r in T.TABLE if r.step in rows}
    body = yaml.safe_dump({"stages": stages}, sort_keys=False, width=120, default_flow_style=False)
    return HEADER + "\n" + body
