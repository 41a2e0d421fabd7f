"""Tiny random models of every family, built from a config with a real tokenizer: ``tiny:<arch>`` references.

They make the whole pipeline runnable in seconds with no hub and no GPU (tests, the ``tiny`` profile, ``dvc
repro`` and ``kfp.local`` smoke runs). Weights are random but deterministic (seeded), so runs are reproducible.
Tokenizers are trained on a small built-in text (our gender lexicon in template sentences), saved in the formats
the real models use, so both the slow and the fast tokenizer classes load them:

====================  ==============================  ===========================================
arch                  model class                     tokenizer
====================  ==============================  ===========================================
bert                  BertForMaskedLM                 WordPiece (vocab.txt; BertTokenizer[Fast])
distilbert            DistilBertForMaskedLM           WordPiece (vocab.txt)
roberta               RobertaForMaskedLM              byte-level BPE (vocab.json + merges.txt)
gpt2                  GPT2LMHeadModel                 byte-level BPE (vocab.json + merges.txt)
llama                 LlamaForCausalLM                byte-level BPE, BOS prepended, chat template
t5                    T5ForConditionalGeneration      SentencePiece unigram (spiece.model) + sentinels
nli                   BertForSequenceClassification   WordPiece; id2label NEUTRAL/CONTRADICTION/ENTAILMENT
====================  ==============================  ===========================================
"""

from __future__ import annotations

import os
from pathlib import Path

ARCHS = ("bert", "distilbert", "roberta", "gpt2", "llama", "t5", "nli")
TINY_VERSION = "1"
SEED = 0
HIDDEN = 32
LAYERS = 2
HEADS = 2
FFN = 64
MAX_POS = 512
VOCAB = 800

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_SUBJECTS = [
    ("he", "she"), ("man", "woman"), ("boy", "girl"), ("father", "mother"), ("son", "daughter"),
    ("brother", "sister"), ("king", "queen"), ("husband", "wife"), ("uncle", "aunt"), ("gentleman", "lady"),
    ("actor", "actress"), ("grandfather", "grandmother"), ("nephew", "niece"), ("mr", "mrs"),
]
_VERBS = ["said", "worked", "went", "saw", "thought", "wrote", "helped", "asked", "told", "gave"]
_OBJECTS = [
    "the doctor", "the nurse", "a book", "the engineer", "the teacher", "his car", "her house", "the city",
    "a letter", "the children", "the company", "the team", "the secretary", "the manager",
]


def training_text() -> list[str]:
    """A few thousand short sentences covering the gender lexicon (enough for stable tiny tokenizers)."""
    lines = []
    for i, (m, f) in enumerate(_SUBJECTS):
        for j, v in enumerate(_VERBS):
            o = _OBJECTS[(i + j) % len(_OBJECTS)]
            lines.append(f"The {m} {v} to {o} because {m} was tired.")
            lines.append(f"The {f} {v} to {o} because {f} was tired.")
            lines.append(f"{m.capitalize()} {v} that his {o.split()[-1]} and her {o.split()[-1]} were there.")
            lines.append(f"{f.capitalize()} {v} him and her, and they {v} it again!")
    lines += [
        "Women and men, girls and boys, mothers and fathers, himself and herself, hers and his.",
        "It was a good day, a bad day, an ordinary day; 1 2 3 4 5 6 7 8 9 0 ? ' \" ( ) - : .",
    ]
    return lines


def tiny_dir(arch: str, cache: str | os.PathLike[str] | None = None) -> Path:
    from ..io import model_cache_dir

    if arch not in ARCHS:
        from ..errors import ModelError

        raise ModelError(f"tiny:{arch}: unknown tiny architecture; choose one of {', '.join(ARCHS)}.")
    dest = model_cache_dir(cache) / "tiny" / f"{arch}-v{TINY_VERSION}"
    if not (dest / "config.json").is_file():
        _build_atomic(arch, dest)
    return dest


def _build_atomic(arch: str, dest: Path) -> None:
    from ..io import atomic_dir

    with atomic_dir(dest, replace=False) as tmp:
        build(arch, tmp)


def build(arch: str, out: Path) -> None:
    """Build tokenizer + random model for ``arch`` into ``out`` (save_pretrained layout, safetensors)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    texts = training_text()
    if arch in ("bert", "distilbert", "nli"):
        tok = _wordpiece(texts, out)
    elif arch in ("gpt2", "roberta", "llama"):
        tok = _bytelevel(texts, out, arch)
    else:
        tok = _sentencepiece_t5(texts, out)
    torch.manual_seed(SEED)
    model = _model(arch, tok)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def _wordpiece(texts: list[str], out: Path):
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts, vocab_size=VOCAB, min_frequency=1, show_progress=False)
    wp.save_model(str(out))  # vocab.txt: the slow BertTokenizer reads it too
    return BertTokenizerFast.from_pretrained(str(out), do_lower_case=True)


def _bytelevel(texts: list[str], out: Path, arch: str):
    from tokenizers import ByteLevelBPETokenizer

    specials = {"gpt2": ["<|endoftext|>"], "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]}.get(
        arch, ["<s>", "</s>", "<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
    )
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(texts, vocab_size=VOCAB, min_frequency=1, special_tokens=specials, show_progress=False)
    bpe.save_model(str(out))  # vocab.json + merges.txt
    if arch == "gpt2":
        from transformers import GPT2TokenizerFast

        return GPT2TokenizerFast.from_pretrained(str(out))
    if arch == "roberta":
        from transformers import RobertaTokenizerFast

        return RobertaTokenizerFast.from_pretrained(str(out))
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    bos_id = bpe.token_to_id("<s>")
    bpe.post_processor = TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "</s>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _sentencepiece_t5(texts: list[str], out: Path):
    import io

    import sentencepiece as spm
    from transformers import T5Tokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=150,
        hard_vocab_limit=False,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        minloglevel=2,
    )
    (out / "spiece.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    return T5Tokenizer(vocab=vocab, extra_ids=32)


def _model(arch: str, tok):
    import transformers as tf

    vocab = len(tok)
    if arch in ("bert", "nli"):
        cfg = tf.BertConfig(
            vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=FFN, max_position_embeddings=MAX_POS, pad_token_id=tok.pad_token_id,
        )
        if arch == "bert":
            cfg.architectures = ["BertForMaskedLM"]
            return tf.BertForMaskedLM(cfg)
        cfg.id2label = {0: "NEUTRAL", 1: "CONTRADICTION", 2: "ENTAILMENT"}
        cfg.label2id = {v: k for k, v in cfg.id2label.items()}
        cfg.architectures = ["BertForSequenceClassification"]
        return tf.BertForSequenceClassification(cfg)
    if arch == "distilbert":
        cfg = tf.DistilBertConfig(
            vocab_size=vocab, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
            max_position_embeddings=MAX_POS, pad_token_id=tok.pad_token_id, architectures=["DistilBertForMaskedLM"],
        )
        return tf.DistilBertForMaskedLM(cfg)
    if arch == "roberta":
        cfg = tf.RobertaConfig(
            vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=FFN, max_position_embeddings=MAX_POS + 2, pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, architectures=["RobertaForMaskedLM"],
        )
        return tf.RobertaForMaskedLM(cfg)
    if arch == "gpt2":
        eos = tok.eos_token_id
        cfg = tf.GPT2Config(
            vocab_size=vocab, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, n_positions=MAX_POS,
            bos_token_id=eos, eos_token_id=eos, architectures=["GPT2LMHeadModel"],
        )
        return tf.GPT2LMHeadModel(cfg)
    if arch == "llama":
        cfg = tf.LlamaConfig(
            vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            num_key_value_heads=HEADS, intermediate_size=FFN, max_position_embeddings=MAX_POS,
            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
            tie_word_embeddings=True, architectures=["LlamaForCausalLM"],
        )
        return tf.LlamaForCausalLM(cfg)
    cfg = tf.T5Config(
        vocab_size=vocab, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
        num_decoder_layers=LAYERS, num_heads=HEADS, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id, architectures=["T5ForConditionalGeneration"],
    )
    return tf.T5ForConditionalGeneration(cfg)
