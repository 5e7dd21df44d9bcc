"""The SDK client of one connection, made from the embedder's options.

The embedder's ``client_options`` (resolved for the server, its protocol pinned) are the
SDK ``Client``'s keyword arguments, with these additions: the logging callback tells the
transport when each log message is handled (an answered call waits for the ones before
its answer); the elicitation callback gets its defaults filled in and its answers
checked (:mod:`._elicitation`); the tasks extension is declared (:mod:`._tasks`); the
server's change notices are routed to the incarnation's :class:`~._listing.Listings`
(re-fetched in its nursery), and its resource updates published if they were subscribed
to — then the embedder's own message handler sees every message as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import mcp_types as types
import trio
from mcp import Client
from mcp.client import ClientExtension
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..events import _catalog as events
from ..transports._remote import TransportLike
from . import _tasks as tasks
from ._elicitation import checked_elicitation
from ._listing import Listings
from ._options import pinned, resolved


@asynccontextmanager
async def open_client(
    server: Any, transport: TransportLike, listings: Listings, nursery: trio.Nursery
) -> AsyncIterator[Client]:
    """The SDK client of ``server`` (its ServerHandle) over ``transport``, for the
    duration of the block; what its notices ask for runs in ``nursery``."""
    options = pinned(
        resolved(server.client_options, server.name),
        getattr(server.config, "protocol", "auto"),
    )
    user_handler = cast("MessageHandlerFnT | None", options.pop("message_handler", None))
    logging_callback: Any = options.get("logging_callback")
    answers = getattr(transport, "answers", None)
    if logging_callback is not None and answers is not None:

        async def counted(params: types.LoggingMessageNotificationParams) -> None:
            try:
                await logging_callback(params)
            finally:
                answers.log_handled()  # a call answered after it may return now

        options["logging_callback"] = counted
    elicit: Any = options.get("elicitation_callback")
    if elicit is not None:  # defaults filled in, answers checked (see _elicitation)
        options["elicitation_callback"] = checked_elicitation(elicit, server.name)

    async def message_handler(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            nursery.start_soon(listings.relist)
        elif isinstance(message, types.ResourceListChangedNotification):
            nursery.start_soon(listings.refetch, "resources")
        elif isinstance(message, types.PromptListChangedNotification):
            nursery.start_soon(listings.refetch, "prompts")
        elif isinstance(message, types.ResourceUpdatedNotification):
            _resource_updated(server, str(message.params.uri))
        if user_handler is not None:
            await user_handler(message)

    given = cast("Sequence[ClientExtension] | None", options.pop("extensions", None))
    extensions = [tasks.CLIENT, *(given or ())]
    async with Client(
        transport,
        message_handler=message_handler,
        extensions=extensions,
        # the embedder's other Client keyword arguments, as it gave them
        **options,  # pyright: ignore[reportArgumentType]
    ) as client:
        tasks.parse_cheaply(client)
        if answers is not None:  # a 2026-07-28 result without resultType: complete
            answers.complete_by_default = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        yield client


def _resource_updated(server: Any, uri: str) -> None:
    """The server announced a change of ``uri``: published if it was subscribed to
    (a server may announce what nobody asked for; that is not passed on)."""
    if uri in server.subscribed.uris:
        server.emit(events.ResourceUpdated(server=server.name, uri=uri))
