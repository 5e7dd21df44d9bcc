"""The token broker: one per resource × account, the only user of its OAuth provider.

Every connection to a remote server asks its broker for a token
(:class:`~supervisor.transports._oauth.BrokerAuth`, the ``httpx2.Auth`` on the
connection's HTTP client). The broker runs the SDK's OAuth
provider itself — ``OAuthClientProvider`` for browser logins, the client-credentials and
private-key-JWT providers, ``IdentityAssertionOAuthProvider``, and for workload identity
a subclass of the first whose authorization step is the jwt-bearer grant
(:mod:`._workload`) — never re-implementing a step of OAuth, and adds what clients
usually get wrong:

* **One refresh for all.** A valid token is handed out at once. Renewing one (ahead of
  its expiry, or after the server answered 401) is a request to the broker's actor, whose
  mailbox serves one at a time: the first caller refreshes, everyone who was waiting on
  the same token gets the new one. The SDK's provider, used as each connection's
  ``httpx2.Auth``, would instead hold a lock across every request until its answer
  starts, serialising all calls.
* **Expiry survives restarts.** Tokens are stored with their absolute expiry, so a fresh
  process refreshes an expired token instead of sending it, being refused, and sending
  the user to the browser again.
* **A rejected token is refreshed before anything else**; a failed refresh asks for a
  new authorization (a browser login waits for a person, see below), never a loop.
* **Browser logins never run inside a connection attempt.** A connection that needs one
  fails with :class:`~supervisor.errors.AuthRequired` and its server waits in
  ``needs_auth`` — starting the login at once when the embedder gave a redirect handler,
  otherwise until ``handle.login(name)``, ``mcp-supervisor auth login``, or a login by
  another process that shows up in the token store. The one login that runs inside a
  request is a **step-up** (403 ``insufficient_scope`` on a connected server, SEP-835)
  when there is a redirect handler to show it: the request, refused unseen, waits for it
  (within its call's timeout) and is sent once more with the new token.
* **PKCE S256 or nothing**: an authorization server that does not advertise it is
  refused before the browser opens.
* **DPoP when the server's ``auth`` asks** (:mod:`._dpop`): a proof on every token
  request the provider makes and on every request of the connections, the key kept with
  the tokens, the nonces an authorization server or a server asks for followed.

The flow is driven with a probe request to the server's URL that is never sent: the
provider is given the server's real challenge (its ``WWW-Authenticate``) as the probe's
answer, every request the provider makes on the way (discovery, registration, token) is
sent for real, and the token is read off the probe when the provider hands it back.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio
from mcp.shared.auth import OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from .._sdk import forget_provider_state
from ..actors import Actor, actor_spec
from ..errors import AuthProblem as AuthProblem
from ..events import _catalog as events
from ..log import get_logger, redact
from ._authorize import Authorization
from ._backends import TokenStore
from ._challenge import Challenge
from ._discovery import Discovery
from ._held import HeldToken
from ._login import Logins
from ._proofs import Proofs
from ._providers import Providers
from ._store import AuthStore, Credentials

__all__ = ["AuthProblem", "BrokerInfo", "TokenBroker"]

log = get_logger("supervisor.auth")


def _not_flow_errors(record: logging.LogRecord) -> bool:
    """The SDK logs every failed flow with its traceback; the broker reports each one
    itself (an ``auth_failed`` state, an ``mcp.auth.failed`` event, a warning with the
    reason), so that copy is dropped."""
    return record.getMessage() != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_not_flow_errors)


#: What a broker is doing: ``unknown`` before the first token is needed, ``ok`` holding
#: one, ``refreshing`` / ``authorizing`` while it gets one, ``needs_auth`` waiting for a
#: login, ``auth_failed`` after the authorization server refused.
class BrokerState(enum.StrEnum):
    UNKNOWN = "unknown"
    OK = "ok"
    REFRESHING = "refreshing"
    AUTHORIZING = "authorizing"
    NEEDS_AUTH = "needs_auth"
    AUTH_FAILED = "auth_failed"


#: How many step-ups (403 insufficient_scope) in a row before giving up on more scope.
STEP_UP_LIMIT = 2
#: How often a broker waiting for a login looks at its token store (seconds).
WATCH_INTERVAL = 2.0


class _NoOAuth(Exception):
    """The server refused without offering OAuth: its 401 stands as it is (what
    :meth:`TokenBroker.rejected` raises then)."""


@attrs.frozen
class BrokerInfo:
    """What ``auth status`` shows of one broker: never a token."""

    resource: str
    account: str
    grant: str
    state: str
    issuer: str | None
    scopes: tuple[str, ...]
    expires_at: float | None
    has_refresh_token: bool
    error: str | None
    servers: tuple[str, ...]
    token_file: str


class TokenBroker:
    """Tokens for one resource (a remote server's URL) × account; see the module doc.

    ``servers`` are the configured servers that share it (their events name each);
    ``remember`` registers a secret with the log redactor and ``forget`` releases one
    (tokens are held for two generations: the current and the one it replaced, so a
    broker running for months holds four secrets, not thousands); ``redirect`` shows a
    person the authorization URL (``None``: browser logins wait for :meth:`login`);
    ``callback`` replaces the loopback listener when given.

    It serves renewals and logins (one at a time, in its actor) and reports its state;
    its parts: the token it holds (:class:`~._held.HeldToken`), what it learnt of how
    the server offers OAuth (:class:`~._discovery.Discovery`), the SDK provider made
    for its grant (:class:`~._providers.Providers`), one authorization run with it
    (:class:`~._authorize.Authorization`), and DPoP proofs (:class:`~._proofs.Proofs`).
    """

    def __init__(
        self,
        url: str,
        auth: Any,  # supervisor.config.AuthConfig
        *,
        store: AuthStore | TokenStore,
        logins: Logins,
        servers: Sequence[str],
        publish: Callable[[events.Event], None] = lambda event: None,
        remember: Callable[[str], None] = lambda secret: None,
        forget: Callable[[str], None] = lambda secret: None,
        redirect: Callable[[str], Any] | None = None,
        callback: Callable[[], Any] | None = None,
        base_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.auth = auth
        self.resource = resource_url_from_server_url(url)
        self.account = auth.account or "default"
        self.grant: str = auth.grant
        self.servers = tuple(servers)
        self.logins = logins
        self._publish = publish
        self._remember = remember
        self.redirect = redirect
        self.credentials = Credentials(
            store,
            self.resource,
            self.account,
            server=self.servers[0],
            on_tokens=self._seen,
            dpop=bool(getattr(auth, "dpop", False)),
        )
        self._held = HeldToken(remember, forget)
        self._proofs = Proofs(self.credentials, remember)
        self._discovery = Discovery(url)
        self._providers = Providers(
            url, self.credentials, logins, remember=remember, forget=forget, base_dir=base_dir
        )
        self._authorization = Authorization(
            self, self._discovery, self._providers, self._proofs, callback
        )
        self.clock = clock
        self.state = BrokerState.UNKNOWN
        self.error: str | None = None
        self._challenge: Challenge | None = None
        self._step_ups = 0
        self._changed = trio.Event()
        #: set (and replaced by a fresh one) at each change of :attr:`state`
        self.state_changed = trio.Event()
        self._load()
        self.provider = self._make_provider()
        self.spec = actor_spec(
            f"auth:{self.servers[0]}",
            lambda: _BrokerActor(self),
            mailbox=math.inf,
            shutdown_timeout=1.0,
        )

    @property
    def clock(self) -> Callable[[], float]:
        """Unix time as the broker sees it (expiries are computed and compared on it)."""
        return self.credentials.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.credentials.clock = clock

    @property
    def refreshes(self) -> int:
        """Access tokens renewed with the refresh token, successfully."""
        return self._authorization.refreshes

    def __repr__(self) -> str:
        return f"<TokenBroker {self.resource} account={self.account!r} state={self.state}>"

    # -- what the connections ask --------------------------------------------------------

    @property
    def interactive(self) -> bool:
        """Whether getting a token may need a person (the browser login)."""
        return self.grant == "authorization_code"

    def current(self) -> str | None:
        """The held access token if it is good for a while yet, else ``None``."""
        return self._held.current(self.credentials.clock)

    @property
    def _token(self) -> str | None:
        """The held access token, good or not (``None``: none)."""
        return self._held.token

    async def token(self) -> str | None:
        """A token to send: the held one, or a renewed one when it is about to expire.
        ``None`` when there is none yet (the request goes without; the server's 401 says
        how to get one)."""
        token = self.current()
        if token is not None or (
            self._token is None and self.state in (BrokerState.UNKNOWN, BrokerState.OK)
        ):
            return token
        return await self._ask(_Renew(self._token, None))

    async def rejected(self, token: str | None, response: httpx2.Response) -> str:
        """The server refused ``token`` (401, or 403 ``insufficient_scope``): a new
        token, renewed once for everyone who was refused the same one. Raises
        :class:`AuthProblem` when none can be had without a person (or at all)."""
        return await self._ask(_Renew(token, Challenge.of(response)))

    def presenting(self, method: str, url: httpx2.URL, token: str) -> dict[str, str]:
        """The headers that present ``token`` on a request to the server: ``Authorization:
        Bearer``, or for a DPoP-bound token ``Authorization: DPoP`` and a fresh proof of
        this request (with the server's latest nonce; see :mod:`._proofs`)."""
        if not self.credentials.dpop_bound:
            return {"Authorization": f"Bearer {token}"}
        return self._proofs.presenting(method, url, token)

    def nonce_asked(self, url: httpx2.URL, response: httpx2.Response) -> bool:
        """Note the DPoP nonce the server's answer gives; whether the answer refuses the
        request for want of one (401 ``use_dpop_nonce``, RFC 9449 §9)."""
        if self.credentials.dpop_key is None:
            return False
        return self._proofs.nonce_asked(url, response)

    async def login(self, redirect: Callable[[str], Any] | None = None) -> None:
        """Authorize from the start now (a browser login for the authorization-code
        grant), whatever is held; ``redirect`` shows the URL (default: the broker's)."""
        await self._ask(_Login(redirect))

    async def _ask(self, message: _Renew | _Login) -> Any:  # noqa: ANN401 - its answer
        """Have the broker's actor serve ``message``: one renewal or login at a time."""
        return await self.spec.address.call(message, math.inf)

    async def load(self) -> None:
        """Read the stored tokens again (a store shared with other processes)."""
        await self.credentials.load()
        self._load()

    async def logout(self, *, client: bool = False) -> bool:
        """Forget the tokens (kept client registrations are reused at the next login;
        with ``client``, forgotten too); whether there were any tokens."""
        had = await self.credentials.forget(client=client)
        self._held.clear()
        self._clear_provider()
        self.state = BrokerState.NEEDS_AUTH if self.interactive else BrokerState.UNKNOWN
        return had

    async def wait_changed(self, since: str | None) -> None:
        """Return once the broker holds a token other than ``since``: after a login here,
        or one by another process that wrote the token store (looked at every
        :data:`WATCH_INTERVAL` s)."""
        mtime = await self.credentials.tokens_version()
        while True:
            with trio.move_on_after(WATCH_INTERVAL):
                await self._changed.wait()
            if self._token is not None and self._token != since:
                return
            now_mtime = await self.credentials.tokens_version()
            if now_mtime is not None and now_mtime != mtime:
                mtime = now_mtime
                await self.credentials.load()
                self._load()
                self._clear_provider()
                if self._token is not None and self._token != since:
                    self._set_state(BrokerState.OK)
                    return

    def info(self) -> BrokerInfo:
        stored = self.credentials.stored()
        token = stored.token if stored is not None else None
        return BrokerInfo(
            resource=self.resource,
            account=self.account,
            grant=self.grant,
            state=self.state
            if stored is not None or self.state != BrokerState.UNKNOWN
            else "no tokens",
            issuer=stored.issuer if stored is not None else None,
            scopes=tuple((token.scope or "").split()) if token is not None else (),
            expires_at=stored.expires_at if stored is not None else None,
            has_refresh_token=bool(token is not None and token.refresh_token),
            error=self.error,
            servers=self.servers,
            token_file=self.credentials.location,
        )

    # -- inside the actor ----------------------------------------------------------------

    async def _renew(self, message: _Renew) -> str:
        """Serve one renewal (one at a time: see the module doc)."""
        challenge = message.challenge
        held = self.current()
        if held is not None and held != message.rejected:
            return held  # someone else's renewal already brought a new one
        step_up = challenge is not None and challenge.step_up
        if challenge is not None:
            self._challenge = challenge
        elif (
            self.state in (BrokerState.NEEDS_AUTH, BrokerState.AUTH_FAILED) and self._token is None
        ):
            raise AuthProblem(
                self.error or self._login_hint(), needs_login=self.state is BrokerState.NEEDS_AUTH
            )
        if self._token is None and not await self._speaks_oauth(challenge):
            raise _NoOAuth
        try:
            if step_up:
                self._step_ups += 1
                if self._step_ups > STEP_UP_LIMIT:
                    raise AuthProblem(
                        "the server keeps asking for more scope (403 insufficient_scope) "
                        f"after {STEP_UP_LIMIT} step-ups; check the scopes the account can "
                        "be granted",
                        needs_login=False,
                        oauth_error="insufficient_scope",
                    )
            refreshing = self._token is not None and not step_up
            self._set_state(BrokerState.REFRESHING if refreshing else BrokerState.AUTHORIZING)
            if step_up and self.interactive and self.redirect is not None:
                # More scope needs a new grant, and a login for it: with a handler to
                # show it, the login runs now, and the request refused for its scope
                # (unseen by the server) is sent once more with the new token.
                return await self._step_up_login(message.rejected, challenge)
            if refreshing:
                return await self._refresh(message.rejected, challenge)
            # A step-up needs a new grant, not a refresh of the old one.
            return await self._drive(rejected=message.rejected, challenge=challenge, fresh=step_up)
        except AuthProblem as exc:
            self._problem(exc)
            raise

    async def _refresh(self, rejected: str | None, challenge: Challenge | None) -> str:
        """Renew the held token, one process at a time among those sharing the store
        (:meth:`~._store.Credentials.exclusive`): a process that finds, once in, that
        another renewed it meanwhile takes that token — a refresh token is used once."""
        async with self.credentials.exclusive():
            await self.credentials.load()
            self._load()
            if self.credentials.stored() is None:  # logged out meanwhile (auth logout):
                self._clear_provider()  # its flow must not refresh with what it holds
            held = self.current()
            if held is not None and held != rejected:
                self._clear_provider()  # its flow reads the new tokens when next needed
                self._set_state(BrokerState.OK)
                return held
            return await self._drive(rejected=rejected, challenge=challenge)

    async def _step_up_login(self, rejected: str | None, challenge: Challenge | None) -> str:
        """A login for more scope (the union of the held and the challenged), through the
        broker's redirect handler, for a request waiting on it (SEP-835)."""
        self._authorization.attended = True
        try:
            return await self._drive(rejected=rejected, challenge=challenge, fresh=True)
        finally:
            self._authorization.attended = False

    async def _login(self, message: _Login) -> None:
        if self.interactive and not await self._speaks_oauth(self._challenge):
            problem = AuthProblem(
                f"{self.url} offers no OAuth login (it publishes no OAuth metadata); if it "
                'needs credentials, give them in the server\'s "headers"',
                needs_login=False,
            )
            self._problem(problem)
            raise problem
        self._set_state(BrokerState.AUTHORIZING)
        self._authorization.attended = True
        self._step_ups = 0
        redirect = message.redirect or self.redirect
        saved = self.redirect
        self.redirect = redirect
        try:
            await self._drive(rejected=self._token, challenge=self._challenge, fresh=True)
        except httpx2.HTTPError as exc:  # a login has no connection to retry it
            problem = AuthProblem(
                redact(f"cannot reach the authorization server: {exc or type(exc).__name__}"),
                needs_login=False,
            )
            self._problem(problem)
            raise problem from exc
        except AuthProblem as exc:
            self._problem(exc)
            raise
        finally:
            self._authorization.attended = False
            self.redirect = saved

    async def _drive(
        self, *, rejected: str | None, challenge: Challenge | None, fresh: bool = False
    ) -> str:
        """Run the provider's flow once (see the module doc); the new token."""
        started = self.refreshes
        token = await self._authorization.run(
            rejected=rejected, challenge=challenge, known=self._challenge, fresh=fresh
        )
        self._adopt(token)
        self.error = None
        self._set_state(BrokerState.OK)
        if self.refreshes > started and not fresh:  # renewed by its refresh token
            self._emit(lambda s: events.AuthRefreshed(server=s, expires_at=self._held.expires_at))
        else:
            self._step_ups = 0 if challenge is None or not challenge.step_up else self._step_ups
            info = self.info()
            self._emit(
                lambda s: events.AuthCompleted(
                    server=s,
                    issuer=info.issuer,
                    scopes=list(info.scopes),
                    expires_at=info.expires_at,
                )
            )
        self._changed.set()
        self._changed = trio.Event()
        return token

    @property
    def speaks_oauth(self) -> bool | None:
        """Whether the server offers OAuth (``None``: not known yet)."""
        return self._discovery.speaks

    async def _speaks_oauth(self, challenge: Challenge | None) -> bool:
        """Whether the server's refusal can be answered with OAuth at all (asked once;
        see :meth:`~._discovery.Discovery.speaks_oauth`)."""
        return await self._discovery.speaks_oauth(challenge, grant=self.grant)

    def _login_hint(self) -> str:
        name = self.servers[0]
        return f"MCP server {name!r} needs an OAuth login: run `mcp-supervisor auth login {name}`"

    def _make_provider(self) -> httpx2.Auth | None:
        return self._providers.make(
            self.auth,
            self.grant,
            self._discovery.secret_method,
            redirect_handler=self._authorization.show,
            callback_handler=self._authorization.answer,
        )

    def _clear_provider(self) -> None:
        """Make the provider read the stored credentials again before its next flow."""
        forget_provider_state(self.provider)

    def _load(self) -> None:
        stored = self.credentials.stored()
        self._held.hold(stored)
        if stored is None:
            return
        self.credentials.issuer = stored.issuer
        if self.state is BrokerState.UNKNOWN:
            self.state = BrokerState.OK

    def _adopt(self, token: str) -> None:
        self._load()
        held = self._held
        if held.token != token:  # a provider that did not store (it always does)
            held.token, held.expires_at, held.lifetime = token, None, None

    def _seen(self, tokens: OAuthToken) -> None:
        """The SDK stores new tokens: make them secret before anything can print them,
        and note the issuer they came from."""
        self._held.remember(tokens)
        context = getattr(self.provider, "context", None)
        issuer = None
        if context is not None and context.oauth_metadata is not None:
            issuer = str(context.oauth_metadata.issuer)
        if issuer is not None:
            self.credentials.issuer = issuer

    def _set_state(self, state: BrokerState) -> None:
        self.state = state
        self.state_changed.set()
        self.state_changed = trio.Event()

    def _problem(self, exc: AuthProblem) -> None:
        self.error = str(exc)
        if exc.needs_login:
            self._set_state(BrokerState.NEEDS_AUTH)
            return
        self._set_state(BrokerState.AUTH_FAILED)
        self._emit(lambda s: events.AuthFailed(server=s, error=str(exc)))
        log.warning("OAuth authorization failed", servers=list(self.servers), error=str(exc))

    def _emit(self, make: Callable[[str], events.Event]) -> None:
        for server in self.servers:
            with contextlib.suppress(Exception):
                self._publish(make(server))


# -- the actor -----------------------------------------------------------------------------


@attrs.frozen
class _Renew:
    rejected: str | None
    challenge: Challenge | None


@attrs.frozen
class _Login:
    redirect: Callable[[str], Any] | None


class _BrokerActor(Actor):
    """Serves a broker's renewals and logins one at a time."""

    def __init__(self, broker: TokenBroker) -> None:
        self.broker = broker

    async def init(self) -> None:
        await self.broker.load()  # before the servers' connections ask for a token

    async def handle(self, message: object) -> object:
        if isinstance(message, _Renew):
            return await self.broker._renew(message)
        if isinstance(message, _Login):
            return await self.broker._login(message)
        raise TypeError(f"token broker cannot handle {message!r}")
