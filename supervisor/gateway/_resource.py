"""The team gateway's check of its callers' access tokens, as an OAuth resource server:
:class:`JWTVerifier`, the SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068) issued
by the team's authorization server.

A token is taken when its signature is by a key of the issuer's JWKS (an asymmetric
algorithm of those allowed, never ``none`` nor a shared secret), its ``iss`` is the
issuer, its ``aud`` names the gateway's resource URL, and it has not expired (with a small
leeway); its ``sub`` is the caller. Everything the token says is untrusted until then:
its size is checked before it is parsed, and its header only picks the key. The JWKS is
fetched once (from ``jwks_uri`` of the issuer's metadata when not given) and again when a
token names a key it does not hold — a rotation — at most once per ``min_refetch``
seconds, so a flood of made-up key ids costs no flood of fetches.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import httpx2
import jwt
import trio
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.server.auth.provider import AccessToken

__all__ = ["JWTVerifier"]

#: The signature algorithms taken by default: asymmetric only (a key of a JWKS is public).
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
#: Larger tokens are refused unread.
MAX_TOKEN_BYTES = 16 * 1024
#: Larger JWKS or metadata documents are refused unread.
MAX_DOCUMENT_BYTES = 256 * 1024


class _InvalidToken(Exception):
    """Why a token was refused (for the log and the ``error_description``, never with the
    token in it)."""


@attrs.define
class JWTVerifier:
    """Checks access tokens of ``issuer`` meant for ``audience`` (the gateway's resource
    URL). ``jwks_url``: where the issuer's keys are (default: its metadata's
    ``jwks_uri``). ``groups_claim``: the claim listing the caller's groups."""

    issuer: str
    audience: str
    jwks_url: str | None = None
    algorithms: Sequence[str] = ASYMMETRIC
    leeway: float = 30.0
    groups_claim: str = "groups"
    min_refetch: float = 30.0
    http: httpx2.AsyncClient | None = None
    clock: Callable[[], float] = time.monotonic
    _keys: dict[str | None, jwt.PyJWK] = attrs.field(factory=dict, init=False)
    _fetched_at: float | None = attrs.field(default=None, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    fetches: int = attrs.field(default=0, init=False)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier``: the token's access, or ``None`` if refused."""
        try:
            return await self.check(token)
        except _InvalidToken:
            return None

    async def check(self, token: str) -> AccessToken:
        """The token's access; :class:`_InvalidToken` saying why it is refused."""
        if len(token) > MAX_TOKEN_BYTES:
            raise _InvalidToken(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _InvalidToken("the token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise _InvalidToken(f"the token is signed with {algorithm!r}, not one allowed")
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise _InvalidToken(f"the token is refused: {exc}") from None
        scope = claims.get("scope")
        scopes = scope.split() if isinstance(scope, str) else []
        groups = claims.get(self.groups_claim)
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims={
                "iss": claims["iss"],
                "groups": [str(g) for g in groups] if isinstance(groups, list) else [],
            },
        )

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        """The issuer's key ``kid`` (the only one, for a token naming none), fetching the
        JWKS when it is not held — again at most once per ``min_refetch`` seconds."""
        key = self._pick(kid)
        if key is not None:
            return key
        async with self._lock:
            key = self._pick(kid)  # fetched meanwhile, by the task that held the lock
            now = self.clock()
            if key is None and (
                self._fetched_at is None or now - self._fetched_at >= self.min_refetch
            ):
                await self._fetch()
                key = self._pick(kid)
        if key is None:
            raise _InvalidToken(f"the issuer has no key {kid!r}")
        return key

    def _pick(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        self._fetched_at = self.clock()
        self.fetches += 1
        async with _client(self.http) as http:
            url = self.jwks_url or await self._jwks_uri(http)
            document = await _document(http, url, "the issuer's JWKS")
        try:
            keys = jwt.PyJWKSet.from_dict(document).keys
        except jwt.PyJWTError as exc:
            raise _InvalidToken(f"the issuer's JWKS cannot be read: {exc}") from None
        self._keys = {key.key_id: key for key in keys}

    async def _jwks_uri(self, http: httpx2.AsyncClient) -> str:
        """``jwks_uri`` of the issuer's metadata (RFC 8414, then OpenID discovery)."""
        for url in build_oauth_authorization_server_metadata_discovery_urls(
            self.issuer, self.issuer
        ):
            try:
                metadata = await _document(http, url, "the issuer's metadata")
            except _InvalidToken:
                continue
            if metadata.get("issuer") != self.issuer:
                continue  # RFC 8414 §3.3: not this issuer's
            uri = metadata.get("jwks_uri")
            if isinstance(uri, str) and uri.startswith(("https://", "http://")):
                self.jwks_url = uri
                return uri
        raise _InvalidToken(f"the issuer {self.issuer} publishes no jwks_uri")


def _client(http: httpx2.AsyncClient | None) -> Any:
    """The caller's client (left open), or one of its own for this fetch."""
    return contextlib.nullcontext(http) if http is not None else httpx2.AsyncClient(timeout=10.0)


async def _document(http: httpx2.AsyncClient, url: str, what: str) -> dict[str, Any]:
    """The JSON object at ``url``, within :data:`MAX_DOCUMENT_BYTES`."""
    try:
        async with http.stream("GET", url) as response:
            if response.status_code != 200:
                raise _InvalidToken(f"{what} at {url}: HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise _InvalidToken(f"{what} at {url} is over {MAX_DOCUMENT_BYTES} bytes")
    except httpx2.HTTPError as exc:
        raise _InvalidToken(f"{what} at {url} cannot be fetched: {exc}") from None
    try:
        document = json.loads(bytes(body))
    except ValueError:
        raise _InvalidToken(f"{what} at {url} is not JSON") from None
    if not isinstance(document, dict):
        raise _InvalidToken(f"{what} at {url} is not a JSON object")
    return document
