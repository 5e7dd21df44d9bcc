"""The supervisor for synchronous code — a script, a REPL — as a blocking context:
:class:`Supervisor`.

It runs the asyncio supervisor (:mod:`supervisor.asyncio`: trio hosted by an asyncio
loop) on a private asyncio loop of its own, in the calling thread: each method runs
that loop until its answer is in. No thread is started. So the supervisor runs while a
method of it runs, and waits between them: a server that crashed meanwhile is seen,
and restarted, by the next call (which waits for it, as any call does), and events
keep in the bus's buffer until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._util._renamed import renamed
from ..config import Config
from ..events import Event
from ._handle import AsyncSupervisor, start_supervisor

if TYPE_CHECKING:
    import mcp_types as types

    from ..actors._stats import SupervisorStatistics
    from ..auth._broker import BrokerInfo
    from ..auth._login import CallbackHandler, RedirectHandler
    from ..calls._resources import MergedPrompt, MergedResource, MergedResourceTemplate
    from ..config._diff import ConfigChange
    from ..events._bus import Bus
    from ..monitor import SessionSummary
    from ..registry import Catalog, Summary
    from ..registry._live import RegistryStatistics, Snapshot
    from ..runtime import PlanSource
    from ..server import HealthRecord, ServerMetrics
    from ..server._messages import InputRound, Progress
    from ..tools import ApprovalCallback, ToolResult
    from ..tools._approval import ApprovalReason
    from ..tools._observer import History as CallHistory
    from ..transports._faults import Injected, Injector

__all__ = ["Supervisor"]

_T = TypeVar("_T")


class Supervisor:
    """``with Supervisor(config) as sup: sup.call(tool, arguments)`` — the servers of
    ``config`` supervised for the block (or from :meth:`start` to :meth:`close`); the
    parameters are ``open_supervisor``'s. Each verb is the asyncio handle's of the same
    name, with the same parameters, blocking until it is done (which verbs:
    :mod:`supervisor.asyncio._verbs`). In a thread where an asyncio loop runs (an
    asyncio program, a notebook), it refuses, pointing to :mod:`supervisor.asyncio`:
    blocking would stop the very loop it needs."""

    def __init__(
        self,
        config: Config | Mapping[str, object] | str | os.PathLike[str],
        *,
        bus: Bus | None = None,
        approve: ApprovalCallback | None = None,
        builtins: Iterable[str] = (),
        spill_dir: str | os.PathLike[str] | None = None,
        retry_idempotent: bool = False,
        retries: bool = True,
        faults: Mapping[str, PlanSource] | None = None,
        injector: Injector | None = None,
        history: CallHistory | None = None,
        apps: Mapping[str, object] | None = None,
        oauth_redirect_handler: RedirectHandler | Literal["browser"] | None = None,
        oauth_callback_handler: CallbackHandler | None = None,
        auth_dir: str | os.PathLike[str] | None = None,
        **client_options: object,
    ) -> None:
        self._starting = functools.partial(
            start_supervisor,
            config,
            bus=bus,
            approve=approve,
            builtins=builtins,
            spill_dir=spill_dir,
            retry_idempotent=retry_idempotent,
            retries=retries,
            faults=faults,
            injector=injector,
            history=history,
            apps=apps,
            oauth_redirect_handler=oauth_redirect_handler,
            oauth_callback_handler=oauth_callback_handler,
            auth_dir=auth_dir,
            **client_options,
        )
        self._runner: asyncio.Runner | None = None
        self._sup: AsyncSupervisor | None = None

    def start(self) -> Supervisor:
        """Start supervising (what entering the ``with`` does)."""
        if self._runner is not None:
            raise RuntimeError("this Supervisor is started already")
        if asyncio._get_running_loop() is not None:
            raise RuntimeError(
                "Supervisor blocks, and an asyncio loop is running in this thread (an "
                "asyncio program or a notebook): there, use `sup = await supervisor."
                "asyncio.start_supervisor(config)` (or `async with supervisor.asyncio."
                "open_supervisor(config) as sup`) and `await sup.call(tool, arguments)`"
            )
        runner = asyncio.Runner()
        try:
            self._sup = runner.run(self._starting())
        except BaseException:
            runner.close()
            raise
        self._runner = runner
        return self

    def close(self) -> None:
        """Stop every server and wait for them to exit (a second time: nothing)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            assert self._sup is not None
            runner.run(self._sup.aclose())
        finally:
            runner.close()

    def __enter__(self) -> Supervisor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: Coroutine[Any, Any, _T]) -> _T:
        if self._runner is None:
            call.close()
            raise RuntimeError("this Supervisor is not started (use it in a with block)")
        # Ctrl-C during it cancels the call (at the server too), then raises
        # KeyboardInterrupt: asyncio.Runner's own handling of SIGINT.
        return self._runner.run(call)

    @property
    def handle(self) -> AsyncSupervisor:
        """The asyncio handle."""
        if self._sup is None:
            raise RuntimeError("this Supervisor is not started")
        return self._sup

    # -- tools -------------------------------------------------------------------------

    def call(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
        approve: ApprovalCallback | None = None,
        spill: bool = True,
        log_level: types.LoggingLevel | None = None,
        rounds: InputRound | None = None,
        caller: str | None = None,
    ) -> ToolResult:
        """``SupervisorHandle.call``: the tool's :class:`~supervisor.tools.ToolResult`.
        Its ``progress`` and ``approve`` callbacks are asyncio coroutine functions (run
        on this handle's loop)."""
        return self._run(
            self.handle.call(
                name,
                arguments,
                timeout=timeout,
                progress=progress,
                approve=approve,
                spill=spill,
                log_level=log_level,
                rounds=rounds,
                caller=caller,
            )
        )

    def tools(self) -> Catalog:
        """The merged catalog, once every server connected or failed."""
        return self._run(self.handle.tools())

    @property
    def catalog(self) -> Catalog:
        """The connected servers' tools, now."""
        return self.handle.catalog

    @property
    def snapshot(self) -> Snapshot:
        """The registry's latest merge."""
        return self.handle.snapshot

    def snapshot_after(self, since: Snapshot) -> Snapshot:
        """The registry's next merge after ``since``."""
        return self._run(self.handle.snapshot_after(since))

    def search(self, query: str, limit: int = 10) -> list[Summary]:
        """The catalog's best matches for ``query``."""
        return self._run(self.handle.search(query, limit))

    def resolve(self, name: str) -> tuple[str, str]:
        """``(server, its own tool name)`` for a merged tool name."""
        return self._run(self.handle.resolve(name))

    def approval_reason(self, name: str) -> ApprovalReason | None:
        """Why a call of the tool ``name`` would need approval, or ``None``."""
        return self._run(self.handle.approval_reason(name))

    # -- resources and prompts ---------------------------------------------------------

    def resources(self) -> list[MergedResource]:
        """Every server's resources, merged."""
        return self._run(self.handle.resources())

    def resource_templates(self) -> list[MergedResourceTemplate]:
        """Every server's resource templates, merged."""
        return self._run(self.handle.resource_templates())

    @overload
    def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.ReadResourceResult: ...

    @overload
    def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` from the server that offers it, or from ``server``."""
        return self._run(
            self.handle.read_resource(uri, server=server, timeout=timeout, rounds=rounds)
        )

    def subscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Subscribe to changes of ``uri`` (published as events); the server's name."""
        return self._run(self.handle.subscribe_resource(uri, server=server))

    def unsubscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Stop the subscription to ``uri``; the server's name."""
        return self._run(self.handle.unsubscribe_resource(uri, server=server))

    def prompts(self) -> list[MergedPrompt]:
        """Every server's prompts, merged."""
        return self._run(self.handle.prompts())

    @overload
    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.GetPromptResult: ...

    @overload
    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Prompt ``name`` (its merged name) with ``arguments``."""
        return self._run(self.handle.get_prompt(name, arguments, timeout=timeout, rounds=rounds))

    def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Completions for an argument of a prompt or a resource template."""
        return self._run(self.handle.complete(ref, argument, context, timeout=timeout))

    def read(self, uri: str, **options: Any) -> Any:
        """The old name of :meth:`read_resource` (deprecated)."""
        renamed("Supervisor.read", "Supervisor.read_resource")
        return self.read_resource(uri, **options)

    def prompt(self, name: str, arguments: Mapping[str, str] | None = None, **options: Any) -> Any:
        """The old name of :meth:`get_prompt` (deprecated)."""
        renamed("Supervisor.prompt", "Supervisor.get_prompt")
        return self.get_prompt(name, arguments, **options)

    # -- servers -----------------------------------------------------------------------

    def connect_all(self, timeout: float | None = None) -> None:
        """Every server connected, or failed (or ``timeout`` passed)."""
        self._run(self.handle.connect_all(timeout))

    def restart(self, name: str) -> None:
        """Server ``name`` restarted now, with a fresh attempt count."""
        self._run(self.handle.restart(name))

    def stop(self, name: str) -> None:
        """Server ``name`` stopped; its calls fail fast until restarted."""
        self._run(self.handle.stop(name))

    def set_log_level(self, level: types.LoggingLevel) -> None:
        """Every server's log messages from ``level`` up."""
        self._run(self.handle.set_log_level(level))

    def reconfigure(
        self, config: Config | Mapping[str, object] | str | os.PathLike[str] | None = None
    ) -> ConfigChange:
        """Take a new config live and return what changed (see the asyncio handle's)."""
        return self._run(self.handle.reconfigure(config))

    def departed(self, name: str) -> str | None:
        """Why a reconfiguration took server ``name`` out, if it did."""
        return self._run(self.handle.departed(name))

    # -- OAuth -------------------------------------------------------------------------

    def login(
        self, name: str, redirect_handler: RedirectHandler | Literal["browser"] | None = None
    ) -> BrokerInfo:
        """An OAuth login of server ``name`` now; what was granted."""
        return self._run(self.handle.login(name, redirect_handler))

    def logout(self, name: str) -> bool:
        """Server ``name``'s OAuth tokens forgotten; whether it had any."""
        return self._run(self.handle.logout(name))

    def auth_status(self, name: str) -> BrokerInfo:
        """Server ``name``'s OAuth state."""
        return self._run(self.handle.auth_status(name))

    # -- health ------------------------------------------------------------------------

    def status(self) -> dict[str, HealthRecord]:
        """Each server's health record."""
        return self._run(self.handle.status())

    def metrics(self) -> dict[str, ServerMetrics]:
        """Each server's metrics."""
        return self._run(self.handle.metrics())

    def summary(self) -> SessionSummary:
        """The session's summary, as of now."""
        return self._run(self.handle.summary())

    def statistics(self) -> SupervisorStatistics:
        """The root tree's restarts and last exits."""
        return self._run(self.handle.statistics())

    def registry_statistics(self) -> RegistryStatistics:
        """The registry's merges, pending reports and failures."""
        return self._run(self.handle.registry_statistics())

    def faults(self) -> list[Injected]:
        """Every fault the servers' plans injected so far."""
        return self._run(self.handle.faults())

    # -- events ------------------------------------------------------------------------

    @contextlib.contextmanager
    def subscribe(self, *patterns: str, buffer: int = 1024) -> Iterator[Iterator[Event]]:
        """The events whose kind matches one of ``patterns``, as the asyncio handle's
        ``subscribe``: a ``with`` block, subscribed once entered, yielding an iterator of
        them; each step waits for the next event (the supervisor running meanwhile)."""
        block = self.handle.subscribe(*patterns, buffer=buffer)
        events = self._run(block.__aenter__())

        async def next_event() -> Event | None:
            return await anext(events, None)

        def iterate() -> Iterator[Event]:
            while (event := self._run(next_event())) is not None:
                yield event

        try:
            yield iterate()
        finally:
            self._run(block.__aexit__(None, None, None))
