"""How a server offers OAuth, and how its authorization server wants a client's secret.

A server that refuses a request may publish protected-resource metadata (RFC 9728)
naming its authorization server; a 2025-03-26 server publishes none and has its
authorization server at its own origin (metadata there, or that version's default
endpoints); a server that does neither does not speak OAuth, and its 401 stands. A
client with a secret authenticates at the token endpoint as the authorization server's
metadata lists (:func:`secret_method`). :class:`Discovery` holds what one broker has
learnt of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
)
from mcp.shared.auth import OAuthMetadata

from ..log import get_logger
from ._challenge import Challenge
from ._idjag import discover_issuer

log = get_logger("supervisor.auth")


async def legacy_issuer(http: httpx2.AsyncClient, url: str) -> str | None:
    """How a server without protected-resource metadata offers OAuth (2025-03-26): the
    issuer its origin's authorization-server metadata declares — it was found at the
    server's own origin, so that is the issuer expected of it — or ``""`` when there is
    no metadata, so that version's default endpoints (``/authorize``, ``/token`` and
    ``/register`` at the origin) are used, as it says: the server has them unless its
    ``/token`` is not there at all (:func:`_token_endpoint_there`); ``None`` then."""
    origin = "/".join(url.split("/", 3)[:3])
    answer = await http.get(origin + "/.well-known/oauth-authorization-server")
    if answer.status_code == 200 and "json" in answer.headers.get("content-type", ""):
        try:
            issuer = answer.json().get("issuer")
        except (ValueError, AttributeError):
            issuer = None
        return issuer if isinstance(issuer, str) and issuer.startswith("http") else ""
    answer = await http.post(origin + "/token", data={})
    return "" if _token_endpoint_there(answer) else None


def _token_endpoint_there(answer: httpx2.Response) -> bool:
    """Whether ``answer``, to an empty ``POST /token``, shows a token endpoint there. It
    does not when it is: nothing at that path (404, 405, 410, 501); a redirect (a token
    endpoint never redirects); the refusal a server that wants credentials gives on
    every path (401 or 403 without a token endpoint's error of RFC 6749 §5.2 — say
    RFC 6750's ``invalid_token``); or a success that is not JSON (a page served for any
    path). Anything else does: a token endpoint's refusal, or a lax one's token."""
    status = answer.status_code
    if status in (401, 403):
        try:
            said = answer.json()
        except ValueError:
            return False
        return isinstance(said, dict) and said.get("error") in _TOKEN_ENDPOINT_ERRORS
    if 200 <= status < 300:
        return "json" in answer.headers.get("content-type", "")
    return status >= 400 and status not in (404, 405, 410, 501)


#: What an OAuth token endpoint refuses a request with (RFC 6749 §5.2) — not what a
#: server that checks a bearer token on every path says (RFC 6750's ``invalid_token``).
_TOKEN_ENDPOINT_ERRORS = frozenset(
    {"invalid_request", "invalid_client", "invalid_grant", "unsupported_grant_type"}
)

SecretMethod = Literal["client_secret_basic", "client_secret_post"]

#: How a client with a secret authenticates at the token endpoint, in the order taken
#: among those the authorization server lists: Basic first, the one RFC 6749 (§2.3.1)
#: has every server support and recommends over the secret in the body.
_SECRET_METHODS: tuple[SecretMethod, ...] = ("client_secret_basic", "client_secret_post")


def secret_method(supported: Sequence[str] | None) -> SecretMethod:
    """How a client with a secret authenticates at a token endpoint whose authorization
    server lists ``supported`` (its metadata's ``token_endpoint_auth_methods_supported``):
    ``client_secret_basic`` when listed — or when nothing is, RFC 8414's default — else
    ``client_secret_post`` when listed, else ``client_secret_basic``."""
    if not supported:
        return "client_secret_basic"
    for method in _SECRET_METHODS:
        if method in supported:
            return method
    return "client_secret_basic"


async def server_metadata(
    http: httpx2.AsyncClient, issuer: str | None, url: str
) -> OAuthMetadata | None:
    """The authorization-server metadata of ``issuer`` (RFC 8414 and OpenID discovery,
    path-aware; ``None``: the 2025-03-26 place, ``url``'s origin), if it publishes any."""
    for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        response = await http.send(create_oauth_metadata_request(candidate))
        await response.aread()
        go_on, metadata = await handle_auth_metadata_response(response)
        if metadata is not None or not go_on:
            return metadata
    return None


class Discovery:
    """What one broker has learnt of how its server (at ``url``) offers OAuth: whether
    it does (:attr:`speaks`, ``None`` until asked), a 2025-03-26 server's issuer
    (:attr:`legacy_issuer`), and how the client authenticates with its secret
    (:attr:`secret_method`, ``None``: not looked up yet)."""

    __slots__ = ("legacy_issuer", "secret_method", "speaks", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self.speaks: bool | None = None
        #: a 2025-03-26 server's (no protected-resource metadata): the issuer its origin's
        #: authorization-server metadata declares, ``""`` when it has none (the fallback)
        self.legacy_issuer: str | None = None
        #: as the authorization server's metadata lists; ``tokenEndpointAuthMethod`` wins
        self.secret_method: SecretMethod | None = None

    async def speaks_oauth(self, challenge: Challenge | None, *, grant: str) -> bool:
        """Whether the server's refusal can be answered with OAuth at all: it publishes
        protected-resource metadata (RFC 9728), or — a 2025-03-26 server — authorization-
        server metadata at its origin, or else that version's default endpoints are used
        (unless its ``/token`` is not there at all). Asked once; a server that does none
        of these is refused as a plain HTTP 401 (wrong or missing credentials in its
        headers)."""
        if self.speaks is None:
            if grant == "identity_assertion":
                self.speaks = True
            else:
                async with httpx2.AsyncClient(timeout=10.0) as http:
                    found = await discover_issuer(http, self.url, challenge) is not None
                    if not found:
                        self.legacy_issuer = await legacy_issuer(http, self.url)
                        found = self.legacy_issuer is not None
                self.speaks = found
        return self.speaks

    async def follow_metadata(
        self, auth: Any, issuer: str | None, challenge: Challenge | None, *, fresh: bool
    ) -> bool:
        """A client with a secret and no ``tokenEndpointAuthMethod`` (in ``auth``, the
        server's ``AuthConfig``) authenticates at the token endpoint as its authorization
        server (``issuer``, else discovered) lists (:func:`secret_method`), whatever the
        grant: looked up before the first flow, and again at each one from the start.
        Whether that changed the method (the provider is then made again). An
        authorization server that cannot be reached is left to the flow to report."""
        if auth.token_endpoint_auth_method or not auth.client_id or not auth.client_secret:
            return False
        if self.secret_method is not None and not fresh:
            return False
        async with httpx2.AsyncClient(timeout=30.0) as http:
            try:
                if not issuer:
                    issuer = await discover_issuer(http, self.url, challenge)
                metadata = await server_metadata(http, issuer, self.url)
            except httpx2.HTTPError as exc:
                log.debug("no authorization-server metadata", url=self.url, error=str(exc))
                return False
        method = secret_method(metadata.token_endpoint_auth_methods_supported if metadata else None)
        if method == self.secret_method:
            return False
        self.secret_method = method
        return True
