"""io.atomic_dir: a folder appears whole or not at all; with replace=False a sibling that got there first wins."""

from __future__ import annotations

import os

import pytest

from context_cda.io import atomic_dir


def test_keep_existing_when_a_sibling_finishes_between_the_check_and_the_rename(tmp_path, monkeypatch):
    dest = tmp_path / "cache" / "model-abc"
    real_replace = os.replace

    def sibling_first(src, dst):  # the sibling's rename lands just before ours
        if str(dst) == str(dest) and not dest.exists():
            dest.mkdir()
            (dest / "w.bin").write_text("sibling")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", sibling_first)
    with atomic_dir(dest, replace=False) as tmp:
        (tmp / "w.bin").write_text("ours")
    assert (dest / "w.bin").read_text() == "sibling"
    assert [p.name for p in dest.parent.iterdir()] == ["model-abc"]  # no temporary folder left


def test_replace_true_still_raises_on_a_rename_race(tmp_path, monkeypatch):
    dest = tmp_path / "out"
    real_replace = os.replace

    def sibling_first(src, dst):
        if str(dst) == str(dest) and not dest.exists():
            dest.mkdir()
            (dest / "x").write_text("sibling")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", sibling_first)
    with pytest.raises(OSError), atomic_dir(dest) as tmp:
        (tmp / "x").write_text("ours")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
