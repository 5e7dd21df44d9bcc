"""The ``_meta`` key a failed call's error travels under as data (a gateway's tool error),
and the one reading of it, in a module of its own: the command line reads a running
gateway's answer without loading the supervisor's error tree. The data is written by
:func:`~supervisor.tools._outcome.error_meta`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The ``_meta`` key of a failed call's error, as data (:func:`error_in`).
ERROR_META = "mcp-supervisor/error"

__all__ = ["ERROR_META", "error_in"]


def error_in(meta: object) -> dict[str, Any] | None:
    """The error a tool result's ``meta`` (its ``_meta``, as JSON) says the call failed
    with — ``type``, ``server``, ``effect`` and the fields of its kind, as
    :func:`~supervisor.tools._outcome.error_data` writes them — or ``None`` if it says
    none (the tool's own result)."""
    if not isinstance(meta, Mapping):
        return None
    error = meta.get(ERROR_META)
    return error if isinstance(error, dict) else None
