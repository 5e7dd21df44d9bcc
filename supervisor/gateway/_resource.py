"""The team gateway's check of its callers' access tokens, as an OAuth resource server:
:class:`JWTVerifier`, the SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068) issued
by the team's authorization server.

A token is taken when its signature is by a key of the issuer's JWKS (an asymmetric
algorithm of those allowed and one that key is for, never ``none`` nor a shared secret),
its ``iss`` is the issuer, its ``aud`` names the gateway's resource URL, it has not expired
(with a small leeway), its ``exp``, ``nbf`` and ``iat`` are numbers (RFC 7519
NumericDates, not strings) and its ``sub`` — the caller — is not empty. Everything the
token says is untrusted until then: its size is checked before it is parsed, its header
only picks the key, and whatever it holds, it is taken or refused, never an error of the
gateway. The JWKS is fetched once (from ``jwks_uri`` of the issuer's metadata when not
given: an ``https://`` URL, ``http://`` on a loopback host only) and again when a token
names a key it does not hold — a rotation — at most once per ``min_refetch`` seconds, so
a flood of made-up key ids costs no flood of fetches. A fetch that fails (the
authorization server down, at start-up or during a rotation) is tried again a second
later, then after waits doubling to :data:`RETRY_AFTER` seconds: meanwhile a token whose
key is not held is neither taken nor called invalid — its holder is told to try again.

:class:`IntrospectionVerifier` asks the authorization server instead (RFC 7662), for
opaque tokens or to refuse a revoked token at once. :class:`ResourceGate` is what the
HTTP gateway's front runs for each request: the token from the ``Authorization`` header,
checked by one of them (a token already checked is taken from a bounded memory until it
expires), the scopes it must carry, and the :class:`Caller` it stands for; a refusal is
the ``401`` (or ``403``) with the ``WWW-Authenticate`` challenge MCP clients follow to the
gateway's protected-resource metadata (RFC 9728), which it serves too. Tokens are Bearer
tokens: one presented with the ``DPoP`` scheme (RFC 9449) is refused, ``401
invalid_request`` saying so (the metadata lists no DPoP algorithm either).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import attrs
import httpx2
import trio
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.server.auth.provider import AccessToken

from .._util._printable import printable
from .._util._secrets import read_secret
from .._util._urls import SECURE_URL, is_secure_url
from ..dashboard._security import bearer
from ..log import get_logger

__all__ = ["Caller", "IntrospectionVerifier", "JWTVerifier", "ResourceGate", "gateway_key"]

if TYPE_CHECKING:
    import jwt

    from ..config._model import GatewayAuth, GatewaySettings

log = get_logger("supervisor.gateway.auth")

#: The signature algorithms taken by default: asymmetric only (a key of a JWKS is public).
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
#: Larger tokens are refused unread.
MAX_TOKEN_BYTES = 16 * 1024
#: Larger JWKS or metadata documents are refused unread.
MAX_DOCUMENT_BYTES = 256 * 1024
#: The algorithms an RSA key whose JWK names none is for (RFC 7518 §3.3, §3.5).
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
#: Seconds before a failed fetch of the issuer's keys is tried again; the wait doubles
#: after each failure in a row, up to :data:`RETRY_AFTER`.
FIRST_RETRY = 1.0
#: The largest NumericDate (``exp``, ``nbf``, ``iat``) taken: 2**53 seconds, exact as a
#: float (some 285 million years).
MAX_NUMERIC_DATE = 2**53


class _InvalidToken(Exception):
    """Why a token was refused (for the log and the ``error_description``, never with the
    token in it)."""


class _Unreachable(Exception):
    """The authorization server could not be asked (its keys, its introspection): the
    token is neither taken nor called invalid — its holder is told to try again."""


@attrs.frozen
class Caller:
    """Who a team gateway's request comes from: its access token's subject, groups and
    scopes, the client it was issued to, and when it expires (unix seconds).

    This is the one place a caller is told from a token (:meth:`of`, by
    :meth:`ResourceGate.authenticate`, for a request and for the browser's sign-in
    alike). Past the gateway's front a caller is its :attr:`subject` alone: the calls
    made for them (``ToolCall.caller``), their own sessions to a ``perUser`` server
    (:mod:`supervisor.server._users`) and their own logins to it, under the token
    store's account ``user:SUBJECT`` (:mod:`supervisor.auth._users`); the gateway's
    parts read it of a request with :func:`~._context.subject_of`. Its groups, scopes
    and client are the gateway's own business: its policy's (:mod:`._policy`)."""

    subject: str
    groups: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    client_id: str = ""
    expires_at: float | None = None

    @classmethod
    def of(cls, access: AccessToken) -> Caller:
        claims = access.claims or {}
        groups = claims.get("groups")
        return cls(
            subject=access.subject or "",
            groups=tuple(str(g) for g in groups) if isinstance(groups, list | tuple) else (),
            scopes=tuple(access.scopes),
            client_id=access.client_id,
            expires_at=None if access.expires_at is None else float(access.expires_at),
        )


@attrs.frozen
class _Key:
    """A signing key of the issuer's JWKS and the algorithms it verifies: the one its JWK
    names (``alg``), else every RSA algorithm for an RSA key, its curve's for an EC key."""

    jwk: jwt.PyJWK
    algorithms: frozenset[str]


class _Verifier:
    """What both checks share: the SDK's ``TokenVerifier`` over :meth:`check`."""

    async def check(self, token: str) -> AccessToken:
        raise NotImplementedError

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier``: the token's access, or ``None`` if refused."""
        try:
            return await self.check(token)
        except (_InvalidToken, _Unreachable):
            return None


@attrs.define
class JWTVerifier(_Verifier):
    """Checks access tokens of ``issuer`` meant for ``audience`` (the gateway's resource
    URL). ``jwks_url``: where the issuer's keys are (default: its metadata's
    ``jwks_uri``). ``groups_claim``: the claim listing the caller's groups. ``clock``
    (monotonic seconds) times the refetches and the retries of a failed fetch."""

    issuer: str
    audience: str
    jwks_url: str | None = None
    algorithms: Sequence[str] = ASYMMETRIC
    leeway: float = 30.0
    groups_claim: str = "groups"
    min_refetch: float = 30.0
    http: httpx2.AsyncClient | None = None
    clock: Callable[[], float] = time.monotonic
    _keys: dict[str | None, _Key] = attrs.field(factory=dict, init=False)
    #: when the keys were last fetched (``None``: never yet)
    _fetched_at: float | None = attrs.field(default=None, init=False)
    #: why the last fetch failed (``None``: it did not), when to try again, and the wait
    #: after the next failure
    _failure: str | None = attrs.field(default=None, init=False)
    _retry_at: float | None = attrs.field(default=None, init=False)
    _retry: float = attrs.field(default=FIRST_RETRY, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    fetches: int = attrs.field(default=0, init=False)

    async def check(self, token: str) -> AccessToken:
        """The token's access; :class:`_InvalidToken` saying why it is refused."""
        if len(token) > MAX_TOKEN_BYTES:
            raise _InvalidToken(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
        import jwt  # (here: a gateway without team login never loads it, nor cryptography)

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _InvalidToken("the token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise _InvalidToken(f"the token is signed with {algorithm!r}, not one allowed")
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        if algorithm not in key.algorithms:  # RS256 under an EC key's kid, ES384 under P-256
            raise _InvalidToken(
                f"the token is signed with {algorithm!r}, which the issuer's key {kid!r} is not for"
            )
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.jwk.key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise _InvalidToken(f"the token is refused: {exc}") from None
        for name in ("exp", "nbf", "iat"):  # RFC 9068 §4: "2000000000" is no NumericDate
            if name in claims and not _numeric_date(claims[name]):
                raise _InvalidToken(f"the token's {name} is not a NumericDate (seconds since 1970)")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject.strip():
            raise _InvalidToken("the token names no subject (sub)")
        scope = claims.get("scope")
        scopes = scope.split() if isinstance(scope, str) else []
        groups = claims.get(self.groups_claim)
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=subject,
            claims={
                "iss": claims["iss"],
                "groups": [str(g) for g in groups] if isinstance(groups, list) else [],
            },
        )

    async def _key(self, kid: str | None) -> _Key:
        """The issuer's key ``kid`` (the only one, for a token naming none), fetching the
        JWKS when it is not held: again at most once per ``min_refetch`` seconds after a
        fetch that worked, and after one that failed once its retry wait has passed. A key
        not held because the keys cannot be had is :class:`_Unreachable`; one missing from
        the keys fetched, :class:`_InvalidToken`."""
        key = self._pick(kid)
        if key is not None:
            return key
        async with self._lock:
            key = self._pick(kid)  # fetched meanwhile, by the task that held the lock
            if key is None and self._may_fetch(self.clock()):
                await self._fetch()
                key = self._pick(kid)
        if key is not None:
            return key
        if self._failure is not None:
            raise _Unreachable(f"the keys of {self.issuer} cannot be fetched: {self._failure}")
        raise _InvalidToken(f"the issuer has no key {kid!r}")

    def _pick(self, kid: str | None) -> _Key | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    def _may_fetch(self, now: float) -> bool:
        if self._failure is not None or self._fetched_at is None:
            return self._retry_at is None or now >= self._retry_at
        return now - self._fetched_at >= self.min_refetch

    async def _fetch(self) -> None:
        """The issuer's keys, fetched; a failure is kept, with when to try again (timed
        from its end: a fetch that hangs until its timeout is not tried again at once)."""
        self.fetches += 1
        try:
            async with _client(self.http) as http:
                url = self.jwks_url or await self._jwks_uri(http)
                document = await _document(http, url, "the issuer's JWKS")
            keys = _key_set(document, f"the issuer's JWKS at {url}")
        except (_InvalidToken, _Unreachable) as exc:
            self._failure = str(exc)
            self._retry_at = self.clock() + self._retry
            self._retry = min(self._retry * 2, RETRY_AFTER)
            return
        self._keys = keys
        self._fetched_at = self.clock()
        self._failure = self._retry_at = None
        self._retry = FIRST_RETRY

    async def _jwks_uri(self, http: httpx2.AsyncClient) -> str:
        """``jwks_uri`` of the issuer's metadata (:func:`issuer_metadata`)."""
        metadata = await issuer_metadata(http, self.issuer, ("jwks_uri",))
        if metadata is None:
            raise _Unreachable(f"the issuer {self.issuer} publishes no jwks_uri")
        self.jwks_url = metadata["jwks_uri"]
        return metadata["jwks_uri"]


def _key_set(document: dict[str, Any], what: str) -> dict[str | None, _Key]:
    """The signing keys of a JWKS by ``kid`` (:class:`_Key`): a key of a kind not taken —
    a shared secret, an unknown type, curve or algorithm — is skipped, as PyJWT's own
    ``PyJWKSet`` skips it; :class:`_InvalidToken` when none is left."""
    import jwt  # (as in ``check``)

    entries = document.get("keys")
    if not isinstance(entries, list):
        raise _InvalidToken(f"{what} has no keys")
    keys: dict[str | None, _Key] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") == "oct":
            continue
        declared, kid = entry.get("alg"), entry.get("kid")
        if not isinstance(declared, str | None) or not isinstance(kid, str | None):
            continue
        try:
            jwk = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue
        if declared is None and entry.get("kty") == "RSA":
            keys[kid] = _Key(jwk, frozenset(RSA_ALGORITHMS))
        else:
            keys[kid] = _Key(jwk, frozenset({jwk.algorithm_name}))
    if not keys:
        raise _InvalidToken(f"{what} has no key that can be used")
    return keys


def _numeric_date(value: object) -> bool:
    """Whether ``value`` is a NumericDate (RFC 7519 §2): a JSON number — not a string,
    nor a boolean — within :data:`MAX_NUMERIC_DATE` of 1970."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return -MAX_NUMERIC_DATE <= value <= MAX_NUMERIC_DATE  # NaN and infinities: False


@attrs.define
class IntrospectionVerifier(_Verifier):
    """Checks access tokens by asking ``endpoint`` (RFC 7662), authenticating as
    ``client_id`` with ``client_secret`` (HTTP Basic). A token is taken when the answer
    says ``active``, its ``aud`` names ``audience``, its ``iss`` (if given) is ``issuer``
    and its ``exp`` (if given) has not passed; its ``sub`` is the caller. Every request
    asks again (a revoked token is refused at once) unless the gate keeps answers."""

    endpoint: str
    client_id: str
    client_secret: str = attrs.field(repr=False)
    audience: str
    issuer: str | None = None
    groups_claim: str = "groups"
    http: httpx2.AsyncClient | None = None
    wall_clock: Callable[[], float] = time.time
    #: requests made to the endpoint
    requests: int = attrs.field(default=0, init=False)

    async def check(self, token: str) -> AccessToken:
        """The token's access; :class:`_InvalidToken` saying why it is refused, or
        :class:`_Unreachable` when the endpoint cannot answer."""
        if len(token) > MAX_TOKEN_BYTES:
            raise _InvalidToken(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
        what = f"the introspection endpoint {self.endpoint}"
        self.requests += 1
        try:
            async with (
                _client(self.http) as http,
                http.stream(
                    "POST",
                    self.endpoint,
                    data={"token": token, "token_type_hint": "access_token"},
                    auth=httpx2.BasicAuth(self.client_id, self.client_secret),
                    headers={"accept": "application/json"},
                ) as response,
            ):
                if response.status_code != 200:
                    raise _Unreachable(f"{what} answered HTTP {response.status_code}")
                body = await _read(response, what)
        except httpx2.HTTPError as exc:
            raise _Unreachable(f"{what} cannot be reached: {exc}") from None
        try:
            answer = _object(body, what)
        except _InvalidToken as exc:
            raise _Unreachable(str(exc)) from None
        if answer.get("active") is not True:
            raise _InvalidToken("the token is not active (expired or revoked)")
        audiences = answer.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or self.audience not in audiences:
            raise _InvalidToken("the token is not meant for this gateway (aud)")
        if self.issuer is not None and answer.get("iss", self.issuer) != self.issuer:
            raise _InvalidToken("the token is from another issuer")
        expires = answer.get("exp")
        if isinstance(expires, bool) or not isinstance(expires, int | float | None):
            raise _InvalidToken("the introspection answer's exp is not a number")
        if expires is not None and expires <= self.wall_clock():
            raise _InvalidToken("the token has expired")
        subject = answer.get("sub")
        if not isinstance(subject, str) or not subject:
            raise _InvalidToken("the introspection answer names no subject (sub)")
        scope = answer.get("scope")
        groups = answer.get(self.groups_claim)
        return AccessToken(
            token=token,
            client_id=str(answer.get("client_id") or ""),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=None if expires is None else int(expires),
            resource=self.audience,
            subject=subject,
            claims={"groups": [str(g) for g in groups] if isinstance(groups, list) else []},
        )


class _Refused(Exception):
    """A request the gate does not let in: the status, the ``WWW-Authenticate``
    challenge (none for a ``503``) and what the body says."""

    def __init__(self, status: int, challenge: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.challenge = challenge
        self.message = message


#: Why a request presenting a token with the ``DPoP`` scheme is refused.
DPOP_REFUSED = "this gateway takes Bearer access tokens, not DPoP-bound ones"
#: Tokens already checked that a gate keeps (past that, the oldest half is dropped).
MAX_KEPT = 4096
#: Seconds a caller is told to wait when the authorization server cannot be asked.
RETRY_AFTER = 5


@attrs.define
class ResourceGate:
    """The check of every request to a team gateway (see the module doc): ``verifier``
    (a :class:`JWTVerifier` or an :class:`IntrospectionVerifier`) for tokens of
    ``issuer`` meant for ``resource``, each needing ``scopes``. A checked token is kept
    until it expires — at most ``keep`` seconds when given (introspection's
    ``cacheSeconds``; 0: asked every time)."""

    verifier: JWTVerifier | IntrospectionVerifier
    issuer: str
    resource: str
    scopes: tuple[str, ...] = ()
    keep: float | None = None
    wall_clock: Callable[[], float] = time.time
    _kept: dict[str, tuple[Caller, float]] = attrs.field(factory=dict, init=False)
    #: the metadata document's path on the gateway, and the document
    metadata_path: str = attrs.field(init=False)
    metadata: bytes = attrs.field(init=False)
    _metadata_url: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        from mcp.shared.auth import ProtectedResourceMetadata

        parts = urlsplit(self.resource)
        path = parts.path.rstrip("/")
        self.metadata_path = WELL_KNOWN + path
        self._metadata_url = f"{parts.scheme}://{parts.netloc}{self.metadata_path}"
        # pydantic validates each str into the SDK's AnyHttpUrl field as it should show
        # (AnyHttpUrl(str) would end a bare issuer with "/", which its tokens do not say)
        document = ProtectedResourceMetadata(
            resource=self.resource,  # pyright: ignore[reportArgumentType]  # (see above)
            authorization_servers=[self.issuer],  # pyright: ignore[reportArgumentType]  # (see above)
            scopes_supported=list(self.scopes) or None,
            bearer_methods_supported=["header"],
            resource_name="mcp-supervisor gateway",
        )
        self.metadata = document.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_config(
        cls,
        auth: GatewayAuth,
        *,
        environ: Mapping[str, str] | None = None,
        base: Path | None = None,
    ) -> Self:
        """The gate of the config's ``gateway.auth``: JWTs checked against the issuer's
        keys, or tokens introspected (its client secret read now: :class:`ValueError`
        saying what is wrong)."""
        verifier: JWTVerifier | IntrospectionVerifier
        keep = None
        spec = auth.introspection
        if spec is None:
            verifier = JWTVerifier(
                auth.issuer, auth.resource, auth.jwks_url, groups_claim=auth.groups_claim
            )
        else:
            verifier = IntrospectionVerifier(
                spec.endpoint,
                spec.client_id,
                read_secret(
                    spec.client_secret_file,
                    spec.client_secret_env,
                    base,
                    "the introspection client's secret",
                    environ,
                ),
                auth.resource,
                issuer=auth.issuer,
                groups_claim=auth.groups_claim,
            )
            keep = spec.cache_seconds
        return cls(verifier, auth.issuer, auth.resource, auth.scopes, keep)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the block runs, the checks share one HTTP client (its connections kept
        open to the authorization server): what ``serve_http`` holds around serving. A
        check without it makes a client of its own, which costs milliseconds."""
        if self.verifier.http is not None:  # the caller's own, kept as given
            yield
            return
        async with httpx2.AsyncClient(timeout=10.0) as http:
            self.verifier.http = http
            try:
                yield
            finally:
                self.verifier.http = None

    @property
    def metadata_paths(self) -> tuple[str, str]:
        """Where the metadata is asked for (RFC 9728 §3.1: the resource's path after the
        well-known name; clients of the 2025-06-18 spec try the well-known name alone
        too)."""
        return self.metadata_path, WELL_KNOWN

    async def authenticate(self, authorization: str | None) -> Caller:
        """The caller of a request with this ``Authorization`` header;
        :class:`_Refused` if it is not let in."""
        token = bearer(authorization or "")
        if not token and (authorization or "").strip().lower().startswith("dpop "):
            # DPoP (RFC 9449) is not taken: a bound token is the caller's to use with its
            # key, which this gateway does not check; it is told the scheme expected.
            raise _Refused(
                401,
                self._challenge("invalid_request", DPOP_REFUSED),
                f"{DPOP_REFUSED}: send the access token as Authorization: Bearer",
            )
        if not token:
            raise _Refused(401, self._challenge(), "this gateway needs an OAuth access token")
        now = self.wall_clock()
        kept = self._kept.get(token)
        if kept is not None and now < kept[1]:
            caller = kept[0]
        else:
            try:
                access = await self.verifier.check(token)
            except _InvalidToken as exc:
                log.info("access token refused", reason=str(exc))
                raise _Refused(
                    401, self._challenge("invalid_token", str(exc)), f"token refused: {exc}"
                ) from None
            except _Unreachable as exc:
                log.warning("the authorization server cannot check tokens", error=str(exc))
                raise _Refused(
                    503, None, "the authorization server cannot check tokens now: try again"
                ) from None
            caller = Caller.of(access)
            self._keep(token, caller, now)
        missing = [scope for scope in self.scopes if scope not in caller.scopes]
        if missing:
            raise _Refused(
                403,
                self._challenge("insufficient_scope", "the token lacks scopes this gateway needs"),
                f"the token lacks the scope {' '.join(missing)}",
            )
        return caller

    def _keep(self, token: str, caller: Caller, now: float) -> None:
        until = caller.expires_at if caller.expires_at is not None else float("inf")
        if self.keep is not None:
            until = min(until, now + self.keep)
        if until <= now:
            return
        if len(self._kept) >= MAX_KEPT:  # the oldest half goes (dicts keep insertion order)
            for stale in list(self._kept)[: MAX_KEPT // 2]:
                del self._kept[stale]
        self._kept[token] = (caller, until)

    def _challenge(self, error: str | None = None, description: str | None = None) -> str:
        """The ``WWW-Authenticate`` value (RFC 6750 §3, RFC 9728 §5.1)."""
        parts = []
        if error is not None:
            parts.append(f'error="{error}"')
            if description:
                parts.append(f'error_description="{_quoted(description)}"')
        if self.scopes:
            parts.append(f'scope="{" ".join(self.scopes)}"')
        parts.append(f'resource_metadata="{self._metadata_url}"')
        return "Bearer " + ", ".join(parts)


#: Where protected-resource metadata is (RFC 9728 §3).
WELL_KNOWN = "/.well-known/oauth-protected-resource"


#: The shortest gateway key taken, in bytes.
MIN_KEY_BYTES = 32


def gateway_key(
    settings: GatewaySettings | None,
    *,
    base: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> bytes | None:
    """The key of ``supervisor.gateway`` (``keyFile`` or ``keyEnv``), ``None`` without
    one; :class:`ValueError` (unreadable, empty, with spaces — a placeholder — or too
    short) saying why."""
    if settings is None or (settings.key_file is None and settings.key_env is None):
        return None
    what = "the gateway's key"
    key = read_secret(settings.key_file, settings.key_env, base, what, environ).encode()
    if any(chr(byte).isspace() for byte in key):
        raise ValueError(f"{what} must be one word, with no spaces")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{what} is {len(key)} bytes: it needs at least {MIN_KEY_BYTES} (say, "
            "`openssl rand -hex 32`)"
        )
    return key


def _quoted(text: str) -> str:
    """``text`` fit for a quoted string in a header: printable ASCII, no quote nor
    backslash, at most 200 characters."""
    kept = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)
    return kept[:200]


async def issuer_metadata(
    http: httpx2.AsyncClient, issuer: str, fields: Sequence[str]
) -> dict[str, Any] | None:
    """``issuer``'s authorization-server metadata (RFC 8414, then OpenID discovery): the
    first document that is this issuer's (RFC 8414 §3.3) and names each of ``fields``
    (URLs); ``None`` when none can be had. A URL it names must be as secure as the config's
    own (:func:`~supervisor._util._urls.is_secure_url`): one on plain HTTP beyond loopback
    is :class:`_Unreachable`, naming it and the issuer — never fetched, posted to or sent a
    browser to."""
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
        try:
            metadata = await _document(http, url, "the issuer's metadata")
        except (_InvalidToken, _Unreachable):
            continue
        if metadata.get("issuer") == issuer and all(
            isinstance(metadata.get(field), str) for field in fields
        ):
            for field in fields:
                if not is_secure_url(metadata[field]):
                    raise _Unreachable(
                        f"the issuer {issuer} names {field} {printable(metadata[field])} in "
                        f"its metadata, which is not {SECURE_URL}: it is not used"
                    )
            return metadata
    return None


def _client(http: httpx2.AsyncClient | None) -> Any:
    """The caller's client (left open), or one of its own for this fetch."""
    return contextlib.nullcontext(http) if http is not None else httpx2.AsyncClient(timeout=10.0)


async def _document(http: httpx2.AsyncClient, url: str, what: str) -> dict[str, Any]:
    """The JSON object at ``url``, within :data:`MAX_DOCUMENT_BYTES`; ``url`` may be a
    server's word (a ``jwks_uri``): one httpx cannot ask (``https://a..b/``) is
    :class:`_Unreachable` too."""
    try:
        async with http.stream("GET", url) as response:
            if response.status_code >= 500:
                raise _Unreachable(f"{what} at {url}: HTTP {response.status_code}")
            if response.status_code != 200:
                raise _InvalidToken(f"{what} at {url}: HTTP {response.status_code}")
            body = await _read(response, f"{what} at {url}")
    except httpx2.HTTPError as exc:
        raise _Unreachable(f"{what} at {url} cannot be fetched: {exc}") from None
    except (httpx2.InvalidURL, UnicodeError) as exc:  # the host cannot be encoded (IDNA)
        raise _Unreachable(f"{what} at {url} is no URL that can be fetched: {exc}") from None
    return _object(body, f"{what} at {url}")


async def _read(response: httpx2.Response, what: str) -> bytes:
    """The body of ``response``, within :data:`MAX_DOCUMENT_BYTES`."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            raise _InvalidToken(f"{what} is over {MAX_DOCUMENT_BYTES} bytes")
    return bytes(body)


def _object(body: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        raise _InvalidToken(f"{what} is not JSON") from None
    if not isinstance(document, dict):
        raise _InvalidToken(f"{what} is not a JSON object")
    return document
