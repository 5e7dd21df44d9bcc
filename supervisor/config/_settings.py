"""The ``supervisor`` section, and the backoff fields it shares with a server's ``reconnect``.

:func:`_parse_settings` validates the section field by field into :class:`Settings`;
fields not given keep the defaults of :class:`Settings`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs
import msgspec

from ..actors import Backoff, Intensity, Strategy
from ._gateway import _parse_gateway, _parse_token_store
from ._model import AuditSettings, Limits, Settings
from ._validate import (
    _as_fields,
    _Bad,
    _bool,
    _choice,
    _Errors,
    _fraction,
    _int,
    _join,
    _nonempty,
    _number,
    _parse_object,
    _seconds,
    _str,
)

_BACKOFF_FIELDS: dict[str, Callable[[object], object]] = {
    "initial": lambda v: _number(v, inclusive=True),
    "max": lambda v: _number(v, inclusive=True),
    "multiplier": lambda v: _number(v, minimum=1.0, inclusive=True),
    "jitter": lambda v: _fraction(v),
    "stableAfter": lambda v: _number(v, inclusive=True),
    "maxAttempts": lambda v: _int(v),
}


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
    "maxServers": "max_servers",
    "maxToolsPerServer": "max_tools_per_server",
    "maxCatalogBytes": "max_catalog_bytes",
    "maxMessageBytes": "max_message_bytes",
    "maxListPages": "max_list_pages",
    "maxDescriptionBytes": "max_description_bytes",
    "maxSchemaBytes": "max_schema_bytes",
    "maxInlineImages": "max_inline_images",
    "maxImageBytes": "max_image_bytes",
    "maxStructuredPreviewBytes": "max_structured_preview_bytes",
    "maxPreviewBytes": "max_preview_bytes",
    "maxPreviewLines": "max_preview_lines",
    "maxSpillFiles": "max_spill_files",
    "maxSpillBytes": "max_spill_bytes",
}
# Limits that may be 0 (keep no image inline); every other one is at least 1.
_ZERO_ALLOWED = frozenset({"maxInlineImages"})
_STRATEGIES = {s.value: s for s in Strategy}


def _id(value: object) -> object:
    """A parser that accepts anything: the field is an object parsed on its own later."""
    return value


def _parse_settings(errors: _Errors, value: object, path: str) -> Settings:
    parsers: dict[str, Callable[[object], object]] = {
        "strategy": lambda v: _STRATEGIES[_choice(v, list(_STRATEGIES))],
        "intensity": _id,
        "backoff": _id,
        "limits": _id,
        "requestTimeout": _seconds,
        "initTimeout": _seconds,
        "pingInterval": lambda v: _number(v, inclusive=True),
        "pingTimeout": _seconds,
        "startupConcurrency": lambda v: _int(v, minimum=1),
        "toolNames": _id,
        "authDir": _nonempty,
        "audit": _id,
        "gateway": _id,
        "tokenStore": _id,
    }
    fields = _parse_object(errors, value, path, parsers)
    if fields is None:
        return Settings()
    settings = Settings()
    changes: dict[str, object] = {}
    for key, name in (
        ("strategy", "strategy"),
        ("requestTimeout", "request_timeout"),
        ("initTimeout", "init_timeout"),
        ("pingInterval", "ping_interval"),
        ("pingTimeout", "ping_timeout"),
        ("startupConcurrency", "startup_concurrency"),
        ("authDir", "auth_dir"),
    ):
        if key in fields:
            changes[name] = fields[key]
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
            # Either field alone takes the other from OTP's defaults (3 within 5 s).
            parsed = _as_fields(got)
            changes["intensity"] = Intensity(
                max_restarts=parsed.get("maxRestarts", Intensity().max_restarts),
                within_seconds=parsed.get("withinSeconds", Intensity().within_seconds),
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
            errors,
            fields["limits"],
            p,
            {k: lambda v, k=k: _int(v, minimum=0 if k in _ZERO_ALLOWED else 1) for k in _LIMITS},
        )
        if got:
            changes["limits"] = Limits(**_as_fields({_LIMITS[k]: v for k, v in got.items()}))
    if "audit" in fields:
        changes["audit"] = _audit(errors, fields["audit"], _join(path, "audit"))
    if "tokenStore" in fields:
        changes["token_store"] = _parse_token_store(
            errors, fields["tokenStore"], _join(path, "tokenStore")
        )
    if "gateway" in fields:
        changes["gateway"] = _parse_gateway(errors, fields["gateway"], _join(path, "gateway"))
    if "toolNames" in fields:
        p = _join(path, "toolNames")
        got = _parse_object(
            errors,
            fields["toolNames"],
            p,
            {"template": _template, "clash": lambda v: _choice(v, _CLASHES)},
        )
        if got:
            if "template" in got:
                changes["tool_name_template"] = got["template"]
            if "clash" in got:
                changes["tool_clash"] = got["clash"]
    return msgspec.structs.replace(settings, **changes)


def _audit(errors: _Errors, value: object, path: str) -> AuditSettings | None:
    """The ``audit`` object: ``path`` is required; the rest keep their defaults."""
    got = _parse_object(
        errors,
        value,
        path,
        {
            "path": _nonempty,
            "includeArguments": _bool,
            "maxBytes": lambda v: _int(v),
            "backups": lambda v: _int(v, minimum=1),
        },
    )
    if got is None:
        return None
    if "path" not in got:
        if not any(e.path == _join(path, "path") for e in errors.items):
            errors.add(_join(path, "path"), "is required: the file the audit log is written to")
        return None
    names = {"includeArguments": "include_arguments", "maxBytes": "max_bytes"}
    return AuditSettings(**_as_fields({names.get(k, k): v for k, v in got.items()}))


_CLASHES = ("suffix", "hash", "error")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def _template(value: object) -> str:
    """A tool name template: text with ``{tool}`` once and optionally ``{prefix}`` or
    ``{server}``; nothing else in braces."""
    text = _str(value)
    names = _PLACEHOLDER.findall(text)
    unknown = [n for n in names if n not in ("prefix", "server", "tool")]
    if unknown:
        raise _Bad(
            f"has an unknown placeholder {{{unknown[0]}}}; use {{prefix}}, {{server}} and {{tool}}"
        )
    if names.count("tool") != 1:
        raise _Bad("must contain {tool} exactly once")
    rest = _PLACEHOLDER.sub("", text)
    if "{" in rest or "}" in rest:
        raise _Bad("has an unbalanced brace")
    return text
