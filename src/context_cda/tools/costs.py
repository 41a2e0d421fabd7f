"""``ccda plan``: the work each step of a profile will do, and what it costs in GPU-hours.

For every enabled row of the stage table (:mod:`context_cda.stages`) the plan counts the work (sentences,
generations with the retries the acceptance rate implies, the M samples and their judge calls once per run, the
samples each target scores, training tokens x epochs x arms x seeds, benchmark items x epochs) and prices it with a **throughput table**: tokens/s (or pairs/s, items/s) per model and
operation on one GPU. The table shipped with the package (``resources/throughput.json``) says where each figure
comes from: ``measured`` (the GPU benchmark, ``benchmarks/gpu/``) or ``estimate`` (first principles: FLOPs per token
over an assumed model-FLOP utilisation of the GPU's peak, stated in the file). ``--throughput FILE`` overrides it
with another table or with the GPU benchmark's own ``--out`` JSON.

Work counts come from the run folder when its steps already ran (their manifests), else from the assumptions below
(corpus size, gendered share, acceptance rate, sequence lengths), each printed with its source, and overridable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import stages as T
from ..arms import parse as parse_arm
from ..errors import ConfigError, InputError
from ..train.epochs import evaluated_epochs

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config


@dataclass
class Assumptions:
    """What the plan assumes where the run folder does not tell (each with its source)."""

    corpus_sentences: dict[str, int] = field(default_factory=lambda: {
        "news-commentary-v15": 600_000,  # statmt.org news-commentary v15 English, ~600k lines of ~1 sentence
        "wikitext-2-test": 9_036,  # measured: ccda ingest on the WikiText-2 raw test file
    })
    gendered_share: float = 0.248  # measured: 2,245 of 9,036 WikiText-2 test sentences kept by ingest
    acceptance: float = 0.58  # assumed for an 8B instruct generator (not measured: see sources())
    prompt_tokens: int = 160  # augment prompt (system + instruction + sentence), chat template included
    completion_tokens: int = 60  # one rephrasing
    rephrase_prompt_tokens: int = 110  # the sample step's prompt: system + instruction + sentence, chat template
    rephrase_shared_tokens: int = 70  # ... of which the system prompt and instruction, the same for every item
    sentence_tokens: int = 32  # a gendered news sentence, subword tokens
    judge_share: float = 0.67  # judge calls per item / M^2: measured 45-89 of 100 in bench_entropy (M = 10)
    stereoset_items: int = 255  # gender intrasentence items (measured: stereoset_dev_flat.jsonl)
    crows_items: int = 262  # gender pairs (measured: crows_pairs_anonymized.csv)
    stereoset_tokens: int = 12  # a StereoSet context, specials included: 8.0 words measured x ~1.3 subwords + 2
    blank_word_tokens: float = 1.5  # subwords of the word that fills BLANK (6.3 characters on average, measured)
    crows_tokens: int = 18  # a CrowS sentence, specials included: 12.5 words measured x ~1.3 subwords + 2
    crows_differing_tokens: float = 2.3  # tokens the two sentences of a pair do not share: 1.8 words measured
    extrinsic_examples: int = 20_000  # head training examples per extrinsic task (order of magnitude)
    # several GPUs (:func:`step_wall`): what each GPU of a task keeps of one GPU's rate, and memory
    gpus_per_node: int = 8  # an 8-GPU node (HGX H100/H200)
    within_node_efficiency: float = 0.90  # DDP/FSDP over NVLink, the gradient's all-reduce overlapped with backward
    across_nodes_efficiency: float = 0.80  # over the nodes' network (InfiniBand/RoCE)
    train_state_bytes: float = 16.0  # per parameter: bf16 weights and gradients, fp32 master weights and AdamW m, v
    weight_bytes: float = 2.0  # per parameter of a generator served in bf16
    usable_memory: float = 0.8  # of a GPU's memory for the training state (the rest: activations, buffers)
    gpu_memory: float = 80e9  # bytes, when the throughput table does not say (an 80 GB H100)

    def sources(self) -> dict[str, str]:
        return {
            "within_node_efficiency": "assumed (not measured here: no GPU): data parallelism keeps ~90 % of each "
                                      "GPU's rate inside an NVLink node for models this size",
            "across_nodes_efficiency": "assumed (not measured here): ~80 % across nodes on a 200-400 Gb/s fabric",
            "train_state_bytes": "mixed-precision AdamW: 2 + 2 (bf16 weights, gradients) + 12 (fp32 master, m, v) "
                                 "bytes per parameter (the ZeRO paper's accounting); FSDP shards them over the GPUs",
            "corpus_sentences": "news-commentary: statmt.org size (~600k lines); wikitext-2: measured",
            "gendered_share": "measured on WikiText-2 test (ingest keeps 24.8 % of sentences)",
            "acceptance": "assumed per attempt for an 8B instruct generator; not measured (the demo's SmolLM2-135M, "
                          "a far weaker generator, has 20 of 96 accepted at the first attempt by the review, 29 of 96 "
                          "after one retry); fewer accepted items also mean fewer to sample in entropy",
            "judge_share": "measured by benchmarks/bench_entropy.py (45-89 judge calls per item for M = 10)",
            "rephrase_prompt_tokens": "entropy/sampling.py's prompt: ~45-token system prompt, ~15-token instruction, "
                                      "the sentence (32) and the chat template; the first 70 are the same for "
                                      "every item (vLLM's prefix cache computes them once)",
            "stereoset_tokens": "8.0 words per gender context (measured) x ~1.3 subwords per word + 2 specials",
            "crows_tokens": "12.5 words per gender sentence, 1.8 of them differing (measured) x ~1.3 subwords + 2",
        }


@dataclass
class StepCost:
    step: str
    tasks: int  # parallel tasks (fan-out x generation shards)
    work: str  # human-readable count of the work
    gpu_hours: float
    detail: dict[str, Any] = field(default_factory=dict)
    gpus_per_task: int = 1  # the fewest GPUs one task runs on (its model's memory: FSDP, vLLM's tensor parallelism)
    spread: bool = False  # one task may use more GPUs than that (a fine-tuning under torchrun / a TrainJob)


def load_throughput(path: Path | str | None = None) -> dict[str, Any]:
    """The throughput table: the packaged one, a calibration it names (``cpu``: the CPU calibration,
    ``calibrations`` in resources/throughput.json), or ``path`` (a table, or the GPU benchmark's JSON output); a
    table read from a file has its numbers checked (:func:`check_throughput`)."""
    packaged = json.loads(resources.files("context_cda").joinpath("resources/throughput.json").read_text())
    if path is None:
        return packaged
    named = packaged.get("calibrations", {}).get(str(path))
    if named and not Path(path).exists():
        data = json.loads(resources.files("context_cda").joinpath(f"resources/{named}").read_text())
        check_throughput(data, f"resources/{named}")
        return data
    from ..io import read_json

    try:
        data = read_json(path)  # a byte-order mark removed
    except InputError as e:
        raise InputError(f"{path}: not a readable throughput table ({str(e).removeprefix(f'{path}: ')})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a throughput table is a JSON object (see resources/throughput.json).")
    if "rates" not in data:
        raise InputError(f"{path}: a throughput table needs a 'rates' mapping (see resources/throughput.json).")
    check_throughput(data, str(path))
    return data


#: the operations a table prices, and the model families it may name
OPS = ("train", "score", "judge", "generate")
FAMILIES = ("masked", "causal", "seq2seq")


def check_throughput(table: Mapping[str, Any], where: str) -> None:
    """Every number a plan is priced with is finite and in range - ``gpu.peak_flops``, ``gpu.prefill_speedup``,
    each rate's ``per_s`` and model's ``params`` positive, ``gpu.mfu`` of each operation in (0, 1] - and every
    mapping is one: an :class:`InputError` naming the file and key (a NaN or negative figure would print
    ``nan s`` or a negative total; a zero, a division by zero)."""
    def number(value: Any, key: str, upper: float | None = None) -> None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        if not ok or (upper is not None and value > upper):
            rng = f"in (0, {upper:g}]" if upper is not None else "a positive number"
            raise InputError(f"{where}: {key} must be {rng}, got {value!r}; fix it (see resources/throughput.json).")

    def mapping(value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise InputError(f"{where}: {key} must be a mapping, got {value!r} (see resources/throughput.json).")
        return value

    gpu = mapping(table.get("gpu"), "gpu")
    if not isinstance(gpu.get("name"), str) or not gpu["name"].strip():
        raise InputError(f"{where}: gpu.name must name the GPU the figures are for, got {gpu.get('name')!r}.")
    number(gpu.get("peak_flops"), "gpu.peak_flops")
    number(gpu.get("prefill_speedup"), "gpu.prefill_speedup")
    mfu = mapping(gpu.get("mfu"), "gpu.mfu")
    for op in OPS:
        number(mfu.get(op), f"gpu.mfu.{op}", 1.0)
    for name, model in mapping(table.get("models", {}), "models").items():
        if "params" in mapping(model, f"models.{name}"):
            number(model["params"], f"models.{name}.params")
        if "family" in model and model["family"] not in FAMILIES:
            raise InputError(f"{where}: models.{name}.family must be one of {', '.join(FAMILIES)}, got "
                             f"{model['family']!r}.")
    for op, entries in mapping(table["rates"], "rates").items():
        if op not in OPS:
            raise InputError(f"{where}: rates.{op}: unknown operation; the table prices {', '.join(OPS)}.")
        for name, entry in mapping(entries, f"rates.{op}").items():
            number(mapping(entry, f"rates.{op}.{name}").get("per_s"), f"rates.{op}.{name}.per_s")


def check_plan_args(gpus: int, sentences: int | None) -> None:
    """``ccda plan``'s numbers: at least one GPU, a corpus of at least one sentence (a ConfigError naming the
    flag: a negative count would plan negative work)."""
    if gpus < 1:
        raise ConfigError(f"plan --gpus {gpus}: a run needs at least one GPU; pass --gpus 1 or more.")
    if sentences is not None and sentences < 1:
        raise ConfigError(f"plan --sentences {sentences}: the corpus size is a number of sentences, at least 1; "
                          "pass the count of sentences the corpus holds (or leave it out for the plan's assumption).")


#: the key under which :func:`priced_rates` has :func:`rate` note every rate it hands out
_LOG = "_rates_priced"


def rate(table: Mapping[str, Any], op: str, model: str) -> tuple[float, str]:
    """(per-second rate, source) of ``op`` (train | score | generate | judge) for ``model`` on one device: a
    ``measured`` entry of the table, else an ``estimate`` from the model's size."""
    rates = table["rates"].get(op, {})
    entry = rates.get(model) or rates.get(_family_key(table, model))
    if entry is None:
        params = table.get("models", {}).get(model, {}).get("params")
        if params is None:
            raise ConfigError(f"plan: no {op} throughput for {model!r} and its size is unknown; add it to a "
                              f"throughput file (--throughput) under rates.{op} or models.")
        found = _estimate(table, op, params), f"estimate (size): {_estimate_basis(table, op)}"
    else:
        found = float(entry["per_s"]), entry.get("source", "table")
    if isinstance(table.get(_LOG), dict):
        table[_LOG][(op, model)] = found  # type: ignore[index]
    return found


def _estimate_basis(table: Mapping[str, Any], op: str) -> str:
    gpu = table["gpu"]
    flops = {"train": 6, "score": 2, "generate": 2, "judge": 2}[op]
    how = "measured" if op in gpu.get("mfu_measured", ()) else "assumed"
    return f"{flops}N FLOPs per token at {how} {gpu['mfu'][op]:.0%} of {gpu['peak_flops'] / 1e12:,.3g} TFLOP/s"


@dataclass
class PricedRate:
    op: str
    model: str
    per_s: float
    source: str

    @property
    def measured(self) -> bool:
        return self.source.startswith("measured")


def priced_rates(config: Config, table: Mapping[str, Any], assume: Assumptions | None = None) -> list[PricedRate]:
    """Every rate the plan of ``config`` uses, with its source: which are measured, which assumed."""
    logged: dict[str, Any] = {**table, _LOG: {}}
    plan_costs(config, logged, assume)
    return [PricedRate(op, model, per_s, src) for (op, model), (per_s, src) in sorted(logged[_LOG].items())]


def device_kind(table: Mapping[str, Any]) -> str:
    """GPU, or CPU for a CPU calibration (its hours are CPU-hours of the machine it measured)."""
    return "CPU" if table.get("gpu", {}).get("kind") == "cpu" else "GPU"


def _family_key(table: Mapping[str, Any], model: str) -> str | None:
    return table.get("models", {}).get(model, {}).get("alias")


def _estimate(table: Mapping[str, Any], op: str, params: float) -> float:
    """tokens/s from FLOPs per token: 6N to train, 2N to score or generate, at the table's assumed MFU."""
    gpu = table["gpu"]
    flops = {"train": 6.0, "score": 2.0, "generate": 2.0, "judge": 2.0}[op] * params
    return gpu["peak_flops"] * gpu["mfu"][op] / flops


# ---------------------------------------------------------------------------------------------- work per step


def plan_costs(config: Config, table: Mapping[str, Any], assume: Assumptions | None = None) -> list[StepCost]:
    """One :class:`StepCost` per enabled GPU row of the stage table (CPU steps cost no GPU time)."""
    a = assume or Assumptions()
    counts = _counts(config, a)
    out = []
    for row in T.TABLE:
        if not row.enabled(config) or row.step not in _STEPS:
            continue
        out.append(_STEPS[row.step](config, table, a, counts))
    return out


def _counts(config: Config, a: Assumptions) -> dict[str, float]:
    """Sentences and items the steps see: the run folder's manifests when they exist, else the assumptions."""
    from ..layout import RunLayout

    known = _manifest_counts(RunLayout.of(config))
    sentences = known.get("cda") or _sentences(config, a) * a.gendered_share
    items = min(sentences, config.augment.limit or math.inf)
    accepted = known.get("augment") or items * _acceptance_after_retries(a.acceptance, config.augment.max_retries)
    entropy_items = min(accepted, config.entropy.limit or math.inf)
    kept = entropy_items * (1 - max(config.filter.k) / 100.0)
    return {"sentences": sentences, "items": items, "accepted": accepted, "entropy_items": entropy_items,
            "kept": kept}


def _manifest_counts(layout) -> dict[str, float]:
    out = {}
    for step in ("cda", "augment"):
        p = layout.step_dir(step) / "manifest.json"
        if p.is_file():
            counts = json.loads(p.read_text()).get("counts", {})
            value = counts.get("out", counts.get("rows_out"))  # the step envelope's Counts (an older manifest's)
            if isinstance(value, int | float):
                out[step] = float(value)
    return out


def _sentences(config: Config, a: Assumptions) -> float:
    if config.ingest.sample_n:
        return config.ingest.sample_n / a.gendered_share  # sampling happens after the gender filter
    if config.ingest.corpus in a.corpus_sentences:
        return a.corpus_sentences[config.ingest.corpus]
    raise ConfigError(f"plan: the size of corpus {config.ingest.corpus!r} is unknown; set ingest.sample_n or "
                      "pass --sentences N.")


def _acceptance_after_retries(p: float, retries: int) -> float:
    return 1 - (1 - p) ** (retries + 1)


def _attempts(p: float, retries: int) -> float:
    """Expected generations per item: 1 + (1-p) + (1-p)^2 + ... for up to ``retries`` retries."""
    return sum((1 - p) ** i for i in range(retries + 1))


def _augment(config, table, a, c) -> StepCost:
    gens = c["items"] * _attempts(a.acceptance, config.augment.max_retries)
    model = config.augment.model
    per_s, src = rate(table, "generate", model)
    tokens = gens * a.completion_tokens
    prefill_s = gens * a.prompt_tokens / (per_s * table["gpu"]["prefill_speedup"])
    hours = (tokens / per_s + prefill_s) / 3600
    shards = max(1, config.pipeline.generation_shards)
    return StepCost("augment", shards, f"{gens:,.0f} generations ({c['items']:,.0f} items)", hours,
                    {"model": model, "tokens": tokens, "rate": per_s, "source": src},
                    gpus_per_task=engine_gpus(config, model, table, a))


def _neutral(config, table, a, c) -> StepCost:
    """The neutral rewrite: one generation per original (the CDA rows' distinct sources, at most neutral.limit),
    retried like augment's, with the augment assumptions."""
    n = config.neutral
    items = min(c["sentences"], n.limit or math.inf)
    retries = config.augment.max_retries if n.max_retries is None else n.max_retries
    gens = items * _attempts(a.acceptance, retries)
    per_s, src = rate(table, "generate", config.augment.model)
    hours = (gens * a.completion_tokens / per_s + gens * a.prompt_tokens / (per_s * table["gpu"]["prefill_speedup"])
             ) / 3600
    return StepCost("neutral", 1, f"{gens:,.0f} generations ({items:,.0f} sentences)", hours,
                    {"model": config.augment.model, "rate": per_s, "source": src},
                    gpus_per_task=engine_gpus(config, config.augment.model, table, a))


def _sample(config, table, a, c) -> StepCost:
    """The M samples of every item and their clusters, once for every target: one request per item draws its M
    samples (``n = M``: the prompt is prefilled once, and with vLLM's prefix caching the part every item shares
    once per run), then the judge decides up to M^2 pairs per item."""
    e, m, n = config.entropy, config.entropy.n_samples, c["entropy_items"]
    _, gen_model = config.sample_generator()
    g_rate, g_src = rate(table, "generate", gen_model)
    j_rate, _ = rate(table, "judge", e.judge_model)
    prompt = n * (a.rephrase_prompt_tokens - a.rephrase_shared_tokens) + a.rephrase_shared_tokens
    seconds = prompt / (g_rate * table["gpu"]["prefill_speedup"]) + n * m * a.completion_tokens / g_rate
    calls = n * m * m * a.judge_share
    seconds += calls * 2 * a.sentence_tokens / j_rate
    return StepCost("sample", max(1, config.pipeline.generation_shards),
                    f"{n * m:,.0f} samples ({n:,.0f} items x M = {m}), {calls:,.0f} judge calls", seconds / 3600,
                    {"generator": gen_model, "rate": g_rate, "source": g_src, "samples": n * m, "judge_calls": calls},
                    gpus_per_task=engine_gpus(config, gen_model, table, a))


def _entropy(config, table, a, c) -> StepCost:
    """Each target scores the shared samples (the only per-target work of semantic entropy)."""
    n, m, targets = c["entropy_items"], config.entropy.n_samples, list(config.run.targets.values())
    hours = 0.0
    for ref in targets:
        s_rate, _ = rate(table, "score", ref)
        hours += n * m * 2 * a.sentence_tokens / s_rate / 3600
    return StepCost("entropy", len(targets), f"{n * m:,.0f} samples scored x {len(targets)} targets", hours,
                    {"samples_scored": n * m * len(targets)})


def _trained_runs(config, target: str) -> int:
    """The finetune steps of one target: its trained arms (dropout among them: continued pre-training, same token
    budget) x seeds, as the stage table fans them out (the post-hoc arms train nothing)."""
    return len(T.arm_values(config, "finetune", target)) * len(config.train.seeds)


def _trained_tokens(config, target: str, budget: float) -> float:
    """The tokens one epoch of a target's fine-tunings trains on, over its trained arms and seeds: each arm the
    shared ``budget``, a dose arm (``cda-4k``) its dose."""
    arms = T.arm_values(config, "finetune", target)
    return len(config.train.seeds) * sum(parse_arm(a, config.train.k).tokens or budget for a in arms)


def _finetune(config, table, a, c) -> StepCost:
    t = config.train
    budget = t.token_budget or c["kept"] * a.sentence_tokens  # the smallest arm: the filtered corpus
    # every run evaluates the epochs after training that train.loop does; epoch 0 (the untouched model) once per
    # target: the runner hands the first run's epoch-0 metrics to the target's other runs (pipeline._run_one)
    per_run = len(evaluated_epochs(t.epochs, t.eval_every, vanilla=False))
    hours, evals, runs, n_evals, doses = 0.0, 0.0, 0, {}, False
    for name, ref in config.run.targets.items():
        doses = doses or any(parse_arm(x, t.k).tokens for x in T.arm_values(config, "finetune", name))
        r_train, _ = rate(table, "train", ref)
        r_score, _ = rate(table, "score", ref)
        n = _trained_runs(config, name)
        runs += n
        n_evals[name] = n * per_run + 1
        hours += _trained_tokens(config, name, budget) * t.epochs / r_train / 3600
        evals += (n * per_run + 1) * benchmark_tokens(a, model_family(table, ref), config.evaluate.crows_mode) \
            / r_score / 3600
    per_param = a.weight_bytes if t.lora.enabled else a.train_state_bytes  # LoRA: frozen weights, tiny adapters
    least = max((least_gpus(p, per_param, table, a) for p in _params(table, config.run.targets.values()) if p), default=1)
    return StepCost("finetune", runs,
                    f"{budget:,.0f} tokens{' (a dose arm: its dose)' if doses else ''} x {t.epochs} epochs x {runs} "
                    f"runs ({len(config.run.targets)} targets)",
                    hours + evals, {"train_hours": hours, "per_epoch_eval_hours": evals,
                                    "evaluations_per_target": n_evals}, gpus_per_task=least, spread=True)


def _params(table: Mapping[str, Any], refs: Any) -> list[float]:
    """The parameter counts the table (else the packaged one) gives the models ``refs`` (0: unknown)."""
    out = []
    for ref in refs:
        found = next((t.get("models", {}).get(ref, {}).get("params") for t in (table, load_throughput())
                      if t.get("models", {}).get(ref, {}).get("params")), 0)
        out.append(float(found or 0))
    return out


def engine_gpus(config: Config, model: str, table: Mapping[str, Any], a: Assumptions) -> int:
    """GPUs of one in-process vLLM engine: augment.tensor_parallel_size x pipeline_parallel_size, else the fewest
    that hold the generator's bf16 weights."""
    g = config.augment
    if g.tensor_parallel_size:
        return g.tensor_parallel_size * g.pipeline_parallel_size
    (params,) = _params(table, [model])
    return least_gpus(params, a.weight_bytes, table, a) * g.pipeline_parallel_size if params else 1


SPECIAL_TOKENS = 2  # [CLS] and [SEP] (BERT), never masked: crows._score_masked skips the tokenizer's specials


def benchmark_tokens(a: Assumptions, family: str, crows_mode: str = "auto") -> float:
    """Tokens one evaluation of one model pushes through it for StereoSet (3 sentences per item) and CrowS (2 per
    pair), as the scorers of :mod:`context_cda.evaluate` do it.

    * StereoSet, masked (``stereoset._score_masked``): one pass over the context per subword of the word that fills
      BLANK; seq2seq: one pass, the context plus sentinel and word in the decoder; causal: the sentence plus the
      one-token start pass.
    * CrowS (``crows._score_masked``), masked or seq2seq: one pass over the sentence per masked position: every
      shared non-special token (``nangia``, auto for masked LMs), the differing ones (``bias-bench``, auto for
      seq2seq) or every non-special token (``lm-eval``, pseudo-log-likelihood); causal LMs, and seq2seq in
      ``lm-eval``: one pass per sentence.
    """
    from ..evaluate.crows import resolve_mode

    mode = resolve_mode(crows_mode, family)
    L = a.crows_tokens
    if family == "causal":
        ss, crows = a.stereoset_tokens + 1, L + 1
    elif family == "seq2seq":
        ss = a.stereoset_tokens + 1 + a.blank_word_tokens
        per = {"nangia": L - SPECIAL_TOKENS - a.crows_differing_tokens, "bias-bench": a.crows_differing_tokens}
        crows = L + 1 if mode == "lm-eval" else per[mode] * (L + 2)  # decoder: sentinel + the masked token
    else:
        ss = a.blank_word_tokens * a.stereoset_tokens
        per = {"nangia": L - SPECIAL_TOKENS - a.crows_differing_tokens, "bias-bench": a.crows_differing_tokens,
               "lm-eval": L - SPECIAL_TOKENS}
        crows = per[mode] * L
    return 3 * a.stereoset_items * ss + 2 * a.crows_items * crows


#: WinoGender and WinoBias: (items, tokens per scored text, continuation tokens a masked LM masks one by one)
CHOICE_BENCHMARKS = {"winogender": (720, 24, 2), "winobias": (4 * 396, 20, 8)}


def choice_tokens(a: Assumptions, family: str, cfg: Any) -> float:
    """Tokens one evaluation pushes through a model for the configured WinoGender / WinoBias items (two choices
    each, :mod:`context_cda.evaluate.choice`): causal, one pass per choice; masked and seq2seq, one pass per
    continuation token."""
    total = 0.0
    for name, (items, tokens, masked) in CHOICE_BENCHMARKS.items():
        if name not in cfg.benchmarks:
            continue
        limit = getattr(cfg, name).max_items
        n = items if limit is None else min(items, limit * (3 if name == "winogender" else 4))
        total += n * 2 * tokens * (1 if family == "causal" else masked)
    return total


def model_family(table: Mapping[str, Any], model: str) -> str:
    """masked | causal | seq2seq of a target, from the throughput table's ``models`` (else the packaged table's);
    a model named in neither is priced as masked, the dearest to evaluate."""
    for t in (table, load_throughput()):
        family = t.get("models", {}).get(model, {}).get("family")
        if family:
            return family
    return "masked"


def _evaluation_seconds(config, table, a, ref: str, passes: float = 1.0, arm: str | None = None) -> float:
    """One evaluation of one model (``arm``'s: its benchmarks, ``evaluate.arm_benchmarks``) on one GPU: StereoSet
    and CrowS (``passes`` x their tokens) and the extrinsic heads' training (~3 tasks each)."""
    cfg = config.evaluate.for_arm(arm)
    heads = [b for b in cfg.benchmarks if b in ("glue", "biasbios", "stsb", "nli-bias")]
    r_train, _ = rate(table, "train", ref)
    r_score, _ = rate(table, "score", ref)
    family = model_family(table, ref)
    seconds = passes * benchmark_tokens(a, family, cfg.crows_mode) / r_score
    seconds += choice_tokens(a, family, cfg) / r_score  # WinoGender / WinoBias
    return seconds + len(heads) * 3 * a.extrinsic_examples * 2 * a.sentence_tokens / r_train


def _evaluate(config, table, a, c) -> StepCost:
    """The vanilla target and every fine-tuned (arm, seed) after training (a fine-tuned model's StereoSet and
    CrowS-Pairs scores are its last epoch's, :mod:`context_cda.evaluate.reuse`)."""
    hours, models = 0.0, 0
    for name, ref in config.run.targets.items():
        models += 1 + _trained_runs(config, name)
        hours += _evaluation_seconds(config, table, a, ref) / 3600  # the vanilla target
        for arm in T.arm_values(config, "finetune", name):  # StereoSet and CrowS: the last epoch's, reused
            hours += len(config.train.seeds) * _evaluation_seconds(config, table, a, ref, 0.0, arm) / 3600
    return StepCost("evaluate", models, f"{models} models x {len(config.evaluate.benchmarks)} benchmarks", hours)


def _debias(config, table, a, c) -> StepCost:
    """The projection arms' fit: forward passes only (INLP: one per selected sentence, at most
    ``max_per_class`` per class; SentenceDebias: both sentences of each CDA pair); INLP's linear classifiers fit on
    the CPU (no GPU time: n_classifiers LinearSVC fits on d-dimensional features)."""
    b = config.baselines
    gendered = c["sentences"]
    inlp = min(gendered, 2 * b.inlp.max_per_class) + min(b.inlp.neutral_lines or b.inlp.max_per_class,
                                                          b.inlp.max_per_class)
    sentences = {"inlp": inlp, "sentence-debias": 2 * gendered}
    hours, tasks, encoded = 0.0, 0, 0.0
    for name, ref in config.run.targets.items():
        r_score, _ = rate(table, "score", ref)
        for arm in T.arm_values(config, "debias", name):
            tasks += 1
            encoded += sentences[arm]
            hours += sentences[arm] * a.sentence_tokens / r_score / 3600
    return StepCost("debias", tasks, f"{encoded:,.0f} sentences encoded ({tasks} projections fitted)", hours,
                    {"sentences": encoded, "inlp_classifiers": b.inlp.n_classifiers, "classifiers_on": "cpu"})


def _evaluate_posthoc(config, table, a, c) -> StepCost:
    """The post-hoc arms scored on the vanilla weights: a projection or a published checkpoint costs one
    evaluation; self-debias two passes per scored position (the regular row and the prefixed one, in one batch)
    on StereoSet and CrowS only (the extrinsic benchmarks do not apply to it)."""
    from .. import arms as A

    hours, tasks = 0.0, 0
    for name, ref in config.run.targets.items():
        published = A.published_refs(config, name)
        for arm in T.arm_values(config, "evaluate-posthoc", name):
            tasks += 1
            kind = A.parse(arm, config.train.k, published).kind
            if kind == "scoring":
                r_score, _ = rate(table, "score", ref)
                hours += 2 * benchmark_tokens(a, model_family(table, ref), config.evaluate.crows_mode) / r_score / 3600
            else:
                # a published checkpoint is priced at its target's rates (the same architecture, e.g. MABEL's BERT)
                hours += _evaluation_seconds(config, table, a, ref, arm=arm) / 3600
    return StepCost("evaluate-posthoc", tasks, f"{tasks} post-hoc arms scored (no training)", hours)


_STEPS = {"augment": _augment, "neutral": _neutral, "sample": _sample, "entropy": _entropy, "debias": _debias, "finetune": _finetune,
          "evaluate": _evaluate, "evaluate-posthoc": _evaluate_posthoc}


def gpu_memory(table: Mapping[str, Any], a: Assumptions) -> float:
    """Bytes of memory of the table's GPU (``gpu.memory_bytes``), else the assumption's."""
    return float(table.get("gpu", {}).get("memory_bytes") or a.gpu_memory)


def least_gpus(params: float, bytes_per_param: float, table: Mapping[str, Any], a: Assumptions) -> int:
    """The fewest GPUs whose usable memory holds ``params`` x ``bytes_per_param`` (the state sharded over them)."""
    return max(1, math.ceil(params * bytes_per_param / (gpu_memory(table, a) * a.usable_memory)))


def efficiency(gpus: int, a: Assumptions) -> float:
    """The share of one GPU's rate each of ``gpus`` GPUs of one task keeps (1 alone; within a node; across)."""
    if gpus <= 1:
        return 1.0
    return a.within_node_efficiency if gpus <= a.gpus_per_node else a.across_nodes_efficiency


def step_wall(c: StepCost, gpus: int, a: Assumptions | None = None) -> tuple[float, int, int]:
    """(wall hours, tasks side by side, GPUs per task) of step ``c`` on ``gpus`` GPUs: as many tasks side by side
    as the GPUs hold (each on at least ``gpus_per_task``), and a task that can spread (a fine-tuning: DDP / FSDP)
    over the GPUs left to it, each GPU keeping :func:`efficiency` of its rate. Wall time is infinite when one task
    needs more GPUs than there are."""
    a = a or Assumptions()
    if gpus < c.gpus_per_task:
        return math.inf, 0, c.gpus_per_task
    side = max(1, min(c.tasks, gpus // c.gpus_per_task))
    per = max(c.gpus_per_task, gpus // side) if c.spread else c.gpus_per_task
    one = c.gpu_hours / max(c.tasks, 1)  # one task's hours at one GPU's rate
    return one * max(c.tasks, 1) / side / (per * efficiency(per, a)), side, per


def wall_hours(costs: list[StepCost], gpus: int, a: Assumptions | None = None) -> float:
    """Wall time on ``gpus`` GPUs: each step as :func:`step_wall` spreads it; steps run in order."""
    return sum(step_wall(c, gpus, a)[0] for c in costs)
