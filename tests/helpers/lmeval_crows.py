"""Run lm-evaluation-harness's own crows_pairs task on a local CrowS-Pairs CSV; write its per-pair log-likelihoods.

Runs inside the lm-eval venv (``scripts/setup-lmeval.sh``: lm-eval 0.4.13), not the project's:

    .venv-lmeval/bin/python tests/helpers/lmeval_crows.py MODEL_DIR CSV BIAS_TYPE OUT.json

The task is the harness's ``crows_pairs_english`` (its doc_to_choice, process_results and the empty context),
included as it ships, with only the data source replaced: the local CSV through the ``csv`` dataset builder
instead of the hub copy, filtered to ``bias_type`` as the harness's per-type tasks do. OUT.json holds, per pair
in file order, sent_more, sent_less, the two summed log-likelihoods and the harness's pct_stereotype.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def task_yaml(csv: str, bias_type: str) -> str:
    import lm_eval

    base = Path(lm_eval.__file__).parent / "tasks" / "crows_pairs" / "crows_pairs_english.yaml"
    return (f"include: {base}\n"
            "task: ccda_crows_local\n"
            "dataset_path: csv\n"
            "dataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    test: {csv}\n"
            "test_split: test\n"
            f"process_docs: !function local_utils.filter_{bias_type.replace('-', '_')}\n")


def main(model_dir: str, csv: str, bias_type: str, out: str) -> None:
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ccda_crows_local.yaml").write_text(task_yaml(csv, bias_type))
        (Path(tmp) / "local_utils.py").write_text(
            "def filter_" + bias_type.replace("-", "_") + "(dataset):\n"
            f"    return dataset.filter(lambda ex: ex['bias_type'].startswith({bias_type!r}))\n")
        results = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={model_dir},dtype=float32,device=cpu", tasks=["ccda_crows_local"],
            task_manager=TaskManager(include_path=tmp), batch_size=16, log_samples=True,
        )
    samples = sorted(results["samples"]["ccda_crows_local"], key=lambda s: s["doc_id"])
    rows = [{"sent_more": s["doc"]["sent_more"], "sent_less": s["doc"]["sent_less"],
             "ll_more": float(s["resps"][0][0][0]), "ll_less": float(s["resps"][1][0][0]),
             "pct_stereotype": float(s["pct_stereotype"])} for s in samples]
    agg = results["results"]["ccda_crows_local"]
    Path(out).write_text(json.dumps({"version": lm_eval.__version__ if hasattr(lm_eval, "__version__") else None,
                                     "pct_stereotype": agg.get("pct_stereotype,none"), "rows": rows}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
