"""Each caller's own login to the backing servers a team gateway serves ``perUser``.

A server whose ``auth`` says ``"perUser": true`` is reached, for a team gateway's
caller, with that caller's own tokens: one broker per server × caller subject
(:class:`~._user_brokers.UserBrokers`), whose account in the token store is
``user:SUBJECT`` — so one user's login is never another's, and the caller's own
access token to the gateway never goes to a backing server (the MCP security guidance
forbids passing it through).

A caller who has not logged in to such a server is told so at their call (nothing is
sent), with the URL of the gateway's login page for it (:meth:`UserLogins.login_url`):
``/auth/login?ticket=…``, the ticket naming the server and the subject, sealed with the
gateway's key and good once (its use recorded in the token store, which replicas
share), for :data:`TICKET_SECONDS` (:class:`~._tickets.Tickets`). Opening it runs the
authorization-code flow with the backing server's authorization server (the SDK's
provider, PKCE, dynamic registration), with the gateway's ``/auth/callback`` as the
redirect URI; the tokens land in the store under that user's account. Replicas share
the store: a callback that reaches another replica than the one that started the login
is handed over through the store (the login's ``state`` is recorded there when it
starts, and only an awaited one is taken; :class:`~._handover.Handover`).

The login is bound to the browser that signed in for it (RFC 9700 §4.7): the redirect to
the backing server's authorization server sets a cookie (:meth:`UserLogins.binding`)
whose value is the gateway key's HMAC of the login's ``state``, and the callback is
taken only from a browser that brings it back (:meth:`UserLogins.callback`). An
authorization URL forwarded to someone else — who is logged in at that server as
themselves — thus cannot make their account stand for the link's caller: their browser
has no such cookie, and its answer is refused unseen by the login (which goes on waiting
for its own browser). Replicas share the key, so any of them checks the cookie
(:class:`~._binding.BrowserBinding`).

A caller here is a subject alone: the subject of the access token the team gateway took
(its ``Caller``, in ``supervisor.gateway._resource``, is where a caller is told from a
token), the one a call is made for. What this module derives of it is the token store's
account of its logins (:func:`user_account`); a login link names it, and is opened only
by a browser signed in as it (``supervisor.gateway._signin``). The caller's sessions to a
``perUser`` server, which carry these tokens, are :mod:`supervisor.server._users`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from ..events import _catalog as events
from ..log import get_logger
from ._backends import TokenStore
from ._binding import BROWSER_COOKIE as BROWSER_COOKIE
from ._binding import BrowserBinding, state_of
from ._broker import AuthProblem, TokenBroker
from ._handover import Handover
from ._login import _answer, _page
from ._store import AuthStore, FileStore
from ._tickets import TICKET_SECONDS as TICKET_SECONDS
from ._tickets import Tickets
from ._user_brokers import MAX_BROKERS, UserBrokers
from ._user_brokers import user_account as user_account

__all__ = [
    "CALLBACK_ROUTE",
    "LOGIN_ROUTE",
    "TICKET_SECONDS",
    "UserLogins",
    "user_account",
]

log = get_logger("supervisor.auth")

#: The gateway's page that starts a user's login, and the one the authorization server
#: sends the browser back to (under the gateway's base URL).
LOGIN_ROUTE = "/auth/login"
CALLBACK_ROUTE = "/auth/callback"
#: How long the login page waits for the authorization URL to send the browser to.
START_TIMEOUT = 30.0


class UserLogins:
    """The per-user brokers of one supervisor's ``perUser`` servers, and the logins the
    team gateway's pages run for them (see the module doc). Until a gateway
    :meth:`attach`-es, there is no page to send a user to: :meth:`login_url` is ``None``.

    It runs the logins and keeps each caller's latest token to the gateway; its parts:
    the brokers (:class:`~._user_brokers.UserBrokers`), the login links' tickets
    (:class:`~._tickets.Tickets`), the cookies binding a login to its browser
    (:class:`~._binding.BrowserBinding`), and the answers handed to the logins waiting
    for them (:class:`~._handover.Handover`).
    """

    def __init__(
        self,
        servers: Mapping[str, Any],  # name -> ServerConfig
        *,
        store: AuthStore | TokenStore,
        publish: Callable[[events.Event], None],
        remember: Callable[[str], None],
        forget: Callable[[str], None],
        base_dir: Any = None,
    ) -> None:
        self.servers = dict(servers)
        self.store = store
        #: where a login's callback is handed between replicas
        self._rows: TokenStore = FileStore(store) if isinstance(store, AuthStore) else store
        self._base_url: str | None = None
        self._exchanger: str | None = None
        self._nursery: trio.Nursery | None = None
        self._tickets = Tickets(self._rows)
        self._binding = BrowserBinding()
        self._handover = Handover(self._rows)
        self._brokers = UserBrokers(
            self.servers,
            store=store,
            publish=publish,
            remember=remember,
            forget=forget,
            base_dir=base_dir,
            answer=self._handover.wait,
            subject_token=self.subject_token,
            exchanger=lambda: self._exchanger,
        )
        self._exchanges = any(c.auth.per_user == "token_exchange" for c in self.servers.values())
        self._subject_tokens: dict[str, tuple[str, float | None]] = {}

    # -- the gateway's side --------------------------------------------------------------

    def attach(
        self, base_url: str, key: bytes, nursery: trio.Nursery, exchanger: str | None = None
    ) -> None:
        """A team gateway serves the login pages at ``base_url`` (its public URL without
        the MCP path), its tickets sealed with ``key``; logins run in ``nursery``. Its
        callers' tokens come from the authorization server ``exchanger`` (its issuer):
        the token-exchange servers' tokens are got there, and nowhere else
        (:class:`~._exchange.Exchange`)."""
        self._base_url = self._binding.base_url = base_url.rstrip("/")
        self._tickets.key = self._binding.key = key
        self._nursery = nursery
        self._exchanger = exchanger
        self._brokers.callback_url = self.callback_url
        self._brokers.point()

    def detach(self) -> None:
        self._base_url = self._nursery = self._exchanger = None
        self._binding.base_url = self._binding.key = self._tickets.key = None
        self._brokers.callback_url = None

    @property
    def rows(self) -> TokenStore:
        """The store's rows (where logins in progress are handed between replicas)."""
        return self._rows

    @property
    def callback_url(self) -> str | None:
        return None if self._base_url is None else self._base_url + CALLBACK_ROUTE

    def broker(self, server: str, subject: str) -> TokenBroker:
        """``subject``'s broker for ``server`` (made when first asked)."""
        return self._brokers.get(server, subject)

    def present(self, subject: str, token: str, expires_at: float | None) -> None:
        """A request of ``subject``'s brought ``token`` (their access token to the
        gateway): kept, the latest of each, for the token-exchange servers."""
        if not self._exchanges:
            return
        self._subject_tokens.pop(subject, None)
        if len(self._subject_tokens) >= MAX_BROKERS:
            del self._subject_tokens[next(iter(self._subject_tokens))]
        self._subject_tokens[subject] = (token, expires_at)

    def subject_token(self, subject: str) -> str | None:
        """``subject``'s latest token to the gateway, unless it has expired."""
        kept = self._subject_tokens.get(subject)
        if kept is None or (kept[1] is not None and kept[1] <= time.time()):
            return None
        return kept[0]

    def login_url(self, server: str, subject: str) -> str | None:
        """The gateway's page that starts ``subject``'s login to ``server``; ``None``
        without a team gateway, or for a token-exchange server (it has no login)."""
        if self.servers[server].auth.per_user == "token_exchange":
            return None
        if self._base_url is None or self._tickets.key is None:
            return None
        return f"{self._base_url}{LOGIN_ROUTE}?ticket={self._tickets.make(server, subject)}"

    async def open_ticket(self, ticket: str) -> tuple[str, str]:
        """The server and subject of a good ``ticket`` (taken: it is good once);
        :class:`~._tickets._BadTicket` saying why not."""
        return await self._tickets.open(ticket, self.servers)

    async def begin(self, server: str, subject: str) -> str:
        """Start ``subject``'s login to ``server`` (their link's, once the browser that
        opened it is known to be theirs); the authorization URL to send the browser to.
        Raises :class:`AuthProblem` (to show the person)."""
        nursery = self._nursery
        assert nursery is not None
        broker = self.broker(server, subject)
        shown: dict[str, Any] = {}
        ready = trio.Event()

        async def redirect(url: str) -> None:
            # awaited before the browser is sent on: its answer may come back to
            # another replica at once
            await self._handover.expect(state_of(url))
            shown["url"] = url
            ready.set()

        async def run() -> None:
            broker.logging_in = True
            error: str | None = None
            try:
                await broker.login(redirect)
                log.info("per-user OAuth login done", server=server, user=subject)
            except AuthProblem as exc:
                shown["error"], error = exc, str(exc)
            except Exception as exc:  # noqa: BLE001 - reported to the login page
                shown["error"] = AuthProblem(f"the login failed: {exc}", needs_login=False)
                error = str(shown["error"])
            finally:
                broker.logging_in = False
                ready.set()
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await self._handover.landed(broker.authorization.login_state, error)

        if broker.logging_in:
            raise AuthProblem(
                "a login for this user and server is already under way: finish it, or "
                "wait for it to time out",
                needs_login=False,
            )
        nursery.start_soon(run)
        with trio.fail_after(START_TIMEOUT):
            await ready.wait()
        if "url" in shown:
            return str(shown["url"])
        raise shown["error"]

    def binding(self, url: str) -> bytes:
        """The ``Set-Cookie`` header value that binds the login whose authorization URL
        is ``url`` (:meth:`begin`'s) to the browser sent there
        (:meth:`~._binding.BrowserBinding.binding`)."""
        return self._binding.binding(url)

    async def callback(
        self, query: str, cookies: str | None = None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The authorization server's answer, brought by the browser: handed to the
        login waiting for it, here or (through the store) on another replica; the page
        says how that login ended, once it has (the tokens stored: the user's next call
        has them, whichever replica takes it). Only a browser that brings the login's
        cookie (``cookies``: its ``Cookie`` header, :meth:`binding`) is heard: another's
        answer is refused, and the login goes on waiting for its own. The status, page
        and headers to answer with."""
        state, answer = _answer(query)
        if state is None or answer is None:
            return 400, _page(False, "This is not an answer to a login."), []
        if not self._binding.bound(state, cookies):
            log.warning("a login's answer came from another browser than the one signed in")
            return (
                403,
                _page(
                    False,
                    "This answer is for a login started in another browser: only the "
                    "browser that opened the login link, and signed in, can finish it. If "
                    "that was you, call the tool again and open its new link in this browser.",
                ),
                [],
            )
        cleared = self._binding.cleared(state)
        status, page = await self._handover.hand_over(state, answer)
        return status, page, [(b"set-cookie", cleared)]
