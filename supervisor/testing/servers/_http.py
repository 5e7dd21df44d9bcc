"""Serve a fixture over Streamable HTTP or legacy SSE on loopback, in-process under trio."""

from __future__ import annotations

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp.server.mcpserver import MCPServer

from ._names import HttpTransport
from ._raw import ASGIApp, Message, Receive, Scope, Send

_PATHS: dict[HttpTransport, str] = {"http": "/mcp", "sse": "/sse"}


async def serve_http(
    server: MCPServer | ASGIApp,
    *,
    transport: HttpTransport = "http",
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` over HTTP with hypercorn until cancelled; start it with ``nursery.start``.

    ``await nursery.start(partial(serve_http, server, transport="http"))`` returns the
    endpoint URL once the socket is bound and listening: ``http://HOST:PORT/mcp`` for
    Streamable HTTP, ``http://HOST:PORT/sse`` for SSE (its message endpoint is
    ``/messages/``). With ``port=0`` the OS picks a free port and the URL names it.

    Cancelling the task stops the server at once: open requests and streams are cut, the
    listening socket is closed, so a new ``serve_http`` can bind the same port immediately
    (``SO_REUSEADDR``). Serving the same ``MCPServer`` again keeps its state (tools, counts)
    but not its sessions: a handshake-era client's ``Mcp-Session-Id`` is then unknown (404).

    `server` may also be a bare ASGI app (such as ``hang_app`` or ``garbage_app``), served
    as is on every path; `transport` then only picks the path in the URL.

    Raises:
        OSError: The address could not be bound (port in use, bad host).
    """
    if isinstance(server, MCPServer):
        if transport == "http":
            app = server.streamable_http_app(host=host)
        else:
            app = _answer_once(server.sse_app(host=host))
    else:
        app = server
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(serve, app, config)
        task_status.started(binds[0] + _PATHS[transport])


@attrs.frozen
class HttpServer:
    """A ``serve_http`` task started by ``start_http``: its URL and a way to stop it."""

    url: str
    _scope: trio.CancelScope
    _stopped: trio.Event

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    async def stop(self) -> None:
        """Stop serving and return once the port is free again (idempotent)."""
        self._scope.cancel()
        await self._stopped.wait()


async def start_http(
    nursery: trio.Nursery,
    server: MCPServer | ASGIApp,
    *,
    transport: HttpTransport = "http",
    host: str = "127.0.0.1",
    port: int = 0,
) -> HttpServer:
    """Start ``serve_http`` in `nursery`; return once listening, with a handle to stop it.

    For restart tests: ``await old.stop()`` then
    ``await start_http(nursery, server, port=old.port)`` serves the same URL again.
    """
    scope = trio.CancelScope()
    stopped = trio.Event()

    async def run(task_status: trio.TaskStatus[str]) -> None:
        try:
            with scope:
                await serve_http(
                    server, transport=transport, host=host, port=port, task_status=task_status
                )
        finally:
            stopped.set()

    url: str = await nursery.start(run)
    return HttpServer(url, scope, stopped)


def _answer_once(app: ASGIApp) -> ASGIApp:
    """Drop a second response to one HTTP request.

    The SDK's SSE endpoint, once its event stream ends, returns an empty ``Response`` that
    starts a second response on the same request; hypercorn then logs an "Error in ASGI
    Framework" (UnexpectedMessageError) for every closed SSE connection.
    """

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = dropping = False

        async def send_once(message: Message) -> None:
            nonlocal started, dropping
            if message["type"] == "http.response.start":
                dropping = started
                started = True
            if not dropping:
                await send(message)

        await app(scope, receive, send_once)

    return wrapped
