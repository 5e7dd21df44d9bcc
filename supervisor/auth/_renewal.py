"""How a broker serves a renewal or a login with its OAuth provider's flow.

A renewal (:class:`Renew`) answers a token about to expire, or one the server refused:
the held token if someone else's renewal brought a new one meanwhile, else a refresh
(one process at a time among those sharing the store), else a new authorization — a
step-up (403 ``insufficient_scope``) a new grant for the union of the scopes, shown at
once when there is a redirect handler and a person to ask, at most
:data:`STEP_UP_LIMIT` in a row. A login (:class:`Login`) authorizes from the start,
whatever is held. Each ends in the broker's state (:class:`~._status.Status`): ``ok``
with the new token, or the problem that stopped it. A broker's actor
(:class:`BrokerActor`) hands them over one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
import httpx2

from ..actors import Actor
from ..errors import AuthProblem
from ..events import _catalog as events
from ..log import redact
from ._authorize import Authorization
from ._challenge import Challenge
from ._held import HeldToken
from ._status import BrokerInfo, BrokerState, Status
from ._store import Credentials

__all__ = [
    "STEP_UP_LIMIT",
    "Broker",
    "BrokerActor",
    "Login",
    "Renew",
    "Renewals",
    "Renewing",
]

#: How many step-ups (403 insufficient_scope) in a row before giving up on more scope.
STEP_UP_LIMIT = 2


class _NoOAuth(Exception):
    """The server refused without offering OAuth: its 401 stands as it is (what
    :meth:`~._broker.TokenBroker.rejected` raises then)."""


@attrs.frozen
class Renew:
    """A renewal: ``rejected`` the token refused (or about to expire), ``challenge`` the
    server's refusal (``None``: none, the token is merely old)."""

    rejected: str | None
    challenge: Challenge | None


@attrs.frozen
class Login:
    """A login from the start, shown by ``redirect`` (``None``: the broker's)."""

    redirect: Callable[[str], Any] | None


class Broker(Protocol):
    """What a broker's renewals read of it, and what they call of it (a
    :class:`~._broker.TokenBroker`)."""

    url: str
    auth: Any  # supervisor.config.AuthConfig
    resource: str
    credentials: Credentials
    redirect: Callable[[str], Any] | None
    held: HeldToken
    authorization: Authorization

    @property
    def servers(self) -> tuple[str, ...]: ...

    @property
    def status(self) -> Status: ...

    @property
    def interactive(self) -> bool: ...

    @property
    def refreshes(self) -> int: ...

    def current(self) -> str | None: ...

    async def load(self) -> None: ...

    async def offers_oauth(self, challenge: Challenge | None) -> bool: ...

    def clear_provider(self) -> None: ...

    def adopt(self, token: str) -> None: ...

    def info(self) -> BrokerInfo: ...

    async def serve(self, message: Renew | Login) -> Any: ...  # noqa: ANN401 - its answer


class Renewing(Protocol):
    """How a broker gets tokens, given to it (:class:`Renewals`, the SDK
    provider's flow, by default; :class:`~._exchange.Exchange` for a per-user broker
    whose tokens are exchanged): it serves the broker's renewals and logins."""

    #: whether a token is got before the server first refuses one
    eager: bool
    #: whether it runs the SDK provider's flow (the broker makes a provider for it)
    uses_provider: bool

    async def renew(self, message: Renew) -> str: ...

    async def login(self, message: Login) -> None: ...


class Renewals:
    """Serves ``broker``'s renewals and logins with its provider's flow (its
    :class:`~._authorize.Authorization`), one at a time as the broker hands them over;
    keeps the server's latest challenge and the step-ups made in a row."""

    __slots__ = ("_broker", "challenge", "step_ups")

    #: a token is got when the server first refuses one, not before (it says how)
    eager = False
    #: the flow is the SDK provider's, made for the broker's grant
    uses_provider = True

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        #: the server's latest refusal (how it offers OAuth)
        self.challenge: Challenge | None = None
        self.step_ups = 0

    async def renew(self, message: Renew) -> str:
        """Serve one renewal (see the module doc): the new token."""
        broker, status = self._broker, self._broker.status
        challenge = message.challenge
        held = broker.current()
        if held is not None and held != message.rejected:
            return held  # someone else's renewal already brought a new one
        step_up = challenge is not None and challenge.step_up
        if challenge is not None:
            self.challenge = challenge
        elif (
            status.state in (BrokerState.NEEDS_AUTH, BrokerState.AUTH_FAILED)
            and broker.held.token is None
        ):
            raise AuthProblem(
                status.error or status.hint, needs_login=status.state is BrokerState.NEEDS_AUTH
            )
        if broker.held.token is None and not await broker.offers_oauth(challenge):
            raise _NoOAuth
        try:
            if step_up:
                self.step_ups += 1
                if self.step_ups > STEP_UP_LIMIT:
                    raise AuthProblem(
                        "the server keeps asking for more scope (403 insufficient_scope) "
                        f"after {STEP_UP_LIMIT} step-ups; check the scopes the account can "
                        "be granted",
                        needs_login=False,
                        oauth_error="insufficient_scope",
                    )
            refreshing = broker.held.token is not None and not step_up
            status.set(BrokerState.REFRESHING if refreshing else BrokerState.AUTHORIZING)
            if step_up and broker.interactive and broker.redirect is not None:
                # More scope needs a new grant, and a login for it: with a handler to
                # show it, the login runs now, and the request refused for its scope
                # (unseen by the server) is sent once more with the new token.
                return await self._step_up_login(message.rejected, challenge)
            if refreshing:
                return await self._refresh(message.rejected, challenge)
            # A step-up needs a new grant, not a refresh of the old one.
            return await self._drive(rejected=message.rejected, challenge=challenge, fresh=step_up)
        except AuthProblem as exc:
            status.problem(exc)
            raise

    async def _refresh(self, rejected: str | None, challenge: Challenge | None) -> str:
        """Renew the held token, one process at a time among those sharing the store
        (:meth:`~._store.Credentials.exclusive`): a process that finds, once in, that
        another renewed it meanwhile takes that token — a refresh token is used once."""
        broker = self._broker
        async with broker.credentials.exclusive():
            await broker.load()
            if broker.credentials.stored() is None:  # logged out meanwhile (auth logout):
                broker.clear_provider()  # its flow must not refresh with what it holds
            held = broker.current()
            if held is not None and held != rejected:
                broker.clear_provider()  # its flow reads the new tokens when next needed
                broker.status.set(BrokerState.OK)
                return held
            return await self._drive(rejected=rejected, challenge=challenge)

    async def _step_up_login(self, rejected: str | None, challenge: Challenge | None) -> str:
        """A login for more scope (the union of the held and the challenged), through the
        broker's redirect handler, for a request waiting on it (SEP-835)."""
        authorization = self._broker.authorization
        authorization.attended = True
        try:
            return await self._drive(rejected=rejected, challenge=challenge, fresh=True)
        finally:
            authorization.attended = False

    async def login(self, message: Login) -> None:
        """Serve one login (see the module doc)."""
        broker, status = self._broker, self._broker.status
        if broker.interactive and not await broker.offers_oauth(self.challenge):
            problem = AuthProblem(
                f"{broker.url} offers no OAuth login (it publishes no OAuth metadata); if it "
                'needs credentials, give them in the server\'s "headers"',
                needs_login=False,
            )
            status.problem(problem)
            raise problem
        status.set(BrokerState.AUTHORIZING)
        authorization = broker.authorization
        authorization.attended = True
        self.step_ups = 0
        saved = broker.redirect
        broker.redirect = message.redirect or saved
        try:
            await self._drive(rejected=broker.held.token, challenge=self.challenge, fresh=True)
        except httpx2.HTTPError as exc:  # a login has no connection to retry it
            problem = AuthProblem(
                redact(f"cannot reach the authorization server: {exc or type(exc).__name__}"),
                needs_login=False,
            )
            status.problem(problem)
            raise problem from exc
        except AuthProblem as exc:
            status.problem(exc)
            raise
        finally:
            authorization.attended = False
            broker.redirect = saved

    async def _drive(
        self, *, rejected: str | None, challenge: Challenge | None, fresh: bool = False
    ) -> str:
        """Run the provider's flow once (see :mod:`._broker`); the new token."""
        broker = self._broker
        started = broker.refreshes
        token = await broker.authorization.run(
            rejected=rejected, challenge=challenge, known=self.challenge, fresh=fresh
        )
        broker.adopt(token)
        if broker.refreshes > started and not fresh:  # renewed by its refresh token
            expires_at = broker.held.expires_at
            broker.status.emit(lambda s: events.AuthRefreshed(server=s, expires_at=expires_at))
        else:
            self.step_ups = 0 if challenge is None or not challenge.step_up else self.step_ups
            info = broker.info()
            broker.status.emit(
                lambda s: events.AuthCompleted(
                    server=s,
                    issuer=info.issuer,
                    scopes=list(info.scopes),
                    expires_at=info.expires_at,
                )
            )
        return token


class BrokerActor(Actor):
    """Serves a broker's renewals and logins one at a time (its mailbox's order)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def init(self) -> None:
        await self.broker.load()  # before the servers' connections ask for a token

    async def handle(self, message: object) -> object:
        if isinstance(message, Renew | Login):
            return await self.broker.serve(message)
        raise TypeError(f"token broker cannot handle {message!r}")
