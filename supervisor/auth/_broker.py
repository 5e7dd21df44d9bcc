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

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.shared.auth import OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from .._sdk import forget_provider_state
from ..actors import actor_spec
from ..errors import AuthProblem as AuthProblem
from ..events import _catalog as events
from ._authorize import Authorization
from ._backends import TokenStore
from ._challenge import Challenge
from ._discovery import Discovery
from ._held import HeldToken
from ._login import Logins
from ._proofs import Proofs
from ._providers import Providers
from ._renewal import BrokerActor, Login, Renew, Renewals, Renewing
from ._status import BrokerInfo as BrokerInfo
from ._status import BrokerState as BrokerState
from ._status import Status
from ._store import AuthStore, Credentials

__all__ = ["AuthProblem", "BrokerInfo", "BrokerState", "TokenBroker"]


#: How often a broker waiting for a login looks at its token store (seconds).
WATCH_INTERVAL = 2.0


class TokenBroker:
    """Tokens for one resource (a remote server's URL) × account; see the module doc.

    ``servers`` are the configured servers that share it (their events name each);
    ``remember`` registers a secret with the log redactor and ``forget`` releases one;
    ``redirect`` shows a person the authorization URL (``None``: browser logins wait for
    :meth:`login`); ``callback`` replaces the loopback listener when given.

    What a per-user broker (:mod:`._user_brokers`) changes is given to it: ``status``,
    what it says of itself (default: to ``servers``' events through ``publish``);
    ``renewals``, how it gets tokens (:class:`~._renewal.Renewing`); ``actor=False``, no
    actor (there may be thousands) — renewals and logins are served one at a time under
    a lock, a renewal refused at once while a login waits for a person
    (:attr:`logging_in`), and the store read again while no token is held.

    It hands out tokens and serves renewals and logins one at a time; its parts: what
    it says of itself (:class:`~._status.Status`), how it renews (the provider's flow,
    :class:`~._renewal.Renewals`, or a token exchange, :class:`~._exchange.Exchange`),
    the token it holds (:class:`~._held.HeldToken`: two generations of secrets held by
    the redactor), what it learnt of how the server offers OAuth
    (:class:`~._discovery.Discovery`), the SDK provider made for its grant
    (:class:`~._providers.Providers`), one authorization run with it
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
        status: Status | None = None,
        renewals: Callable[[TokenBroker], Renewing] = Renewals,
        actor: bool = True,
    ) -> None:
        self.url = url
        self.auth = auth
        self.resource = resource_url_from_server_url(url)
        self.account = auth.account or "default"
        self.grant: str = auth.grant
        self.logins = logins
        self.redirect = redirect
        self.status = status or Status(servers, publish)
        self.credentials = Credentials(
            store,
            self.resource,
            self.account,
            server=self.servers[0],
            on_tokens=self._seen,
            dpop=bool(getattr(auth, "dpop", False)),
        )
        self.held = HeldToken(remember, forget)
        self._proofs = Proofs(self.credentials, remember)
        self._discovery = Discovery(url)
        self._providers = Providers(
            url, self.credentials, logins, remember=remember, forget=forget, base_dir=base_dir
        )
        self.authorization = Authorization(
            self, self._discovery, self._providers, self._proofs, callback
        )
        self.renewals = renewals(self)
        self.clock = clock
        #: set (and replaced by a fresh one) at each token a renewal or login brings
        self.renewed = trio.Event()
        #: a login waits for a person's browser (said by whoever started it)
        self.logging_in = False
        self._serving = None if actor else trio.Lock()
        self._load()
        self.provider = self.make_provider()
        self.spec = actor_spec(
            f"auth:{self.servers[0]}",
            lambda: BrokerActor(self),
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
        return self.authorization.refreshes

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers that share it (a reconfiguration may add one)."""
        return self.status.servers

    @servers.setter
    def servers(self, servers: tuple[str, ...]) -> None:
        self.status.servers = servers

    @property
    def state(self) -> BrokerState:
        """What it is doing (:attr:`~._status.Status.state`)."""
        return self.status.state

    @property
    def state_changed(self) -> trio.Event:
        """Set at the next change of :attr:`state`."""
        return self.status.changed

    def __repr__(self) -> str:
        return f"<TokenBroker {self.resource} account={self.account!r} state={self.state}>"

    # -- what the connections ask --------------------------------------------------------

    @property
    def interactive(self) -> bool:
        """Whether getting a token may need a person (the browser login)."""
        return self.grant == "authorization_code"

    def current(self) -> str | None:
        """The held access token if it is good for a while yet, else ``None``."""
        return self.held.current(self.credentials.clock)

    async def token(self) -> str | None:
        """A token to send: the held one, or a renewed one when it is about to expire.
        ``None`` when there is none yet (the request goes without; the server's 401 says
        how to get one)."""
        token = self.current()
        if token is not None:
            return token
        held = self.held
        if self._serving is not None and held.token is None:
            await self.load()  # a login made since, here or by another replica
            if held.token is not None:
                self.status.state = BrokerState.OK
                token = self.current()
                if token is not None:
                    return token
        if held.token is None and self.state in (BrokerState.UNKNOWN, BrokerState.OK):
            if not self.renewals.eager:
                return None
        return await self._ask(Renew(held.token, None))

    async def rejected(self, token: str | None, response: httpx2.Response) -> str:
        """The server refused ``token`` (401, or 403 ``insufficient_scope``): a new
        token, renewed once for everyone who was refused the same one. Raises
        :class:`AuthProblem` when none can be had without a person (or at all)."""
        return await self._ask(Renew(token, Challenge.of(response)))

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
        await self._ask(Login(redirect))

    async def _ask(self, message: Renew | Login) -> Any:  # noqa: ANN401 - its answer
        """Have ``message`` served, one renewal or login at a time: by the broker's actor,
        or without one under its lock."""
        serving = self._serving
        if serving is None:
            return await self.spec.address.call(message, math.inf)
        if isinstance(message, Renew) and self.logging_in:
            raise AuthProblem(self.status.hint, needs_login=True)
        async with serving:
            return await self.serve(message)

    async def serve(self, message: Renew | Login) -> Any:  # noqa: ANN401 - its answer
        """Serve one renewal (the new token) or login, with :attr:`renewals`."""
        if isinstance(message, Renew):
            return await self.renewals.renew(message)
        if isinstance(message, Login):
            return await self.renewals.login(message)
        raise TypeError(f"token broker cannot handle {message!r}")

    async def load(self) -> None:
        """Read the stored tokens again (a store shared with other processes)."""
        await self.credentials.load()
        self._load()

    async def logout(self, *, client: bool = False) -> bool:
        """Forget the tokens (kept client registrations are reused at the next login;
        with ``client``, forgotten too); whether there were any tokens."""
        had = await self.credentials.forget(client=client)
        self.held.clear()
        self.clear_provider()
        self.status.state = BrokerState.NEEDS_AUTH if self.interactive else BrokerState.UNKNOWN
        return had

    async def wait_changed(self, since: str | None) -> None:
        """Return once the broker holds a token other than ``since``: after a login here,
        or one by another process that wrote the token store (looked at every
        :data:`WATCH_INTERVAL` s)."""
        mtime = await self.credentials.tokens_version()
        while True:
            with trio.move_on_after(WATCH_INTERVAL):
                await self.renewed.wait()
            if self.held.token is not None and self.held.token != since:
                return
            now_mtime = await self.credentials.tokens_version()
            if now_mtime is not None and now_mtime != mtime:
                mtime = now_mtime
                await self.load()
                self.clear_provider()
                if self.held.token is not None and self.held.token != since:
                    self.status.set(BrokerState.OK)
                    return

    def info(self) -> BrokerInfo:
        stored = self.credentials.stored()
        token = stored.token if stored is not None else None
        state = self.state
        return BrokerInfo(
            resource=self.resource,
            account=self.account,
            grant=self.grant,
            state=state if stored is not None or state != BrokerState.UNKNOWN else "no tokens",
            issuer=stored.issuer if stored is not None else None,
            scopes=tuple((token.scope or "").split()) if token is not None else (),
            expires_at=stored.expires_at if stored is not None else None,
            has_refresh_token=bool(token is not None and token.refresh_token),
            error=self.status.error,
            servers=self.servers,
            token_file=self.credentials.location,
        )

    # -- for its parts -------------------------------------------------------------------

    @property
    def speaks_oauth(self) -> bool | None:
        """Whether the server offers OAuth (``None``: not known yet)."""
        return self._discovery.speaks

    async def offers_oauth(self, challenge: Challenge | None) -> bool:
        """Whether the server's refusal can be answered with OAuth at all (asked once;
        see :meth:`~._discovery.Discovery.speaks_oauth`)."""
        return await self._discovery.speaks_oauth(challenge, grant=self.grant)

    def make_provider(self) -> httpx2.Auth | None:
        """The SDK provider for its grant (``None``: none, or none yet)."""
        if not self.renewals.uses_provider:
            return None
        return self._providers.make(
            self.auth,
            self.grant,
            self._discovery.secret_method,
            redirect_handler=self.authorization.show,
            callback_handler=self.authorization.answer,
        )

    def clear_provider(self) -> None:
        """Make the provider read the stored credentials again before its next flow."""
        forget_provider_state(self.provider)

    def _load(self) -> None:
        stored = self.credentials.stored()
        self.held.hold(stored)
        if stored is None:
            return
        self.credentials.issuer = stored.issuer
        if self.state is BrokerState.UNKNOWN:
            self.status.state = BrokerState.OK

    def adopt(self, token: str) -> None:
        """Hold ``token``, which a renewal or login brought (and stored): ``ok`` now."""
        self._load()
        held = self.held
        if held.token != token:  # a provider that did not store (it always does)
            held.token, held.expires_at, held.lifetime = token, None, None
        self.status.error = None
        self.status.set(BrokerState.OK)
        self.renewed.set()
        self.renewed = trio.Event()

    def _seen(self, tokens: OAuthToken) -> None:
        """The SDK stores new tokens: make them secret before anything can print them,
        and note the issuer they came from."""
        self.held.remember(tokens)
        context = getattr(self.provider, "context", None)
        if context is not None and context.oauth_metadata is not None:
            self.credentials.issuer = str(context.oauth_metadata.issuer)
