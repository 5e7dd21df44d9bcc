"""Which config values are secret, and how a config is shown without them.

A value is secret by its *name*: a variable, header, option or query parameter whose name
contains TOKEN, KEY, SECRET, PASSWORD, PASS, AUTH, CREDENTIAL, PRIVATE, COOKIE or SESSION,
or is PAT. This module finds such values and masks them as ``***`` for display
(:func:`masked_url`, :func:`command_line`, ``repr()`` of the config structs); which values a
config registers for log redaction is :meth:`Config.secrets`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import msgspec


class _Launch(Protocol):
    """What :func:`command_line` shows of a server (a ``ServerConfig``)."""

    command: str | None
    args: Sequence[str]


_SECRET_WORDS = (
    "TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "AUTH", "CREDENTIAL",
    "PRIVATE", "COOKIE", "SESSION",
)  # fmt: skip


def _secretish(name: str) -> bool:
    """Whether a variable, header, option or parameter name suggests a secret value."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper()
    for word in re.split(r"[^A-Z0-9]+", words):
        if word == "PAT" or any(w in word for w in _SECRET_WORDS):
            return True
    return False


def _secret_options(args: Sequence[str]) -> Iterator[tuple[int, str, str]]:
    """Where the values of secret-looking options are: ``(index, prefix, value)``.

    ``--token=X`` gives the option's own index and the prefix ``--token=``; ``--token X``
    gives the next argument's index and an empty prefix. An option followed by another
    option (or by nothing) has no value.
    """
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        option, sep, value = arg.partition("=")
        if not _secretish(option.lstrip("-")):
            continue
        if sep:
            yield i, f"{option}=", value
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield i + 1, "", args[i + 1]


def _mask_args(args: Sequence[str]) -> list[str]:
    """``args`` with the values of secret-looking options replaced by ``***``."""
    masked = list(args)
    for i, prefix, _ in _secret_options(args):
        masked[i] = f"{prefix}***"
    return masked


def _secret_args(args: Sequence[str]) -> list[str]:
    """Values given to secret-looking options: ``--token X`` or ``--api-key=X``."""
    return [value for _, _, value in _secret_options(args)]


def _query(url: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(urlsplit(url).query, keep_blank_values=False)
    except ValueError:
        return []


def masked_url(url: str) -> str:
    """``url`` with the values of secret-looking query parameters replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # one urlsplit refuses (an unclosed IPv6 "[", say): mask all its query
        base, sep, _ = url.partition("?")
        return f"{base}?***" if sep else url
    if not parts.query:
        return url
    query = "&".join(
        f"{k}=***" if _secretish(k) and v else (f"{k}={v}" if v else k)
        for k, v in (q.partition("=")[::2] for q in parts.query.split("&"))
    )
    return urlunsplit(parts._replace(query=query))


def command_line(server: _Launch) -> str:
    """The server's command line for display, secret-looking arguments masked."""
    words = [shlex.quote(server.command or "")]
    words += [a if a.endswith("***") else shlex.quote(a) for a in _mask_args(server.args)]
    return " ".join(words)


def _masked_repr(struct: msgspec.Struct, masked_fields: set[str]) -> str:
    parts: list[str] = []
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if name in masked_fields and isinstance(value, Mapping):
            value = {k: "***" for k in value}
        elif name in masked_fields and value is not None:
            value = "***"
        elif name == "url" and isinstance(value, str):
            value = masked_url(value)
        elif name == "args":
            value = tuple(_mask_args(value))
        parts.append(f"{name}={value!r}")
    return f"{type(struct).__name__}({', '.join(parts)})"
