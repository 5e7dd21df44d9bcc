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
:data:`IDLE_TIMEOUT` seconds, and its body within
:data:`~supervisor._serving.BODY_TIMEOUT` seconds of its head (``408`` then); a
message from a page larger than :data:`MAX_WS_MESSAGE` bytes closes its feed (1009). Its
sockets have ``TCP_USER_TIMEOUT`` =
:data:`~supervisor._serving.STALL_TIMEOUT`, so a page that stopped reading its feed
cannot hold it, or the shutdown, forever. Hypercorn's warnings and errors are logged as
``supervisor.dashboard.http`` (secrets redacted); there is no ``Server`` header.
"""

from __future__ import annotations

import ipaddress
import secrets
import urllib.parse
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from .._serving import listen, serve_sockets
from ..log import get_logger, redacting
from ._address import format_host, is_loopback
from ._app import DashboardApp
from ._feed import Hub
from ._security import Guard, check_token, exposure
from ._strips import WINDOW, Strips

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["DashboardInfo", "serve_dashboard"]

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
    is the dashboard's secret: what :attr:`login_url` carries, and what a script sends
    as ``Authorization: Bearer TOKEN``; it is left out of ``repr``. ``login_to_read``
    says whether reading needs the login too (always beyond loopback).
    """

    url: str
    host: str
    port: int
    token: str = attrs.field(repr=False)
    login_to_read: bool = False

    @property
    def login_url(self) -> str:
        """The URL whose visit logs a browser in (``http://127.0.0.1:8080/login?token=…``):
        it sets the session cookie that restart and stop need. It holds the token."""
        return f"{self.url}login?token={urllib.parse.quote(self.token, safe='')}"


async def serve_dashboard(
    sup: SupervisorHandle,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    login_to_read: bool = False,
    task_status: trio.TaskStatus[DashboardInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the web dashboard of *sup* on *host*:*port* until cancelled.

    Use with ``nursery.start``: it reports a :class:`DashboardInfo` once listening
    (``port=0`` picks a free port). Restart and stop need the login: a browser gets it
    by visiting :attr:`DashboardInfo.login_url`, a script sends ``Authorization: Bearer
    TOKEN``. *token* is that secret (printable ASCII, no spaces, at least 16
    characters); without one a random token is made for this call. Reading (the page,
    its feed, metrics, health) is open to whoever reaches a loopback *host*, and needs
    the login too beyond loopback, or with *login_to_read*. A *host* beyond loopback
    without a *token* raises ``ValueError`` from ``start``, before anything listens, as
    does a *token* unfit for the job; an address that cannot be bound raises
    ``OSError``. One failing request is logged and answered ``500``, never taking the
    listener down. Cancelling stops accepting, closes every page's feed (code 1001) and
    returns, within bounds.
    """
    refused = exposure(host, token)
    if refused is not None:
        raise ValueError(f"{refused}: pass token= (then reading needs the login too)")
    if token is not None and (unfit := check_token(token)) is not None:
        raise ValueError(f"the dashboard's token is refused: {unfit}")
    token = token if token is not None else secrets.token_urlsafe(32)
    login_to_read = login_to_read or not is_loopback(host)
    sockets = await listen(host, port)
    try:
        bound_host, bound_port = sockets[0].getsockname()[:2]
        info = DashboardInfo(
            url=f"http://{format_host(_url_host(host, bound_host))}:{bound_port}/",
            host=bound_host,
            port=bound_port,
            token=token,
            login_to_read=login_to_read,
        )
        stopping = trio.Event()
        guard = Guard(token, host, bound_port, login_to_read=login_to_read)
        # The token is redacted from logs while the dashboard serves; the calls are kept
        # (for the strips) while it serves.
        with redacting([token]), sup.recent_calls(WINDOW) as calls:
            strips = Strips(sup, calls)
            hub = Hub(observe=strips.observe)
            app = DashboardApp(sup, guard, hub, strips, stopping)
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
