"""The SDK provider's flow, driven once with a probe request to the server that is never sent.

The provider is given the server's real challenge (its ``WWW-Authenticate``, with the
scopes wanted added) as the probe's answer; every request it makes on the way
(discovery, registration, token) is sent for real, and the token is read off the probe
when the provider hands it back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import httpx2
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from ..errors import AuthProblem
from ._challenge import Challenge, bearer, challenge_header

#: How one of the provider's requests is sent (and read).
Send = Callable[[httpx2.AsyncClient, httpx2.Request], Awaitable[httpx2.Response]]


async def drive(
    provider: httpx2.Auth,
    http: httpx2.AsyncClient,
    url: str,
    *,
    rejected: str | None,
    challenge: Challenge | None,
    fresh: bool,
    scopes: Callable[[], Sequence[str]],
    unattended: str | None,
    send: Send,
    refreshed: Callable[[], None],
) -> str:
    """Run ``provider``'s flow once for the server at ``url``; the new token (never
    ``rejected``; with ``fresh``, never the one it held). ``unattended``: a person is
    needed for a login but may not be asked now — what to tell them instead (raised as
    :class:`AuthProblem`). ``scopes`` are added to the challenge's; ``refreshed`` is
    called for each refresh that worked."""
    probe = httpx2.Request(
        "POST",
        url,
        headers={"mcp-protocol-version": LATEST_HANDSHAKE_VERSION},
    )
    challenged = False
    flow = provider.async_auth_flow(probe)
    try:
        outgoing = await flow.__anext__()
        while True:
            if outgoing is probe:
                token = bearer(probe)
                if token is not None and token != rejected and (challenged or not fresh):
                    return token
                if challenged:
                    raise AuthProblem(
                        "the authorization server gave no usable token",
                        needs_login=False,
                    )
                if unattended is not None:
                    raise AuthProblem(unattended, needs_login=True)
                challenged = True
                probe.headers.pop("authorization", None)
                status = challenge.status if challenge is not None else 401
                response = httpx2.Response(
                    status,
                    headers=challenge_header(challenge, scopes()),
                    request=probe,
                )
            else:
                response = await send(http, outgoing)
                refresh = b"grant_type=refresh_token" in (outgoing.content or b"")
                if refresh and response.status_code == 200:
                    refreshed()  # counted once it worked
            outgoing = await flow.asend(response)
    except StopAsyncIteration:
        token = bearer(probe)
        if token is None or token == rejected:
            raise AuthProblem(
                "the authorization server gave no usable token", needs_login=False
            ) from None
        return token
    finally:
        await flow.aclose()
