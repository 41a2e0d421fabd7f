"""What a model reference is, in words for a report: its exact source and the precision of its weights.

:func:`describe` answers without loading the model: for a GGUF file (a ``.gguf`` path, or a package that ships
one) it reads the file's header (the quantization type of the file and of its tensors, e.g. 4-bit ``Q4_1``), and
says that the weights are dequantized to float32 when loaded (:func:`context_cda.models.resolve_pretrained`); for
a package the distribution's version; for a local ``save_pretrained`` folder the ``torch_dtype`` of its config;
for a hub id, the id (the hub decides the revision unless the reference pins one).
"""

from __future__ import annotations

import copy
import functools
import json
import struct
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

#: GGUF metadata value types -> struct format (8: string and 9: array are read apart)
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
#: ggml tensor types (ggml.h) of the usual weight formats
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K",
              11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 30: "BF16"}
#: bits per weight of the quantized formats (block scales included, as llama.cpp quotes them)
GGML_BITS = {"Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0, "Q8_0": 8.5, "Q2_K": 2.6, "Q3_K": 3.4,
             "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.6, "F16": 16.0, "BF16": 16.0, "F32": 32.0}


@dataclass
class ModelInfo:
    ref: str
    kind: str
    source: str  # where the weights come from, in words
    precision: str  # the stored weights' precision, and what loading makes of it
    details: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        return f"`{self.ref}`: {self.source}; {self.precision}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return struct.unpack("<" + fmt, data)[0]


def _string(f: BinaryIO) -> str:
    return f.read(_read(f, "Q")).decode("utf-8", "replace")


#: arrays longer than this are stepped over, not read (the vocabulary, the merges: ~100k strings in SmolLM2's)
_LONG_ARRAY = 64


def _value(f: BinaryIO, vtype: int) -> Any:
    """A metadata value; a long array (:data:`_LONG_ARRAY`) is stepped over and read as None."""
    if vtype == 8:
        return _string(f)
    if vtype == 9:
        etype, n = _read(f, "I"), _read(f, "Q")
        if n <= _LONG_ARRAY:
            return [_value(f, etype) for _ in range(n)]
        _skip(f, etype, n)
        return None
    return _read(f, _GGUF_SCALARS[vtype])


def _skip(f: BinaryIO, etype: int, n: int) -> None:
    if etype in _GGUF_SCALARS:
        f.seek(n * struct.calcsize("<" + _GGUF_SCALARS[etype]), 1)
    elif etype == 8:
        length = struct.Struct("<Q")
        for _ in range(n):
            f.seek(length.unpack(f.read(8))[0], 1)
    else:
        for _ in range(n):
            _value(f, etype)


def gguf_header(path: Path | str) -> dict[str, Any]:
    """The metadata of a GGUF file (arrays longer than 64 elements are skipped, e.g. the vocabulary) and the count
    of its tensors per ggml type: ``{"metadata": {...}, "tensor_types": {"Q4_1": 210, ...}, "version": 3}``. Read
    once per file content (path, size and modification time): a run describes its models in several steps."""
    st = Path(path).stat()
    return copy.deepcopy(_gguf_header(str(path), st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _gguf_header(path: str, _size: int, _mtime_ns: int) -> dict[str, Any]:
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = _read(f, "I"), _read(f, "Q"), _read(f, "Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key, vtype = _string(f), _read(f, "I")
            value = _value(f, vtype)
            if value is not None or vtype != 9:
                meta[key] = value
        types: Counter[str] = Counter()
        for _ in range(n_tensors):
            _string(f)
            dims = _read(f, "I")
            f.read(8 * dims)
            t = _read(f, "I")
            _read(f, "Q")
            types[GGML_TYPES.get(t, f"type {t}")] += 1
    return {"version": version, "metadata": meta, "tensor_types": dict(types.most_common())}


def _gguf_precision(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        head = gguf_header(path)
    except (OSError, ValueError, KeyError, struct.error) as e:
        return f"GGUF weights (header unreadable: {e})", {}
    types = head["tensor_types"]
    quant = [t for t in types if t not in ("F32", "F16", "BF16")]
    main = quant[0] if quant else next(iter(types), "?")
    spread = ", ".join(f"{n} {t}" for t, n in types.items())
    details = {"gguf_name": head["metadata"].get("general.name"), "tensor_types": types, "quantization": main}
    if not quant:
        return f"GGUF in {main} ({spread} tensors), loaded as float32", details
    nominal = "".join(c for c in main.split("_")[0] if c.isdigit())
    bits = GGML_BITS.get(main)
    return (f"{nominal}-bit quantized GGUF ({main}{f', ~{bits:g} bits per weight with its block scales' if bits else ''}"
            f"; tensors: {spread}), dequantized to float32 when loaded: the model computes in float32 from "
            f"{nominal}-bit-rounded weights, so its numbers are not those of the full-precision model"), details


def _package_version(location: str) -> str | None:
    from importlib import metadata

    parts = Path(location).parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] == "site-packages":
            try:
                return metadata.version(parts[i].replace("_", "-"))
            except metadata.PackageNotFoundError:
                return None
    return None


def _folder_dtype(folder: Path) -> str:
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "precision unknown (no readable config.json)"
    dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    return f"{dtype} weights" if dtype else "weights of unrecorded dtype (config.json names none)"


def describe(ref: str) -> ModelInfo:
    """:class:`ModelInfo` of a model reference (nothing is loaded; an unresolvable reference says so)."""
    from ..errors import CCDAError
    from . import parse_ref

    try:
        m = parse_ref(ref)
    except CCDAError as e:
        return ModelInfo(ref, "unknown", f"not resolvable here ({e})", "unknown")
    if m.kind == "tiny":
        return ModelInfo(ref, m.kind, f"a tiny randomly initialised {m.location} (tests)", "float32")
    if m.kind == "hub":
        return ModelInfo(ref, m.kind, f"Hugging Face hub id {m.location}", "as published (loaded in its torch_dtype)")
    if m.kind == "s3":
        return ModelInfo(ref, m.kind, f"a save_pretrained folder at {m.location}", "as stored")
    where = Path(m.location)
    origin = "a local folder"
    if m.kind == "package":
        pkg = ref.split(":", 1)[1]
        version = _package_version(m.location)
        origin = f"the PyPI package {pkg}{f' {version}' if version else ''}"
    if m.gguf_file:
        precision, details = _gguf_precision(where / m.gguf_file)
        return ModelInfo(ref, m.kind, f"the GGUF file {m.gguf_file} from {origin}", precision,
                         {"file": m.gguf_file, **details})
    return ModelInfo(ref, m.kind, f"{origin} ({where.name})" if m.kind == "package" else f"the folder {where}",
                     _folder_dtype(where))


# ------------------------------------------------------------------------------------------------ licence


def _front_matter_license(readme: Path) -> str | None:
    """The ``license`` of a model card's YAML metadata block (None: no card, no block, no licence)."""
    import yaml

    try:
        text = readme.read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    try:
        meta = yaml.safe_load(text[3:end]) if end > 0 else None
    except yaml.YAMLError:
        return None
    value = meta.get("license") if isinstance(meta, dict) else None
    return str(value) if value else None


def _project_license() -> str | None:
    from importlib import metadata

    try:
        meta = metadata.metadata("context-cda")
    except metadata.PackageNotFoundError:
        return None
    value = meta.get("License-Expression") or meta.get("License")
    return str(value).lower() if value else None


def _hub_card_license(repo_id: str) -> str | None:
    """The licence in the model card of a hub id, from the local Hub cache only (nothing is downloaded)."""
    try:
        from huggingface_hub import hf_hub_download

        return _front_matter_license(Path(hf_hub_download(repo_id, "README.md", local_files_only=True)))
    except Exception:  # noqa: BLE001 - not cached, no card, no hub library: unknown
        return None


def license_of(ref: str, explicit: dict[str, str] | None = None, target: str | None = None) -> tuple[str | None, str]:
    """(the licence of model reference ``ref`` as a Hub licence id, or None when nothing records it; where it was
    read). ``explicit``: ``tracking.card.licenses`` (keyed by target name or reference) decides first; then a GGUF
    file's ``general.license``, a folder's (or package's) README.md metadata, the Hub cache's card of a hub id; a
    ``tiny:`` model is this project's own (random weights, a tokenizer trained on its own text)."""
    from ..errors import CCDAError
    from . import parse_ref

    given = explicit or {}
    for key in (target, ref):
        if key and given.get(key):
            return given[key], f"tracking.card.licenses[{key}]"
    try:
        m = parse_ref(ref)
    except CCDAError:
        return None, "the reference does not resolve here"
    if m.kind == "tiny":
        return _project_license(), "a tiny random model built by context-cda (the project's licence)"
    if m.kind == "hub":
        return _hub_card_license(m.location), "the Hub cache's model card"
    if m.gguf_file:
        try:
            found = gguf_header(Path(m.location) / m.gguf_file)["metadata"].get("general.license")
        except (OSError, ValueError, KeyError, struct.error):
            found = None
        return (str(found) if found else None), f"the GGUF file's general.license ({m.gguf_file})"
    return _front_matter_license(Path(m.location) / "README.md"), "the model folder's README.md metadata"
