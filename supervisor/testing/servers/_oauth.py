"""An OAuth-protected MCP server for end-to-end tests of an OAuth client, in-process under trio.

Built on the SDK's server auth: ``MCPServer(auth_server_provider=..., auth=AuthSettings(...))``
serves the authorization server (AS) endpoints — ``/.well-known/oauth-authorization-server``,
``/register``, ``/authorize``, ``/token``, ``/revoke`` — and the protected-resource metadata
``/.well-known/oauth-protected-resource/mcp``, and guards ``/mcp`` with bearer tokens. AS and
resource server (RS) share one app and port; the issuer is ``http://127.0.0.1:PORT``.

``TestAuthProvider`` is the in-memory provider: dynamic and pre-registered clients, an
authorization endpoint that approves at once (RFC 9207 ``iss`` in the redirect), PKCE-bound
codes, expiring access tokens, rotating refresh tokens, the SEP-990 jwt-bearer grant (an
ID-JAG from ``TestIdP``), and counters a test asserts on. ``_Gate`` wraps the SDK's app to add
what the SDK lacks: the ``client_credentials`` grant (client secret or ``private_key_jwt``),
the SEP-1933 jwt-bearer grant of a workload's own JWT (``trust_workloads``; public clients
too, which the SDK refuses the jwt-bearer grant),
``private_key_jwt`` for the other grants, a runtime step-up scope check answering 403
``insufficient_scope`` *with* ``scope=``, and edits of the metadata documents (knobs).
DPoP (RFC 9449) with the ``dpop`` knob: tokens bound to the key of the token request's
proof, ``/mcp`` taking them only with a proof of it, nonces on demand (``dpop_*_nonce``).
``TestIdP`` is an enterprise IdP with an RFC 8693 token-exchange endpoint issuing ID-JAGs.
``open_oauth_server`` serves it all on loopback ports and yields an ``OAuthFixture``.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import hashlib
import hmac
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import attrs
import jwt
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import InvalidScopeError, OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError
from pydantic import AnyUrl, PrivateAttr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..._serving import lifespan, respond
from ._http import HttpServer, start_http
from ._raw import ASGIApp, Message, Receive, Scope, Send

CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYP = "oauth-id-jag+jwt"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
WRONG_ISSUER = "https://wrong-issuer.invalid"
"""The ``iss`` an authorization redirect carries with ``wrong_iss``."""

_ASSERTION_ALGORITHMS = ["ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "EdDSA"]
_SECRET_FIELDS = frozenset(
    {"client_secret", "client_assertion", "code_verifier", "subject_token", "assertion"}
)
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_CODE_TTL = 600

_DPOP_ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384"]
_DPOP_WINDOW = 300  # seconds a proof's iat may be off
_dpop_jkt: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "oauth_fixture_dpop_jkt", default=None
)
"""The key thumbprint of this token request's valid DPoP proof: the tokens issued are bound
to it."""

_asserted_client: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "oauth_fixture_asserted_client", default=None
)
"""The client whose ``private_key_jwt`` assertion ``_Gate`` verified for this token request:
``get_client`` then shows it to the SDK's authenticator as a ``client_secret_post`` client."""


@attrs.define
class OAuthConfig:
    """The fixture's knobs, shared by the provider and the gate; most change at run time.

    ``required_scopes`` is read when the server is built (the SDK serves it as the
    protected-resource metadata's ``scopes_supported``); the gate re-reads it per request.
    """

    scopes_supported: list[str] | None = None
    """AS metadata ``scopes_supported`` and the scopes registration accepts (None: any)."""
    required_scopes: list[str] | None = None
    """Scopes every ``/mcp`` request's token needs."""
    step_up_scopes: set[str] = attrs.field(factory=set, converter=set)
    """Scopes ``/mcp`` needs beyond ``required_scopes``; a token lacking one gets 403."""
    default_scopes: list[str] | None = None
    """Granted when a request names no scope (None: ``required_scopes``, else none)."""
    access_token_ttl: int | None = 3600
    refresh_token_ttl: int | None = None
    rotate_refresh_tokens: bool = True
    """Each refresh issues a new refresh token and invalidates the old one; off: the
    response carries no ``refresh_token`` and the old one stays valid."""
    issue_refresh_tokens: bool = True
    lenient_scopes: bool = True
    """A client may ask for any supported scope, not only those it registered."""
    loopback_any_port: bool = True
    """RFC 8252 §7.3: a loopback redirect URI matches a registered one on any port."""
    advertise_s256: bool = True
    """False: the AS metadata has no ``code_challenge_methods_supported``."""
    advertise_iss: bool = True
    """AS metadata ``authorization_response_iss_parameter_supported``."""
    send_iss: bool = True
    """The authorization redirect carries ``iss`` (RFC 9207)."""
    wrong_iss: bool = False
    """The authorization redirect carries ``iss=WRONG_ISSUER``."""
    deny_authorization: bool = False
    """``/authorize`` redirects with ``error=access_denied``."""
    scope_in_401: bool = False
    """A 401 from ``/mcp`` names the needed scopes in ``WWW-Authenticate`` too."""
    resource_scopes_supported: list[str] | None = None
    """Overrides the protected-resource metadata's ``scopes_supported``."""
    subject: str = "test-user"
    """The resource owner the authorization endpoint "logs in"."""
    client_id_metadata_documents: bool = False
    """The AS advertises ``client_id_metadata_document_supported`` and takes an
    ``https://`` client ID as a public client with loopback redirect URIs (its document is
    not fetched: nothing leaves 127.0.0.1)."""
    protected_resource_metadata: bool = True
    """False: a 2025-03-26 server — no protected-resource metadata (404), and its 401
    names none (``WWW-Authenticate: Bearer``)."""
    as_metadata: bool = True
    """False: no authorization-server metadata at the origin either (404): only the
    2025-03-26 fallback endpoints, ``/authorize``, ``/token``, ``/register``."""
    lax_token_endpoint: bool = False
    """``/token`` answers a request that names no ``grant_type`` (an empty one) with a
    token (200), not an RFC 6749 error — as the MCP conformance suite's 2025-03-26 server
    does, which issues a token for any request (this one is good for nothing)."""
    as_issuer_path: str = ""
    """A path the AS metadata's ``issuer`` (and the redirect's ``iss``) adds to the
    origin where the metadata is served (``/oauth``: ``http://HOST:PORT/oauth``)."""
    jwt_access_tokens: bool = False
    """Access tokens are JWTs (RFC 9068, ES256) with ``iss``, ``sub``, ``aud`` (the
    token's resource), ``exp``, ``scope``, ``client_id`` and ``groups``; the AS metadata
    names its ``jwks_uri`` (``/jwks``) and ``introspection_endpoint`` (``/introspect``)."""
    resources: list[str] = attrs.field(factory=list)
    """Other resources (RFC 8707) this AS issues tokens for: a team gateway's URL."""
    groups: dict[str, list[str]] = attrs.field(factory=dict)
    """Each subject's groups, in its tokens' ``groups`` claim and introspection answers."""
    jwks_status: int = 200
    """The status ``/jwks`` answers; another than 200 (an outage: 503) with no keys."""
    more_jwks: list[dict[str, Any]] = attrs.field(factory=list)
    """Public keys (JWKs) ``/jwks`` serves beside the AS's own: ones a test signs with."""
    metadata_overrides: dict[str, Any] = attrs.field(factory=dict)
    """AS metadata fields set over the served ones (a ``jwks_uri`` on plain HTTP)."""
    token_endpoint_auth_methods: list[str] | None = None
    """The AS metadata's ``token_endpoint_auth_methods_supported``, exactly (None: the
    SDK's, with ``private_key_jwt`` and ``none``); the token endpoint then refuses a client
    authenticating another way (401 ``invalid_client``), whatever it was registered for."""
    dpop: bool = False
    """DPoP (RFC 9449): the AS metadata lists ``dpop_signing_alg_values_supported``; a
    token request with a valid proof gets a ``token_type`` ``DPoP`` token bound to its
    key (``cnf.jkt``), and so is the refresh token, good only with a proof of that key;
    ``/mcp`` takes a bound token only as ``Authorization: DPoP`` with a valid proof of
    the request (``htm``, ``htu``, ``iat``, an unused ``jti``, ``ath``, the bound key),
    and its 401s challenge with the ``DPoP`` scheme. Every proof checked is recorded
    (``provider.dpop_proofs``)."""
    dpop_as_nonce: bool = False
    """The token endpoint wants its DPoP nonce in proofs: 400 ``use_dpop_nonce`` and a
    ``DPoP-Nonce`` header without it (RFC 9449 §8)."""
    dpop_rs_nonce: bool = False
    """``/mcp`` wants its DPoP nonce in proofs: 401 ``WWW-Authenticate: DPoP
    error="use_dpop_nonce"`` and a ``DPoP-Nonce`` header without it (RFC 9449 §9)."""

    def needed_scopes(self) -> list[str]:
        """Every scope ``/mcp`` needs now: required ones first, then step-up ones sorted."""
        required = list(self.required_scopes or [])
        return required + sorted(self.step_up_scopes - set(required))


class _FixtureClient(OAuthClientInformationFull):
    """A registered client whose scope and redirect URI checks follow the fixture's knobs."""

    _config: OAuthConfig | None = PrivateAttr(default=None)

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        config = self._config
        if requested_scope is None or config is None or not config.lenient_scopes:
            return super().validate_scope(requested_scope)
        requested = requested_scope.split()
        if config.scopes_supported is not None:
            allowed = set((self.scope or "").split()) | set(config.scopes_supported)
            unknown = [scope for scope in requested if scope not in allowed]
            if unknown:
                raise InvalidScopeError(f"Unsupported scope {unknown[0]}")
        return requested

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        config = self._config
        if (
            redirect_uri is not None
            and config is not None
            and config.loopback_any_port
            and any(_same_loopback(str(redirect_uri), str(uri)) for uri in self.redirect_uris or [])
        ):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


def _same_loopback(asked: str, registered: str) -> bool:
    a, r = urlsplit(asked), urlsplit(registered)
    return (
        a.scheme == r.scheme == "http"
        and a.hostname == r.hostname
        and a.hostname in _LOOPBACK_HOSTS
        and (a.path or "/") == (r.path or "/")
        and a.query == r.query
    )


@attrs.define
class DpopProof:
    """One DPoP proof the fixture checked: where (``"token"``: the token endpoint,
    ``"mcp"``), its claims as sent (``None``: missing or unreadable), the thumbprint of its
    key, and why it was refused (``None``: accepted; ``"use_dpop_nonce"``: valid, but
    without the nonce wanted)."""

    where: str
    htm: object = None
    htu: object = None
    jti: object = None
    iat: object = None
    ath: object = None
    nonce: object = None
    jkt: str | None = None
    header: dict[str, Any] = attrs.field(factory=dict)
    error: str | None = None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: the SHA-256 of the key's required members, ordered, without spaces."""
    required = {
        "EC": ("crv", "kty", "x", "y"),
        "RSA": ("e", "kty", "n"),
        "OKP": ("crv", "kty", "x"),
    }
    members = {k: jwk[k] for k in required[jwk["kty"]]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def _dpop_scheme(challenge: bytes) -> bytes:
    """A Bearer challenge as a DPoP one (a DPoP resource server's 401s, RFC 9449 §7.1)."""
    if challenge[:7].lower() == b"bearer ":
        return b'DPoP algs="ES256", ' + challenge[7:]
    return challenge


class _TokenFailure(Exception):
    """A token-endpoint error the gate answers itself: status, error code, description."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


class TestAuthProvider:
    """An in-memory ``OAuthAuthorizationServerProvider`` that approves every authorization.

    Counters: ``registrations`` (dynamic registrations), ``authorizations`` (authorize
    calls that reached the provider), ``token_requests`` (``Counter`` of every ``POST
    /token`` by ``grant_type``, failures included), ``refreshes`` (refresh grants that
    reached the provider), ``identity_assertions`` (jwt-bearer grants that reached it),
    ``workload_grants`` (jwt-bearer grants of a workload's JWT, refused ones included),
    ``revocations``; per authorize call ``redirect_uris``, ``resources`` and ``scopes``
    (None when absent); ``token_params``: each token request's form minus secrets.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, issuer: str, resource: str, config: OAuthConfig | None = None) -> None:
        self.issuer = issuer
        self.resource = resource
        self.config = config if config is not None else OAuthConfig()
        self.clients: dict[str, _FixtureClient] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        #: each tool call run: ``(tool, the calling token's subject)``
        self.executions: list[tuple[str, str | None]] = []
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self._refresh_of: dict[str, str] = {}  # access token → its refresh token
        self._public_keys: dict[str, str] = {}
        self._assertion_secrets: dict[str, str] = {}
        self._trusted_idps: dict[str, Any] = {}
        self._trusted_subjects: dict[str, tuple[Any, str]] = {}
        self._trusted_workloads: dict[str, Any] = {}
        #: jwt-bearer grants of a workload's own JWT that reached the provider (SEP-1933)
        self.workload_grants = 0
        #: subject tokens exchanged (RFC 8693)
        self.token_exchanges = 0
        self._seen_jti: set[tuple[str, str]] = set()
        self.registrations = 0
        self.authorizations = 0
        self.token_requests: Counter[str] = Counter()
        self.refreshes = 0
        self.identity_assertions = 0
        self.revocations = 0
        self.redirect_uris: list[str] = []
        self.resources: list[str | None] = []
        self.scopes: list[list[str] | None] = []
        self.token_params: list[dict[str, str]] = []
        self._jwt_key = ec.generate_private_key(ec.SECP256R1())
        self.jwt_kid = "as-" + secrets.token_hex(4)
        self._introspectors: dict[str, str] = {}
        #: introspection requests that reached the provider
        self.introspections = 0
        #: requests for ``/jwks``, answered or not (``config.jwks_status``)
        self.jwks_requests = 0
        #: DPoP: every proof checked, in order, valid or not (:class:`DpopProof`)
        self.dpop_proofs: list[DpopProof] = []
        #: DPoP: the key thumbprint (``cnf.jkt``) each bound access or refresh token has
        self.dpop_bindings: dict[str, str] = {}
        #: DPoP: the nonce the token endpoint (``"as"``) and ``/mcp`` (``"rs"``) want
        self.dpop_nonces = {
            "as": "as-nonce-" + secrets.token_hex(8),
            "rs": "rs-nonce-" + secrets.token_hex(8),
        }
        #: DPoP: refusals for want of the nonce, by ``"as"`` / ``"rs"``
        self.dpop_nonce_challenges: Counter[str] = Counter()

    @property
    def token_endpoint(self) -> str:
        return self.issuer + "/token"

    # -- clients ---------------------------------------------------------------------------

    def add_client(
        self,
        client_id: str,
        secret: str | None = None,
        *,
        token_endpoint_auth_method: str = "client_secret_basic",
        public_key_pem: str | None = None,
        grant_types: Iterable[str] = ("authorization_code", "refresh_token"),
        redirect_uris: Iterable[str] = (),
        scope: str | None = None,
    ) -> OAuthClientInformationFull:
        """Pre-register a client, as an administrator would (no registration counted).

        `token_endpoint_auth_method` is ``client_secret_basic``, ``client_secret_post``,
        ``none`` (no secret) or ``private_key_jwt`` (`public_key_pem` verifies its RFC 7523
        client assertions). Only pre-registered clients can have the ``client_credentials``
        or jwt-bearer grant (the SDK refuses the latter, and ``private_key_jwt``, at DCR).
        """
        method = token_endpoint_auth_method
        if method in ("client_secret_basic", "client_secret_post") and not secret:
            raise ValueError(f"{method} needs a secret")
        if method == "private_key_jwt":
            if public_key_pem is None:
                raise ValueError("private_key_jwt needs public_key_pem")
            self._public_keys[client_id] = public_key_pem
            self._assertion_secrets[client_id] = secrets.token_hex(16)
        elif method != "none" and method not in ("client_secret_basic", "client_secret_post"):
            raise ValueError(f"unknown token_endpoint_auth_method {method!r}")
        info = _FixtureClient(
            client_id=client_id,
            client_secret=secret
            if method in ("client_secret_basic", "client_secret_post")
            else None,
            token_endpoint_auth_method=method,
            grant_types=list(grant_types),
            redirect_uris=[AnyUrl(uri) for uri in redirect_uris] or None,
            scope=scope,
            client_id_issued_at=int(time.time()),
        )
        info._config = self.config
        self.clients[client_id] = info
        return info

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        client = self.clients.get(client_id)
        if client is None and self.config.client_id_metadata_documents:
            if client_id.startswith("https://"):
                client = _FixtureClient(
                    client_id=client_id,
                    token_endpoint_auth_method="none",
                    grant_types=["authorization_code", "refresh_token"],
                    redirect_uris=[AnyUrl("http://127.0.0.1/callback")],
                )
                client._config = self.config
        if client is not None and _asserted_client.get() == client_id:
            shown = client.model_copy(
                update={
                    "token_endpoint_auth_method": "client_secret_post",
                    "client_secret": self._assertion_secrets[client_id],
                }
            )
            shown._config = self.config
            return shown
        return client

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.registrations += 1
        client = _FixtureClient.model_validate(client_info.model_dump())
        client._config = self.config
        self.clients[client.client_id] = client

    # -- authorization code ----------------------------------------------------------------

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        """Approve at once: the redirect to the client with ``code``, ``state`` and ``iss``."""
        config = self.config
        self.authorizations += 1
        self.redirect_uris.append(str(params.redirect_uri))
        self.resources.append(params.resource)
        self.scopes.append(params.scopes)
        if config.deny_authorization:
            raise AuthorizeError("access_denied", "the fixture denies every authorization")
        if not self.resource_ok(params.resource):
            raise AuthorizeError("invalid_target", f"unknown resource {params.resource}")
        code = "code-" + secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes if params.scopes is not None else self.default_scopes(),
            expires_at=time.time() + _CODE_TTL,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=config.subject,
        )
        issuer = self.issuer + config.as_issuer_path
        iss = WRONG_ISSUER if config.wrong_iss else issuer if config.send_iss else None
        return construct_redirect_uri(
            str(params.redirect_uri), code=code, state=params.state, iss=iss
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        return self.issue_tokens(
            client.client_id,
            authorization_code.scopes,
            resource=authorization_code.resource,
            subject=authorization_code.subject,
            refresh="refresh_token" in client.grant_types,
        )

    # -- refresh ---------------------------------------------------------------------------

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        if refresh_token.token not in self.refresh_tokens:
            raise TokenError("invalid_grant", "refresh token revoked")
        rotate = self.config.rotate_refresh_tokens
        if rotate:
            del self.refresh_tokens[refresh_token.token]
        token = self.issue_tokens(
            client.client_id,
            scopes,
            resource=refresh_token.resource,
            subject=refresh_token.subject,
            refresh=rotate,
            refresh_scopes=refresh_token.scopes,
        )
        if not rotate:
            self._refresh_of[token.access_token] = refresh_token.token
        return token

    # -- access tokens ---------------------------------------------------------------------

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access_tokens.get(token)
        if access is None or (access.expires_at is not None and access.expires_at <= time.time()):
            return None
        return access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revocations += 1
        if isinstance(token, AccessToken):
            self.access_tokens.pop(token.token, None)
            refresh = self._refresh_of.pop(token.token, None)
            if refresh is not None:
                self.refresh_tokens.pop(refresh, None)
        else:
            self.refresh_tokens.pop(token.token, None)
            for access, refresh in list(self._refresh_of.items()):
                if refresh == token.token:
                    self.access_tokens.pop(access, None)
                    del self._refresh_of[access]

    def issue_tokens(
        self,
        client_id: str,
        scopes: list[str],
        *,
        resource: str | None = None,
        subject: str | None = None,
        refresh: bool = False,
        refresh_scopes: list[str] | None = None,
        claims: dict[str, Any] | None = None,
    ) -> OAuthToken:
        """Mint an access token (and with `refresh`, a refresh token) the RS accepts.

        The access token lives ``config.access_token_ttl`` seconds and is bound to
        `resource`, or to this server's resource when None.
        """
        config = self.config
        now = int(time.time())
        ttl = config.access_token_ttl
        access = "at-" + secrets.token_urlsafe(24)
        if config.jwt_access_tokens:
            payload: dict[str, Any] = {
                "iss": self.issuer,
                "sub": subject,
                "aud": resource or self.resource,
                "iat": now,
                "jti": secrets.token_hex(12),
                "client_id": client_id,
                "scope": " ".join(scopes),
                "groups": config.groups.get(subject or "", []),
            }
            if ttl is not None:
                payload["exp"] = now + ttl
            if _dpop_jkt.get() is not None:
                payload["cnf"] = {"jkt": _dpop_jkt.get()}
            access = jwt.encode(
                payload,
                self._jwt_key,
                algorithm="ES256",
                headers={"typ": "at+jwt", "kid": self.jwt_kid},
            )
        self.access_tokens[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=list(scopes),
            expires_at=None if ttl is None else now + ttl,
            resource=resource or self.resource,
            subject=subject,
            claims={"iss": self.issuer, **(claims or {})},
        )
        refresh_token: str | None = None
        if refresh and config.issue_refresh_tokens:
            refresh_token = "rt-" + secrets.token_urlsafe(24)
            rttl = config.refresh_token_ttl
            self.refresh_tokens[refresh_token] = RefreshToken(
                token=refresh_token,
                client_id=client_id,
                scopes=list(refresh_scopes if refresh_scopes is not None else scopes),
                expires_at=None if rttl is None else now + rttl,
                resource=resource,
                subject=subject,
            )
            self._refresh_of[access] = refresh_token
        jkt = _dpop_jkt.get()
        if jkt is not None:  # DPoP: bound to the token request's proof key
            self.dpop_bindings[access] = jkt
            if refresh_token is not None:
                self.dpop_bindings[refresh_token] = jkt
        return OAuthToken(
            access_token=access,
            expires_in=ttl,
            scope=" ".join(scopes) or None,
            refresh_token=refresh_token,
        )

    def expire_access_tokens(self) -> None:
        """Make every access token issued so far expired (a second ago): no sleeping."""
        past = int(time.time()) - 1
        for access in self.access_tokens.values():
            access.expires_at = past

    def revoke_all_refresh_tokens(self) -> None:
        """Forget every refresh token: the next refresh fails with ``invalid_grant``."""
        self.refresh_tokens.clear()

    def revoke_all_access_tokens(self) -> None:
        self.access_tokens.clear()

    @property
    def token_resources(self) -> list[str | None]:
        """The ``resource`` of each token request (None when absent)."""
        return [params.get("resource") for params in self.token_params]

    def default_scopes(self) -> list[str]:
        config = self.config
        if config.default_scopes is not None:
            return list(config.default_scopes)
        return list(config.required_scopes or [])

    def resource_ok(self, resource: str | None) -> bool:
        """Whether `resource` (an RFC 8707 indicator) names this server or one of
        ``config.resources`` (None: unnamed)."""
        if resource is None:
            return True
        known = [self.resource, *self.config.resources]
        return resource.rstrip("/") in {r.rstrip("/") for r in known}

    # -- JWT access tokens and introspection (a team's AS) ----------------------------------

    def jwks(self) -> dict[str, Any]:
        jwk = ECAlgorithm.to_jwk(self._jwt_key.public_key(), as_dict=True)
        own = {**jwk, "kid": self.jwt_kid, "alg": "ES256", "use": "sig"}
        return {"keys": [own, *self.config.more_jwks]}

    def rotate_jwt_key(self) -> None:
        """Sign tokens from now on with a new key (the JWKS serves only the new one)."""
        self._jwt_key = ec.generate_private_key(ec.SECP256R1())
        self.jwt_kid = "as-" + secrets.token_hex(4)

    def add_introspection_client(self, client_id: str, secret: str) -> None:
        """A resource server allowed to introspect tokens (by Basic)."""
        self._introspectors[client_id] = secret

    def introspect(self, token: str, basic: tuple[str, str] | None) -> dict[str, Any]:
        """RFC 7662's answer for ``token``; :class:`_TokenFailure` for a resource
        server that does not authenticate."""
        self.introspections += 1
        known = None if basic is None else self._introspectors.get(basic[0])
        if (
            basic is None
            or known is None
            or not hmac.compare_digest(known.encode(), basic[1].encode())
        ):
            raise _TokenFailure(401, "invalid_client", "introspection needs a known client")
        access = self.access_tokens.get(token)
        if access is None or (access.expires_at is not None and access.expires_at <= time.time()):
            return {"active": False}
        answer: dict[str, Any] = {
            "active": True,
            "iss": self.issuer,
            "sub": access.subject,
            "aud": access.resource,
            "client_id": access.client_id,
            "scope": " ".join(access.scopes),
            "token_type": "Bearer",
            "groups": self.config.groups.get(access.subject or "", []),
        }
        if access.expires_at is not None:
            answer["exp"] = access.expires_at
        return answer

    def revoke_subject(self, subject: str) -> None:
        """Revoke every token of ``subject`` (a user who left the team)."""
        for token, access in list(self.access_tokens.items()):
            if access.subject == subject:
                del self.access_tokens[token]
        for token, refresh in list(self.refresh_tokens.items()):
            if refresh.subject == subject:
                del self.refresh_tokens[token]

    # -- client_credentials and private_key_jwt (served by _Gate) ---------------------------

    def trust_idp(self, issuer: str, public_key: Any) -> None:
        """Accept ID-JAGs signed with `public_key` whose ``iss`` is `issuer`."""
        self._trusted_idps[issuer] = public_key

    def verify_client_assertion(self, form: dict[str, str]) -> str:
        """Verify an RFC 7523 client assertion (``private_key_jwt``); return the client id.

        The JWT must be signed with the client's registered key, ``iss`` = ``sub`` = the
        client id, ``aud`` = the issuer (or the token endpoint), unexpired, ``jti`` unused.
        """
        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
            raise _TokenFailure(401, "invalid_client", "unsupported client_assertion_type")
        assertion = form.get("client_assertion", "")
        try:
            unverified = jwt.decode(assertion, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            raise _TokenFailure(401, "invalid_client", f"bad client assertion: {error}") from None
        client_id = form.get("client_id") or str(unverified.get("sub") or unverified.get("iss"))
        key = self._public_keys.get(client_id)
        if key is None:
            raise _TokenFailure(401, "invalid_client", f"no key registered for {client_id!r}")
        try:
            claims = jwt.decode(
                assertion,
                key,
                algorithms=_ASSERTION_ALGORITHMS,
                audience=[self.issuer, self.token_endpoint],
                issuer=client_id,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.PyJWTError as error:
            raise _TokenFailure(401, "invalid_client", f"client assertion: {error}") from None
        if claims["sub"] != client_id:
            raise _TokenFailure(401, "invalid_client", "client assertion sub is not the client")
        jti = claims.get("jti")
        if jti is not None:
            if ("client", str(jti)) in self._seen_jti:
                raise _TokenFailure(401, "invalid_client", "client assertion replayed")
            self._seen_jti.add(("client", str(jti)))
        return client_id

    def assertion_secret(self, client_id: str) -> str:
        return self._assertion_secrets[client_id]

    def client_credentials(
        self, form: dict[str, str], basic: tuple[str, str] | None
    ) -> dict[str, Any]:
        """The ``client_credentials`` grant: authenticate, check, mint (no refresh token)."""
        client = self._authenticate(form, basic)
        if CLIENT_CREDENTIALS not in client.grant_types:
            raise _TokenFailure(400, "unauthorized_client", "client_credentials not allowed")
        requested = form.get("scope", "").split()
        if requested:
            try:
                client.validate_scope(" ".join(requested))
            except Exception as error:
                raise _TokenFailure(400, "invalid_scope", str(error)) from None
        scopes = requested or self.default_scopes()
        resource = form.get("resource")
        if not self.resource_ok(resource):
            raise _TokenFailure(400, "invalid_target", f"unknown resource {resource}")
        token = self.issue_tokens(client.client_id, scopes, resource=resource, subject=None)
        return token.model_dump(exclude_none=True)

    def trust_subject_tokens(self, issuer: str, public_key: Any, audience: str) -> None:
        """Take, at the token-exchange grant (RFC 8693), access tokens ``issuer`` signed
        with `public_key` for `audience` (a team gateway's callers' tokens to it) as the
        subject tokens of clients acting on their subject's behalf."""
        self._trusted_subjects[issuer] = (public_key, audience)

    def exchange_subject_token(
        self, form: dict[str, str], basic: tuple[str, str] | None
    ) -> dict[str, Any]:
        """The token-exchange grant (RFC 8693, on behalf of): authenticate the client,
        check its ``subject_token`` (an access token of a trusted issuer, for its
        audience), mint an access token for the same subject (counted in
        ``token_exchanges``; no refresh token)."""
        client = self._authenticate(form, basic)
        if TOKEN_EXCHANGE_GRANT not in client.grant_types:
            raise _TokenFailure(400, "unauthorized_client", "token exchange not allowed")
        if form.get("subject_token_type") != ACCESS_TOKEN_TYPE:
            raise _TokenFailure(400, "invalid_request", f"subject_token_type: {ACCESS_TOKEN_TYPE}")
        token = form.get("subject_token", "")
        try:
            issuer = str(jwt.decode(token, options={"verify_signature": False}).get("iss"))
        except jwt.PyJWTError as error:
            raise _TokenFailure(400, "invalid_grant", f"subject_token: {error}") from None
        if issuer not in self._trusted_subjects:
            raise _TokenFailure(400, "invalid_grant", f"untrusted subject_token issuer {issuer!r}")
        key, audience = self._trusted_subjects[issuer]
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=["ES256"],
                audience=audience,
                issuer=issuer,
                options={"require": ["exp", "sub", "aud"]},
            )
        except jwt.PyJWTError as error:
            raise _TokenFailure(400, "invalid_grant", f"subject_token: {error}") from None
        resource = form.get("resource")
        if not self.resource_ok(resource):
            raise _TokenFailure(400, "invalid_target", f"unknown resource {resource}")
        self.token_exchanges += 1
        scopes = form.get("scope", "").split() or self.default_scopes()
        minted = self.issue_tokens(
            client.client_id, scopes, resource=resource, subject=str(claims["sub"])
        )
        return {**minted.model_dump(exclude_none=True), "issued_token_type": ACCESS_TOKEN_TYPE}

    # -- SEP-1933 workload identity (served by _Gate) ---------------------------------------

    def trust_workloads(self, issuer: str, public_key: Any) -> None:
        """Take, as a jwt-bearer grant, a workload's JWT that ``issuer`` (a platform: a
        Kubernetes cluster, a CI system) signed with `public_key` (a PEM or a key) for this
        authorization server (``aud``: its issuer or token endpoint)."""
        self._trusted_workloads[issuer] = public_key

    def takes_workload(self, form: dict[str, str]) -> bool:
        """Whether a jwt-bearer token request is a workload's (SEP-1933), served here: a
        workload issuer is trusted and the assertion is no ID-JAG (those go to the SDK)."""
        if not self._trusted_workloads or form.get("grant_type") != JWT_BEARER_GRANT:
            return False
        try:
            header = jwt.get_unverified_header(form.get("assertion", ""))
        except jwt.PyJWTError:
            return True  # refused as a malformed workload JWT
        return header.get("typ") != ID_JAG_TYP

    def workload_grant(self, form: dict[str, str], basic: tuple[str, str] | None) -> dict[str, Any]:
        """The jwt-bearer grant of a workload's JWT (RFC 7523 §2.1, SEP-1933): authenticate
        the client (``none`` too: a public client names itself by ``client_id``), check the
        JWT — a trusted issuer's signature, this server as ``aud``, unexpired, ``sub`` —
        and the scopes (``invalid_scope`` beyond what the client may have), mint a token
        for its ``sub`` (no refresh token). The JWT may be presented again while it is
        valid: platforms hand out one token for many requests."""
        self.workload_grants += 1
        client = self._authenticate(form, basic)
        if JWT_BEARER_GRANT not in client.grant_types:
            raise _TokenFailure(400, "unauthorized_client", "the jwt-bearer grant not allowed")
        assertion = form.get("assertion", "")
        if not assertion:
            raise _TokenFailure(400, "invalid_request", "missing assertion")
        try:
            issuer = str(jwt.decode(assertion, options={"verify_signature": False}).get("iss"))
        except jwt.PyJWTError as error:
            raise _TokenFailure(400, "invalid_grant", f"malformed assertion: {error}") from None
        key = self._trusted_workloads.get(issuer)
        if key is None:
            raise _TokenFailure(400, "invalid_grant", f"unknown assertion issuer {issuer!r}")
        try:
            claims = jwt.decode(
                assertion,
                key,
                algorithms=_ASSERTION_ALGORITHMS,
                audience=[self.issuer, self.issuer + "/", self.token_endpoint],
                issuer=issuer,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise _TokenFailure(400, "invalid_grant", "JWT assertion is expired") from None
        except jwt.InvalidAudienceError:
            raise _TokenFailure(400, "invalid_grant", "JWT assertion audience is invalid") from None
        except jwt.PyJWTError as error:
            raise _TokenFailure(400, "invalid_grant", f"assertion rejected: {error}") from None
        requested = form.get("scope", "").split()
        if requested:
            try:
                client.validate_scope(" ".join(requested))
            except Exception as error:
                raise _TokenFailure(400, "invalid_scope", str(error)) from None
        resource = form.get("resource")
        if not self.resource_ok(resource):
            raise _TokenFailure(400, "invalid_target", f"unknown resource {resource}")
        scopes = requested or self.default_scopes()
        token = self.issue_tokens(
            client.client_id,
            scopes,
            resource=resource,
            subject=str(claims["sub"]),
            claims={"workload_issuer": issuer},
        )
        return token.model_dump(exclude_none=True)

    @property
    def jwt_public_key(self) -> Any:  # noqa: ANN401 - a cryptography public key
        """The public key its JWT access tokens are signed with."""
        return self._jwt_key.public_key()

    def _authenticate(self, form: dict[str, str], basic: tuple[str, str] | None) -> _FixtureClient:
        if "client_assertion" in form or "client_assertion_type" in form:
            client_id, method, secret = self.verify_client_assertion(form), "private_key_jwt", None
        elif basic is not None:
            client_id, secret = basic
            method = "client_secret_basic"
            if form.get("client_id", client_id) != client_id:
                raise _TokenFailure(401, "invalid_client", "client_id differs from Basic auth")
        elif "client_secret" in form:
            client_id, method, secret = (
                form.get("client_id", ""),
                "client_secret_post",
                form["client_secret"],
            )
        else:
            client_id, method, secret = form.get("client_id", ""), "none", None
        client = self.clients.get(client_id)
        if client is None:
            raise _TokenFailure(401, "invalid_client", f"unknown client {client_id!r}")
        if client.token_endpoint_auth_method != method:
            raise _TokenFailure(
                401,
                "invalid_client",
                f"client registered for {client.token_endpoint_auth_method}, used {method}",
            )
        if method in ("client_secret_basic", "client_secret_post"):
            expected = (client.client_secret or "").encode()
            if not hmac.compare_digest(expected, (secret or "").encode()):
                raise _TokenFailure(401, "invalid_client", "wrong client secret")
        return client

    # -- SEP-990 jwt-bearer grant ----------------------------------------------------------

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        """Redeem an ID-JAG from a trusted IdP for an access token (no refresh token).

        Checks: ``typ`` ``oauth-id-jag+jwt``; signed by a trusted IdP (``trust_idp``) whose
        issuer is its ``iss``; ``aud`` = this issuer; ``exp``, ``sub``, ``jti`` present and
        ``jti`` unused; ``client_id`` = the authenticated client; ``resource`` (when there)
        names this server. Scopes: the ID-JAG's ``scope``, narrowed to the requested ones.
        """
        self.identity_assertions += 1
        try:
            header = jwt.get_unverified_header(params.assertion)
            unverified = jwt.decode(params.assertion, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            raise TokenError("invalid_grant", f"malformed assertion: {error}") from None
        if header.get("typ") != ID_JAG_TYP:
            raise TokenError("invalid_grant", f"assertion typ is not {ID_JAG_TYP}")
        idp = str(unverified.get("iss"))
        key = self._trusted_idps.get(idp)
        if key is None:
            raise TokenError("invalid_grant", f"untrusted assertion issuer {idp!r}")
        try:
            claims = jwt.decode(
                params.assertion,
                key,
                algorithms=["ES256", "RS256"],
                audience=self.issuer,
                issuer=idp,
                options={"require": ["exp", "iss", "sub", "aud", "jti"]},
            )
        except jwt.PyJWTError as error:
            raise TokenError("invalid_grant", f"assertion rejected: {error}") from None
        if ("id-jag", str(claims["jti"])) in self._seen_jti:
            raise TokenError("invalid_grant", "assertion replayed")
        self._seen_jti.add(("id-jag", str(claims["jti"])))
        if claims.get("client_id") != client.client_id:
            raise TokenError("invalid_grant", "assertion client_id is not the client")
        resources = claims.get("resource")
        if isinstance(resources, str):
            resources = [resources]
        if resources is not None and not any(self.resource_ok(r) for r in resources):
            raise TokenError("invalid_target", "assertion is for another resource")
        if not self.resource_ok(params.resource):
            raise TokenError("invalid_target", f"unknown resource {params.resource}")
        granted = str(claims["scope"]).split() if "scope" in claims else self.default_scopes()
        if params.scopes:
            granted = [scope for scope in granted if scope in params.scopes]
        return self.issue_tokens(
            client.client_id,
            granted,
            subject=str(claims["sub"]),
            claims={"idp": idp},
        )

    # -- DPoP (RFC 9449), served by _Gate --------------------------------------------------

    def check_dpop_proof(
        self,
        where: str,
        proof: str,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
    ) -> str:
        """Check one DPoP proof (RFC 9449 §4.3) of a `method` request to `url`, recorded
        in ``dpop_proofs``; the thumbprint of its key. ``_TokenFailure``
        ``invalid_dpop_proof`` names what is wrong; ``use_dpop_nonce`` a valid proof
        without `nonce` (when one is wanted)."""
        record = DpopProof(where)
        self.dpop_proofs.append(record)
        try:
            jkt = self._check_dpop(record, proof, method, url, access_token)
        except _TokenFailure as failure:
            record.error = failure.description
            raise
        if nonce is not None and record.nonce != nonce:
            self.dpop_nonce_challenges["as" if where == "token" else "rs"] += 1
            record.error = "use_dpop_nonce"
            raise _TokenFailure(400, "use_dpop_nonce", "a DPoP nonce is needed")
        return jkt

    def _check_dpop(
        self, record: DpopProof, proof: str, method: str, url: str, access_token: str | None
    ) -> str:
        def bad(why: str) -> _TokenFailure:
            return _TokenFailure(400, "invalid_dpop_proof", why)

        try:
            header = jwt.get_unverified_header(proof)
        except jwt.PyJWTError:
            raise bad("the proof is not a JWT") from None
        record.header = header
        if header.get("typ") != "dpop+jwt":
            raise bad("typ is not dpop+jwt")
        alg = header.get("alg")
        if alg not in _DPOP_ALGORITHMS:
            raise bad(f"alg {alg} is not an asymmetric algorithm allowed")
        key = header.get("jwk")
        if not isinstance(key, dict) or "d" in key:
            raise bad("jwk is not a public key")
        try:
            verifier = jwt.PyJWK(key, algorithm=alg).key
            claims = jwt.decode(proof, verifier, algorithms=[alg], options={"verify_aud": False})
            record.jkt = _jwk_thumbprint(key)
        except (jwt.PyJWTError, ValueError, KeyError, TypeError) as error:
            raise bad(f"the signature does not verify ({type(error).__name__})") from None
        record.htm, record.htu, record.jti = (claims.get(c) for c in ("htm", "htu", "jti"))
        record.iat, record.ath, record.nonce = (claims.get(c) for c in ("iat", "ath", "nonce"))
        if not isinstance(record.jti, str) or not record.jti:
            raise bad("no jti")
        if ("dpop", record.jti) in self._seen_jti:
            raise bad("jti used before (a replayed proof)")
        self._seen_jti.add(("dpop", record.jti))
        if record.htm != method:
            raise bad(f"htm is not {method}")
        htu = record.htu
        if not isinstance(htu, str) or "?" in htu or "#" in htu:
            raise bad("htu has a query or a fragment")
        if htu.rstrip("/") != url.rstrip("/"):
            raise bad(f"htu is not {url}")
        if not isinstance(record.iat, int) or abs(time.time() - record.iat) > _DPOP_WINDOW:
            raise bad("iat is not now")
        if access_token is not None:
            expected = _b64url(hashlib.sha256(access_token.encode()).digest())
            if record.ath != expected:
                raise bad("ath is not the access token's hash")
        return record.jkt


class _Gate:
    """The ASGI wrapper in front of the SDK's app: what the SDK's server auth lacks."""

    def __init__(self, app: ASGIApp, provider: TestAuthProvider, resource_metadata_url: str):
        self.app = app
        self.provider = provider
        self.resource_metadata_url = resource_metadata_url
        self.mcp_statuses: Counter[int] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        config = self.provider.config
        if path == "/.well-known/oauth-authorization-server" and method == "GET":
            if not config.as_metadata:
                await _send_json(send, 404, {"error": "not_found"}, [])
                return
            await self._edited_json(scope, receive, send, self._edit_as_metadata)
        elif path.startswith("/.well-known/oauth-protected-resource") and method == "GET":
            if not config.protected_resource_metadata:
                await _send_json(send, 404, {"error": "not_found"}, [])
                return
            await self._edited_json(scope, receive, send, self._edit_resource_metadata)
        elif path in ("/token", "/revoke") and method == "POST":
            await self._dpop_token(scope, receive, send)
        elif path == "/jwks" and method == "GET" and config.jwt_access_tokens:
            self.provider.jwks_requests += 1
            if config.jwks_status != 200:
                await _send_json(send, config.jwks_status, {"error": "unavailable"}, [])
            else:
                await _send_json(send, 200, self.provider.jwks(), [])
        elif path == "/introspect" and method == "POST" and config.jwt_access_tokens:
            await self._introspect(scope, receive, send)
        elif path == "/mcp":
            await self._mcp(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- metadata --------------------------------------------------------------------------

    def _edit_as_metadata(self, doc: dict[str, Any]) -> None:
        config = self.provider.config
        if not config.advertise_s256:
            doc.pop("code_challenge_methods_supported", None)
        grants = doc.setdefault("grant_types_supported", [])
        if CLIENT_CREDENTIALS not in grants:
            grants.append(CLIENT_CREDENTIALS)
        if config.token_endpoint_auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = list(config.token_endpoint_auth_methods)
        else:
            methods = doc.setdefault("token_endpoint_auth_methods_supported", [])
            methods.extend(m for m in ("private_key_jwt", "none") if m not in methods)
        doc["token_endpoint_auth_signing_alg_values_supported"] = list(_ASSERTION_ALGORITHMS)
        doc["authorization_response_iss_parameter_supported"] = config.advertise_iss
        if config.client_id_metadata_documents:
            doc["client_id_metadata_document_supported"] = True
        if config.as_issuer_path:
            doc["issuer"] = doc["issuer"].rstrip("/") + config.as_issuer_path
        if config.jwt_access_tokens:
            doc["jwks_uri"] = self.provider.issuer + "/jwks"
            doc["introspection_endpoint"] = self.provider.issuer + "/introspect"
        if config.dpop:
            doc["dpop_signing_alg_values_supported"] = list(_DPOP_ALGORITHMS)
        doc.update(config.metadata_overrides)

    def _edit_resource_metadata(self, doc: dict[str, Any]) -> None:
        scopes = self.provider.config.resource_scopes_supported
        if scopes is not None:
            doc["scopes_supported"] = list(scopes)

    async def _edited_json(
        self, scope: Scope, receive: Receive, send: Send, edit: Callable[[dict[str, Any]], None]
    ) -> None:
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            if start["status"] == 200:
                doc = json.loads(body)
                edit(doc)
                body = json.dumps(doc).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)

    # -- token endpoint --------------------------------------------------------------------

    async def _token(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /token`` (counted) and ``POST /revoke``: serve ``client_credentials``;
        turn a verified ``private_key_jwt`` assertion, or Basic credentials without a
        ``client_id`` in the body, into what the SDK's client authenticator reads."""
        body = await _read_body(receive)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        provider = self.provider
        is_token = scope["path"] == "/token"
        if is_token:
            provider.token_requests[form.get("grant_type", "")] += 1
            params = {k: v for k, v in form.items() if k not in _SECRET_FIELDS}
            provider.token_params.append(params)
        if is_token and provider.config.lax_token_endpoint and not form.get("grant_type"):
            answer = {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer"}
            await _send_json(send, 200, answer, [(b"cache-control", b"no-store")])
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            basic = _basic_credentials(headers.get("authorization"))
            accepted = provider.config.token_endpoint_auth_methods
            if is_token and accepted is not None and _auth_method(form, basic) not in accepted:
                raise _TokenFailure(
                    401,
                    "invalid_client",
                    f"client authentication {_auth_method(form, basic)} is not supported here",
                )
            workload = is_token and provider.takes_workload(form)
            if workload or (
                is_token and form.get("grant_type") in (CLIENT_CREDENTIALS, TOKEN_EXCHANGE_GRANT)
            ):
                if workload:
                    answer = provider.workload_grant(form, basic)
                elif form["grant_type"] == CLIENT_CREDENTIALS:
                    answer = provider.client_credentials(form, basic)
                else:
                    answer = provider.exchange_subject_token(form, basic)
                await _send_json(send, 200, answer, [(b"cache-control", b"no-store")])
                return
            asserted = None
            if "client_assertion" in form:
                asserted = provider.verify_client_assertion(form)
                for field in ("client_assertion", "client_assertion_type"):
                    form.pop(field)
                form["client_id"] = asserted
                form["client_secret"] = provider.assertion_secret(asserted)
            elif basic is not None and "client_id" not in form:
                # RFC 6749 §2.3.1: with Basic auth the body needs no client_id; the SDK's
                # authenticator and token handler read it from the body all the same.
                form["client_id"] = basic[0]
        except _TokenFailure as failure:
            extra = [(b"www-authenticate", b'Basic realm="token"')] if failure.status == 401 else []
            answer = {"error": failure.error, "error_description": failure.description}
            await _send_json(send, failure.status, answer, extra)
            return
        body = urlencode(form).encode()
        replayed = {**scope, "headers": _with_header(scope["headers"], b"content-length", body)}
        reset = _asserted_client.set(asserted)
        try:
            await self.app(replayed, _replay(body), send)
        finally:
            _asserted_client.reset(reset)

    async def _introspect(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            answer = self.provider.introspect(
                form.get("token", ""), _basic_credentials(headers.get("authorization"))
            )
        except _TokenFailure as failure:
            answer = {"error": failure.error, "error_description": failure.description}
            await _send_json(send, failure.status, answer, [])
            return
        await _send_json(send, 200, answer, [(b"cache-control", b"no-store")])

    # -- DPoP ------------------------------------------------------------------------------

    async def _dpop_token(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /token`` with the ``dpop`` knob: a DPoP proof there is checked (400
        ``invalid_dpop_proof``; 400 ``use_dpop_nonce`` with the nonce in ``DPoP-Nonce``
        when ``dpop_as_nonce`` wants it), a bound refresh token is taken only with a proof
        of its key, and the grant's tokens are bound to the proof's key (answered with
        ``token_type`` ``DPoP``). Without a proof, the grant's tokens are Bearer ones."""
        provider, config = self.provider, self.provider.config
        if not config.dpop or scope["path"] != "/token":
            await self._token(scope, receive, send)
            return
        body = await _read_body(receive)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        proofs = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"dpop"]
        jkt = None
        try:
            if len(proofs) > 1:
                raise _TokenFailure(400, "invalid_dpop_proof", "more than one DPoP header")
            if proofs:
                nonce = provider.dpop_nonces["as"] if config.dpop_as_nonce else None
                jkt = provider.check_dpop_proof(
                    "token", proofs[0], "POST", provider.token_endpoint, nonce=nonce
                )
            if form.get("grant_type") == "refresh_token":
                bound = provider.dpop_bindings.get(form.get("refresh_token", ""))
                if bound is not None and bound != jkt:
                    raise _TokenFailure(
                        400, "invalid_grant", "the refresh token is bound to another DPoP key"
                    )
        except _TokenFailure as failure:
            extra = [(b"cache-control", b"no-store")]
            if failure.error == "use_dpop_nonce":
                extra.append((b"dpop-nonce", provider.dpop_nonces["as"].encode()))
            answer = {"error": failure.error, "error_description": failure.description}
            await _send_json(send, 400, answer, extra)
            return
        replayed = {**scope, "headers": _with_header(scope["headers"], b"content-length", body)}
        reset = _dpop_jkt.set(jkt)
        try:
            await self._token(replayed, _replay(body), _token_type_dpop(send) if jkt else send)
        finally:
            _dpop_jkt.reset(reset)

    async def _dpop_mcp(self, scope: Scope, send: Send) -> Scope | None:
        """``/mcp`` with the ``dpop`` knob: a bound token is taken as ``Authorization:
        DPoP`` with a valid proof of this request and of its key (and the nonce, with
        ``dpop_rs_nonce``), and handed on as a Bearer one; refused with a 401 ``DPoP``
        challenge otherwise (``None``). Unbound tokens go on as they came."""
        provider, config = self.provider, self.provider.config
        authorization = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"authorization"),
            None,
        )
        if authorization is None:
            return scope
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        bound = provider.dpop_bindings.get(token)
        proofs = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"dpop"]
        try:
            if scheme.lower() == "bearer":
                if bound is None:
                    return scope
                raise _TokenFailure(
                    401, "invalid_token", "a DPoP-bound token needs the DPoP scheme"
                )
            if scheme.lower() != "dpop":
                return scope
            if len(proofs) != 1:
                raise _TokenFailure(401, "invalid_dpop_proof", "one DPoP header is needed")
            nonce = provider.dpop_nonces["rs"] if config.dpop_rs_nonce else None
            jkt = provider.check_dpop_proof(
                "mcp",
                proofs[0],
                scope["method"],
                provider.issuer + scope["path"],
                access_token=token,
                nonce=nonce,
            )
            if bound != jkt:
                raise _TokenFailure(401, "invalid_token", "the token is not bound to this key")
        except _TokenFailure as failure:
            why = failure.description.replace('"', "'")
            challenge = (
                f'DPoP error="{failure.error}", error_description="{why}", algs="ES256", '
                f'resource_metadata="{self.resource_metadata_url}"'
            )
            extra = [(b"www-authenticate", challenge.encode())]
            if failure.error == "use_dpop_nonce":
                extra.append((b"dpop-nonce", provider.dpop_nonces["rs"].encode()))
            self.mcp_statuses[401] += 1
            answer = {"error": failure.error, "error_description": failure.description}
            await _send_json(send, 401, answer, extra)
            return None
        dropped = (b"authorization", b"dpop")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in dropped]
        headers.append((b"authorization", b"Bearer " + token.encode("latin-1")))
        return {**scope, "headers": headers}

    # -- the MCP endpoint ------------------------------------------------------------------

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        config = self.provider.config
        if config.dpop:
            checked = await self._dpop_mcp(scope, send)
            if checked is None:
                return  # refused
            scope = checked
        needed = config.needed_scopes()
        access = None
        for name, value in scope["headers"]:
            if name.lower() == b"authorization" and value[:7].lower() == b"bearer ":
                access = await self.provider.load_access_token(value[7:].decode("latin-1"))
        if access is not None:
            missing = [s for s in needed if s not in access.scopes]
            if missing:
                self.mcp_statuses[403] += 1
                challenge = (
                    f'Bearer error="insufficient_scope", scope="{" ".join(needed)}", '
                    f'error_description="Required scope: {" ".join(missing)}", '
                    f'resource_metadata="{self.resource_metadata_url}"'
                )
                answer = {"error": "insufficient_scope", "error_description": challenge}
                await _send_json(send, 403, answer, [(b"www-authenticate", challenge.encode())])
                return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.mcp_statuses[message["status"]] += 1
                if message["status"] == 401 and config.dpop:
                    headers = [
                        (n, _dpop_scheme(v) if n.lower() == b"www-authenticate" else v)
                        for n, v in message["headers"]
                    ]
                    message = {**message, "headers": headers}
                if message["status"] == 401 and not config.protected_resource_metadata:
                    headers = [
                        (n, b"Bearer" if n.lower() == b"www-authenticate" else v)
                        for n, v in message["headers"]
                    ]
                    message = {**message, "headers": headers}
                if message["status"] == 401 and config.scope_in_401 and needed:
                    headers = []
                    for name, value in message["headers"]:
                        if name.lower() == b"www-authenticate":
                            value += f', scope="{" ".join(needed)}"'.encode()
                        headers.append((name, value))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, counted)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


def _with_header(
    headers: Iterable[tuple[bytes, bytes]], name: bytes, body: bytes
) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() != name]
    return [*kept, (name, str(len(body)).encode())]


def _auth_method(form: dict[str, str], basic: tuple[str, str] | None) -> str:
    """How a token request's client authenticates (RFC 6749 §2.3, RFC 7523)."""
    if "client_assertion" in form or "client_assertion_type" in form:
        return "private_key_jwt"
    if basic is not None:
        return "client_secret_basic"
    return "client_secret_post" if "client_secret" in form else "none"


def _basic_credentials(header: str | None) -> tuple[str, str] | None:
    if header is None or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise _TokenFailure(401, "invalid_client", "malformed Basic credentials") from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise _TokenFailure(401, "invalid_client", "malformed Basic credentials")
    return unquote(client_id), unquote(secret)


def _token_type_dpop(send: Send) -> Send:
    """``send`` with a token answer's ``token_type`` made ``DPoP`` (a bound token)."""
    start: Message = {}
    chunks: list[bytes] = []

    async def edited(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(chunks)
        if start["status"] == 200:
            doc = json.loads(body)
            if isinstance(doc, dict) and "access_token" in doc:
                doc["token_type"] = "DPoP"
            body = json.dumps(doc).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return edited


async def _send_json(
    send: Send, status: int, doc: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    await respond(send, status, json.dumps(doc).encode(), b"application/json", headers)


# -- the enterprise IdP ---------------------------------------------------------------------


def generate_key_pair() -> tuple[str, str]:
    """A fresh EC P-256 key pair as PEM: (private key, public key), for ES256 JWTs."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private.decode(), public.decode()


def workload_token(
    private_key_pem: str,
    *,
    issuer: str,
    audience: str,
    subject: str = "system:serviceaccount:jobs:nightly",
    expires_in: int = 3600,
) -> str:
    """A workload's JWT as a platform issues one (a Kubernetes projected service-account
    token), ES256-signed with `private_key_pem`; a negative `expires_in` has it expired."""
    now = int(time.time())
    payload = {
        "iss": issuer,
        "sub": subject,
        "aud": audience,
        "iat": now,
        "nbf": now - 5,
        "exp": now + expires_in,
        "jti": secrets.token_hex(8),
    }
    return jwt.encode(payload, private_key_pem, algorithm="ES256")


@attrs.define
class _IdpClient:
    secret: str | None  # None: a public client
    mcp_client_id: str


class TestIdP:
    """A test enterprise IdP: ID tokens on demand, and RFC 8693 exchange for ID-JAGs.

    ``POST /token`` takes ``grant_type=urn:ietf:params:oauth:grant-type:token-exchange``,
    ``requested_token_type=…:id-jag``, ``subject_token`` (an ID token from
    ``issue_id_token`` whose ``aud`` is the authenticating client), ``subject_token_type=…:
    id_token``, ``audience`` (the MCP AS issuer), optional ``resource`` and ``scope``, with
    the client's id/secret by Basic or in the body (a public client: its id alone, in the
    body); it answers the ID-JAG (ES256, ``typ``
    ``oauth-id-jag+jwt``). Also ``/.well-known/openid-configuration`` and ``/jwks``.
    ``exchanges`` counts ID-JAGs issued, ``exchange_requests`` every request's form (minus
    secrets); ``deny`` makes every exchange fail with ``invalid_grant``.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, issuer: str = "", *, id_jag_ttl: int = 300) -> None:
        self.issuer = issuer
        self.id_jag_ttl = id_jag_ttl
        self.deny = False
        self.clients: dict[str, _IdpClient] = {}
        self.exchanges = 0
        self.exchange_requests: list[dict[str, str]] = []
        #: requests that presented a client secret (by Basic or in the form)
        self.secrets_seen = 0
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.public_key = self._key.public_key()
        self.kid = "idp-" + secrets.token_hex(4)
        self.app: ASGIApp = Starlette(
            routes=[
                Route("/token", self._token, methods=["POST"]),
                Route("/jwks", self._jwks, methods=["GET"]),
                Route("/.well-known/openid-configuration", self._metadata, methods=["GET"]),
                Route("/.well-known/oauth-authorization-server", self._metadata, methods=["GET"]),
            ]
        )

    @property
    def token_endpoint(self) -> str:
        return self.issuer + "/token"

    def add_client(
        self, client_id: str, secret: str | None, *, mcp_client_id: str | None = None
    ) -> None:
        """Register a client at the IdP — a public one (no secret: it sends its
        ``client_id`` alone) when ``secret`` is ``None``; its ID-JAGs name
        `mcp_client_id` (default: the same id) as ``client_id``, its registration at the
        MCP AS."""
        self.clients[client_id] = _IdpClient(secret, mcp_client_id or client_id)

    def issue_id_token(
        self,
        sub: str,
        *,
        audience: str | None = None,
        ttl: int = 3600,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """An OpenID ID token for `sub`, ``aud`` `audience` (default: the first client)."""
        if audience is None:
            if not self.clients:
                raise ValueError("add a client first, or give the audience")
            audience = next(iter(self.clients))
        now = int(time.time())
        payload = {"iss": self.issuer, "sub": sub, "aud": audience, "iat": now, "exp": now + ttl}
        return self._sign({**payload, **(claims or {})}, "JWT")

    def issue_id_jag(
        self,
        sub: str,
        *,
        audience: str,
        client_id: str,
        resource: str | None = None,
        scope: str | None = None,
        ttl: int | None = None,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """An ID-JAG as the token exchange would issue it (tests may forge variants)."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub,
            "aud": audience,
            "client_id": client_id,
            "jti": secrets.token_hex(12),
            "iat": now,
            "exp": now + (self.id_jag_ttl if ttl is None else ttl),
        }
        if resource is not None:
            payload["resource"] = resource
        if scope:
            payload["scope"] = scope
        return self._sign({**payload, **(claims or {})}, ID_JAG_TYP)

    def _sign(self, payload: dict[str, Any], typ: str) -> str:
        return jwt.encode(
            payload, self._key, algorithm="ES256", headers={"typ": typ, "kid": self.kid}
        )

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "token_endpoint": self.token_endpoint,
                "jwks_uri": self.issuer + "/jwks",
                "grant_types_supported": [TOKEN_EXCHANGE_GRANT],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "id_token_signing_alg_values_supported": ["ES256"],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        jwk = ECAlgorithm.to_jwk(self.public_key, as_dict=True)
        return JSONResponse({"keys": [{**jwk, "kid": self.kid, "alg": "ES256", "use": "sig"}]})

    async def _token(self, request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        self.exchange_requests.append({k: v for k, v in form.items() if k not in _SECRET_FIELDS})
        try:
            answer = self._exchange(form, request.headers.get("authorization"))
        except _TokenFailure as failure:
            doc = {"error": failure.error, "error_description": failure.description}
            return JSONResponse(
                doc, status_code=failure.status, headers={"cache-control": "no-store"}
            )
        self.exchanges += 1
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    def _exchange(self, form: dict[str, str], authorization: str | None) -> dict[str, Any]:
        basic = _basic_credentials(authorization)
        client_id, secret = basic if basic is not None else (form.get("client_id", ""), None)
        if secret is None:
            secret = form.get("client_secret")
        if secret is not None:
            self.secrets_seen += 1
        client = self.clients.get(client_id)
        if client is None:
            raise _TokenFailure(401, "invalid_client", "unknown client")
        if client.secret is None:
            if secret is not None:  # a public client has nothing to authenticate with
                raise _TokenFailure(401, "invalid_client", "a public client sends no secret")
        elif secret is None or not hmac.compare_digest(client.secret.encode(), secret.encode()):
            raise _TokenFailure(401, "invalid_client", "wrong or missing client secret")
        if form.get("grant_type") != TOKEN_EXCHANGE_GRANT:
            raise _TokenFailure(400, "unsupported_grant_type", "only token exchange")
        if form.get("requested_token_type") != ID_JAG_TOKEN_TYPE:
            raise _TokenFailure(
                400, "invalid_request", f"requested_token_type must be {ID_JAG_TOKEN_TYPE}"
            )
        if form.get("subject_token_type") != ID_TOKEN_TYPE:
            raise _TokenFailure(
                400, "invalid_request", f"subject_token_type must be {ID_TOKEN_TYPE}"
            )
        audience = form.get("audience")
        if not audience:
            raise _TokenFailure(400, "invalid_request", "audience (the MCP AS issuer) is required")
        try:
            id_token = jwt.decode(
                form.get("subject_token", ""),
                self.public_key,
                algorithms=["ES256"],
                audience=client_id,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.PyJWTError as error:
            raise _TokenFailure(400, "invalid_grant", f"subject_token: {error}") from None
        if self.deny:
            raise _TokenFailure(400, "invalid_grant", "the IdP's policy denies this exchange")
        scope = form.get("scope") or None
        id_jag = self.issue_id_jag(
            str(id_token["sub"]),
            audience=audience,
            client_id=client.mcp_client_id,
            resource=form.get("resource") or None,
            scope=scope,
        )
        answer: dict[str, Any] = {
            "access_token": id_jag,
            "issued_token_type": ID_JAG_TOKEN_TYPE,
            "token_type": "N_A",
            "expires_in": self.id_jag_ttl,
        }
        if scope:
            answer["scope"] = scope
        return answer


# -- the server and its fixture -----------------------------------------------------------


def make_oauth_server(provider: TestAuthProvider) -> MCPServer:
    """The ``MCPServer`` behind `provider`: AS + RS, tools ``whoami()``, ``echo(text)``
    and ``ask_name()``.

    ``whoami`` answers the calling token's ``client_id``, ``scopes``, ``subject`` and
    ``resource``; ``ask_name`` asks its client's user their name (``elicitation/create``,
    on a session-based connection) and answers the calling token's ``subject`` with what
    it was told (``action``, ``content``) or why not (``refused``). Serve
    ``streamable_http_app()`` wrapped by the gate (``open_oauth_server`` does both);
    `provider` must already know its issuer and resource.
    """
    config = provider.config
    auth = AuthSettings(
        # The SDK's model takes a str for these URLs and keeps its exact form (AnyHttpUrl()
        # would add a "/" to a path-less issuer); its annotations say AnyHttpUrl only.
        issuer_url=provider.issuer,  # pyright: ignore[reportArgumentType]
        resource_server_url=provider.resource,  # pyright: ignore[reportArgumentType]  # a str too
        validate_token_resource=True,
        required_scopes=config.required_scopes,
        identity_assertion_enabled=True,
        client_registration_options=ClientRegistrationOptions(
            enabled=True,
            valid_scopes=config.scopes_supported,
            default_scopes=config.scopes_supported,
        ),
        revocation_options=RevocationOptions(enabled=True),
    )
    server: MCPServer = MCPServer(
        "fixture-oauth", auth_server_provider=provider, auth=auth, log_level="WARNING"
    )

    @server.tool()
    async def whoami() -> dict[str, Any]:
        """The calling token's client id, scopes, subject and resource."""
        token = get_access_token()
        provider.executions.append(("whoami", None if token is None else token.subject))
        if token is None:
            return {"client_id": None, "scopes": [], "subject": None, "resource": None}
        return {
            "client_id": token.client_id,
            "scopes": token.scopes,
            "subject": token.subject,
            "resource": token.resource,
        }

    @server.tool()
    async def echo(text: str) -> str:
        """Return `text` unchanged."""
        token = get_access_token()
        provider.executions.append(("echo", None if token is None else token.subject))
        return text

    @server.tool()
    async def ask_name(ctx: Context) -> dict[str, Any]:
        """Ask the user their name; answer it with the calling token's subject."""
        token = get_access_token()
        subject = None if token is None else token.subject
        provider.executions.append(("ask_name", subject))
        try:
            answer = await ctx.session.elicit_form("Your name?", _NAME_SCHEMA, ctx.request_id)
        except MCPError as exc:
            return {"subject": subject, "refused": exc.error.message}
        return {"subject": subject, "action": answer.action, "content": answer.content}

    return server


#: What ``ask_name`` asks for.
_NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


class _Deferred:
    """An ASGI app bound before the app it serves exists: the issuer names the port.

    Answers hypercorn's lifespan itself (the real app's lifespan runs in the fixture's
    nursery) and holds requests until ``set`` gives the app.
    """

    def __init__(self) -> None:
        self._app: ASGIApp | None = None
        self._ready = trio.Event()

    def set(self, app: ASGIApp) -> None:
        self._app = app
        self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        await self._ready.wait()
        assert self._app is not None
        await self._app(scope, receive, send)


@attrs.define
class OAuthFixture:
    """A served OAuth-protected MCP server (``open_oauth_server``) and its knobs."""

    url: str
    """The MCP endpoint, ``http://127.0.0.1:PORT/mcp`` (also the RFC 8707 resource)."""
    issuer: str
    """The AS issuer, ``http://127.0.0.1:PORT``."""
    provider: TestAuthProvider
    server: MCPServer
    http: HttpServer
    idp: TestIdP | None
    _gate: _Gate

    @property
    def config(self) -> OAuthConfig:
        return self.provider.config

    @property
    def mcp_statuses(self) -> Counter[int]:
        """The status of each ``/mcp`` response (401s, step-up 403s, 200s...)."""
        return self._gate.mcp_statuses

    @property
    def resource_metadata_url(self) -> str:
        return self._gate.resource_metadata_url

    @property
    def metadata_url(self) -> str:
        return self.issuer + "/.well-known/oauth-authorization-server"

    @property
    def authorization_endpoint(self) -> str:
        return self.issuer + "/authorize"

    @property
    def token_endpoint(self) -> str:
        return self.issuer + "/token"

    @property
    def registration_endpoint(self) -> str:
        return self.issuer + "/register"

    @property
    def step_up_scopes(self) -> set[str]:
        return self.config.step_up_scopes

    @step_up_scopes.setter
    def step_up_scopes(self, scopes: Iterable[str]) -> None:
        self.config.step_up_scopes = set(scopes)

    @property
    def advertise_s256(self) -> bool:
        return self.config.advertise_s256

    @advertise_s256.setter
    def advertise_s256(self, value: bool) -> None:
        self.config.advertise_s256 = value

    @property
    def wrong_iss(self) -> bool:
        return self.config.wrong_iss

    @wrong_iss.setter
    def wrong_iss(self, value: bool) -> None:
        self.config.wrong_iss = value


@asynccontextmanager
async def open_oauth_server(
    *,
    idp: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
    config: OAuthConfig | None = None,
    transport: Literal["http", "sse"] = "http",
    **knobs: Any,
) -> AsyncIterator[OAuthFixture]:
    """Serve an OAuth-protected MCP server (and with `idp`, a ``TestIdP``) on loopback.

    ``transport="sse"`` serves the legacy HTTP+SSE endpoint (``/sse``) instead of
    Streamable HTTP (``/mcp``); the step-up knobs apply to ``/mcp`` only.

    `knobs` are ``OAuthConfig`` fields (or pass `config`). With `idp`, the IdP gets its own
    port and the provider trusts its key; register the enterprise client on both sides
    (``fx.provider.add_client(..., grant_types=[JWT_BEARER_GRANT_TYPE])``,
    ``fx.idp.add_client(..., mcp_client_id=...)``). Everything stops on exit.
    """
    if config is None:
        config = OAuthConfig(**knobs)
    elif knobs:
        raise TypeError("give config or knobs, not both")
    async with trio.open_nursery() as nursery:
        deferred = _Deferred()
        http = await start_http(nursery, deferred, host=host, port=port)
        issuer = http.url.removesuffix("/mcp")
        url = http.url if transport == "http" else issuer + "/sse"
        test_idp = None
        if idp:
            test_idp = TestIdP()
            idp_http = await start_http(nursery, test_idp.app, host=host)
            test_idp.issuer = idp_http.url.removesuffix("/mcp")
        provider = TestAuthProvider(issuer, url, config)
        if test_idp is not None:
            provider.trust_idp(test_idp.issuer, test_idp.public_key)
        server = make_oauth_server(provider)
        if transport == "http":
            app = server.streamable_http_app(host=host)
        else:
            app = server.sse_app(host=host)
        path = urlsplit(url).path
        gate = _Gate(app, provider, issuer + "/.well-known/oauth-protected-resource" + path)
        await nursery.start(_run_lifespan, app)
        deferred.set(gate)
        try:
            yield OAuthFixture(url, issuer, provider, server, http, test_idp, gate)
        finally:
            nursery.cancel_scope.cancel()


async def _run_lifespan(app: Starlette, task_status: trio.TaskStatus[None]) -> None:
    """Run `app`'s lifespan (the SDK's session manager) until cancelled."""
    async with app.router.lifespan_context(app):
        task_status.started()
        await trio.sleep_forever()
