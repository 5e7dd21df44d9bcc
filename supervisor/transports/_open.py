"""Opening a server's transport: one fresh transport per connection attempt, of the kind
its config names, with its limits, its OAuth tokens and its fault plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..auth._broker import AuthProblem, TokenBroker
from ..errors import AuthorizationFailed, AuthRequired
from ._errors import safe_url
from ._http import http_transport, streamable_http_abandoned
from ._memory import memory_transport
from ._oauth import BrokerAuth
from ._remote import Remote, TransportLike
from ._sse import sse_transport
from ._stdio import GRACE_SECONDS, KILL_AFTER_SECONDS, StdioTransport
from ._watch import watched_address

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

    from ..config._limits import Limits
    from ..config._model import ServerConfig
    from ._faults import Faults


def open_transport(
    config: ServerConfig,
    limits: Limits,
    broker: TokenBroker | None = None,
    faults: Faults | None = None,
    *,
    sse: bool = False,
    grace: float = GRACE_SECONDS,
    kill_after: float = KILL_AFTER_SECONDS,
    on_spawn: Callable[[int], None] | None = None,
    on_stderr: Callable[[str], None] | None = None,
    auth_error: Callable[[AuthProblem], AuthRequired | AuthorizationFailed] | None = None,
) -> TransportLike:
    """A fresh transport for one connection attempt to the server ``config`` describes.

    ``stdio`` spawns its command (:class:`~supervisor.transports._stdio.StdioTransport`:
    ``on_spawn`` hears its pid, ``on_stderr`` each stderr line; its stop waits ``grace``
    seconds after stdin closes, then ``kill_after`` after SIGTERM); ``memory`` opens a
    fresh session with the in-process server object; ``ws`` connects over WebSocket;
    ``sse`` — or any remote server with ``sse``, one found to speak only legacy SSE —
    over legacy SSE; any other over Streamable HTTP. ``limits`` bound each message and
    each listing.

    With a ``broker`` a remote connection (HTTP or SSE) gets its OAuth tokens from it; a
    problem getting one ends the connection with ``auth_error(problem)`` (the actor then
    waits for a login). With ``faults`` (:class:`~._faults.Faults`, the server's fault
    injection) the connection injects through it: a stdio transport and the HTTP client
    at their own fault points, an in-memory or WebSocket transport with the plan between
    it and the session (a fault that loses the connection closes the transport); legacy
    SSE injects none.
    """
    if config.type == "stdio":
        assert config.command is not None
        return StdioTransport(
            config.command,
            list(config.args),
            env=config.env,
            cwd=config.cwd,
            inherit_env=config.inherit_env,
            name=config.name,
            on_stderr=on_stderr,
            on_spawn=on_spawn,
            max_message_bytes=limits.max_message_bytes,
            max_items=limits.max_tools_per_server,
            max_catalog_bytes=limits.max_catalog_bytes,
            grace=grace,
            kill_after=kill_after,
            faults=faults,
            resources=getattr(config, "resources", None),  # (an embedder's own config)
            sandbox=getattr(config, "sandbox", None),  # (duck-typed configs have none)
        )
    if config.type == "memory":  # a fresh session with the same in-process server object
        memory = memory_transport(config.app)
        if faults is None:
            return Remote(memory, name=config.name)
        return _faulty(config.name, memory, faults)
    url = config.url
    assert url is not None
    if config.type == "ws":
        from ._ws import _parse_frame, websocket_client

        socket = websocket_client(
            url,
            headers=config.headers,
            max_message_size=limits.max_message_bytes,
            max_items=limits.max_tools_per_server,
            max_catalog_bytes=limits.max_catalog_bytes,
        )
        if faults is None:
            return Remote(socket, name=config.name)
        shown = safe_url(url)

        def frame(line: bytes) -> SessionMessage | Exception:  # a bad frame's error
            return _parse_frame(line.decode(errors="replace"), shown)

        return _faulty(config.name, socket, faults, parse=frame)
    if config.type == "sse" or sse:
        remote = Remote(None, name=config.name)
        remote._inner = sse_transport(
            url,
            headers=config.headers,
            timeout=config.timeout,
            auth=_oauth(remote, broker, auth_error),
            limits=limits,
            server=config.name,
        )
        return remote
    remote = Remote(
        None,
        tracks_delivery=True,
        made_by_client=streamable_http_abandoned,
        name=config.name,
    )
    remote.watch_at = watched_address(url)  # its port is watched while connected
    remote._inner = http_transport(
        url,
        headers=config.headers,
        timeout=config.timeout,
        auth=_oauth(remote, broker, auth_error),
        on_status=remote.saw_status,
        faults=faults,
        limits=limits,
        server=config.name,
    )
    return remote


def _faulty(
    name: str,
    inner: Any,
    faults: Faults,
    parse: Callable[[bytes], SessionMessage | Exception] | None = None,
) -> Remote:
    """A message-level transport (in-memory, WebSocket) with the fault plan between it
    and the session; a fault that loses the connection closes the transport."""
    remote = Remote(None, name=name)
    remote._inner = faults.wrap_streams(inner, name=name, lost=remote.lose, parse=parse)
    return remote


def _oauth(
    remote: Remote,
    broker: TokenBroker | None,
    auth_error: Callable[[AuthProblem], AuthRequired | AuthorizationFailed] | None,
) -> BrokerAuth | None:
    """The connection's ``httpx2.Auth``: tokens from the broker; a problem getting one
    ends the connection with its error (the actor then waits for a login)."""
    if broker is None:
        return None
    assert auth_error is not None, "a broker's problems need their error"

    def problem(found: AuthProblem) -> None:
        remote.lose(auth_error(found))

    return BrokerAuth(broker, problem)
