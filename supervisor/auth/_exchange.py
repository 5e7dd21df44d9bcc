"""How a per-user broker of a ``"perUser": "token_exchange"`` server gets its tokens: by
trading the user's own token to the gateway at the gateway's own authorization server.

The user's token (the latest one a request of theirs brought,
:meth:`~._users.UserLogins.present`) is exchanged (RFC 8693, on behalf of the user) for a
token meant for the server (its ``resource``), the gateway authenticating as the
server's ``clientId``. No login, no refresh token: an expired token is exchanged again —
once across the replicas sharing the store, like a refresh — and the first one is had
before the server is asked (there is nothing to learn from its 401).

The user's token is meant for the gateway: it goes to no other authorization server
than the one that issued it — never to one the backing server names. A server whose
protected-resource metadata names authorization servers, none of them the gateway's,
is refused before anything is sent (its tokens are not the gateway's AS's to give).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
)
from mcp.shared.auth import OAuthToken

from .._util._printable import printable
from .._util._urls import is_secure_url
from ..errors import AuthProblem
from ..log import redact
from ._challenge import Challenge
from ._idjag import TOKEN_EXCHANGE
from ._renewal import Broker, Login, Renew
from ._status import BrokerState

__all__ = ["ACCESS_TOKEN_TYPE", "MAX_ANSWER_BYTES", "Exchange"]

#: RFC 8693's token type of an access token (the subject token, and the one asked for).
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: The largest answer taken from an authorization server (token, metadata), in bytes.
MAX_ANSWER_BYTES = 64 * 1024


class Exchange:
    """Serves ``broker``'s renewals by token exchange for ``subject`` (see the module
    doc): ``subject_token`` is their latest token to the gateway, ``exchanger`` the
    gateway's own authorization server (its issuer; ``None``: no gateway yet)."""

    __slots__ = ("_broker", "_token_endpoint", "challenge", "exchanger", "subject", "subject_token")

    #: the first token is had before the server is asked
    eager = True
    #: no SDK provider: the exchange is made here
    uses_provider = False

    def __init__(
        self,
        broker: Broker,
        subject: str,
        subject_token: Callable[[], str | None],
        exchanger: Callable[[], str | None],
    ) -> None:
        self._broker = broker
        self.subject = subject
        self.subject_token = subject_token
        self.exchanger = exchanger
        #: a refusal naming the server's protected-resource metadata (none is kept from
        #: the renewals: the well-known URLs are asked)
        self.challenge: Challenge | None = None
        self._token_endpoint: str | None = None

    async def login(self, message: Login) -> None:
        raise AuthProblem(
            f"MCP server {self._broker.servers[0]!r} needs no login: {self.subject!r}'s "
            "tokens for it are had by token exchange",
            needs_login=False,
        )

    async def renew(self, message: Renew) -> str:
        """A token exchanged anew, unless another replica's exchange brought one."""
        broker, status = self._broker, self._broker.status
        held = broker.current()
        if held is not None and held != message.rejected:
            return held
        challenge = message.challenge
        try:
            if challenge is not None and challenge.step_up:
                raise AuthProblem(
                    f"MCP server {broker.servers[0]!r} asks for more scope (403 "
                    "insufficient_scope) than the token exchange gave; check the scopes "
                    "in its auth",
                    needs_login=False,
                    oauth_error="insufficient_scope",
                )
            async with broker.credentials.exclusive():
                await broker.load()
                held = broker.current()
                if held is None or held == message.rejected:
                    status.set(BrokerState.AUTHORIZING)
                    held = await self._exchange(message.rejected)
        except AuthProblem as exc:
            status.problem(exc)
            raise
        except httpx2.HTTPError as exc:
            problem = AuthProblem(
                f"the token exchange for {self.subject!r} could not reach the authorization "
                f"server: {exc or type(exc).__name__}",
                needs_login=False,
            )
            status.problem(problem)
            raise problem from exc
        status.error = None
        status.set(BrokerState.OK)
        return held

    async def _exchange(self, rejected: str | None) -> str:
        broker = self._broker
        subject_token = self.subject_token()
        if subject_token is None:
            raise AuthProblem(broker.status.hint, needs_login=True)
        auth = broker.auth
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject_token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "resource": broker.resource,
        }
        if auth.scopes:
            data["scope"] = " ".join(auth.scopes)
        basic = None
        if auth.client_secret is None:
            data["client_id"] = auth.client_id
        elif auth.token_endpoint_auth_method == "client_secret_post":
            data |= {"client_id": auth.client_id, "client_secret": auth.client_secret}
        else:
            basic = (auth.client_id, auth.client_secret)
        async with httpx2.AsyncClient(timeout=30.0) as http:
            endpoint = await self._endpoint(http)
            status, answer = await json_answer(http, "POST", endpoint, data=data, auth=basic)
        if status != 200 or not isinstance(answer, dict):
            error = answer.get("error") if isinstance(answer, dict) else None
            said = answer.get("error_description") if isinstance(answer, dict) else None
            raise AuthProblem(
                redact(
                    f"the authorization server refused the token exchange for "
                    f"{self.subject!r} (HTTP {status}"
                    + (f", {printable(str(error))}: {printable(str(said))}" if error else "")
                    + "); does it trust the team's tokens for this client?"
                ),
                needs_login=False,
                oauth_error=error if isinstance(error, str) else None,
            )
        try:
            tokens = OAuthToken.model_validate(answer)
        except ValueError:
            raise AuthProblem(
                "the token exchange's answer is not a token", needs_login=False
            ) from None
        if tokens.access_token == rejected:
            raise AuthProblem(
                "the token exchange gave back the token the server refused", needs_login=False
            )
        await broker.credentials.set_tokens(tokens)  # held by the redactor first
        broker.adopt(tokens.access_token)
        return tokens.access_token

    async def _endpoint(self, http: httpx2.AsyncClient) -> str:
        """The token endpoint of the gateway's own authorization server (RFC 8414
        metadata; https beyond loopback), once the backing server's protected-resource
        metadata is known not to name other authorization servers only."""
        if self._token_endpoint is not None:
            return self._token_endpoint
        broker = self._broker
        issuer = self.exchanger()
        if issuer is None:
            raise AuthProblem(broker.status.hint, needs_login=True)
        named = await self._named_servers(http)
        if named and _same_issuer(issuer) not in {_same_issuer(n) for n in named}:
            raise AuthProblem(
                f"MCP server {broker.servers[0]!r} names the authorization server "
                f"{printable(', '.join(named))} (its protected-resource metadata), not the team "
                f"gateway's {issuer}, where its callers' tokens are exchanged: refusing to "
                "trade them for it (nothing was sent)",
                needs_login=False,
            )
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
            status, metadata = await json_answer(http, "GET", url)
            if status != 200 or not isinstance(metadata, dict):
                continue
            endpoint = metadata.get("token_endpoint")
            if metadata.get("issuer") == issuer and isinstance(endpoint, str):
                if not is_secure_url(endpoint):
                    raise AuthProblem(
                        f"the authorization server {issuer} names the token endpoint "
                        f"{printable(endpoint)}: not an https:// URL (http:// only on "
                        "loopback); refusing to send callers' tokens there",
                        needs_login=False,
                    )
                broker.credentials.issuer = issuer
                self._token_endpoint = endpoint
                return self._token_endpoint
        raise AuthProblem(
            f"the authorization server {issuer} publishes no token endpoint", needs_login=False
        )

    async def _named_servers(self, http: httpx2.AsyncClient) -> list[str]:
        """The authorization servers the backing server's protected-resource metadata
        names (RFC 9728: its challenge's ``resource_metadata``, then the well-known
        URLs); none without such metadata."""
        hint = None
        challenge = self.challenge
        if challenge is not None and challenge.www_authenticate:
            probe = httpx2.Response(401, headers={"www-authenticate": challenge.www_authenticate})
            hint = extract_resource_metadata_from_www_auth(probe)
        for url in build_protected_resource_metadata_discovery_urls(hint, self._broker.url):
            status, metadata = await json_answer(http, "GET", url)
            if status != 200 or not isinstance(metadata, dict):
                continue
            named = metadata.get("authorization_servers")
            if isinstance(named, list) and named:
                return [str(n) for n in named]
        return []


async def json_answer(
    http: httpx2.AsyncClient, method: str, url: str, **options: Any
) -> tuple[int, Any]:
    """``(status, the JSON body or None)`` of a request to an authorization server; an
    answer over :data:`MAX_ANSWER_BYTES` is refused before it is parsed."""
    async with http.stream(method, url, **options) as response:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise AuthProblem(
                    f"{printable(url)} answered with more than {MAX_ANSWER_BYTES} bytes",
                    needs_login=False,
                )
    try:
        return response.status_code, json.loads(body)
    except ValueError:
        return response.status_code, None


def _same_issuer(issuer: str) -> str:
    """``issuer`` as compared with another (a URL's trailing ``/`` aside)."""
    return issuer.rstrip("/")
