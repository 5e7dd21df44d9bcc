"""Streamable HTTP: the SDK's client transport with our headers, timeouts and receipts.

:func:`http_transport` wraps the SDK's Streamable HTTP client; it is where HTTP enters,
so ``httpx2``'s errors leave it as ours (:func:`~supervisor.transports._errors.http_errors`).
Its client (:func:`http_client`) tracks delivery: the receipt transport marks a request's
:class:`~supervisor.transports._receipts.Receipt` once it starts going out on the wire. And
it bounds what the server sends (:mod:`supervisor.transports._bodies`): each body and
event within ``maxMessageBytes``, each listing's page within the catalog limits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx2
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client

from .._sdk import TransportStreams
from ..config._limits import Limits
from ._bodies import Layer, bounded
from ._errors import http_errors, safe_url
from ._receipts import delivery

if TYPE_CHECKING:
    from ._faults import Faults


class _ReceiptTransport(Layer):
    """Marks the sender's :class:`~._receipts.Receipt` when a request starts going out on the wire.

    The SDK sends each request from a task that carries the sender's context, so the
    receipt set around ``call_tool`` is visible here. httpcore's trace events tell when
    the request's headers start being written: before that (a refused connection, a
    cancellation while connecting) the server cannot have seen it. A kept-alive
    connection the server has closed is given up before anything is written on it
    (httpcore2 2.17 checks just before writing, 2.16 when the pool hands it out) and the
    request takes a fresh one, or meets the refusal: a server going away as a request
    leaves may get it or not, and the receipt tells which. Entering and leaving it enter
    and leave ``inner``.
    """

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        receipt = delivery.get()
        if receipt is not None:
            outer = request.extensions.get("trace")

            async def trace(event: str, info: dict[str, object]) -> None:
                if event.endswith("send_request_headers.started") and not receipt.deliver():
                    # given up as never sent (and sent again elsewhere): not now
                    raise httpx2.ConnectError("request withdrawn before it was sent")
                if outer is not None:
                    await outer(event, info)

            request.extensions["trace"] = trace
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client(
    headers: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
    read_timeout: float = 300.0,
    auth: httpx2.Auth | None = None,
    on_status: Callable[[int], None] | None = None,
    faults: Faults | None = None,
    limits: Limits | None = None,
    server: str = "remote",
) -> httpx2.AsyncClient:
    """The HTTP client a remote transport uses: headers, timeouts and auth in one place.

    It tracks delivery (see :class:`~._receipts.Receipt`): a request that could not even connect is
    known not to have reached the server, and its receipt keeps its response's status.
    ``on_status`` sees every response's status.
    What the server sends is bounded by ``limits`` (its ``max_message_bytes`` and catalog
    limits; the defaults without): see :class:`~._bodies.BoundedTransport`; ``server``
    names it in the log.
    With ``faults`` (the server's fault injection, :class:`~._faults.Faults`), every
    exchange goes through its fault plan (its wrapper around the client's transport,
    docs/faults.md): a request a fault keeps from the server counts as not delivered, and
    ``on_status`` sees injected statuses.
    """

    async def record(response: httpx2.Response) -> None:
        # (the hook runs in the sending task, where the request's receipt is)
        if (receipt := delivery.get()) is not None:
            receipt.http_status = response.status_code
        if on_status is not None:
            on_status(response.status_code)

    hooks: dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]] = {"response": [record]}
    wire: httpx2.AsyncBaseTransport = bounded(httpx2.AsyncHTTPTransport(), limits, server)
    if faults is not None:
        # inside the receipt: a request a fault keeps back never reaches the wire
        wire = faults.wrap_http(wire)
    return httpx2.AsyncClient(
        headers=dict(headers or {}),
        timeout=httpx2.Timeout(timeout, read=read_timeout),
        auth=auth,
        transport=_ReceiptTransport(wire),
        event_hooks=hooks,
    )


def streamable_http_abandoned(error: types.ErrorData) -> bool:
    """Whether ``error`` is one the SDK's Streamable HTTP client made itself, for a request
    whose answer can never come (its response stream ended or failed without one, or the
    server answered a request with 202): the connection, not the server, ended it.

    The client puts these on the read stream as if they were answers, so only their words
    tell them apart; a server that sends the same words as its own error is taken at them
    — it loses its own connection, as it could by ending the stream.
    """
    return error.code == types.CONNECTION_CLOSED and (
        error.message.startswith("SSE stream ")
        or error.message == "server answered a request with 202 Accepted"
    )


@asynccontextmanager
async def http_transport(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    read_timeout: float = 300.0,
    auth: httpx2.Auth | None = None,
    on_status: Callable[[int], None] | None = None,
    faults: Faults | None = None,
    limits: Limits | None = None,
    server: str | None = None,
) -> AsyncIterator[TransportStreams]:
    """The SDK's Streamable HTTP client transport, with our headers and timeouts, and
    what the server sends bounded by ``limits`` (see :func:`http_client`; ``server``
    names it in the log, its URL without).

    An ``httpx2`` error that ends the connection leaves as an
    :class:`~supervisor.errors.HTTPError` (see
    :func:`~supervisor.transports._errors.http_errors`). With ``faults``, the connection
    goes through its fault plan (see :func:`http_client`); one :class:`~._faults.Faults`
    serves every connection to the server, each new transport being a start of it (for
    ``slow_start``).
    """
    client = http_client(
        headers,
        timeout=timeout,
        read_timeout=read_timeout,
        auth=auth,
        on_status=on_status,
        faults=faults,
        limits=limits,
        server=server or safe_url(url),
    )
    # Its events are bounded underneath (by maxMessageBytes): the SDK's own bound, 1 MiB
    # by default, would end the connection over a smaller one.
    biggest = (limits or Limits()).max_message_bytes
    with http_errors(url):
        async with (
            client,
            streamable_http_client(url, http_client=client, max_sse_event_size=biggest) as streams,
        ):
            yield streams
