"""Client options made for each server: the way a handler learns which server it serves."""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["PerServer", "per_server", "resolved"]


class PerServer:
    """A client option whose value is made for each server: ``factory(name)`` (see
    :func:`per_server`)."""

    __slots__ = ("factory",)

    def __init__(self, factory: Callable[[str], object]) -> None:
        self.factory = factory

    def __repr__(self) -> str:
        return f"per_server({self.factory!r})"


def per_server(factory: Callable[[str], object]) -> PerServer:
    """Give ``open_supervisor`` a client option made for each server: each server's
    ``mcp.Client`` gets ``factory(server_name)``. For a handler that must know which
    server it hears from — a ``logging_callback`` that tags each message with it::

        def logs_of(server):
            async def log(params):
                print(server, params.level, params.data)

            return log

        open_supervisor(config, logging_callback=per_server(logs_of))
    """
    return PerServer(factory)


def resolved(options: Mapping[str, object], server: str) -> dict[str, object]:
    """``options`` for the server ``server``: each :class:`PerServer` made for it."""
    return {
        key: value.factory(server) if isinstance(value, PerServer) else value
        for key, value in options.items()
    }
