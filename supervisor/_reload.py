"""A running supervisor takes a new config: what ``SupervisorHandle.reconfigure`` does.

The new config is loaded and checked whole first; a config that does not load, or that
could not be applied live, is refused (``supervisor.config.rejected``) and nothing
changes. Then it is compared with the running one (:func:`supervisor.config._diff.compare`)
and the difference applied, server by server, as dynamic children of the ``servers``
supervisor (OTP's ``start_child`` / ``terminate_child`` / ``delete_child``, and a
replacement that keeps the child's mailbox):

* **unchanged** servers are not touched (nothing of theirs is even read again);
* **removed** (or newly disabled) servers are withdrawn: their calls fail from then on
  naming the reconfiguration, those in flight finish within their ``shutdownTimeout``,
  then they stop and leave the tree, the catalog and the handle;
* **added** (or newly enabled) servers are made and started as at start-up (lazy or eager);
* **replaced** servers (what runs, or how it is reached, changed) keep their mailbox: the
  running incarnation drains as at shutdown while calls queue, then the new one serves
  them, its counts started over;
* servers **changed in place** (policy only) read their new config from the next call,
  probe or decision; a new prefix renames their tools (``list_changed``);
* ``supervisor`` settings apply to what comes next (the tree's next decision, the next
  call or connection, the next merge); ``authDir`` and ``tokenStore`` need a restart.

None of it is a crash: nothing is counted against a restart intensity. One
reconfiguration runs at a time; the event ``supervisor.config.reloaded`` says what it did.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import trio

from .auth._service import AuthService, uses_oauth
from .config import Config, load_config
from .config._apps import with_apps
from .config._diff import ConfigChange, compare
from .config._faults import check_plan, load_faults, require_injector
from .errors import AuditLogError, ConfigError, FieldError, UnknownServer
from .events import _catalog as events
from .log import RedactionScope, get_logger
from .registry import NamingPolicy
from .registry._live import Offer
from .server._managed import ServerHandle
from .server._startup import StartSlots
from .tools._audit import AuditLog

if TYPE_CHECKING:
    from .actors import Tree
    from .calls._gate import Gate
    from .registry._live import Registry
    from .tools._observer import History
    from .transports._faults import Injector


class Running(Protocol):
    """What a reconfiguration reads and changes of a running supervisor: its
    ``SupervisorHandle`` (the module it is in imports this one)."""

    config: Config
    audit: AuditLog | None
    history: History | None
    _maker: Maker
    _servers: dict[str, ServerHandle]
    _departed: dict[str, str]
    _gate: Gate
    _registry: Registry
    _root: Tree

    @property
    def _tree(self) -> Tree: ...

    def _rebuild_views(self) -> None: ...


log = get_logger("supervisor.runtime")

__all__ = ["Audits", "Maker", "Running", "reconfigure", "with_faults", "with_overrides"]


class Audits:
    """The session's audit log (``supervisor.audit``), which a reconfiguration may swap:
    the new one is opened before anything else changes, the old one closed after."""

    def __init__(self) -> None:
        self._open: AbstractContextManager[AuditLog | None] | None = None
        self.audit: AuditLog | None = None

    def open(self, config: Config) -> AuditLog | None:
        """Open ``config``'s audit log (``None`` without one) and hold it; raises
        :class:`~supervisor.errors.AuditLogError` when it cannot be opened."""
        opened = audit_log(config)
        audit = opened.__enter__()
        self.close()
        self._open, self.audit = opened, audit
        return audit

    def close(self) -> None:
        opened, self._open, self.audit = self._open, None, None
        if opened is not None:
            opened.__exit__(None, None, None)


@contextmanager
def audit_log(config: Config) -> Iterator[AuditLog | None]:
    """The config's audit log (``supervisor.audit``), open for the block; ``None``
    without one."""
    settings = config.settings.audit
    if settings is None:
        yield None
        return
    base = config.path.parent if config.path is not None else None
    with AuditLog.from_settings(settings, base) as audit:
        yield audit


class Maker:
    """What a supervisor makes its servers' handles with, at start-up and when a
    reconfiguration adds or replaces one; and what its configs are completed with (the
    in-process ``apps`` and the ``faults`` plans given to ``open_supervisor``)."""

    def __init__(
        self,
        *,
        publish: Callable[[events.Event], None],
        report: Callable[[Offer], None],
        auth: AuthService,
        client_options: Mapping[str, object],
        retry_idempotent: bool,
        retries: bool,
        start_slots: StartSlots,
        secrets: RedactionScope,
        audits: Audits,
        complete: Callable[[Config], Config],
        injector: Injector | None = None,
    ) -> None:
        self.publish = publish
        self.report = report
        self.auth = auth
        self.client_options = client_options
        self.retry_idempotent = retry_idempotent
        self.retries = retries
        self.start_slots = start_slots
        self.secrets = secrets
        self.audits = audits
        self.complete = complete
        #: what carries out the servers' fault plans (``open_supervisor(injector=...)``)
        self.injector = injector

    def handle(self, cfg: Config, name: str) -> ServerHandle:
        """Server ``name``'s handle under ``cfg`` (its broker already made)."""
        settings, auth = cfg.settings, self.auth
        return ServerHandle(
            cfg.servers[name],
            publish=self.publish,
            client_options=self.client_options,
            limits=settings.limits,
            error=cfg.servers[name].error,
            ping_timeout=settings.ping_timeout,
            retry_idempotent=self.retry_idempotent,
            report=self.report,
            retries=self.retries,
            broker=auth.broker(name),
            start_slots=self.start_slots,
            users=auth.users if auth.users is not None and name in auth.users.servers else None,
            injector=self.injector,
        )


def _enabled(cfg: Config) -> list[str]:
    return [name for name, c in cfg.servers.items() if not c.disabled]


def _load(
    handle: Running, config: Config | Mapping[str, object] | str | os.PathLike[str] | None
) -> Config:
    """The new config, loaded and completed as the running one was; raises ConfigError."""
    if config is None:
        if handle.config.path is None:
            raise ValueError(
                "this supervisor's config was not read from a file: give reconfigure() "
                "the new config (a path, a mapping or a Config)"
            )
        config = handle.config.path
    cfg = config if isinstance(config, Config) else load_config(config)
    return handle._maker.complete(cfg)


def _refusals(old: Config, new: Config, change: ConfigChange) -> list[FieldError]:
    """Why ``new`` cannot be applied live, if it cannot: a server that could not be
    completed (a missing variable) which the running config did not already lack, or a
    ``perUser`` server added or replaced."""
    problems: list[FieldError] = []
    for name, server in new.servers.items():
        if server.disabled or not server.errors:
            continue
        before = old.servers.get(name)
        if before is None or before.errors != server.errors:
            problems += server.errors
    for name in (*change.added, *change.replaced):
        server = new.servers[name]
        if server.disabled or not uses_oauth(server):
            continue
        auth = server.auth
        if auth is not None and auth.per_user:
            problems.append(
                FieldError(
                    f"{server.path}.auth.perUser",
                    "a perUser server cannot be added or changed while the gateway runs "
                    "(its callers' logins are set up when it starts): restart serve",
                )
            )
    return problems


async def reconfigure(
    handle: Running,
    config: Config | Mapping[str, object] | str | os.PathLike[str] | None,
) -> ConfigChange:
    """See :meth:`~supervisor.runtime.SupervisorHandle.reconfigure`."""
    maker = handle._maker
    try:
        try:
            new = _load(handle, config)
        except UnicodeError as exc:  # a file that is not text
            raise ConfigError([FieldError("", f"cannot read the config: {exc}")]) from None
        old = handle.config
        change = compare(old, new)
        problems = _refusals(old, new, change)
        if problems:
            raise ConfigError(problems, path=None if new.path is None else str(new.path))
        if "audit" in change.settings:
            try:
                audit = maker.audits.open(new)
            except AuditLogError as exc:
                raise ConfigError([FieldError("supervisor.audit", str(exc))]) from None
            handle.audit = audit
            handle._gate.observers = tuple(o for o in (handle.history, audit) if o is not None)
    except ConfigError as exc:
        maker.publish(events.ConfigRejected(errors=[str(e) for e in exc.errors]))
        log.error(
            "new config refused; the running one is kept", errors=[str(e) for e in exc.errors]
        )
        raise
    await _apply(handle, old, new, change)
    maker.publish(
        events.ConfigReloaded(
            added=list(change.added),
            removed=list(change.removed),
            replaced=list(change.replaced),
            changed=list(change.changed),
            needs_restart=list(change.needs_restart),
        )
    )
    log.info(
        "config reloaded",
        added=list(change.added),
        removed=list(change.removed),
        replaced=list(change.replaced),
        changed=list(change.changed),
        settings=list(change.settings),
        needs_restart=list(change.needs_restart),
    )
    return change


async def _apply(handle: Running, old: Config, new: Config, change: ConfigChange) -> None:
    maker, servers, tree = handle._maker, handle._servers, handle._tree
    settings = new.settings
    for name in (*change.added, *change.replaced, *change.changed):  # the others' are known
        maker.secrets.add(*new.servers[name].secrets())
    now = _enabled(new)

    # Settings, for what comes next.
    if change.settings:
        if (
            settings.strategy != old.settings.strategy
            or settings.intensity != old.settings.intensity
        ):
            await tree.set_policy(settings.strategy, settings.intensity)
        maker.start_slots.resize(settings.startup_concurrency)
        for server in servers.values():
            server.settings_changed(settings.limits, settings.ping_timeout)
            server.state.limited(settings.limits)  # the next listing is checked by them

    # Out: removed, or disabled now. No new call from here on; then the catalog (what
    # leaves is no longer offered, names follow the new policy); then they drain and stop.
    leaving = [servers[name] for name in servers if name not in now]
    for server in leaving:
        why = (
            "removed from the configuration"
            if server.name not in new.servers
            else "disabled in the configuration"
        )
        why = f"MCP server {server.name!r} was {why} when it was reloaded"
        handle._departed[server.name] = why
        handle._gate.withdraw(server.name, why)
        handle._gate.forget(server.name)
        server.state.withdrawn(why)  # its calls from now on fail saying so
        server.detach()
    registry = handle._registry
    registry.arrange(now, NamingPolicy(settings.tool_name_template, settings.tool_clash))
    async with trio.open_nursery() as nursery:
        for server in leaving:
            nursery.start_soon(_withdraw, handle, server)

    # Changed in place, and replaced.
    for name, server in list(servers.items()):
        if name in change.changed and name in now:
            spec = server.reconfigured(new.servers[name])
            if server.error is None:
                await tree.update_child(spec)
            handle._gate.forget(name)
            server.changed()  # a new prefix renames its tools
    for name in change.replaced:
        server = servers.get(name)
        if server is None or name not in now:
            continue
        handle._gate.forget(name)
        if server.error is not None:  # never started: made afresh below
            del servers[name]
            continue
        broker, specs = maker.auth.adopt(new.servers[name])
        for spec in specs:
            await handle._root.start_child(spec)
        server.state.replaced()  # what was learnt of the old one's transport is forgotten
        await tree.replace_child(server.replaced(new.servers[name], broker))

    # In: added, enabled now, or made afresh.
    for name in now:
        if name in servers:
            continue
        _, specs = maker.auth.adopt(new.servers[name])
        for spec in specs:
            await handle._root.start_child(spec)
        server = servers[name] = maker.handle(new, name)
        handle._gate.returned(name)
        handle._departed.pop(name, None)
        if server.error is None:
            await tree.start_child(server.spec)

    # Config order everywhere.
    running = {name: servers[name] for name in now}
    servers.clear()
    servers.update(running)
    handle._rebuild_views()
    order = [name for name, s in servers.items() if s.error is None]
    if order != [id for id, *_ in tree.which_children()]:
        await tree.arrange(order)
    handle.config = new
    await registry.settled()  # the catalog as of the new config, when this returns


async def _withdraw(handle: Running, server: ServerHandle) -> None:
    """Stop ``server``, withdrawn: those in flight finished (its shutdown timeout), then
    forgotten by the tree and the handle."""
    if server.error is None:
        tree = handle._tree
        await tree.terminate_child(server.name)
        await tree.delete_child(server.name)
    handle._servers.pop(server.name, None)


def with_overrides(
    apps: Mapping[str, object] | None,
    faults: Mapping[str, Any] | None,
    injector: Injector | None = None,
) -> Callable[[Config], Config]:
    """How a session completes each config it runs: the in-process ``apps`` and the
    ``faults`` plans given to ``open_supervisor`` (those of servers it has); a plan
    without an ``injector`` to carry it out is a ConfigError."""

    def complete(cfg: Config) -> Config:
        if apps:
            cfg = with_apps(cfg, apps)
        if faults:
            mine = {name: plan for name, plan in faults.items() if name in cfg.servers}
            if mine:
                cfg = with_faults(cfg, mine)
        require_injector(cfg, injector)
        return cfg

    return complete


def with_faults(config: Config, faults: Mapping[str, object]) -> Config:
    """``config`` with these servers' fault plans (``open_supervisor(faults=...)``)."""
    servers = dict(config.servers)
    problems: list[FieldError] = []
    for name, source in faults.items():
        if name not in servers:
            known = ", ".join(sorted(servers)) or "none"
            raise UnknownServer(
                f"faults for {name!r}, but no MCP server has that name (configured: {known})"
            )
        path = f"faults.{name}"
        plan, found = load_faults(source, path, None)
        if plan is not None:
            found = check_plan(plan, servers[name].type, path)
            servers[name] = msgspec.structs.replace(servers[name], faults=plan)
        problems += found
    if problems:
        raise ConfigError(problems)
    return msgspec.structs.replace(config, servers=servers)
