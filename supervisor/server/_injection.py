"""One server's fault injection (docs/faults.md), for the server's whole life.

A config with a ``faults`` plan gets one :class:`~supervisor.transports._faults.Faults`
engine, made by the supervisor's injector (a plan with no injector is a
:class:`~supervisor.errors.ConfigError`): every connection's transport injects through
it, so a rule's ``nth`` counts across restarts. Each fault is logged (info) as it is
injected; :meth:`FaultInjection.inject` injects one by hand, outside the plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config._faults import NO_INJECTOR
from ..errors import ConfigError, FieldError, ServerUnavailable
from ..log import get_logger
from ..transports._faults import Faults, Injected, Injector

if TYPE_CHECKING:
    from ..config._model import ServerConfig

log = get_logger("supervisor.server")


class FaultInjection:
    """Holds the fault engine one server's ``faults`` plan made, if it has one."""

    __slots__ = ("_name", "engine")

    def __init__(self, name: str, config: ServerConfig, injector: Injector | None) -> None:
        self._name = name
        #: the server's fault engine, if its config has a ``faults`` plan
        self.engine: Faults | None = None
        self.made(config, injector)

    def made(self, config: ServerConfig, injector: Injector | None) -> None:
        """Take a new engine for ``config``'s plan (none without one), made by
        ``injector``: a replaced server's next incarnation counts its rules afresh (a
        plan refused leaves the engine it had)."""
        plan = getattr(config, "faults", None)
        if plan is None:
            self.engine = None
            return
        kind = str(config.type)
        plan.check_supported(f"a {kind} server", http=kind in ("http", "sse"))
        if injector is None:
            path = getattr(config, "path", self._name)  # (duck-typed configs: none)
            raise ConfigError([FieldError(f"{path}.faults", NO_INJECTOR)])
        engine = injector.faults(plan, server=self._name, on_inject=self._injected)
        with contextlib.suppress(RuntimeError):  # outside trio: its clock starts later
            engine.start()  # the servers of one supervisor share a start
        if kind == "sse":
            log.warning(
                "fault plan not applied: legacy SSE servers do not inject faults",
                server=self._name,
            )
        self.engine = engine

    def log(self) -> list[Injected]:
        """The faults injected so far, in order (empty without a plan)."""
        return [] if self.engine is None else list(self.engine.log)

    async def inject(self, action: str, status: Callable[[], str]) -> Injected:
        """Inject ``action`` into the current connection now (rule ``-1``); ``status``
        says the server's status when it has none. See
        :meth:`~supervisor.server._managed.ServerHandle.inject`."""
        engine = self.engine
        if engine is None:
            raise ValueError(
                f"MCP server {self._name!r} has no fault plan to inject through: give it "
                '"faults" in its config ([] will do) or open_supervisor(faults=...)'
            )
        if engine.link is None:
            raise ServerUnavailable(
                f"MCP server {self._name!r} has no connection to inject {action!r} into "
                f"now (it is {status()})",
                server=self._name,
            )
        return await engine.link.inject(action)

    def _injected(self, fault: Injected) -> None:
        log.info(
            "fault injected",
            server=self._name,
            rule=fault.rule,
            action=fault.action,
            method=fault.method,
            id=fault.id,
            tool=fault.tool,
            direction=fault.direction,
            detail=fault.detail,
        )
