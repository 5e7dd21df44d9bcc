"""Workload identity (SEP-1933): the RFC 7523 jwt-bearer grant with the workload's own JWT.

A platform gives a workload a JWT of its own — a Kubernetes projected service-account
token, a CI job's OIDC token — in a file it rotates, or in an environment variable. An
authorization server that trusts the platform's issuer takes that JWT as the grant
itself (RFC 7523 §2.1: ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``, the
JWT as ``assertion``, the client named by ``client_id``), with no identity provider
exchange first. :class:`WorkloadIdentityOAuthProvider` is the SDK's OAuth client provider
(discovery, the issuer check, token storage) with that grant as its authorization step.

* **The assertion is read at each token request**, never kept: what the platform wrote
  last is what is sent, the first token's request and every renewal's alike. Each one
  read is registered with the log redactor, the last two only (a platform that rotates
  hourly for months would otherwise make thousands).
* **An expired JWT is not sent** (one that expired more than a minute ago: the
  authorization server's clock may be behind): the platform has not renewed it, and the
  server's authorization fails saying so.
* **A refusal is final for that assertion**: the authorization server's ``error`` and
  ``error_description`` (escaped: they are its words) are raised once, with where the
  assertion came from and — when the JWT says why (expired, another audience) — what to
  change. The broker fails the server's authorization with it (``auth_failed``): no
  second request, no other grant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin

import httpx2
import jwt
from mcp.client.auth import OAuthFlowError, OAuthTokenError, TokenStorage
from mcp.client.auth.utils import issuers_match
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthClientMetadata

from .._sdk import OAuthProvider
from .._util._printable import printable
from ._idjag import read_secret

__all__ = ["AssertionSource", "WorkloadIdentityOAuthProvider"]

#: how many assertions read stay registered with the log redactor: the last and the one
#: before it (a log line about it may still be on its way)
_ASSERTION_GENERATIONS = 2

#: seconds past its ``exp`` a JWT is still sent, the authorization server judging it (its
#: clock may be behind ours); one expired longer ago is not sent at all
EXPIRY_LEEWAY = 60.0


class AssertionSource:
    """Where the workload's JWT is — ``file`` (relative to ``base_dir``) or the
    environment variable ``env`` — read afresh by each :meth:`read`."""

    def __init__(
        self,
        file: str | None,
        env: str | None,
        base_dir: Path | None,
        *,
        remember: Callable[[str], None] = lambda secret: None,
        forget: Callable[[str], None] = lambda secret: None,
    ) -> None:
        self.file = file
        self.env = env
        self.base_dir = base_dir
        self._remember = remember
        self._forget = forget
        self._held: list[str] = []

    @property
    def where(self) -> str:
        """``the workload token in /var/run/…/token`` or ``… in $VAR``, for messages."""
        if self.file:
            path = Path(self.file).expanduser()
            if not path.is_absolute() and self.base_dir is not None:
                path = self.base_dir / path
            return f"the workload token in {path}"
        return f"the workload token in ${self.env}"

    def read(self) -> str:
        """The JWT there now; :class:`OAuthTokenError` when there is none (a missing,
        unreadable or empty file, an unset variable), saying where it looked."""
        try:
            assertion = read_secret(self.file, self.env, self.base_dir, "the workload token")
        except OAuthTokenError as exc:
            raise OAuthTokenError(
                f"{exc} (assertionFile or assertionEnv: the platform has not written it, or "
                "it is not mounted here)"
            ) from None
        self._hold(assertion)
        return assertion

    def _hold(self, assertion: str) -> None:
        self._remember(assertion)
        if assertion in self._held:
            return
        self._held.append(assertion)
        if len(self._held) > _ASSERTION_GENERATIONS:
            self._forget(self._held.pop(0))


class WorkloadIdentityOAuthProvider(OAuthProvider):
    """The SDK's provider with the jwt-bearer grant of the workload's own JWT as its
    authorization step. The client is ``client_id``: a public one (``none``: named in
    the request) or one with ``client_secret`` sent as ``token_endpoint_auth_method``
    says. With ``issuer``, the assertion is only ever sent to that authorization server
    (its metadata found for it, else the flow stops)."""

    def __init__(
        self,
        server_url: str,
        storage: TokenStorage,
        client_id: str,
        assertion: AssertionSource,
        *,
        client_secret: str | None = None,
        token_endpoint_auth_method: Literal[
            "none", "client_secret_basic", "client_secret_post"
        ] = "none",
        scope: str | None = None,
        issuer: str | None = None,
    ) -> None:
        metadata = OAuthClientMetadata(
            redirect_uris=None,
            grant_types=[JWT_BEARER_GRANT_TYPE],
            token_endpoint_auth_method=token_endpoint_auth_method,
            scope=scope,
        )
        super().__init__(server_url, metadata, storage, None, None)
        self.assertion = assertion
        self.issuer = issuer
        self.fixed_client = OAuthClientInformationFull(
            redirect_uris=None,
            client_id=client_id,
            client_secret=client_secret,
            grant_types=[JWT_BEARER_GRANT_TYPE],
            token_endpoint_auth_method=token_endpoint_auth_method,
            scope=scope,
        )
        #: the assertion the last token request sent (what a refusal is explained by)
        self._sent: str | None = None

    async def load_stored(self) -> None:
        self.context.current_tokens = await self.context.storage.get_tokens()
        self.context.client_info = self.fixed_client
        self.initialized = True

    def choose_authorization_server(self, advertised: list[str]) -> str:
        return next(
            (s for s in advertised if self.issuer is not None and issuers_match(s, self.issuer)),
            advertised[0],
        )

    async def token_request(self) -> httpx2.Request:
        """The jwt-bearer token request, with the assertion read now."""
        metadata = self.context.oauth_metadata
        if self.issuer is not None and (
            metadata is None or not issuers_match(str(metadata.issuer), self.issuer)
        ):
            found = "none" if metadata is None else str(metadata.issuer)
            raise OAuthFlowError(
                f"the authorization server found is {found}, not the configured issuer "
                f"{self.issuer}: the workload token is sent to no other"
            )
        assertion = self.assertion.read()
        expiry = _claims(assertion).get("exp")
        if isinstance(expiry, int | float) and expiry < time.time() - EXPIRY_LEEWAY:
            raise OAuthTokenError(
                f"{self.assertion.where} expired at {_when(expiry)}: the platform has not "
                "renewed it (it was not sent)"
            )
        self._sent = assertion
        data = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": assertion,
            "client_id": self.fixed_client.client_id,
        }
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        data, headers = self.context.prepare_token_auth(data, headers)
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = self.context.get_resource_url()
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        return httpx2.Request("POST", self._token_endpoint(), data=data, headers=headers)

    def _token_endpoint(self) -> str:
        """The authorization server's token endpoint: its metadata's, else (a 2025-03-26
        server without any) ``/token`` where its authorization base is."""
        metadata = self.context.oauth_metadata
        if metadata is not None and metadata.token_endpoint:
            return str(metadata.token_endpoint)
        base = self.context.get_authorization_base_url(self.context.server_url)
        return urljoin(base, "/token")

    async def take_token_response(self, response: httpx2.Response) -> None:
        if response.status_code not in (200, 201):
            await response.aread()
            raise OAuthTokenError(self._refusal(response))
        await super().take_token_response(response)

    def _refusal(self, response: httpx2.Response) -> str:
        """What the authorization server's refusal says, and what to do about it."""
        error, description = _error_of(response)
        said = f"{error}: {description}" if description else error
        status = response.status_code
        what = "is refused by" if 400 <= status < 500 else "got no token from"
        message = f"{self.assertion.where} {what} the authorization server (HTTP {status}, {said})"
        hint = self._hint(error)
        return f"{message}; {hint}" if hint else message

    def _hint(self, error: str) -> str | None:
        if error == "invalid_scope":
            return "the scopes asked for are not granted to this workload: check auth.scopes"
        client = self.fixed_client.client_id
        if error == "unauthorized_client":
            return (
                f"the client {client!r} may not use this grant there: check clientId with "
                "the authorization server's administrator"
            )
        if error == "invalid_client":
            return (
                f"the authorization server does not take the client {client!r} as it "
                "authenticated: check clientId, and the client secret if it has one"
            )
        if error != "invalid_grant" or self._sent is None:
            return None
        claims = _claims(self._sent)
        if not claims:
            return "it is not a JWT: check what the platform writes there"
        expiry = claims.get("exp")
        if isinstance(expiry, int | float) and expiry <= time.time():
            return f"it expired at {_when(expiry)}: the platform has not renewed it"
        metadata = self.context.oauth_metadata
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if metadata is not None and isinstance(audiences, list):
            issuer = str(metadata.issuer)
            if not any(isinstance(a, str) and issuers_match(a, issuer) for a in audiences):
                shown = printable(", ".join(str(a) for a in audiences))
                return (
                    f"its audience is {shown}, not the authorization server's issuer "
                    f"{issuer}: have the platform issue it for that audience"
                )
        return "check that the authorization server trusts the platform that issued it"


def _claims(assertion: str) -> dict[str, Any]:
    """The JWT's claims, unverified (what it says of itself, to explain a refusal): the
    authorization server checks them; ``{}`` for what is not a JWT."""
    try:
        return jwt.decode(assertion, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def _error_of(response: httpx2.Response) -> tuple[str, str | None]:
    """A token endpoint's ``error`` and ``error_description`` (RFC 6749 §5.2), escaped
    and cut short: the authorization server's words, shown on a terminal and in logs."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        text = response.text[:200]
        return "no OAuth error", printable(text) if text else None
    description = body.get("error_description")
    shown = printable(description[:300]) if isinstance(description, str) else None
    return printable(body["error"][:100]), shown
