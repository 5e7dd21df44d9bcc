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
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx2
import trio
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    handle_auth_metadata_response,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import AnyUrl

from .._sdk import OAuthProvider, forget_provider_state, initialize_provider
from ..actors import Actor, actor_spec
from ..errors import AuthProblem as AuthProblem
from ..events import _catalog as events
from ..log import get_logger, redact
from ._backends import TokenStore
from ._dpop import Nonces, nonce_asked
from ._idjag import discover_issuer, fetch_id_jag, read_secret
from ._login import CALLBACK_PATH, DEFAULT_CALLBACK_PORT, EXTRA_PORTS, LoginCancelled, Logins
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
class _Challenge:
    """A server's refusal of a token: its status and ``WWW-Authenticate``."""

    status: int
    www_authenticate: str | None

    @classmethod
    def of(cls, response: httpx2.Response) -> _Challenge:
        return cls(response.status_code, response.headers.get("www-authenticate"))

    @property
    def step_up(self) -> bool:
        return self.status == 403


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


def _bearer(request: httpx2.Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:] if value[:7].lower() == "bearer " else None


def _challenge_header(challenge: _Challenge | None, scopes: Sequence[str]) -> dict[str, str]:
    """The ``WWW-Authenticate`` given to the provider: the server's own, with the
    configured scopes added to (or put in) its ``scope``."""
    header = challenge.www_authenticate if challenge is not None else None
    if not scopes:
        return {"www-authenticate": header} if header else {}
    if header is None:
        return {"www-authenticate": f'Bearer scope="{" ".join(scopes)}"'}
    probe = httpx2.Response(401, headers={"www-authenticate": header})
    had = (extract_field_from_www_auth(probe, "scope") or "").split()
    merged = " ".join(dict.fromkeys([*had, *scopes]))
    params = [p for p in _params(header) if not p.lower().startswith("scope=")]
    return {"www-authenticate": "Bearer " + ", ".join([*params, f'scope="{merged}"'])}


def _params(header: str) -> list[str]:
    """The ``key=value`` parameters of a challenge, ``Bearer`` or ``DPoP`` (quoted
    values kept whole)."""
    scheme, _, rest = header.partition(" ")
    body = rest if scheme and "=" not in scheme else header
    out, current, quoted = [], "", False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            if current.strip():
                out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def _oauth_error(exc: BaseException) -> str | None:
    text = str(exc)
    for code in (
        "invalid_grant",
        "invalid_client",
        "unauthorized_client",
        "access_denied",
        "invalid_scope",
        "unsupported_grant_type",
        "invalid_request",
        "server_error",
        "temporarily_unavailable",
    ):
        if code in text:
            return code
    return getattr(exc, "error", None)


#: token generations a broker keeps redacted: the current one and the one it replaced
_TOKEN_GENERATIONS = 2


async def _legacy_issuer(http: httpx2.AsyncClient, url: str) -> str | None:
    """How a server without protected-resource metadata offers OAuth (2025-03-26): the
    issuer its origin's authorization-server metadata declares — it was found at the
    server's own origin, so that is the issuer expected of it — or ``""`` when there is
    no metadata, so that version's default endpoints (``/authorize``, ``/token`` and
    ``/register`` at the origin) are used, as it says: the server has them unless its
    ``/token`` is not there at all (:func:`_token_endpoint_there`); ``None`` then."""
    origin = "/".join(url.split("/", 3)[:3])
    answer = await http.get(origin + "/.well-known/oauth-authorization-server")
    if answer.status_code == 200 and "json" in answer.headers.get("content-type", ""):
        try:
            issuer = answer.json().get("issuer")
        except (ValueError, AttributeError):
            issuer = None
        return issuer if isinstance(issuer, str) and issuer.startswith("http") else ""
    answer = await http.post(origin + "/token", data={})
    return "" if _token_endpoint_there(answer) else None


def _token_endpoint_there(answer: httpx2.Response) -> bool:
    """Whether ``answer``, to an empty ``POST /token``, shows a token endpoint there. It
    does not when it is: nothing at that path (404, 405, 410, 501); a redirect (a token
    endpoint never redirects); the refusal a server that wants credentials gives on
    every path (401 or 403 without a token endpoint's error of RFC 6749 §5.2 — say
    RFC 6750's ``invalid_token``); or a success that is not JSON (a page served for any
    path). Anything else does: a token endpoint's refusal, or a lax one's token."""
    status = answer.status_code
    if status in (401, 403):
        try:
            said = answer.json()
        except ValueError:
            return False
        return isinstance(said, dict) and said.get("error") in _TOKEN_ENDPOINT_ERRORS
    if 200 <= status < 300:
        return "json" in answer.headers.get("content-type", "")
    return status >= 400 and status not in (404, 405, 410, 501)


#: What an OAuth token endpoint refuses a request with (RFC 6749 §5.2) — not what a
#: server that checks a bearer token on every path says (RFC 6750's ``invalid_token``).
_TOKEN_ENDPOINT_ERRORS = frozenset(
    {"invalid_request", "invalid_client", "invalid_grant", "unsupported_grant_type"}
)

SecretMethod = Literal["client_secret_basic", "client_secret_post"]

#: How a client with a secret authenticates at the token endpoint, in the order taken
#: among those the authorization server lists: Basic first, the one RFC 6749 (§2.3.1)
#: has every server support and recommends over the secret in the body.
_SECRET_METHODS: tuple[SecretMethod, ...] = ("client_secret_basic", "client_secret_post")


def secret_method(supported: Sequence[str] | None) -> SecretMethod:
    """How a client with a secret authenticates at a token endpoint whose authorization
    server lists ``supported`` (its metadata's ``token_endpoint_auth_methods_supported``):
    ``client_secret_basic`` when listed — or when nothing is, RFC 8414's default — else
    ``client_secret_post`` when listed, else ``client_secret_basic``."""
    if not supported:
        return "client_secret_basic"
    for method in _SECRET_METHODS:
        if method in supported:
            return method
    return "client_secret_basic"


async def _server_metadata(
    http: httpx2.AsyncClient, issuer: str | None, url: str
) -> OAuthMetadata | None:
    """The authorization-server metadata of ``issuer`` (RFC 8414 and OpenID discovery,
    path-aware; ``None``: the 2025-03-26 place, ``url``'s origin), if it publishes any."""
    for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        response = await http.send(create_oauth_metadata_request(candidate))
        await response.aread()
        go_on, metadata = await handle_auth_metadata_response(response)
        if metadata is not None or not go_on:
            return metadata
    return None


class _Provider(OAuthProvider):
    """The SDK's provider, told what a 2025-03-26 server's origin declares: the issuer
    expected of the authorization-server metadata found there is the one it names (the
    SDK expects the origin itself, and refuses an issuer under a path)."""

    legacy_issuer: str | None = None

    def expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self.legacy_issuer:
            return self.legacy_issuer
        return super().expected_issuer()


class TokenBroker:
    """Tokens for one resource (a remote server's URL) × account; see the module doc.

    ``servers`` are the configured servers that share it (their events name each);
    ``remember`` registers a secret with the log redactor and ``forget`` releases one
    (tokens are held for two generations: the current and the one it replaced, so a
    broker running for months holds four secrets, not thousands); ``redirect`` shows a
    person the authorization URL (``None``: browser logins wait for :meth:`login`);
    ``callback`` replaces the loopback listener when given.
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
        self._forget = forget
        #: the token generations held by the redactor, oldest first
        self._held_tokens: list[tuple[str, ...]] = []
        self.redirect = redirect
        self._callback = callback
        self._base_dir = base_dir
        self.credentials = Credentials(
            store,
            self.resource,
            self.account,
            server=self.servers[0],
            on_tokens=self._seen,
            dpop=bool(getattr(auth, "dpop", False)),
        )
        #: the latest DPoP nonce of each endpoint (the token endpoint's, the server's)
        self._nonces = Nonces()
        #: the DPoP key secret last registered with the redactor
        self._dpop_secret: str | None = None
        self.clock = clock
        self.state = BrokerState.UNKNOWN
        self.error: str | None = None
        #: access tokens renewed with the refresh token, successfully
        self.refreshes = 0
        self._token: str | None = None
        self._expires_at: float | None = None
        self._lifetime: float | None = None
        self._challenge: _Challenge | None = None
        self._step_ups = 0
        self._interactive = False
        self._login_state: str | None = None
        self._changed = trio.Event()
        #: set (and replaced by a fresh one) at each change of :attr:`state`
        self.state_changed = trio.Event()
        self._speaks: bool | None = None
        #: a 2025-03-26 server's (no protected-resource metadata): the issuer its origin's
        #: authorization-server metadata declares, ``""`` when it has none (the fallback)
        self._legacy_issuer: str | None = None
        #: how the client authenticates with its secret, as the authorization server's
        #: metadata lists (``None``: not looked up yet); ``tokenEndpointAuthMethod`` wins
        self._secret_method: SecretMethod | None = None
        #: where the ``workload_identity`` grant's JWT is (made with its first provider)
        self._assertions: Any = None
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

    def __repr__(self) -> str:
        return f"<TokenBroker {self.resource} account={self.account!r} state={self.state}>"

    # -- what the connections ask --------------------------------------------------------

    @property
    def interactive(self) -> bool:
        """Whether getting a token may need a person (the browser login)."""
        return self.grant == "authorization_code"

    def current(self) -> str | None:
        """The held access token if it is good for a while yet, else ``None``."""
        if self._token is None:
            return None
        if self._expires_at is not None:
            lifetime = self._lifetime or 0.0
            margin = min(60.0, max(1.0, 0.1 * lifetime))
            if self.clock() >= self._expires_at - margin:
                return None
        return self._token

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
        return await self._ask(_Renew(token, _Challenge.of(response)))

    def presenting(self, method: str, url: httpx2.URL, token: str) -> dict[str, str]:
        """The headers that present ``token`` on a request to the server: ``Authorization:
        Bearer``, or for a DPoP-bound token ``Authorization: DPoP`` and a fresh proof of
        this request (with the server's latest nonce; see :mod:`._dpop`)."""
        if not self.credentials.dpop_bound:
            return {"Authorization": f"Bearer {token}"}
        return {
            "Authorization": f"DPoP {token}",
            "DPoP": self._proof(method, url, access_token=token),
        }

    def nonce_asked(self, url: httpx2.URL, response: httpx2.Response) -> bool:
        """Note the DPoP nonce the server's answer gives; whether the answer refuses the
        request for want of one (401 ``use_dpop_nonce``, RFC 9449 §9)."""
        if self.credentials.dpop_key is None:
            return False
        self._nonces.heard(url, response)
        return response.status_code == 401 and nonce_asked(response)

    def _proof(self, method: str, url: httpx2.URL, *, access_token: str | None = None) -> str:
        """A DPoP proof with the key the tokens are bound to (its private half held by
        the redactor first), with the endpoint's latest nonce."""
        key = self.credentials.dpop_key
        assert key is not None
        secret = key.secret
        if secret != self._dpop_secret:
            self._remember(secret)
            self._dpop_secret = secret
        return key.proof(method, url, access_token=access_token, nonce=self._nonces.get(url))

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
        self._token = self._expires_at = None
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

    async def _refresh(self, rejected: str | None, challenge: _Challenge | None) -> str:
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

    async def _step_up_login(self, rejected: str | None, challenge: _Challenge | None) -> str:
        """A login for more scope (the union of the held and the challenged), through the
        broker's redirect handler, for a request waiting on it (SEP-835)."""
        self._interactive = True
        try:
            return await self._drive(rejected=rejected, challenge=challenge, fresh=True)
        finally:
            self._interactive = False

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
        self._interactive = True
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
            self._interactive = False
            self.redirect = saved

    async def _drive(
        self, *, rejected: str | None, challenge: _Challenge | None, fresh: bool = False
    ) -> str:
        """Run the provider's flow once (see the module doc); the new token."""
        await self._follow_metadata(challenge, fresh)
        provider = self.provider
        context = getattr(provider, "context", None)
        if provider is not None and context is not None:
            # a provider with a context: an OAuthClientProvider, or the SDK's identity-assertion
            # one (no subclass of it) that initialize_provider reads the same way
            await initialize_provider(provider)  # pyright: ignore[reportArgumentType]
            # Whatever it holds: renew, refreshing first (0 would read as "no expiry").
            context.token_expiry_time = 1.0
            if fresh:
                context.clear_tokens()
        ports = self._ports()
        uses_listener = self.interactive and self._interactive and self._callback is None
        if uses_listener:
            try:
                port = await self.logins.acquire(ports)
            except OSError as exc:
                raise AuthProblem(
                    f"{exc}; set another callbackPort in the server's auth", needs_login=True
                ) from exc
            self._set_redirect_uris(port, ports)
        started = self.refreshes
        try:
            token = await self._flow(rejected, challenge, fresh)
        except (OAuthFlowError, OAuthTokenError, OAuthRegistrationError, ValueError) as exc:
            raise AuthProblem(
                redact(f"authorization failed: {exc}"),
                needs_login=False,
                oauth_error=_oauth_error(exc),
            ) from exc
        except (LoginCancelled, TimeoutError) as exc:
            raise AuthProblem(
                redact(f"login failed: {exc}"),
                needs_login=False,
                oauth_error=getattr(exc, "error", None),
            ) from exc
        finally:
            if uses_listener:
                await self.logins.release()
        self._adopt(token)
        self.error = None
        self._set_state(BrokerState.OK)
        if self.refreshes > started and not fresh:  # renewed by its refresh token
            self._emit(lambda s: events.AuthRefreshed(server=s, expires_at=self._expires_at))
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

    async def _follow_metadata(self, challenge: _Challenge | None, fresh: bool) -> None:
        """A client with a secret and no ``tokenEndpointAuthMethod`` authenticates at the
        token endpoint as its authorization server lists (:func:`secret_method` of the
        metadata's ``token_endpoint_auth_methods_supported``), whatever the grant: looked
        up before the first flow, and again at each one from the start; the provider is
        made again when that changes the method. An authorization server that cannot be
        reached is left to the flow to report."""
        a = self.auth
        if a.token_endpoint_auth_method or not a.client_id or not a.client_secret:
            return
        if self._secret_method is not None and not fresh:
            return
        async with httpx2.AsyncClient(timeout=30.0) as http:
            try:
                issuer = a.issuer or (
                    self.credentials.issuer if self.grant == "identity_assertion" else None
                )
                if not issuer:
                    issuer = await discover_issuer(http, self.url, challenge or self._challenge)
                metadata = await _server_metadata(http, issuer, self.url)
            except httpx2.HTTPError as exc:
                log.debug("no authorization-server metadata", url=self.url, error=str(exc))
                return
        method = secret_method(metadata.token_endpoint_auth_methods_supported if metadata else None)
        if method != self._secret_method:
            self._secret_method = method
            self.provider = self._make_provider()

    async def _flow(self, rejected: str | None, challenge: _Challenge | None, fresh: bool) -> str:
        probe = httpx2.Request(
            "POST",
            self.url,
            headers={"mcp-protocol-version": LATEST_HANDSHAKE_VERSION},
        )
        challenged = False
        async with httpx2.AsyncClient(timeout=30.0) as http:
            if self.provider is None:
                await self._discover_issuer(http)
            assert self.provider is not None
            if isinstance(self.provider, _Provider):
                await self._speaks_oauth(challenge)
                self.provider.legacy_issuer = self._legacy_issuer
            flow = self.provider.async_auth_flow(probe)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is probe:
                        token = _bearer(probe)
                        if token is not None and token != rejected and (challenged or not fresh):
                            return token
                        if challenged:
                            raise AuthProblem(
                                "the authorization server gave no usable token",
                                needs_login=False,
                            )
                        if self.interactive and not self._interactive:
                            raise AuthProblem(self._login_hint(), needs_login=True)
                        challenged = True
                        probe.headers.pop("authorization", None)
                        status = challenge.status if challenge is not None else 401
                        response = httpx2.Response(
                            status,
                            headers=_challenge_header(challenge, self._wanted_scopes(challenge)),
                            request=probe,
                        )
                    else:
                        response = await self._send(http, outgoing)
                        refresh = b"grant_type=refresh_token" in (outgoing.content or b"")
                        if refresh and response.status_code == 200:
                            self.refreshes += 1  # counted once it worked
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                token = _bearer(probe)
                if token is None or token == rejected:
                    raise AuthProblem(
                        "the authorization server gave no usable token", needs_login=False
                    ) from None
                return token
            finally:
                await flow.aclose()

    async def _send(self, http: httpx2.AsyncClient, outgoing: httpx2.Request) -> httpx2.Response:
        """Send one of the provider's requests, read. A DPoP client's token request
        carries a proof (with the token endpoint's latest nonce) and is sent once more
        with the nonce its refusal asks for (400 ``use_dpop_nonce``, RFC 9449 §8); a
        DPoP-bound token in the answer is noted bound and handed to the provider as a
        Bearer one (the only ``token_type`` the SDK reads)."""
        content = outgoing.content or b""
        token_request = outgoing.method == "POST" and b"grant_type=" in content
        if self.credentials.dpop_key is None or not token_request:
            response = await http.send(outgoing)
            await response.aread()
            return response
        attempt = 0
        while True:  # twice at most: once more with the nonce a refusal asks for
            outgoing.headers["DPoP"] = self._proof("POST", outgoing.url)
            response = await http.send(outgoing)
            await response.aread()
            self._nonces.heard(outgoing.url, response)
            if attempt or not nonce_asked(response):
                break
            attempt += 1
        if response.status_code != 200:
            return response
        try:
            answer = json.loads(response.content)
        except ValueError:
            return response  # the provider reports it
        if not isinstance(answer, dict) or not isinstance(answer.get("token_type"), str):
            return response
        bound = answer["token_type"].lower() == "dpop"
        self.credentials.dpop_bound = bound
        if not bound:
            return response  # a Bearer token after all: presented as one
        answer["token_type"] = "Bearer"
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        ]
        return httpx2.Response(200, headers=headers, json=answer, request=outgoing)

    # -- the SDK provider's handlers ----------------------------------------------------

    async def _redirect_handler(self, url: str) -> None:
        # the authorization-code grant's handler: its provider is a _Provider
        context = cast(_Provider, self.provider).context
        metadata = context.oauth_metadata
        methods = (metadata.code_challenge_methods_supported or []) if metadata else []
        # A 2025-03-26 server with no metadata at all advertises nothing: that version
        # requires PKCE of it, and the SDK sends S256.
        fallback = metadata is None and self._legacy_issuer == ""
        if "S256" not in methods and not fallback:
            where = str(metadata.issuer) if metadata else "the authorization server"
            raise AuthProblem(
                f"{where} does not advertise PKCE with S256 (code_challenge_methods_supported)"
                ", which the MCP authorization spec requires; refusing to log in there",
                needs_login=False,
                oauth_error="pkce_not_supported",
            )
        if not self._interactive or self.redirect is None:
            raise AuthProblem(self._login_hint(), needs_login=True)
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        self._login_state = state
        if self._callback is None:
            self.logins.expect(state)
        self._emit(lambda s: events.AuthStarted(server=s, grant=self.grant))
        log.info("OAuth login started", servers=list(self.servers), account=self.account)
        try:
            await self.redirect(url)
        except Exception as exc:  # the embedder's handler: its failure is this login's
            self.logins.forget(state)
            raise AuthProblem(
                f"the login could not be shown (the redirect handler raised {exc!r})",
                needs_login=False,
            ) from exc

    async def _callback_handler(self) -> Any:
        if self._callback is not None:
            return await self._callback()
        assert self._login_state is not None
        return await self.logins.wait(self._login_state)

    # -- internals ------------------------------------------------------------------------

    @property
    def speaks_oauth(self) -> bool | None:
        """Whether the server offers OAuth (``None``: not known yet)."""
        return self._speaks

    async def _speaks_oauth(self, challenge: _Challenge | None) -> bool:
        """Whether the server's refusal can be answered with OAuth at all: it publishes
        protected-resource metadata (RFC 9728), or — a 2025-03-26 server — authorization-
        server metadata at its origin, or else that version's default endpoints are used
        (unless its ``/token`` is not there at all). Asked once; a server that does none
        of these is refused as a plain HTTP 401 (wrong or missing credentials in its
        headers)."""
        if self._speaks is None:
            if self.grant == "identity_assertion":
                self._speaks = True
            else:
                async with httpx2.AsyncClient(timeout=10.0) as http:
                    found = await discover_issuer(http, self.url, challenge) is not None
                    if not found:
                        self._legacy_issuer = await _legacy_issuer(http, self.url)
                        found = self._legacy_issuer is not None
                self._speaks = found
        return self._speaks

    def _wanted_scopes(self, challenge: _Challenge | None) -> list[str]:
        """Scopes to add to the server's challenge: the configured ones, and for a
        step-up the ones held now (the provider forgets them with the old token)."""
        wanted = list(self.auth.scopes)
        if challenge is not None and challenge.step_up:
            stored = self.credentials.stored()
            if stored is not None and stored.token.scope:
                wanted += stored.token.scope.split()
        return list(dict.fromkeys(wanted))

    def _login_hint(self) -> str:
        name = self.servers[0]
        return f"MCP server {name!r} needs an OAuth login: run `mcp-supervisor auth login {name}`"

    def _ports(self) -> list[int]:
        if self.auth.redirect_uri:
            return [urlsplit(self.auth.redirect_uri).port or 80]
        base = self.auth.callback_port or DEFAULT_CALLBACK_PORT
        return [p for p in range(base, base + 1 + EXTRA_PORTS) if p <= 65535]

    def _redirect_uris(self, first: int | None = None) -> list[str]:
        if self.auth.redirect_uri:
            return [self.auth.redirect_uri]
        ports = self._ports()
        if first is not None:
            ports = [first, *(p for p in ports if p != first)]
        return [self.logins.redirect_uri(p, CALLBACK_PATH) for p in ports]

    def _set_redirect_uris(self, port: int, ports: Sequence[int]) -> None:
        # a browser login's (the authorization-code grant): its provider is a _Provider
        context = cast(_Provider, self.provider).context
        context.client_metadata.redirect_uris = [AnyUrl(u) for u in self._redirect_uris(port)]

    def _make_provider(self) -> httpx2.Auth | None:
        a = self.auth
        scope = " ".join(a.scopes) or None
        if self.grant == "client_credentials":
            return self._machine_provider(scope)
        if self.grant == "identity_assertion":
            return self._identity_assertion(scope)
        if self.grant == "workload_identity":
            return self._workload_identity(scope)
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(u) for u in self._redirect_uris()],
            client_name=a.client_name or "mcp-supervisor",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=(
                a.token_endpoint_auth_method
                or ((self._secret_method or "client_secret_basic") if a.client_secret else "none")
            ),
            scope=scope,
        )
        if a.client_id:
            self.credentials.fixed_client = OAuthClientInformationFull(
                client_id=a.client_id,
                client_secret=a.client_secret,
                redirect_uris=[AnyUrl(u) for u in self._redirect_uris()],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method=metadata.token_endpoint_auth_method,
            )
        return _Provider(
            self.url,
            metadata,
            self.credentials,
            redirect_handler=self._redirect_handler,
            callback_handler=self._callback_handler,
            client_metadata_url=a.client_metadata_url,
        )

    def _machine_provider(self, scope: str | None) -> httpx2.Auth:
        """The SDK's client-credentials provider: with the client secret, or signing a
        private-key JWT with the key read when an assertion is made (a missing key file
        fails that server's authorization, saying which file)."""
        # Loaded only for the servers that use them (PyJWT): every command imports this.
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        a = self.auth
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # no issuer configured
            if not a.private_key_file:
                return ClientCredentialsOAuthProvider(
                    self.url,
                    self.credentials,
                    a.client_id,
                    a.client_secret,
                    token_endpoint_auth_method=a.token_endpoint_auth_method
                    or self._secret_method
                    or "client_secret_basic",
                    scope=scope,
                    issuer=a.issuer,
                )
            base_dir = self._base_dir

            async def assertion(audience: str) -> str:
                key = read_secret(a.private_key_file, None, base_dir, "privateKeyFile")
                sign = SignedJWTParameters(
                    issuer=a.client_id,
                    subject=a.client_id,
                    signing_key=key,
                    signing_algorithm=a.signing_algorithm or "RS256",
                ).create_assertion_provider()
                return await sign(audience)

            return PrivateKeyJWTOAuthProvider(
                self.url, self.credentials, a.client_id, assertion, scope=scope, issuer=a.issuer
            )

    def _identity_assertion(self, scope: str | None) -> httpx2.Auth | None:
        """The SDK's SEP-990 provider, once its authorization server's issuer is known
        (configured, or discovered by :meth:`_discover_issuer`); ``None`` until then."""
        from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

        a = self.auth
        issuer = a.issuer or self.credentials.issuer
        if not issuer:
            return None
        base_dir = self._base_dir

        async def assertion(audience: str, resource: str) -> str:
            jag = await fetch_id_jag(a.idp, audience, resource, base_dir, self._remember)
            return jag

        self.credentials.issuer = issuer
        return IdentityAssertionOAuthProvider(
            self.url,
            self.credentials,
            a.client_id,
            a.client_secret,
            issuer,
            assertion,
            scope=scope,
            token_endpoint_auth_method=(
                a.token_endpoint_auth_method or self._secret_method or "client_secret_post"
            ),
        )

    def _workload_identity(self, scope: str | None) -> httpx2.Auth:
        """The jwt-bearer grant with the workload's own JWT (SEP-1933,
        :mod:`._workload`), read from its file or variable at each token request."""
        # Loaded only for the servers that use it (PyJWT): every command imports this.
        from ._workload import AssertionSource, WorkloadIdentityOAuthProvider

        a = self.auth
        if self._assertions is None:
            self._assertions = AssertionSource(
                a.assertion_file,
                a.assertion_env,
                self._base_dir,
                remember=self._remember,
                forget=self._forget,
            )
        secret = a.client_secret
        return WorkloadIdentityOAuthProvider(
            self.url,
            self.credentials,
            a.client_id,
            self._assertions,
            client_secret=secret,
            token_endpoint_auth_method=a.token_endpoint_auth_method
            or ((self._secret_method or "client_secret_basic") if secret else "none"),
            scope=scope,
            issuer=a.issuer,
        )

    async def _discover_issuer(self, http: httpx2.AsyncClient) -> None:
        """The identity-assertion grant without a configured issuer: take it from the
        resource's protected-resource metadata (RFC 9728), then make the provider."""
        found = await discover_issuer(http, self.url, self._challenge)
        if found is None:
            raise AuthProblem(
                f"{self.url}'s protected-resource metadata names no authorization server; "
                'set "issuer" in the server\'s auth',
                needs_login=False,
            )
        self.credentials.issuer = found
        self.provider = self._make_provider()

    def _clear_provider(self) -> None:
        """Make the provider read the stored credentials again before its next flow."""
        forget_provider_state(self.provider)

    def _load(self) -> None:
        stored = self.credentials.stored()
        if stored is None:
            self._token = self._expires_at = self._lifetime = None
            if self.interactive and self.state is BrokerState.UNKNOWN:
                pass
            return
        self._remember_token(stored.token)
        self._token = stored.token.access_token
        self._expires_at = stored.expires_at
        self._lifetime = (
            None if stored.expires_at is None else max(stored.expires_at - stored.saved_at, 0.0)
        )
        self.credentials.issuer = stored.issuer
        if self.state is BrokerState.UNKNOWN:
            self.state = BrokerState.OK

    def _adopt(self, token: str) -> None:
        self._load()
        if self._token != token:  # a provider that did not store (it always does)
            self._token, self._expires_at, self._lifetime = token, None, None

    def _seen(self, tokens: OAuthToken) -> None:
        """The SDK stores new tokens: make them secret before anything can print them,
        and note the issuer they came from."""
        self._remember_token(tokens)
        context = getattr(self.provider, "context", None)
        issuer = None
        if context is not None and context.oauth_metadata is not None:
            issuer = str(context.oauth_metadata.issuer)
        if issuer is not None:
            self.credentials.issuer = issuer

    def _remember_token(self, tokens: OAuthToken) -> None:
        """Hold these tokens' secrets with the redactor, and let go of those two
        generations old (a log line about the previous token may still be on its way)."""
        generation = (tokens.access_token, *filter(None, [tokens.refresh_token]))
        for secret in generation:
            self._remember(secret)
        if generation in self._held_tokens:
            return
        self._held_tokens.append(generation)
        if len(self._held_tokens) > _TOKEN_GENERATIONS:
            old = self._held_tokens.pop(0)
            kept = {secret for held in self._held_tokens for secret in held}
            for secret in old:
                if secret not in kept:  # an unrotated refresh token is still in use
                    self._forget(secret)

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
    challenge: _Challenge | None


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
