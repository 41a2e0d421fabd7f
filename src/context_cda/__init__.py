"""Context-CDA: gender debiasing of language models with context-augmented counterfactuals.

The package is importable without torch, vLLM or kfp: every heavy library is imported inside the backend that
needs it. Each pipeline stage is one function ``run_<stage>(config, inputs, outputs) -> summary``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
