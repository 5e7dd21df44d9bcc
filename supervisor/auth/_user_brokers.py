"""The per-user brokers of one supervisor's ``perUser`` servers: one per server × caller
subject, made when first asked, the least recently used one without a login in progress
let go past :data:`MAX_BROKERS` per server (its tokens stay in the store).

Each is a :class:`~._broker.TokenBroker` given what a user's broker changes: no actor
(there may be thousands), its events naming the user, its account ``user:SUBJECT``, and
its tokens either the user's own browser login — its answer coming back through the team
gateway's callback — or (``"perUser": "token_exchange"``) the user's token to the
gateway traded for one (:class:`~._exchange.Exchange`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import msgspec
from mcp.client.auth import OAuthClientProvider
from pydantic import AnyUrl

from ..events import _catalog as events
from ._backends import TokenStore
from ._broker import TokenBroker
from ._exchange import Exchange
from ._login import Logins
from ._renewal import Renewals, Renewing
from ._status import Status
from ._store import AuthStore

__all__ = ["MAX_BROKERS", "UserBrokers", "user_account"]

#: Brokers kept per server (the least recently used one without a login in progress
#: is let go past that; its tokens stay in the store).
MAX_BROKERS = 4096
#: The redirect URI of a broker made before a gateway serves the login pages (a login
#: never starts then: it needs the gateway).
NO_CALLBACK = "http://127.0.0.1:9/auth/callback"


def user_account(subject: str) -> str:
    """The token store's account of ``subject``'s own login."""
    return f"user:{subject}"


class UserBrokers:
    """The brokers of ``servers`` (name -> ServerConfig) for their callers: ``answer``
    waits for a login's answer (by its ``state``), ``subject_token`` gives a subject's
    latest token to the gateway and ``exchanger`` the gateway's authorization server
    (for the token-exchange servers); the rest is each broker's."""

    __slots__ = (
        "_answer",
        "_base_dir",
        "_brokers",
        "_exchanger",
        "_forget",
        "_publish",
        "_remember",
        "_subject_token",
        "callback_url",
        "servers",
        "store",
    )

    def __init__(
        self,
        servers: Mapping[str, Any],
        *,
        store: AuthStore | TokenStore,
        publish: Callable[[events.Event], None],
        remember: Callable[[str], None],
        forget: Callable[[str], None],
        base_dir: Any,  # noqa: ANN401 - a Path or None
        answer: Callable[[str], Awaitable[Any]],
        subject_token: Callable[[str], str | None],
        exchanger: Callable[[], str | None],
    ) -> None:
        self.servers = servers
        self.store = store
        self._publish = publish
        self._remember = remember
        self._forget = forget
        self._base_dir = base_dir
        self._answer = answer
        self._subject_token = subject_token
        self._exchanger = exchanger
        #: the gateway's callback page (``None``: no gateway serves logins yet)
        self.callback_url: str | None = None
        self._brokers: dict[tuple[str, str], TokenBroker] = {}

    def get(self, server: str, subject: str) -> TokenBroker:
        """``subject``'s broker for ``server`` (made when first asked)."""
        key = (server, subject)
        broker = self._brokers.pop(key, None)
        if broker is None:
            if len(self._brokers) >= MAX_BROKERS * max(len(self.servers), 1):
                self._let_go()
            broker = self._make(server, subject)
        self._brokers[key] = broker  # the most recently used last
        return broker

    def _make(self, server: str, subject: str) -> TokenBroker:
        config = self.servers[server]
        exchange = config.auth.per_user == "token_exchange"
        renewals: Callable[[TokenBroker], Renewing] = Renewals
        hint = f"MCP server {server!r} needs {subject!r}'s own OAuth login (it is served per user)"
        if exchange:
            hint = (
                f"MCP server {server!r} trades {subject!r}'s own token to the team gateway "
                "for one of theirs (token exchange), and has not been given one: call "
                "through the team gateway"
            )
            renewals = partial(
                Exchange,
                subject=subject,
                subject_token=partial(self._subject_token, subject),
                exchanger=self._exchanger,
            )
        auth = msgspec.structs.replace(
            config.auth,
            account=user_account(subject),
            # a login is the browser's; the other is the exchange's (._exchange)
            grant="token_exchange" if exchange else "authorization_code",
            # no login runs without the gateway's pages: until then, a placeholder
            redirect_uri=self.callback_url or NO_CALLBACK,
        )
        broker: TokenBroker

        async def answer() -> Any:  # noqa: ANN401 - the SDK's AuthorizationCodeResult
            state = broker.authorization.login_state
            assert state is not None
            return await self._answer(state)

        broker = TokenBroker(
            config.url,
            auth,
            store=self.store,
            logins=Logins(),  # never listening: the gateway's pages take the answers
            servers=[server],
            remember=self._remember,
            forget=self._forget,
            callback=answer,
            base_dir=self._base_dir,
            status=Status([server], self._publish, hint=hint, user=subject),
            renewals=renewals,
            actor=False,
        )
        if not exchange:
            self._point(broker)
        return broker

    def _let_go(self) -> None:
        for key, broker in list(self._brokers.items()):
            if not broker.logging_in:
                del self._brokers[key]
                return

    def point(self) -> None:
        """Send every broker's logins through the gateway's :attr:`callback_url`."""
        for broker in self._brokers.values():
            self._point(broker)

    def _point(self, broker: TokenBroker) -> None:
        callback = self.callback_url
        if callback is None:
            return
        broker.auth = msgspec.structs.replace(broker.auth, redirect_uri=callback)
        provider = broker.provider
        if isinstance(provider, OAuthClientProvider):
            provider.context.client_metadata.redirect_uris = [AnyUrl(callback)]
            fixed = broker.credentials.fixed_client
            if fixed is not None:
                fixed.redirect_uris = [AnyUrl(callback)]
