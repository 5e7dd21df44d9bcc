"""One translation of what a transport raises into the package's errors.

Transports are where the outside world's exceptions enter: ``httpx2``'s for Streamable
HTTP and legacy SSE, trio-websocket's and the socket's for a WebSocket being opened, the
operating system's for a local server's process being started or read. :func:`translate`
says each in our terms (:class:`~supervisor.errors.TransportError` and below, defined in
:mod:`supervisor.errors`), naming the endpoint without what may hold a secret
(:func:`safe_url`) and keeping the original as the ``__cause__``; :func:`http_errors` is
the block around where HTTP enters.
"""

from __future__ import annotations

import errno
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import trio

from ..errors import (
    HTTPConnectError,
    HTTPConnectionLost,
    HTTPError,
    HTTPStatusError,
    ServerExited,
    TransportError,
    WebSocketConnectError,
    os_reason,
    status_phrase,
)
from ..log import redact

#: Why a process could not be started, when starting it again soon cannot help: the
#: executable is missing or not executable, or the working directory does not exist.
_PERMANENT_SPAWN_ERRORS = frozenset(
    {errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.ENOTDIR, errno.EISDIR}
)


def safe_url(url: str) -> str:
    """``url`` without user-info and query string, either of which may hold a secret."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # one urlsplit refuses (an unclosed IPv6 "[", say): cut it by hand
        head = re.split(r"[?#]", url, maxsplit=1)[0]
        scheme, sep, rest = head.partition("://")
        netloc, slash, path = rest.partition("/")
        return f"{scheme}://{netloc.rpartition('@')[2]}{slash}{path}" if sep else head
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def translate(
    error: BaseException,
    *,
    url: str | None = None,
    server: str | None = None,
    starting: str | None = None,
) -> BaseException:
    """The error of ours that the transport-level ``error`` means, its ``__cause__``
    ``error``; ``error`` itself when it means none (cancellation, say, or our own).

    What ``error`` is read as depends on where it came from:

    - ``url`` an HTTP endpoint (already made :func:`safe_url`): every ``httpx2`` error in
      it, bare or in (nested) exception groups, becomes the
      :class:`~supervisor.errors.HTTPError` it means, with the original's traceback. In a
      group the error is replaced in place, so the group keeps its shape (and
      :func:`~supervisor.actors._errors.collapse` still finds it).
    - ``url`` a ``ws://`` or ``wss://`` endpoint (made safe): opening the connection
      failed (the upgrade rejected, refused, DNS, TLS, a stream broken mid-handshake) — a
      :class:`~supervisor.errors.WebSocketConnectError`.
    - ``server`` with ``starting``, the command: the local server's process could not be
      started (an ``OSError``; a ``ValueError`` for a NUL character or text the OS
      encoding cannot hold) — a :class:`~supervisor.errors.ServerExited` without exit
      code, retryable unless retrying cannot help (the executable missing or not
      executable, the working directory missing).
    - ``server`` alone: reading the local server's stdout failed (an ``OSError``) — a
      :class:`~supervisor.errors.TransportError`.
    """
    if url is not None:
        if url.startswith(("ws://", "wss://")):
            translated = _websocket_error(error, url)
        else:
            return _http_translated(error, url)
    elif server is not None and starting is not None:
        translated = _spawn_error(error, server, starting)
    elif server is not None and isinstance(error, OSError):
        translated = TransportError(f"reading from MCP server {server!r} failed: {error}")
    else:
        translated = None
    if translated is None:
        return error
    translated.__cause__ = error
    return translated


def _http_error(error: httpx2.HTTPError, url: str) -> HTTPError:
    """The :class:`~supervisor.errors.HTTPError` that ``error`` means, for the endpoint
    ``url`` (already made safe), with ``error`` as its cause and its traceback."""
    translated: HTTPError
    detail = redact(str(error)) or type(error).__name__
    if isinstance(error, httpx2.HTTPStatusError):
        status = error.response.status_code
        phrase = status_phrase(status)
        translated = HTTPStatusError(
            f"MCP endpoint {url} answered HTTP {status}{phrase}", url=url, status_code=status
        )
    elif isinstance(error, httpx2.ConnectTimeout):
        translated = HTTPConnectError(f"cannot connect to {url}: timed out", url=url)
    elif isinstance(error, httpx2.ConnectError | httpx2.ProxyError):
        reason = os_reason(error)
        if reason == type(error).__name__:  # no operating-system error to be found
            reason = detail
        translated = HTTPConnectError(f"cannot connect to {url}: {reason}", url=url)
    elif isinstance(error, httpx2.ReadTimeout | httpx2.WriteTimeout):
        translated = HTTPConnectionLost(
            f"the connection to {url} went silent during a request: "
            f"{'no answer' if isinstance(error, httpx2.ReadTimeout) else 'could not send'} "
            "within the timeout",
            url=url,
        )
    elif isinstance(error, httpx2.NetworkError | httpx2.RemoteProtocolError):
        translated = HTTPConnectionLost(
            f"the connection to {url} broke during a request: {detail}", url=url
        )
    else:
        translated = HTTPError(f"HTTP request to {url} failed: {detail}", url=url)
    translated.__cause__ = error
    return translated.with_traceback(error.__traceback__)


def _http_translated(exc: BaseException, url: str) -> BaseException:
    """``exc`` with every ``httpx2`` error in it, bare or in (nested) groups, translated."""
    if isinstance(exc, httpx2.HTTPError):
        return _http_error(exc, url)
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    parts = [_http_translated(e, url) for e in exc.exceptions]
    if all(new is old for new, old in zip(parts, exc.exceptions, strict=True)):
        return exc
    group = exc.derive(parts)
    group.__cause__, group.__context__ = exc.__cause__, exc.__context__
    if hasattr(exc, "__notes__"):
        group.__notes__ = list(exc.__notes__)
    return group.with_traceback(exc.__traceback__)


def _websocket_error(exc: BaseException, url: str) -> WebSocketConnectError | None:
    """One clear error for every way opening a WebSocket connection fails."""
    import trio_websocket  # loaded already: only a WebSocket transport gets here

    if not isinstance(exc, trio_websocket.HandshakeError | OSError | trio.BrokenResourceError):
        return None
    prefix = f"cannot open WebSocket {url}"
    if isinstance(exc, trio_websocket.ConnectionRejected):
        phrase = status_phrase(exc.status_code)
        return WebSocketConnectError(
            f"{prefix}: the server rejected the upgrade with HTTP {exc.status_code}{phrase}",
            url=url,
            status_code=exc.status_code,
        )
    return WebSocketConnectError(f"{prefix}: {os_reason(exc)}", url=url)


def _spawn_error(exc: BaseException, server: str, command: str) -> ServerExited | None:
    """Why the local server's process could not be started, if ``exc`` says so."""
    if isinstance(exc, OSError):
        return ServerExited(
            f"MCP server {server!r} could not be started: {exc.strerror or exc} "
            f"(command {command!r}); check the command and its PATH",
            exit_code=None,
            # Missing, not executable, or a bad cwd: no retry will find it meanwhile.
            retryable=exc.errno not in _PERMANENT_SPAWN_ERRORS,
        )
    if isinstance(exc, ValueError):
        return ServerExited(
            f"MCP server {server!r} could not be started: its command, arguments, "
            f"env or cwd cannot be given to a process ({exc})",
            exit_code=None,
            retryable=False,
        )
    return None


@contextmanager
def http_errors(url: str) -> Iterator[None]:
    """Where HTTP enters: every ``httpx2`` error leaving the block becomes the
    :class:`~supervisor.errors.HTTPError` it means, naming ``url`` without its user-info
    and query string, its ``__cause__`` the original (see :func:`translate`).

    Inside an exception group the error is replaced in place, so the group keeps its shape
    (and :func:`~supervisor.actors._errors.collapse` still finds it); any other exception,
    cancellation included, leaves unchanged.
    """
    try:
        yield
    except BaseException as exc:
        translated = translate(exc, url=safe_url(url))
        if translated is exc:
            raise
        raise translated from translated.__cause__  # a translated leaf's is the original
