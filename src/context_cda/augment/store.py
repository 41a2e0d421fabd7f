"""Resumable, exactly-once result storage and the content-addressed generation cache.

``ShardStore``: results are appended as small Parquet shards (each written atomically: temp file + rename), one
row per finished item with its ``item_key`` (a hash of the input row and every setting that affects the result).
A killed run leaves whole shards only; the next run reads them, skips every item whose key has a final row
(accepted or rejected) and processes the rest. An advisory lock stops two runs writing the same folder.

``GenerationCache``: ``key -> GenerationResult`` as small JSON files, addressed by the hash of (backend, model,
conversation, sampling parameters incl. seed). A rerun with the same settings, or a run in a fresh folder that
shares the cache, costs no generation. Failed generations are never cached.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..generation.base import Conversation, GenerationResult, SamplingParams
from ..io import file_lock, json_hash, write_table, write_text
from ..layout import LOCK_FILE

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def cache_key(backend: str, model: str, messages: Conversation, params: SamplingParams) -> str:
    return json_hash({"backend": backend, "model": model, "messages": messages, "params": params.to_dict()})


class GenerationCache:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> GenerationResult | None:
        p = self._path(key)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, OSError):
            self.misses += 1
            return None
        self.hits += 1
        return GenerationResult.from_dict(data)

    def put(self, key: str, result: GenerationResult) -> None:
        if result.error is None:
            write_text(self._path(key), json.dumps(result.to_dict(), ensure_ascii=False))


class ShardStore:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._seq = 0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's lock (:func:`context_cda.io.file_lock`: released by the OS if the process dies, a
        second process is refused naming the holder); leftovers of a killed write are removed first."""
        with file_lock(self.root / LOCK_FILE, "augment"):
            for tmp in self.root.glob(".*.tmp"):  # leftovers of a killed write
                tmp.unlink(missing_ok=True)
            yield

    def shards(self) -> list[Path]:
        return sorted(self.root.glob("shard-*.parquet"))

    def read(self) -> pd.DataFrame:
        import pandas as pd

        files = self.shards()
        if not files:
            return pd.DataFrame()
        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)

    def append(self, rows: list[dict[str, Any]]) -> Path | None:
        import pandas as pd

        if not rows:
            return None
        self._seq += 1
        name = f"shard-{time.time_ns():020d}-{os.getpid()}-{self._seq:05d}.parquet"
        return write_table(pd.DataFrame(rows), self.root / name)
