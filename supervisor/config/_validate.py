"""Structural checks of single fields, and how their errors are collected.

The checks themselves are :mod:`supervisor.config._fields` (the fault plans use them too),
re-exported here for the config's modules; what is the config's own — a server URL's
problems — is defined here.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlsplit

from ._fields import (
    _Bad,
    _bool,
    _choice,
    _closest,
    _Errors,
    _fields,
    _fraction,
    _int,
    _join,
    _kind,
    _nonempty,
    _number,
    _object,
    _parse_object,
    _seconds,
    _str,
    _str_list,
    _unknown_field,
    _want,
    _within,
)
from ._model import ServerType

__all__ = [
    "_Bad",
    "_bool",
    "_choice",
    "_closest",
    "_Errors",
    "_fields",
    "_fraction",
    "_int",
    "_join",
    "_kind",
    "_nonempty",
    "_number",
    "_object",
    "_parse_object",
    "_seconds",
    "_str",
    "_str_list",
    "_unknown_field",
    "_want",
    "_within",
    "_split_url",
    "_url_problem",
    "_as_fields",
]


def _as_fields(got: dict[str, object]) -> dict[str, Any]:
    """``got`` — attribute name to value, each as its field's parser returned it — as the
    keyword arguments of the value it builds: each value is of its field's type."""
    return got


def _split_url(url: str) -> SplitResult:
    """``urlsplit(url)``; ``_Bad`` (not quoting the URL) for one it refuses: an unclosed
    IPv6 ``[``, or a host with characters that NFKC normalisation turns into separators."""
    try:
        return urlsplit(url)
    except ValueError:
        raise _Bad("URL is malformed (an invalid host or IPv6 address)") from None


def _url_problem(url: str, type_: ServerType) -> str | None:
    """Why ``url`` cannot be used for a server of this type, or ``None``. Never quotes it."""
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "URL contains whitespace or control characters"
    try:
        parts = _split_url(url)
    except _Bad as exc:
        return str(exc)
    schemes = ("ws", "wss") if type_ is ServerType.WS else ("http", "https")
    if parts.scheme.lower() not in schemes:
        return f"URL must start with {schemes[0]}:// or {schemes[1]}://"
    if "@" in parts.netloc:
        return (
            "credentials in the URL are refused (they would end up in logs and process "
            'listings); send them in "headers" (e.g. Authorization) or configure "auth"'
        )
    if not parts.hostname:
        return "URL has no host"
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        return "URL has an invalid port"
    return None
