"""Which config values are secret, and how a config is shown without them.

A value is secret by its *name*: a variable, header, option or query parameter whose name
contains TOKEN, KEY, SECRET, PASSWORD, PASS, AUTH, CREDENTIAL, PRIVATE, COOKIE or SESSION,
or is PAT — or by what it is: a header's value, a password in a URL's user-info
(``postgres://me:PASSWORD@db``), what ``${NAME}`` with such a name expanded to, a value
``add --env KEY`` asked for (its env files in ``.mcp-supervisor/``). A value is
never secret by its length or its look: a path or a setting is shown. This module finds
such values and masks them as ``***`` for display (:func:`masked_url`,
:func:`masked_database_url` for a token store's, :func:`command_line`, ``repr()`` of the
config structs); which values a config registers for log redaction is
:meth:`~supervisor.config.Config.secrets`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol, cast
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import msgspec


class _Launch(Protocol):
    """What :func:`command_line` shows of a server (a ``ServerConfig``), read only."""

    @property
    def command(self) -> str | None: ...

    @property
    def args(self) -> Sequence[str]: ...

    @property
    def secret_values(self) -> Sequence[str]: ...


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


#: ``scheme://user:PASSWORD@``: a URL's user-info with a password, anywhere in a value.
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:([^\s/?#@]+)@")


def _url_passwords(value: str) -> list[str]:
    """The passwords of the URLs in ``value`` that carry one in their user-info."""
    return _URL_PASSWORD.findall(value)


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


#: libpq's connection parameters whose values are secrets (a URI's query may give them;
#: ``passfile`` names a file, and is none)
LIBPQ_SECRETS = ("password", "sslpassword")
#: ``key = value`` of a libpq connection string (a value quoted or one word)
_CONNINFO_PAIR = re.compile(r"([A-Za-z_]+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']*)")


def _database_userinfo(url: str) -> tuple[int, int] | None:
    """Where the password of a database URI's user-info is (``[start, end)`` in ``url``),
    ``None`` without one. The user-info ends at the last ``@`` before the first ``/``
    after ``://``: as libpq reads it (its first ``@``) and as urllib does (its last before
    ``/?#``), whichever is wider."""
    start = url.find("://")
    if start < 0:
        return None
    start += 3
    end = url.find("/", start)
    at = url.rfind("@", start, len(url) if end < 0 else end)
    colon = url.find(":", start, at) if at >= 0 else -1
    return None if colon < 0 else (colon + 1, at)


def _database_query(url: str) -> tuple[int, list[tuple[str, str, str]]]:
    """Where a database URI's query starts (``len(url)`` without one), and its
    ``(name, "=", value)`` pairs as written."""
    userinfo = _database_userinfo(url)
    start = url.find("?", url.find("://") + 3 if userinfo is None else userinfo[1])
    if start < 0:
        return len(url), []
    return start, [pair.partition("=") for pair in url[start + 1 :].split("&")]


def database_url_secrets(url: str) -> list[str]:
    """What is written in ``url`` (a PostgreSQL URI) that is a secret: ``"user-info"``
    for a password there (``postgresql://me:PASSWORD@db``), and each of
    :data:`LIBPQ_SECRETS` its query gives (its name read as libpq reads it: percent-escapes
    decoded) — never the values."""
    found = ["user-info"] if _database_userinfo(url) is not None else []
    for name, _, _ in _database_query(url)[1]:
        if unquote(name) in LIBPQ_SECRETS and unquote(name) not in found:
            found.append(unquote(name))
    return found


def masked_database_url(url: str) -> str:
    """``url`` — where a token store is: a PostgreSQL URI or ``key=value`` connection
    string, or ``sqlite:PATH`` — for display: the password of its user-info and the values
    of its secret-looking parameters (``password``, ``sslpassword``, anything
    :func:`_secretish`, its name's percent-escapes read) as ``***``, however short."""
    if "://" not in url:  # a connection string: host=db password=… (or a SQLite path)
        return _CONNINFO_PAIR.sub(
            lambda m: f"{m[1]}{m[2]}***" if _secretish(m[1]) and m[3] else m[0], url
        )
    userinfo = _database_userinfo(url)
    if userinfo is not None:
        url = url[: userinfo[0]] + "***" + url[userinfo[1] :]
    start, pairs = _database_query(url)
    if not pairs:
        return url
    query = "&".join(
        f"{name}=***" if value and _secretish(unquote(name)) else name + sep + value
        for name, sep, value in pairs
    )
    return f"{url[:start]}?{query}"


def database_url_secret_values(url: str) -> list[str]:
    """The passwords written in ``url`` (a PostgreSQL URI or connection string: its
    user-info's, and the values of :data:`LIBPQ_SECRETS`), each as written and
    percent-decoded, longest first: what a message quoting a part of the URL (a driver's
    error) must not show."""
    values: list[str] = []
    if "://" not in url:
        pairs = _CONNINFO_PAIR.finditer(url)
        values = [m[3].strip("'") for m in pairs if m[1] in LIBPQ_SECRETS]
    else:
        userinfo = _database_userinfo(url)
        if userinfo is not None:
            values.append(url[userinfo[0] : userinfo[1]])
        values += [v for k, _, v in _database_query(url)[1] if unquote(k) in LIBPQ_SECRETS]
    values += [unquote(v) for v in values]
    return sorted({v for v in values if v}, key=len, reverse=True)


def _hide(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` in it (of 4 characters or more, as the log
    redactor's) replaced by ``***``, and the password of each URL in it."""
    hidden = [*secrets, *_url_passwords(text)]
    for secret in sorted((s for s in hidden if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def command_line(server: _Launch) -> str:
    """The server's command line for display, secret-looking arguments masked: values of
    secret-looking options, what a secret-named ``${NAME}`` expanded to, URL passwords."""
    words = [_quoted(server.command or "", server.secret_values)]
    for arg in _mask_args(server.args):
        words.append(arg if arg.endswith("***") else _quoted(arg, server.secret_values))
    return " ".join(words)


def _quoted(word: str, secrets: Sequence[str]) -> str:
    """``word`` quoted for a shell, each secret in it an unquoted ``***``."""
    shown = _hide(word, secrets)
    if shown == word:
        return shlex.quote(word)
    return "***".join(shlex.quote(part) if part else "" for part in shown.split("***"))


def _masked_repr(
    struct: msgspec.Struct, masked_fields: set[str], hidden: Sequence[str] = ()
) -> str:
    parts: list[str] = []
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if name in masked_fields and isinstance(value, Mapping):
            value = {k: "***" for k in value}
        elif name in masked_fields and isinstance(value, tuple):
            value = tuple("***" for _ in value)
        elif name in masked_fields and value is not None:
            value = "***"
        elif name == "url" and isinstance(value, str):
            value = _hide(masked_url(value), hidden)
        elif name == "args":
            args = cast("Sequence[str]", value)  # a server's args: its words
            value = tuple(_hide(a, hidden) for a in _mask_args(args))
        elif name == "command" and isinstance(value, str):
            value = _hide(value, hidden)
        parts.append(f"{name}={value!r}")
    return f"{type(struct).__name__}({', '.join(parts)})"
