"""Each caller's own login to the backing servers a team gateway serves ``perUser``.

A server whose ``auth`` says ``"perUser": true`` is reached, for a team gateway's
caller, with that caller's own tokens: one :class:`_UserBroker` per server × caller
subject, whose account in the token store is ``user:SUBJECT`` — so one user's login is
never another's, and the caller's own access token to the gateway never goes to a
backing server (the MCP security guidance forbids passing it through).

A caller who has not logged in to such a server is told so at their call (nothing is
sent), with the URL of the gateway's login page for it (:meth:`UserLogins.login_url`):
``/auth/login?ticket=…``, the ticket naming the server and the subject, sealed with the
gateway's key and good once (its use recorded in the token store, which replicas
share), for :data:`TICKET_SECONDS`. Opening it runs the
authorization-code flow with the backing server's authorization server (the SDK's
provider, PKCE, dynamic registration), with the gateway's ``/auth/callback`` as the
redirect URI; the tokens land in the store under that user's account. Replicas share
the store: a callback that reaches another replica than the one that started the login
is handed over through the store (the login's ``state`` is recorded there when it
starts, and only an awaited one is taken).

The login is bound to the browser that signed in for it (RFC 9700 §4.7): the redirect to
the backing server's authorization server sets a cookie (:meth:`UserLogins.binding`)
whose value is the gateway key's HMAC of the login's ``state``, and the callback is
taken only from a browser that brings it back (:meth:`UserLogins.callback`). An
authorization URL forwarded to someone else — who is logged in at that server as
themselves — thus cannot make their account stand for the link's caller: their browser
has no such cookie, and its answer is refused unseen by the login (which goes on waiting
for its own browser). Replicas share the key, so any of them checks the cookie.

A caller here is a subject alone: the subject of the access token the team gateway took
(its ``Caller``, in ``supervisor.gateway._resource``, is where a caller is told from a
token), the one a call is made for. What this module derives of it is the token store's
account of its logins (:func:`user_account`); a login link names it, and is opened only
by a browser signed in as it (``supervisor.gateway._signin``). The caller's sessions to a
``perUser`` server, which carry these tokens, are :mod:`supervisor.server._users`'s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx2
import msgspec
import trio
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthToken
from pydantic import AnyUrl

from .._util._printable import printable
from .._util._urls import is_secure_url
from ..events import _catalog as events
from ..log import get_logger, redact
from ._backends import TokenStore, _Rows
from ._broker import AuthProblem, BrokerState, TokenBroker, _Login, _Renew
from ._idjag import TOKEN_EXCHANGE
from ._login import LOGIN_TIMEOUT, LoginCancelled, Logins, _answer, _page
from ._store import AuthStore, FileStore

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
#: How long a login link is good for (seconds); it is good once.
TICKET_SECONDS = 600.0
#: How often a login waiting for its callback looks for one another replica took.
POLL_SECONDS = 0.5
#: How long the login page waits for the authorization URL to send the browser to.
START_TIMEOUT = 30.0
#: How long the callback page waits for its login to end (the token request).
DONE_TIMEOUT = 60.0
#: Brokers kept per server (the least recently used one without a login in progress
#: is let go past that; its tokens stay in the store).
MAX_BROKERS = 4096


#: The redirect URI of a broker made before a gateway serves the login pages (a login
#: never starts then: :meth:`UserLogins.begin` needs the gateway).
_NO_CALLBACK = "http://127.0.0.1:9" + CALLBACK_ROUTE

#: The cookie binding a login to the browser that signed in for it (one per login, its
#: name ending in a digest of the login's ``state``): ``__Host-`` prefixed and
#: ``Secure`` when the gateway's public URL is https. Over plain http (a gateway on
#: loopback) a browser takes no ``__Host-`` or ``Secure`` cookie: it is set without them.
BROWSER_COOKIE = "mcp-supervisor-login-"


def user_account(subject: str) -> str:
    """The token store's account of ``subject``'s own login."""
    return f"user:{subject}"


class _BadTicket(Exception):
    """A login link that is not (or no longer) good."""


class _UserBroker(TokenBroker):
    """A broker for one user of one server: no actor (there may be thousands) — its
    renewals and logins are served one at a time under a lock; a login waiting for the
    user's browser makes that user's calls answer at once that it is under way."""

    def __init__(self, *args: Any, subject: str, **kwargs: Any) -> None:
        self.subject = subject
        self._serving = trio.Lock()
        self.logging_in = False
        super().__init__(*args, **kwargs)

    async def _ask(self, message: _Renew | _Login) -> Any:  # noqa: ANN401 - its answer
        if isinstance(message, _Renew) and self.logging_in:
            raise AuthProblem(self._login_hint(), needs_login=True)
        async with self._serving:
            if isinstance(message, _Renew):
                return await self._renew(message)
            return await self._login(message)

    async def token(self) -> str | None:
        if self._token is None:  # a login made since, here or by another replica
            await self.load()
            if self._token is not None:
                self.state = BrokerState.OK
        return await super().token()

    def _login_hint(self) -> str:
        return (
            f"MCP server {self.servers[0]!r} needs {self.subject!r}'s own OAuth login "
            "(it is served per user)"
        )

    def _problem(self, exc: AuthProblem) -> None:
        if exc.needs_login:  # said afresh each time, with a new link
            self.error = None
            self._set_state(BrokerState.NEEDS_AUTH)
            return
        super()._problem(exc)

    def _emit(self, make: Callable[[str], events.Event]) -> None:
        """Its ``mcp.auth.*`` events name the user (``user``): a team gateway sends them to
        that caller alone."""
        super()._emit(lambda server: msgspec.structs.replace(make(server), user=self.subject))


#: RFC 8693's token type of an access token (the subject token, and the one asked for).
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


class _ExchangeBroker(_UserBroker):
    """A broker for one user of a ``"perUser": "token_exchange"`` server: its tokens are
    got by trading the user's own token to the gateway (the latest one a request of
    theirs brought, :meth:`UserLogins.present`) at the gateway's own authorization
    server (RFC 8693, on behalf of the user; :meth:`UserLogins.attach`'s ``exchanger``),
    for a token meant for the server (its ``resource``), the gateway authenticating as
    the server's ``clientId``. No login, no refresh token: an expired token is exchanged
    again — once across the replicas sharing the store, like a refresh.

    The user's token is meant for the gateway: it goes to no other authorization server
    than the one that issued it — never to one the backing server names. A server whose
    protected-resource metadata names authorization servers, none of them the gateway's,
    is refused before anything is sent (its tokens are not the gateway's AS's to give)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.grant = "token_exchange"
        self.subject_token: Callable[[], str | None] = lambda: None
        #: the gateway's own authorization server (its issuer), where tokens are exchanged
        self.exchanger: Callable[[], str | None] = lambda: None
        self._token_endpoint: str | None = None

    def _make_provider(self) -> Any:  # noqa: ANN401 - none: the exchange is done here
        return None

    @property
    def interactive(self) -> bool:
        return False

    async def token(self) -> str | None:
        token = await super().token()
        if token is None:  # none yet: exchanged now, not after the server's 401
            token = await self._ask(_Renew(None, None))
        return token

    async def _login(self, message: _Login) -> None:
        raise AuthProblem(
            f"MCP server {self.servers[0]!r} needs no login: {self.subject!r}'s tokens for "
            "it are had by token exchange",
            needs_login=False,
        )

    def _login_hint(self) -> str:
        return (
            f"MCP server {self.servers[0]!r} trades {self.subject!r}'s own token to the team "
            "gateway for one of theirs (token exchange), and has not been given one: call "
            "through the team gateway"
        )

    async def _renew(self, message: _Renew) -> str:
        held = self.current()
        if held is not None and held != message.rejected:
            return held
        challenge = message.challenge
        try:
            if challenge is not None and challenge.step_up:
                raise AuthProblem(
                    f"MCP server {self.servers[0]!r} asks for more scope (403 "
                    "insufficient_scope) than the token exchange gave; check the scopes "
                    "in its auth",
                    needs_login=False,
                    oauth_error="insufficient_scope",
                )
            async with self.credentials.exclusive():
                await self.credentials.load()
                self._load()
                held = self.current()
                if held is None or held == message.rejected:
                    self._set_state(BrokerState.AUTHORIZING)
                    held = await self._exchange(message.rejected)
        except AuthProblem as exc:
            self._problem(exc)
            raise
        except httpx2.HTTPError as exc:
            problem = AuthProblem(
                f"the token exchange for {self.subject!r} could not reach the authorization "
                f"server: {exc or type(exc).__name__}",
                needs_login=False,
            )
            self._problem(problem)
            raise problem from exc
        self.error = None
        self._set_state(BrokerState.OK)
        return held

    async def _exchange(self, rejected: str | None) -> str:
        subject_token = self.subject_token()
        if subject_token is None:
            raise AuthProblem(self._login_hint(), needs_login=True)
        auth = self.auth
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject_token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "resource": self.resource,
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
            status, answer = await _json_answer(http, "POST", endpoint, data=data, auth=basic)
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
        await self.credentials.set_tokens(tokens)  # held by the redactor first (_seen)
        self._adopt(tokens.access_token)
        return tokens.access_token

    async def _endpoint(self, http: httpx2.AsyncClient) -> str:
        """The token endpoint of the gateway's own authorization server (RFC 8414
        metadata; https beyond loopback), once the backing server's protected-resource
        metadata is known not to name other authorization servers only."""
        if self._token_endpoint is not None:
            return self._token_endpoint
        issuer = self.exchanger()
        if issuer is None:
            raise AuthProblem(self._login_hint(), needs_login=True)
        named = await self._named_servers(http)
        if named and _same_issuer(issuer) not in {_same_issuer(n) for n in named}:
            raise AuthProblem(
                f"MCP server {self.servers[0]!r} names the authorization server "
                f"{printable(', '.join(named))} (its protected-resource metadata), not the team "
                f"gateway's {issuer}, where its callers' tokens are exchanged: refusing to "
                "trade them for it (nothing was sent)",
                needs_login=False,
            )
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
            status, metadata = await _json_answer(http, "GET", url)
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
                self.credentials.issuer = issuer
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
        challenge = self._challenge
        if challenge is not None and challenge.www_authenticate:
            probe = httpx2.Response(401, headers={"www-authenticate": challenge.www_authenticate})
            hint = extract_resource_metadata_from_www_auth(probe)
        for url in build_protected_resource_metadata_discovery_urls(hint, self.url):
            status, metadata = await _json_answer(http, "GET", url)
            if status != 200 or not isinstance(metadata, dict):
                continue
            named = metadata.get("authorization_servers")
            if isinstance(named, list) and named:
                return [str(n) for n in named]
        return []


class UserLogins:
    """The per-user brokers of one supervisor's ``perUser`` servers, and the logins the
    team gateway's pages run for them (see the module doc). Until a gateway
    :meth:`attach`-es, there is no page to send a user to: :meth:`login_url` is ``None``.
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
        self._publish = publish
        self._remember = remember
        self._forget = forget
        self._base_dir = base_dir
        self._brokers: dict[tuple[str, str], _UserBroker] = {}
        self._base_url: str | None = None
        self._key: bytes | None = None
        self._exchanger: str | None = None
        self._nursery: trio.Nursery | None = None
        #: ticket nonces taken, with their expiry (a store of its own: see :meth:`_take`)
        self._used: dict[str, float] = {}
        self._flights: dict[str, _Flight] = {}  # the logins waiting here, by state
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
        (:class:`_ExchangeBroker`)."""
        self._base_url = base_url.rstrip("/")
        self._key = key
        self._nursery = nursery
        self._exchanger = exchanger
        for broker in self._brokers.values():
            self._point(broker)

    def detach(self) -> None:
        self._base_url = self._key = self._nursery = self._exchanger = None

    @property
    def rows(self) -> TokenStore:
        """The store's rows (where logins in progress are handed between replicas)."""
        return self._rows

    @property
    def callback_url(self) -> str | None:
        return None if self._base_url is None else self._base_url + CALLBACK_ROUTE

    def broker(self, server: str, subject: str) -> _UserBroker:
        """``subject``'s broker for ``server`` (made when first asked)."""
        key = (server, subject)
        broker = self._brokers.pop(key, None)
        if broker is None:
            if len(self._brokers) >= MAX_BROKERS * max(len(self.servers), 1):
                self._let_go()
            config = self.servers[server]
            exchange = config.auth.per_user == "token_exchange"
            auth = msgspec.structs.replace(
                config.auth,
                account=user_account(subject),
                # a login is the browser's; an exchange ignores it (_ExchangeBroker)
                grant=config.auth.grant if exchange else "authorization_code",
                # no login runs without the gateway's pages: until then, a placeholder
                redirect_uri=self.callback_url or _NO_CALLBACK,
            )
            kind = _ExchangeBroker if exchange else _UserBroker
            broker = kind(
                config.url,
                auth,
                subject=subject,
                store=self.store,
                logins=Logins(),  # never listening: the gateway's pages take the answers
                servers=[server],
                publish=self._publish,
                remember=self._remember,
                forget=self._forget,
                callback=lambda: None,  # replaced by _point
                base_dir=self._base_dir,
            )
            if isinstance(broker, _ExchangeBroker):
                broker.subject_token = partial(self.subject_token, subject)
                broker.exchanger = lambda: self._exchanger
            else:
                self._point(broker)
        self._brokers[key] = broker  # the most recently used last
        return broker

    def _let_go(self) -> None:
        for key, broker in list(self._brokers.items()):
            if not broker.logging_in:
                del self._brokers[key]
                return

    def _point(self, broker: _UserBroker) -> None:
        """Send ``broker``'s logins through the gateway's callback."""
        callback = self.callback_url
        if callback is not None:
            broker.auth = msgspec.structs.replace(broker.auth, redirect_uri=callback)
            provider = broker.provider
            if isinstance(provider, OAuthClientProvider):
                provider.context.client_metadata.redirect_uris = [AnyUrl(callback)]
                fixed = broker.credentials.fixed_client
                if fixed is not None:
                    fixed.redirect_uris = [AnyUrl(callback)]

        async def wait() -> Any:  # noqa: ANN401 - the SDK's AuthorizationCodeResult
            assert broker._authorization.login_state is not None
            return await self._callback_of(broker._authorization.login_state)

        broker._authorization.callback = wait

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
        if self._base_url is None or self._key is None:
            return None
        expires = int(time.time() + TICKET_SECONDS)
        body = json.dumps([server, subject, expires, secrets.token_urlsafe(12)]).encode()
        ticket = _b64(body) + "." + _b64(self._mac(body))
        return f"{self._base_url}{LOGIN_ROUTE}?ticket={ticket}"

    def _mac(self, body: bytes) -> bytes:
        assert self._key is not None
        return hmac.new(self._key, b"mcp-supervisor user login\n" + body, hashlib.sha256).digest()

    async def open_ticket(self, ticket: str) -> tuple[str, str]:
        """The server and subject of a good ``ticket`` (taken: it is good once, by
        :meth:`_take`); :class:`_BadTicket` saying why not."""
        if self._key is None:
            raise _BadTicket("this gateway serves no logins")
        server = subject = expires = nonce = None  # until the ticket reads as one
        try:
            body_text, mac_text = ticket.split(".", 1)
            body = _unb64(body_text)
            good = hmac.compare_digest(_unb64(mac_text), self._mac(body))
            server, subject, expires, nonce = json.loads(body) if good else (0, 0, 0, 0)
        except (ValueError, TypeError):
            good = False
        if not good or not isinstance(server, str) or not isinstance(subject, str):
            raise _BadTicket("this login link is not one of this gateway's")
        now = time.time()
        if not isinstance(expires, int) or expires < now:
            raise _BadTicket("this login link has expired: call the tool again for a new one")
        if server not in self.servers:
            raise _BadTicket("this gateway no longer serves that server per user")
        if not await self._take(str(nonce), expires):
            raise _BadTicket("this login link was used already: call the tool again for a new one")
        return server, subject

    async def _take(self, nonce: str, expires: int) -> bool:
        """Whether the ticket ``nonce`` is taken now (``False``: it was before). In a
        token store of :mod:`._backends` — the one replicas share — its row records it
        until the ticket expires, taken by one replica of all at once
        (:meth:`~._backends._Rows.claim`); else in this process (:attr:`_used`)."""
        if isinstance(self._rows, _Rows):
            return await self._rows.claim("tickets", _ticket_key(nonce), float(expires))
        now = time.time()
        self._used = {n: e for n, e in self._used.items() if e >= now}
        if nonce in self._used:
            return False
        self._used[nonce] = expires
        return True

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
            await self._expect(_state_of(url))
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
                    await self._landed(broker._authorization.login_state, error)

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
        is ``url`` (:meth:`begin`'s) to the browser sent there (:data:`BROWSER_COOKIE`):
        HttpOnly, SameSite=Lax (the authorization server's redirect back is a top-level
        GET, which takes it along), for as long as the login waits."""
        name, value = self._cookie(_state_of(url))
        attributes = f"Path=/; Max-Age={int(LOGIN_TIMEOUT)}; HttpOnly; SameSite=Lax"
        if name.startswith("__Host-"):
            attributes += "; Secure"
        return f"{name}={value}; {attributes}".encode()

    def _cookie(self, state: str) -> tuple[str, str]:
        """The name and value of the cookie binding the login ``state`` to its browser."""
        assert self._key is not None and self._base_url is not None
        secure = self._base_url.startswith("https://")
        name = ("__Host-" if secure else "") + BROWSER_COOKIE + _state_key(state)[6:22]
        said = b"mcp-supervisor login browser\n" + state.encode()
        mac = hmac.new(self._key, said, hashlib.sha256)
        return name, _b64(mac.digest())

    def _bound(self, state: str, cookies: str | None) -> bool:
        """Whether the ``Cookie`` header ``cookies`` holds the login ``state``'s cookie."""
        if self._key is None or self._base_url is None or not cookies:
            return False
        name, value = self._cookie(state)
        for pair in cookies.split(";"):
            given_name, _, given = pair.strip().partition("=")
            if given_name == name and hmac.compare_digest(given.encode(), value.encode()):
                return True
        return False

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
        if not self._bound(state, cookies):
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
        name, _ = self._cookie(state)
        secure = "; Secure" if name.startswith("__Host-") else ""
        cleared = f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax{secure}".encode()
        status, page = await self._hand_over(state, answer)
        return status, page, [(b"set-cookie", cleared)]

    async def _hand_over(self, state: str, answer: Any) -> tuple[int, bytes]:  # noqa: ANN401
        """Hand ``answer`` to the login ``state`` (see :meth:`callback`)."""
        key = _state_key(state)
        flight = self._flights.get(state)
        outcome: dict[str, Any] | None = None
        if flight is not None and flight.answer is None:
            flight.answer = answer
            flight.answered.set()
            with trio.move_on_after(DONE_TIMEOUT):
                await flight.done.wait()
                outcome = {"error": flight.error}
        else:
            row = await self._rows.read("logins", key)
            if row is None or not row.get("waiting"):
                return 400, _page(False, "No login is waiting for this answer (it timed out?).")
            await self._rows.write("logins", key, {"answer": _row_of(answer)})
            with trio.move_on_after(DONE_TIMEOUT):
                while outcome is None:
                    await trio.sleep(POLL_SECONDS)
                    row = await self._rows.read("logins", key)
                    if row is None or "done" in row:
                        outcome = row or {"error": "the login was abandoned"}
            await self._rows.delete("logins", key)
        if outcome is None:
            return 504, _page(False, "The login is taking long: call the tool again shortly.")
        if outcome.get("error"):
            return 502, _page(False, f"The login failed: {outcome['error']}")
        return 200, _page(True, "You are logged in. Go back to your client and call again.")

    async def _callback_of(self, state: str) -> Any:  # noqa: ANN401 - AuthorizationCodeResult
        """Wait for the answer to the login ``state`` (:data:`LOGIN_TIMEOUT`), brought
        here or to another replica (then through the store)."""
        rows, key = self._rows, _state_key(state)
        flight = self._flights.get(state) or await self._expect(state)
        with trio.fail_after(LOGIN_TIMEOUT):
            while flight.answer is None:
                with trio.move_on_after(POLL_SECONDS):
                    await flight.answered.wait()
                if flight.answer is None:
                    row = await rows.read("logins", key)
                    if row is not None and isinstance(row.get("answer"), dict):
                        flight.answer = _answer_of(row["answer"])
                        flight.via_store = True
        if isinstance(flight.answer, LoginCancelled):
            raise flight.answer
        return flight.answer

    async def _expect(self, state: str) -> _Flight:
        """Wait here for the answer to the login ``state``; say so in the store, for the
        replica the browser brings it to."""
        flight = self._flights[state] = _Flight()
        row = {"waiting": True, "until": time.time() + LOGIN_TIMEOUT}
        await self._rows.write("logins", _state_key(state), row)
        return flight

    async def _landed(self, state: str | None, error: str | None) -> None:
        """The login of ``state`` ended (``error``: how it failed): tell its callback,
        here or on the replica it reached; forget it."""
        if state is None:
            return
        flight = self._flights.pop(state, None)
        if flight is None:
            return
        flight.error = error
        flight.done.set()
        key = _state_key(state)
        if flight.via_store:
            await self._rows.write("logins", key, {"done": True, "error": error})
        elif flight.answer is None:  # no answer came: nobody will take the row
            await self._rows.delete("logins", key)


@attrs.define(eq=False)
class _Flight:
    """A login waiting for, then served with, its authorization server's answer."""

    answered: trio.Event = attrs.Factory(trio.Event)
    answer: Any = None
    via_store: bool = False
    done: trio.Event = attrs.Factory(trio.Event)
    error: str | None = None


#: The largest answer taken from an authorization server (token, metadata), in bytes.
MAX_ANSWER_BYTES = 64 * 1024


async def _json_answer(
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


def _state_key(state: str) -> str:
    return "login-" + hashlib.sha256(state.encode()).hexdigest()[:40]


def _ticket_key(nonce: str) -> str:
    return "ticket-" + hashlib.sha256(nonce.encode()).hexdigest()[:40]


def _same_issuer(issuer: str) -> str:
    """``issuer`` as compared with another (a URL's trailing ``/`` aside)."""
    return issuer.rstrip("/")


def _state_of(url: str) -> str:
    """The ``state`` of the authorization URL ``url``."""
    return parse_qs(urlsplit(url).query).get("state", [""])[0]


def _row_of(answer: Any) -> dict[str, Any]:  # noqa: ANN401 - either answer
    if isinstance(answer, LoginCancelled):
        return {"error": answer.error, "description": answer.description}
    return {"code": answer.code, "state": answer.state, "iss": answer.iss}


def _answer_of(row: Mapping[str, Any]) -> Any:  # noqa: ANN401 - either answer
    if "error" in row:
        return LoginCancelled(str(row["error"]), row.get("description"))
    return AuthorizationCodeResult(
        code=str(row["code"]), state=row.get("state"), iss=row.get("iss")
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
