import pandas as pd
import pytest

from context_cda.cda.stage import run_cda, training_rows
from context_cda.errors import ConfigError, InputError
from context_cda.io import read_json, write_table


def sentences(tmp_path, texts):
    p = tmp_path / "sentences.parquet"
    write_table(pd.DataFrame({"id": [f"s{i}" for i in range(len(texts))], "text": texts}), p)
    return p


TEXTS = ["He thanked his mother.", "The weather is nice.", "She met her aunt.", "The king's men and HIS son."]


def test_two_sided_output_columns_and_rejections(tmp_path, cfg_factory):
    from context_cda import steps as E

    cfg = cfg_factory()  # through the step envelope, as every door runs it: with its manifest
    summary = E.run(E.make(cfg, "cda", inputs={"sentences": sentences(tmp_path, TEXTS)}), cfg).summary
    out = cfg.run_dir() / "cda"
    df = pd.read_parquet(out / "counterfactuals.parquet")
    assert list(df.columns) == ["id", "source_id", "original", "counterfactual", "swapped_terms", "n_swaps",
                                "direction", "applied", "skipped_terms"]
    assert list(df.counterfactual) == ["She thanked her father.", "He met his uncle.", "The queen's women and HER daughter."]
    assert list(df.direction) == ["mixed", "f2m", "m2f"]  # he, his -> m; mother -> f
    assert list(df.swapped_terms.iloc[0]) == ["He->She", "his->her", "mother->father"]
    rej = pd.read_parquet(out / "rejected.parquet")
    assert list(rej.reason) == ["no-swappable-term"] and list(rej.id) == ["s1"]
    assert summary["rows_in"] == 4 and summary["rows_out"] == 3 and summary["rows_rejected"] == 1
    assert summary["training_texts"] == 6
    manifest = read_json(out / "manifest.json")
    assert manifest["counts"] == {"items_in": 4, "out": 3, "rejected": 1, "errors": 0, "error_reasons": {}}
    assert manifest["inputs"]["sentences"]["sha256"]
    assert manifest["config"]["cda"]["mode"] == "two-sided"


def test_modes(tmp_path, cfg_factory):
    src = sentences(tmp_path, [f"He thanked his mother {i} times." for i in range(200)])
    cfg = cfg_factory(cda={"mode": "cds", "cds_probability": 0.3})
    run_cda(cfg, {"sentences": src})
    df = pd.read_parquet(cfg.run_dir() / "cda" / "counterfactuals.parquet")
    assert 30 < df.applied.sum() < 90
    texts = training_rows(df, "cds")["text"].tolist()
    assert len(texts) == len(df) and sum(t.startswith("She") for t in texts) == df.applied.sum()
    assert training_rows(df, "one-sided")["text"].tolist() == list(df.counterfactual)
    two = training_rows(df, "two-sided")
    assert len(two) == 2 * len(df) and set(two["side"]) == {"original", "counterfactual"}
    assert set(two["id"]) == set(df["id"])


def test_ids_are_stable(tmp_path, cfg_factory):
    src = sentences(tmp_path, TEXTS)
    cfg = cfg_factory()
    run_cda(cfg, {"sentences": src})
    a = pd.read_parquet(cfg.run_dir() / "cda" / "counterfactuals.parquet").id.tolist()
    run_cda(cfg, {"sentences": src})
    assert a == pd.read_parquet(cfg.run_dir() / "cda" / "counterfactuals.parquet").id.tolist()


def test_bad_inputs(tmp_path, cfg_factory):
    with pytest.raises(InputError, match="Run the stage that produces it"):
        run_cda(cfg_factory(), {"sentences": tmp_path / "missing.parquet"})
    p = tmp_path / "x.parquet"
    write_table(pd.DataFrame({"sentence": ["He left."]}), p)
    with pytest.raises(InputError, match="missing column"):
        run_cda(cfg_factory(), {"sentences": p})
    with pytest.raises(ConfigError, match="names_path"):
        run_cda(cfg_factory(cda={"swap_names": True}), {"sentences": sentences(tmp_path, TEXTS)})


def test_name_swap_from_published_list(tmp_path, cfg_factory, shared_data):
    names = shared_data / "cda_word_pairs" / "names_pairs_1000_scaled.json"
    cfg = cfg_factory(cda={"swap_names": True, "names_path": str(names)})
    run_cda(cfg, {"sentences": sentences(tmp_path, ["James told his sister about Mary."])})
    df = pd.read_parquet(cfg.run_dir() / "cda" / "counterfactuals.parquet")
    assert df.counterfactual.iloc[0] == "Barbara told her brother about John."
