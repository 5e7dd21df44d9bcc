"""Legacy SSE (the MCP spec's HTTP+SSE transport of 2024-11-05): the SDK's client with
our headers and timeouts, ``httpx2``'s errors leaving it as ours."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client

from ._errors import http_errors


@asynccontextmanager
async def sse_transport(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    read_timeout: float = 300.0,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[TransportStreams]:
    """The SDK's legacy SSE client transport, with our headers and timeouts.

    An ``httpx2`` error that ends the connection leaves as an
    :class:`~supervisor.errors.HTTPError` (see :func:`~supervisor.transports._errors.http_errors`).
    """
    with http_errors(url):
        async with sse_client(
            url,
            headers=dict(headers or {}),
            timeout=timeout,
            sse_read_timeout=read_timeout if read_timeout != math.inf else 86400.0,
            auth=auth,
        ) as streams:
            yield streams
