"""Hypercorn's configuration for the dashboard: our sockets, our limits, our log.

* **Sockets.** Hypercorn serves the sockets :func:`~._listen.listen` bound (its config
  would otherwise bind from ``bind`` strings itself); they are handed over through
  :meth:`Config.create_sockets`, which hypercorn calls once, when it starts serving.
* **Limits.** A request head larger than :data:`MAX_HEAD` bytes is ``431``; the head of
  a request must arrive, and an idle keep-alive connection is kept,
  :data:`IDLE_TIMEOUT` seconds; a message from a page larger than
  :data:`MAX_WS_MESSAGE` bytes closes its feed (1009). On shutdown, connections get
  :data:`GRACEFUL_TIMEOUT` seconds to finish. No ``Server`` header.
* **Log.** Hypercorn's warnings and errors go to the supervisor's structured log
  (``supervisor.dashboard.http``, secrets redacted); its access log and start-up
  messages are off.
"""

from __future__ import annotations

import socket
from typing import Any

from hypercorn.config import Config, Sockets
from hypercorn.logging import Logger

from ..log import get_logger

__all__ = ["make_config"]

#: Largest request head (request line and headers) accepted, in bytes.
MAX_HEAD = 16 * 1024
#: How long a connection may stay idle, or take to send a request head.
IDLE_TIMEOUT = 30.0
#: Largest message a page may send on its feed (it has no reason to send any).
MAX_WS_MESSAGE = 4096
#: How long open requests and feeds get to finish when the dashboard stops.
GRACEFUL_TIMEOUT = 2.0

log = get_logger("supervisor.dashboard.http")


class _Config(Config):
    """A hypercorn config that serves sockets bound beforehand."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        self._sockets = sockets

    def create_sockets(self) -> Sockets:
        return Sockets(secure_sockets=[], insecure_sockets=list(self._sockets), quic_sockets=[])


class _Log(Logger):
    """Hypercorn's log, into the supervisor's: warnings and errors only (with
    ``accesslog`` and ``errorlog`` unset, the base class logs nothing itself)."""

    async def warning(self, message: str, *args: Any, **kwargs: Any) -> None:
        log.warning(message % args if args else message, exc_info=kwargs.get("exc_info"))

    async def error(self, message: str, *args: Any, **kwargs: Any) -> None:
        log.error(message % args if args else message, exc_info=kwargs.get("exc_info"))

    async def critical(self, message: str, *args: Any, **kwargs: Any) -> None:
        log.critical(message % args if args else message, exc_info=kwargs.get("exc_info"))

    async def exception(self, message: str, *args: Any, **kwargs: Any) -> None:
        log.error(message % args if args else message, exc_info=True)


def make_config(sockets: list[socket.socket]) -> Config:
    """The config that serves *sockets* (see the module docstring)."""
    config = _Config(sockets)
    config.logger_class = _Log
    config.accesslog = None
    config.errorlog = None
    config.include_server_header = False
    config.h11_max_incomplete_size = MAX_HEAD
    config.keep_alive_timeout = IDLE_TIMEOUT
    config.websocket_max_message_size = MAX_WS_MESSAGE
    config.graceful_timeout = GRACEFUL_TIMEOUT
    return config
