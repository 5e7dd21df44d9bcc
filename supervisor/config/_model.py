"""The values a loaded config is made of: :class:`Config`, :class:`ServerConfig`,
:class:`Settings`, :class:`Limits`, :class:`AuditSettings`, :class:`GatewaySettings`,
:class:`AuthConfig`, :class:`IncludedFile`, :class:`Resources`, :class:`SandboxConfig`
and :class:`ServerType`.

All are frozen; ``repr()`` masks what looks secret (see :mod:`._secrets`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, TypeAlias

import msgspec

from ..actors import Backoff, GiveUp, Intensity, Restart, Strategy
from ..errors import FieldError
from ._limits import DEFAULT_MAX_CONFIG_BYTES as DEFAULT_MAX_CONFIG_BYTES
from ._limits import Limits as Limits
from ._secrets import (
    _masked_repr,
    _query,
    _secret_args,
    _secretish,
    _url_passwords,
    masked_database_url,
)

if TYPE_CHECKING:
    from ._plan import Plan

#: ``True`` (every tool), ``False`` (none) or tool names and globs.
ToolPolicy: TypeAlias = bool | tuple[str, ...]


class ServerType(enum.StrEnum):
    """How the supervisor talks to a server (a string enum: ``ServerType.STDIO == "stdio"``)."""

    #: a local subprocess speaking JSON-RPC on its stdin and stdout
    STDIO = "stdio"
    #: Streamable HTTP
    HTTP = "http"
    #: the legacy HTTP+SSE transport
    SSE = "sse"
    #: WebSocket (subprotocol ``mcp``)
    WS = "ws"
    #: an in-process server (``open_supervisor(apps=...)``) over the SDK's in-memory
    #: transport; never written in a config file
    MEMORY = "memory"


#: The default ``jitter`` of restart delays: each is drawn from ``[0.8 d, d]``, so servers
#: that failed together do not all come back at the same moment.
DEFAULT_JITTER = 0.2

#: The size at which the audit log is rotated by default (10 MiB), and the files kept.
DEFAULT_AUDIT_MAX_BYTES = 10_485_760
DEFAULT_AUDIT_BACKUPS = 3


class AuditSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The audit log (``supervisor.audit``): one JSON line per tool call, in ``path``
    (``~`` expanded; relative to the config's directory), rotated by size."""

    path: str
    #: write each call's arguments and result too (redacted); off: never
    include_arguments: bool = False
    #: the size at which the file is rotated; 0: never rotated
    max_bytes: int = DEFAULT_AUDIT_MAX_BYTES
    #: how many rotated files are kept (``path.1`` … ``path.N``)
    backups: int = DEFAULT_AUDIT_BACKUPS


class IntrospectionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Token introspection (RFC 7662) in place of checking JWTs (``gateway.auth.
    introspection``): each caller's token is sent to ``endpoint``, the gateway
    authenticating as ``client_id`` with the secret read from a file or an environment
    variable (never written here). An answer is kept ``cache_seconds`` (0: asked at every
    request, so a revoked token is refused at once)."""

    endpoint: str
    client_id: str
    client_secret_file: str | None = None
    client_secret_env: str | None = None
    cache_seconds: float = 0.0


class SignInSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The gateway as an OAuth client of the team's authorization server
    (``gateway.auth.signIn``): before a caller's own login to a ``perUser`` server
    starts, the browser that opened the link signs in there, and must be the caller the
    link is for. ``client_id`` is registered with the redirect URI
    ``BASE/auth/signed-in``; its secret (none: a public client) is read from a file or
    an environment variable."""

    client_id: str
    client_secret_file: str | None = None
    client_secret_env: str | None = None


class GatewayAuth(msgspec.Struct, frozen=True, kw_only=True):
    """The HTTP gateway as an OAuth 2.1 resource server (``gateway.auth``): it takes
    access tokens from ``issuer`` meant for ``resource`` (the MCP endpoint's URL as its
    clients reach it), checked as JWTs against the issuer's keys, or by
    ``introspection``; each caller is the token's subject."""

    issuer: str
    resource: str
    #: where the issuer's keys are; ``None``: its metadata's ``jwks_uri``
    jwks_url: str | None = None
    #: scopes every token needs
    scopes: tuple[str, ...] = ()
    #: the token's claim that lists the caller's groups
    groups_claim: str = "groups"
    introspection: IntrospectionSettings | None = None
    #: the browser's sign-in before a caller's own login to a ``perUser`` server
    sign_in: SignInSettings | None = None


class PolicyRule(msgspec.Struct, frozen=True, kw_only=True):
    """One rule of ``gateway.policy``: the callers it is for (``subjects``, ``groups``;
    neither: every caller) may list and call the tools matching ``tools`` (globs over
    merged names; none: all) of the servers matching ``servers`` (globs; none: all).
    ``rate_limit`` (``rateLimit``, ``"60/min"``), if set, bounds each of its callers'
    calls of those tools (a token bucket per caller and rule)."""

    subjects: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    rate_limit: str | None = None


class TokenStoreSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``supervisor.tokenStore``: OAuth credentials in PostgreSQL at ``url`` (no password
    in it: libpq's ``PGPASSWORD`` or ``~/.pgpass`` give one), sealed at rest with the key
    read from ``key_file`` or ``key_env`` — or in a SQLite file (``sqlite:PATH``, relative
    to the config's directory), sealed when a key is given."""

    url: str
    key_file: str | None = None
    key_env: str | None = None

    def __repr__(self) -> str:  # a password that got into the URL is never shown
        shown = masked_database_url(self.url)
        keys = f"key_file={self.key_file!r}, key_env={self.key_env!r}"
        return f"TokenStoreSettings(url={shown!r}, {keys})"


class GatewaySettings(msgspec.Struct, frozen=True, kw_only=True):
    """The ``gateway`` section of ``supervisor``: the team gateway's ``auth`` and its
    ``policy`` (``None``: every caller may use everything served), and the key replicas
    share."""

    auth: GatewayAuth | None = None
    policy: tuple[PolicyRule, ...] | None = None
    #: where the gateway's secret key is (a file, or an environment variable): what
    #: replicas share to take each other's approval states and task ids; ``None``: a key
    #: of each process's own
    key_file: str | None = None
    key_env: str | None = None


def _local_backoff() -> Backoff:
    return Backoff(
        initial=1.0, maximum=30.0, multiplier=2.0, jitter=DEFAULT_JITTER, stable_after=30.0
    )


def _remote_backoff() -> Backoff:
    return Backoff(
        initial=1.0, maximum=60.0, multiplier=2.0, jitter=DEFAULT_JITTER, stable_after=30.0
    )


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The ``supervisor`` section: tree-wide policy and the defaults servers inherit.

    Times are in seconds; a ``ping_interval`` of 0 disables health probes.
    """

    strategy: Strategy = Strategy.ONE_FOR_ONE
    #: the servers' tree as a whole: more restarts than this (of all servers together)
    #: and it gives up; unlimited unless set
    intensity: Intensity = msgspec.field(default_factory=Intensity.unlimited)
    #: delays between restarts of a local (stdio) server, and how many are tried
    local_backoff: Backoff = msgspec.field(default_factory=_local_backoff)
    local_max_attempts: int = 5
    #: delays between reconnections to a remote (http, sse, ws) server, and how many
    remote_backoff: Backoff = msgspec.field(default_factory=_remote_backoff)
    remote_max_attempts: int = 10
    limits: Limits = msgspec.field(default_factory=Limits)
    request_timeout: float = 30.0
    init_timeout: float = 10.0
    #: seconds a connected server may be silent before it is probed (0: never)
    ping_interval: float = 10.0
    #: seconds a probe may go unanswered before the server is ``degraded`` (two in a
    #: row: its connection is ended)
    ping_timeout: float = 10.0
    #: servers that connect at once (spawn, handshake, first listing), restarts
    #: included; the others wait their turn, and their ``init_timeout`` starts with it
    startup_concurrency: int = 4
    #: how merged tool names are formed: ``{prefix}``, ``{server}``, ``{tool}``
    tool_name_template: str = "{prefix}_{tool}"
    #: what a name clash between servers' tools does: ``suffix``, ``hash`` or ``error``
    tool_clash: Literal["suffix", "hash", "error"] = "suffix"
    #: where OAuth tokens and client registrations are kept (``~`` expanded; relative to
    #: the config's directory); ``None``: ``$MCP_SUPERVISOR_AUTH_DIR`` or
    #: ``~/.mcp-supervisor/auth``
    auth_dir: str | None = None
    #: the audit log of tool calls; ``None``: none is written
    audit: AuditSettings | None = None
    #: what ``serve --http`` does as a team's gateway: its callers' OAuth, their policy
    gateway: GatewaySettings | None = None
    #: where OAuth credentials are kept when not in ``auth_dir``: a database processes
    #: and replicas share
    token_store: TokenStoreSettings | None = None


class IdpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The enterprise identity provider of the ``identity_assertion`` grant (``auth.idp``):
    where the user's ID token is exchanged for an ID-JAG (RFC 8693). Its client secret and
    the ID token are read from a file or an environment variable, never written here; a
    public client has no secret."""

    token_endpoint: str
    client_id: str
    client_secret_file: str | None = None
    client_secret_env: str | None = None
    id_token_file: str | None = None
    id_token_env: str | None = None
    #: how the client authenticates at the token endpoint; ``None``: by Basic with its
    #: secret, or — a public client, with no secret — by its ``client_id`` alone (``none``)
    token_endpoint_auth_method: (
        Literal["none", "client_secret_basic", "client_secret_post"] | None
    ) = None


class AuthConfig(msgspec.Struct, frozen=True, kw_only=True):
    """OAuth settings of one remote server (``auth``, or ``oauth`` as Claude Code and
    OpenCode spell it). Everything is optional: without a ``client_id`` the client is
    registered dynamically (RFC 7591), or identified by ``client_metadata_url`` where the
    authorization server accepts URL-based client IDs.

    ``enabled=False`` (written ``"auth": false``) turns OAuth off for a server that
    authenticates with static headers. ``repr()`` masks ``client_secret``.
    """

    enabled: bool = True
    grant: Literal[
        "authorization_code", "client_credentials", "identity_assertion", "workload_identity"
    ] = "authorization_code"
    client_id: str | None = None
    #: the client's secret: written in the config, or read while it loads from
    #: ``client_secret_file`` (relative to the config's directory) or the environment
    #: variable ``client_secret_env``, which are kept to say where it came from
    client_secret: str | None = None
    client_secret_file: str | None = None
    client_secret_env: str | None = None
    #: scopes to request; empty means "what the server's challenge or metadata asks"
    scopes: tuple[str, ...] = ()
    #: where the authorization server sends the browser back: an http loopback URL
    redirect_uri: str | None = None
    #: the loopback port of the callback server, when ``redirect_uri`` is not given
    callback_port: int | None = None
    token_endpoint_auth_method: (
        Literal["none", "client_secret_basic", "client_secret_post"] | None
    ) = None
    #: Claude Code's field, read and checked but not used: metadata is always discovered
    auth_server_metadata_url: str | None = None
    #: ``client_name`` sent at dynamic client registration
    client_name: str | None = None
    #: a URL-based client ID (client ID metadata document), used when advertised
    client_metadata_url: str | None = None
    #: client credentials with a private-key JWT (RFC 7523): the PEM key's file
    private_key_file: str | None = None
    signing_algorithm: str | None = None
    #: which account's tokens: two accounts on one server are stored apart
    account: str | None = None
    #: a team gateway's callers' calls go with their own tokens: ``"login"`` (each logs
    #: in as themselves), ``"token_exchange"`` (each one's token to the gateway traded
    #: for one of theirs, RFC 8693), ``None`` (the server's own login for everyone). The
    #: catalog is read with the server's own (``grant``, ``account``).
    per_user: Literal["login", "token_exchange"] | None = None
    #: the authorization server's issuer, for the machine grants (else discovered)
    issuer: str | None = None
    idp: IdpConfig | None = None
    #: DPoP (RFC 9449): tokens bound to a key of the client's, each request proving it
    dpop: bool = False
    #: the ``workload_identity`` grant's JWT (SEP-1933: RFC 7523's jwt-bearer grant with
    #: the workload's own token): the file a platform writes and rotates (relative to the
    #: config's directory), or the environment variable holding it; read at each token
    #: request, never here
    assertion_file: str | None = None
    assertion_env: str | None = None

    def __repr__(self) -> str:
        return _masked_repr(self, {"client_secret"})


class IncludedFile(msgspec.Struct, frozen=True, kw_only=True):
    """A file a server's entry pulls in, read while the config was loaded: its ``envFile``
    or its ``faults`` plan. What it holds decides what the server runs as much as the
    config does (an ``envFile`` can set ``PYTHONPATH``), so trusting a config file covers
    its included files too (the CLI's ``./.mcp.json``)."""

    #: where the config names it, e.g. ``mcpServers.calc.envFile``
    field: str
    #: the file as the config names it (``.env``), and as it was opened (absolute)
    name: str
    path: Path
    #: the SHA-256 of the bytes read; ``None``: the file could not be read (it is missing)
    sha256: str | None


class Resources(msgspec.Struct, frozen=True, kw_only=True):
    """A local server's resource bounds (its ``resources``), each ``None`` when not set,
    applied to its whole process family on Linux (:mod:`supervisor.transports._bounds`):
    ``memory`` bytes of resident memory (RSS) summed over the family, ``processes`` in
    the family (both watched: over either, the family is killed and the server restarted),
    ``open_files`` and ``cpu_seconds`` per process (the kernel's ``RLIMIT_NOFILE`` and
    ``RLIMIT_CPU``)."""

    memory: int | None = None
    processes: int | None = None
    open_files: int | None = None
    cpu_seconds: int | None = None

    @property
    def watched(self) -> bool:
        """Whether a bound needs the family watched (``memory`` or ``processes``)."""
        return self.memory is not None or self.processes is not None


class SandboxConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A local server's sandbox (VS Code's ``sandboxEnabled`` with its ``sandbox``): on
    Linux it runs under bubblewrap (:mod:`supervisor.transports._sandbox`), the
    filesystem read-only but for ``allow_write`` and a private ``/tmp``, ``deny_read``
    hidden, ``deny_write`` read-only even inside ``allow_write``; no network, unless
    ``allowed_domains`` names some (``*.example.com`` for subdomains): then HTTP and
    HTTPS to those, through a proxy the supervisor runs, ``denied_domains`` winning.
    Paths are absolute (expanded, resolved against the config's directory)."""

    allow_write: tuple[Path, ...] = ()
    deny_read: tuple[Path, ...] = ()
    deny_write: tuple[Path, ...] = ()
    allowed_domains: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One configured MCP server, normalised: defaults applied, variables expanded.

    A server whose ``errors`` is not empty is *invalid*: a variable it needs is not set
    (or similar), and fields that could not be expanded still hold their ``${...}`` text.
    Never start an invalid server; report its ``error`` instead.

    ``remote_fallback`` (``type: remote``, or a ``url`` without a ``type``) means: Streamable
    HTTP, falling back to legacy SSE when the first POST is answered with a 4xx.
    ``protocol`` pins the protocol era its connections speak: ``"auto"`` (the default)
    asks for 2026-07-28 (``server/discover``) and falls back to the ``initialize``
    handshake; ``"2025-11-25"`` (or ``"legacy"`` in the file) goes straight to the handshake,
    offering 2025-11-25 (the server may answer an earlier version), whatever
    ``open_supervisor(mode=...)`` says.
    ``max_attempts`` is how many restarts (local) or reconnections (remote) are tried, with
    ``backoff`` between them, before the server is marked failed; 0 means never. It is
    the one field for what the config says with ``restartOnCrash`` and ``maxRestarts``
    (local) or ``reconnect`` (remote); ``restart_on_crash`` is ``max_attempts > 0``.
    ``approve`` and ``auto_approve`` are ``True`` (every tool), a tuple of tool names or
    globs, or ``None`` when not set. ``faults`` is a :class:`~supervisor.config._plan.Plan` to
    inject into the server's connection (docs/faults.md), or ``None``. A ``memory`` server
    (:func:`~supervisor.open_supervisor`'s ``apps``) has its server object in ``app``
    and neither ``command`` nor ``url``. ``repr()`` masks
    ``env`` and ``headers`` values and anything else that looks secret.
    """

    name: str
    #: where the server was defined, e.g. ``mcpServers.github``
    path: str
    type: ServerType
    remote_fallback: bool = False
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: MappingProxyType({}))
    cwd: Path | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=lambda: MappingProxyType({}))
    auth: AuthConfig | None = None
    #: the protocol era its connections speak (see above)
    protocol: Literal["auto", "2025-11-25"] = "auto"
    prefix: str = ""
    description: str | None = None
    disabled: bool = False
    lazy: bool = True
    #: the gateway is not ready (``/readyz`` answers 503) while this server is down:
    #: failed, stopped, waiting for a login, lost (reconnecting) or unverified
    required: bool = False
    #: seconds one request may take (JSON ``timeout`` / ``timeoutMs``)
    timeout: float = 30.0
    init_timeout: float = 10.0
    #: seconds a connected server may be silent before it is probed; 0 disables probes
    ping_interval: float = 10.0
    #: calls in a row that time out before the server is ``degraded`` and probed at once
    degraded_after: int = 3
    backoff: Backoff = msgspec.field(default_factory=_local_backoff)
    max_attempts: int = 5
    #: OTP restart type: permanent (default), transient (not after a clean exit),
    #: temporary (never restarted)
    restart: Restart = Restart.PERMANENT
    #: what running out of ``max_attempts`` does: mark this server failed, or make the
    #: whole supervisor give up
    give_up: GiveUp = GiveUp.MARK_UNAVAILABLE
    #: seconds a stopping server gets to finish before it is stopped by force
    shutdown_timeout: float = 10.0
    #: tool calls in flight at the server at most (``maxConcurrentCalls``; ``None``: no
    #: bound of its own); the others wait their turn within their deadline
    max_concurrent_calls: int | None = None
    #: the library's rate limit on its tool calls (``rateLimit``, ``"10/s"``; ``None``:
    #: none), as written: :func:`supervisor.tools._limits.parse_rate` reads it
    rate_limit: str | None = None
    approve: ToolPolicy | None = None
    auto_approve: ToolPolicy | None = None
    #: the fault plan injected into this server's connection (``faults``; testing only)
    faults: Plan | None = None
    #: a local server's resource bounds (``resources``), or ``None``: unbounded
    resources: Resources | None = None
    #: a local server's sandbox (``sandboxEnabled``: true, with ``sandbox``), or ``None``
    sandbox: SandboxConfig | None = None
    #: the in-process MCP server object of a ``memory`` server (``open_supervisor(apps=...)``)
    app: object | None = None
    #: the files read for this entry while loading (its ``envFile``, its ``faults`` plan)
    included: tuple[IncludedFile, ...] = ()
    #: what ``${NAME}`` references to variables whose name looks secret expanded to,
    #: wherever they are (``args``, ``env``, ``url``...): secrets (:meth:`secrets`)
    secret_values: tuple[str, ...] = ()
    errors: tuple[FieldError, ...] = ()

    @property
    def valid(self) -> bool:
        """Whether the server can be started (it has no errors)."""
        return not self.errors

    @property
    def error(self) -> str | None:
        """The errors as one message, one per line, or ``None`` for a valid server."""
        return "\n".join(map(str, self.errors)) if self.errors else None

    @property
    def restart_on_crash(self) -> bool:
        """Whether the server is restarted (reconnected) at all: ``max_attempts > 0``."""
        return self.max_attempts > 0

    def secrets(self) -> list[str]:
        """The values of this server that are treated as secrets (see :meth:`Config.secrets`)."""
        found: list[str] = []
        for value in self.headers.values():  # "Bearer xyz": the whole value, and "xyz"
            found += [value, *(w for w in value.split() if len(w) >= 8)]
        found += [v for k, v in self.env.items() if _secretish(k)]
        found += _secret_args(self.args)
        found += self.secret_values
        for value in (*self.env.values(), *self.args):
            found += _url_passwords(value)
        if self.url is not None:
            found += [v for k, v in _query(self.url) if _secretish(k)]
        if self.auth is not None and self.auth.client_secret:
            found.append(self.auth.client_secret)
        return [s for s in dict.fromkeys(found) if s]

    def __repr__(self) -> str:
        return _masked_repr(self, {"env", "headers", "secret_values"}, self.secret_values)


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded config: the servers in file order, the supervisor settings, and where the
    config came from (``path`` is ``None`` for a mapping). ``project_root`` is what
    ``${PROJECT_ROOT}`` expanded to."""

    servers: dict[str, ServerConfig]
    settings: Settings
    path: Path | None
    project_root: Path

    @property
    def included(self) -> tuple[IncludedFile, ...]:
        """Every file the servers' entries pulled in while loading, in file order
        (:attr:`ServerConfig.included`)."""
        return tuple(f for server in self.servers.values() for f in server.included)

    @property
    def invalid(self) -> dict[str, tuple[FieldError, ...]]:
        """The servers that cannot be started, by name, with their errors."""
        return {name: s.errors for name, s in self.servers.items() if s.errors}

    def secrets(self) -> list[str]:
        """Every value in this config treated as a secret, without duplicates.

        That is: every header value; every ``env`` value (including those read from an
        ``envFile``) whose name looks secret (it contains TOKEN, KEY, SECRET, PASSWORD,
        PASS, AUTH, CREDENTIAL, PRIVATE, COOKIE or SESSION, or is PAT); values of URL query
        parameters with such names; command-line arguments given to an option with such a
        name (``--api-key X``, ``--token=X``); what a ``${NAME}`` with such a name expanded
        to, wherever it is (:attr:`ServerConfig.secret_values`); the password of a URL's
        user-info in an ``env`` value or an argument (``postgres://me:PASSWORD@db/app``);
        and OAuth client secrets. Nothing else: a path or a setting (``HOME``,
        ``GIT_BASE_DIR``, ``--db /srv/shop.db``) is no secret, however long.
        :func:`~supervisor.open_supervisor` holds them all for redaction while it runs
        (:func:`supervisor.log.redacting`); loading registers none.
        """
        found: list[str] = []
        for server in self.servers.values():
            found += server.secrets()
        return list(dict.fromkeys(found))
