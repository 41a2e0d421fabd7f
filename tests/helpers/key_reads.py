"""Which config keys a step reads: a run's config instrumented so that every read of a setting is recorded under the
step the envelope is running (context_cda.steps.run), for comparing with the keys the stage table declares.

A read is a leaf setting's attribute access (``config.train.epochs`` -> ``train.epochs``), or a whole section's use
(``config.evaluate.model_dump()`` / ``model_copy()`` -> ``evaluate``). Copies the stage makes (a narrowed
``EvaluateConfig``) are not followed: their reads are covered by the copy's own record.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from context_cda import stages
from context_cda.config import Section

READS: dict[str, set[str]] = defaultdict(set)
_PATHS: dict[int, str] = {}
_CURRENT: list[str] = []


def _walk(model: BaseModel, path: str) -> None:
    _PATHS[id(model)] = path
    for name in type(model).model_fields:
        value = model.__dict__.get(name)
        if isinstance(value, BaseModel):
            _walk(value, f"{path}.{_key(name)}" if path else _key(name))


def _key(field: str) -> str:
    return "validate" if field == "validate_" else field  # the config key is the field's alias


def _record(path: str) -> None:
    if _CURRENT and path:
        READS[_CURRENT[-1]].add(path)


@contextlib.contextmanager
def recording(config) -> Iterator[dict[str, set[str]]]:
    """Record, per row of the stage table, the config keys its stage function reads when a door runs it with
    ``config`` (the envelope's own reads - keys, views, the input check - are not the stage's)."""
    _walk(config, "")
    get, dump, copy, stage = Section.__getattribute__, Section.model_dump, Section.model_copy, stages.get_stage

    def getattribute(self, name: str) -> Any:
        value = get(self, name)
        path = _PATHS.get(id(self))
        if path is not None and name in type(self).model_fields and not isinstance(value, BaseModel):
            _record(f"{path}.{_key(name)}" if path else _key(name))
        return value

    def model_dump(self, *a, **k):
        _record(_PATHS.get(id(self), ""))
        return dump(self, *a, **k)

    def model_copy(self, *a, **k):
        _record(_PATHS.get(id(self), ""))
        return copy(self, *a, **k)

    def get_stage(name: str):
        fn = stage(name)

        def body(*a, **k):
            _CURRENT.append(name)
            try:
                return fn(*a, **k)
            finally:
                _CURRENT.pop()

        return body

    Section.__getattribute__, Section.model_dump, Section.model_copy = getattribute, model_dump, model_copy
    stages.get_stage = get_stage
    try:
        yield READS
    finally:
        Section.__getattribute__, Section.model_dump, Section.model_copy = get, dump, copy
        stages.get_stage = stage


def covered(read: str, declared: list[str]) -> bool:
    """``read`` is one of ``declared``, inside one, or a container of one (``run.targets`` for
    ``run.targets.gpt2``: which entry was read is not recorded)."""
    return any(read == d or read.startswith(d + ".") or d.startswith(read + ".") for d in declared)
