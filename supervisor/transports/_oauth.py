"""A connection's side of OAuth: the ``httpx2.Auth`` that asks the server's token broker
(:mod:`supervisor.auth._broker`) for each request's token, and on a refusal for a renewed
one — where HTTP meets the broker, so the transports import the broker and it imports
nothing of them."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth

from ..auth._broker import AuthProblem, TokenBroker
from ..auth._renewal import _NoOAuth
from ._receipts import delivery

__all__ = ["BrokerAuth"]


class BrokerAuth(httpx2.Auth):
    """The ``httpx2.Auth`` of one connection: its broker's token on every request; a
    refused token (401, 403 ``insufficient_scope``) is renewed through the broker and
    the request sent once more. ``on_problem`` hears why no token could be had (the
    connection then fails with it)."""

    def __init__(self, broker: TokenBroker, on_problem: Callable[[AuthProblem], None]) -> None:
        self.broker = broker
        self._on_problem = on_problem

    def _present(self, request: httpx2.Request, token: str) -> None:
        request.headers.pop("DPoP", None)  # a proof is good for one sending
        request.headers.update(self.broker.presenting(request.method, request.url, token))

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        try:
            token = await self.broker.token()
        except AuthProblem as exc:
            self._on_problem(exc)
            raise
        if token is not None:
            self._present(request, token)
        response = yield request
        if token is not None and self.broker.nonce_asked(request.url, response):
            # Refused unseen for want of the server's DPoP nonce (RFC 9449 §9): the same
            # request once more, with a proof carrying it — the retry the protocol asks
            # for, not a second delivery (the server did not process the first).
            await response.aread()
            self._present(request, token)
            response = yield request
        refused = response.status_code == 401 or (
            response.status_code == 403
            and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        )
        if not refused:
            return
        await response.aread()
        try:
            token = await self.broker.rejected(token, response)
        except _NoOAuth:
            return  # the server's refusal is the answer
        except AuthProblem as exc:
            receipt = delivery.get()
            if receipt is not None:
                receipt.delivered = False  # refused unseen (401/403): it did not run
            self._on_problem(exc)
            raise
        self._present(request, token)
        yield request
