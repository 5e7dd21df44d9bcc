""":func:`serve_dashboard`: the dashboard's ASGI app (``_app``), served by hypercorn's trio
worker on sockets bound by trio, with the event hub that feeds its pages.

Everything runs in :func:`serve_dashboard`'s nursery, under trio: the hub, and hypercorn
(``hypercorn.trio.serve``, through :func:`supervisor._serving.serve_sockets`), which runs
every connection and request as a task of its own nurseries, in this trio run. Hypercorn
runs inside a cancel scope shielded from :func:`serve_dashboard`'s cancellation:
cancelling :func:`serve_dashboard` sets its *shutdown trigger* instead, so that it shuts
down gracefully and within bounds. It stops accepting, closes idle connections, every
page's feed closes with code 1001 (``_live``), open requests get
:data:`GRACEFUL_TIMEOUT` seconds, and a deadline a little later ends whatever is left.

The dashboard's limits: a request head larger than :data:`MAX_HEAD` bytes is ``431``;
the head of a request must arrive, and an idle keep-alive connection is kept,
:data:`IDLE_TIMEOUT` seconds; a message from a page larger than :data:`MAX_WS_MESSAGE`
bytes closes its feed (1009). Its sockets have ``TCP_USER_TIMEOUT`` =
:data:`~supervisor._serving.STALL_TIMEOUT`, so a page that stopped reading its feed
cannot hold it, or the shutdown, forever. Hypercorn's warnings and errors are logged as
``supervisor.dashboard.http`` (secrets redacted); there is no ``Server`` header.
"""

from __future__ import annotations

import ipaddress
import secrets
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from .._serving import listen, serve_sockets
from ..log import get_logger, redacting
from ._address import format_host
from ._app import DashboardApp
from ._feed import Hub
from ._security import TOKEN_HEADER, Guard
from ._strips import WINDOW, Strips

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["DashboardInfo", "TOKEN_HEADER", "serve_dashboard"]

log = get_logger("supervisor.dashboard")

#: Largest request head (request line and headers) accepted, in bytes.
MAX_HEAD = 16 * 1024
#: How long a connection may stay idle, or take to send a request head.
IDLE_TIMEOUT = 30.0
#: Largest message a page may send on its feed (it has no reason to send any).
MAX_WS_MESSAGE = 4096
#: How long open requests and feeds get to finish when the dashboard stops.
GRACEFUL_TIMEOUT = 2.0


@attrs.frozen
class DashboardInfo:
    """Where a running dashboard is: reported by :func:`serve_dashboard` once it listens.

    ``url`` is the page's address (``http://127.0.0.1:8080/``; for a wildcard host, the
    loopback address of its family); ``host`` and ``port`` are the bound ones. ``token``
    is the action token embedded in the page; it is left out of ``repr``.
    """

    url: str
    host: str
    port: int
    token: str = attrs.field(repr=False)


async def serve_dashboard(
    sup: SupervisorHandle,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: trio.TaskStatus[DashboardInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the web dashboard of *sup* on *host*:*port* until cancelled.

    Use with ``nursery.start``: it reports a :class:`DashboardInfo` once listening
    (``port=0`` picks a free port). A new random action token is made for each call.
    An address that cannot be bound raises ``OSError`` from ``start``. One failing
    request is logged and answered ``500``, never taking the listener down. Cancelling
    stops accepting, closes every page's feed (code 1001) and returns, within bounds.
    """
    sockets = await listen(host, port)
    try:
        bound_host, bound_port = sockets[0].getsockname()[:2]
        token = secrets.token_urlsafe(32)
        info = DashboardInfo(
            url=f"http://{format_host(_url_host(host, bound_host))}:{bound_port}/",
            host=bound_host,
            port=bound_port,
            token=token,
        )
        stopping = trio.Event()
        # The token is redacted from logs while the dashboard serves; the calls are kept
        # (for the strips) while it serves.
        with redacting([token]), sup.recent_calls(WINDOW) as calls:
            strips = Strips(sup, calls)
            hub = Hub(observe=strips.observe)
            app = DashboardApp(sup, Guard(token, host, bound_port), hub, strips, token, stopping)
            async with trio.open_nursery() as nursery:
                await nursery.start(hub.run, sup.subscribe)
                await nursery.start(strips.run)
                await nursery.start(
                    partial(
                        serve_sockets,
                        app,
                        sockets,
                        logger_name="supervisor.dashboard.http",
                        stopping=stopping,
                        max_head=MAX_HEAD,
                        idle_timeout=IDLE_TIMEOUT,
                        graceful_timeout=GRACEFUL_TIMEOUT,
                        websocket_max_message_size=MAX_WS_MESSAGE,
                    )
                )
                log.info("dashboard listening", url=info.url)
                task_status.started(info)
    finally:
        for sock in sockets:
            sock.close()


def _url_host(requested: str, bound: str) -> str:
    try:
        address = ipaddress.ip_address(bound)
    except ValueError:
        return bound
    if address.is_unspecified:
        return "::1" if address.version == 6 else "127.0.0.1"
    return requested if requested.lower() == "localhost" else bound
