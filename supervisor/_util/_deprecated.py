"""Requests the MCP SDK deprecates, made on purpose without its warning.

The 2026-07-28 protocol deprecates logging, sampling and roots (SEP-2577) and drops
``ping``; the supervisor still uses them with the session-based servers and clients that
have them,
and nothing a client or server sends should print a Python warning. The SDK warns when
such a request is *made* (its ``@deprecated`` wraps the coroutine function), not while
it is awaited, so :func:`on_purpose` silences the warning around the making alone:
``warnings.catch_warnings`` changes the whole process's filters, and under trio another
task may run at any checkpoint — there is none inside. Imports nothing of the package.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import TypeVar

from mcp.shared.exceptions import MCPDeprecationWarning

_T = TypeVar("_T")


def on_purpose(
    function: Callable[..., Awaitable[_T]], *args: object, **kwargs: object
) -> Awaitable[_T]:
    """``function(*args, **kwargs)`` — a deprecated SDK coroutine function — called with
    its ``MCPDeprecationWarning`` ignored; await what it returns outside. Only the function
    called here is covered: one whose body calls another deprecated function warns then,
    while awaited (call that inner one instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return function(*args, **kwargs)
