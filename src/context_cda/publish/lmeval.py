"""``ccda export lm-eval-tasks``: the project's StereoSet and CrowS-Pairs scoring as lm-evaluation-harness tasks.

The folder holds, per benchmark, the items ``ccda evaluate`` scores under the same configuration (bias type,
``evaluate.max_items``, the same files: :func:`context_cda.evaluate.load_items`) as JSON lines, a task YAML, and
one ``utils.py`` (``context_cda/resources/lmeval/utils.py``: the requests, the per-item scores and the
aggregations, standalone: the harness's venv needs no context-cda). For causal LMs, the harness's per-item scores
and SS / LMS / ICAT / CS are those of ``ccda evaluate`` in bias-bench mode (tests/integration/
test_lm_eval_ccda_tasks.py checks it item by item); docs/evaluation.md says how a harness user runs them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .destination import fresh_destination, usual_mode

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

RESOURCES = Path(__file__).resolve().parents[1] / "resources" / "lmeval"
BENCHMARKS = ("stereoset", "crows")
#: benchmark -> (task name stem, docs file, task class, loader, process_results, metrics: (name, higher is better))
TASKS: dict[str, tuple[str, str, str, str, str, tuple[tuple[str, bool | None], ...]]] = {
    "stereoset": ("ccda_stereoset", "stereoset.jsonl", "StereoSetTask", "load_stereoset", "process_stereoset",
                  (("ss", None), ("lms", True), ("icat", True))),
    "crows": ("ccda_crows_pairs", "crows_pairs.jsonl", "CrowsTask", "load_crows", "process_crows",
              (("cs", None), ("stereo", None), ("antistereo", None))),
}
TAG = "ccda_bias"
VERSION = 1.0


def task_name(benchmark: str, bias_type: str) -> str:
    return f"{TASKS[benchmark][0]}_{bias_type.replace('-', '_')}"


def docs(benchmark: str, items: list[Any]) -> list[dict[str, Any]]:
    """The JSON documents of a benchmark's parsed items (ids as ``ccda evaluate`` writes them)."""
    if benchmark == "stereoset":
        return [{"id": ex.id, "target": ex.target, "bias_type": ex.bias_type, "context": ex.context,
                 **{f"sentence_{lab.replace('-', '_')}": s for lab, s in ex.sentences.items()}} for ex in items]
    return [{"id": p.id, "bias_type": p.bias_type, "direction": p.direction, "sent_more": p.sent_more,
             "sent_less": p.sent_less} for p in items]


def task_yaml(benchmark: str, bias_type: str, start_token: str) -> str:
    """A task's YAML: the task class, its documents and the metrics with their aggregations (from ``utils.py``)."""
    _, _, cls, loader, process, metrics = TASKS[benchmark]
    lines = [f"task: {task_name(benchmark, bias_type)}", f"tag: {TAG}", f"class: !function utils.{cls}",
             f"custom_dataset: !function utils.{loader}", "test_split: test", "output_type: loglikelihood",
             'doc_to_text: ""', 'doc_to_target: ""', f"process_results: !function utils.{process}", "metric_list:"]
    for name, better in metrics:
        hib = "null" if better is None else str(better).lower()
        lines += [f"  - metric: {name}", f"    aggregation: !function utils.agg_{name}",
                  f"    higher_is_better: {hib}"]
    lines += ["metadata:", f"  version: {VERSION}", f"  start_token: {json.dumps(start_token)}",
              f"  bias_type: {bias_type}"]
    return "\n".join(lines) + "\n"


def export_lmeval_tasks(config: Config, to: Path | str, benchmarks: tuple[str, ...] = BENCHMARKS) -> dict[str, Any]:
    """Write the task folder ``to`` (new or empty; written whole or not at all); returns what it holds."""
    from ..evaluate import load_items
    from ..io import atomic_dir

    dest = fresh_destination(to, "lm-eval tasks")
    ev = config.evaluate
    items = {b: load_items(b, ev, None, config.run.data_cache) for b in benchmarks}
    with atomic_dir(dest) as tmp:
        shutil.copyfile(RESOURCES / "utils.py", tmp / "utils.py")
        for b in benchmarks:
            name, file = task_name(b, ev.bias_type), TASKS[b][1]
            (tmp / f"{name}.yaml").write_text(task_yaml(b, ev.bias_type, ev.start_token), encoding="utf-8")
            with open(tmp / file, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs(b, items[b]))
        (tmp / "README.md").write_text(readme(config, {b: len(v) for b, v in items.items()}), encoding="utf-8")
        usual_mode(tmp)
    return {"to": str(dest), "tasks": [task_name(b, ev.bias_type) for b in benchmarks], "tag": TAG,
            "items": {b: len(v) for b, v in items.items()}}


def _sources(config: Config, benchmarks: tuple[str, ...]) -> list[str]:
    """One line per benchmark: where its items come from and their licence (the dataset registry)."""
    from ..data import datasets as D

    names = {"stereoset": ("stereoset", config.evaluate.stereoset_path),
             "crows": ("crows-pairs", config.evaluate.crows_path)}
    out = []
    for b in benchmarks:
        name, explicit = names[b]
        if explicit:
            out.append(f"- {b}: the file {explicit} (evaluate.{b}_path; licence as its source states)")
            continue
        ds = D.get(name)
        out.append(f"- {b}: {ds.description}, from {ds.provenance}; licence {ds.license or 'not recorded'}")
    return out


def readme(config: Config, counts: dict[str, int]) -> str:
    """The folder's README: what the tasks score, how to run them, where the items come from."""
    ev = config.evaluate
    tasks = ", ".join(task_name(b, ev.bias_type) for b in counts)
    sizes = ", ".join(f"{b}: {n} items" for b, n in counts.items())
    text = (RESOURCES / "README.md").read_text(encoding="utf-8")
    return text.format(tasks=tasks, tag=TAG, bias_type=ev.bias_type, sizes=sizes,
                       sources="\n".join(_sources(config, tuple(counts))),
                       max_items=f" (the first {ev.max_items}: evaluate.max_items)" if ev.max_items else "")
