"""How a fine-tuned model is stored in the MLflow model registry (``tracking.model_flavor``).

* ``auto`` (default): MLflow's **transformers** flavour where transformers has a pipeline task for the family
  (causal: ``text-generation``, masked: ``fill-mask``): the ``save_pretrained`` weights (safetensors) and the
  tokenizer, loaded with ``mlflow.transformers.load_model("models:/<name>@champion", return_type="components")``;
  no pickled code. Seq2seq models have no task in transformers 5 (``text2text-generation`` was removed), and a
  family whose transformers logging fails falls back to:
* ``folder``: the ``save_pretrained`` folder logged as plain run artifacts under ``model/`` (plus
  ``model/ccda_model.json`` saying what it is) and a registered model version whose source is that folder.
  Load it without running any stored code::

      path = mlflow.artifacts.download_artifacts(artifact_uri="models:/<target>-debiased@champion")
      model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path)   # or AutoModelFor<family>

* ``pyfunc`` (opt in): a cloudpickled :class:`~context_cda.tracking.pyfunc.HFFolderModel` carrying the folder,
  which ``mlflow.pyfunc.load_model`` serves as a sentence scorer. Loading it unpickles and runs code: use it
  only with a registry you trust.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TASKS: dict[str, str] = {"causal": "text-generation", "masked": "fill-mask"}
AUTO_CLASSES = {"causal": "AutoModelForCausalLM", "masked": "AutoModelForMaskedLM", "seq2seq": "AutoModelForSeq2SeqLM"}
FOLDER_NOTE = "ccda_model.json"


@contextlib.contextmanager
def fluent_uri(uri: str) -> Iterator[None]:
    """Point mlflow's fluent API (needed by ``log_model``) at ``uri`` and put everything back afterwards,
    including the MLFLOW_TRACKING_URI / MLFLOW_REGISTRY_URI variables mlflow sets as a side effect."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    env = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    old_t = getattr(tracking_utils, "_tracking_uri", None)
    old_r = getattr(registry_utils, "_registry_uri", None)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(old_t)
        registry_utils._registry_uri = old_r
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pip_requirements() -> list[str]:
    """Pinned requirements of a logged model (MLflow's own inference trips over optional torch extras)."""
    from importlib import metadata

    reqs = []
    for pkg in ("torch", "transformers", "accelerate", "safetensors", "sentencepiece", "tokenizers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            reqs.append(f"{pkg}=={metadata.version(pkg).split('+')[0]}")
    return reqs


def _transformers(model_dir: Path, family: str, name: str):
    import mlflow
    from transformers import AutoTokenizer

    from ..models import auto_class_for

    model = auto_class_for(family).from_pretrained(model_dir)  # type: ignore[arg-type]
    tok = AutoTokenizer.from_pretrained(model_dir)
    info = mlflow.transformers.log_model(
        transformers_model={"model": model, "tokenizer": tok}, task=TASKS[family], name="model",
        registered_model_name=name, pip_requirements=pip_requirements(),
    )
    return str(info.registered_model_version)


def _pyfunc(model_dir: Path, name: str) -> str:
    import mlflow

    from .pyfunc import HFFolderModel

    info = mlflow.pyfunc.log_model(
        name="model", python_model=HFFolderModel(), artifacts={"hf_model": str(model_dir)},
        registered_model_name=name, pip_requirements=pip_requirements(),
    )
    return str(info.registered_model_version)


def _folder(client, run_id: str, model_dir: Path, family: str, name: str, extra: Mapping[str, Any] | None = None
            ) -> str:
    """The save_pretrained folder as plain artifacts (and ``extra`` files beside it: name -> a file or a text),
    and a model version pointing at them."""
    client.log_artifacts(run_id, str(model_dir), "model")
    for fname, what in (extra or {}).items():
        if isinstance(what, Path):
            client.log_artifact(run_id, str(what), "model")
        else:
            client.log_text(run_id, str(what), f"model/{fname}")
    note = {"format": "transformers save_pretrained folder (safetensors)", "family": family,
            "load": f"transformers.{AUTO_CLASSES.get(family, 'AutoModel')}.from_pretrained("
                    "mlflow.artifacts.download_artifacts(artifact_uri='models:/" + name + "/<version>'))"}
    client.log_text(run_id, json.dumps(note, indent=2), f"model/{FOLDER_NOTE}")
    try:
        client.get_registered_model(name)
    except Exception:  # noqa: BLE001 - not registered yet (or registered concurrently just now)
        with contextlib.suppress(Exception):
            client.create_registered_model(name)
    source = f"{client.get_run(run_id).info.artifact_uri}/model"
    return str(client.create_model_version(name, source=source, run_id=run_id).version)


def log_model_version(client, uri: str, model_dir: Path, family: str, run_id: str, name: str,
                      flavor: str = "auto", extra: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """Log ``model_dir`` to ``run_id`` and register it as a new version of ``name``: (version, flavour used).
    ``extra`` files (a post-hoc arm's matrix and note) go beside the weights, in the plain folder flavour."""
    import mlflow

    with fluent_uri(uri), mlflow.start_run(run_id=run_id):
        if flavor == "pyfunc":
            return _pyfunc(model_dir, name), "pyfunc"
        if flavor == "auto" and family in TASKS:
            try:
                return _transformers(model_dir, family, name), "transformers"
            except Exception as e:  # noqa: BLE001 - task unsupported by this transformers/mlflow pair
                logger.warning("transformers flavour failed for %s (%s); logging the plain folder", model_dir, e)
    return _folder(client, run_id, model_dir, family, name, extra), "folder"
