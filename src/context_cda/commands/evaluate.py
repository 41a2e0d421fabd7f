"""`ccda evaluate`: bias and downstream benchmarks (see the registry) for a model reference or a target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import ParamsOpt, ProfileOpt, RunDirOpt, SetOpt, console, resolve_config


def print_metrics(title: str, summary: dict[str, Any], aggregate: dict[str, Any]) -> None:
    """One row per metric (benchmark, metric, value, interval, ideal/direction, items); each benchmark's notes
    (scoring mode, time, start token, a sample too small to decide on) on a line of their own below."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title), header_style="bold")
    level = next((a["overall"]["ci_level"] for a in aggregate.get("benchmarks", {}).values()
                  if "ci_level" in a.get("overall", {})), None)
    for col, just in (("benchmark", "left"), ("metric", "left"), ("value", "right"),
                      (f"{level:.0%} interval" if level else "interval", "right"), ("better", "left"), ("N", "right")):
        table.add_column(col, justify=just, no_wrap=True)  # figures never wrap or shorten on a narrow terminal
    notes = {bname: _add_rows(table, bname, agg) for bname, agg in aggregate.get("benchmarks", {}).items()}
    console().print(table)
    for bname, note in notes.items():
        if note:
            console().print(f"  {bname}: {note}", highlight=False)
    console().print(
        f"model={summary.get('model')} family={summary.get('family')} bias_type={summary.get('bias_type')}",
        highlight=False
    )


def _add_rows(table, bname: str, agg: dict[str, Any]) -> str:
    """The benchmark's rows in ``table``; returns its notes."""
    from rich.markup import escape

    from ..evaluate import get_benchmark
    from ..evaluate.registry import better_text

    bench, overall = get_benchmark(bname), agg.get("overall", {})
    notes = [f"mode={agg['mode']}"] if "mode" in agg else []
    if bname == "crows":
        notes.append(f"neutral={overall.get('neutral')}")
    if "seconds" in agg:
        notes.append(f"{agg['seconds']:.0f} s")
    if agg.get("start_token"):
        notes.append(f"start token {agg['start_token']}")
    if overall.get("too_small"):
        notes.append("too few items to decide on")
    ci = overall.get("ci") or {}
    shown = [m for m in bench.metrics if overall.get(m.key) is not None and overall[m.key] == overall[m.key]]
    for j, m in enumerate(shown):
        v = overall[m.key]
        digits = 2 if abs(v) >= 1.5 or m.ideal in (50.0, 100.0) else 4
        lo, hi = ci.get(m.key) or (None, None)
        interval = f"[{lo:.{digits}f}, {hi:.{digits}f}]" if lo is not None and hi is not None else ""
        table.add_row(bname if j == 0 else "", m.key.upper(), f"{v:.{digits}f}", interval, better_text(m),
                      str(overall.get("count", "")) if j == 0 else "")
    by_type = agg.get("by_bias_type", {})
    for bt, sub in by_type.items() if len(by_type) > 1 else ():
        for m in bench.metrics[:1]:
            table.add_row(bname, escape(f"{m.key.upper()} [{bt}]"), f"{sub.get(m.key, float('nan')):.2f}", "", "",
                          str(sub.get("count", "")))
    return "; ".join(notes)


_PATH_FLAGS = {  # flag -> (evaluate section, key): nested local-copy overrides
    "glue_path": ("glue", "path"), "biasbios_path": ("biasbios", "path"), "stsb_path": ("stsb", "path"),
    "stsb_bias_path": ("stsb", "bias_path"), "mnli_path": ("nli_bias", "train_path"),
    "nli_words_path": ("nli_bias", "words_path"), "gender_words_path": ("next_token", "words_path"),
    "winogender_path": ("winogender", "path"), "winobias_path": ("winobias", "path"),
}
PathOpt = Path | None


def _opt(*flags: str, help: str):  # noqa: A002 - typer's own keyword
    return typer.Option(*flags, help=help)


def evaluate(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    model: Annotated[str | None, _opt("--model", "-m", help="Model reference (hub id, folder, .gguf, package:NAME, tiny:ARCH). "
                                      "Default: the targets (or the fine-tuned models with --arm).")] = None,
    target: Annotated[list[str] | None, _opt("--target", "-t", help="Target short name from run.targets (repeatable).")] = None,
    name: Annotated[str | None, _opt("--name", help="Short name for outputs with --model (default: from it): "
                                      "evaluate/NAME/vanilla, or with --arm evaluate/NAME/ARM/seed-SEED.")] = None,
    arm: Annotated[str, _opt("--arm", help="vanilla (the target as it is); a fine-tuned arm: its model (with "
                                  "--model: REF is that arm's model); inlp, sentence-debias, self-debias or a "
                                  "published checkpoint's name: applied to the vanilla model (with --model: to REF)."
                                  )] = "vanilla",
    artifact: Annotated[PathOpt, _opt("--artifact", help="inlp / sentence-debias: the projection file "
                                      "(safetensors) to apply (default: the debias step's; with --model learnt first "
                                      "from the run's corpus when missing).")] = None,
    seed: Annotated[int | None, _opt("--seed", help="Training seed of the arm's model (default: train.seeds[0]).")] = None,
    benchmarks: Annotated[str | None, _opt("--benchmarks", "-b", help="Comma-separated: stereoset,crows,next-token,"
                                           "winogender,winobias (model only); glue,biasbios,stsb,nli-bias (fine-tune "
                                           "a head first).")] = None,
    bias_type: Annotated[str | None, _opt("--bias-type", help="gender | race | religion | profession | ... | all.")] = None,
    crows_mode: Annotated[str | None, _opt("--crows-mode", help="auto | nangia | bias-bench | lm-eval.")] = None,
    stereoset_path: Annotated[PathOpt, _opt("--stereoset-path", help="Local StereoSet file (JSON or JSONL).")] = None,
    crows_path: Annotated[PathOpt, _opt("--crows-path", help="Local CrowS-Pairs CSV.")] = None,
    glue_path: Annotated[PathOpt, _opt("--glue-path", help="Local GLUE root (SST-2/, RTE/, QNLI/).")] = None,
    biasbios_path: Annotated[PathOpt, _opt("--biasbios-path", help="Local Bias in Bios CSV/folder/parquet.")] = None,
    stsb_path: Annotated[PathOpt, _opt("--stsb-path", help="Local STS-B folder.")] = None,
    stsb_bias_path: Annotated[PathOpt, _opt("--stsb-bias-path", help="Local Bias-STS-B pairs TSV.")] = None,
    mnli_path: Annotated[PathOpt, _opt("--mnli-path", help="Local NLI training folder (NLI-Bias head).")] = None,
    nli_words_path: Annotated[PathOpt, _opt("--nli-words-path", help="Local Dev et al. (2020) word_lists.")] = None,
    gender_words_path: Annotated[PathOpt, _opt("--gender-words-path", help="Folder with male_word_file.txt and "
                                               "female_word_file.txt.")] = None,
    winogender_path: Annotated[PathOpt, _opt("--winogender-path", help="Local Winogender folder (all_sentences.tsv, "
                                             "templates.tsv, occupations-stats.tsv).")] = None,
    winobias_path: Annotated[PathOpt, _opt("--winobias-path", help="Local WinoBias folder ({pro,anti}_stereotyped_"
                                           "type{1,2}.txt.{dev,test}, the occupation lists).")] = None,
    batch_size: Annotated[int | None, _opt("--batch-size", help="Sequences per forward pass.")] = None,
    max_items: Annotated[int | None, _opt("--max-items", help="Only the first N items.")] = None,
    out_dir: Annotated[PathOpt, _opt("--out-dir", help="Output folder (default: the run layout's).")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
) -> None:
    """Score a model on bias and downstream benchmarks; writes predictions + aggregate.json per benchmark.

    StereoSet (SS, LMS, ICAT), CrowS-Pairs (CS), next-token gender balance, WinoGender and WinoBias read the
    model as it is (the bias type follows run.attribute unless --bias-type is given); GLUE,
    Bias in Bios, STS-B and NLI-Bias fine-tune a fresh head on it first (settings: evaluate.head.*)."""
    from ..evaluate import check_names

    names = [b.strip() for b in benchmarks.split(",") if b.strip()] if benchmarks else None
    flags = {
        "benchmarks": check_names(names, "--benchmarks") if names else None,  # before anything is loaded
        "bias_type": bias_type, "crows_mode": crows_mode, "batch_size": batch_size, "max_items": max_items,
        "stereoset_path": str(stereoset_path) if stereoset_path else None,
        "crows_path": str(crows_path) if crows_path else None,
    }
    paths = {"glue_path": glue_path, "biasbios_path": biasbios_path, "stsb_path": stsb_path,
             "stsb_bias_path": stsb_bias_path, "mnli_path": mnli_path, "nli_words_path": nli_words_path,
             "gender_words_path": gender_words_path, "winogender_path": winogender_path,
             "winobias_path": winobias_path}
    for flag, value in paths.items():
        if value is not None:
            sec, key = _PATH_FLAGS[flag]
            flags.setdefault(sec, {})[key] = str(value)
    cfg = resolve_config(profile, sets, run_dir, params, evaluate=flags)
    _run_jobs(cfg, _jobs(cfg, model, name, target, arm, seed, out_dir, artifact, progress), progress)


def _run_jobs(cfg, jobs, progress: bool) -> None:
    """Evaluate each job and print its metrics; a published checkpoint that could not be loaded (its aggregate
    records why, nothing is scored) ends the command with one error line naming it."""
    from ..errors import ModelError
    from ..evaluate import run_evaluate
    from ..io import read_json

    unavailable = []
    for label, inputs, dest, kw in jobs:
        summary = run_evaluate(cfg, inputs, dest, progress=progress, **kw)
        if summary.get("unavailable"):
            why = " ".join(str(summary["unavailable"]).split())
            unavailable.append(f"evaluate [{label}]: the checkpoint could not be loaded, nothing was scored ({why}); "
                               f"{Path(dest) / 'aggregate.json'} records why (the report's row says so, and `ccda run` "
                               "tries it again)")
            continue
        print_metrics(f"evaluate [{label}]", summary, read_json(Path(dest) / "aggregate.json"))
        console().print(f"outputs: {dest}", highlight=False)
    if unavailable:
        raise ModelError("; ".join(unavailable))


def _jobs(cfg, model, name, targets, arm, seed, out_dir, artifact=None, progress=True):
    """(label, inputs, folder, run_evaluate options) per model to evaluate."""
    from ..layout import VANILLA, safe_name
    from ._common import pick, step_io

    if arm != VANILLA:
        safe_name(arm, "--arm")
    if model:
        return [_model_job(cfg, model, name, targets, arm, seed, out_dir, artifact, progress)]
    jobs = []
    names = pick(targets, list(cfg.run.targets), "--target")
    for t in names:
        spec = _posthoc(cfg, t, arm, seed)
        if arm == VANILLA:
            inputs, dest = step_io(cfg, "evaluate-vanilla", target=t)
            kw = {"target": t}
        elif spec is not None:
            inputs, dest = step_io(cfg, "evaluate-posthoc", {"artifact": artifact}, target=t, arm=arm)
            kw = {"target": t, "arm": arm}
        else:
            s = cfg.train.seeds[0] if seed is None else seed
            inputs, dest = step_io(cfg, "evaluate", target=t, arm=arm, seed=s)
            kw = {"target": t, "arm": arm, "seed": s}
        if out_dir:
            dest = out_dir if len(names) == 1 else out_dir / t
        jobs.append((kw.get("name") or "/".join(str(v) for v in kw.values()), inputs, dest, kw))
    return jobs


def _posthoc(cfg, target, arm, seed):
    """The post-hoc arm ``--arm`` names (None: vanilla or a fine-tuned arm); ``--seed`` is refused with one."""
    from ..errors import ConfigError
    from ..evaluate.posthoc import arm_of

    spec = arm_of(cfg, target, arm, None)
    if spec is not None and seed is not None:
        raise ConfigError(f"evaluate --arm {arm} --seed {seed}: {arm} is applied to the vanilla model, it has no "
                          "training seed; leave --seed out.")
    return spec


def _model_job(cfg, model, name, targets, arm, seed, out_dir, artifact=None, progress=True):
    """The job of ``--model REF``: its outputs go to ``evaluate/<name>/vanilla`` (the model as it is), with a
    fine-tuned ``--arm`` to ``evaluate/<name>/<arm>/seed-<seed>`` (REF is that arm's model), with a post-hoc
    ``--arm`` (inlp, sentence-debias, self-debias) to ``evaluate/<name>/<arm>/posthoc`` (REF is the model the arm
    is applied to; a projection comes from ``--artifact``, else ``debias/<name>/<arm>/``, learnt there first from
    the run's corpus when missing). Combinations that would mix two models' results in one folder are refused."""
    from ..errors import ConfigError
    from ..layout import VANILLA, RunLayout, safe_name
    from ..models import parse_ref

    if targets:
        raise ConfigError("evaluate: --model and --target both name the model to score; pass --model REF "
                          "--name SHORT (outputs under evaluate/SHORT/), or --target alone.")
    short = safe_name(name or parse_ref(model).name, "--name")
    layout = RunLayout.of(cfg)
    if arm == VANILLA:
        if seed is not None:
            raise ConfigError(f"evaluate --model {model} --seed {seed}: --seed is the training seed of a fine-tuned "
                              "arm; add --arm ARM (REF is that arm's model), or leave --seed out.")
        configured = cfg.run.targets.get(short)
        if configured is not None and configured != model and out_dir is None:
            raise ConfigError(
                f"evaluate --model {model}: {short!r} is a configured target (run.targets.{short} = {configured}) "
                f"and {layout.evaluation_dir(short)} holds its vanilla baseline; for one of its fine-tuned models add "
                "--arm ARM [--seed N], else pass another --name or --out-dir.")
        dest = out_dir or layout.check().evaluation_dir(short)
        return short, {}, dest, {"model": model, "name": short}
    a = safe_name(arm, "--arm")
    spec = _posthoc(cfg, None, a, seed)
    if spec is not None:
        dest = out_dir or layout.check().evaluation_dir(short, a)
        inputs = {"artifact": artifact or _projection(cfg, model, short, spec, progress)} if spec.artifact else {}
        return f"{short}/{a}", inputs, dest, {"model": model, "name": f"{short}/{a}", "arm": a}
    s = cfg.train.seeds[0] if seed is None else seed
    label = f"{short}/{a}/seed-{s}"
    dest = out_dir or layout.check().evaluation_dir(short, a, s)
    return label, {}, dest, {"model": model, "name": label, "arm": a, "seed": s}  # the arm's benchmarks apply


def _projection(cfg, model: str, short: str, spec, progress: bool):
    """A projection arm's matrix for ``model``: ``debias/<short>/<arm>/`` when it is there and up to date, else
    learnt now from the run's corpus (the ingest and CDA steps run first when the run folder lacks them)."""
    from .. import stages as T
    from ..baselines import run_debias
    from ..layout import RunLayout
    from ..pipeline import run_pipeline

    layout = RunLayout.of(cfg).check()
    folder = layout.debias_dir(short, spec.name)
    file = folder / str(spec.artifact)
    if file.is_file():
        console().print(f"{spec.name}: using {file} (delete it to learn the projection again)", highlight=False)
        return file
    needed = T.step_inputs(cfg, "debias", layout, target=short, arm=spec.name)
    if not all(p.exists() for p in needed.values()):
        run_pipeline(cfg, only=["ingest", "cda", "validate-cda"])
    run_debias(cfg, needed, folder, arm=spec.name, model=model, name=short, progress=progress)
    return file


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
