"""Watching a remote server's port: a closed connection is news, and costs nothing to watch.

A Streamable HTTP server keeps no connection open to us between requests (unless it
keeps a stream open, and not every server does), so its death would be noticed only at
the next request. :func:`watch_port` holds one idle TCP connection to its host and port
instead — no request is sent on it. When the server's process dies, its kernel closes
that connection at once; the watch then opens another: refused means the port is
closed, and the server is gone (:attr:`Watch.gone`). A server that closes idle
connections itself (hypercorn and uvicorn do after 5 s) is simply connected to again, at
most once a second, as is one reset as it was made (the port was closing: a listener
closed with the connection in its queue resets it). A connection that cannot be opened
in time, or whose keep-alives go unanswered (a host that became unreachable sends
nothing), proves nothing either way: the watch says so (:attr:`Watch.doubt`) and the
server's probes decide.

While a server is down and waits for its next reconnection, :func:`port_reopened` tells
when its port, found closed, accepts connections again, so that it is reconnected to at
once rather than after the rest of its backoff delay.

Not watched: a server reached through an HTTP proxy (the proxy, not the server, would
be watched); the actor's probes still are.
"""

from __future__ import annotations

import errno
import math
import socket
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit

import attrs
import trio

#: Seconds at least between two connections the watch opens.
REOPEN_EVERY = 1.0
#: Seconds between two tries of a down server's port (:func:`port_reopened`).
RETURN_EVERY = 2.0
#: TCP keep-alive on the held connection: first after this many idle seconds, then every
#: ``KEEPALIVE_EVERY`` seconds, ``KEEPALIVE_COUNT`` unanswered in a row ending it.
KEEPALIVE_IDLE = 5
KEEPALIVE_EVERY = 2
KEEPALIVE_COUNT = 3


def watched_address(url: str) -> tuple[str, int] | None:
    """The ``(host, port)`` to hold a connection to for the server at ``url`` — ``None``
    when it cannot be watched that way (not http/https, or an HTTP proxy in between)."""
    try:
        parts = urlsplit(url)
        scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
        if scheme not in ("http", "https") or not parts.hostname:
            return None
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a malformed URL: connecting reports it
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
        parts.hostname
    ):
        return None
    return parts.hostname, port


async def port_reopened(host: str, port: int, *, every: float, connect_timeout: float) -> None:
    """Return once ``host``:``port``, found closed (a connection refused), accepts a
    connection again; tried every ``every`` seconds, each connection closed at once
    (nothing is sent). A port never found closed never returns: what keeps such a
    server from connecting is not its port."""
    closed = False
    while True:
        try:
            with trio.fail_after(connect_timeout):
                sock = await _connect(host, port)
        except ConnectionRefusedError:
            closed = True
        except (OSError, trio.TooSlowError):
            pass  # cannot tell
        else:
            sock.close()
            if closed:
                return
        await trio.sleep(every)


@attrs.define
class Watch:
    """What the watch of one connection reports: ``gone(why)`` once, when the port is
    found closed (the watch then ends); ``doubt(why)`` when it cannot tell (a probe
    should); ``holding()`` each time it holds a connection."""

    gone: Callable[[str], None]
    doubt: Callable[[str], None]
    holding: Callable[[], None] = lambda: None


async def watch_port(
    host: str,
    port: int,
    watch: Watch,
    *,
    connect_timeout: float,
) -> None:
    """Hold an idle TCP connection to ``host``:``port`` until cancelled or the port is
    found closed (see the module's docstring)."""
    where = f"{host}:{port}"
    opened_at = -math.inf
    while True:
        await trio.sleep_until(opened_at + REOPEN_EVERY)
        opened_at = trio.current_time()
        try:
            with trio.fail_after(connect_timeout):
                sock = await _connect(host, port)
        except ConnectionRefusedError:
            watch.gone(f"{where} refused a new connection: nothing listens on the port")
            return
        except ConnectionResetError:
            continue  # reset as it was made: the port is closing; the next turn finds out
        except (OSError, trio.TooSlowError) as exc:
            watch.doubt(f"a new connection to {where} failed: {_why(exc)}")
            opened_at = trio.current_time() + connect_timeout  # not at once again
            continue
        watch.holding()
        with sock:
            try:
                while await sock.recv(4096):
                    pass  # a server never speaks first; what it says unasked is dropped
            except OSError as exc:
                if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
                    watch.doubt(f"the connection held to {where} failed: {_why(exc)}")
        # Closed by the other side: the next turn finds out whether anything listens.


async def _connect(host: str, port: int) -> trio.socket.SocketType:
    """A connected socket to ``host``:``port``, its addresses tried in turn; refused only
    if every address refused."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    errors: list[OSError] = []
    for family, kind, proto, _name, address in infos:
        sock = trio.socket.socket(family, kind, proto)
        try:
            await sock.connect(address)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        _keepalive(sock)
        return sock
    if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
        raise errors[0]
    raise errors[0] if errors else OSError(f"{host} has no address")


def _keepalive(sock: trio.socket.SocketType) -> None:
    """Have the kernel probe the idle connection, where the platform allows it."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_EVERY),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _why(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "no answer in time"
    return exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)
