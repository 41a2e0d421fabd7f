"""Run lm-evaluation-harness's own winogender task on local Winogender docs; write its per-item log-likelihoods.

Runs inside the lm-eval venv (``scripts/setup-lmeval.sh``: lm-eval 0.4.13), not the project's:

    .venv-lmeval/bin/python tests/helpers/lmeval_winogender.py MODEL_DIR DOCS.jsonl OUT.json

The task is the harness's ``winogender_all`` (its doc_to_text prompt, doc_to_choice, doc_to_target and acc metric),
included as it ships, with only the data source replaced: DOCS.jsonl (one doc per line with the hub copy's
columns sentid, sentence, pronoun, occupation, participant, gender, label; the test writes it from the schemas'
own files) through the ``json`` dataset builder instead of ``oskarvanderwal/winogender``. OUT.json holds, per doc
in file order, its sentid, the two choices' summed log-likelihoods and the harness's acc.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def task_yaml(docs: str) -> str:
    import lm_eval

    base = Path(lm_eval.__file__).parent / "tasks" / "winogender" / "winogender.yaml"
    return (f"include: {base}\n"
            "task: ccda_winogender_local\n"
            "tag: []\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    test: {docs}\n"
            "test_split: test\n")


def main(model_dir: str, docs: str, out: str) -> None:
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ccda_winogender_local.yaml").write_text(task_yaml(docs))
        results = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={model_dir},dtype=float32,device=cpu",
            tasks=["ccda_winogender_local"], task_manager=TaskManager(include_path=tmp), batch_size=16,
            log_samples=True,
        )
    samples = sorted(results["samples"]["ccda_winogender_local"], key=lambda s: s["doc_id"])
    rows = [{"sentid": s["doc"]["sentid"], "ll_occupation": float(s["resps"][0][0][0]),
             "ll_participant": float(s["resps"][1][0][0]), "acc": float(s["acc"]),
             "context": s["arguments"][0][0] if "arguments" in s else None} for s in samples]
    agg = results["results"]["ccda_winogender_local"]
    Path(out).write_text(json.dumps({"version": getattr(lm_eval, "__version__", None),
                                     "acc": agg.get("acc,none"), "rows": rows}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
