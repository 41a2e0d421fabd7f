import gzip
import json

import pandas as pd
import pytest

from context_cda.errors import InputError
from context_cda.ingest.corpus import normalise, run_ingest


def ingest(cfg_factory, path, **ingest_cfg):
    cfg = cfg_factory(ingest={"corpus": "path", "path": str(path), "min_words": 3, **ingest_cfg})
    summary = run_ingest(cfg)
    out = cfg.run_dir() / "ingest"
    return summary, pd.read_parquet(out / "sentences.parquet"), pd.read_parquet(out / "rejected.parquet")


LINES = [
    "He went home. The weather was fine today.",
    "She said her brother was late again.",
    "She said her brother was late again.",
    "Nothing gendered here at all, really.",
    "Hi he.",
]


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "csv", "parquet", "txt.gz", "jsonl.gz", "csv.gz"])
def test_formats_give_the_same_sentences(tmp_path, cfg_factory, fmt):
    base = fmt.replace(".gz", "")
    p = tmp_path / f"c.{fmt}"
    if base == "txt":
        data = "\n".join(LINES).encode()
    elif base == "jsonl":
        data = "\n".join(json.dumps({"text": t, "other": 1}) for t in LINES).encode()
    elif base == "csv":
        data = pd.DataFrame({"text": LINES}).to_csv(index=False).encode()
    if base == "parquet":
        pd.DataFrame({"text": LINES}).to_parquet(p)
    else:
        p.write_bytes(gzip.compress(data) if fmt.endswith(".gz") else data)
    summary, df, rej = ingest(cfg_factory, p)
    assert list(df.text) == ["He went home.", "She said her brother was late again."]
    reasons = dict(rej.reason.value_counts())
    assert reasons == {"no-gender-term": 2, "duplicate": 1, "too-short": 1}
    assert summary["rows_out"] == 2 and summary["rows_rejected"] == 4
    assert df.id.is_unique and set(df.attribute_terms.iloc[1]) == {"she", "her", "brother"}
    assert (df.line >= 1).all()


def test_ids_are_stable_across_runs_and_formats(tmp_path, cfg_factory):
    (tmp_path / "a.txt").write_text("\n".join(LINES))
    _, d1, _ = ingest(cfg_factory, tmp_path / "a.txt")
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in LINES))
    _, d2, _ = ingest(cfg_factory, tmp_path / "b.jsonl")
    assert list(d1.id) == list(d2.id)


def test_nfc_and_wikitext_detokenisation(cfg_factory):
    cfg = cfg_factory()
    assert normalise("Cafe\u0301 he said", cfg) == "Caf\u00e9 he said"
    assert normalise(" = = Heading = = ", cfg) is None
    assert normalise('He earned 1 @,@ 000 dollars ( " a lot " ) , did n\'t he ?', cfg) == (
        'He earned 1,000 dollars ("a lot"), didn\'t he?'
    )


def test_sampling_is_seeded_and_nothing_is_lost(tmp_path, cfg_factory):
    lines = [f"He saw the {i} th bird near his house." for i in range(50)]
    (tmp_path / "c.txt").write_text("\n".join(lines))
    s1, d1, r1 = ingest(cfg_factory, tmp_path / "c.txt", sample_n=10)
    s2, d2, _ = ingest(cfg_factory, tmp_path / "c.txt", sample_n=10)
    assert len(d1) == 10 and list(d1.id) == list(d2.id)
    assert (r1.reason == "not-sampled").sum() == 40
    assert len(d1) + len(r1) == 50


def test_missing_file_and_empty_corpus(tmp_path, cfg_factory):
    with pytest.raises(InputError, match="no such file"):
        ingest(cfg_factory, tmp_path / "nope.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="empty"):
        ingest(cfg_factory, tmp_path / "empty.txt")


def test_undecodable_bytes_name_file_and_line(tmp_path, cfg_factory):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"He went home early today.\nShe said \xff\xfe her name again.\n")
    with pytest.raises(InputError, match=r"bad.txt:2: .*--encoding-errors replace"):
        ingest(cfg_factory, p)
    summary, df, _ = ingest(cfg_factory, p, encoding_errors="replace")
    assert summary["lines_with_replaced_bytes"] == 1
    assert "\ufffd" in df.text.iloc[1]


def test_huge_line_is_rejected_with_reason(tmp_path, cfg_factory):
    p = tmp_path / "big.txt"
    p.write_text("He said hello to his friend today.\n" + "he " * 2_000_000 + "\n")
    summary, df, rej = ingest(cfg_factory, p)
    assert len(df) == 1
    assert list(rej.reason) == ["line-too-long"] and rej.line.iloc[0] == 2
    assert len(rej.text.iloc[0]) <= 200


def test_csv_without_text_column(tmp_path, cfg_factory):
    p = tmp_path / "c.csv"
    p.write_text("sentence,label\nHe went home early.,1\n")
    with pytest.raises(InputError, match=r"c.csv: the header has no column 'text' \(columns: sentence, label\).*--text-column"):
        ingest(cfg_factory, p)
    _, df, _ = ingest(cfg_factory, p, text_column="sentence")
    assert list(df.text) == ["He went home early."]


def test_bad_jsonl_lines_are_counted(tmp_path, cfg_factory):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "He went home early today."}\n{not json}\n{"body": "x"}\n')
    summary, df, rej = ingest(cfg_factory, p)
    assert len(df) == 1
    assert sorted(r.split(":")[0] for r in rej.reason) == ["invalid-json", "missing-text"]
    assert sorted(rej.line) == [2, 3]


def test_csv_with_multiline_field(tmp_path, cfg_factory):
    p = tmp_path / "c.csv"
    p.write_text('text\n"He went home.\nShe stayed with her aunt."\n"The man left."\n')
    _, df, _ = ingest(cfg_factory, p)
    assert list(df.text) == ["He went home.", "She stayed with her aunt.", "The man left."]
    assert list(df.line) == [3, 3, 4]


def test_folder_input(tmp_path, cfg_factory):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("He went home early today.\n")
    (d / "b.jsonl").write_text('{"text": "She stayed with her aunt."}\n')
    (d / "notes.md").write_text("ignored")
    _, df, _ = ingest(cfg_factory, d)
    assert sorted(df.source) == ["a.txt", "b.jsonl"]


def test_known_corpus_from_mirror_with_checksum(tmp_path, cfg_factory, wikitext, monkeypatch):
    """ingest.corpus names a dataset; $CCDA_DATA_DIR (the mirror layout: corpus/<file>) supplies it in place."""
    mirror = wikitext.parents[1]
    monkeypatch.setenv("CCDA_DATA_DIR", str(mirror))
    monkeypatch.delenv("CCDA_DATA_CACHE", raising=False)
    cache = tmp_path / "cache"
    cfg = cfg_factory(ingest={"corpus": "wikitext-2-test", "sample_n": 50},
                      run={"data_cache": str(cache), "run_dir": str(tmp_path / "run")})
    summary = run_ingest(cfg)
    assert summary["rows_out"] == 50 and summary["lines"] == 2891
    assert not cache.exists()  # read in place, nothing copied


def test_known_corpus_checksum_mismatch(tmp_path, cfg_factory, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "corpus").mkdir(parents=True)
    (mirror / "corpus" / "wikitext-2-raw_wiki.test.raw").write_text("tampered\n")
    monkeypatch.setenv("CCDA_DATA_DIR", str(mirror))
    cfg = cfg_factory(ingest={"corpus": "wikitext-2-test"},
                      run={"data_cache": str(tmp_path / "cache"), "run_dir": str(tmp_path / "run")})
    with pytest.raises(InputError, match=r"wikitext-2-raw_wiki.test.raw: SHA-256 [0-9a-f]{64}, but dataset "
                                         r"'wikitext-2-test' expects 4f3e42.*ccda data fetch wikitext-2-test"):
        run_ingest(cfg)
    assert not (tmp_path / "run" / "ingest").exists()


def test_unknown_corpus(cfg_factory):
    with pytest.raises(InputError, match="Known: wikitext-2-test, news-commentary-v15"):
        run_ingest(cfg_factory(ingest={"corpus": "nope"}))
