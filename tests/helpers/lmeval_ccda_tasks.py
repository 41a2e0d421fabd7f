"""Run the tasks `ccda export lm-eval-tasks` wrote, in lm-evaluation-harness itself; write their per-item scores.

Runs inside the lm-eval venv (``scripts/setup-lmeval.sh``: lm-eval 0.4.13), not the project's:

    .venv-lmeval/bin/python tests/helpers/lmeval_ccda_tasks.py MODEL_DIR TASK_DIR MODEL_ARGS OUT.json

MODEL_ARGS: extra ``--model_args`` (``add_bos_token=False`` for a tokenizer that adds BOS itself; ``-`` for none).
The model arguments reach the tasks as metadata the way the harness's CLI hands them over (its TaskManager is built
with the include path and the model arguments as metadata, as ``lm_eval --include_path`` builds it).
OUT.json: the harness version, each task's aggregated metrics, and per document its id and the record its first
metric holds (the sentences' scores).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, task_dir: str, extra: str, out: str) -> None:
    import lm_eval
    from lm_eval.tasks import TaskManager

    args = f"pretrained={model_dir},dtype=float32" + (f",{extra}" if extra not in ("", "-") else "")
    from lm_eval.utils import simple_parse_args_string

    manager = TaskManager(include_path=task_dir, metadata=simple_parse_args_string(args))  # as the CLI builds it
    results = lm_eval.simple_evaluate(model="hf", model_args=args, device="cpu", tasks=["ccda_bias"],
                                      task_manager=manager, batch_size=16, log_samples=True)
    tasks = {}
    for name, samples in results["samples"].items():
        first = next(iter(results["configs"][name]["metric_list"]))["metric"]
        tasks[name] = {
            "metrics": {k.split(",")[0]: v for k, v in results["results"][name].items()
                        if k.endswith(",none") and "_stderr" not in k},
            "items": [s[first] for s in sorted(samples, key=lambda s: s["doc_id"])],
            "requests": sum(len(s["arguments"]) for s in samples),
        }
    Path(out).write_text(json.dumps({"version": getattr(lm_eval, "__version__", None), "tasks": tasks}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
