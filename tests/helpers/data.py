"""Benchmark data for tests, found the way users find it: by dataset name through the resolver
(:mod:`context_cda.data.datasets`: the mirror named by ``$CCDA_DATA_DIR``, then the data cache), never by a path."""

from __future__ import annotations

from pathlib import Path


def mirrored(name: str) -> Path | None:
    """The local file or folder of dataset ``name`` when the mirror or the data cache holds it (checked against its
    checksums; nothing is downloaded), else None (a test then skips or uses its fixture)."""
    from context_cda.data import datasets as D

    ds = D.get(name)
    root = D.find(ds)
    return None if root is None else ds.location(root)


SKIP_REASON = "dataset {} not in $CCDA_DATA_DIR or the data cache (set CCDA_DATA_DIR to a mirror folder)"
