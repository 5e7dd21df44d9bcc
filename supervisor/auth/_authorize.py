"""One authorization of a broker: the SDK provider's flow run once, for a new token.

Whatever it holds, the provider renews — refreshing first, else a new grant, else (the
authorization-code grant) a browser login. A browser login is shown only while a person
is being asked (:attr:`Authorization.attended`: a login, or a step-up with a redirect
handler) and only to an authorization server that advertises PKCE with S256; its answer
comes back through the loopback listener (:class:`~._login.Logins`) or the broker's own
``callback``. Errors of the flow come out as :class:`AuthProblem`, redacted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, cast
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from .._sdk import initialize_provider
from ..errors import AuthProblem
from ..events import _catalog as events
from ..log import get_logger, redact
from ._challenge import Challenge, oauth_error
from ._discovery import Discovery
from ._idjag import discover_issuer
from ._login import LoginCancelled, Logins
from ._probe import drive
from ._proofs import Proofs
from ._providers import CodeGrantProvider, Providers
from ._status import Status
from ._store import Credentials

log = get_logger("supervisor.auth")


def _not_flow_errors(record: logging.LogRecord) -> bool:
    """The SDK logs every failed flow with its traceback; the broker reports each one
    itself (an ``auth_failed`` state, an ``mcp.auth.failed`` event, a warning with the
    reason), so that copy is dropped."""
    return record.getMessage() != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_not_flow_errors)


class Broker(Protocol):
    """What an authorization reads of its broker, and what it calls of it."""

    url: str
    auth: Any  # supervisor.config.AuthConfig
    grant: str
    account: str
    credentials: Credentials
    logins: Logins
    redirect: Callable[[str], Any] | None
    provider: httpx2.Auth | None

    @property
    def interactive(self) -> bool: ...

    @property
    def servers(self) -> tuple[str, ...]: ...

    @property
    def status(self) -> Status: ...

    def make_provider(self) -> httpx2.Auth | None: ...


class Authorization:
    """Runs ``broker``'s authorizations (:meth:`run`), with what it learnt of the server
    (``discovery``), its providers (``providers``) and DPoP proofs (``proofs``);
    ``callback`` replaces the loopback listener when given."""

    __slots__ = (
        "_broker",
        "_discovery",
        "_proofs",
        "_providers",
        "attended",
        "callback",
        "login_state",
        "refreshes",
    )

    def __init__(
        self,
        broker: Broker,
        discovery: Discovery,
        providers: Providers,
        proofs: Proofs,
        callback: Callable[[], Any] | None,
    ) -> None:
        self._broker = broker
        self._discovery = discovery
        self._providers = providers
        self._proofs = proofs
        self.callback = callback
        #: a person is being asked now: a browser login may be shown
        self.attended = False
        #: the ``state`` of the browser login shown last
        self.login_state: str | None = None
        #: access tokens renewed with the refresh token, successfully
        self.refreshes = 0

    async def run(
        self,
        *,
        rejected: str | None,
        challenge: Challenge | None,
        known: Challenge | None,
        fresh: bool,
    ) -> str:
        """Run the provider's flow once; the new token (never ``rejected``). ``challenge``
        is the refusal being answered, ``known`` the server's latest; ``fresh``: a new
        grant, not a refresh of the held one."""
        broker = self._broker
        await self._follow_metadata(challenge or known, fresh)
        provider = broker.provider
        context = getattr(provider, "context", None)
        if provider is not None and context is not None:
            # a provider with a context: an OAuthClientProvider, or the SDK's identity-assertion
            # one (no subclass of it) that initialize_provider reads the same way
            await initialize_provider(provider)  # pyright: ignore[reportArgumentType]
            # Whatever it holds: renew, refreshing first (0 would read as "no expiry").
            context.token_expiry_time = 1.0
            if fresh:
                context.clear_tokens()
        ports = self._providers.ports(broker.auth)
        uses_listener = broker.interactive and self.attended and self.callback is None
        if uses_listener:
            try:
                port = await broker.logins.acquire(ports)
            except OSError as exc:
                raise AuthProblem(
                    f"{exc}; set another callbackPort in the server's auth", needs_login=True
                ) from exc
            # a browser login's (the authorization-code grant): its provider is a CodeGrantProvider
            self._providers.point(cast(CodeGrantProvider, broker.provider), broker.auth, port)
        try:
            return await self._flow(rejected, challenge, known, fresh)
        except (OAuthFlowError, OAuthTokenError, OAuthRegistrationError, ValueError) as exc:
            raise AuthProblem(
                redact(f"authorization failed: {exc}"),
                needs_login=False,
                oauth_error=oauth_error(exc),
            ) from exc
        except (LoginCancelled, TimeoutError) as exc:
            raise AuthProblem(
                redact(f"login failed: {exc}"),
                needs_login=False,
                oauth_error=getattr(exc, "error", None),
            ) from exc
        finally:
            if uses_listener:
                await broker.logins.release()

    async def _follow_metadata(self, challenge: Challenge | None, fresh: bool) -> None:
        """Look up how the authorization server wants the client's secret (see
        :meth:`~._discovery.Discovery.follow_metadata`); the provider is made again when
        that changes the method."""
        broker = self._broker
        a = broker.auth
        issuer = a.issuer or (
            broker.credentials.issuer if broker.grant == "identity_assertion" else None
        )
        if await self._discovery.follow_metadata(a, issuer, challenge, fresh=fresh):
            broker.provider = broker.make_provider()

    async def _flow(
        self,
        rejected: str | None,
        challenge: Challenge | None,
        known: Challenge | None,
        fresh: bool,
    ) -> str:
        broker = self._broker
        async with httpx2.AsyncClient(timeout=30.0) as http:
            if broker.provider is None:
                await self._discover_issuer(http, known)
            provider = broker.provider
            assert provider is not None
            if isinstance(provider, CodeGrantProvider):
                await self._discovery.speaks_oauth(challenge, grant=broker.grant)
                provider.legacy_issuer = self._discovery.legacy_issuer
            unattended = broker.interactive and not self.attended
            return await drive(
                provider,
                http,
                broker.url,
                rejected=rejected,
                challenge=challenge,
                fresh=fresh,
                scopes=lambda: self._wanted_scopes(challenge),
                unattended=broker.status.hint if unattended else None,
                send=self._proofs.send,
                refreshed=self._refreshed,
            )

    def _refreshed(self) -> None:
        self.refreshes += 1

    async def _discover_issuer(self, http: httpx2.AsyncClient, known: Challenge | None) -> None:
        """The identity-assertion grant without a configured issuer: take it from the
        resource's protected-resource metadata (RFC 9728), then make the provider."""
        broker = self._broker
        found = await discover_issuer(http, broker.url, known)
        if found is None:
            raise AuthProblem(
                f"{broker.url}'s protected-resource metadata names no authorization server; "
                'set "issuer" in the server\'s auth',
                needs_login=False,
            )
        broker.credentials.issuer = found
        broker.provider = broker.make_provider()

    def _wanted_scopes(self, challenge: Challenge | None) -> list[str]:
        """Scopes to add to the server's challenge: the configured ones, and for a
        step-up the ones held now (the provider forgets them with the old token)."""
        wanted = list(self._broker.auth.scopes)
        if challenge is not None and challenge.step_up:
            stored = self._broker.credentials.stored()
            if stored is not None and stored.token.scope:
                wanted += stored.token.scope.split()
        return list(dict.fromkeys(wanted))

    # -- the SDK provider's handlers ----------------------------------------------------

    async def show(self, url: str) -> None:
        """Show a person the authorization URL of a browser login (the provider's
        redirect handler)."""
        broker = self._broker
        context = cast(CodeGrantProvider, broker.provider).context
        metadata = context.oauth_metadata
        methods = (metadata.code_challenge_methods_supported or []) if metadata else []
        # A 2025-03-26 server with no metadata at all advertises nothing: that version
        # requires PKCE of it, and the SDK sends S256.
        fallback = metadata is None and self._discovery.legacy_issuer == ""
        if "S256" not in methods and not fallback:
            where = str(metadata.issuer) if metadata else "the authorization server"
            raise AuthProblem(
                f"{where} does not advertise PKCE with S256 (code_challenge_methods_supported)"
                ", which the MCP authorization spec requires; refusing to log in there",
                needs_login=False,
                oauth_error="pkce_not_supported",
            )
        redirect = broker.redirect
        if not self.attended or redirect is None:
            raise AuthProblem(broker.status.hint, needs_login=True)
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        self.login_state = state
        if self.callback is None:
            broker.logins.expect(state)
        broker.status.emit(lambda s: events.AuthStarted(server=s, grant=broker.grant))
        log.info("OAuth login started", servers=list(broker.servers), account=broker.account)
        try:
            await redirect(url)
        except Exception as exc:  # the embedder's handler: its failure is this login's
            broker.logins.forget(state)
            raise AuthProblem(
                f"the login could not be shown (the redirect handler raised {exc!r})",
                needs_login=False,
            ) from exc

    async def answer(self) -> Any:  # noqa: ANN401 - the SDK's AuthorizationCodeResult
        """The browser login's answer (the provider's callback handler)."""
        if self.callback is not None:
            return await self.callback()
        assert self.login_state is not None
        return await self._broker.logins.wait(self.login_state)
