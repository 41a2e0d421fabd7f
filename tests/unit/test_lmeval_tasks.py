"""`ccda export lm-eval-tasks`: the folder (task YAMLs, utils.py, the items as `ccda evaluate` loads them, a README
with sources and licences), and its utils.py on its own: the requests it asks, answered the way lm-evaluation-
harness's HF model answers them (its encoding of a context/continuation pair), give the per-item scores of
`ccda evaluate` in bias-bench mode; its aggregations are StereoSet's and CrowS-Pairs' (the harness itself:
tests/integration/test_lm_eval_ccda_tasks.py, -m lmeval)."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest
import yaml

from context_cda.cli import main

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"
UTILS = ROOT / "src" / "context_cda" / "resources" / "lmeval" / "utils.py"


def _utils():
    spec = importlib.util.spec_from_file_location("ccda_lmeval_utils", UTILS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    to = tmp_path_factory.mktemp("x") / "tasks"
    assert main(["export", "lm-eval-tasks", "--to", str(to), "--params", str(PARAMS), "--profile", "tiny"]) == 0
    return to


def test_the_folder_holds_the_tasks_their_items_and_where_they_come_from(tasks):
    from context_cda.config import load_config
    from context_cda.evaluate import load_items

    names = sorted(p.name for p in tasks.iterdir())
    assert names == ["README.md", "ccda_crows_pairs_gender.yaml", "ccda_stereoset_gender.yaml", "crows_pairs.jsonl",
                     "stereoset.jsonl", "utils.py"]
    cfg = load_config("tiny", {}, params_file=PARAMS)
    for bench, file, yml in (("stereoset", "stereoset.jsonl", "ccda_stereoset_gender.yaml"),
                             ("crows", "crows_pairs.jsonl", "ccda_crows_pairs_gender.yaml")):
        items = load_items(bench, cfg.evaluate, None, cfg.run.data_cache)
        docs = [json.loads(line) for line in (tasks / file).read_text().splitlines()]
        assert [d["id"] for d in docs] == [it.id for it in items] and docs  # the same items, in the same order
        task = yaml.load((tasks / yml).read_text(), Loader=_Loader)
        assert task["output_type"] == "loglikelihood" and task["class"].startswith("!function utils.")
        for m in task["metric_list"]:
            assert m["aggregation"] == f"!function utils.agg_{m['metric']}"
            assert hasattr(_utils(), f"agg_{m['metric']}")
    readme = (tasks / "README.md").read_text()
    assert "--include_path" in readme and "add_bos_token=False" in readme and "evaluate.stereoset_path" in readme


def _harness_loglikelihood(scorer, encode, context: str, continuation: str) -> float:
    """lm-evaluation-harness's HF model on one request: the whole text and the context encoded, the continuation's
    tokens the whole's after the context's (lm_eval.api.model.TemplateLM._encode_pair), their summed log-probs."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation, context = context[-n_spaces:] + continuation, context[:-n_spaces]
    whole, ctx = encode(context + continuation), encode(context)
    lps = scorer.token_logprobs([whole])[0]
    return float(sum(lps[len(ctx) - 1:]))


@pytest.mark.parametrize("ref", ["tiny:gpt2", "tiny:llama"])
def test_the_requests_answered_as_the_harness_does_give_ccda_evaluates_scores(ref, tasks):
    from context_cda.config import load_config
    from context_cda.evaluate import crows, load_items, stereoset
    from context_cda.models import resolve_pretrained
    from context_cda.scoring import load_scorer

    u, model = _utils(), str(resolve_pretrained(ref))
    meta = {"pretrained": model, **({"add_bos_token": "False"} if ref == "tiny:llama" else {})}
    cfg = load_config("tiny", {}, params_file=PARAMS)
    scorer = load_scorer(model, device="cpu", batch_size=1)
    encode = u.encoder(u.load_tokenizer(meta), meta)
    fields = {lab: f"sentence_{lab.replace('-', '_')}" for lab in u.STEREOSET_LABELS}
    docs = u.prepare([json.loads(x) for x in (tasks / "stereoset.jsonl").read_text().splitlines()], fields, meta)
    rows, _ = stereoset.score(scorer, load_items("stereoset", cfg.evaluate, None, None))
    for doc, row in zip(docs, rows, strict=True):
        lls = [_harness_loglikelihood(scorer, encode, c, k) for _, c, k in u.requests_of(doc, u.STEREOSET_LABELS,
                                                                                          doc["start_token"])]
        got = u.sentence_scores(doc, u.STEREOSET_LABELS, lls)
        for lab in u.STEREOSET_LABELS:
            assert got[lab] == pytest.approx(row[stereoset.SCORE_COLUMNS[lab]], rel=1e-5), (doc["id"], lab)
    pairs = [json.loads(x) for x in (tasks / "crows_pairs.jsonl").read_text().splitlines()]
    docs = u.prepare(pairs, {s: f"sent_{s}" for s in u.CROWS_SIDES}, meta)
    rows, _, mode = crows.score(scorer, load_items("crows", cfg.evaluate, None, None), "bias-bench")
    for doc, row in zip(docs, rows, strict=True):
        lls = [_harness_loglikelihood(scorer, encode, c, k) for _, c, k in u.requests_of(doc, u.CROWS_SIDES,
                                                                                          doc["start_token"])]
        got = u.sentence_scores(doc, u.CROWS_SIDES, lls)
        assert (got["more"], got["less"]) == pytest.approx((row["score_more"], row["score_less"]), rel=1e-5)


def test_a_tokenizer_that_adds_bos_itself_needs_add_bos_token_false():
    from context_cda.models import resolve_pretrained

    u = _utils()
    docs = [{"id": "a", "sent_more": "He is a nurse.", "sent_less": "She is a nurse."}]
    fields = {s: f"sent_{s}" for s in u.CROWS_SIDES}
    meta = {"pretrained": str(resolve_pretrained("tiny:llama"))}
    with pytest.raises(ValueError, match=r"with tokens it adds itself.*add_bos_token=False in --model_args"):
        u.prepare(docs, fields, meta)
    got = u.prepare(docs, fields, {**meta, "add_bos_token": "False"})[0]
    assert got["start_token"] == "<s>" and got["more_first"] + got["more_rest"] == "He is a nurse."
    with pytest.raises(ValueError, match=r"--model_args pretrained=NAME"):
        u.prepare(docs, fields, {})


def test_the_aggregations_are_stereosets_and_crows_pairs():
    """utils.py's SS / LMS / ICAT and CS / stereo / antistereo equal context_cda's aggregate on the same scores,
    ties included (a tie of stereotype and anti-stereotype counts as anti; a tied pair stays in N)."""
    from context_cda.evaluate import crows, stereoset

    u, rnd = _utils(), random.Random(3)
    records, rows = [], []
    for i in range(200):
        s = [rnd.choice([0.1, 0.2, 0.3]) for _ in range(3)]
        records.append({"id": str(i), "target": f"t{i % 7}", **dict(zip(u.STEREOSET_LABELS, s, strict=True))})
        rows.append({"id": str(i), "target": f"t{i % 7}", "bias_type": "gender",
                     **{stereoset.SCORE_COLUMNS[lab]: v for lab, v in zip(u.STEREOSET_LABELS, s, strict=True)}})
    ours = stereoset.aggregate(rows)["overall"]
    assert u.stereoset_terms(records) == pytest.approx({k: ours[k] for k in ("ss", "lms", "icat")}, abs=1e-12)
    pairs, prs = [], []
    for i in range(150):
        m, le, d = rnd.choice([1.0, 2.0]), rnd.choice([1.0, 2.0]), rnd.choice(["stereo", "antistereo"])
        pairs.append({"id": str(i), "direction": d, "more": m, "less": le})
        prs.append({"id": str(i), "direction": d, "bias_type": "gender", "score_more": m, "score_less": le})
    ours = crows.aggregate(prs)["overall"]
    assert u.crows_scores(pairs) == pytest.approx({k: ours[k] for k in ("cs", "stereo", "antistereo")}, abs=1e-12)
    assert math.isnan(u.stereoset_terms([])["ss"])
