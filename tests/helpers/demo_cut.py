"""The demo profile cut to a few items, for the image tests (``tests/images/test_demo_in_image.py``): every stage and
benchmark of ``configs/demo.yaml`` and every arm but context-neutral, with its real models (SmolLM2-135M-Instruct and
all-MiniLM-L6-v2 from their packages) and its named datasets, on a handful of sentences and items, so that a run
takes minutes."""

from __future__ import annotations

#: ``--set`` overrides (nested) that cut ``--profile demo`` down; the run folder is added by the caller
DEMO_CUT: dict = {
    "ingest": {"sample_n": 40},  # INLP's classes need two sentences each: about 1 in 12 of the demo's is female
    "augment": {"limit": 12, "batch_size": 12, "shard_size": 12},
    "entropy": {"n_samples": 2, "max_tokens": 16, "batch_size": 8},
    # every arm of the demo but context-neutral: SmolLM2 passed its review for 1 rewrite of 12 here (a run of a few
    # items would fail on an empty neutral table as often as not); the neutral step runs in the full demo
    "train": {"epochs": 1, "eval_every": 1, "max_seq_len": 32,
              "arms": ["cda", "context-cda", "dropout", "inlp", "sentence-debias", "self-debias"]},
    "baselines": {"inlp": {"neutral_lines": 8, "min_per_class": 2}},
    "evaluate": {"max_items": 6, "winogender": {"max_items": 2}, "winobias": {"max_items": 2},
                 "glue": {"tasks": ["sst2"], "max_train": 8, "max_eval": 8},
                 "biasbios": {"max_train": 8, "max_eval": 8}, "stsb": {"max_train": 8, "max_eval": 8, "max_pairs": 8},
                 "nli_bias": {"max_train": 8, "max_eval": 8, "max_pairs": 8}},
}
