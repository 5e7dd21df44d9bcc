"""One server entry, checked field by field and between fields, before any expansion.

Every client's spelling of a field is read (``environment`` for ``env``, ``oauth`` for
``auth``, ``enabled`` for ``disabled``, ``timeoutMs``, OpenCode's ``command`` array and
millisecond ``timeout``); fields other clients define that we do not support are
rejected with what to do instead. The result is a :class:`_Draft`, which
:func:`~._build._build_server` turns into a :class:`~supervisor.config.ServerConfig`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

import msgspec

from ..actors import Backoff, GiveUp, Restart
from ._auth import _parse_auth
from ._expand import _is_literal, _parse_template
from ._faults import check_plan, read_faults
from ._model import AuthConfig, IncludedFile, Resources, ServerType, Settings, ToolPolicy
from ._rates import parse_rate
from ._settings import _BACKOFF_FIELDS, _backoff
from ._validate import (
    _as_fields,
    _Bad,
    _bool,
    _choice,
    _Errors,
    _fields,
    _int,
    _join,
    _kind,
    _nonempty,
    _number,
    _object,
    _parse_object,
    _seconds,
    _str,
    _str_list,
    _unknown_field,
    _url_problem,
    _want,
)

if TYPE_CHECKING:
    from ._plan import Plan

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

#: Fields other clients define that we do not support, and what to do instead.
_FOREIGN_FIELDS = {
    "headersHelper": "not supported (a Claude Code command that prints headers); put the "
    'headers in "headers", using ${VAR} for secrets',
    "dev": "not supported (VS Code's development mode: watch and debug); remove it",
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
    "required": "required",
    "timeout": "timeout",
    "timeoutMs": "timeout",
    "initTimeout": "init_timeout",
    "restartOnCrash": "restart_on_crash",
    "maxRestarts": "max_restarts",
    "reconnect": "reconnect",
    "pingInterval": "ping_interval",
    "degradedAfter": "degraded_after",
    "restart": "restart",
    "giveUp": "give_up",
    "shutdownTimeout": "shutdown_timeout",
    "maxConcurrentCalls": "max_concurrent_calls",
    "rateLimit": "rate_limit",
    "approve": "approve",
    "autoApprove": "auto_approve",
    "faults": "faults",
    "protocol": "protocol",
    "resources": "resources",
    "sandboxEnabled": "sandbox_enabled",
    "sandbox": "sandbox",
}
_LOCAL_ONLY = (
    "args",
    "env",
    "env_file",
    "cwd",
    "inherit_env",
    "restart_on_crash",
    "max_restarts",
    "resources",
    "sandbox_enabled",
    "sandbox",
)
_REMOTE_ONLY = ("headers", "auth", "reconnect")
#: Fields whose strings are templates: ``${VAR}`` expands there and nowhere else.
_TEMPLATES = ("command", "args", "env", "env_file", "cwd", "url", "headers", "sandbox")


class _Draft:
    """A server's fields after structural validation, before expansion."""

    def __init__(
        self, name: str, path: str, style: str, base: str | os.PathLike[str] | None = None
    ) -> None:
        self.name = name
        self.path = path
        self.style = style
        #: where relative paths in the entry start (the config file's directory)
        self.base = base
        self.values: dict[str, object] = {}
        self.keys: dict[str, str] = {}  # attribute -> the JSON key it came from
        self.type = ServerType.STDIO
        self.remote_fallback = False
        self.backoff = Backoff()
        self.max_attempts = 0
        #: the files read for the entry so far (its fault plan's)
        self.included: list[IncludedFile] = []

    def key_path(self, attribute: str) -> str:
        return _join(self.path, self.keys.get(attribute, attribute))

    @classmethod
    def parse(
        cls,
        errors: _Errors,
        settings: Settings,
        style: str,
        name: str,
        raw: object,
        path: str,
        base: str | os.PathLike[str] | None = None,
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
        draft = cls(name, path, style, base)
        for key, value, p in _fields(errors, fields, path):
            attribute = _SERVER_KEYS.get(key)
            if attribute is None:
                errors.add(p, _FOREIGN_FIELDS.get(key) or _unknown_field(key, _SERVER_KEYS))
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
        draft._exchanged_at(errors, settings)
        draft._attempts(errors, settings)
        return draft

    def _set(self, key: str, attribute: str, value: object, path: str, errors: _Errors) -> None:
        v = self.values
        if key == "type":
            type_name = _str(value)
            if type_name == ServerType.MEMORY:
                raise _Bad(
                    '"memory" is not a transport for config files: pass in-process servers '
                    "to open_supervisor(apps={name: server}) instead"
                )
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
                v["command"] = _nonempty(value)
        elif key == "args":
            _want(value, (list, tuple), "an array of strings")
            assert isinstance(value, list | tuple)
            v["args"] = _str_list(errors, value, path)
        elif attribute in ("env", "headers"):
            v[attribute] = _str_map(errors, value, path, attribute)
        elif key in ("envFile", "cwd", "url"):
            v[attribute] = _nonempty(value)
        elif key in ("inheritEnv", "disabled", "lazy", "required", "restartOnCrash"):
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
        elif key == "degradedAfter":
            v["degraded_after"] = _int(value, minimum=1)
        elif key == "restart":
            v["restart"] = Restart(_choice(value, [r.value for r in Restart]))
        elif key == "giveUp":
            v["give_up"] = GiveUp(_choice(value, [g.value for g in GiveUp]))
        elif key == "shutdownTimeout":
            v["shutdown_timeout"] = _number(value, inclusive=True)
        elif key == "maxConcurrentCalls":
            v["max_concurrent_calls"] = _int(value, minimum=1)
        elif key == "rateLimit":
            v["rate_limit"] = _rate(value)
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
        elif key == "protocol":
            era = _choice(value, ["auto", "2025-11-25", "legacy"])
            v["protocol"] = "2025-11-25" if era == "legacy" else era
        elif key == "resources":
            v["resources"] = _resources(errors, value, path)
        elif key == "sandboxEnabled":
            v["sandbox_enabled"] = _bool(value)
        elif key == "sandbox":
            v["sandbox"] = _sandbox(errors, value, path)
        elif key == "faults":
            plan, problems, read = read_faults(value, path, self.base)
            errors.items.extend(problems)
            if read is not None:
                self.included.append(read)
            if plan is not None:
                v["faults"] = plan

    def _opencode_timeout(self, value: object, path: str, errors: _Errors) -> None:
        """OpenCode's ``timeout``: milliseconds, or ``{"startup": ms, "request": ms}``."""
        if isinstance(value, Mapping):
            got = _parse_object(errors, value, path, {"startup": _number, "request": _number})
            if got and "startup" in got:
                if "init_timeout" in self.keys:
                    errors.add(_join(path, "startup"), 'duplicates "initTimeout"')
                else:
                    self.keys["init_timeout"] = "timeout.startup"
                    self.values["init_timeout"] = cast(float, got["startup"]) / 1000  # _number's
            if got and "request" in got:
                self.values["timeout"] = cast(float, got["request"]) / 1000  # _number's
        else:
            _want(value, (int, float), "a number of milliseconds or an object")
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
            for path, template in self.templates(attribute):
                try:
                    _parse_template(template, self.style == "mcp")
                except _Bad as exc:
                    errors.add(path, str(exc))
        url = v.get("url")
        if isinstance(url, str) and _is_literal(url, self.style == "mcp"):
            problem = _url_problem(url, self.type)
            if problem:
                errors.add(self.key_path("url"), problem)
        plan = cast("Plan | None", v.get("faults"))  # as read_faults gave it
        if plan is not None:
            errors.items.extend(check_plan(plan, self.type, self.key_path("faults")))

    def _exchanged_at(self, errors: _Errors, settings: Settings) -> None:
        """A ``"perUser": "token_exchange"`` server's callers' tokens to the team gateway
        are exchanged at the gateway's own authorization server, and go to no other: its
        ``issuer``, if written, is that one; left out, it is made that one (where the
        server's own machine grant is made too, not where the server's metadata says)."""
        auth = self.values.get("auth")
        team = settings.gateway.auth if settings.gateway is not None else None
        if not isinstance(auth, AuthConfig) or auth.per_user != "token_exchange":
            return
        if team is None:
            return
        if auth.issuer is None:
            self.values["auth"] = msgspec.structs.replace(auth, issuer=team.issuer)
        elif auth.issuer.rstrip("/") != team.issuer.rstrip("/"):
            errors.add(
                _join(self.key_path("auth"), "issuer"),
                f"is {auth.issuer}, not the team gateway's authorization server "
                f'{team.issuer} (supervisor.gateway.auth.issuer): with "perUser": '
                '"token_exchange" each caller\'s token to the gateway is exchanged at that '
                'one, and sent to no other; leave "issuer" out',
            )

    def _attempts(self, errors: _Errors, settings: Settings) -> None:
        """The backoff and attempts: the type's defaults, then this server's fields.

        The config's words for how often a server is tried again — ``restartOnCrash``
        and ``maxRestarts`` (local), ``reconnect`` and its ``maxAttempts`` (remote) — are
        read here and nowhere else: from here on there is one, ``max_attempts``."""
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

    def templates(self, attribute: str) -> Iterator[tuple[str, str]]:
        """(path, template) of each string in a field where ``${VAR}`` expands."""
        value = self.values.get(attribute)
        path = self.key_path(attribute)
        if attribute == "command":
            if isinstance(value, str):
                yield (_join(path, 0) if "command_args" in self.values else path), value
            words = cast("list[str]", self.values.get("command_args", ()))  # as _str_list gave
            for i, word in enumerate(words, 1):
                yield _join(path, i), word
        elif attribute == "sandbox" and isinstance(value, dict):
            for key in SANDBOX_PATHS:
                for i, item in enumerate(value.get(key, ())):
                    yield _join(_join(_join(path, "filesystem"), key), i), item
        elif isinstance(value, str):
            yield path, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield _join(path, i), item
        elif isinstance(value, dict):
            for key, item in value.items():
                yield _join(path, key), item


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


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*\Z", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(value: object) -> int:
    """A size in bytes: a whole number, or a number and a unit — ``K``, ``M``, ``G`` or
    ``T``, each 1024 times the one before (``"512M"``, ``"2G"``, ``"1.5GiB"``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value)):
        size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()])
    else:
        raise _Bad('must be a number of bytes or a size such as "512M" or "2G"')
    if size <= 0:
        raise _Bad("must be more than 0 bytes")
    return size


#: ``resources`` keys -> (the :class:`Resources` field, its parser).
_RESOURCE_FIELDS = {
    "memory": ("memory", _size),
    "processes": ("processes", lambda value: _int(value, minimum=1)),
    "openFiles": ("open_files", lambda value: _int(value, minimum=1)),
    "cpuSeconds": ("cpu_seconds", lambda value: _int(value, minimum=1)),
}


def _resources(errors: _Errors, value: object, path: str) -> Resources:
    """A local server's ``resources``: its bounds, each checked (``memory`` a size)."""
    parsers = {key: parse for key, (_, parse) in _RESOURCE_FIELDS.items()}
    got = _parse_object(errors, value, path, parsers) or {}
    return Resources(**_as_fields({_RESOURCE_FIELDS[key][0]: item for key, item in got.items()}))


#: The ``sandbox`` object's paths (in its ``filesystem``) and domains (in its ``network``).
SANDBOX_PATHS = ("allowWrite", "denyRead", "denyWrite")
SANDBOX_DOMAINS = ("allowedDomains", "deniedDomains")
#: A domain of ``network``: a host name or an IP address, or ``*.`` and a host name.
_DOMAIN = re.compile(r"(?:\*\.)?[A-Za-z0-9_](?:[A-Za-z0-9_.:-]*[A-Za-z0-9_])?\Z")


def _sandbox(errors: _Errors, value: object, path: str) -> dict[str, list[str]]:
    """VS Code's ``sandbox``: ``filesystem`` (``allowWrite``, ``denyRead``,
    ``denyWrite``: arrays of paths, templates) and ``network`` (``allowedDomains``,
    ``deniedDomains``: arrays of host names, ``*.example.com`` for its subdomains)."""
    out: dict[str, list[str]] = {}
    sections = {"filesystem": SANDBOX_PATHS, "network": SANDBOX_DOMAINS}
    for section, raw, p in _fields(errors, _object(value), path):
        keys = sections.get(section)
        if keys is None:
            errors.add(p, _unknown_field(section, sections))
            continue
        try:
            fields = _object(raw)
        except _Bad as exc:
            errors.add(p, str(exc))
            continue
        for key, items, q in _fields(errors, fields, p):
            if key not in keys:
                errors.add(q, _unknown_field(key, keys))
                continue
            if not isinstance(items, list | tuple):
                errors.add(q, f"must be an array of strings, not {_kind(items)}")
                continue
            out[key] = _str_list(errors, items, q)
            for i, item in enumerate(out[key]):
                if not item.strip():
                    errors.add(_join(q, i), "must not be empty")
                elif section == "network" and not _DOMAIN.match(item):
                    errors.add(
                        _join(q, i),
                        'must be a host name or an IP address, or a leading "*." and a '
                        'host name for its subdomains ("*.example.com"); no scheme, port or path',
                    )
    return out


def _rate(value: object) -> str:
    """A ``rateLimit``: a rate such as ``"10/s"`` (:func:`~supervisor.tools._limits.parse_rate`)."""
    try:
        return parse_rate(value).text
    except ValueError as exc:
        raise _Bad(str(exc)) from None


def _tool_policy(errors: _Errors, value: object, path: str) -> ToolPolicy:
    if isinstance(value, bool):
        return value
    _want(value, (list, tuple), "true, false or an array of tool names")
    assert isinstance(value, list | tuple)
    names = _str_list(errors, value, path)
    for i, name in enumerate(names):
        if not name.strip():
            errors.add(_join(path, i), "must not be empty")
    return tuple(names)
