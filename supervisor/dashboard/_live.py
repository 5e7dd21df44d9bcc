"""``/ws``: one page's live feed, over the ASGI ``websocket`` scope.

The HTTP server (hypercorn) does the WebSocket handshake; :func:`serve_feed` is called
once the upgrade has passed the dashboard's checks. It accepts (with the security
headers), sends ``hello`` (the recent events, every health record, the strips and their
legend — what the page was served with, as of now), then an ``update`` (the new events,
every record, the strips) per burst of events, or every :data:`REFRESH_INTERVAL` seconds
when there are none. The feed is one-way: what the page sends is read and dropped. It
ends when the page leaves, or with code 1001 (going away) when the dashboard stops.

Why the ASGI scope rather than trio-websocket (which the dashboard used while it had its
own HTTP server): hypercorn owns each connection's stream and parses it itself, so an
upgrade could only reach trio-websocket through a second listener or a hand-off that
hypercorn does not offer. Through the scope, hypercorn (with wsproto) does the
handshake, the framing, the replies to pings and permessage-deflate, and the app refuses
an upgrade with its own JSON response (the ``websocket.http.response`` extension).

A page that stops reading cannot hold its feed forever: the dashboard's sockets have a
``TCP_USER_TIMEOUT`` (see :mod:`supervisor._serving`), so the kernel drops a
connection whose peer takes nothing for that long, and the feed then sees the page leave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..events._catalog import Event
from ._feed import Hub, feed_message
from ._http import Receive, Send
from ._security import SECURITY_HEADERS
from ._strips import Strips

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["REFRESH_INTERVAL", "hello", "serve_feed"]

#: How often an open page gets fresh figures (call counts, latencies) without an event.
REFRESH_INTERVAL = 2.0
#: Bound on sending the closing frame when the dashboard stops.
CLOSE_TIMEOUT = 2.0

_GOING_AWAY = 1001
_ACCEPT_HEADERS = [
    (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS
]


async def serve_feed(
    receive: Receive,
    send: Send,
    sup: SupervisorHandle,
    hub: Hub,
    strips: Strips,
    stopping: trio.Event,
) -> None:
    """Accept the upgrade and feed the page until it leaves or *stopping* is set."""
    await send({"type": "websocket.accept", "headers": _ACCEPT_HEADERS})
    history, outbox = hub.join()
    page_left = False
    try:
        async with trio.open_nursery() as nursery:

            async def watch_page() -> None:
                nonlocal page_left
                while (await receive())["type"] != "websocket.disconnect":
                    pass  # one-way: drop what the page sends
                page_left = True
                nursery.cancel_scope.cancel()

            async def watch_dashboard() -> None:
                await stopping.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_page)
            nursery.start_soon(watch_dashboard)
            message = hello(sup, history, strips)
            while True:
                await send({"type": "websocket.send", "text": message})
                events, dropped = await outbox.take(REFRESH_INTERVAL)
                message = feed_message(
                    "update", sup.status(), events, dropped, strips=strips.draw()
                )
    finally:
        hub.leave(outbox)
        if not page_left:
            # The dashboard stops (or this task is cancelled): say so to the page.
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT):
                await send({"type": "websocket.close", "code": _GOING_AWAY})


def hello(sup: SupervisorHandle, history: list[Event], strips: Strips) -> str:
    """The frame a page starts from — in the page itself, and first on its feed: every
    health record, *history* (the recent events), the strips and their legend."""
    return feed_message(
        "hello",
        sup.status(),
        history,
        strips=strips.draw(),
        legend=strips.legend(),
        window=strips.window,
    )
