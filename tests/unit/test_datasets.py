"""Datasets by name (context_cda.data.datasets): the registry is pinned and checksummed, and a dataset is found in the
documented order (explicit path > $CCDA_DATA_DIR > the data cache > the download), checksums checked everywhere,
nothing half written. No test touches the network: the downloader is replaced."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path

import pytest

from context_cda.cli import main
from context_cda.data import datasets
from context_cda.data.datasets import Archive, DataFile, Dataset, check, fetch, resolve
from context_cda.errors import InputError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


A, B = b"alpha\n", b"bravo\n"


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No mirror, a private cache, and a downloader that serves ``served`` (url -> bytes) and records calls."""
    monkeypatch.delenv("CCDA_DATA_DIR", raising=False)
    monkeypatch.setenv("CCDA_DATA_CACHE", str(tmp_path / "cache"))
    served: dict[str, bytes] = {}
    calls: list[str] = []

    def fake(url, dest):
        calls.append(url)
        if url not in served:
            raise ConnectionError("network disabled in tests")
        dest.write_bytes(served[url])

    monkeypatch.setattr(datasets, "_download", fake)
    return served, calls


def register(monkeypatch, ds: Dataset) -> Dataset:
    monkeypatch.setitem(datasets.DATASETS, ds.name, ds)
    return ds


def folder_ds(sha_a: str | None = sha(A), sha_b: str | None = sha(B)) -> Dataset:
    return Dataset("toy", "toys/words", "words", "a toy folder dataset", "example/repo@0", (
        DataFile("a.txt", sha_a, "https://example.org/0123456789abcdef0123456789abcdef01234567/a.txt"),
        DataFile("sub/b.txt", sha_b, "https://example.org/0123456789abcdef0123456789abcdef01234567/b.txt"),
    ))


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


# ------------------------------------------------------------------------------------------------ the registry


def test_every_download_is_pinned_and_checksummed():
    """GitHub files at a commit (40 hex digits, never a branch), release files by their versioned names; every
    file has a SHA-256, or comes from an archive that has one, or is named here as pinned at its download."""
    unpublished = set()
    for ds in datasets.DATASETS.values():
        assert not ds.path.startswith(("/", "..")) and ".." not in Path(ds.path).parts, ds.name
        for f in ds.files:
            url = f.archive.url if f.archive else f.url
            assert url and url.startswith("https://"), (ds.name, url)
            if "raw.githubusercontent.com" in url:
                assert re.match(r"https://raw.githubusercontent.com/[^/]+/[^/]+/[0-9a-f]{40}/", url), url
            for digest in (f.sha256, f.archive.sha256 if f.archive else None):
                assert digest is None or re.fullmatch(r"[0-9a-f]{64}", digest), (ds.name, f.rel)
            if not f.sha256 and not (f.archive and f.archive.sha256):
                unpublished.add(ds.name)
    # no published checksum exists for these; their checksums are pinned at the first download (docs/data.md)
    assert unpublished == {"news-commentary-v15", "stereoset-json", "biasbios"}
    branch = [f.url for d in datasets.DATASETS.values() for f in d.files if f.url and "/resolve/main/" in f.url]
    assert all("LabHC/bias_in_bios" in u for u in branch)  # the hub names no release of it (docs/data.md)


def test_the_registry_matches_the_benchmark_mirror(shared_data):
    """Every dataset the workspace's benchmark folder holds passes its checksums there (that is where the
    published SHA-256 values of the registry were computed and cross-checked)."""
    present = [ds for ds in datasets.DATASETS.values() if datasets._present(ds, shared_data)]
    assert {"wikitext-2-test", "stereoset", "crows-pairs", "gender-words", "nli-bias-words", "sts-b-gender-bias",
            "glue-sst2", "glue-rte", "glue-qnli", "stsb", "biasbios-samples"} <= {ds.name for ds in present}
    for ds in present:
        statuses = {c.status for c in check(ds, shared_data)}
        assert statuses <= {"ok", "optional-missing"}, (ds.name, statuses)


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(InputError, match=r"unknown dataset 'nope'; known: wikitext-2-test, .*crows-pairs"):
        resolve("nope")


# ------------------------------------------------------------------------------------------------ the order


def test_download_into_the_cache_once_then_from_the_cache(monkeypatch, tmp_path, isolated):
    served, calls = isolated
    ds = register(monkeypatch, folder_ds())
    served.update({f.url: data for f, data in zip(ds.files, (A, B), strict=True)})
    got = resolve("toy")
    assert got == tmp_path / "cache" / "toys" / "words" and (got / "sub" / "b.txt").read_bytes() == B
    assert len(calls) == 2
    assert resolve("toy") == got and len(calls) == 2  # cached: no second download
    assert leftovers(tmp_path / "cache") == ["toys/words/a.txt", "toys/words/sub/b.txt"]  # no temporary files


def test_mirror_before_cache_and_explicit_before_both(monkeypatch, tmp_path):
    ds = register(monkeypatch, folder_ds())
    for root in (tmp_path / "mirror", tmp_path / "cache"):
        (root / "toys" / "words" / "sub").mkdir(parents=True)
        (root / "toys" / "words" / "a.txt").write_bytes(A)
        (root / "toys" / "words" / "sub" / "b.txt").write_bytes(B)
    assert resolve("toy") == tmp_path / "cache" / "toys" / "words"
    monkeypatch.setenv("CCDA_DATA_DIR", str(tmp_path / "mirror"))
    assert resolve("toy") == ds.location(tmp_path / "mirror")
    assert resolve("toy", tmp_path / "elsewhere") == tmp_path / "elsewhere"  # explicit: taken as given
    (tmp_path / "mirror" / "toys" / "words" / "a.txt").write_bytes(b"tampered\n")
    with pytest.raises(InputError, match=r"a.txt: SHA-256 [0-9a-f]{64}, but dataset 'toy' expects "
                                         rf"{sha(A)} \(a changed or truncated copy in \$CCDA_DATA_DIR="):
        resolve("toy")


def test_an_incomplete_mirror_falls_through_and_is_named(monkeypatch, tmp_path):
    register(monkeypatch, folder_ds())
    (tmp_path / "mirror" / "toys" / "words").mkdir(parents=True)
    (tmp_path / "mirror" / "toys" / "words" / "a.txt").write_bytes(A)
    monkeypatch.setenv("CCDA_DATA_DIR", str(tmp_path / "mirror"))
    with pytest.raises(InputError) as e:
        resolve("toy", key="evaluate.toy_path")
    msg = str(e.value)
    assert msg.startswith("dataset 'toy' (a toy folder dataset) not found. Looked at: (1) evaluate.toy_path: not set; ")
    assert "(2) $CCDA_DATA_DIR: " + str(tmp_path / "mirror" / "toys" / "words") + " is incomplete (no sub/b.txt)" in msg
    assert "(3) the data cache: " + str(tmp_path / "cache" / "toys" / "words") + " is missing" in msg
    assert "(4) download https://example.org/" in msg and "network disabled in tests" in msg
    assert "`ccda data fetch toy`" in msg and "set CCDA_DATA_DIR=DIR" in msg and "set evaluate.toy_path" in msg
    assert "\n" not in msg and leftovers(tmp_path / "cache") == [] and not (tmp_path / "cache" / "toys").exists()


def test_a_bad_download_keeps_nothing(monkeypatch, tmp_path, isolated):
    served, _ = isolated
    ds = register(monkeypatch, folder_ds())
    served.update({ds.files[0].url: A, ds.files[1].url: b"truncated"})
    with pytest.raises(InputError, match=r"b.txt: the download's SHA-256 is [0-9a-f]{64}, but dataset 'toy' expects"):
        resolve("toy")
    assert leftovers(tmp_path / "cache") == ["toys/words/a.txt"]  # the good file stays, the bad one never lands
    served[ds.files[1].url] = B
    assert (resolve("toy") / "sub" / "b.txt").read_bytes() == B  # the next call fetches only what is missing


def test_unpublished_checksums_are_pinned_at_the_download(monkeypatch, tmp_path, isolated):
    served, _ = isolated
    ds = register(monkeypatch, folder_ds(sha_a=None, sha_b=None))
    served.update({ds.files[0].url: A, ds.files[1].url: B})
    root = resolve("toy")
    pins = (tmp_path / "cache" / ".pins" / "toy.sha256").read_text()
    assert pins == f"{sha(A)}  toys/words/a.txt\n{sha(B)}  toys/words/sub/b.txt\n"
    assert {c.status for c in check(ds, tmp_path / "cache")} == {"pinned"}
    (root / "a.txt").write_bytes(b"changed\n")
    with pytest.raises(InputError, match=r"a.txt: SHA-256 .* expects " + sha(A)):
        resolve("toy")


def test_a_file_is_pinned_as_soon_as_it_lands_even_when_a_later_one_fails(monkeypatch, tmp_path, isolated):
    served, calls = isolated
    ds = register(monkeypatch, folder_ds(sha_a=None, sha_b=None))
    served[ds.files[0].url] = A  # the second file's download fails (not served)
    with pytest.raises(InputError, match=r"dataset 'toy' .* not found.*b.txt"):
        resolve("toy")
    cache = tmp_path / "cache"
    assert calls == [ds.files[0].url, ds.files[1].url]
    assert leftovers(cache) == [".pins/toy.sha256", "toys/words/a.txt"]
    assert (cache / ".pins" / "toy.sha256").read_text() == f"{sha(A)}  toys/words/a.txt\n"
    assert [c.status for c in check(ds, cache)] == ["pinned", "missing"]
    (cache / "toys" / "words" / "a.txt").write_bytes(b"changed\n")  # the landed file is checked from now on
    assert [c.status for c in check(ds, cache)] == ["mismatch", "missing"]


def test_an_archive_member_is_pinned_when_a_later_member_is_missing(monkeypatch, tmp_path, isolated):
    served, _ = isolated
    blob = _zip({"pkg/a.txt": A})
    archive = Archive("https://example.org/release-2.0.zip", sha(blob))
    register(monkeypatch, Dataset("arch2", "arch2", "benchmark", "an archive dataset", "release 2.0", (
        DataFile("a.txt", None, archive=archive, member="pkg/a.txt"),
        DataFile("b.txt", None, archive=archive, member="pkg/b.txt"),
    )))
    served[archive.url] = blob
    with pytest.raises(InputError, match="not the expected archive"):
        resolve("arch2")
    cache = tmp_path / "cache"
    assert leftovers(cache) == [".pins/arch2.sha256", "arch2/a.txt"]
    assert (cache / ".pins" / "arch2.sha256").read_text() == f"{sha(A)}  arch2/a.txt\n"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_archive_members_are_extracted_and_checked(monkeypatch, tmp_path, isolated):
    served, calls = isolated
    blob = _zip({"pkg/a.txt": A, "pkg/b.txt": B})
    archive = Archive("https://example.org/release-1.0.zip", sha(blob))
    ds = register(monkeypatch, Dataset("arch", "arch", "benchmark", "an archive dataset", "release 1.0", (
        DataFile("a.txt", sha(A), archive=archive, member="pkg/a.txt"),
        DataFile("b.txt", None, archive=archive, member="pkg/b.txt"),
        DataFile("big.txt", None, archive=Archive("https://example.org/big.zip", None), member="x", optional=True),
    )))
    served[archive.url] = blob
    root = resolve("arch")
    assert (root / "a.txt").read_bytes() == A and (root / "b.txt").read_bytes() == B and not (root / "big.txt").exists()
    assert calls.count(archive.url) == 1  # one download for both members; the optional archive failed quietly
    assert leftovers(tmp_path / "cache") == [".pins/arch.sha256", "arch/a.txt", "arch/b.txt"]
    served[archive.url] = _zip({"pkg/a.txt": A, "pkg/b.txt": B, "extra": b""})  # a changed archive
    (root / "a.txt").unlink()
    with pytest.raises(InputError, match=r"release-1.0.zip: the download's SHA-256 .* expects " + sha(blob)):
        resolve("arch")
    assert not (root / "a.txt").exists() and not [p for p in root.parent.rglob(".download-*")]
    assert ds.checksums == "mixed"


# ------------------------------------------------------------------------------------------------ fetch / verify / list


def test_fetch_into_a_mirror_copies_or_downloads(monkeypatch, tmp_path, isolated):
    served, calls = isolated
    ds = register(monkeypatch, folder_ds())
    served.update({ds.files[0].url: A, ds.files[1].url: B})
    root, how = fetch(ds, tmp_path / "mirror")
    assert (root, how) == (tmp_path / "mirror", "downloaded") and len(calls) == 2
    assert not (tmp_path / "cache").exists()  # straight into the mirror, no second copy
    assert fetch(ds, tmp_path / "mirror")[1] == "already there"
    root2, how2 = fetch(ds, tmp_path / "mirror2")
    assert how2 == "downloaded"  # nothing in the cache or $CCDA_DATA_DIR to copy from
    monkeypatch.setenv("CCDA_DATA_DIR", str(tmp_path / "mirror"))
    assert fetch(ds, tmp_path / "pvc")[1] == f"copied from {tmp_path / 'mirror'}" and len(calls) == 4
    assert {c.status for c in check(ds, tmp_path / "pvc")} == {"ok"}


def test_data_commands(monkeypatch, tmp_path, isolated, capsys):
    served, _ = isolated
    ds = register(monkeypatch, folder_ds())
    served.update({ds.files[0].url: A, ds.files[1].url: B})
    assert main(["data", "fetch", "toy", "--to", str(tmp_path / "mirror")]) == 0
    assert f"toy: downloaded -> {tmp_path / 'mirror' / 'toys' / 'words'}" in capsys.readouterr().out
    assert main(["data", "verify", "toy", "--dir", str(tmp_path / "mirror")]) == 0
    assert capsys.readouterr().out.count("toy: ok") == 2
    (tmp_path / "mirror" / "toys" / "words" / "a.txt").write_bytes(b"x")
    assert main(["data", "verify", "toy", "--dir", str(tmp_path / "mirror")]) == 2
    out = capsys.readouterr()
    assert "toy: mismatch" in out.out and "1 file(s) missing or changed" in out.err
    assert main(["data", "fetch", "crows-pairs", "--to", str(tmp_path / "m3")]) == 2
    assert "crows-pairs: FAILED: dataset 'crows-pairs'" in capsys.readouterr().err


def test_data_list_shows_what_a_profile_reads_and_where(data_mirror, capsys):
    assert main(["data", "list", "--profile", "demo"]) == 0
    out = capsys.readouterr().out
    assert f"mirror ($CCDA_DATA_DIR): {data_mirror}" in out
    assert f"found: mirror: {data_mirror / 'crows_pairs' / 'crows_pairs_anonymized.csv'}" in out
    assert "stereoset [stereoset, next-token, decontaminate]" in out and "biasbios-samples [biasbios]" in out
    assert "winobias [winobias, decontaminate]" in out  # the benchmarks no training text may hold
    assert "found: explicit evaluate.nli_bias.train_path=configs/data/nli-demo" in out
    demo = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    assert "../shared" not in demo.read_text()  # configs name datasets, not paths
    assert main(["data", "verify", "--profile", "demo"]) == 0
    capsys.readouterr()
    assert main(["data", "list", "--profile", "tiny"]) == 0  # explicit paths only (ingest.corpus: path)
    assert "found: explicit ingest.path=tests/fixtures/corpus/tiny_corpus.txt" in capsys.readouterr().out
    assert main(["data", "fetch", "--profile", "tiny"]) == 0
    assert "nothing to fetch" in capsys.readouterr().out


def test_the_data_doc_lists_every_dataset():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "data.md").read_text()
    rows = set(re.findall(r"^\| `([a-z0-9-]+)` \| `([^`]+)`", doc, flags=re.M))
    assert {name for name, _ in rows} == set(datasets.DATASETS)
    for name, path in rows:  # the documented mirror path starts with the registry's
        assert path.startswith(datasets.DATASETS[name].path), (name, path)


def test_s3_uris_survive_path_objects_and_refuse_escaping_keys():
    from context_cda.data import s3
    from context_cda.models import parse_ref

    assert s3.is_s3(Path("s3://b/k/x.txt")) and s3.normalise(Path("s3://b/k/x.txt")) == "s3://b/k/x.txt"
    assert s3.split("s3://bucket/a/b.txt") == ("bucket", "a/b.txt") and s3.split("s3://bucket") == ("bucket", "")
    assert s3.join("s3://b/mirror/", "corpus/", "x.raw") == "s3://b/mirror/corpus/x.raw"
    with pytest.raises(InputError, match="no bucket name"):
        s3.split("s3:///key")
    assert s3._relative("models/tg/", "models/tg/sub/config.json") == "sub/config.json"
    with pytest.raises(InputError, match="not a plain path"):
        s3._relative("models/tg/", "models/tg/../../etc/passwd")
    ref = parse_ref("s3://bucket/models/tg/")
    assert (ref.kind, ref.location, ref.name) == ("s3", "s3://bucket/models/tg/", "tg")
    assert not s3.is_s3("/data/s3-like/file") and not s3.is_s3("models/s3:/x")
