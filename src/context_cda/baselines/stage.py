"""The ``debias`` stage: learn a projection arm's matrix for one target model from the run's corpus.

``run_debias(config, inputs, out_dir, target, arm)`` (inputs: ``sentences``, the ingest step's folder; ``cda``,
the validated counterfactuals) writes below ``debias/<target>/<arm>/``:

* ``projection.safetensors`` (inlp: the d x d nullspace projection, key ``projection``) or
  ``bias_direction.safetensors`` (sentence-debias: the k x d bias subspace, key ``bias_direction``), with the
  model, mode and counts as safetensors metadata;
* ``debias_rows.parquet``: every sentence (or pair) learnt from, with its class and the line it came from;
* ``lines.txt``: the corpus lines handed to the selection, one per line (bias-bench's input file);
* ``manifest.json``: config, input hashes, counts per class, classifier accuracies, timings.

Everything that can be checked without the model is checked first: the arm (a projection arm), the model's
family (masked or causal, from its config), and the corpus (``baselines.inlp.min_per_class`` sentences in each
class; ``baselines.sentence_debias.min_pairs`` pairs) - each a one-line error naming the arm, the target and the
fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import arms as A
from .. import layout as L
from ..errors import ConfigError, InputError
from ..io import StageRecorder, file_lock, write_table, write_text
from .selection import Lines, bias_bench_pairs, cda_pairs, corpus_lines, inlp_sentences

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config


def run_debias(config: Config, inputs: Mapping[str, Path | str] | None, out_dir: Path | str | None = None,
               target: str | None = None, arm: str = "inlp", model: str | None = None, name: str | None = None,
               progress: bool = False) -> dict[str, Any]:
    """Learn ``arm``'s projection for ``target`` (or ``model``, a reference named ``name``); returns the summary."""
    from ..stages import resolve_io

    who = name or target
    if who is None:
        raise ConfigError("debias: name a target (--target) or a model (--model).")
    ref = model or _target_ref(config, who)
    spec = A.parse(arm, config.train.k)
    if spec.kind != "projection":
        raise ConfigError(f"debias: arm {arm} learns nothing (it is {spec.kind}); the debias step is for the "
                          f"projection arms: {', '.join(a for a in ('inlp', 'sentence-debias'))}.")
    io_keys = {"target": who, "arm": arm}
    inputs, out = resolve_io(config, "debias", inputs, out_dir, **io_keys)
    data = _select(config, inputs, arm, who)  # the corpus is checked before any model is read
    _inputs_exist(inputs, arm, who)
    family = _family(config, ref, arm, who, data)
    with file_lock(out / L.LOCK_FILE, f"debias[{who}/{arm}]"):
        return _learn(config, inputs, out, who, arm, ref, family, data, progress)


#: the flag of ``ccda debias`` that names each input, and the step that writes it in a run folder
_INPUT_FLAGS = {"sentences": ("--sentences", "ccda ingest"), "cda": ("--cda", "ccda validate --stage cda")}


def _inputs_exist(inputs: Mapping[str, Path], arm: str, who: str) -> None:
    """Every input the step records is there before anything is learnt (a missing one would stop the step after
    minutes of learning, when its manifest is written)."""
    for key, path in inputs.items():
        if not Path(path).exists():
            flag, step = _INPUT_FLAGS.get(key, (f"--{key}", "the step that writes it"))
            raise InputError(f"debias {arm} on target {who}: {path}: no such file or folder; the debias step records "
                             f"its {key} input: run `{step}` in this run folder first, or pass {flag} PATH.")


def _target_ref(config: Config, target: str) -> str:
    try:
        return config.run.targets[target]
    except KeyError:
        raise ConfigError(f"debias: no target named {target!r} in run.targets ({', '.join(config.run.targets)}); "
                          "pass --model REF to learn a projection for another model.") from None


def _family(config: Config, ref: str, arm: str, who: str, data: Mapping[str, Any]) -> str:
    """The model's family from its config (the arm must take it), and SentenceDebias's components checked against
    its width and the pairs: fewer than the dimensions, no more than the pair vectors PCA sees."""
    from transformers import AutoConfig

    from ..models import family_of_config, parse_ref, resolve_pretrained
    from ..scoring.interventions import config_width

    parse_ref(ref)
    model_config = AutoConfig.from_pretrained(resolve_pretrained(ref, config.run.model_cache))
    family = family_of_config(model_config)
    A.check_family(arm, family, who)
    width, k = config_width(model_config), config.baselines.sentence_debias.n_components
    rows = 2 * len(data.get("pairs", ()))
    if arm == "sentence-debias" and ((width is not None and k >= width) or k > rows):
        why = (f"its hidden states have {width} dimensions, and {k} directions would remove every one" if width
               is not None and k >= width else f"the {rows // 2} pairs give {rows} vectors, fewer than {k} components")
        raise ConfigError(f"debias sentence-debias on target {who}: baselines.sentence_debias.n_components={k}, and "
                          f"{why}; use fewer components (bias-bench uses 1).")
    return family


# ------------------------------------------------------------------------------------------------ the data


def _select(config: Config, inputs: Mapping[str, Path], arm: str, who: str) -> dict[str, Any]:
    """The lines and what the arm learns from them, counted against the minimums."""
    from ..cda.lexicon import attribute_pairs

    b, mode = config.baselines, config.baselines.mode
    pairs = attribute_pairs(config.lexicon)
    if arm == "inlp":
        lines = corpus_lines(inputs["sentences"], b.inlp.neutral_lines or b.inlp.max_per_class, b.inlp.seed,
                             neutral=True)
        chosen = inlp_sentences(lines.texts, pairs, b.inlp.max_per_class, b.inlp.seed, mode)
        counts = chosen.counts()
        short = {k: n for k, n in counts.items() if n < b.inlp.min_per_class}
        if short:
            raise InputError(
                f"debias inlp on target {who}: {inputs['sentences']} gives {_counts(counts)} sentences, fewer than "
                f"baselines.inlp.min_per_class={b.inlp.min_per_class} in {', '.join(short)}. INLP's classifier needs "
                "each class: use a larger corpus (ingest.sample_n, ingest.corpus) or lower the minimum.")
        return {"lines": lines, "classes": chosen}
    if mode == "bias-bench":
        lines = corpus_lines(inputs["sentences"], 0, b.inlp.seed, neutral=False)
        found = bias_bench_pairs(lines.texts, pairs)
    else:
        found = cda_pairs(inputs["cda"])
        lines = Lines([o for o, _ in found], [], len(found))
    if len(found) < b.sentence_debias.min_pairs:
        where = inputs["sentences"] if mode == "bias-bench" else inputs["cda"]
        raise InputError(
            f"debias sentence-debias on target {who}: {where} gives {len(found)} counterfactual pairs, fewer than "
            f"baselines.sentence_debias.min_pairs={b.sentence_debias.min_pairs}: use a larger corpus "
            "(ingest.sample_n) or lower the minimum.")
    return {"lines": lines, "pairs": found}


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items())


# ------------------------------------------------------------------------------------------------ learning


def _learn(config: Config, inputs, out: Path, who: str, arm: str, ref: str, family: str, data: dict[str, Any],
           progress: bool) -> dict[str, Any]:
    from ..models import load_lm

    rec = StageRecorder("debias", out, {"baselines": config.baselines.model_dump(mode="json"),
                                        "lexicon": config.lexicon.model_dump(mode="json"), "model": ref,
                                        "target": who, "arm": arm}, dict(inputs),
                        versions=("torch", "transformers", "scikit-learn", "scipy"))
    with rec.timed("load_model"):
        model, tok, _fam = load_lm(ref, cache=config.run.model_cache, device=config.run.device)
    with rec.timed("learn"):
        tensor, key, info, rows = (_inlp if arm == "inlp" else _sentence_debias)(config, model, tok, data, progress, who)
    from ..scoring.interventions import Projection

    checked = Projection(key, _torch(tensor), f"debias {arm} on target {who}").validate(arm)  # before it is written
    lines: Lines = data["lines"]
    meta = {"model": ref, "arm": arm, "mode": config.baselines.mode, "family": family,
            "dim": str(tensor.shape[-1]), **{k: str(v) for k, v in info.items() if not isinstance(v, list)}}
    artifact = checked.save(out / str(A.parse(arm).artifact), meta)
    outputs = {"artifact": artifact, "rows": write_table(rows, out / L.DEBIAS_ROWS_FILE),
               "lines": write_text(out / L.DEBIAS_LINES_FILE, "".join(f"{t}\n" for t in lines.texts))}
    summary = {"target": who, "arm": arm, "model": ref, "family": family, "mode": config.baselines.mode,
               "dim": int(tensor.shape[-1]), "lines": len(lines.texts), "gendered_lines": lines.n_gendered,
               "neutral_pool": lines.n_neutral_pool, **info}
    rec.finish({"lines": len(lines.texts), "rows": len(rows)}, outputs=outputs, summary=summary)
    return summary


def _torch(array: Any) -> Any:
    import torch

    return torch.from_numpy(array.astype("float32"))


def _inlp(config: Config, model, tok, data: dict[str, Any], progress: bool, who: str = ""):
    import pandas as pd

    from .features import mean_hidden
    from .learn import inlp_projection

    c = config.baselines.inlp
    batch = 1 if config.baselines.mode == "bias-bench" else c.batch_size
    chosen, lines = data["classes"], data["lines"]
    feats = {k: mean_hidden(model, tok, v, batch, progress=progress, desc=f"INLP {k}")
             for k, v in chosen.classes.items()}
    res = inlp_projection(feats, c.n_classifiers, bias_bench=config.baselines.mode == "bias-bench", progress=progress)
    _keeps_a_dimension(res, c.n_classifiers, who)
    rows = pd.DataFrame([{"class": k, "text": t, "line": i, "source_id": lines.ids[i] if lines.ids else None}
                         for k in chosen.classes for t, i in zip(chosen.classes[k], chosen.sources[k], strict=True)])
    info = {**{f"n_{k}": n for k, n in chosen.counts().items()}, **{f"{k}_rows": n for k, n in res.sizes.items()},
            "n_classifiers": c.n_classifiers, "first_accuracy": res.accuracies[0] if res.accuracies else None,
            "last_accuracy": res.accuracies[-1] if res.accuracies else None,
            "rank_removed": int(round(res.projection.shape[0] - float(res.projection.trace())))}
    return res.projection, "projection", info, rows


def _keeps_a_dimension(res: Any, n: int, who: str) -> None:
    """INLP whose classifiers removed every dimension is refused before it is written, with the classifier counts
    that keep at least one dimension and half of them (from the rank removed after each round)."""
    dim = int(res.projection.shape[0])
    if not res.removed or res.removed[-1] < dim:
        return
    some = sum(1 for r in res.removed if r < dim)
    half = sum(1 for r in res.removed if 2 * r <= dim)
    raise InputError(f"debias inlp on target {who}: the {n} classifiers (baselines.inlp.n_classifiers) removed all {dim} "
                     "dimensions of the hidden states, so nothing would be left for the LM head to read; nothing was "
                     f"written. Use fewer classifiers: with at most {some} at least one dimension stays, with at most "
                     f"{half} half of them (e.g. --set baselines.inlp.n_classifiers={max(half, 1)}).")


def _sentence_debias(config: Config, model, tok, data: dict[str, Any], progress: bool, who: str = ""):
    import pandas as pd

    from .features import mean_hidden
    from .learn import bias_subspace

    c = config.baselines.sentence_debias
    pairs = data["pairs"]
    if config.baselines.mode == "bias-bench":  # its loop runs len // batch_size full batches only
        pairs = pairs[: (len(pairs) // c.batch_size) * c.batch_size]
        if not pairs:
            raise InputError(f"debias sentence-debias (bias-bench mode): fewer pairs ({len(data['pairs'])}) than one "
                             f"batch (baselines.sentence_debias.batch_size={c.batch_size}); lower the batch size.")
    male = mean_hidden(model, tok, [m for m, _ in pairs], c.batch_size, c.max_length, True, progress, "pairs (1)")
    female = mean_hidden(model, tok, [f for _, f in pairs], c.batch_size, c.max_length, True, progress, "pairs (2)")
    components, ratios = bias_subspace(male, female, c.n_components)
    rows = pd.DataFrame({"first": [m for m, _ in pairs], "second": [f for _, f in pairs]})
    info = {"pairs": len(pairs), "pairs_found": len(data["pairs"]), "n_components": c.n_components,
            "explained_variance": ratios}
    return components, "bias_direction", info, rows
