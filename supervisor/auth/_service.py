"""The auth part of one supervisor: its brokers, their store, its callback listener.

:class:`AuthService` is made from the config: every remote server (Streamable HTTP, SSE,
``remote``) gets OAuth unless its ``auth`` is ``false`` — or it sends its own
``Authorization`` header and has no ``auth`` object, when OAuth would only fight it.
Servers that reach the same resource with the same ``account`` share one
:class:`~._broker.TokenBroker`, so they never log in twice or overwrite each other's
tokens. The brokers and the listener are actors in the supervision tree
(:meth:`AuthService.children`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from mcp.shared.auth_utils import resource_url_from_server_url

from ..actors import Actor, ChildSpec, actor_spec
from ..events import _catalog as events
from ._backends import TokenStore
from ._broker import TokenBroker
from ._login import CallbackHandler, Logins, RedirectHandler, default_redirect_handler
from ._store import AuthStore
from ._users import UserLogins

__all__ = ["AuthService", "uses_oauth"]

_REMOTE = ("http", "sse", "remote")


def uses_oauth(config: Any) -> bool:
    """Whether server ``config`` (a :class:`~supervisor.config.ServerConfig`) gets OAuth."""
    if str(config.type) not in _REMOTE or config.url is None or config.error is not None:
        return False  # not remote, or invalid (never started)
    auth = config.auth
    if auth is not None:
        return bool(auth.enabled)
    return not any(k.lower() == "authorization" for k in config.headers)


class AuthService:
    """Brokers by server name, one per resource × account; see the module doc.

    ``redirect`` is who shows a person the authorization URL when a server needs a
    browser login: a handler, ``"browser"`` (print it and open the browser), or ``None``
    — then such a server waits in ``needs_auth`` for
    :meth:`~supervisor.runtime.SupervisorHandle.login`.
    """

    def __init__(
        self,
        servers: Iterable[Any],
        *,
        store: AuthStore | TokenStore,
        publish: Callable[[events.Event], None],
        remember: Callable[[str], None],
        forget: Callable[[str], None] = lambda secret: None,
        redirect: RedirectHandler | str | None = None,
        callback: CallbackHandler | None = None,
        base_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.logins = Logins()
        self._redirect = redirect
        by_key: dict[tuple[str, str], list[Any]] = {}
        for config in servers:
            if uses_oauth(config):
                auth = config.auth or _default_auth()
                key = (resource_url_from_server_url(config.url), auth.account or "default")
                by_key.setdefault(key, []).append(config)
        per_user = {
            c.name: c for configs in by_key.values() for c in configs if c.auth and c.auth.per_user
        }
        #: each team-gateway caller's own logins to the ``perUser`` servers (``None``: none)
        self.users: UserLogins | None = None
        if per_user:
            self.users = UserLogins(
                per_user,
                store=store,
                publish=publish,
                remember=remember,
                forget=forget,
                base_dir=base_dir,
            )
        self.brokers: dict[str, TokenBroker] = {}
        self._unique: list[TokenBroker] = []
        self._by_key: dict[tuple[str, str], TokenBroker] = {}
        self._made = (publish, remember, forget, callback, base_dir)
        for key, configs in by_key.items():
            broker = self._broker_for(key, configs)
            for config in configs:
                self.brokers[config.name] = broker

    def _broker_for(self, key: tuple[str, str], configs: list[Any]) -> TokenBroker:
        publish, remember, forget, callback, base_dir = self._made
        first = configs[0]
        broker = TokenBroker(
            first.url,
            first.auth or _default_auth(),
            store=self.store,
            logins=self.logins,
            servers=[c.name for c in configs],
            publish=publish,
            remember=remember,
            forget=forget,
            redirect=self._redirect_handler if self._redirect is not None else None,
            callback=callback,
            base_dir=base_dir,
        )
        self._unique.append(broker)
        self._by_key[key] = broker
        return broker

    def adopt(self, config: Any) -> tuple[TokenBroker | None, list[ChildSpec]]:
        """The broker of server ``config``, which a reconfiguration adds or replaces:
        the one already serving its resource and account, else a new one; and the
        actors to start for it in the supervision tree (none when it shares one).
        Raises ``ValueError`` for a ``perUser`` server: its callers' logins are set up
        when the supervisor starts."""
        self.brokers.pop(config.name, None)
        if not uses_oauth(config):
            return None, []
        auth = config.auth or _default_auth()
        if auth.per_user:
            raise ValueError(
                "a perUser server's callers log in through the gateway's own routes, set up "
                "when it starts: restart serve to add or change one"
            )
        key = (resource_url_from_server_url(config.url), auth.account or "default")
        broker = self._by_key.get(key)
        specs: list[ChildSpec] = []
        if broker is None:
            if not self._unique:  # the first: the listener too
                specs.append(self._listener())
            broker = self._broker_for(key, [config])
            specs.append(broker.spec)
        elif config.name not in broker.servers:
            broker.servers = (*broker.servers, config.name)
        self.brokers[config.name] = broker
        return broker, specs

    async def load(self) -> None:
        """Read every broker's stored tokens (outside a supervisor: ``auth status``)."""
        for broker in self._unique:
            await broker.load()

    def broker(self, server: str) -> TokenBroker | None:
        return self.brokers.get(server)

    def children(self) -> list[ChildSpec]:
        """The listener's and the brokers' actors, for the supervision tree."""
        if not self._unique:
            return []
        return [self._listener(), *(b.spec for b in self._unique)]

    def _listener(self) -> ChildSpec:
        return actor_spec("auth-listener", lambda: _Holder(self), shutdown_timeout=2.0)

    def browser_handler(self) -> RedirectHandler:
        """Print the URL and open the browser (``$BROWSER`` honoured)."""

        async def redirect(url: str) -> None:
            nursery = self.logins.nursery
            if nursery is None:
                raise RuntimeError("the supervisor is not running")
            await default_redirect_handler(nursery)(url)

        return redirect

    async def _redirect_handler(self, url: str) -> None:
        handler = self._redirect
        if handler == "browser":
            handler = self.browser_handler()
        assert callable(handler)
        await handler(url)

    def resolve(
        self, redirect: RedirectHandler | Literal["browser"] | None
    ) -> RedirectHandler | None:
        if redirect == "browser":
            return self.browser_handler()
        return redirect


class _Holder(Actor):
    """Holds the nursery the callback listener and browser commands run in."""

    def __init__(self, service: AuthService) -> None:
        self.service = service

    async def init(self) -> None:
        self.service.logins.nursery = self.nursery


def _default_auth() -> Any:
    from ..config._model import AuthConfig

    return AuthConfig()
