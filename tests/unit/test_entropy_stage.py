"""run_sample / run_entropy / run_filter / the GX row checks with deterministic fakes (no models)."""

import json
import math
import time as _time
import zlib as _zlib
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.envelope import enveloped

from context_cda import layout as L
from context_cda import schemas as S
from context_cda.config import Config
from context_cda.entropy import run_entropy, run_filter, run_sample
from context_cda.entropy.filter import split_top_k
from context_cda.generation.base import GenerationResult as _GR
from context_cda.layout import k_dirname
from context_cda.scoring.base import LogLik as _LL

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "entropy_reference"

# fakes shared with tests/integration/test_entropy_tiny.py (imported there for a killed subprocess run)


class FakeGenerator:
    """Item i gets samples 'v<j mod K>' with K = 1 + crc(text) % 4 distinct meanings; one empty sample."""

    backend = "fake"
    model_id = "fake"

    def __init__(self):
        self.prompts = 0

    def generate(self, prompts, params):
        out = []
        for conv in prompts:
            text = conv[-1]["content"].rsplit("Text: ", 1)[-1]
            if "EMPTY" in text:
                out.append(_GR(texts=["", " "], error=None))
                continue
            k = 1 + _zlib.crc32(text.encode()) % 4
            out.append(_GR(texts=[f"meaning {j % k} of it" for j in range(params.n)] + ["  "]))
            self.prompts += 1
        return out

    def close(self):
        pass


class FakeScorer:
    family = "causal"

    def __init__(self, delay=0.0, log=None):
        self.delay = delay
        self.log = log
        self.seen = []

    def with_batch_size(self, n):
        return self

    def conditional_loglik(self, prefixes, continuations):
        if self.delay:
            _time.sleep(self.delay)
        if self.log:
            with open(self.log, "a") as f:
                for p in dict.fromkeys(prefixes):
                    f.write(p + "\n")
        self.seen.extend(prefixes)
        return [
            _LL(sum=-float(len(c)), mean=-float(len(c)) / max(1, len(c.split())), n_tokens=len(c.split()))
            for c in continuations
        ]


class FakeJudge:
    """Equal 'meaning N' labels entail each other; different ones are neutral."""

    name = "fake"
    symmetric = False

    def judge(self, pairs):
        return ["entailment" if a.split()[-3:] == b.split()[-3:] else "neutral" for a, b in pairs]


def make_input(tmp_path, n=12, empty_ids=()):
    rows = [
        {"id": f"id{i:03d}", "cda_id": f"c{i}", "augmented": f"Sentence number {i} about her day."}
        for i in range(n)
    ]
    for i in empty_ids:
        rows[i]["augmented"] = "EMPTY" if i % 2 else ""
    path = tmp_path / "augmented.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def config(tmp_path, **entropy):
    cfg = Config()
    cfg.run.run_dir = str(tmp_path / "run")
    cfg.run.targets = {"fake": "tiny:gpt2"}
    for k, v in {"n_samples": 6, "shard_size": 5, **entropy}.items():
        setattr(cfg.entropy, k, v)
    return cfg


def fakes():
    return {"generator": FakeGenerator(), "judge": FakeJudge()}


def sample_and_score(cfg, src, root, target="fake", generator=None, judge=None, scorer=None, batched=True):
    """The sample step into ``root/sample``, then ``target``'s entropy step into ``root/entropy`` (each through the
    step envelope, as every door runs them)."""
    s = enveloped(cfg, "sample", run_sample, {"augmented": src}, root / "sample", generator=generator or FakeGenerator(),
                  judge=judge or FakeJudge(), batched=batched)
    e = enveloped(cfg, "entropy", run_entropy, {"samples": root / "sample"}, root / "entropy", {"target": target},
                  target=target, scorer=scorer or FakeScorer(), batched=batched)
    return s, e


def test_sample_then_entropy_outputs_and_estimates(tmp_path):
    cfg = config(tmp_path)
    src = make_input(tmp_path, n=12, empty_ids=(3, 4))
    s, summary = sample_and_score(cfg, src, tmp_path / "run")
    out = tmp_path / "run/entropy"
    scores = pd.read_parquet(out / L.SCORES_FILE)
    audit = pd.read_parquet(out / L.AUDIT_FILE)
    rej = pd.read_parquet(out / "rejected.parquet")
    assert list(scores.columns[:7]) == [S.ID, S.TEXT, S.SE, S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE, S.N_CLUSTERS]
    assert len(scores) == 10 and summary["scored"] == 10 and summary["rejected"] == 2
    assert set(rej[S.ID]) == {"id003", "id004"}  # the sample step's rejections, carried into the target's table
    assert {r.split(":")[0] for r in rej[S.REASON]} == {"empty-text", "too-few-samples"}
    assert scores[S.ID].tolist() == [f"id{i:03d}" for i in range(12) if i not in (3, 4)]  # input order kept
    assert (scores[S.SE] == scores[S.SE_EQ1]).all()  # eq1 drives by default
    assert len(audit) == 10 * 6 and set(audit.columns) >= {"sample_idx", "sample", "cluster", "loglik_sum",
                                                           "loglik_mean"}
    for item_id, g in audit.groupby(S.ID):
        row = scores.set_index(S.ID).loc[item_id]
        k = g["sample"].nunique()
        assert row[S.N_CLUSTERS] == k == g["cluster"].nunique()
        assert row[S.SE_DISCRETE] == pytest.approx(
            -sum((c / 6) * math.log(c / 6) for c in g["cluster"].value_counts())
        )
    samples = pd.read_parquet(tmp_path / "run/sample" / L.SAMPLES_FILE)
    assert samples.columns.tolist() == [S.ID, S.TEXT, "sample_idx", "sample", "cluster"] and len(samples) == 60
    assert s["items_drawn"] == 11 and s["samples_drawn"] == 66 and s["sampled"] == 10 and s["rejected"] == 2
    assert s["judge_calls_per_item"] <= 6 * 6 and s["shards_written"] == 3  # 11 items in shards of 5
    assert summary["shards_written"] == 2 and summary["samples_scored"] == 60
    assert (out / "manifest.json").is_file() and (tmp_path / "run/sample/manifest.json").is_file()


def test_the_scores_equal_the_per_target_path_before_the_sample_step(tmp_path):
    """The reference (tests/fixtures/entropy_reference/fakes.json) was computed by the per-target entropy step
    that drew and clustered its own samples (main at 2e43879): the same scores, samples, clusters, rejections."""
    ref = json.loads((REFERENCE / "fakes.json").read_text())
    sample_and_score(config(tmp_path), make_input(tmp_path, n=12, empty_ids=(3, 4)), tmp_path / "run")
    assert_like_reference(tmp_path / "run/entropy", ref)


def assert_like_reference(folder, ref, rel=0.0):
    for name, file in (("scores", L.SCORES_FILE), ("audit", L.AUDIT_FILE), ("rejected", "rejected.parquet")):
        got = pd.read_parquet(folder / file)
        want = pd.DataFrame(ref[name]).reindex(columns=got.columns)
        assert len(got) == len(want), name
        exact = [c for c in got.columns if not pd.api.types.is_float_dtype(got[c])]
        pd.testing.assert_frame_equal(got[exact], want[exact], check_dtype=False, obj=name)
        for c in set(got.columns) - set(exact):
            assert got[c].to_numpy() == pytest.approx(want[c].to_numpy(dtype=float), rel=rel, abs=rel), (name, c)


def test_batched_and_one_pair_at_a_time_agree(tmp_path):
    src = make_input(tmp_path, n=8)
    a, _ = sample_and_score(config(tmp_path), src, tmp_path / "a")
    b, _ = sample_and_score(config(tmp_path), src, tmp_path / "b", batched=False)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "a/entropy/scores.parquet"), pd.read_parquet(tmp_path / "b/entropy/scores.parquet")
    )
    assert b["judge_batches"] > a["judge_batches"]


def test_resume_skips_finished_items_and_config_change_recomputes(tmp_path):
    src = make_input(tmp_path, n=10)
    out = tmp_path / "s"
    gen = FakeGenerator()
    run_sample(config(tmp_path, limit=6), {"augmented": src}, out, generator=gen, judge=FakeJudge())
    assert gen.prompts == 6
    s2 = run_sample(config(tmp_path), {"augmented": src}, out, generator=gen, judge=FakeJudge())
    assert gen.prompts == 10 and s2["resumed_items"] == 6 and s2["processed_items"] == 4
    samples = pd.read_parquet(out / L.SAMPLES_FILE)
    assert not samples.duplicated([S.ID, "sample_idx"]).any() and samples[S.ID].nunique() == 10
    s3 = run_sample(config(tmp_path), {"augmented": src}, out)  # nothing left: no models loaded
    assert s3["processed_items"] == 0 and s3["sampled"] == 10
    s4 = run_sample(config(tmp_path, rule="lenient"), {"augmented": src}, out, generator=gen, judge=FakeJudge())
    assert s4["processed_items"] == 10  # another judge setting: re-clustered ...
    assert s4["items_drawn"] == 0 and gen.prompts == 10  # ... on the drawn samples
    e1 = run_entropy(config(tmp_path), {"samples": out}, tmp_path / "e", "fake", scorer=FakeScorer())
    e2 = run_entropy(config(tmp_path), {"samples": out}, tmp_path / "e", "fake")  # nothing left: no scorer loaded
    assert e1["processed_items"] == 10 and e2["processed_items"] == 0 and e2["scored"] == 10
    e3 = run_entropy(config(tmp_path, estimator="plogp"), {"samples": out}, tmp_path / "e", "fake",
                     scorer=FakeScorer())
    assert e3["processed_items"] == 10  # another estimator: another fingerprint


def test_each_step_loads_only_its_own_model_and_only_with_work_left(tmp_path, monkeypatch):
    """The sample step loads the generator (not the target), the entropy step the target (not the generator),
    each once, and neither loads anything when every item is done."""
    from context_cda import models

    loads = []
    real = models.load_lm
    monkeypatch.setattr(models, "load_lm", lambda ref, **kw: loads.append(ref) or real(ref, **kw))
    cfg = config(tmp_path, n_samples=2, max_tokens=4, shard_size=2)
    cfg.augment.backend, cfg.augment.model = "hf", "tiny:llama"
    s = run_sample(cfg, {"augmented": make_input(tmp_path, n=3)}, tmp_path / "s", judge=FakeJudge())
    assert loads == ["tiny:llama"] and s["sampled"] + s["rejected"] == 3
    loads.clear()
    if s["sampled"]:
        run_entropy(cfg, {"samples": tmp_path / "s"}, tmp_path / "e", "fake")
        assert loads == ["tiny:gpt2"]
    loads.clear()
    run_sample(cfg, {"augmented": make_input(tmp_path, n=3)}, tmp_path / "s")
    run_entropy(cfg, {"samples": tmp_path / "s"}, tmp_path / "e", "fake")
    assert loads == []


def test_unknown_target_and_bad_input(tmp_path):
    from context_cda.errors import ConfigError, InputError

    src = make_input(tmp_path, n=2)
    run_sample(config(tmp_path), {"augmented": src}, tmp_path / "s", **fakes())
    with pytest.raises(ConfigError, match="unknown target"):
        run_entropy(config(tmp_path), {"samples": tmp_path / "s"}, tmp_path / "x", "nope")
    with pytest.raises(InputError, match="no samples.parquet"):
        run_entropy(config(tmp_path), {"samples": tmp_path / "empty"}, tmp_path / "x", "fake")
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"id": ["a"], "other": ["x"]}).to_parquet(bad)
    with pytest.raises(InputError, match="augmented"):
        run_sample(config(tmp_path), {"augmented": bad}, tmp_path / "x")


def scores_frame():
    se = [0.5, 1.0, 1.0, 0.1, 0.0, 2.0, 1.0, 0.3, 0.7, 0.2]
    return pd.DataFrame({S.ID: [f"i{n}" for n in range(10)], S.TEXT: [f"t{n}" for n in range(10)], S.SE: se})


def test_top_k_split_is_deterministic_with_id_ties():
    kept, dropped, cut = split_top_k(scores_frame(), 30)
    # 2.0 (i5), then the three 1.0 ties ordered by id: i1, i2 (i6 stays)
    assert dropped[S.ID].tolist() == ["i5", "i1", "i2"] and cut == 1.0
    assert "i6" in set(kept[S.ID])
    shuffled = scores_frame().sample(frac=1, random_state=1)
    assert split_top_k(shuffled, 30)[1][S.ID].tolist() == ["i5", "i1", "i2"]
    assert len(split_top_k(scores_frame(), 0)[1]) == 0
    assert len(split_top_k(scores_frame(), 25)[1]) == 2  # floor(2.5)
    assert k_dirname(30.0) == "k30" and k_dirname(12.5) == "k12.5"


def test_run_filter_writes_one_folder_per_k_and_threshold(tmp_path):
    scores = tmp_path / "scores.parquet"
    scores_frame().to_parquet(scores)
    cfg = Config()
    cfg.filter.k = [20.0, 30.0, 40.0]
    summary = enveloped(cfg, "filter", run_filter, {"scores": scores}, tmp_path / "f", {"target": "fake"}, target="fake")
    for k, n_drop in ((20, 2), (30, 3), (40, 4)):
        d = tmp_path / f"f/k{k}"
        corpus = pd.read_parquet(d / L.FILTERED_FILE)
        rej = pd.read_parquet(d / "rejected.parquet")
        assert list(corpus.columns) == [S.ID, S.TEXT, S.SE]
        assert len(corpus) == 10 - n_drop and len(rej) == n_drop
        assert rej[S.REASON].str.startswith(f"se-top-{k}%").all()
        assert corpus[S.SE].max() <= rej[S.SE].min()
        assert (d / "se_hist.png").stat().st_size > 1000
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text())  # one for the step, every cut's files
    assert manifest["counts"]["items_in"] == 10 and {"k20_corpus", "k40_rejected"} <= set(manifest["outputs"])
    assert summary["cuts"]["k30"]["dropped"] == 3 and sum(summary["histogram"]["counts"]) == 10
    cfg.filter.threshold = 0.6
    s2 = run_filter(cfg, {"scores": scores}, tmp_path / "g", "fake")
    corpus = pd.read_parquet(tmp_path / "g/threshold0.6" / L.FILTERED_FILE)
    assert (corpus[S.SE] < 0.6).all() and len(corpus) == 5 and s2["cuts"]["threshold0.6"]["dropped"] == 5


def test_cli_filter_k_list(tmp_path, monkeypatch):
    from context_cda.cli import main

    monkeypatch.chdir(tmp_path)
    layout = L.RunLayout(tmp_path / "run").check()
    d = layout.validate_dir("entropy", "smollm2-135m")  # filter reads the validated scores
    d.mkdir(parents=True)
    scores_frame().to_parquet(d / L.VALID_FILE)
    assert main(["filter", "--run-dir", str(tmp_path / "run"), "--k", "20,30"]) == 0
    assert (tmp_path / "run/filter/smollm2-135m/k20/corpus.parquet").is_file()
    assert (tmp_path / "run/filter/smollm2-135m/k30/corpus.parquet").is_file()
    assert main(["filter", "--run-dir", str(tmp_path / "run"), "--k", "x"]) == 2


def test_validation_row_checks_and_expectations():
    from context_cda.validation.entropy import expectations, row_checks

    cfg = Config()
    cfg.entropy.n_samples = 4
    df = pd.DataFrame(
        {
            S.ID: ["a", "b", "b", "d"],
            S.TEXT: ["x", "y", "", "z"],
            S.SE: [0.1, -1.0, 0.2, float("nan")],
            S.SE_EQ1: [0.1, 0.1, 0.2, 0.3],
            S.SE_PLOGP: [0.1, 0.1, 0.2, 0.3],
            S.SE_DISCRETE: [0.1, 2.0, 0.2, 0.3],
            S.N_CLUSTERS: [1, 2, 5, 2],
        }
    )
    r = row_checks(df, cfg)
    assert r[0] == ""
    assert "se-negative" in r[1] and "se_discrete-above-log-m" in r[1]
    assert "duplicate-id" in r[2] and "empty-text" in r[2] and "n-clusters-out-of-range" in r[2]
    assert r[3] == "se-missing"
    exps = expectations(cfg)
    assert len(exps) >= 8 and all(type(e).__module__.startswith("great_expectations") for e in exps)


def test_gx_suite_quarantines_bad_rows(tmp_path):
    from context_cda.validation import run_validate

    cfg = Config()
    cfg.run.run_dir = str(tmp_path)
    cfg.entropy.n_samples = 4
    df = pd.DataFrame(
        {
            S.ID: ["a", "b", "b", "d"],
            S.TEXT: ["x", "y", "", "z"],
            S.SE: [0.1, -1.0, 0.2, float("nan")],
            S.SE_EQ1: [0.1, 0.1, 0.2, 0.3],
            S.SE_PLOGP: [0.1, 0.1, 0.2, 0.3],
            S.SE_DISCRETE: [0.1, 2.0, 0.2, 0.3],
            S.N_CLUSTERS: [1, 2, 5, 2],
        }
    )
    src = tmp_path / "scores.parquet"
    df.to_parquet(src)
    s = run_validate(cfg, {"entropy": src}, tmp_path / "v")
    q = pd.read_parquet(tmp_path / "v" / L.QUARANTINE_FILE)
    assert s["rows_valid"] == 1 and s["rows_quarantined"] == 3
    reasons = dict(zip(q[S.ID] + q[S.TEXT], q[S.REASON], strict=True))
    assert "se-negative" in reasons["by"] and "se_discrete-out-of-range" in reasons["by"]
    assert "duplicate-id" in reasons["b"] and "empty-text" in reasons["b"] and "n-clusters" in reasons["b"]
    assert "se-missing" in reasons["dz"]


def test_the_sample_cache_is_keyed_by_the_review():
    """Samples drawn under one review are not reused under another (they passed other checks)."""
    from context_cda.entropy.samples import sample_fingerprint, sample_settings

    cfg = Config()
    base = sample_fingerprint(cfg)
    assert sample_settings(cfg).numbers is False  # the sampler keeps meaning and fact changes (what SE measures)
    cfg.augment.review.script_min_share = 0.5
    assert sample_fingerprint(cfg) != base
    cfg = Config()
    cfg.entropy.judge = "nli"  # the judge changes the clusters, not the drawn samples
    assert sample_fingerprint(cfg) == base


class _Recording:
    """Wraps a generator; keeps each prompt's raw completions (before the review)."""

    backend, model_id = "hf", "tiny:gpt2"

    def __init__(self, inner):
        self.inner, self.raw = inner, {}

    def generate(self, prompts, params):
        out = self.inner.generate(prompts, params)
        for conv, r in zip(prompts, out, strict=True):
            self.raw[conv[-1]["content"]] = list(r.texts)
        return out

    def close(self):
        pass


def test_an_items_samples_do_not_depend_on_the_shard_size(tmp_path):
    pytest.importorskip("torch")
    from context_cda.generation import make_generator

    hf = make_generator("hf", "tiny:gpt2", device="cpu", batch_size=4)
    src = make_input(tmp_path, n=5)
    raws = []
    for size, limit in ((1, None), (4, None), (4, 3)):
        gen = _Recording(hf)
        cfg = config(tmp_path, n_samples=3, max_tokens=5, temperature=1.0, shard_size=size, limit=limit)
        run_sample(cfg, {"augmented": src}, tmp_path / f"s{size}-{limit}", generator=gen, judge=FakeJudge())
        raws.append(gen.raw)
    assert len(raws[0]) == 5 and raws[0] == raws[1]
    assert len(raws[2]) == 3 and all(raws[0][p] == r for p, r in raws[2].items())
    assert len({tuple(r) for r in raws[0].values()}) == 5  # the items differ: the samples are not all the same


class _LongGenerator(FakeGenerator):
    """A prompt marked LONG does not fit the model (a permanent error); the others as FakeGenerator."""

    def generate(self, prompts, params):
        from context_cda.generation.base import PROMPT_TOO_LONG, permanent_error

        out = super().generate([c for c in prompts if "LONG" not in c[-1]["content"]], params)
        it = iter(out)
        return [permanent_error(PROMPT_TOO_LONG, "900 + 64 new tokens > 512 positions")
                if "LONG" in c[-1]["content"] else next(it) for c in prompts]


def test_a_prompt_too_long_is_a_final_rejection_not_an_error(tmp_path):
    rows = [{"id": f"id{i}", "augmented": f"Sentence number {i} about her day." + (" LONG" if i == 1 else "")}
            for i in range(3)]
    src = tmp_path / "augmented.parquet"
    pd.DataFrame(rows).to_parquet(src)
    out = tmp_path / "s"
    s = run_sample(config(tmp_path), {"augmented": src}, out, generator=_LongGenerator(), judge=FakeJudge())
    rej = pd.read_parquet(out / "rejected.parquet")
    assert s["errors"] == 0 and s["sampled"] == 2 and len(pd.read_parquet(out / L.ERRORS_FILE)) == 0
    assert rej[S.ID].tolist() == ["id1"] and rej[S.REASON].iloc[0].startswith("prompt-too-long: 900")
    gen = _LongGenerator()
    again = run_sample(config(tmp_path), {"augmented": src}, out, generator=gen, judge=FakeJudge())
    assert again["errors"] == 0 and gen.prompts == 0  # final: not sampled again
    e = run_entropy(config(tmp_path), {"samples": out}, tmp_path / "e", "fake", scorer=FakeScorer())
    assert e["scored"] == 2 and pd.read_parquet(tmp_path / "e/rejected.parquet")[S.ID].tolist() == ["id1"]


class _FlakyGenerator(FakeGenerator):
    """A prompt marked FLAKY fails for a transient reason (HTTP 500) until ``healed``."""

    healed = False

    def generate(self, prompts, params):
        out = super().generate(prompts, params)
        return [_GR(error="HTTP 500 (after 6 attempts)") if "FLAKY" in c[-1]["content"] and not self.healed else r
                for c, r in zip(prompts, out, strict=True)]


def test_a_transient_generator_error_is_an_error_item_retried_by_the_next_run(tmp_path):
    from context_cda.errors import ItemErrors

    rows = [{"id": f"id{i}", "augmented": f"Sentence number {i} about her day." + (" FLAKY" if i == 2 else "")}
            for i in range(4)]
    src = tmp_path / "augmented.parquet"
    pd.DataFrame(rows).to_parquet(src)
    gen = _FlakyGenerator()
    with pytest.raises(ItemErrors) as exc:
        enveloped(config(tmp_path), "sample", run_sample, {"augmented": src}, tmp_path / "s", generator=gen,
                  judge=FakeJudge())
    assert exc.value.exit_code == 75 and "1 of 4 items" in str(exc.value)
    errors = pd.read_parquet(tmp_path / "s" / L.ERRORS_FILE)
    assert errors[S.ID].tolist() == ["id2"] and errors[S.REASON].iloc[0] == "generator: HTTP 500 (after 6 attempts)"
    assert "id2" not in set(pd.read_parquet(tmp_path / "s" / L.SAMPLES_FILE)[S.ID])  # errors are not results
    cfg = config(tmp_path)
    cfg.run.allow_errors = True
    assert enveloped(cfg, "sample", run_sample, {"augmented": src}, tmp_path / "s", generator=gen,
                     judge=FakeJudge())["errors"] == 1
    gen.healed, before = True, gen.prompts
    s = run_sample(config(tmp_path), {"augmented": src}, tmp_path / "s", generator=gen, judge=FakeJudge())
    assert s["errors"] == 0 and s["processed_items"] == 1 and gen.prompts == before + 1  # exactly the error item


def test_merged_parts_give_what_one_part_gives(tmp_path):
    """Two generation parts of the sample step merged: the same samples as one run over every item, counts added
    up, the judge calls per item recomputed; every target's entropy then scores them as from one run."""
    from context_cda.entropy import run_sample_merge

    src = make_input(tmp_path, n=12)
    one = run_sample(config(tmp_path), {"augmented": src}, tmp_path / "one", **fakes())
    cfg = config(tmp_path)
    cfg.pipeline.generation_shards = 2
    parent = tmp_path / "parts"
    parts = [enveloped(cfg, "sample-part", run_sample, {"augmented": src}, L.within(parent, "sample-part", {}, shard=i),
                       {"shard": i}, shard=i, **fakes()) for i in range(2)]  # the merge reads their manifests
    assert all(p["sampled"] for p in parts)  # both parts hold items
    merged = run_sample_merge(cfg, {"parts": parent, "augmented": src}, tmp_path / "merged")
    assert merged["sampled"] == one["sampled"] == 12 and merged["processed_items"] == 12
    assert merged["samples_drawn"] == one["samples_drawn"] and merged["parts"] == 2
    calls = sum(p["judge_calls"] for p in parts)
    assert merged["judge_calls"] == calls and merged["judge_calls_per_item"] == round(calls / 12, 3)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "merged" / L.SAMPLES_FILE),
                                  pd.read_parquet(tmp_path / "one" / L.SAMPLES_FILE))
    for name in ("one", "merged"):
        run_entropy(cfg, {"samples": tmp_path / name}, tmp_path / f"e-{name}", "fake", scorer=FakeScorer())
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "e-merged" / L.SCORES_FILE),
                                  pd.read_parquet(tmp_path / "e-one" / L.SCORES_FILE))
