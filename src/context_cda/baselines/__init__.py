"""The projection arms learnt from the run's corpus: INLP and SentenceDebias (the ``debias`` step).
May import: the run contract, cda, models, scoring.

* :mod:`.selection` - the corpus lines and what each arm takes from them (bias-bench's selection);
* :mod:`.features` - mean-pooled last hidden states of the target model;
* :mod:`.learn` - the nullspace projection and the bias subspace (pure numpy / scikit-learn);
* :mod:`.stage` - :func:`run_debias`, the step of the stage table.

The matrices are applied at scoring time by :mod:`context_cda.scoring.interventions`; Self-Debias is a scorer
(:mod:`context_cda.scoring.self_debias`) and the dropout arm a fine-tuning (:mod:`context_cda.train`). What every arm
is: :mod:`context_cda.arms`. torch, transformers and scikit-learn are imported inside the functions.
"""

from __future__ import annotations

__all__ = ["run_debias"]


def __getattr__(name: str):
    if name == "run_debias":
        from .stage import run_debias

        return run_debias
    raise AttributeError(name)
