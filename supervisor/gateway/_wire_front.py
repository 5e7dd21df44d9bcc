"""The HTTP gateway's own HTTP/1.1 server under trio, in place of hypercorn: requests parsed
by httptools' C parser (``serve_http(front="httptools")``; httptools must be installed) or
by h11's, which hypercorn brings (``front="h11"``).

Each connection is two tasks: one reads and parses it (:mod:`._wire_parse`), the other
calls the ASGI app (the gateway's front, :class:`~._http._Front`, which makes every check
of its own) for each request, one after another (:mod:`._wire_conn`,
:mod:`._wire_exchange`). What the server itself holds to, as hypercorn does in
:mod:`supervisor._serving`:

* **Heads.** A request head (request line and headers) over *max_head* bytes, or with more
  than :data:`MAX_HEADERS` fields, is answered ``431`` and its connection closed, whether
  it arrives whole in one read or a piece at a time; a head that does not parse, ``400``.
* **Slow clients.** A head must arrive whole within *idle_timeout* seconds of the
  connection's start or the previous answer's end (an idle kept-alive connection is then
  closed, without an answer, within a quarter of that time more: one timer sweeps them
  all); a body within *body_timeout* seconds of its request being handed to the app, or
  the app is cancelled and the request answered ``408`` (unless its answer had begun),
  and the connection closed.
* **Bodies.** A body is handed to the app as it arrives (read at most one read ahead of
  it), ``Content-Length`` or chunked (the parser refuses both at once); ``Expect:
  100-continue`` is answered when the app first asks for the body. A request answered
  before its body was all there closes its connection after the answer (which says so).
  How large a body may be is the app's to say (the SDK's ``413``).
* **Keep-alive and pipelining.** HTTP/1.1 connections are kept (HTTP/1.0 ones when they
  ask, and are told so; not with h11), requests served in order; while one is served, at
  most one read of the next is taken in, and no more until the answer is written.
  ``Upgrade`` is not taken up: the request is served as a plain one (with httptools, its
  connection closed after it).
* **A client gone.** While a request whose body is whole is served, the connection is
  read (that one read ahead): a client that closes it is ``http.disconnect`` at once, and
  the app may have a cancel scope of its own cancelled then, with no task of its own
  watching (the ``supervisor.gone`` extension, :data:`~._wire_exchange.GONE`).
* **Answers.** The app's headers as it gave them, a ``date``, and framing:
  ``Content-Length`` when the app gave it or sent its body whole, else chunked (closed
  at the end for HTTP/1.0); a header carrying a line break is refused (the app fails).
  An answer with a ``Content-Length``, or JSON, is written with its body, in one write;
  any other (an event stream) has its head written at once. Through the same
  ``supervisor.gone`` extension, an app may take a body that is all there in one step,
  and give a whole JSON answer in one (the same bytes as ``send`` writes for it).
* **Shutdown.** Like :func:`~supervisor._serving.serve_sockets`: *stopping* is set,
  listeners close, idle connections close, open requests get *graceful_timeout* seconds,
  then the app's lifespan ends.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from functools import partial
from typing import Any

import trio

from .._serving import SHUTDOWN_MARGIN
from ._wire_conn import ASGIApp, _Server
from ._wire_exchange import _Exchange
from ._wire_parse import MAX_HEADERS, PARSERS, available

__all__ = ["MAX_HEADERS", "PARSERS", "available", "serve_wire"]


async def _lifespan(
    app: ASGIApp,
    state: dict[str, Any],
    stop: trio.Event,
    log: Any,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The app's lifespan: started before any request, ended (``stop``) after the last.
    An app without one (it fails at once) is served without."""
    said_startup = False
    started = False

    async def receive() -> dict[str, Any]:
        nonlocal said_startup
        if not said_startup:
            said_startup = True
            return {"type": "lifespan.startup"}
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal started
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            started = True
            task_status.started()
        elif kind == "lifespan.startup.failed":
            raise RuntimeError(f"the app did not start: {message.get('message', '')}")

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
    try:
        await app(scope, receive, send)
    except Exception:
        if started:
            raise
        # A startup cancelled is not an app without a lifespan (starlette reports the one
        # as a failed startup too): the cancellation goes on.
        await trio.lowlevel.checkpoint_if_cancelled()
        log.warning("the HTTP app has no lifespan", exc_info=True)
        task_status.started()
        return
    if not started:
        task_status.started()


async def serve_wire(
    app: ASGIApp,
    sockets: Sequence[Any],
    *,
    logger_name: str,
    stopping: trio.Event | None = None,
    max_head: int,
    idle_timeout: float,
    graceful_timeout: float,
    body_timeout: float,
    parser: str = "httptools",
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* on *sockets* (listening stdlib sockets, which the caller closes) until
    cancelled; start it with ``nursery.start``, which returns once it serves. The
    arguments are :func:`~supervisor._serving.serve_sockets`' (with the limits the module
    docstring says), and so is the shutdown: bounded by *graceful_timeout* and
    :data:`~supervisor._serving.SHUTDOWN_MARGIN`. *parser* is one of :data:`PARSERS`."""
    stopping = trio.Event() if stopping is None else stopping
    server = _Server(
        app,
        logger_name=logger_name,
        stopping=stopping,
        max_head=max_head,
        idle_timeout=idle_timeout,
        body_timeout=body_timeout,
        parser=parser,
        exchange=_Exchange,
    )
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(partial(_serve, server, sockets, graceful_timeout, scope))
            task_status.started()
            await trio.sleep_forever()
        finally:
            stopping.set()
            scope.deadline = min(
                scope.deadline, trio.current_time() + graceful_timeout + SHUTDOWN_MARGIN
            )


async def _serve(
    server: _Server,
    sockets: Sequence[Any],
    graceful_timeout: float,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None],
) -> None:
    """The lifespan, then the listeners, in *scope* (shielded once serving) until
    *stopping*; then the graceful shutdown."""
    with scope:
        stop = trio.Event()
        async with trio.open_nursery() as life:
            await life.start(partial(_lifespan, server.app, server.state, stop, server.log))
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in sockets]
            async with trio.open_nursery() as connections:
                for listener in listeners:
                    connections.start_soon(server.accept, listener, connections)
                connections.start_soon(server.sweep)
                scope.shield = True
                task_status.started()
                await server.stopping.wait()
                for listener in listeners:
                    await listener.aclose()
                server.close_idle()
                with trio.move_on_after(graceful_timeout):
                    await server.all_closed.wait()
                connections.cancel_scope.cancel()
            stop.set()
