"""The browser's sign-in at the team's authorization server, before a caller's own login.

A call that needs its caller's own login to a ``perUser`` server answers with a link to
the gateway's login page (:mod:`supervisor.auth._users`). A link can be forwarded, or
planted: whoever completes the login decides whose account at the backing server the
caller's calls then use. So the page first has the browser sign in at the team's
authorization server — the gateway an OAuth client of it (``gateway.auth.signIn``:
authorization code, PKCE S256, the gateway's own resource URL as the ``resource``) — and
the token it gets is checked as any caller's (:class:`~._resource.ResourceGate`): its
subject must be the one the link is for, or the login is refused. Only then is the
browser sent on to the backing server's authorization server.

The sign-in's ``state`` is recorded in the token store with its PKCE verifier (taken
once, within :data:`SIGN_IN_SECONDS`), so the authorization server's answer may reach
any replica.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import attrs
import httpx2

from .._util._printable import printable
from .._util._secrets import read_secret
from ..auth._backends import TokenStore
from ..auth._tickets import _BadTicket
from ..config._model import SignInSettings
from ..log import get_logger
from ._resource import (
    ResourceGate,
    _client,
    _InvalidToken,
    _read,
    _Refused,
    _Unreachable,
    issuer_metadata,
)

__all__ = ["SIGNED_IN_ROUTE", "SIGN_IN_SECONDS", "SignIn"]

log = get_logger("supervisor.gateway")

#: Where the team's authorization server sends the browser back (under the base URL).
SIGNED_IN_ROUTE = "/auth/signed-in"
#: How long a sign-in may take, from the login page to the answer (seconds).
SIGN_IN_SECONDS = 600.0


class _SignInFailed(_BadTicket):
    """The browser did not sign in as the link's caller (or could not sign in)."""


@attrs.define
class SignIn:
    """The gateway's client at the team's authorization server (see the module doc):
    ``client_id``, with ``client_secret`` (HTTP Basic) or none (a public client)."""

    gate: ResourceGate
    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    _endpoints: tuple[str, str] | None = attrs.field(default=None, init=False)

    @classmethod
    def from_config(
        cls,
        gate: ResourceGate,
        settings: SignInSettings,
        *,
        environ: Mapping[str, str] | None = None,
        base: Path | None = None,
    ) -> SignIn:
        """The config's ``gateway.auth.signIn`` for ``gate`` (its secret read now:
        :class:`ValueError` saying what is wrong)."""
        secret = None
        if settings.client_secret_file or settings.client_secret_env:
            secret = read_secret(
                settings.client_secret_file,
                settings.client_secret_env,
                base,
                "the sign-in client's secret",
                environ,
            )
        return cls(gate, settings.client_id, secret)

    async def start(self, rows: TokenStore, base_url: str, server: str, subject: str) -> str:
        """The team's authorization URL to send the browser to, for the login of
        ``subject`` to ``server``."""
        authorize, _ = await self._metadata()
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(32)
        row = {
            "server": server,
            "subject": subject,
            "verifier": verifier,
            "until": time.time() + SIGN_IN_SECONDS,
        }
        await rows.write("logins", _key(state), row)
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": base_url + SIGNED_IN_ROUTE,
            "state": state,
            "code_challenge": _s256(verifier),
            "code_challenge_method": "S256",
            "resource": self.gate.resource,
        }
        if self.gate.scopes:
            query["scope"] = " ".join(self.gate.scopes)
        return authorize + ("&" if "?" in authorize else "?") + urlencode(query)

    async def finish(self, rows: TokenStore, base_url: str, query: str) -> tuple[str, str]:
        """The server and subject of the login the browser signed in for, once its
        token's subject is the one the link was for; :class:`_SignInFailed` if not."""
        params = {k: v[0] for k, v in parse_qs(query).items()}
        state = params.get("state", "")
        row = await rows.read("logins", _key(state)) if state else None
        if row is None or "verifier" not in row:
            raise _SignInFailed("no sign-in is waiting for this answer (it timed out?)")
        await rows.delete("logins", _key(state))  # taken once
        if float(row.get("until", 0)) < time.time():
            raise _SignInFailed("the sign-in took too long: call the tool again for a new link")
        if "error" in params:
            said = params.get("error_description") or params["error"]
            raise _SignInFailed(f"the sign-in was refused: {printable(said)}")
        code = params.get("code")
        if not code:
            raise _SignInFailed("the sign-in's answer has no code")
        token = await self._exchange(code, str(row["verifier"]), base_url)
        try:
            caller = await self.gate.authenticate(f"Bearer {token}")
        except _Refused as exc:
            raise _SignInFailed(f"the sign-in's token is refused: {exc.message}") from None
        subject, server = str(row["subject"]), str(row["server"])
        if caller.subject != subject:
            log.warning(
                "a login link was opened by another user",
                server=server,
                user=subject,
                signed_in=caller.subject,
            )
            raise _SignInFailed(
                f"you are signed in as {printable(str(caller.subject))!r}, and this link is "
                f"for {printable(subject)!r}: only they can use it"
            )
        return server, subject

    async def _exchange(self, code: str, verifier: str, base_url: str) -> str:
        _, token_endpoint = await self._metadata()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": base_url + SIGNED_IN_ROUTE,
            "code_verifier": verifier,
            "resource": self.gate.resource,
        }
        auth = None
        if self.client_secret is None:
            form["client_id"] = self.client_id
        else:
            auth = httpx2.BasicAuth(self.client_id, self.client_secret)
        what = f"the team's token endpoint {token_endpoint}"
        try:
            async with (
                _client(self.gate.verifier.http) as http,
                http.stream("POST", token_endpoint, data=form, auth=auth) as response,
            ):
                body = await _read(response, what)
                status = response.status_code
        except httpx2.HTTPError as exc:
            raise _SignInFailed(f"{what} cannot be reached: {exc}") from None
        except _InvalidToken as exc:
            raise _SignInFailed(str(exc)) from None
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if status != 200 or not isinstance(answer, dict) or "access_token" not in answer:
            said = answer.get("error") if isinstance(answer, dict) else None
            raise _SignInFailed(
                f"{what} refused the sign-in (HTTP {status}, {printable(str(said))})"
            )
        return str(answer["access_token"])

    async def _metadata(self) -> tuple[str, str]:
        """The team's authorization and token endpoints (RFC 8414, then OpenID
        discovery: ``https://`` URLs, ``http://`` on a loopback host only); it must do
        PKCE with S256."""
        if self._endpoints is not None:
            return self._endpoints
        issuer = self.gate.issuer
        async with _client(self.gate.verifier.http) as http:
            fields = ("authorization_endpoint", "token_endpoint")
            try:
                metadata = await issuer_metadata(http, issuer, fields)
            except _Unreachable as exc:  # an endpoint on plain HTTP beyond loopback
                log.warning("the team's authorization server is refused", error=str(exc))
                raise _SignInFailed(str(exc)) from None
        if metadata is not None:
            if "S256" not in (metadata.get("code_challenge_methods_supported") or []):
                raise _SignInFailed(
                    f"the team's authorization server {issuer} does not advertise PKCE "
                    "with S256; refusing to sign in there"
                )
            self._endpoints = (metadata["authorization_endpoint"], metadata["token_endpoint"])
            return self._endpoints
        raise _SignInFailed(
            f"the team's authorization server {issuer} publishes no authorization and "
            "token endpoints (its metadata cannot be fetched)"
        )


def _key(state: str) -> str:
    return "signin-" + hashlib.sha256(state.encode()).hexdigest()[:40]


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
