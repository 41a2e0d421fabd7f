"""The stage table's helpers: step keys, the `until` cut, looking up a step's function."""

import pytest

from context_cda import pipeline
from context_cda import stages as T
from context_cda.errors import ConfigError


def _step(steps, name):
    return next(s for s in steps if s.name == name)


@pytest.mark.parametrize("name", ["finetune[a/cda/seed-13]", "evaluate[a/cda/seed-13]"])
def test_adding_a_seed_leaves_the_done_seeds_steps_up_to_date(cfg_factory, name):
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13]},
                      evaluate={"after_training": True})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13, 99]},
                      evaluate={"after_training": True})
    assert _step(pipeline.plan(one), name).key(one) == _step(pipeline.plan(two), name).key(two)
    # the step's own seed and the other train settings still count
    assert _step(pipeline.plan(two), name).key(two) != _step(pipeline.plan(two), name.replace("13", "99")).key(two)
    lr = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda"], "seeds": [13], "learning_rate": 1e-3},
                     evaluate={"after_training": True})
    if name.startswith("finetune"):
        assert _step(pipeline.plan(lr), name).key(lr) != _step(pipeline.plan(one), name).key(one)


def test_a_step_that_reads_every_seed_still_sees_the_list(cfg_factory):
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13]}, tracking={"enabled": True})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13, 99]}, tracking={"enabled": True})
    for name in ("register[a]", "report"):
        assert _step(pipeline.plan(one), name).key(one) != _step(pipeline.plan(two), name).key(two)


@pytest.mark.parametrize(("name", "last"), [("cda", "validate-cda"), ("augment", "validate-augment"),
                                            ("augment-part", "augment-part"), ("entropy", "validate-entropy"),
                                            ("validate", "validate-entropy"), ("finetune", "finetune"),
                                            ("report", "report")])
def test_until_keeps_the_last_named_step_and_its_validation(name, last):
    assert T.ORDER[T.until_index(name)] == last


def test_until_and_last_stage_cut_at_the_same_step(cfg_factory):
    """The runner's --until and the Kubeflow pipeline's last_stage use the one helper."""
    from context_cda.pipeline import select

    cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2"}})
    steps = pipeline.plan(cfg)
    assert [s.name for s in select(steps, until="augment")][-1] == "validate-augment"
    with pytest.raises(ConfigError, match="unknown stage 'nope'"):
        T.until_index("nope")
    pytest.importorskip("kfp")  # the pipeline module imports it
    import pipelines.context_cda_pipeline as P

    assert P._last_index("entropy") == T.until_index("entropy")
    with pytest.raises(ValueError, match="last_stage: unknown stage 'nope'"):
        P._last_index("nope")


def test_get_stage_is_the_rows_function_and_names_only_steps():
    from context_cda.augment import run_augment, run_augment_merge

    assert T.get_stage("augment-part") is run_augment and T.get_stage("augment") is run_augment_merge
    with pytest.raises(ConfigError, match="unknown step 'validate'"):  # a command is not a step
        T.get_stage("validate")


def test_the_layout_has_a_folder_for_every_step_of_the_table_in_its_order():
    """The config checks ``pipeline.timeouts`` against the layout's step folders (it may not import the table):
    they are the table's steps, in its order."""
    from context_cda import layout as L

    assert tuple(L.FOLDERS) == T.ORDER


def test_the_augment_review_judge_model_counts_for_the_augment_parts(cfg_factory):
    """The review's meaning judge defaults to entropy.judge_model: changing it makes augment stale."""
    base = {"run": {"targets": {"a": "tiny:gpt2"}}, "augment": {"review": {"meaning": "nli"}}}
    one = cfg_factory(**base, entropy={"judge": "nli", "judge_model": "judge-a"})
    two = cfg_factory(**base, entropy={"judge": "nli", "judge_model": "judge-b"})
    name = "augment-part[part-0]"
    assert _step(pipeline.plan(one), name).key(one) != _step(pipeline.plan(two), name).key(two)


def test_adding_a_target_leaves_the_shared_and_the_other_targets_steps_up_to_date(cfg_factory):
    """The samples and their clusters do not depend on the target: a second target reruns neither them nor the
    first target's entropy (its own scoring only)."""
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2", "b": "tiny:llama"}})
    for name in ("augment-part[part-0]", "sample-part[part-0]", "sample", "entropy[a]", "filter[a]"):
        assert _step(pipeline.plan(one), name).key(one) == _step(pipeline.plan(two), name).key(two), name
    assert "entropy[b]" in [s.name for s in pipeline.plan(two)]


def test_the_sample_and_entropy_steps_read_every_entropy_setting_between_them(cfg_factory):
    """Each entropy setting is read by the sample step (what the samples and clusters are) or by the entropy step
    (how they are scored), so no setting change leaves a stale result; the judge reruns the sample step only."""
    from context_cda.config import EntropyConfig

    sample, entropy = T.get("sample-part").sections, T.get("entropy").sections
    fields = {f"entropy.{k}" for k in EntropyConfig.model_fields}
    assert fields <= set(sample) | set(entropy)
    assert {"entropy.judge", "entropy.n_samples", "entropy.generator_model"} <= set(sample) - set(entropy)
    assert {"entropy.estimator", "entropy.length_normalised"} <= set(entropy) - set(sample)
    base = cfg_factory(run={"targets": {"a": "tiny:gpt2"}})
    other = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, entropy={"estimator": "plogp"})
    assert _step(pipeline.plan(base), "sample").key(base) == _step(pipeline.plan(other), "sample").key(other)
    assert (_step(pipeline.plan(base), "sample-part[part-0]").key(base)
            == _step(pipeline.plan(other), "sample-part[part-0]").key(other))
    assert _step(pipeline.plan(base), "entropy[a]").key(base) != _step(pipeline.plan(other), "entropy[a]").key(other)


def test_dvc_params_of_a_per_seed_per_arm_step_leave_out_the_seed_and_arm_lists(cfg_factory):
    cfg = cfg_factory()
    params = T.param_keys(cfg, T.get("finetune"))
    assert not {"train.seeds", "train.arms", "train", "evaluate.arm_benchmarks"} & set(params)
    assert {"train.k", "train.epochs", "train.lora", "evaluate.max_items"} <= set(params)
    assert "train.seeds" in T.param_keys(cfg, T.get("register"))  # it reads every seed's evidence
    assert "train.arms" in T.param_keys(cfg, T.get("budget"))  # its budget group's arms


def test_a_steps_view_holds_only_its_own_seed_and_target(cfg_factory):
    """The config a Kubeflow task gets: the same for a finished seed's task whatever seeds and targets are added."""
    one = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"seeds": [13]})
    two = cfg_factory(run={"targets": {"a": "tiny:gpt2", "b": "tiny:bert"}}, train={"seeds": [13, 99]})
    keys = {"target": "a", "arm": "cda", "seed": 13}
    view = T.step_view(two, T.get("finetune"), keys)
    assert view.train.seeds == [13] and view.run.targets == {"a": "tiny:gpt2"}
    assert view.to_dict() == T.step_view(one, T.get("finetune"), keys).to_dict()
    assert two.train.seeds == [13, 99]  # the run's config is untouched
    assert T.step_view(two, T.get("register"), {"target": "a"}).train.seeds == [13, 99]


def test_a_finetune_key_holds_its_own_arm_corpus_settings_and_per_epoch_scoring_only(cfg_factory):
    """Adding an arm, a benchmark that is not scored per epoch, another arm's benchmark list, or changing a setting
    only another arm's corpus reads leaves a fine-tuning's key as it was; its own training settings do not."""
    base = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, train={"arms": ["cda", "context-cda"]})
    keys = {"target": "a", "arm": "context-cda", "seed": 13}
    row = T.get("finetune")

    def key(**sections):
        cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, **sections)
        return T.key_sections(cfg, row, keys)

    same = key(train={"arms": ["cda", "context-cda", "inlp", "dropout"]})
    assert same == T.key_sections(base, row, keys)
    assert key(train={"arms": ["cda", "context-cda"]}, evaluate={"benchmarks": ["stereoset", "crows", "winogender"],
                                                                 "arm_benchmarks": {"inlp": ["stereoset"]}}) == same
    assert key(train={"arms": ["cda", "context-cda"]}, cda={"mode": "one-sided"}) == same  # the cda arm's corpus
    assert key(train={"arms": ["cda", "context-cda"], "epochs": 3}) != same
    assert key(train={"arms": ["cda", "context-cda"]}, evaluate={"max_items": 5}) != same  # per-epoch scoring
    cda = {**keys, "arm": "cda"}
    assert T.key_sections(cfg_factory(run={"targets": {"a": "tiny:gpt2"}}, cda={"mode": "one-sided"}), row,
                          cda) != T.key_sections(base, row, cda)


def test_a_finetune_view_keeps_the_benchmark_files_its_corpus_is_decontaminated_against(cfg_factory, tmp_path):
    """WinoGender and WinoBias are not scored per epoch, but the fine-tuning's corpus is checked against their files
    (context_cda.evaluate.decontam): its Kubeflow view holds the run's files, not the defaults, and its key changes with
    them; the budget step, which counts the decontaminated corpora, reads them too."""
    wg, wb = str(tmp_path / "wg.tsv"), str(tmp_path / "wb")
    cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2"}},
                      evaluate={"winogender": {"path": wg, "max_items": 3}, "winobias": {"path": wb, "split": "test"}})
    keys = {"target": "a", "arm": "cda", "seed": 13}
    view = T.step_view(cfg, T.get("finetune"), keys)
    assert view.evaluate.winogender.path == wg and view.evaluate.winobias.path == wb
    assert view.evaluate.winobias.split == "test"
    assert view.evaluate.winogender.max_items != 3  # not scored per epoch: its other settings are not the step's
    plain = cfg_factory(run={"targets": {"a": "tiny:gpt2"}})
    assert T.key_sections(cfg, T.get("finetune"), keys) != T.key_sections(plain, T.get("finetune"), keys)
    budget = T.step_view(cfg, T.get("budget"), {"target": "a", "arm": "cda"})
    assert budget.evaluate.winogender.path == wg and budget.decontaminate == cfg.decontaminate
