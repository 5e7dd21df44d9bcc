"""Hypercorn's config and log as the supervisor serves with them
(:func:`~supervisor._serving.make_config`): sockets bound beforehand, and warnings and
errors into a structured logger. Apart from :mod:`supervisor._serving`, so that a
process that serves no HTTP with hypercorn (``serve`` over stdio, whose local socket the
gateway's own HTTP server serves) never loads it."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from hypercorn.config import Config, Sockets
from hypercorn.logging import Logger

from .log import get_logger

__all__ = ["SocketsConfig", "StructuredLog"]


class SocketsConfig(Config):
    """A hypercorn config that serves sockets bound beforehand, logging to a structured
    logger of the given name."""

    def __init__(self, sockets: Sequence[socket.socket], logger_name: str) -> None:
        self._sockets = list(sockets)
        self.logger_name = logger_name

    def create_sockets(self) -> Sockets:
        return Sockets(secure_sockets=[], insecure_sockets=list(self._sockets), quic_sockets=[])


class StructuredLog(Logger):
    """Hypercorn's log, into the supervisor's: warnings and errors only (with
    ``accesslog`` and ``errorlog`` unset, the base class logs nothing itself)."""

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._out = get_logger(getattr(config, "logger_name", __name__))

    async def warning(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._out.warning(_text(message, args), exc_info=kwargs.get("exc_info"))

    async def error(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._out.error(_text(message, args), exc_info=kwargs.get("exc_info"))

    async def critical(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._out.critical(_text(message, args), exc_info=kwargs.get("exc_info"))

    async def exception(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._out.error(_text(message, args), exc_info=True)


def _text(message: str, args: tuple[Any, ...]) -> str:
    return message % args if args else message
