"""A pyfunc wrapper around a ``save_pretrained`` folder: scores sentences with the model's own objective.

Used to register models whose family has no transformers pipeline task (seq2seq under transformers 5).
``predict`` takes a list of sentences and returns the mean token
log-likelihood of each (causal: next-token; seq2seq: the sentence reconstructed from itself; masked: labels =
inputs, an upper bound useful only for comparisons).
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc


class HFFolderModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context) -> None:
        from transformers import AutoConfig, AutoTokenizer

        from context_cda.models import auto_class_for, family_of_config

        path = context.artifacts["hf_model"]
        self.family = family_of_config(AutoConfig.from_pretrained(path))
        self.model = auto_class_for(self.family).from_pretrained(path).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(path)

    def predict(self, context, model_input: list[str], params: dict[str, Any] | None = None) -> list[float]:
        import torch

        texts = [str(t) for t in model_input]
        out = []
        for text in texts:
            enc = self.tokenizer(str(text), return_tensors="pt")
            with torch.no_grad():
                loss = self.model(**enc, labels=enc["input_ids"]).loss
            out.append(-float(loss))
        return out
