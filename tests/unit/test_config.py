from pathlib import Path

import pytest
import yaml

from context_cda.config import Config, defaults_dict, load_config, parse_overrides
from context_cda.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(p: Path, data) -> Path:
    p.write_text(yaml.safe_dump(data))
    return p


def test_params_yaml_holds_every_default():
    """params.yaml is what DVC reads: it must equal the code's defaults (regenerate with `make params`)."""
    on_disk = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert on_disk == defaults_dict()


def test_every_field_has_help_text():
    from context_cda.config import STAGE_SECTIONS

    missing = [f"{name}.{field}" for name, sec in STAGE_SECTIONS.items()
               for field, info in sec.model_fields.items() if not info.description]
    assert missing == []


def test_layering_defaults_params_profile_flags(tmp_path):
    params = write(tmp_path / "params.yaml", {"ingest": {"min_words": 4, "max_words": 40}, "cda": {"mode": "cds"}})
    (tmp_path / "configs").mkdir()
    write(tmp_path / "configs" / "p.yaml", {"ingest": {"min_words": 5}})
    cfg = load_config("p", ["ingest.max_words=50", "augment.sampling.n=3"], params_file=params)
    assert cfg.ingest.min_words == 5  # profile beats params
    assert cfg.ingest.max_words == 50  # flag beats params
    assert cfg.cda.mode == "cds"  # params beats defaults
    assert cfg.augment.sampling.n == 3 and cfg.augment.sampling.temperature == Config().augment.sampling.temperature


def test_a_dotted_flag_into_a_mapping_sets_one_key_and_keeps_the_others(tmp_path):
    cut = {"inlp": ["stereoset"], "dropout": ["crows"]}
    params = write(tmp_path / "params.yaml", {"evaluate": {"arm_benchmarks": cut}})
    one = load_config(None, ["evaluate.arm_benchmarks.self-debias=[crows, stereoset]"], params_file=params)
    assert one.evaluate.arm_benchmarks == {**cut, "self-debias": ["crows", "stereoset"]}
    changed = load_config(None, ["evaluate.arm_benchmarks.inlp=[crows]"], params_file=params)
    assert changed.evaluate.arm_benchmarks == {"inlp": ["crows"], "dropout": ["crows"]}
    removed = load_config(None, ["evaluate.arm_benchmarks.inlp="], params_file=params)
    assert removed.evaluate.arm_benchmarks == {"dropout": ["crows"]}
    whole = load_config(None, ["evaluate.arm_benchmarks={inlp: [crows]}"], params_file=params)
    assert whole.evaluate.arm_benchmarks == {"inlp": ["crows"]}  # a whole mapping as the value replaces it
    targets = load_config(None, ["run.targets={a: gpt2}"], params_file=write(tmp_path / "t.yaml", {}))
    assert targets.run.targets == {"a": "gpt2"}


def test_unknown_key_names_key_and_file(tmp_path):
    params = write(tmp_path / "params.yaml", {"ingest": {"min_wrds": 4}})
    with pytest.raises(ConfigError) as e:
        load_config(None, None, params_file=params)
    msg = str(e.value)
    assert "ingest.min_wrds" in msg and str(params) in msg and "min_words" in msg


def test_bad_value_names_key_and_file(tmp_path):
    params = write(tmp_path / "params.yaml", {})
    (tmp_path / "configs").mkdir()
    prof = write(tmp_path / "configs" / "bad.yaml", {"cda": {"mode": "three-sided"}})
    with pytest.raises(ConfigError) as e:
        load_config("bad", None, params_file=params)
    assert "cda.mode" in str(e.value) and str(prof) in str(e.value)


def test_unknown_section_and_flag_errors(tmp_path):
    params = write(tmp_path / "params.yaml", {"ingset": {}})
    with pytest.raises(ConfigError, match="unknown section 'ingset'"):
        load_config(None, None, params_file=params)
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_overrides(["nonsense"])
    with pytest.raises(ConfigError, match="command-line flags"):
        load_config(None, ["ingest.min_words=abc"], params_file=write(tmp_path / "p2.yaml", {}))


def test_unknown_profile_lists_known(tmp_path):
    params = write(tmp_path / "params.yaml", {})
    (tmp_path / "configs").mkdir()
    write(tmp_path / "configs" / "demo.yaml", {})
    with pytest.raises(ConfigError, match="Known profiles: demo"):
        load_config("nope", None, params_file=params)


def test_cross_field_validation(tmp_path):
    with pytest.raises(ConfigError, match="min_words"):
        load_config(None, ["ingest.min_words=10", "ingest.max_words=5"], params_file=write(tmp_path / "p.yaml", {}))


@pytest.mark.parametrize("profile", ["demo", "paper", "tiny", "demo-race", "demo-religion", "paper-race", "paper-religion",
                                     "paper-8b"])
def test_shipped_profiles_resolve(profile):
    cfg = load_config(profile, None, params_file=ROOT / "params.yaml")
    assert cfg.profile == profile and cfg.run.targets


@pytest.mark.parametrize("profile,attribute", [("demo-race", "race"), ("demo-religion", "religion"),
                                               ("paper-race", "race"), ("paper-religion", "religion")])
def test_attribute_profiles_judge_their_attribute(profile, attribute):
    cfg = load_config(profile, None, params_file=ROOT / "params.yaml")
    assert cfg.run.attribute == attribute and cfg.evaluate.bias_type == attribute
    assert not {"cda-neutral", "context-neutral"} & set(cfg.train.arms)


def test_the_arms_k_and_the_filters_k_cannot_disagree(tmp_path):
    """Every corpus an arm trains on (train.k for context-cda, K of context-cda-k<K>) is one filter.k writes:
    refused when the config loads, naming both keys and where each was set."""
    params = write(tmp_path / "p.yaml", {"train": {"k": 20.0}})
    with pytest.raises(ConfigError) as e:
        load_config(None, ["filter.k=[30]"], params_file=params)
    msg = str(e.value)
    assert "train.arms context-cda (k = 20, from train.k)" in msg and "filter.k = [30] does not write" in msg
    assert "filter.k=[20, 30]" in msg  # the fix
    assert f"train.k from {params}" in msg and "filter.k from command-line flags" in msg
    with pytest.raises(ConfigError, match=r"context-cda-k40 \(k = 40\) .*filter\.k = \[20, 30\]"):
        load_config(None, ["filter.k=[20, 30]", "train.arms=[cda, context-cda, context-cda-k40]"],
                    params_file=write(tmp_path / "q.yaml", {}))
    with pytest.raises(ConfigError, match="filter.threshold = 0.5 writes a threshold corpus"):
        load_config(None, ["filter.threshold=0.5"], params_file=write(tmp_path / "r.yaml", {}))
    ok = load_config(None, ["filter.k=[20, 30, 40]", "train.arms=[cda, context-cda, context-cda-k20, context-cda-k40]"],
                     params_file=write(tmp_path / "s.yaml", {}))
    assert ok.filter.k == [20.0, 30.0, 40.0]
    # arms that read no filtered corpus need none; the components' door validates the same way
    assert load_config(None, ["filter.threshold=0.5", "train.arms=[cda, context-cda-nofilter]"],
                       params_file=write(tmp_path / "t.yaml", {})).filter.threshold == 0.5
    with pytest.raises(ValueError, match="filter.k"):
        Config.model_validate({"filter": {"k": [10.0]}})
