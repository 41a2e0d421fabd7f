"""Run McGill-NLP/bias-bench's own code (commit 291426aa) on one job; write what it computes as JSON / .npy.

Runs inside the bias-bench venv (``scripts/setup-biasbench.sh``: bias-bench's code on the path, the project's
transformers), not the project's:

    .venv-biasbench/bin/python tests/helpers/biasbench_run.py JOB.json OUT_DIR

JOB.json: {"task": "inlp" | "sentence_debias" | "stereoset" | "crows" | "timed", "model_dir", "family": "masked" | "causal",
"arm": "inlp" | "sentence-debias" | "self-debias", "persistent_dir" (its data/: text/wikipedia-2.5.txt,
bias_attribute_words.json), "n_classifiers", "seed", "artifact" (.npy matrix for the scoring tasks),
"stereoset" (an original-format JSON), "crows" (a CSV), and for "timed": "bench" ("stereoset" | "crows"),
"threads" (torch threads)}.

``timed`` runs bias-bench's own runner end to end (``StereoSetRunner(...)()`` / ``CrowSPairsRunner(...)()``, the
model already loaded) and writes ``timed.json``: its wall-clock seconds and the scores it computed, StereoSet's
per sentence id and CrowS's per sentence in the runner's order (recorded as its scoring method returns them).

Everything computed is bias-bench's: its sentence selection and INLP / SentenceDebias functions, its model classes
(the ``_INLPModel`` / ``_SentenceDebiasModel`` hooks; for a Llama-style model the same hook registered on
``model.model``, as bias-bench registers it on GPT-2's ``model.transformer``), its Self-Debias wrappers and its
StereoSet and CrowS runners (CrowS per pair through the runner's own scoring methods, since its ``__call__``
returns only the total). What is adapted, and only so that the 2022 code runs with transformers 5 on a CPU
(DESIGN.md, "Reference implementations in their own venvs"):

* ``encode_plus`` / ``batch_encode_plus`` call ``tokenizer(...)`` with the same arguments (``pad_to_max_length``
  as ``padding="max_length"``); ``transformers.generation_utils`` (moved) is provided from ``transformers``;
  ``pandas.DataFrame.append`` (removed in pandas 2) is ``pd.concat``;
* the GPT-2 Self-Debias wrapper's forced ``self._device = "cuda"`` stays on the CPU;
* INLP's hard-coded ``input_dim=768`` is the features' width (the one number no other width fits);
* nltk's punkt tables come from the llama-index-core wheel (they cannot be downloaded here).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path


def _shims() -> None:
    import importlib.util

    import pandas as pd
    import transformers
    from transformers import PreTrainedTokenizerBase

    def encode_plus(self, text, text_pair=None, pad_to_max_length=False, **kw):
        if pad_to_max_length:
            kw["padding"] = "max_length"
        return self(text, text_pair, **kw) if text_pair is not None else self(text, **kw)

    def batch_encode_plus(self, texts, **kw):
        return self(list(texts), **kw)

    if not hasattr(PreTrainedTokenizerBase, "encode_plus"):
        PreTrainedTokenizerBase.encode_plus = encode_plus
    if not hasattr(PreTrainedTokenizerBase, "batch_encode_plus"):
        PreTrainedTokenizerBase.batch_encode_plus = batch_encode_plus
    if "transformers.generation_utils" not in sys.modules:
        mod = types.ModuleType("transformers.generation_utils")
        gen = transformers.generation
        mod.GenerationMixin = gen.GenerationMixin
        for name in ("SampleOutput", "SampleEncoderDecoderOutput", "SampleDecoderOnlyOutput"):
            setattr(mod, name, getattr(gen, name, getattr(gen, "GenerateOutput", object)))
        sys.modules["transformers.generation_utils"] = mod
    if not hasattr(pd.DataFrame, "append"):
        def append(self, other, ignore_index=False):
            return pd.concat([self, pd.DataFrame([other])], ignore_index=ignore_index)

        pd.DataFrame.append = append
    spec = importlib.util.find_spec("llama_index.core")
    if spec is not None:
        import nltk

        for p in Path(next(iter(spec.submodule_search_locations))).rglob("nltk_cache"):
            nltk.data.path.insert(0, str(p))


def _input_dim_patch() -> None:
    from bias_bench.debias.inlp import context_nullspace_projection as cnp

    original = cnp.debias.get_debiasing_projection

    def patched(*args, **kw):
        kw["input_dim"] = kw["X_train"].shape[1]  # bias-bench passes 768
        return original(*args, **kw)

    cnp.debias.get_debiasing_projection = patched


def _base(model_dir: str):
    import transformers

    return transformers.AutoModel.from_pretrained(model_dir).eval()


def learn(job: dict, out: Path) -> None:
    import numpy as np
    import transformers

    pdir = job["persistent_dir"]
    tok = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    model = _base(job["model_dir"])
    if job["task"] == "inlp":
        from bias_bench.dataset import load_inlp_data
        from bias_bench.debias.inlp import compute_projection_matrix

        _input_dim_patch()
        data = load_inlp_data(pdir, "gender", seed=job.get("seed", 0))
        (out / "inlp_data.json").write_text(json.dumps(data))
        p = compute_projection_matrix(model, tok, data, bias_type="gender", n_classifiers=job["n_classifiers"])
        np.save(out / "projection.npy", p.numpy())
    else:
        from bias_bench.dataset import load_sentence_debias_data
        from bias_bench.debias import compute_gender_subspace

        if tok.pad_token is None:  # sentence_debias_subspace.py does this for GPT-2
            tok.pad_token = tok.eos_token
        data = load_sentence_debias_data(pdir, "gender")
        (out / "pairs.json").write_text(json.dumps(data))
        d = compute_gender_subspace(data, model, tok, batch_size=job.get("batch_size", 32))
        np.save(out / "bias_direction.npy", d.numpy())


def _hooked(job: dict):
    """bias-bench's INLP / SentenceDebias model for the job's family (its class, or its hook on model.model)."""
    import numpy as np
    import torch
    import transformers
    from bias_bench.model import models

    inlp = job["arm"] == "inlp"
    mat = torch.tensor(np.load(job["artifact"]), dtype=torch.float32)
    if not inlp:
        mat = mat.reshape(-1)  # bias-bench keeps SentenceDebias's direction as a vector (pca.components_[0])
    cls = {("masked", True): "INLPBertForMaskedLM", ("masked", False): "SentenceDebiasBertForMaskedLM",
           ("causal", True): "INLPGPT2LMHeadModel", ("causal", False): "SentenceDebiasGPT2LMHeadModel"}
    auto = transformers.AutoConfig.from_pretrained(job["model_dir"])
    if auto.model_type in ("bert", "gpt2"):
        return getattr(models, cls[(job["family"], inlp)])(job["model_dir"], mat)
    model = transformers.AutoModelForCausalLM.from_pretrained(job["model_dir"])  # Llama-style: model.model
    hook = models._INLPModel if inlp else models._SentenceDebiasModel
    wrapper = object.__new__(hook)
    hook.__init__(wrapper, job["model_dir"], mat)
    model.model.register_forward_hook(wrapper.func)
    return model


def _self_debias(job: dict):
    from bias_bench.debias.self_debias.generation import SelfDebiasingGPT2LMHeadModel
    from bias_bench.debias.self_debias.modeling import GPT2Wrapper, MaskedLMWrapper

    if job["family"] == "masked":
        return MaskedLMWrapper(job["model_dir"], use_cuda=False)

    class CPUWrapper(GPT2Wrapper):
        _device = property(lambda self: "cpu", lambda self, value: None)  # compute_loss_self_debiasing sets "cuda"

    import transformers

    auto = transformers.AutoConfig.from_pretrained(job["model_dir"])
    if auto.model_type == "gpt2":
        return CPUWrapper(job["model_dir"], use_cuda=False)
    wrapper = object.__new__(CPUWrapper)  # a Llama-style model under the GPT-2 wrapper's methods
    wrapper._tokenizer = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    wrapper._model = transformers.AutoModelForCausalLM.from_pretrained(job["model_dir"])
    wrapper._model.init_logits_processor = types.MethodType(SelfDebiasingGPT2LMHeadModel.init_logits_processor,
                                                            wrapper._model)
    wrapper._tokenizer.pad_token = wrapper._tokenizer.eos_token
    wrapper._model.config.pad_token_id = wrapper._tokenizer.eos_token_id
    return wrapper


def _model(job: dict):
    import transformers

    if job["arm"] == "self-debias":
        return _self_debias(job)
    if job["arm"] == "vanilla":
        auto = transformers.AutoModelForMaskedLM if job["family"] == "masked" else transformers.AutoModelForCausalLM
        return auto.from_pretrained(job["model_dir"])
    return _hooked(job)


def stereoset(job: dict, out: Path) -> None:
    import transformers
    from bias_bench.benchmark.stereoset import StereoSetRunner

    model = _model(job)
    sd = job["arm"] == "self-debias"
    (model._model if sd else model).eval()
    tok = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    runner = StereoSetRunner(intrasentence_model=model, tokenizer=tok, input_file=job["stereoset"],
                             model_name_or_path=job["model_dir"], batch_size=1,
                             is_generative=job["family"] == "causal", is_self_debias=sd, bias_type="gender")
    preds = runner()["intrasentence"]
    (out / "stereoset.json").write_text(json.dumps([{"id": p["id"], "score": float(p["score"])} for p in preds]))


def crows(job: dict, out: Path) -> None:
    import torch
    import transformers
    from bias_bench.benchmark.crows import CrowSPairsRunner
    from bias_bench.benchmark.crows.crows import _get_span

    model = _model(job)
    sd = job["arm"] == "self-debias"
    (model._model if sd else model).eval()
    tok = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    causal = job["family"] == "causal"
    runner = CrowSPairsRunner(model=model, tokenizer=tok, input_file=job["crows"], bias_type="gender",
                              is_generative=causal, is_self_debias=sd)
    rows = []
    with torch.no_grad():
        for _, d in runner._read_data(job["crows"]).iterrows():  # the runner's loop, per pair
            if causal:
                s1 = runner._joint_log_probability(tok.encode(d["sent1"]))
                s2 = runner._joint_log_probability(tok.encode(d["sent2"]))
            else:
                ids1, ids2 = tok.encode(d["sent1"], return_tensors="pt"), tok.encode(d["sent2"], return_tensors="pt")
                t1, t2 = _get_span(ids1[0], ids2[0], "diff")
                if not t1 or not t2:
                    continue
                s1 = round(runner._average_log_probability(ids1, t1), 3)
                s2 = round(runner._average_log_probability(ids2, t2), 3)
            rows.append({"sent1": d["sent1"], "sent2": d["sent2"], "direction": d["direction"],
                         "score1": float(s1), "score2": float(s2)})
    metric = runner() if job.get("total") else None  # its own total (a second pass over every pair)
    (out / "crows.json").write_text(json.dumps({"metric": metric, "rows": rows}))


def timed(job: dict, out: Path) -> None:
    import time

    import torch
    import transformers
    from bias_bench.benchmark.crows import CrowSPairsRunner
    from bias_bench.benchmark.stereoset import StereoSetRunner

    torch.set_num_threads(int(job.get("threads") or torch.get_num_threads()))
    model = _model(job)
    sd = job["arm"] == "self-debias"
    (model._model if sd else model).eval()
    tok = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    gen = job["family"] == "causal"
    recorded: list[float] = []
    if job["bench"] == "stereoset":
        runner = StereoSetRunner(intrasentence_model=model, tokenizer=tok, input_file=job["stereoset"],
                                 model_name_or_path=job["model_dir"], batch_size=1, is_generative=gen,
                                 is_self_debias=sd, bias_type="gender")
    else:
        runner = CrowSPairsRunner(model=model, tokenizer=tok, input_file=job["crows"], bias_type="gender",
                                  is_generative=gen, is_self_debias=sd)
        method = "_joint_log_probability" if gen else "_average_log_probability"
        own = getattr(runner, method)

        def record(*args):
            value = own(*args)
            recorded.append(float(value))
            return value

        setattr(runner, method, record)
    t0 = time.perf_counter()
    result = runner()
    seconds = time.perf_counter() - t0
    scores = ({p["id"]: float(p["score"]) for p in result["intrasentence"]} if job["bench"] == "stereoset"
              else recorded)
    (out / "timed.json").write_text(json.dumps({"seconds": seconds, "scores": scores,
                                                "threads": torch.get_num_threads()}))


def main(job_file: str, out_dir: str) -> None:
    _shims()
    job = json.loads(Path(job_file).read_text())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = {"inlp": learn, "sentence_debias": learn, "stereoset": stereoset, "crows": crows, "timed": timed}
    tasks[job["task"]](job, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
