"""The stage table declares exactly the config keys each step reads (issue: five rows declared run.seed without
reading it). A tiny run with every kind of arm, the evaluation and the registry, its config instrumented
(tests/helpers/key_reads.py): every key a stage function reads is one its row declares (or an environment key:
stages.ENV_KEYS), and every key a row declares is read by some step of it. Its keys are what its up-to-date key
hashes, what DVC tracks and what a Kubeflow task of it gets (the rest at their defaults), so a key read but not
declared would be a setting a change of which reruns nothing, and in a Kubeflow task a default silently used."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402
from key_reads import covered, recording  # noqa: E402

from context_cda import stages as T  # noqa: E402
from context_cda.pipeline import run_pipeline  # noqa: E402

pytestmark = pytest.mark.services


@pytest.mark.timeout(1200)
def test_every_step_reads_exactly_the_keys_its_row_declares(tmp_path):
    with FakeOpenAIServer() as srv:
        cfg = tp.tiny_config(srv.base_url, run_dir=tmp_path / "run")
        cfg.train.arms = ["cda", "context-cda", "context-cda-nofilter", "dropout", "cda-neutral", "self-debias"]
        cfg.train.max_steps = 1
        cfg.tracking.enabled = True
        cfg.evaluate.after_training = True
        cfg.augment.review.meaning = "nli"  # its judge: the entropy step's (entropy.judge_model)
        with recording(cfg) as reads:
            results = run_pipeline(cfg)
    ran = {r.step.row.step for r in results if r.status == "ran"}
    assert {"ingest", "sample-part", "budget", "finetune", "evaluate", "evaluate-posthoc", "register",
            "report"} <= ran
    problems = []
    for step in sorted(ran):
        declared = [s.replace(".{target}", "") for s in T.get(step).sections]
        undeclared = sorted(r for r in reads[step] if not covered(r, [*declared, *T.ENV_KEYS]))
        unread = sorted(d for d in declared if not covered(d, sorted(reads[step])))
        if undeclared:
            problems.append(f"{step} reads keys its row does not declare: {', '.join(undeclared)}")
        if unread:
            problems.append(f"{step} declares keys it never read: {', '.join(unread)}")
    assert not problems, "\n".join(problems)
