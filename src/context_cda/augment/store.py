"""The content-addressed generation cache (the resumable result shards are the item engine's:
:mod:`context_cda.items`).

``GenerationCache``: ``key -> GenerationResult`` as small JSON files, addressed by the hash of (backend, model,
conversation, sampling parameters incl. seed). A rerun with the same settings, or a run in a fresh folder that
shares the cache, costs no generation. Failed generations are never cached.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..generation.base import Conversation, GenerationResult, SamplingParams
from ..io import json_hash, write_text


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
