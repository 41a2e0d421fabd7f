"""Expectations at the neutral boundary (the neutral step's rewrites): the augment boundary's suite
(:mod:`.augment`) with the neutral rewrite's review, so a quarantined row names what the review names
(``gendered-word-left``, ``content-missing``, ...), and ``attempts`` within 1..1+ the neutral step's retries."""

from __future__ import annotations

from typing import Any

from . import augment as _augment

BOUNDARY = "neutral"
COLUMNS = _augment.COLUMNS


def prepare(df: Any, config: Any) -> Any:
    return _augment.prepare(df, config, task="neutral")


def checks(config: Any) -> list[Any]:
    return _augment.checks(config, task="neutral")


def row_checks(df: Any, config: Any) -> Any:
    return _augment.row_checks(df, config, task="neutral")
