"""Client options made for each server: the way a handler learns which server it serves
— and, on a ``perUser`` server's session of a team gateway's caller, which caller."""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["PerServer", "per_server", "pinned", "resolved"]

#: The client options that hand what a server sends to someone: a caller's own session
#: gets them only when made for that caller (:func:`per_server`'s ``for_caller``).
CALLBACKS = frozenset(
    {
        "sampling_callback",
        "elicitation_callback",
        "list_roots_callback",
        "logging_callback",
        "message_handler",
    }
)


class PerServer:
    """A client option whose value is made for each server: ``factory(name)``, and for a
    caller's own session ``for_caller(name, subject)`` (see :func:`per_server`)."""

    __slots__ = ("factory", "for_caller")

    def __init__(
        self,
        factory: Callable[[str], object],
        for_caller: Callable[[str, str], object] | None = None,
    ) -> None:
        self.factory = factory
        self.for_caller = for_caller

    def __repr__(self) -> str:
        return f"per_server({self.factory!r})"


def per_server(
    factory: Callable[[str], object],
    *,
    for_caller: Callable[[str, str], object] | None = None,
) -> PerServer:
    """Give ``open_supervisor`` a client option made for each server: each server's
    ``mcp.Client`` gets ``factory(server_name)``. For a handler that must know which
    server it hears from — a ``logging_callback`` that tags each message with it::

        def logs_of(server):
            async def log(params):
                print(server, params.level, params.data)

            return log

        open_supervisor(config, logging_callback=per_server(logs_of))

    A ``perUser`` server's session for one caller of a team gateway gets
    ``for_caller(server_name, subject)``; a handler without it (or given without
    ``per_server``) is not given such a session — it could answer one caller's question
    for another, or tell one what another's server said."""
    return PerServer(factory, for_caller)


def resolved(
    options: Mapping[str, object], server: str, caller: str | None = None
) -> dict[str, object]:
    """``options`` for the server ``server``: each :class:`PerServer` made for it — for
    the session of ``caller`` (a team gateway's caller), only the handlers made for that
    caller (:data:`CALLBACKS` made otherwise are left out)."""
    if caller is None:
        return {
            key: value.factory(server) if isinstance(value, PerServer) else value
            for key, value in options.items()
        }
    made: dict[str, object] = {}
    for key, value in options.items():
        if isinstance(value, PerServer) and value.for_caller is not None:
            made[key] = value.for_caller(server, caller)
        elif key not in CALLBACKS:
            made[key] = value.factory(server) if isinstance(value, PerServer) else value
    return made


def pinned(options: dict[str, object], protocol: str) -> dict[str, object]:
    """``options`` with the SDK ``mode`` a server's ``protocol`` field pins:
    ``"2025-11-25"`` goes straight to the ``initialize`` handshake (``mode="legacy"``);
    ``"auto"`` keeps the supervisor's (``open_supervisor(mode=...)``, else the SDK's
    ``"auto"``: ``server/discover``, falling back to the handshake)."""
    if protocol == "2025-11-25":
        options["mode"] = "legacy"
    return options
