"""Errors a user can act on. The CLI prints them as one message (never a traceback) and exits non-zero."""

from __future__ import annotations


class CCDAError(Exception):
    """Base class: the message says what went wrong, where (file, line, row, key) and how to fix it."""

    exit_code = 2


class ConfigError(CCDAError):
    """A config file or flag has an unknown key or a bad value."""


class InputError(CCDAError):
    """An input file is missing, empty, undecodable or has the wrong shape."""


class ModelError(CCDAError):
    """A model reference cannot be resolved or loaded."""


class ServiceError(CCDAError):
    """A server (generation, tracking) is unreachable or answers with an error we cannot retry."""
