"""What leaves the project: the register step, model cards, lm-eval tasks, exported versions.
May import: the run contract, data, evaluate, models, report, tools (the pre-flight's facts), tracking.

* :mod:`.card` — a Hugging Face model card per registered version (``README.md`` with ``model-index`` metadata and
  ``.eval_results/*.yaml``), written from the run's evidence and the promotion gate's decision, never by hand;
* :mod:`.facts` — the facts a card is written from, gathered from the register step's inputs and the run's
  manifests (one JSON record, logged with the version, so a card can be written again without the run folder);
* :mod:`.register` — the ``register`` step: :func:`context_cda.tracking.run_register_target`, then each version's
  card, written beside its decision and logged with the version in MLflow;
* :mod:`.export` — ``ccda export --model NAME --version N --to DIR``: a folder a user can upload as is
  (safetensors weights, tokenizer, card, evaluation results; no pickles);
* :mod:`.lmeval` — ``ccda export lm-eval-tasks --to DIR``: the project's StereoSet and CrowS-Pairs scoring as
  lm-evaluation-harness tasks.
"""

from __future__ import annotations

from .destination import fresh_destination
from .register import run_register_target

__all__ = ["fresh_destination", "run_register_target"]
