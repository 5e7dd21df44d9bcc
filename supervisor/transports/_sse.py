"""Legacy SSE (the MCP spec's HTTP+SSE transport of 2024-11-05): the SDK's client with
our headers and timeouts, ``httpx2``'s errors leaving it as ours, and what the server
sends bounded (:mod:`supervisor.transports._bodies`)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx2
from mcp.client.sse import sse_client

from .._sdk import TransportStreams
from ..config._limits import Limits
from ._bodies import SSE_EVENT_BYTES, bounded
from ._errors import http_errors, safe_url


@asynccontextmanager
async def sse_transport(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    read_timeout: float = 300.0,
    auth: httpx2.Auth | None = None,
    limits: Limits | None = None,
    server: str | None = None,
) -> AsyncIterator[TransportStreams]:
    """The SDK's legacy SSE client transport, with our headers and timeouts.

    An ``httpx2`` error that ends the connection leaves as an
    :class:`~supervisor.errors.HTTPError` (see :func:`~supervisor.transports._errors.http_errors`).
    What the server sends is bounded by ``limits`` (the defaults without) as over
    Streamable HTTP (:class:`~supervisor.transports._bodies.BoundedTransport`; ``server``
    names it in the log), each event also by :data:`SSE_EVENT_BYTES`, the most the SDK's
    SSE reader takes (a larger event would end the connection).
    """
    biggest = (limits or Limits()).max_message_bytes
    name = server or safe_url(url)

    def client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        wire = bounded(
            httpx2.AsyncHTTPTransport(),
            limits,
            name,
            max_message_bytes=min(biggest, SSE_EVENT_BYTES),
            sse_event=SSE_EVENT_BYTES < biggest,
        )
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=wire)

    with http_errors(url):
        async with sse_client(
            url,
            headers=dict(headers or {}),
            timeout=timeout,
            sse_read_timeout=read_timeout if read_timeout != math.inf else 86400.0,
            httpx_client_factory=client,
            auth=auth,
        ) as streams:
            yield streams
