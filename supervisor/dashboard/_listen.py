"""The dashboard's listening sockets, bound by trio and handed to the HTTP server.

:func:`listen` binds like :func:`trio.open_tcp_listeners` (every address of a name such
as ``localhost``, ``SO_REUSEADDR``, IPv6 sockets v6-only; ``OSError`` when it cannot),
keeping only the first socket for port 0, whose other addresses would each get their
own free port. Each socket has ``TCP_USER_TIMEOUT`` = :data:`STALL_TIMEOUT` where the
platform has it; accepted connections inherit it, so the kernel drops a connection whose
peer has taken nothing we sent (a page that stopped reading its feed, say) for that long.
The HTTP server sends with cancellation shielded, so this bound is what keeps a stuck
peer from holding a task, or the dashboard's shutdown, forever.
"""

from __future__ import annotations

import socket

import trio

__all__ = ["STALL_TIMEOUT", "listen"]

#: Seconds a peer may leave what we send unread (or unacknowledged) before it is dropped.
STALL_TIMEOUT = 30.0


async def listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for *host*:*port*, which the caller closes."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    if port == 0:
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    sockets = [socket.socket(fileno=listener.socket.detach()) for listener in listeners]
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    for sock in sockets:
        sock.setblocking(False)
        if user_timeout is not None:
            sock.setsockopt(socket.IPPROTO_TCP, user_timeout, int(STALL_TIMEOUT * 1000))
    return sockets
