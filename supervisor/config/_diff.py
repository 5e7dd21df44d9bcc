"""Comparing two configs: what a reconfiguration has to do, server by server.

:func:`compare` tells, for a running config and a new one, which servers are **added**,
**removed**, **replaced** (what runs, or how it is reached, changed: a new incarnation
must take over) and **changed in place** (a policy or a setting of how it is supervised:
nothing needs restarting) — by name, each with the fields that made it so — and which
``supervisor`` settings change: those applied to what comes next (new decisions, new
requests, new connections), and those that take a restart of the supervisor.

Every field of a server and of the settings is classified here, once
(:data:`REPLACING`, :data:`IN_PLACE`, :data:`BOOKKEEPING`, :data:`LIVE_SETTINGS`,
:data:`RESTART_SETTINGS`): a field added to the model without a class fails the tests
that hold this module to the model, rather than being compared as nothing.
"""

from __future__ import annotations

import msgspec

from ._model import Config, ServerConfig, Settings

__all__ = ["ConfigChange", "compare"]

#: What runs or how it is reached: a change replaces the server. (``env`` holds what an
#: ``envFile`` said, so a changed file that changes a variable replaces it too.)
REPLACING: frozenset[str] = frozenset(
    {
        "type",
        "remote_fallback",
        "command",
        "args",
        "env",
        "cwd",
        "inherit_env",
        "url",
        "headers",
        "auth",
        "protocol",  # the era its connections speak
        "app",
        "faults",  # its fault engine lives as long as the server
        "resources",  # its bounds are set when its process starts
        "sandbox",  # what its process may use is set when it starts
    }
)
#: Policy, and how it is supervised: applied in place, nothing restarted.
IN_PLACE: frozenset[str] = frozenset(
    {
        "prefix",
        "description",
        "disabled",
        "lazy",
        "required",
        "timeout",
        "init_timeout",
        "ping_interval",
        "degraded_after",
        "backoff",
        "max_attempts",
        "restart",
        "give_up",
        "shutdown_timeout",
        "max_concurrent_calls",  # the next call waits for the new bound
        "rate_limit",  # a new bucket, full, for the next call
        "approve",
        "auto_approve",
    }
)
#: Where an entry came from and what loading found: compared through what they made
#: (``included`` files through ``env`` and ``faults``, secrets through their fields).
BOOKKEEPING: frozenset[str] = frozenset({"name", "path", "included", "secret_values", "errors"})

#: ``supervisor`` settings applied to what comes next: the tree's new decisions, the next
#: request or connection, the next listing. (The server defaults among them reach the
#: servers through their own fields, compared above.)
LIVE_SETTINGS: frozenset[str] = frozenset(
    {
        "strategy",
        "intensity",
        "local_backoff",
        "local_max_attempts",
        "remote_backoff",
        "remote_max_attempts",
        "limits",
        "request_timeout",
        "init_timeout",
        "ping_interval",
        "ping_timeout",
        "startup_concurrency",
        "tool_name_template",
        "tool_clash",
        "audit",
        "gateway",
    }
)
#: Settings a running supervisor cannot take: where credentials are kept.
RESTART_SETTINGS: frozenset[str] = frozenset({"auth_dir", "token_store"})


class ConfigChange(msgspec.Struct, frozen=True, kw_only=True):
    """What applying a new config to a running one takes (see :func:`compare`).

    ``replaced`` and ``changed`` map each server's name to the fields that differ;
    ``settings`` and ``needs_restart`` name the ``supervisor`` settings that differ
    (the model's field names). Servers are named in the new config's order (removed
    ones in the old one's).
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    changed: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    settings: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether there is nothing to do."""
        return not (
            self.added
            or self.removed
            or self.replaced
            or self.changed
            or self.settings
            or self.needs_restart
        )


def _differ(old: msgspec.Struct, new: msgspec.Struct, names: frozenset[str]) -> tuple[str, ...]:
    """The fields among ``names`` whose values differ, in the model's order."""
    return tuple(
        f for f in old.__struct_fields__ if f in names and getattr(old, f) != getattr(new, f)
    )


def compare(old: Config, new: Config) -> ConfigChange:
    """What taking ``new`` in place of the running ``old`` takes, server by server (by
    name) and setting by setting; see the module's docstring."""
    replaced: dict[str, tuple[str, ...]] = {}
    changed: dict[str, tuple[str, ...]] = {}
    for name, server in new.servers.items():
        before: ServerConfig | None = old.servers.get(name)
        if before is None:
            continue
        if fields := _differ(before, server, REPLACING):
            replaced[name] = fields
        elif fields := _differ(before, server, IN_PLACE):
            changed[name] = fields
    settings: Settings = new.settings
    return ConfigChange(
        added=tuple(n for n in new.servers if n not in old.servers),
        removed=tuple(n for n in old.servers if n not in new.servers),
        replaced=replaced,
        changed=changed,
        settings=_differ(old.settings, settings, LIVE_SETTINGS),
        needs_restart=_differ(old.settings, settings, RESTART_SETTINGS),
    )
