"""s3.download_tree into a shared cache (parallel shards on one volume): a folder that is already there (its name
is keyed by the objects' ETags, so it holds the same objects) is kept, never swapped out from under a sibling
reading it, and two pods finishing at once is no error. The S3 client is a stand-in with ``download_file`` only
(what download_tree calls); the real server is exercised in tests/services/test_s3.py."""

from __future__ import annotations

import os
from pathlib import Path

from context_cda import io as ccda_io
from context_cda.data import s3

OBJECTS = {"models/tg/config.json": b"{}\n", "models/tg/sub/weights.bin": b"\x00\x01\x02"}


class FakeClient:
    def __init__(self, body: dict[str, bytes]):
        self.body, self.calls = body, 0

    def download_file(self, bucket: str, key: str, path: str) -> None:
        self.calls += 1
        Path(path).write_bytes(self.body[key])


def listing() -> list[s3.Obj]:
    return [s3.Obj(k, f"etag-{i}", len(v)) for i, (k, v) in enumerate(sorted(OBJECTS.items()))]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_second_download_into_an_existing_folder_keeps_it(tmp_path):
    dest = tmp_path / "cache" / "s3-tg-abc"
    s3.download_tree("s3://b/models/tg/", dest, listing(), FakeClient(OBJECTS))
    assert tree(dest) == {"config.json": b"{}\n", "sub/weights.bin": b"\x00\x01\x02"}
    inode, held = dest.stat().st_ino, (dest / "config.json").open("rb")  # a sibling pod reading it
    try:
        again = s3.download_tree("s3://b/models/tg/", dest, listing(), FakeClient(OBJECTS))
        assert again == dest and dest.stat().st_ino == inode  # the same folder, not a replacement
        assert (dest / "config.json").exists() and held.read() == b"{}\n"
    finally:
        held.close()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["s3-tg-abc"]  # the second copy was dropped


def test_two_pods_finishing_at_once_is_no_error(tmp_path, monkeypatch):
    """The sibling's folder appears between the existence check and the rename: os.replace of a folder onto a
    non-empty one raises ENOTEMPTY; download_tree keeps the sibling's folder and drops its own copy."""
    dest = tmp_path / "cache" / "s3-tg-abc"
    real = os.replace
    sibling: list[int] = []
    racing_now = [True]

    def racing(src, dst):
        if Path(dst) == dest and racing_now:
            racing_now.clear()
            s3.download_tree("s3://b/models/tg/", dest, listing(), FakeClient(OBJECTS))  # the sibling wins
            sibling.append(dest.stat().st_ino)
        return real(src, dst)

    monkeypatch.setattr(ccda_io.os, "replace", racing)
    assert s3.download_tree("s3://b/models/tg/", dest, listing(), FakeClient(OBJECTS)) == dest
    assert sibling and dest.stat().st_ino == sibling[0]
    assert tree(dest) == {"config.json": b"{}\n", "sub/weights.bin": b"\x00\x01\x02"}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["s3-tg-abc"]
