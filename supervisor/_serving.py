"""Serving HTTP under trio: sockets bound by trio, served by hypercorn, logged by us.

The dashboard, the chaos HTTP proxy and the OAuth callback listener all serve a plain
ASGI application with hypercorn's trio worker, in the caller's trio run (no thread of
their own). This module is what they share, and so imports nothing of the project but
:mod:`supervisor._hypercorn` (hypercorn's config and log), and that only to serve: a
process that binds sockets or answers with :func:`respond` alone never loads hypercorn.

* **Sockets.** :func:`listen` binds every address of a host, like
  :func:`trio.open_tcp_listeners`; :func:`bind_first` binds one socket on the first free
  port of a list. Binding first, then serving, raises a bind error as itself, before
  anything runs. Each socket has ``TCP_USER_TIMEOUT`` (:data:`STALL_TIMEOUT`, where the
  platform has it); accepted connections inherit it, so the kernel drops a connection
  whose peer has taken nothing we sent for that long. Hypercorn sends with cancellation
  shielded, so this bound is what keeps a stuck peer from holding a task, or a shutdown,
  forever.
* **Config.** :func:`make_config` serves those sockets (hypercorn hands them over
  through :meth:`~supervisor._hypercorn.SocketsConfig.create_sockets`, which it calls
  once, when it starts serving) with the caller's limits, and no ``Server`` header.
* **Log.** Hypercorn's warnings and errors go to a structured logger the caller names
  (so secrets are redacted like every other line); its access log and start-up
  messages are off.
* **Serving.** :func:`serve_sockets` runs hypercorn until cancelled, then shuts it down
  gracefully and within bounds.
* **Slow requests.** A request's head must arrive within the idle timeout (hypercorn's
  ``keep_alive_timeout``, which runs from the connection's start, or the previous
  answer's end, until a head is whole), and its body within *body_timeout* seconds of its
  head (:data:`BODY_TIMEOUT`): else the request is answered ``408`` and its connection
  closed. Hypercorn's own ``read_timeout`` is not used: it bounds each read, so a body
  sent a byte at a time passes it, and it closes a long answer's connection (an event
  stream) whose client has nothing more to send.
"""

from __future__ import annotations

import errno
import math
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from hypercorn.config import Config

__all__ = [
    "BODY_TIMEOUT",
    "lifespan",
    "respond",
    "SHUTDOWN_MARGIN",
    "STALL_TIMEOUT",
    "bind_first",
    "listen",
    "make_config",
    "serve_sockets",
]

#: Seconds a peer may leave what we send unread (or unacknowledged) before it is dropped.
STALL_TIMEOUT = 30.0
#: Seconds a stopping server gets beyond its graceful timeout before what is left of it
#: is cancelled.
SHUTDOWN_MARGIN = 2.0
#: Seconds a request's body may take to arrive whole, from its head: ``408`` and the
#: connection closed past that.
BODY_TIMEOUT = 60.0

#: An ASGI application (``scope, receive, send``).
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


async def lifespan(receive: Any, send: Any) -> None:
    """An ASGI app's ``lifespan`` scope for an app with nothing to set up or tear down:
    acknowledge startup and shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def respond(
    send: Any,
    status: int,
    body: bytes,
    content_type: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send one whole ASGI HTTP response: ``body`` with its type, length and ``headers``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def listen(
    host: str, port: int, *, stall_timeout: float | None = STALL_TIMEOUT
) -> list[socket.socket]:
    """Listening sockets for *host*:*port*, which the caller closes.

    Bound like :func:`trio.open_tcp_listeners` (every address of a name such as
    ``localhost``, ``SO_REUSEADDR``, IPv6 sockets v6-only; ``OSError`` when it cannot),
    keeping only the first socket for port 0, whose other addresses would each get their
    own free port. Each socket gets ``TCP_USER_TIMEOUT`` = *stall_timeout* seconds where
    the platform has it (``None``: the kernel's default).
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    if port == 0:
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    sockets = [socket.socket(fileno=listener.socket.detach()) for listener in listeners]
    for sock in sockets:
        _prepare(sock, stall_timeout)
    return sockets


async def bind_first(
    host: str, ports: Sequence[int], *, stall_timeout: float | None = STALL_TIMEOUT
) -> tuple[socket.socket, int]:
    """One listening socket on *host* (its first address), on the first port of *ports*
    that is free, and that port; the caller closes the socket.

    A busy port (``EADDRINUSE``) moves on to the next; any other error is raised at once.
    When every port is busy, the last port's ``OSError`` is raised (its message names the
    host and port). ``SO_REUSEADDR`` is set, as :func:`listen` does (on Linux, it does
    not let two sockets listen on one port), and ``TCP_USER_TIMEOUT`` likewise.
    """
    if not ports:
        raise ValueError("bind_first needs at least one port")
    infos = await trio.socket.getaddrinfo(
        host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    family, kind, proto, _, address = infos[0]
    busy: OSError | None = None
    for port in ports:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port, *address[2:]))
            sock.listen(socket.SOMAXCONN)
        except OSError as exc:
            sock.close()
            error = OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}")
            if exc.errno != errno.EADDRINUSE:
                raise error from exc
            busy = error
            continue
        _prepare(sock, stall_timeout)
        return sock, sock.getsockname()[1]
    assert busy is not None
    raise busy


def _prepare(sock: socket.socket, stall_timeout: float | None) -> None:
    sock.setblocking(False)
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    if user_timeout is not None and stall_timeout is not None:
        sock.setsockopt(socket.IPPROTO_TCP, user_timeout, int(stall_timeout * 1000))


def make_config(
    sockets: Sequence[socket.socket],
    *,
    logger_name: str,
    max_head: int | None = None,
    idle_timeout: float | None = None,
    graceful_timeout: float | None = None,
    websocket_max_message_size: int | None = None,
) -> Config:
    """The hypercorn config that serves *sockets*, its warnings and errors logged to the
    structured logger *logger_name*, without a ``Server`` header or an access log.

    The limits, each left at hypercorn's default when ``None``: *max_head*, the largest
    request head (request line and headers) in bytes, ``431`` beyond; *idle_timeout*,
    how long a connection may stay idle, or take to send a request head, in seconds;
    *graceful_timeout*, how long open requests get to finish on shutdown;
    *websocket_max_message_size*, the largest WebSocket message a client may send (a
    larger one closes the socket, 1009).
    """
    from ._hypercorn import SocketsConfig, StructuredLog  # (hypercorn: loaded to serve)

    config = SocketsConfig(sockets, logger_name)
    config.logger_class = StructuredLog
    config.accesslog = None
    config.errorlog = None
    config.include_server_header = False
    if max_head is not None:
        config.h11_max_incomplete_size = max_head
    if idle_timeout is not None:
        config.keep_alive_timeout = idle_timeout
    if graceful_timeout is not None:
        config.graceful_timeout = graceful_timeout
    if websocket_max_message_size is not None:
        config.websocket_max_message_size = websocket_max_message_size
    return config


async def serve_sockets(
    app: ASGIApp,
    sockets: Sequence[socket.socket],
    *,
    logger_name: str,
    stopping: trio.Event | None = None,
    max_head: int | None = None,
    idle_timeout: float | None = None,
    graceful_timeout: float,
    websocket_max_message_size: int | None = None,
    body_timeout: float | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* on *sockets* (which the caller closes) until cancelled; start it with
    ``nursery.start``, which returns once hypercorn is serving.

    The config is :func:`make_config`'s, with these arguments; a request's body must
    arrive within *body_timeout* seconds of its head (``None``: :data:`BODY_TIMEOUT`).
    Hypercorn runs in a cancel scope shielded from this call's cancellation, which sets
    *stopping* instead (an app can watch it to end long-lived responses, such as a feed):
    hypercorn stops accepting, closes idle connections and gives open requests
    *graceful_timeout* seconds; :data:`SHUTDOWN_MARGIN` seconds later, whatever is left is
    cancelled.
    """
    if max_head is not None:
        app = partial(_within_head, app, max_head)
    app = partial(_within_time, app, BODY_TIMEOUT if body_timeout is None else body_timeout)
    config = make_config(
        sockets,
        logger_name=logger_name,
        max_head=max_head,
        idle_timeout=idle_timeout,
        graceful_timeout=graceful_timeout,
        websocket_max_message_size=websocket_max_message_size,
    )
    stopping = trio.Event() if stopping is None else stopping
    # Shielded once hypercorn serves (_ShieldOnceStarted): a cancellation while it starts
    # ends the start, which a shield from the first would hold until it served forever.
    server_scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(partial(_serve, app, config, stopping, server_scope))
            task_status.started()
            await trio.sleep_forever()
        finally:
            stopping.set()
            server_scope.deadline = min(
                server_scope.deadline,
                trio.current_time() + graceful_timeout + SHUTDOWN_MARGIN,
            )


async def _within_head(app: ASGIApp, max_head: int, scope: Any, receive: Any, send: Any) -> None:
    """*app*, for a request whose head is at most *max_head* bytes; ``431`` (an HTTP
    request) or a refused handshake (a WebSocket) otherwise.

    Hypercorn's ``h11_max_incomplete_size`` bounds a head only while it is incomplete:
    one that arrives whole in a single read (hypercorn reads up to 64 KiB at a time) is
    parsed whatever its size. So the bound is also checked here, on the head as parsed.
    """
    if scope["type"] in ("http", "websocket") and _head_size(scope) > max_head:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1009})
            return
        body = b'{"error": "request head too large"}'
        await respond(send, 431, body, b"application/json", [(b"connection", b"close")])
        return
    await app(scope, receive, send)


async def _within_time(app: ASGIApp, timeout: float, scope: Any, receive: Any, send: Any) -> None:
    """*app*, for a request whose body arrives whole within *timeout* seconds; past that,
    *app* is cancelled and the request answered ``408`` (its connection is then closed:
    the rest of the body is never read).

    The clock stops once the body is whole, the client is gone, or *app* starts its
    answer (an answer under way is the app's to end; hypercorn closes the connection
    after it if the body never came). A request that has no body (HTTP/1.1 without
    ``Content-Length`` or ``Transfer-Encoding``) has no clock.
    """
    if scope["type"] != "http" or not _may_have_body(scope):
        await app(scope, receive, send)
        return
    answered = False
    clock = trio.CancelScope(deadline=trio.current_time() + timeout)

    async def receiving() -> Any:  # noqa: ANN401 - an ASGI message
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            clock.deadline = math.inf
        return message

    async def sending(message: Any) -> None:  # noqa: ANN401 - an ASGI message
        nonlocal answered
        if message["type"] == "http.response.start":
            answered = True
            clock.deadline = math.inf
        await send(message)

    with clock:
        await app(scope, receiving, sending)
    if clock.cancelled_caught and not answered:
        said = f"the request's body did not arrive within {timeout:g} s".encode()
        body = b'{"error": "' + said + b'"}'
        await respond(send, 408, body, b"application/json", [(b"connection", b"close")])


def _may_have_body(scope: Any) -> bool:
    """Whether the request may have a body: over HTTP/1, one its head announces."""
    if scope.get("http_version") == "2":
        return True  # a body needs no header there
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def _head_size(scope: Any) -> int:
    """The bytes of a request head as sent: request line, headers and their line ends."""
    target = len(scope.get("raw_path") or scope["path"].encode()) + len(scope["query_string"])
    request_line = len(scope.get("method", "GET")) + 1 + target + 1 + 8 + 2
    fields = sum(len(name) + 2 + len(value) + 2 for name, value in scope["headers"])
    return request_line + fields + 2


async def _serve(
    app: ASGIApp,
    config: Config,
    stopping: trio.Event,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """Hypercorn, in *scope*, until *stopping* is set (then a graceful shutdown, bounded
    by the scope's deadline); *scope* is shielded from the caller's cancellation once
    hypercorn serves."""
    from hypercorn.trio import serve

    with scope:
        await serve(
            app,
            config,
            shutdown_trigger=stopping.wait,
            task_status=_ShieldOnceStarted(scope, task_status),  # pyright: ignore[reportArgumentType]  # hypercorn types it as trio's TaskStatus; it only calls started()
        )


class _ShieldOnceStarted:
    """A task status that shields *scope* when the task says it started, and passes it on."""

    def __init__(self, scope: trio.CancelScope, status: trio.TaskStatus[list[str]]) -> None:
        self._scope = scope
        self._status = status

    def started(self, value: list[str]) -> None:
        self._scope.shield = True
        self._status.started(value)
