"""Config: one JSON file (or mapping) describing the MCP servers and the supervisor (DESIGN §6).

:func:`load_config` reads the file, validates every field in one pass, expands ``${VAR}``
references and returns a frozen :class:`Config`. The formats other tools write are read as
they are, detected by their top-level key:

- ``mcpServers`` — Claude Code (``.mcp.json``), Cursor (``.cursor/mcp.json``), Claude
  Desktop and most clients;
- ``mcp`` — OpenCode (``opencode.json``): ``type: local|remote``, ``command`` as an array,
  ``environment``, ``enabled``, ``timeout`` in milliseconds; also the nested
  ``mcp.servers`` form (OpenCode v2, VS Code ``settings.json``);
- ``servers`` — VS Code (``.vscode/mcp.json``), whose top-level ``inputs`` are ignored;

plus our own ``supervisor`` section. Several server sections in one file are merged; a
name defined twice is an error naming both places.

Two kinds of problem are told apart:

- **structural** ones (unknown fields, wrong types, bad values, malformed ``${...}``) make
  :func:`load_config` raise :class:`~supervisor.errors.ConfigError` listing all of them;
- **environmental** ones (an environment variable that is not set, a VS Code
  ``${input:...}``, an ``envFile`` that cannot be read, a URL that only turns bad once
  expanded) make *that server* invalid: it is still in :attr:`Config.servers`, with
  :attr:`ServerConfig.errors` saying why, and the other servers are unaffected.

No error message ever contains the value of a variable, an ``env`` entry or a header.
Values that look secret are registered with :func:`supervisor.log.register_secret`, so logs
never show them, and ``repr()`` of a config masks them (see :meth:`Config.secrets`).

docs/config.md describes every field.
"""

from __future__ import annotations

import difflib
import enum
import json
import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Literal, TypeAlias
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import attrs
import msgspec

from .actors import Backoff, Intensity, Strategy
from .errors import ConfigError, FieldError
from .log import register_secret

__all__ = [
    "DEFAULT_MAX_CONFIG_BYTES",
    "AuthConfig",
    "Config",
    "ConfigError",
    "FieldError",
    "Limits",
    "ServerConfig",
    "ServerType",
    "Settings",
    "load_config",
]

#: The size limit a config file is checked against before it is parsed (256 KiB).
DEFAULT_MAX_CONFIG_BYTES = 262_144

_SERVER_SECTIONS = ("mcpServers", "mcp", "servers")
_TOP_LEVEL = (*_SERVER_SECTIONS, "supervisor")
_IGNORED_TOP_LEVEL = ("$schema", "inputs")
#: Timeouts in seconds above this look like milliseconds copied from another tool.
_MAX_TIMEOUT_SECONDS = 3600.0

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


# -- value types --------------------------------------------------------------------------


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Size limits that protect the supervisor from oversized input (bytes or counts)."""

    #: largest config file read; see :func:`load_config` for when a change takes effect
    max_config_bytes: int = DEFAULT_MAX_CONFIG_BYTES
    #: most tools one server may list
    max_tools_per_server: int = 1000
    #: largest tool catalog (tools, resources, prompts as JSON) one server may list
    max_catalog_bytes: int = 2_097_152
    #: largest single JSON-RPC message accepted from a server
    max_message_bytes: int = 16_777_216


def _local_backoff() -> Backoff:
    return Backoff(initial=1.0, maximum=30.0, multiplier=2.0, jitter=0.0, stable_after=30.0)


def _remote_backoff() -> Backoff:
    return Backoff(initial=1.0, maximum=60.0, multiplier=2.0, jitter=0.0, stable_after=30.0)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The ``supervisor`` section: tree-wide policy and the defaults servers inherit.

    Times are in seconds; a ``ping_interval`` of 0 disables periodic pings.
    """

    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: Intensity = msgspec.field(default_factory=Intensity)
    #: delays between restarts of a local (stdio) server, and how many are tried
    local_backoff: Backoff = msgspec.field(default_factory=_local_backoff)
    local_max_attempts: int = 5
    #: delays between reconnections to a remote (http, sse, ws) server, and how many
    remote_backoff: Backoff = msgspec.field(default_factory=_remote_backoff)
    remote_max_attempts: int = 10
    limits: Limits = msgspec.field(default_factory=Limits)
    request_timeout: float = 30.0
    init_timeout: float = 10.0
    ping_interval: float = 300.0
    ping_timeout: float = 10.0


class AuthConfig(msgspec.Struct, frozen=True, kw_only=True):
    """OAuth settings of one remote server (``auth``, or ``oauth`` as Claude Code and
    OpenCode spell it). Everything is optional: without a ``client_id`` the client is
    registered dynamically (RFC 7591).

    ``enabled=False`` (written ``"auth": false``) turns OAuth off for a server that
    authenticates with static headers. ``repr()`` masks ``client_secret``.
    """

    enabled: bool = True
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = None
    #: scopes to request; empty means "what the server's metadata advertises"
    scopes: tuple[str, ...] = ()
    #: where the authorization server sends the browser back: an http loopback URL
    redirect_uri: str | None = None
    #: the loopback port of the callback server, when ``redirect_uri`` is not given
    callback_port: int | None = None
    token_endpoint_auth_method: (
        Literal["none", "client_secret_basic", "client_secret_post"] | None
    ) = None
    #: skip discovery and read the authorization server's metadata from here
    auth_server_metadata_url: str | None = None
    #: ``client_name`` sent at dynamic client registration
    client_name: str | None = None

    def __repr__(self) -> str:
        return _masked_repr(self, {"client_secret"})


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One configured MCP server, normalised: defaults applied, variables expanded.

    A server whose ``errors`` is not empty is *invalid*: a variable it needs is not set
    (or similar), and fields that could not be expanded still hold their ``${...}`` text.
    Never start an invalid server; report its ``error`` instead.

    ``remote_fallback`` (``type: remote``, or a ``url`` without a ``type``) means: Streamable
    HTTP, falling back to legacy SSE when the first POST is answered with a 4xx.
    ``max_attempts`` is how many restarts (local) or reconnections (remote) are tried, with
    ``backoff`` between them, before the server is marked failed; 0 means never.
    ``approve`` and ``auto_approve`` are ``True`` (every tool), a tuple of tool names or
    globs, or ``None`` when not set. ``repr()`` masks ``env`` and ``headers`` values and
    anything else that looks secret.
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
    prefix: str = ""
    description: str | None = None
    disabled: bool = False
    lazy: bool = True
    #: seconds one request may take (JSON ``timeout`` / ``timeoutMs``)
    timeout: float = 30.0
    init_timeout: float = 10.0
    #: seconds between pings of an idle connection; 0 disables them
    ping_interval: float = 300.0
    backoff: Backoff = msgspec.field(default_factory=_local_backoff)
    max_attempts: int = 5
    approve: ToolPolicy | None = None
    auto_approve: ToolPolicy | None = None
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

    @property
    def is_remote(self) -> bool:
        """Whether the server is reached over the network (http, sse or ws)."""
        return self.type is not ServerType.STDIO

    def secrets(self) -> list[str]:
        """The values of this server that are treated as secrets (see :meth:`Config.secrets`)."""
        found: list[str] = []
        for value in self.headers.values():  # "Bearer xyz": the whole value, and "xyz"
            found += [value, *(w for w in value.split() if len(w) >= 8)]
        found += [v for k, v in self.env.items() if len(v) >= 8 or _secretish(k)]
        found += _secret_args(self.args)
        if self.url is not None:
            found += [v for k, v in _query(self.url) if _secretish(k)]
        if self.auth is not None and self.auth.client_secret:
            found.append(self.auth.client_secret)
        return [s for s in dict.fromkeys(found) if s]

    def __repr__(self) -> str:
        return _masked_repr(self, {"env", "headers"})


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded config: the servers in file order, the supervisor settings, and where the
    config came from (``path`` is ``None`` for a mapping). ``project_root`` is what
    ``${PROJECT_ROOT}`` expanded to."""

    servers: dict[str, ServerConfig]
    settings: Settings
    path: Path | None
    project_root: Path

    @property
    def invalid(self) -> dict[str, tuple[FieldError, ...]]:
        """The servers that cannot be started, by name, with their errors."""
        return {name: s.errors for name, s in self.servers.items() if s.errors}

    def secrets(self) -> list[str]:
        """Every value in this config treated as a secret, without duplicates.

        That is: every header value; every ``env`` value (including those read from an
        ``envFile``) that is at least 8 characters long or whose name looks secret (it
        contains TOKEN, KEY, SECRET, PASSWORD, PASS, AUTH, CREDENTIAL, PRIVATE, COOKIE or
        SESSION, or is PAT); values of URL query parameters with such names; command-line
        arguments given to an option with such a name (``--api-key X``, ``--token=X``); and
        OAuth client secrets. :func:`load_config` registers them all for redaction.
        """
        found: list[str] = []
        for server in self.servers.values():
            found += server.secrets()
        return list(dict.fromkeys(found))


# -- loading ------------------------------------------------------------------------------


def load_config(
    source: str | os.PathLike[str] | Mapping[str, object],
    *,
    environ: Mapping[str, str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    max_config_bytes: int | None = None,
) -> Config:
    """Load, validate and normalise a config: a JSON file's path, or the parsed mapping.

    ``${VAR}`` references are expanded from ``environ`` (default :data:`os.environ`);
    ``${PROJECT_ROOT}`` is ``project_root``, by default the config file's directory (the
    current directory for a mapping). Relative ``cwd`` and ``envFile`` paths are resolved
    against the config file's directory (``project_root`` for a mapping). The file may use
    comments and trailing commas (JSONC), as VS Code and OpenCode allow.

    The file's size is checked *before* it is parsed, against ``max_config_bytes``
    (default :data:`DEFAULT_MAX_CONFIG_BYTES`, 256 KiB), so the file's own
    ``supervisor.limits.maxConfigBytes`` cannot raise the limit for itself; a smaller
    value there is enforced after parsing. To read a larger file, pass the limit here
    (for instance a reload passing the running config's ``settings.limits``).

    Raises :class:`ConfigError` for a missing, unreadable, oversized or malformed file and
    for every structural error, all listed at once. A server that is invalid only because
    of its environment (an unset variable, say) does not raise: see
    :attr:`ServerConfig.errors`. Every value :meth:`Config.secrets` lists is registered
    with :func:`supervisor.log.register_secret` before this returns.
    """
    env = os.environ if environ is None else environ
    limit = DEFAULT_MAX_CONFIG_BYTES if max_config_bytes is None else max_config_bytes
    size: int | None = None
    if isinstance(source, Mapping):
        path: Path | None = None
        base = Path(project_root if project_root is not None else os.getcwd()).absolute()
        root_label = "<config>"
        document: object = source
    elif isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source)).absolute()
        base = path.parent
        root_label = os.fspath(source)
        document, size = _read_document(path, root_label, limit)
    else:
        raise TypeError(f"load_config() takes a path or a mapping, not {type(source).__name__}")
    root = Path(project_root).absolute() if project_root is not None else base

    errors = _Errors()
    settings, drafts = _Document(errors, root_label).parse(document)
    if (
        size is not None
        and _sets_config_limit(document)
        and size > settings.limits.max_config_bytes
    ):
        errors.add(
            "supervisor.limits.maxConfigBytes",
            f"the file is {size} bytes, more than this limit of "
            f"{settings.limits.max_config_bytes} bytes",
        )
    if errors.items:
        raise ConfigError(errors.items, path=None if path is None else root_label)

    expander = _Expander(env, root, _workspace_folder(path, root))
    servers = {d.name: d.build(settings, expander, base, limit) for d in drafts}
    config = Config(servers=servers, settings=settings, path=path, project_root=root)
    for secret in config.secrets():
        register_secret(secret)
    return config


def _sets_config_limit(document: object) -> bool:
    supervisor = document.get("supervisor") if isinstance(document, Mapping) else None
    limits = supervisor.get("limits") if isinstance(supervisor, Mapping) else None
    return isinstance(limits, Mapping) and "maxConfigBytes" in limits


def _read_document(path: Path, label: str, limit: int) -> tuple[object, int]:
    """Read and parse the file, refusing it before parsing if it is larger than ``limit``."""

    def fail(message: str) -> ConfigError:
        return ConfigError([FieldError(label, message)], path=label)

    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise fail(_too_large(size, limit))
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise fail("no such file") from None
    except IsADirectoryError:
        raise fail("is a directory, not a config file") from None
    except OSError as exc:
        raise fail(f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise fail(_too_large(len(data), limit))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text (byte {exc.start})") from None
    try:
        document = json.loads(_strip_jsonc(text), object_pairs_hook=_Object)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    return document, len(data)


def _too_large(size: int, limit: int) -> str:
    return (
        f"the file is {size} bytes, more than the {limit}-byte limit (checked before "
        "parsing, so supervisor.limits.maxConfigBytes in the file cannot raise it)"
    )


class _Object(dict[str, object]):
    """A parsed JSON object that remembers the keys it saw more than once."""

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        super().__init__(pairs)
        counts = Counter(key for key, _ in pairs)
        self.duplicates = [key for key, n in counts.items() if n > 1]


_COMMENTS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMAS = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=\s*[}\]])')


def _strip_jsonc(text: str) -> str:
    """Blank out comments, then trailing commas, keeping every line and column in place."""

    def blank(m: re.Match[str]) -> str:
        s = m.group()
        if s.startswith('"'):
            return s
        if s == ",":
            before = m.start() - 1
            while before >= 0 and m.string[before].isspace():
                before -= 1
            if before < 0 or m.string[before] in "{[,":
                return s  # not a trailing comma: leave the error to the JSON parser
        return re.sub(r"[^\n]", " ", s)

    return _TRAILING_COMMAS.sub(blank, _COMMENTS.sub(blank, text))


def _workspace_folder(path: Path | None, root: Path) -> Path:
    """``${workspaceFolder}``: the project root, or its parent for ``.vscode/``, ``.cursor/``."""
    if path is not None and root == path.parent and root.name in (".vscode", ".cursor"):
        return root.parent
    return root


# -- structural validation ----------------------------------------------------------------


class _Errors:
    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))


class _Bad(Exception):
    """A value is unusable; the message says why (never quoting the value)."""


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.$-]+\Z")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    part = key if _PLAIN_KEY.match(key) else json.dumps(key)
    return f"{path}.{part}" if path else part


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _want(value: object, kind: type | tuple[type, ...], noun: str) -> None:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _Bad(f"must be {noun}, not a boolean")
    if not isinstance(value, kind):
        raise _Bad(f"must be {noun}, not {_kind(value)}")


def _str(value: object) -> str:
    _want(value, str, "a string")
    assert isinstance(value, str)
    return value


def _bool(value: object) -> bool:
    _want(value, bool, "true or false")
    assert isinstance(value, bool)
    return value


def _number(value: object, *, minimum: float = 0.0, inclusive: bool = False) -> float:
    _want(value, int | float, "a number")
    assert isinstance(value, int | float)
    number = float(value)
    if not math.isfinite(number):
        raise _Bad("must be a finite number")
    if number < minimum or (number == minimum and not inclusive):
        raise _Bad(f"must be {'at least' if inclusive else 'greater than'} {minimum:g}")
    return number


def _int(value: object, *, minimum: int = 0) -> int:
    _want(value, int, "a whole number")
    assert isinstance(value, int)
    if value < minimum:
        raise _Bad(f"must be at least {minimum}")
    return value


def _seconds(value: object) -> float:
    seconds = _number(value)
    if seconds > _MAX_TIMEOUT_SECONDS:
        raise _Bad(
            f"is in seconds and {seconds:g} s is more than an hour; for milliseconds use timeoutMs"
        )
    return seconds


def _choice(value: object, choices: Sequence[str]) -> str:
    text = _str(value)
    if text not in choices:
        raise _Bad("must be one of " + ", ".join(json.dumps(c) for c in choices))
    return text


def _object(value: object, noun: str = "an object") -> Mapping[str, object]:
    _want(value, Mapping, noun)
    assert isinstance(value, Mapping)
    return value


def _fields(
    errors: _Errors, value: Mapping[str, object], path: str
) -> Iterator[tuple[str, object, str]]:
    """Each (key, value, path) of an object; reports keys given twice in the JSON."""
    for key in getattr(value, "duplicates", ()):
        errors.add(_join(path, key), "given more than once")
    for key, item in value.items():
        if not isinstance(key, str):
            errors.add(path, f"keys must be strings, not {_kind(key)}")
            continue
        yield key, item, _join(path, key)


def _parse_object(
    errors: _Errors,
    value: object,
    path: str,
    parsers: Mapping[str, Callable[[object], object]],
) -> dict[str, object] | None:
    """Parse a small settings object field by field; unknown keys are errors."""
    try:
        mapping = _object(value)
    except _Bad as exc:
        errors.add(path, str(exc))
        return None
    out: dict[str, object] = {}
    for key, item, p in _fields(errors, mapping, path):
        parse = parsers.get(key)
        if parse is None:
            errors.add(p, "unknown field")
            continue
        try:
            out[key] = parse(item)
        except _Bad as exc:
            errors.add(p, str(exc))
    return out


_BACKOFF_FIELDS: dict[str, Callable[[object], object]] = {
    "initial": lambda v: _number(v, inclusive=True),
    "max": lambda v: _number(v, inclusive=True),
    "multiplier": lambda v: _number(v, minimum=1.0, inclusive=True),
    "jitter": lambda v: _fraction(v),
    "stableAfter": lambda v: _number(v, inclusive=True),
    "maxAttempts": lambda v: _int(v),
}


def _fraction(value: object) -> float:
    number = _number(value, inclusive=True)
    if number > 1:
        raise _Bad("must be between 0 and 1")
    return number


def _backoff(
    errors: _Errors, fields: Mapping[str, object], base: Backoff, attempts: int, path: str
) -> tuple[Backoff, int]:
    """``base`` and ``attempts`` with the given backoff fields applied."""
    changes = {
        name: fields[key]
        for key, name in (
            ("initial", "initial"),
            ("max", "maximum"),
            ("multiplier", "multiplier"),
            ("jitter", "jitter"),
            ("stableAfter", "stable_after"),
        )
        if key in fields
    }
    backoff = attrs.evolve(base, **changes)
    if backoff.maximum < backoff.initial:
        errors.add(path, "max must be at least initial")
        backoff = attrs.evolve(backoff, maximum=backoff.initial)
    max_attempts = fields.get("maxAttempts", attempts)
    assert isinstance(max_attempts, int)
    return backoff, max_attempts


_LIMITS = {
    "maxConfigBytes": "max_config_bytes",
    "maxToolsPerServer": "max_tools_per_server",
    "maxCatalogBytes": "max_catalog_bytes",
    "maxMessageBytes": "max_message_bytes",
}
_STRATEGIES = {s.value: s for s in Strategy}


def _parse_settings(errors: _Errors, value: object, path: str) -> Settings:
    parsers: dict[str, Callable[[object], object]] = {
        "strategy": lambda v: _STRATEGIES[_choice(v, list(_STRATEGIES))],
        "intensity": lambda v: v,
        "backoff": lambda v: v,
        "limits": lambda v: v,
        "requestTimeout": _seconds,
        "initTimeout": _seconds,
        "pingInterval": lambda v: _number(v, inclusive=True),
        "pingTimeout": _seconds,
    }
    fields = _parse_object(errors, value, path, parsers)
    if fields is None:
        return Settings()
    settings = Settings()
    changes: dict[str, object] = {}
    if "strategy" in fields:
        changes["strategy"] = fields["strategy"]
    for key, name in (
        ("requestTimeout", "request_timeout"),
        ("initTimeout", "init_timeout"),
        ("pingTimeout", "ping_timeout"),
    ):
        if key in fields:
            changes[name] = fields[key]
    if "pingInterval" in fields:
        changes["ping_interval"] = fields["pingInterval"]
    if "intensity" in fields:
        p = _join(path, "intensity")
        got = _parse_object(
            errors,
            fields["intensity"],
            p,
            {
                "maxRestarts": lambda v: _int(v),
                "withinSeconds": lambda v: _number(v),
            },
        )
        if got:
            changes["intensity"] = Intensity(
                max_restarts=got.get("maxRestarts", settings.intensity.max_restarts),  # type: ignore[arg-type]
                within_seconds=got.get("withinSeconds", settings.intensity.within_seconds),  # type: ignore[arg-type]
            )
    if "backoff" in fields:
        p = _join(path, "backoff")
        kinds = _parse_object(errors, fields["backoff"], p, {"local": _id, "remote": _id})
        for kind, (base, attempts) in {
            "local": (settings.local_backoff, settings.local_max_attempts),
            "remote": (settings.remote_backoff, settings.remote_max_attempts),
        }.items():
            if kinds and kind in kinds:
                kp = _join(p, kind)
                got = _parse_object(errors, kinds[kind], kp, _BACKOFF_FIELDS)
                if got is not None:
                    b, n = _backoff(errors, got, base, attempts, kp)
                    changes[f"{kind}_backoff"] = b
                    changes[f"{kind}_max_attempts"] = n
    if "limits" in fields:
        p = _join(path, "limits")
        got = _parse_object(
            errors, fields["limits"], p, {k: lambda v: _int(v, minimum=1) for k in _LIMITS}
        )
        if got:
            changes["limits"] = Limits(**{_LIMITS[k]: v for k, v in got.items()})  # type: ignore[arg-type]
    return msgspec.structs.replace(settings, **changes)


def _id(value: object) -> object:
    return value


class _Document:
    """The top level: find the server sections and the ``supervisor`` section."""

    def __init__(self, errors: _Errors, label: str) -> None:
        self.errors = errors
        self.label = label

    def parse(self, document: object) -> tuple[Settings, list[_Draft]]:
        errors = self.errors
        if not isinstance(document, Mapping):
            errors.add(self.label, f"must be a JSON object, not {_kind(document)}")
            return Settings(), []
        settings = Settings()
        if "supervisor" in document:
            settings = _parse_settings(errors, document["supervisor"], "supervisor")
        foreign_app_config = "mcp" in document  # opencode.json, VS Code settings.json
        for key, _, p in _fields(errors, document, ""):
            if key in _TOP_LEVEL or key in _IGNORED_TOP_LEVEL:
                continue
            close = difflib.get_close_matches(key, _TOP_LEVEL, n=1, cutoff=0.75)
            if close:
                errors.add(p, f'unknown top-level key; did you mean "{close[0]}"?')
            elif not foreign_app_config:
                errors.add(
                    p,
                    'unknown top-level key; expected "mcpServers", "mcp", "servers" '
                    'or "supervisor"',
                )
        if not any(key in document for key in _SERVER_SECTIONS):
            errors.add(
                self.label,
                'no MCP servers: expected a top-level "mcpServers", "mcp" or "servers" object',
            )
        if "inputs" in document and not isinstance(document["inputs"], list | tuple):
            errors.add("inputs", f"must be an array, not {_kind(document['inputs'])}")

        drafts: list[_Draft] = []
        defined: dict[str, str] = {}
        for section in (k for k in document if k in _SERVER_SECTIONS):
            for name, raw, p, style in self._entries(document[section], section):
                if name in defined:
                    errors.add(p, f'server "{name}" is also defined at {defined[name]}')
                    continue
                defined[name] = p
                draft = _Draft.parse(errors, settings, style, name, raw, p)
                if draft is not None:
                    drafts.append(draft)
        return settings, drafts

    def _entries(self, value: object, section: str) -> Iterator[tuple[str, object, str, str]]:
        errors = self.errors
        if not isinstance(value, Mapping):
            errors.add(
                section,
                f"must be an object mapping server names to their settings, not {_kind(value)}",
            )
            return
        path = section
        if section == "mcp" and _is_nested(value):
            # OpenCode v2 and VS Code settings.json: {"mcp": {"servers": {...}}}
            for key, item, p in _fields(errors, value, section):
                if key == "inputs":
                    if not isinstance(item, list | tuple):
                        errors.add(p, f"must be an array, not {_kind(item)}")
                elif key != "servers":
                    errors.add(p, "unknown field")
            value = value["servers"]
            path = _join(section, "servers")
            assert isinstance(value, Mapping)
        for name, raw, p in _fields(errors, value, path):
            yield name, raw, p, section


def _is_nested(value: Mapping[str, object]) -> bool:
    servers = value.get("servers")
    return isinstance(servers, Mapping) and not any(
        k in servers for k in ("type", "command", "url")
    )


# -- one server -----------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_PREFIX = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63})?\Z")
_ENV_NAME = re.compile(r"[^=\x00]+\Z")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_TYPES: dict[str, tuple[ServerType, bool]] = {
    "stdio": (ServerType.STDIO, False),
    "local": (ServerType.STDIO, False),
    "http": (ServerType.HTTP, False),
    "streamable-http": (ServerType.HTTP, False),
    "streamableHttp": (ServerType.HTTP, False),
    "sse": (ServerType.SSE, False),
    "ws": (ServerType.WS, False),
    "websocket": (ServerType.WS, False),
    "remote": (ServerType.HTTP, True),
}
_GRANTS = ("authorization_code", "client_credentials")
_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")

#: Fields other clients define that we do not support, and what to do instead.
_FOREIGN_FIELDS = {
    "headersHelper": "not supported (a Claude Code command that prints headers); put the "
    'headers in "headers", using ${VAR} for secrets',
    "dev": "not supported (VS Code's development mode: watch and debug); remove it",
    "sandboxEnabled": "not supported (VS Code's sandbox for local servers); remove it",
    "sandbox": "not supported (VS Code's sandbox for local servers); remove it",
    "transportType": 'not supported; use "type"',
    "transport": 'not supported; use "type"',
}

#: JSON key -> the draft attribute it sets (aliases share an attribute).
_SERVER_KEYS = {
    "type": "type",
    "command": "command",
    "args": "args",
    "env": "env",
    "environment": "env",
    "envFile": "env_file",
    "cwd": "cwd",
    "inheritEnv": "inherit_env",
    "url": "url",
    "headers": "headers",
    "auth": "auth",
    "oauth": "auth",
    "prefix": "prefix",
    "description": "description",
    "disabled": "disabled",
    "enabled": "disabled",
    "lazy": "lazy",
    "timeout": "timeout",
    "timeoutMs": "timeout",
    "initTimeout": "init_timeout",
    "restartOnCrash": "restart_on_crash",
    "maxRestarts": "max_restarts",
    "reconnect": "reconnect",
    "pingInterval": "ping_interval",
    "approve": "approve",
    "autoApprove": "auto_approve",
}
_LOCAL_ONLY = ("args", "env", "env_file", "cwd", "inherit_env", "restart_on_crash", "max_restarts")
_REMOTE_ONLY = ("headers", "auth", "reconnect")
#: Fields whose strings are templates: ``${VAR}`` expands there and nowhere else.
_TEMPLATES = ("command", "args", "env", "env_file", "cwd", "url", "headers")


class _Draft:
    """A server's fields after structural validation, before expansion."""

    def __init__(self, name: str, path: str, style: str) -> None:
        self.name = name
        self.path = path
        self.style = style
        self.values: dict[str, object] = {}
        self.keys: dict[str, str] = {}  # attribute -> the JSON key it came from
        self.type = ServerType.STDIO
        self.remote_fallback = False
        self.backoff = Backoff()
        self.max_attempts = 0

    def key_path(self, attribute: str) -> str:
        return _join(self.path, self.keys.get(attribute, attribute))

    @classmethod
    def parse(
        cls, errors: _Errors, settings: Settings, style: str, name: str, raw: object, path: str
    ) -> _Draft | None:
        if not _NAME.match(name):
            errors.add(
                path,
                "invalid server name: use 1-64 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit",
            )
        try:
            fields = _object(raw, "an object")
        except _Bad as exc:
            errors.add(path, str(exc))
            return None
        draft = cls(name, path, style)
        for key, value, p in _fields(errors, fields, path):
            attribute = _SERVER_KEYS.get(key)
            if attribute is None:
                errors.add(p, _FOREIGN_FIELDS.get(key, "unknown field"))
                continue
            if attribute in draft.keys:
                errors.add(p, f'duplicates "{draft.keys[attribute]}"; set only one of them')
                continue
            draft.keys[attribute] = key
            try:
                draft._set(key, attribute, value, p, errors)
            except _Bad as exc:
                errors.add(p, str(exc))
        draft._check(errors)
        draft._restarts(errors, settings)
        return draft

    def _set(self, key: str, attribute: str, value: object, path: str, errors: _Errors) -> None:
        v = self.values
        if key == "type":
            type_name = _str(value)
            if type_name not in _TYPES:
                raise _Bad(
                    'must be one of "stdio" (or "local"), "http" (or "streamable-http"), '
                    '"sse", "ws" or "remote"'
                )
            v["type"] = type_name
        elif key == "command":
            if isinstance(value, list | tuple):  # OpenCode: the whole command line as an array
                if not value:
                    raise _Bad("must not be empty")
                words = _str_list(errors, value, path)
                if len(words) == len(value):
                    v["command"], v["command_args"] = _nonempty(words[0]), words[1:]
            else:
                _want(value, str, "a string or an array of strings")
                v["command"] = _nonempty(_str(value))
        elif key == "args":
            _want(value, list | tuple, "an array of strings")
            v["args"] = _str_list(errors, value, path)  # type: ignore[arg-type]
        elif attribute in ("env", "headers"):
            v[attribute] = _str_map(errors, value, path, attribute)
        elif key in ("envFile", "cwd", "url"):
            v[attribute] = _nonempty(_str(value))
        elif key in ("inheritEnv", "disabled", "lazy", "restartOnCrash"):
            v[attribute] = _bool(value)
        elif key == "enabled":
            v["disabled"] = not _bool(value)
        elif key == "prefix":
            prefix = _str(value)
            if not _PREFIX.match(prefix):
                raise _Bad(
                    "must be empty or 1-64 letters, digits, '_', '-' or '.', "
                    "starting with a letter or digit"
                )
            v["prefix"] = prefix
        elif key == "description":
            v["description"] = _str(value)
        elif key == "timeout" and self.style == "mcp":
            self._opencode_timeout(value, path, errors)
        elif key == "timeout":
            v["timeout"] = _seconds(value)
        elif key == "timeoutMs":
            v["timeout"] = _number(value) / 1000
        elif key == "initTimeout":
            v["init_timeout"] = _seconds(value)
        elif key == "maxRestarts":
            v["max_restarts"] = _int(value)
        elif key == "pingInterval":
            v["ping_interval"] = _number(value, inclusive=True)
        elif key == "reconnect":
            if isinstance(value, bool):
                v["reconnect"] = value
            else:
                _want(value, Mapping, "true, false or an object")
                v["reconnect"] = _parse_object(errors, value, path, _BACKOFF_FIELDS) or {}
        elif key in ("approve", "autoApprove"):
            v[attribute] = _tool_policy(errors, value, path)
        elif attribute == "auth":
            v["auth"] = _parse_auth(errors, value, path)

    def _opencode_timeout(self, value: object, path: str, errors: _Errors) -> None:
        """OpenCode's ``timeout``: milliseconds, or ``{"startup": ms, "request": ms}``."""
        if isinstance(value, Mapping):
            got = _parse_object(errors, value, path, {"startup": _number, "request": _number})
            if got and "startup" in got:
                if "init_timeout" in self.keys:
                    errors.add(_join(path, "startup"), 'duplicates "initTimeout"')
                else:
                    self.keys["init_timeout"] = "timeout.startup"
                    self.values["init_timeout"] = float(got["startup"]) / 1000  # type: ignore[arg-type]
            if got and "request" in got:
                self.values["timeout"] = float(got["request"]) / 1000  # type: ignore[arg-type]
        else:
            _want(value, int | float, "a number of milliseconds or an object")
            self.values["timeout"] = _number(value) / 1000

    def _check(self, errors: _Errors) -> None:
        """Rules between fields, skipping those that involve a field already reported."""
        v = self.values
        has_command, has_url = "command" in self.keys, "url" in self.keys
        if has_command and has_url:
            errors.add(
                self.path,
                'has both "command" and "url"; a server is either local (command) or remote (url)',
            )
            return
        if not has_command and not has_url:
            errors.add(
                self.path, 'needs either "command" (a local server) or "url" (a remote server)'
            )
            return
        if any(a in self.keys and a not in v for a in ("type", "command", "url")):
            return  # already reported
        if "type" in v:
            type_name = v["type"]
            assert isinstance(type_name, str)
            self.type, self.remote_fallback = _TYPES[type_name]
            if self.type is ServerType.STDIO and not has_command:
                errors.add(self.key_path("type"), f'"{type_name}" needs "command", not "url"')
                return
            if self.type is not ServerType.STDIO and not has_url:
                errors.add(self.key_path("type"), f'"{type_name}" needs "url", not "command"')
                return
        elif has_command:
            self.type = ServerType.STDIO
        else:
            url = v["url"]
            assert isinstance(url, str)
            ws = url.lower().startswith(("ws://", "wss://"))
            self.type = ServerType.WS if ws else ServerType.HTTP
            self.remote_fallback = not ws
        if self.type is ServerType.STDIO:
            for attribute in _REMOTE_ONLY:
                if attribute in self.keys:
                    hint = (
                        "; for a local server use restartOnCrash and maxRestarts"
                        if attribute == "reconnect"
                        else ""
                    )
                    errors.add(self.key_path(attribute), f"applies to remote servers only{hint}")
        else:
            for attribute in _LOCAL_ONLY:
                if attribute in self.keys:
                    hint = (
                        "; for a remote server use reconnect"
                        if attribute in ("restart_on_crash", "max_restarts")
                        else ""
                    )
                    errors.add(
                        self.key_path(attribute),
                        f"applies to local (stdio) servers only{hint}",
                    )
        if self.type is ServerType.WS and "auth" in self.keys:
            errors.add(
                self.key_path("auth"),
                'OAuth is not available for WebSocket servers; send credentials in "headers"',
            )
        if v.get("restart_on_crash") is False and v.get("max_restarts", 0) != 0:
            errors.add(self.key_path("max_restarts"), "has no effect with restartOnCrash: false")
        for attribute in _TEMPLATES:
            for path, template in self._templates(attribute):
                try:
                    _parse_template(template, self.style == "mcp")
                except _Bad as exc:
                    errors.add(path, str(exc))
        url = v.get("url")
        if isinstance(url, str) and _is_literal(url, self.style == "mcp"):
            problem = _url_problem(url, self.type)
            if problem:
                errors.add(self.key_path("url"), problem)

    def _restarts(self, errors: _Errors, settings: Settings) -> None:
        """The backoff and attempts: the type's defaults, then this server's fields."""
        v = self.values
        if self.type is ServerType.STDIO:
            self.backoff, self.max_attempts = settings.local_backoff, settings.local_max_attempts
            max_restarts = v.get("max_restarts", self.max_attempts)
            assert isinstance(max_restarts, int)
            self.max_attempts = 0 if v.get("restart_on_crash") is False else max_restarts
            return
        self.backoff, self.max_attempts = settings.remote_backoff, settings.remote_max_attempts
        reconnect = v.get("reconnect", True)
        if reconnect is False:
            self.max_attempts = 0
        elif isinstance(reconnect, dict):
            self.backoff, self.max_attempts = _backoff(
                errors, reconnect, self.backoff, self.max_attempts, self.key_path("reconnect")
            )

    def _templates(self, attribute: str) -> Iterator[tuple[str, str]]:
        """(path, template) of each string in a field where ``${VAR}`` expands."""
        value = self.values.get(attribute)
        path = self.key_path(attribute)
        if attribute == "command":
            if isinstance(value, str):
                yield (_join(path, 0) if "command_args" in self.values else path), value
            for i, word in enumerate(self.values.get("command_args", ()), 1):  # type: ignore[arg-type]
                yield _join(path, i), word
        elif isinstance(value, str):
            yield path, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield _join(path, i), item
        elif isinstance(value, dict):
            for key, item in value.items():
                yield _join(path, key), item

    # -- expansion and normalisation ---------------------------------------------------

    def build(
        self, settings: Settings, expander: _Expander, base: Path, limit: int
    ) -> ServerConfig:
        v = self.values
        problems: list[FieldError] = []

        def expand(attribute: str) -> list[str]:
            opencode = self.style == "mcp"
            return [
                expander.expand(t, p, problems, opencode) for p, t in self._templates(attribute)
            ]

        def expanded(attribute: str) -> str | None:
            """The one string of a field, or ``None`` if absent or not expandable."""
            if attribute not in v:
                return None
            before = len(problems)
            (text,) = expand(attribute)
            return text if len(problems) == before else None

        command_words = expand("command")
        args = tuple(command_words[1:] + expand("args"))
        env: dict[str, str] = {}
        env_file = expanded("env_file")
        if env_file is not None:
            env_file_path = self.key_path("env_file")
            env.update(_read_env_file(base / env_file, env_file_path, limit, problems))
        env.update(zip(_keys(v.get("env")), expand("env"), strict=True))
        headers = dict(zip(_keys(v.get("headers")), expand("headers"), strict=True))
        for name, value in headers.items():
            if any(c in value for c in "\r\n\x00"):
                problem = "header value contains a line break or NUL"
                problems.append(FieldError(_join(self.key_path("headers"), name), problem))
        cwd = expanded("cwd")
        if cwd is None and "cwd" in v:
            cwd = str(v["cwd"])  # not expandable: keep the template
        url = expanded("url")
        if url is not None:
            problem = _url_problem(url, self.type)
            if problem:
                problems.append(FieldError(self.key_path("url"), problem))
        elif "url" in v:
            url = str(v["url"])

        return ServerConfig(
            name=self.name,
            path=self.path,
            type=self.type,
            remote_fallback=self.remote_fallback,
            command=command_words[0] if command_words else None,
            args=args,
            env=MappingProxyType(env),
            cwd=None if cwd is None else base / cwd,
            inherit_env=bool(v.get("inherit_env", False)),
            url=url,
            headers=MappingProxyType(headers),
            auth=v.get("auth"),  # type: ignore[arg-type]
            prefix=str(v.get("prefix", self.name)),
            description=v.get("description"),  # type: ignore[arg-type]
            disabled=bool(v.get("disabled", False)),
            lazy=bool(v.get("lazy", True)),
            timeout=float(v.get("timeout", settings.request_timeout)),  # type: ignore[arg-type]
            init_timeout=float(v.get("init_timeout", settings.init_timeout)),  # type: ignore[arg-type]
            ping_interval=float(v.get("ping_interval", settings.ping_interval)),  # type: ignore[arg-type]
            backoff=self.backoff,
            max_attempts=self.max_attempts,
            approve=v.get("approve"),  # type: ignore[arg-type]
            auto_approve=v.get("auto_approve"),  # type: ignore[arg-type]
            errors=tuple(problems),
        )


def _keys(value: object) -> list[str]:
    return list(value) if isinstance(value, dict) else []


def _nonempty(text: str) -> str:
    if not text.strip():
        raise _Bad("must not be empty")
    return text


def _str_list(errors: _Errors, value: Sequence[object], path: str) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            out.append(item)
        else:
            errors.add(_join(path, i), f"must be a string, not {_kind(item)}")
    return out


def _str_map(errors: _Errors, value: object, path: str, what: str) -> dict[str, str]:
    mapping = _object(value, "an object of strings")
    out: dict[str, str] = {}
    for key, item, p in _fields(errors, mapping, path):
        if what == "env" and not _ENV_NAME.match(key):
            errors.add(p, "invalid environment variable name")
        elif what == "headers" and not _HEADER_NAME.match(key):
            errors.add(p, "invalid header name")
        elif isinstance(item, str):
            out[key] = item
        elif what == "env" and isinstance(item, int | float) and not isinstance(item, bool):
            out[key] = str(item)  # VS Code allows numbers in env
        else:
            errors.add(p, f"must be a string, not {_kind(item)}")
    return out


def _tool_policy(errors: _Errors, value: object, path: str) -> ToolPolicy:
    if isinstance(value, bool):
        return value
    _want(value, list | tuple, "true, false or an array of tool names")
    assert isinstance(value, list | tuple)
    names = _str_list(errors, value, path)
    for i, name in enumerate(names):
        if not name.strip():
            errors.add(_join(path, i), "must not be empty")
    return tuple(names)


def _scopes(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    _want(value, list | tuple, "a string or an array of strings")
    assert isinstance(value, list | tuple)
    for item in value:
        if not isinstance(item, str) or not item or any(c.isspace() for c in item):
            raise _Bad("must be scopes without spaces")
    return tuple(value)


def _loopback_http(value: object) -> str:
    url = _str(value)
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise _Bad("must be an http:// URL on a loopback host (127.0.0.1, localhost or [::1])")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise _Bad("has an invalid port") from None
    return url


def _metadata_url(value: object) -> str:
    url = _str(value)
    parts = urlsplit(url)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
        raise _Bad("must be an https:// URL")
    return url


_AUTH_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "grant": ("grant", lambda v: _choice(v, _GRANTS)),
    "clientId": ("client_id", lambda v: _nonempty(_str(v))),
    "CLIENT_ID": ("client_id", lambda v: _nonempty(_str(v))),  # Cursor
    "client_id": ("client_id", lambda v: _nonempty(_str(v))),  # OpenCode v2
    "clientSecret": ("client_secret", lambda v: _nonempty(_str(v))),
    "CLIENT_SECRET": ("client_secret", lambda v: _nonempty(_str(v))),
    "client_secret": ("client_secret", lambda v: _nonempty(_str(v))),
    "scopes": ("scopes", _scopes),
    "scope": ("scopes", _scopes),  # OpenCode
    "redirectUri": ("redirect_uri", _loopback_http),
    "callbackPort": ("callback_port", lambda v: _port(v)),
    "tokenEndpointAuthMethod": (
        "token_endpoint_auth_method",
        lambda v: _choice(v, _AUTH_METHODS),
    ),
    "authServerMetadataUrl": ("auth_server_metadata_url", _metadata_url),
    "clientName": ("client_name", lambda v: _nonempty(_str(v))),
}


def _port(value: object) -> int:
    port = _int(value, minimum=1)
    if port > 65535:
        raise _Bad("must be a port number, 1-65535")
    return port


def _parse_auth(errors: _Errors, value: object, path: str) -> AuthConfig | None:
    if isinstance(value, bool):
        return AuthConfig(enabled=value)
    mapping = _object(value, "true, false or an object")
    got: dict[str, object] = {}
    given: dict[str, str] = {}
    for key, item, p in _fields(errors, mapping, path):
        spec = _AUTH_KEYS.get(key)
        if spec is None:
            errors.add(p, "unknown field")
            continue
        attribute, parse = spec
        if attribute in given:
            errors.add(p, f'duplicates "{given[attribute]}"; set only one of them')
            continue
        given[attribute] = key
        if isinstance(item, str) and ("${" in item or "{env:" in item):
            errors.add(
                p,
                "${...} is not expanded here (only in command, args, env, envFile, cwd, url "
                "and headers)",
            )
            continue
        try:
            got[attribute] = parse(item)
        except _Bad as exc:
            errors.add(p, str(exc))
    auth = AuthConfig(**got)  # type: ignore[arg-type]
    if auth.grant == "client_credentials" and not (auth.client_id and auth.client_secret):
        errors.add(path, "the client_credentials grant needs clientId and clientSecret")
    if auth.redirect_uri and auth.callback_port:
        port = urlsplit(auth.redirect_uri).port
        if port is not None and port != auth.callback_port:
            errors.add(_join(path, given["callback_port"]), "does not match redirectUri's port")
    return auth


def _url_problem(url: str, type_: ServerType) -> str | None:
    """Why ``url`` cannot be used for a server of this type, or ``None``. Never quotes it."""
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "URL contains whitespace or control characters"
    parts = urlsplit(url)
    schemes = ("ws", "wss") if type_ is ServerType.WS else ("http", "https")
    if parts.scheme.lower() not in schemes:
        return f"URL must start with {schemes[0]}:// or {schemes[1]}://"
    if "@" in parts.netloc:
        return (
            "credentials in the URL are refused (they would end up in logs and process "
            'listings); send them in "headers" (e.g. Authorization) or configure "auth"'
        )
    if not parts.hostname:
        return "URL has no host"
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        return "URL has an invalid port"
    return None


# -- expansion ------------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
#: OpenCode's own syntax, read in the ``mcp`` section: ``{env:NAME}`` (and ``{file:...}``).
_OPENCODE_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{|\{env:([^{}]*)\}|\{file:[^{}]*\}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BUILTINS = ("PROJECT_ROOT", "workspaceFolder", "userHome")


class _Var(msgspec.Struct, frozen=True):
    name: str
    default: str | None = None
    builtin: bool = False
    input: bool = False


def _parse_template(template: str, opencode: bool = False) -> list[str | _Var]:
    """Split a template into literal text and variable references; ``_Bad`` if malformed.

    ``opencode`` also reads OpenCode's ``{env:NAME}``.
    """
    parts: list[str | _Var] = []
    end = 0
    for m in (_OPENCODE_REFERENCE if opencode else _REFERENCE).finditer(template):
        parts.append(template[end : m.start()])
        end = m.end()
        if m.group() == "$${":
            parts.append("${")
            continue
        if m.group().startswith("{file:"):
            raise _Bad("OpenCode's {file:...} is not supported; use ${NAME} instead")
        if m.group().startswith("{env:"):
            parts.append(_parse_reference("env:" + m.group(2)))
            continue
        inner = m.group(1)
        if inner is None:
            raise _Bad("unterminated or nested ${...}; write $${ for a literal ${")
        parts.append(_parse_reference(inner))
    parts.append(template[end:])
    return [p for p in parts if p != ""]


def _parse_reference(inner: str) -> _Var:
    if inner.startswith("input:"):
        return _Var(inner[len("input:") :], input=True)
    namespaced = inner.startswith("env:")
    if namespaced:
        inner = inner[len("env:") :]
    name, sep, default = inner.partition(":-")
    if not _VARIABLE.match(name):
        raise _Bad(
            "unsupported ${...}: use ${NAME}, ${NAME:-default}, ${env:NAME}, "
            "${PROJECT_ROOT}, ${workspaceFolder} or ${userHome}"
        )
    builtin = not namespaced and name in _BUILTINS
    return _Var(name, default if sep else None, builtin=builtin)


def _is_literal(template: str, opencode: bool) -> bool:
    """Whether a (well-formed) template contains no variable references."""
    try:
        return all(isinstance(part, str) for part in _parse_template(template, opencode))
    except _Bad:
        return False


class _Expander:
    def __init__(self, environ: Mapping[str, str], root: Path, workspace: Path) -> None:
        self.environ = environ
        self.builtins = {
            "PROJECT_ROOT": str(root),
            "workspaceFolder": str(workspace),
            "userHome": str(Path.home()),
        }

    def expand(
        self, template: str, path: str, problems: list[FieldError], opencode: bool = False
    ) -> str:
        """``template`` expanded; on a missing variable, a problem is recorded and the
        template is returned unexpanded."""
        out: list[str] = []
        ok = True
        for part in _parse_template(template, opencode):
            if isinstance(part, str):
                out.append(part)
            elif part.input:
                problems.append(
                    FieldError(
                        path,
                        f"VS Code input variable ${{input:{part.name}}} is not supported "
                        "(it is prompted for interactively); set an environment variable "
                        "and write ${NAME} instead",
                    )
                )
                ok = False
            elif part.builtin:
                out.append(self.builtins[part.name])
            else:
                value = self.environ.get(part.name)
                if not value and part.default is not None:
                    value = part.default
                if value is None:
                    problems.append(
                        FieldError(path, f"environment variable {part.name} is not set")
                    )
                    ok = False
                else:
                    out.append(value)
        return "".join(out) if ok else template


def _read_env_file(
    path: Path, field: str, limit: int, problems: list[FieldError]
) -> dict[str, str]:
    """Parse a dotenv file: ``KEY=VALUE`` lines, ``export``, quotes, ``#`` comments.

    Values are taken literally (no ``${...}`` expansion inside the file).
    """
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        problems.append(FieldError(field, "env file not found"))
        return {}
    except OSError as exc:
        problems.append(FieldError(field, f"cannot read env file: {exc.strerror or exc}"))
        return {}
    if len(data) > limit:
        problems.append(FieldError(field, f"env file is larger than {limit} bytes"))
        return {}
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        problems.append(FieldError(field, "env file is not UTF-8 text"))
        return {}
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _VARIABLE.match(key):
            problems.append(FieldError(field, f"env file line {number}: expected NAME=VALUE"))
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            quote, value = value[0], value[1:-1]
            if quote == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        else:
            value = re.sub(r"\s+#.*\Z", "", value)
        env[key] = value
    return env


# -- secrets and display --------------------------------------------------------------------

_SECRET_WORDS = (
    "TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "AUTH", "CREDENTIAL",
    "PRIVATE", "COOKIE", "SESSION",
)  # fmt: skip


def _secretish(name: str) -> bool:
    """Whether a variable, header, option or parameter name suggests a secret value."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper()
    for word in re.split(r"[^A-Z0-9]+", words):
        if word == "PAT" or any(w in word for w in _SECRET_WORDS):
            return True
    return False


def _mask_args(args: Sequence[str]) -> list[str]:
    """``args`` with the values of secret-looking options replaced by ``***``."""
    masked = list(args)
    for i, arg in enumerate(args):
        option, sep, _ = arg.partition("=")
        if not arg.startswith("-") or not _secretish(option.lstrip("-")):
            continue
        if sep:
            masked[i] = f"{option}=***"
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            masked[i + 1] = "***"
    return masked


def _secret_args(args: Sequence[str]) -> list[str]:
    """Values given to secret-looking options: ``--token X`` or ``--api-key=X``."""
    found: list[str] = []
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        option, sep, value = arg.partition("=")
        if not _secretish(option.lstrip("-")):
            continue
        if sep:
            found.append(value)
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            found.append(args[i + 1])
    return found


def _query(url: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(urlsplit(url).query, keep_blank_values=False)
    except ValueError:
        return []


def masked_url(url: str) -> str:
    """``url`` with the values of secret-looking query parameters replaced by ``***``."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = "&".join(
        f"{k}=***" if _secretish(k) and v else (f"{k}={v}" if v else k)
        for k, v in (q.partition("=")[::2] for q in parts.query.split("&"))
    )
    return urlunsplit(parts._replace(query=query))


def command_line(server: ServerConfig) -> str:
    """The server's command line for display, secret-looking arguments masked."""
    words = [shlex.quote(server.command or "")]
    words += [a if a.endswith("***") else shlex.quote(a) for a in _mask_args(server.args)]
    return " ".join(words)


def _masked_repr(struct: msgspec.Struct, masked_fields: set[str]) -> str:
    parts: list[str] = []
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if name in masked_fields and isinstance(value, Mapping):
            value = {k: "***" for k in value}
        elif name in masked_fields and value is not None:
            value = "***"
        elif name == "url" and isinstance(value, str):
            value = masked_url(value)
        elif name == "args":
            value = tuple(_mask_args(value))
        parts.append(f"{name}={value!r}")
    return f"{type(struct).__name__}({', '.join(parts)})"
