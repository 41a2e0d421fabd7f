"""Loaded by every python whose PYTHONPATH holds this folder (a test's `ccda run`, a kfp.local task): with
``CCDA_TEST_SLOW="entropy:0.5,finetune:1.5"`` the named stage's unit of work takes that many seconds more (entropy:
each shard of items it scores; finetune: each epoch's evaluation), so a test can stop the real process in the middle
of it. Without the variable it does nothing. Test instrumentation only: nothing in the package reads it."""

import os

_SPEC = os.environ.get("CCDA_TEST_SLOW")
if _SPEC:
    import time

    _DELAYS = {k: float(v) for k, v in (part.split(":") for part in _SPEC.split(",") if part)}
    if "entropy" in _DELAYS:
        from context_cda.entropy import stage as _entropy

        _score = _entropy.process_items

        def _slow_score(*args, **kwargs):
            time.sleep(_DELAYS["entropy"])
            return _score(*args, **kwargs)

        _entropy.process_items = _slow_score
    if "finetune" in _DELAYS:
        from context_cda.train import finetune as _finetune

        _make = _finetune.default_evaluate_fn

        def _slow_evaluate_fn(config):
            fn = _make(config)
            if fn is None:
                return None

            def evaluate(model, tokenizer, eval_config, world=None):
                time.sleep(_DELAYS["finetune"])
                fn.predictions = evaluate.predictions
                out = fn(model, tokenizer, eval_config, world=world)
                evaluate.predictions = fn.predictions
                return out

            evaluate.predictions = None
            evaluate.sharded = True  # under torchrun every process scores its share, as the wrapped function does
            return evaluate

        _finetune.default_evaluate_fn = _slow_evaluate_fn
