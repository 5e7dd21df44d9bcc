"""The team gateway's check of its callers' access tokens, on the call path: what a
request to ``serve --http`` taking JWTs (``supervisor.gateway.auth``) does beyond one with
a static token, measured in this process.

A team gateway's request runs :meth:`~supervisor.gateway._resource.ResourceGate.authenticate`
(the ``Authorization`` header's JWT, checked once against the issuer's keys and then kept
until it expires) and narrows the gateway to the caller (the policy's grant, the
:class:`~supervisor.gateway._policy.Narrowed` view); a static-token gateway compares the
header with its token. ``gateway_auth_call_us`` is the difference per request, in the
steady state (the token kept): the issuer is the OAuth fixture of
:mod:`supervisor.testing`, issuing ES256 JWT access tokens on loopback. Timing the check
itself, rather than two gateway processes' calls, keeps the figure free of what two
processes differ by (their placement on the cores alone is worth hundreds of µs here).
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from ..config._model import GatewayAuth, PolicyRule
from ..gateway._http import _matches
from ..gateway._policy import Narrowed, Policy
from ..gateway._resource import ResourceGate
from ..testing.servers._oauth import open_oauth_server
from ._alternate import alternate, blocks
from ._suite import RoundFn, Suite

#: what a team gateway's token check adds to a request, µs
GATEWAY_AUTH = "gateway_auth_call_us"
#: requests per block when alternating the two checks
_BLOCK = 500


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def _open_auth() -> AsyncIterator[RoundFn]:
    """The team's AS, a resource gate of a gateway URL, and a JWT of that AS for it."""
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    async with open_oauth_server(jwt_access_tokens=True, resources=[url]) as fx:
        gate = ResourceGate.from_config(GatewayAuth(issuer=fx.issuer, resource=url))
        policy = Policy((PolicyRule(),))
        token = fx.provider.issue_tokens("bench", [], resource=url, subject="bench")
        header = f"Bearer {token.access_token}"
        static = "bench-static-token-0123456789abcdef"
        static_header, expected = f"Bearer {static}", static.encode()
        await gate.authenticate(header)  # the first check: the keys fetched, the token kept

        async def team(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                caller = await gate.authenticate(header)
                # built, never used: its making is what is timed, so any host will do
                Narrowed(gate, caller, policy.grant(caller))  # pyright: ignore[reportArgumentType]
            return time.perf_counter() - start

        async def static_token(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                if not _matches(static_header, expected):
                    raise AssertionError("the static token does not match itself")
            return time.perf_counter() - start

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            n = sizes.get(GATEWAY_AUTH, 0)
            if not n:
                return {}
            ours, theirs = await alternate(team, static_token, blocks(n, _BLOCK), False)
            return {GATEWAY_AUTH: (ours - theirs) / n * 1e6}

        yield round_


GATEWAY_AUTH_SUITE = Suite("gateway-auth", _open_auth, rounds=5, quick_rounds=1)
