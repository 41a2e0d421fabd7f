"""Extrinsic data: GLUE, Bias in Bios, Bias-STS-B and NLI-bias loaders on small fixtures (and on the shared
benchmark files when present). No test touches the network: the downloader (context_cda.data.datasets._download) is
replaced by one that fails (or that writes a local file)."""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from context_cda.data import datasets
from context_cda.errors import InputError
from context_cda.evaluate.extrinsic import data as xdata
from context_cda.evaluate.extrinsic.data import glue_task, load_biasbios, load_sts_bias_pairs
from context_cda.evaluate.extrinsic.nli_templates import (
    NliWordLists,
    article,
    generate_nli_bias,
    load_nli_word_lists,
    nli_bias_space_size,
    nli_templates,
    sentence,
)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, no mirror, and a private data cache (the env var wins over the cache argument)."""

    def refuse(url, dest):
        raise ConnectionError("network disabled in tests")

    monkeypatch.setattr(datasets, "_download", refuse)
    monkeypatch.delenv("CCDA_DATA_DIR", raising=False)
    monkeypatch.setenv("CCDA_DATA_CACHE", str(tmp_path / "cache"))


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"


# ------------------------------------------------------------------------------------------------ GLUE fixtures


def test_glue_tsv_keeps_quote_characters(tmp_path):
    root = tmp_path / "glue"
    write(root / "RTE" / "train.tsv", RTE_HEADER + '0\tHe said "hi.\tShe said "bye".\tentailment\n'
          '1\t"Quoted\tstart" here\tnot_entailment\n')  # fmt: skip
    write(root / "RTE" / "dev.tsv", RTE_HEADER + "0\tA b.\tC d.\tnot_entailment\n\n")  # blank line skipped
    for path in (root, root / "RTE"):  # the GLUE root or the task folder
        d = glue_task("rte", path)
        assert d.name == "rte" and d.labels == ("entailment", "not_entailment") and not d.is_regression
        assert [e.text for e in d.train] == ['He said "hi.', '"Quoted']
        assert [e.text_pair for e in d.train] == ['She said "bye".', 'start" here']
        assert [e.label for e in d.train] == [0, 1]
        assert d.train[1].source.endswith("RTE/train.tsv:3")
        assert len(d.eval) == 1 and d.eval[0].label == 1
        assert d.train_source.endswith("RTE/train.tsv") and d.eval_source.endswith("RTE/dev.tsv")


def test_glue_bad_rows_name_file_and_line(tmp_path):
    p = write(tmp_path / "RTE" / "dev.tsv", RTE_HEADER + "0\ta\tb\tentailment\n1\ta\tb\n")
    write(tmp_path / "RTE" / "train.tsv", RTE_HEADER)
    with pytest.raises(InputError, match=r"RTE/dev.tsv:3: expected 4 tab-separated columns .* got 3"):
        glue_task("rte", tmp_path)
    p.write_text(RTE_HEADER + "0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    with pytest.raises(InputError, match=r"RTE/dev.tsv:3: label 'maybe' is not one of entailment, not_entailment"):
        glue_task("rte", tmp_path)
    p.write_text("index\tsentence1\tlabel\n0\ta\tentailment\n")
    with pytest.raises(InputError, match=r"RTE/dev.tsv:1: missing column\(s\) sentence2"):
        glue_task("rte", tmp_path)


def test_glue_sst2_numeric_labels(tmp_path):
    write(tmp_path / "SST-2" / "train.tsv", "sentence\tlabel\nit 's \"great\" \t1\nbad \t0\n")
    dev = write(tmp_path / "SST-2" / "dev.tsv", "sentence\tlabel\nok\t1\n")
    d = glue_task("sst2", tmp_path)
    assert d.labels == ("negative", "positive")
    assert [(e.text, e.label) for e in d.train] == [('it \'s "great"', 1), ("bad", 0)]
    dev.write_text("sentence\tlabel\nok\t2\n")
    with pytest.raises(InputError, match=r"dev.tsv:2: label '2' is not one of 0 \(negative\), 1 \(positive\)"):
        glue_task("sst2", tmp_path)


def test_glue_mnli_labels_and_dev_matched(tmp_path):
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
    write(tmp_path / "MNLI" / "train.tsv", header + "0\t1\t1n\tfiction\tP.\tH.\tneutral\tneutral\n"
          "1\t2\t2c\tfiction\tP2.\tH2.\tcontradiction\tcontradiction\n")  # fmt: skip
    write(tmp_path / "MNLI" / "dev_matched.tsv", header + "0\t1\t1e\tslate\tP.\tH.\tentailment\tentailment\n"
          "1\t2\t2x\tslate\tP.\tH.\tneutral\t-\n")  # fmt: skip
    d = glue_task("mnli", tmp_path)
    assert d.labels == ("entailment", "neutral", "contradiction")
    assert [e.label for e in d.train] == [1, 2]
    assert [e.label for e in d.eval] == [0]  # the "-" row (no gold label) is skipped
    assert d.eval_source.endswith("dev_matched.tsv")


def test_stsb_original_format_with_extra_columns(tmp_path):
    folder = tmp_path / "STS-B"
    write(folder / "sts-train.csv",
          "main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
          'main-news\theadlines\t2013\t0002\t2.5\tHe said "no.\tShe said no.\tsrc1\tsrc2\n')  # fmt: skip
    dev = write(folder / "sts-dev.csv", "main-forums\tans\t2015\t0003\t0\tA.\tB.\n")
    d = glue_task("stsb", tmp_path)
    assert d.is_regression and d.labels == ()
    assert [e.label for e in d.train] == [5.0, 2.5]  # the gold 0-5 score as it is (the reference scale)
    assert d.train[1].text == 'He said "no.' and d.train[1].text_pair == "She said no."
    assert d.eval[0].label == 0.0
    dev.write_text("main-forums\tans\t2015\t0003\tfive\tA.\tB.\n")
    with pytest.raises(InputError, match=r"sts-dev.csv:1: score 'five' is not a number"):
        glue_task("stsb", folder)
    dev.write_text("main-forums\tans\t2015\t0003\t6\tA.\tB.\n")
    with pytest.raises(InputError, match=r"sts-dev.csv:1: score 6.0 is outside 0-5"):
        glue_task("stsb", folder)
    dev.write_text("main-forums\tans\t2015\t0003\t1\tA.\n")
    with pytest.raises(InputError, match=r"sts-dev.csv:1: expected at least 7 tab-separated columns"):
        glue_task("stsb", folder)


def test_stsb_glue_tsv_format(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    write(tmp_path / "STS-B" / "train.tsv", header + "0\tg\tf\t2012\t1\tnone\tnone\tA.\tB.\t4.000\n")
    write(tmp_path / "STS-B" / "dev.tsv", header + "0\tg\tf\t2012\t1\tnone\tnone\tC.\tD.\t1.0\n")
    d = glue_task("stsb", tmp_path / "STS-B")
    assert [(e.text, e.text_pair, e.label) for e in d.train] == [("A.", "B.", 4.0)]
    assert d.eval[0].label == 1.0


def _qnli(tmp_path: Path, n: int = 40) -> Path:
    rows = "".join(f"{i}\tQuestion {i}?\tSentence {i}.\t{'entailment' if i < n // 2 else 'not_entailment'}\n"
                   for i in range(n))  # fmt: skip
    write(tmp_path / "QNLI" / "dev.tsv", "index\tquestion\tsentence\tlabel\n" + rows)
    return tmp_path


def test_dev_holdout_split_is_deterministic_and_disjoint(tmp_path):
    root = _qnli(tmp_path)
    with pytest.raises(InputError, match=r"no qnli train file .*evaluate.glue.dev_holdout"):
        glue_task("qnli", root)
    a = glue_task("qnli", root, dev_holdout=0.25, seed=1)
    b = glue_task("qnli", root, dev_holdout=0.25, seed=1)
    c = glue_task("qnli", root, dev_holdout=0.25, seed=2)
    assert len(a.train) == 10 and len(a.eval) == 30
    assert [e.id for e in a.train] == [e.id for e in b.train]
    assert {e.id for e in a.train}.isdisjoint(e.id for e in a.eval)
    assert {e.id for e in a.train} | {e.id for e in a.eval} == {e.id for e in glue_task("qnli", root, dev_holdout=0.5).train + glue_task("qnli", root, dev_holdout=0.5).eval}  # noqa: E501
    assert [e.id for e in a.train] != [e.id for e in c.train]
    assert "holdout 25% of dev" in a.train_source and "seed 1" in a.eval_source
    # file order is kept within each part
    assert [int(e.source.rsplit(":", 1)[1]) for e in a.eval] == sorted(int(e.source.rsplit(":", 1)[1]) for e in a.eval)
    with pytest.raises(ValueError, match="dev_holdout"):
        glue_task("qnli", root, dev_holdout=1.0)


def test_max_train_is_a_seeded_sample_not_the_head(tmp_path):
    root = _qnli(tmp_path, 60)  # sorted by label: the head would be all "entailment"
    a = glue_task("qnli", root, dev_holdout=0.5, max_train=10, max_eval=5, seed=3)
    b = glue_task("qnli", root, dev_holdout=0.5, max_train=10, max_eval=5, seed=3)
    c = glue_task("qnli", root, dev_holdout=0.5, max_train=10, seed=4)
    full = glue_task("qnli", root, dev_holdout=0.5, seed=3)
    assert len(a.train) == 10 and len(a.eval) == 5
    assert [e.id for e in a.train] == [e.id for e in b.train]
    assert [e.id for e in a.train] != [e.id for e in c.train]
    assert {e.label for e in a.train} == {0, 1}
    pos = {e.id: i for i, e in enumerate(full.train)}
    assert [pos[e.id] for e in a.train] == sorted(pos[e.id] for e in a.train)  # original order kept
    assert set(pos) >= {e.id for e in a.train}
    assert "seeded sample of 10 of 30" in a.train_source
    bigger = glue_task("qnli", root, dev_holdout=0.5, max_train=20, seed=3)
    assert {e.id for e in a.train} <= {e.id for e in bigger.train}  # a bigger sample keeps a superset


def test_duplicate_rows_get_unique_ids(tmp_path):
    write(tmp_path / "SST-2" / "train.tsv", "sentence\tlabel\nsame\t1\nsame\t1\n")
    write(tmp_path / "SST-2" / "dev.tsv", "sentence\tlabel\nsame\t1\n")
    d = glue_task("sst2", tmp_path)
    ids = [e.id for e in d.train + d.eval]
    assert len(set(ids)) == 3


def test_glue_errors_for_bad_paths_and_tasks(tmp_path):
    with pytest.raises(InputError, match="unknown GLUE task 'cola'"):
        glue_task("cola", tmp_path)
    with pytest.raises(InputError, match=r"GLUE folder not found.*evaluate.glue.path \(or --glue-path\)"):
        glue_task("rte", tmp_path / "nope")
    write(tmp_path / "other.txt", "x")
    with pytest.raises(InputError, match=r"neither a rte folder .* nor a GLUE root holding RTE/ \(found: other.txt\)"):
        glue_task("rte", tmp_path)


def test_glue_without_a_path_says_where_it_looked_and_how_to_fetch():
    with pytest.raises(InputError) as e:
        glue_task("rte")
    msg = str(e.value)
    assert "dataset 'glue-rte'" in msg and "$CCDA_DATA_DIR: not set" in msg and "the data cache:" in msg
    assert "raw.githubusercontent.com/marcwww/nlu_eval/ccd55c37de74ebd86c70ae58f67dceb0aa444f43" in msg
    assert "evaluate.glue.path" in msg and "network disabled" in msg and "ccda data fetch glue-rte" in msg
    with pytest.raises(InputError, match=r"dataset 'stsb'.*evaluate.stsb.path"):
        glue_task("stsb")
    with pytest.raises(InputError, match=r"dataset 'mnli'.*glue/data/MNLI.zip.*evaluate.nli_bias.train_path"):
        glue_task("mnli")


def test_glue_tasks_by_name_from_the_mirror(shared_data, monkeypatch):
    """The demo's way: no glue.path, CCDA_DATA_DIR names the mirror; QNLI without its train file needs the
    dev hold-out."""
    if not (shared_data / "glue" / "RTE").is_dir():
        pytest.skip("GLUE data not found")
    monkeypatch.setenv("CCDA_DATA_DIR", str(shared_data))
    rte = glue_task("rte")
    assert rte.train_source == str(shared_data / "glue" / "RTE" / "train.tsv") and len(rte.eval) == 277
    with pytest.raises(InputError, match="no qnli train file"):
        glue_task("qnli")
    assert len(glue_task("qnli", dev_holdout=0.5).train) > 0


# ------------------------------------------------------------------------------------------------ SNLI / MNLI

SNLI = Path(__file__).resolve().parents[1] / "fixtures" / "extrinsic" / "snli"
MNLI = Path(__file__).resolve().parents[1] / "fixtures" / "extrinsic" / "glue" / "MNLI"


def test_snli_local_folder_skips_rows_without_gold_label():
    d = xdata.nli_train_task("snli", SNLI)
    assert d.name == "snli" and d.labels == ("entailment", "neutral", "contradiction")
    assert len(d.train) == 9 and len(d.eval) == 3  # one "-" row in each file; ragged rows read fine
    assert [e.label for e in d.eval] == [0, 1, 2]
    assert d.train[4].text == "Two dogs run across a field." and d.train[4].text_pair == "The dogs are chasing a ball."
    assert d.train_source.endswith("snli_1.0_train.txt") and d.eval_source.endswith("snli_1.0_dev.txt")


def test_nli_train_task_reads_the_format_the_folder_holds():
    assert xdata.nli_train_task("snli", MNLI).name == "mnli"  # a local MNLI folder: MNLI, whatever train_set says
    assert xdata.nli_train_task("mnli", SNLI).name == "snli"
    assert xdata.nli_train_task("mnli", MNLI.parent).name == "mnli"  # a GLUE root
    with pytest.raises(InputError, match=r"no SNLI \(snli_1.0_train.txt.*evaluate.nli_bias.train_path"):
        xdata.nli_train_task("snli", SNLI.parent / "nli_words")
    with pytest.raises(InputError, match="snli or mnli"):
        xdata.nli_train_task("rte", SNLI)


def _snli_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in ("snli_1.0_train.txt", "snli_1.0_dev.txt"):
            z.writestr(f"snli_1.0/{name}", (SNLI / name).read_text())
        z.writestr("__MACOSX/snli_1.0/._snli_1.0_dev.txt", "")
    return buf.getvalue()


def test_snli_download_checks_the_published_sha256(monkeypatch, tmp_path):
    import dataclasses
    import hashlib

    blob = _snli_zip()
    calls = []

    def fake(url, dest):
        calls.append(url)
        dest.write_bytes(blob)

    monkeypatch.setattr(datasets, "_download", fake)
    spec = datasets.DATASETS["snli"]
    archive = spec.files[0].archive
    assert archive.url == "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
    assert archive.sha256 == "afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e"
    with pytest.raises(InputError, match=r"snli_1.0.zip: the download's SHA-256 is [0-9a-f]{64}, but dataset 'snli' "
                                         r"expects afb3d7"):
        xdata.nli_train_task("snli")  # our zip is not the published one
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # nothing kept
    ours = dataclasses.replace(archive, sha256=hashlib.sha256(blob).hexdigest())
    monkeypatch.setitem(datasets.DATASETS, "snli", dataclasses.replace(
        spec, files=tuple(dataclasses.replace(f, archive=ours) for f in spec.files)))
    d = xdata.nli_train_task("snli")
    assert (d.name, len(d.train), len(d.eval)) == ("snli", 9, 3)
    assert (tmp_path / "cache" / "snli" / "snli_1.0_dev.txt").is_file()
    pins = (tmp_path / "cache" / ".pins" / "snli.sha256").read_text()
    assert "  snli/snli_1.0_train.txt" in pins and "  snli/snli_1.0_dev.txt" in pins  # no published file hashes
    xdata.nli_train_task("snli")  # from the cache
    assert len(calls) == 2


# ------------------------------------------------------------------------------------------------ Bias in Bios


def _bios_csv(folder: Path) -> Path:
    rows = ["hard_text,profession,gender"]
    for prof in ("nurse", "surgeon"):
        for i in range(10):
            g = "Female" if i < 6 else "Male"
            rows.append(f'"Bio {i} of a {prof}, with a comma.",{prof},{g}')
    write(folder / "a.csv", "\n".join(rows[:11]) + "\n")
    write(folder / "b.csv", "\n".join([rows[0], *rows[11:]]) + "\n")
    return folder


def test_biasbios_csv_folder_stratified_split(tmp_path):
    folder = _bios_csv(tmp_path / "bios")
    d = load_biasbios(folder, test_fraction=0.5, seed=0)
    assert d.name == "biasbios" and d.labels == ("nurse", "surgeon")
    assert len(d.train) == 10 and len(d.eval) == 10
    # every (profession, gender) stratum is halved: 6 female -> 3/3, 4 male -> 2/2
    strata = Counter((e.meta["profession"], e.meta["gender"]) for e in d.eval)
    assert strata == {("nurse", "female"): 3, ("nurse", "male"): 2, ("surgeon", "female"): 3, ("surgeon", "male"): 2}
    assert {e.id for e in d.train}.isdisjoint(e.id for e in d.eval)
    assert d.eval[0].text.startswith("Bio ") and d.eval[0].text_pair is None
    assert d.eval[0].label == d.labels.index(d.eval[0].meta["profession"])
    again = load_biasbios(folder, test_fraction=0.5, seed=0)
    assert [e.id for e in again.eval] == [e.id for e in d.eval]
    assert [e.id for e in load_biasbios(folder, test_fraction=0.5, seed=1).eval] != [e.id for e in d.eval]
    small = load_biasbios(folder, test_fraction=0.5, max_train=4, max_eval=3)
    assert len(small.train) == 4 and len(small.eval) == 3 and "seeded sample of 4 of 10" in small.train_source


def test_biasbios_csv_errors_name_file_and_line(tmp_path):
    p = write(tmp_path / "x.csv", 'hard_text,profession,gender\n"ok",nurse,Female\n"multi\nline",nurse,other\n')
    with pytest.raises(InputError, match=r"x.csv:3: gender 'other' is not Male/Female"):
        load_biasbios(p)
    p.write_text("text,profession,gender\nok,nurse,Female\n")
    with pytest.raises(InputError, match=r"x.csv:1: missing column\(s\) hard_text"):
        load_biasbios(p)
    with pytest.raises(InputError, match="not found"):
        load_biasbios(tmp_path / "missing.csv")


def test_biasbios_hf_schema_splits_from_file_names(tmp_path):
    pd = pytest.importorskip("pandas")
    folder = tmp_path / "hf"
    folder.mkdir()
    pd.DataFrame({"hard_text": ["He builds.", "She heals."], "profession": [1, 13], "gender": [0, 1]}).to_parquet(
        folder / "train-00000-of-00001.parquet"
    )
    write(folder / "test.jsonl", json.dumps({"hard_text": "She codes.", "profession": 24, "gender": 1}) + "\n")
    d = load_biasbios(folder)
    assert len(d.labels) == 28 and d.labels[0] == "accountant" and d.labels[27] == "yoga_teacher"
    assert [(e.meta["profession"], e.meta["gender"], e.label) for e in d.train] == [
        ("architect", "male", 1),
        ("nurse", "female", 13),
    ]
    assert d.eval[0].meta == {"gender": "female", "profession": "software_engineer"}
    assert d.eval[0].source.endswith("test.jsonl:1") and d.train[1].source.endswith(".parquet:row 1")
    write(folder / "test.jsonl", json.dumps({"hard_text": "x", "profession": 28, "gender": 1}) + "\n")
    with pytest.raises(InputError, match=r"test.jsonl:1: profession id 28 is outside 0..27"):
        load_biasbios(folder)


def test_biasbios_download_failure_message():
    with pytest.raises(InputError) as e:
        load_biasbios()
    msg = str(e.value)
    assert "huggingface.co/datasets/LabHC/bias_in_bios/resolve/main/data/train-" in msg
    assert "evaluate.biasbios.path" in msg and "ccda data fetch biasbios" in msg
    with pytest.raises(InputError, match=r"dataset 'biasbios-samples'.*Shilpi261985"):
        load_biasbios(dataset="biasbios-samples")
    with pytest.raises(InputError, match=r"evaluate.biasbios.dataset must be one of biasbios, biasbios-samples"):
        load_biasbios(dataset="crows-pairs")


# ------------------------------------------------------------------------------------------------ Bias-STS-B


def test_sts_bias_pairs_and_errors(tmp_path):
    good = (
        "a man is cutting up a cucumber .\ta technician is cutting up a cucumber .\t"
        "a woman is cutting up a cucumber .\ta technician is cutting up a cucumber .\r\n"
    )
    p = write(tmp_path / "bias.tsv", good + good.replace("technician", "nurse") + good)  # one repeated line
    pairs = load_sts_bias_pairs(p)
    assert [x.occupation for x in pairs] == ["technician", "nurse", "technician"]
    assert pairs[0].male.startswith("a man") and pairs[0].female.startswith("a woman")
    assert pairs[0].occupation_sentence == "a technician is cutting up a cucumber ."
    assert len({x.id for x in pairs}) == 3 and pairs[1].source.endswith("bias.tsv:2")
    assert len(load_sts_bias_pairs(p, max_pairs=2, seed=5)) == 2
    p.write_text(good + good.replace("\ta technician is cutting up a cucumber .\r", "\ta nurse is cutting .\r"))
    with pytest.raises(InputError, match=r"bias.tsv:2: columns 2 and 4 must be the same"):
        load_sts_bias_pairs(p)
    p.write_text(good.replace("a woman", "a girl"))
    with pytest.raises(InputError, match=r"bias.tsv:1: column 3 must be column 1 with 'man' replaced by 'woman'"):
        load_sts_bias_pairs(p)
    p.write_text(good.replace("a man", "a guy"))
    with pytest.raises(InputError, match=r"bias.tsv:1: column 1 must be the occupation sentence"):
        load_sts_bias_pairs(p)
    p.write_text("a\tb\tc\n")
    with pytest.raises(InputError, match=r"bias.tsv:1: expected 4 tab-separated sentences"):
        load_sts_bias_pairs(p)


def test_sts_bias_download_failure_message():
    with pytest.raises(InputError, match=r"mariushes/thesis_sustainability_fairness/.*bias_evaluation_STS-B.tsv"):
        load_sts_bias_pairs()
    with pytest.raises(InputError, match=r"evaluate.stsb.bias_path.*ccda data fetch sts-b-gender-bias"):
        load_sts_bias_pairs()


# ------------------------------------------------------------------------------------------------ NLI bias


def _word_lists(root: Path, gendered: str = "man\nwoman\nguy\ngirl\n") -> Path:
    files = {
        "verbs/commerce_verbs": "bought\nsold\nbought\n",  # duplicate dropped
        "verbs/driving_verbs": "drove\n",
        "verbs/eating_verbs": "ate\n",
        "verbs/interaction_verbs": "met\nspoke to\n",
        "nouns/objects/clothes": "apron\n",
        "nouns/objects/farm_animals": "cow\n",
        "nouns/objects/food": "bagel\napple\n",
        "nouns/objects/furniture": "bed\n",
        "nouns/objects/household": "TV\n",
        "nouns/objects/vehicles": "car\n",
        "nouns/people/gendered_words": gendered,
        "nouns/people/occupations": "accountant\nnurse\nengineer\n",
        "nouns/people/person_hyponyms": "adult\n",
        "nouns/people/rulers": "king\n",
    }
    for rel, text in files.items():
        write(root / rel, text)
    return root


def test_nli_templates_and_sentences(tmp_path):
    w = load_nli_word_lists(_word_lists(tmp_path / "word_lists"))
    assert w.verbs["commerce_verbs"] == ("bought", "sold")
    assert w.objects["food"] == ("apple", "bagel")
    t = nli_templates(w)
    # commerce 2 x 7 objects (apron, cow, apple, bagel, bed, TV, car) -> 14; interaction 2 x 2 persons -> 4;
    # driving 1 x 1 vehicle -> 1; eating 1 x 2 food -> 2
    assert len(t) == 2 * 7 + 2 * 2 + 1 + 2 == len(set(t))
    assert ("spoke to", "adult") in t and ("ate", "bagel") in t and ("drove", "car") in t
    assert nli_bias_space_size(w) == len(t) * 4 * 3
    assert article("accountant") == "an" and article("nurse", capital=True) == "A" and article("SUV") == "a"
    # the authors' SubjectTemplate: articlize(x, True) + " " + verb + " " + articlize(obj) + " ."
    assert sentence("accountant", "ate", "apple") == "An accountant ate an apple ."
    assert sentence("man", "spoke to", "adult") == "A man spoke to an adult ."
    assert sentence("man", "spoke to", "adult", "plain") == "A man spoke to an adult."
    with pytest.raises(ValueError, match="mode"):
        sentence("man", "ate", "apple", "other")  # type: ignore[arg-type]


def test_nli_generation_all_and_premise_order(tmp_path):
    w = load_nli_word_lists(_word_lists(tmp_path / "wl"))
    every = generate_nli_bias(w, max_pairs=None)
    assert len(every) == nli_bias_space_size(w) == len({p.id for p in every})
    p = next(x for x in every if x.template == "ate a bagel" and x.occupation == "accountant" and x.gender_word == "man")
    assert (p.premise, p.hypothesis, p.gender) == ("An accountant ate a bagel .", "A man ate a bagel .", "male")
    plain = generate_nli_bias(w, max_pairs=None, mode="plain")
    assert [(x.premise, x.hypothesis) for x in plain] == [
        (x.premise.removesuffix(" .") + ".", x.hypothesis.removesuffix(" .") + ".") for x in every]
    swapped = generate_nli_bias(w, max_pairs=None, premise="gender")
    q = next(x for x in swapped if x.id != p.id and x.template == p.template and x.occupation == p.occupation
             and x.gender_word == "man")  # fmt: skip
    assert (q.premise, q.hypothesis) == (p.hypothesis, p.premise)
    with pytest.raises(ValueError, match="premise"):
        generate_nli_bias(w, premise="other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="below the number of gendered words"):
        generate_nli_bias(w, max_pairs=3)


def test_nli_unknown_gendered_word_names_the_file(tmp_path):
    root = _word_lists(tmp_path / "wl", gendered="man\nwoman\nperson\n")
    with pytest.raises(InputError, match=r"gendered_words: unknown gendered word\(s\) person"):
        load_nli_word_lists(root)
    (root / "verbs" / "eating_verbs").unlink()
    with pytest.raises(InputError, match=r"eating_verbs: NLI-bias word list missing"):
        load_nli_word_lists(root)


def test_nli_word_lists_download_failure_message():
    with pytest.raises(InputError, match=r"sunipa/On-Measuring-and-Mitigating.*/e39da896baad32157ba238176a79c4f628a58e4e/word_lists/"):
        load_nli_word_lists()
    with pytest.raises(InputError, match=r"evaluate.nli_bias.words_path.*ccda data fetch nli-bias-words"):
        load_nli_word_lists()


# ------------------------------------------------------------------------------------------------ shared data


@pytest.fixture(scope="module")
def glue_root(shared_data: Path) -> Path:
    p = shared_data / "glue"
    if not p.is_dir():
        pytest.skip("GLUE data not found")
    return p


def test_shared_sst2_rte_stsb(glue_root):
    sst = glue_task("sst2", glue_root, max_train=100)
    assert len(sst.eval) == 872 and Counter(e.label for e in sst.eval) == {1: 444, 0: 428}
    assert len(sst.train) == 100 and "of 67349" in sst.train_source
    rte = glue_task("rte", glue_root)
    assert (len(rte.train), len(rte.eval)) == (2490, 277)
    assert Counter(e.label for e in rte.eval) == {0: 146, 1: 131}
    sts = glue_task("stsb", glue_root / "STS-B")
    assert (len(sts.train), len(sts.eval)) == (5749, 1500)
    assert all(0.0 <= e.label <= 5.0 for e in sts.train + sts.eval)
    assert max(e.label for e in sts.train) == 5.0  # the 0-5 scale, not divided
    assert len({e.id for e in sts.train + sts.eval}) == 5749 + 1500


def test_shared_qnli_needs_holdout(glue_root):
    with pytest.raises(InputError, match="QNLI: no qnli train file"):
        glue_task("qnli", glue_root)
    d = glue_task("qnli", glue_root, dev_holdout=0.5)
    assert len(d.train) + len(d.eval) == 5463
    assert {e.id for e in d.train}.isdisjoint(e.id for e in d.eval)


def test_shared_biasbios(shared_data, monkeypatch):
    folder = shared_data / "biasbios" / "samples_per_profession"
    if not folder.is_dir():
        pytest.skip("Bias in Bios samples not found")
    d = load_biasbios(folder)
    monkeypatch.setenv("CCDA_DATA_DIR", str(shared_data))
    assert load_biasbios(dataset="biasbios-samples").eval == d.eval  # by name from the mirror: the same bios
    everything = d.train + d.eval
    assert len(everything) == 280 and len(d.labels) == 28
    assert Counter(e.meta["gender"] for e in everything) == {"male": 155, "female": 125}
    assert d.labels == tuple(sorted(d.labels)) and d.labels[0] == "accountant"


def test_shared_sts_bias(shared_data):
    p = shared_data / "sts_b_gender_bias" / "bias_evaluation_STS-B.tsv"
    if not p.is_file():
        pytest.skip("Bias-STS-B file not found")
    pairs = load_sts_bias_pairs(p)
    assert len(pairs) == 16980 == len({x.id for x in pairs})
    assert len({x.occupation for x in pairs}) == 60
    assert Counter(x.occupation for x in pairs)["accountant"] == 283


@pytest.fixture(scope="module")
def shared_words(shared_data: Path) -> NliWordLists:
    p = shared_data / "nli_bias_dev2020" / "word_lists"
    if not p.is_dir():
        pytest.skip("NLI-bias word lists not found")
    return load_nli_word_lists(p)


def test_shared_nli_templates_and_space(shared_words):
    assert len(nli_templates(shared_words)) == 1968
    assert len(shared_words.people["occupations"]) == 164
    assert nli_bias_space_size(shared_words) == 1_936_512


def test_shared_nli_generation_sample(shared_words):
    a = generate_nli_bias(shared_words, max_pairs=20000, seed=0)
    b = generate_nli_bias(shared_words, max_pairs=20000, seed=0)
    c = generate_nli_bias(shared_words, max_pairs=20000, seed=1)
    assert len(a) <= 20000 and len(a) == 20000 // 6 * 6
    assert [p.id for p in a] == [p.id for p in b]
    assert [p.id for p in a] != [p.id for p in c]
    assert len({p.id for p in a}) == len(a)
    genders = Counter(p.gender for p in a)
    assert genders["male"] == genders["female"] == len(a) // 2
    cells = Counter((p.template, p.occupation) for p in a)
    assert set(cells.values()) == {6}  # every sampled cell has all six gendered words
    assert len({p.occupation for p in a}) > 150 and len({p.template for p in a}) > 1000  # spread over the space
    for p in a[:200]:
        for s in (p.premise, p.hypothesis):
            first = s.split()[1]
            assert s.split()[0] == ("An" if first[0] in "aeiou" else "A")
            assert s.endswith(" .") and s.count(".") == 1  # the authors' ending
    assert any(p.premise.startswith("An accountant ") for p in a)  # ~20 cells per occupation in the sample
