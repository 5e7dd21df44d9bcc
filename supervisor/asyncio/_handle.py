"""The asyncio handle and the bridge below it: :func:`open_supervisor` hosts the trio
runtime as a guest of the running asyncio loop, and :class:`AsyncSupervisor` runs each
verb in a trio task of that run, its outcome handed back to the asyncio task awaiting it
(see :mod:`supervisor.asyncio`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import outcome
import trio

from .._util._renamed import renamed
from ..config import Config
from ..events import Event
from ..runtime import SupervisorHandle
from ..runtime import open_supervisor as _open_trio

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

__all__ = ["AsyncSupervisor", "open_supervisor", "start_supervisor"]

_T = TypeVar("_T")

#: The SDK client's options (``open_supervisor``'s ``client_options``) that are
#: callbacks, run on asyncio.
_CLIENT_CALLBACKS = frozenset(
    {
        "elicitation_callback",
        "sampling_callback",
        "list_roots_callback",
        "logging_callback",
        "message_handler",
    }
)


class AsyncSupervisor:
    """The supervisor's handle for asyncio code: each method does what the trio
    :class:`~supervisor.runtime.SupervisorHandle`'s of the same name does, with the same
    parameters, run in the supervisor's trio run and awaited here (which verbs, and how
    each crosses: :mod:`supervisor.asyncio._verbs`)."""

    def __init__(self, bridge: _Bridge, sup: SupervisorHandle) -> None:
        self._bridge = bridge
        #: the trio handle — call its methods only from trio code
        self.trio_handle = sup
        #: what :meth:`aclose` leaves, for a handle of :func:`start_supervisor`
        self._block: contextlib.AsyncExitStack | None = None

    async def aclose(self) -> None:
        """Stop every server and end the supervisor started by :func:`start_supervisor`
        (a second time: nothing); its runtime's error, if it failed, is raised here."""
        if self._block is None:
            raise RuntimeError(
                "this supervisor was opened by `async with open_supervisor(...)`: it "
                "ends when that block is left"
            )
        await self._block.aclose()

    # -- tools -------------------------------------------------------------------------

    async def call(
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
        Its ``progress`` and ``approve`` callbacks may be asyncio coroutine functions."""
        on_asyncio = self._bridge.on_asyncio_if_needed
        return await self._bridge.run(
            self.trio_handle.call,
            name,
            arguments,
            timeout=timeout,
            progress=on_asyncio(progress),
            approve=on_asyncio(approve),
            spill=spill,
            log_level=log_level,
            rounds=rounds,
            caller=caller,
        )

    async def tools(self) -> Catalog:
        """``SupervisorHandle.tools``: the merged catalog, once the servers listed."""
        return await self._bridge.run(self.trio_handle.tools)

    @property
    def catalog(self) -> Catalog:
        """``SupervisorHandle.catalog``: the connected servers' tools, now."""
        return self.trio_handle.catalog

    @property
    def snapshot(self) -> Snapshot:
        """``SupervisorHandle.snapshot``: the registry's latest merge."""
        return self.trio_handle.snapshot

    async def snapshot_after(self, since: Snapshot) -> Snapshot:
        """``SupervisorHandle.snapshot_after``: the registry's next merge after ``since``."""
        return await self._bridge.run(self.trio_handle.snapshot_after, since)

    async def search(self, query: str, limit: int = 10) -> list[Summary]:
        """``SupervisorHandle.search``: the catalog's best matches for ``query``."""
        return await self._bridge.run_sync(self.trio_handle.search, query, limit)

    async def resolve(self, name: str) -> tuple[str, str]:
        """``SupervisorHandle.resolve``: ``(server, its own tool name)``."""
        return await self._bridge.run_sync(self.trio_handle.resolve, name)

    async def approval_reason(self, name: str) -> ApprovalReason | None:
        """``SupervisorHandle.approval_reason``: why a call of ``name`` needs approval."""
        return await self._bridge.run_sync(self.trio_handle.approval_reason, name)

    # -- resources and prompts ---------------------------------------------------------

    async def resources(self) -> list[MergedResource]:
        """``SupervisorHandle.resources``: every server's resources, merged."""
        return await self._bridge.run(self.trio_handle.resources)

    async def resource_templates(self) -> list[MergedResourceTemplate]:
        """``SupervisorHandle.resource_templates``: every server's templates, merged."""
        return await self._bridge.run(self.trio_handle.resource_templates)

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.ReadResourceResult: ...

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """``SupervisorHandle.read_resource``: read ``uri`` (from ``server``)."""
        return await self._bridge.run(
            self.trio_handle.read_resource, uri, server=server, timeout=timeout, rounds=rounds
        )

    async def subscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """``SupervisorHandle.subscribe_resource``: its changes published as events."""
        return await self._bridge.run(self.trio_handle.subscribe_resource, uri, server=server)

    async def unsubscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """``SupervisorHandle.unsubscribe_resource``."""
        return await self._bridge.run(self.trio_handle.unsubscribe_resource, uri, server=server)

    async def prompts(self) -> list[MergedPrompt]:
        """``SupervisorHandle.prompts``: every server's prompts, merged."""
        return await self._bridge.run(self.trio_handle.prompts)

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.GetPromptResult: ...

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``SupervisorHandle.get_prompt``: prompt ``name`` with ``arguments``."""
        return await self._bridge.run(
            self.trio_handle.get_prompt, name, arguments, timeout=timeout, rounds=rounds
        )

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """``SupervisorHandle.complete``: completions for an argument."""
        return await self._bridge.run(
            self.trio_handle.complete, ref, argument, context, timeout=timeout
        )

    async def read(self, uri: str, **options: Any) -> Any:
        """The old name of :meth:`read_resource` (deprecated)."""
        renamed("AsyncSupervisor.read", "AsyncSupervisor.read_resource")
        return await self.read_resource(uri, **options)

    async def prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Any
    ) -> Any:
        """The old name of :meth:`get_prompt` (deprecated)."""
        renamed("AsyncSupervisor.prompt", "AsyncSupervisor.get_prompt")
        return await self.get_prompt(name, arguments, **options)

    # -- servers -----------------------------------------------------------------------

    async def connect_all(self, timeout: float | None = None) -> None:
        """``SupervisorHandle.connect_all``: every server connected, or failed."""
        await self._bridge.run(self.trio_handle.connect_all, timeout)

    async def restart(self, name: str) -> None:
        """``SupervisorHandle.restart``: the server restarted now, its count fresh."""
        await self._bridge.run(self.trio_handle.restart, name)

    async def stop(self, name: str) -> None:
        """``SupervisorHandle.stop``: the server stopped, its calls failing fast (and its
        tools out of the catalog) until :meth:`restart`."""
        await self._bridge.run(self.trio_handle.stop, name)

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """``SupervisorHandle.set_log_level``: every server's log messages from ``level``."""
        await self._bridge.run(self.trio_handle.set_log_level, level)

    async def reconfigure(
        self, config: Config | Mapping[str, object] | str | os.PathLike[str] | None = None
    ) -> ConfigChange:
        """``SupervisorHandle.reconfigure``: take a new config live (a path, a mapping
        or a ``Config``; by default the running config's file, read again) and return
        what changed; a config that cannot be applied raises ``ConfigError`` and changes
        nothing."""
        return await self._bridge.run(self.trio_handle.reconfigure, config)

    async def departed(self, name: str) -> str | None:
        """``SupervisorHandle.departed``: why a reconfiguration took server ``name`` out."""
        return await self._bridge.run_sync(self.trio_handle.departed, name)

    # -- OAuth -------------------------------------------------------------------------

    async def login(
        self, name: str, redirect_handler: RedirectHandler | Literal["browser"] | None = None
    ) -> BrokerInfo:
        """``SupervisorHandle.login``: an OAuth login of server ``name`` now;
        ``redirect_handler`` may be an asyncio coroutine function."""
        handler = self._bridge.on_asyncio_if_needed(redirect_handler)
        return await self._bridge.run(self.trio_handle.login, name, handler)

    async def logout(self, name: str) -> bool:
        """``SupervisorHandle.logout``: server ``name``'s OAuth tokens forgotten."""
        return await self._bridge.run(self.trio_handle.logout, name)

    async def auth_status(self, name: str) -> BrokerInfo:
        """``SupervisorHandle.auth_status``: server ``name``'s OAuth state."""
        return await self._bridge.run_sync(self.trio_handle.auth_status, name)

    # -- health ------------------------------------------------------------------------

    async def status(self) -> dict[str, HealthRecord]:
        """``SupervisorHandle.status``: each server's health record."""
        return await self._bridge.run_sync(self.trio_handle.status)

    async def metrics(self) -> dict[str, ServerMetrics]:
        """``SupervisorHandle.metrics``: each server's metrics."""
        return await self._bridge.run_sync(self.trio_handle.metrics)

    async def summary(self) -> SessionSummary:
        """``SupervisorHandle.summary``: the session's summary, as of now."""
        return await self._bridge.run_sync(self.trio_handle.summary)

    async def statistics(self) -> SupervisorStatistics:
        """``SupervisorHandle.statistics``: the root tree's restarts and exits."""
        return await self._bridge.run_sync(self.trio_handle.statistics)

    async def registry_statistics(self) -> RegistryStatistics:
        """``SupervisorHandle.registry_statistics``: the registry's merges."""
        return await self._bridge.run_sync(self.trio_handle.registry_statistics)

    async def faults(self) -> list[Injected]:
        """``SupervisorHandle.faults``: every fault injected so far."""
        return await self._bridge.run_sync(self.trio_handle.faults)

    # -- events ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subscribe(
        self, *patterns: str, buffer: int = 1024
    ) -> AsyncIterator[AsyncIterator[Event]]:
        """The events whose kind matches one of ``patterns`` (globs such as ``"mcp.*"``):
        an async context manager, subscribed once entered, yielding an async iterator
        of them as they come (as ``SupervisorHandle.subscribe``); a reader that falls
        ``buffer`` events behind loses the oldest and gets a
        :class:`~supervisor.events.BusDropped` saying how many."""
        queue: asyncio.Queue[tuple[Event, trio.Event] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def forward(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            # One event at a time, the next once the reader took it: a slow reader leaves
            # them in the bus's buffer, bounded, where the oldest are dropped.
            try:
                with trio.CancelScope() as scope:
                    async with self.trio_handle.subscribe(*patterns, buffer=buffer) as events:
                        task_status.started(scope)
                        async for event in events:
                            taken = trio.Event()
                            loop.call_soon(queue.put_nowait, (event, taken))
                            await taken.wait()
            finally:
                loop.call_soon(queue.put_nowait, None)  # the end: the bus closed, or us

        scope = await self._bridge.start(forward)

        async def events() -> AsyncIterator[Event]:
            while (item := await queue.get()) is not None:
                event, taken = item
                self._bridge.soon(taken.set)
                yield event

        try:
            yield events()
        finally:
            self._bridge.soon(scope.cancel)


class _Bridge:
    """The trio run's side of the handle: runs trio callables in a nursery of the run,
    for asyncio tasks, and asyncio coroutines for trio tasks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        #: the calls asyncio tasks made that no trio task took yet
        self._queue: collections.deque[_Request] = collections.deque()
        #: trio tasks that will look at the queue in trio's next batch
        self._lingering = 0
        #: whether a callback of the run that takes the queue in is on its way
        self._woken = False

    def soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` in trio's context, soon (from asyncio code)."""
        assert self.token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(fn)

    async def run(self, fn: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        """Await ``fn(*args, **kwargs)`` run as a trio task; cancelling the awaiting
        asyncio task cancels it, and waits for it to end, before going on. (The trio
        task runs in the loop's thread, between its callbacks: it settles the futures
        itself.)"""
        done: asyncio.Future[outcome.Outcome[_T]] = self.loop.create_future()
        ended: asyncio.Future[None] = self.loop.create_future()
        scope = trio.CancelScope()

        async def task() -> None:
            try:
                with scope:
                    result = await outcome.acapture(fn, *args, **kwargs)
                    if isinstance(result, outcome.Error) and isinstance(
                        result.error, trio.Cancelled
                    ):
                        if not scope.cancel_called:  # the run is ending, not the caller
                            gone = RuntimeError("the supervisor ended before the call did")
                            _settle(done, outcome.Error(gone))
                        raise result.error
                    _settle(done, result)
            finally:
                _settle(ended, None)

        assert self.token is not None
        self._queue.append((task, done, ended))
        if not self._lingering and not self._woken:
            try:
                self.token.run_sync_soon(self._take)
            except trio.RunFinishedError:
                self._queue.clear()
                raise RuntimeError("the supervisor has ended") from None
            self._woken = True
        try:
            result = await done
        except asyncio.CancelledError:
            self.soon(scope.cancel)
            with contextlib.suppress(BaseException):
                await ended  # the trio task has ended: the call was cancelled there
            raise
        return result.unwrap()

    async def run_sync(self, fn: Callable[..., _T], *args: Any) -> _T:
        async def call() -> _T:
            return fn(*args)

        return await self.run(call)

    async def start(self, fn: Callable[..., Awaitable[object]]) -> Any:
        """``nursery.start(fn)`` in the trio run: what ``fn`` reported started."""

        async def starting() -> Any:
            assert self.nursery is not None
            return await self.nursery.start(fn)

        return await self.run(starting)

    def _take(self) -> None:
        """Start a trio task for each call queued (run by trio, from its entry queue)."""
        self._woken = False
        while self._queue:
            self._start(self._queue.popleft())

    def _start(self, request: _Request) -> None:
        """Start ``request`` in the run's nursery — or, the supervisor's block being
        left, say so to its caller (a callback of the run must not raise)."""
        task, done, ended = request
        if self.nursery is None:
            _settle(done, outcome.Error(RuntimeError("the supervisor has ended")))
            _settle(ended, None)
            return
        self.nursery.start_soon(self._serve, task)

    async def _serve(self, task: Callable[[], Awaitable[None]]) -> None:
        """Run ``task``; then stay one more trio batch, and take the next call queued
        meanwhile, if any, in this task. The asyncio task a call answered resumes before
        that batch, and the call it makes next is taken in by it — without a wake-up of
        trio from its idle wait, which costs two trips through trio's I/O thread, and
        without starting a task."""
        while True:
            await task()
            self._lingering += 1
            try:
                await trio.lowlevel.cancel_shielded_checkpoint()
            finally:
                self._lingering -= 1
            if not self._queue or self.nursery is None:
                self._take()  # (a call queued as the run ends is told so)
                return
            task, _, _ = self._queue.popleft()
            self._take()  # any other: a task each, to run concurrently

    def on_asyncio_if_needed(self, callback: Any) -> Any:
        """``callback`` as :meth:`on_asyncio` makes it if it is an asyncio coroutine
        function; as it is otherwise (``None``, a plain function)."""
        if callback is not None and inspect.iscoroutinefunction(callback):
            return self.on_asyncio(callback)
        return callback

    def on_asyncio(
        self, callback: Callable[..., Coroutine[Any, Any, _T]]
    ) -> Callable[..., Awaitable[_T]]:
        """``callback`` (an asyncio coroutine function) as a trio one: run as an asyncio
        task, its trio caller waiting for it (and cancelling it when cancelled)."""

        async def on_trio(*args: Any, **kwargs: Any) -> _T:
            ended = trio.Event()
            task = self.loop.create_task(callback(*args, **kwargs))
            task.add_done_callback(lambda _: self.soon(ended.set))
            try:
                await ended.wait()
            except trio.Cancelled:
                task.cancel()
                raise
            return task.result()

        return on_trio


#: A call queued for the trio run: its task, and its asyncio caller's two futures.
_Request = tuple[Callable[[], Awaitable[None]], "asyncio.Future[Any]", "asyncio.Future[None]"]


def _settle(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():
        future.set_result(result)


@contextlib.asynccontextmanager
async def open_supervisor(
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
) -> AsyncIterator[AsyncSupervisor]:
    """:func:`supervisor.open_supervisor` for asyncio code, with its parameters: supervise
    ``config``'s servers for the duration of the block, in a trio run hosted by the
    running asyncio loop; yields an :class:`AsyncSupervisor`. Its callbacks (``approve``,
    the OAuth handlers, the SDK client's in ``client_options``) may be asyncio coroutine
    functions. Leaving the block stops every server; an error of the runtime (the tree
    giving up) is raised out of it."""
    loop = asyncio.get_running_loop()
    bridge = _Bridge(loop)
    on_asyncio = bridge.on_asyncio_if_needed
    for key in _CLIENT_CALLBACKS & client_options.keys():
        client_options[key] = on_asyncio(client_options[key])
    opening = _open_trio(
        config,
        bus=bus,
        approve=on_asyncio(approve),
        builtins=builtins,
        spill_dir=spill_dir,
        retry_idempotent=retry_idempotent,
        retries=retries,
        faults=faults,
        injector=injector,
        history=history,
        apps=apps,
        oauth_redirect_handler=on_asyncio(oauth_redirect_handler),
        oauth_callback_handler=on_asyncio(oauth_callback_handler),
        auth_dir=auth_dir,
        **client_options,
    )
    opened: asyncio.Future[SupervisorHandle] = loop.create_future()
    finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
    leave = trio.Event()

    async def main() -> None:
        bridge.token = trio.lowlevel.current_trio_token()
        async with opening as sup, trio.open_nursery() as nursery:
            bridge.nursery = nursery
            loop.call_soon(_settle, opened, sup)
            await leave.wait()
            bridge.nursery = None
            nursery.cancel_scope.cancel()

    def done(result: outcome.Outcome[None]) -> None:
        if not opened.done():
            opened.set_exception(_error_of(result))
        _settle(finished, result)

    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=done,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        sup = await asyncio.shield(opened)
    except BaseException:
        with contextlib.suppress(BaseException):
            await finished
        raise
    try:
        yield AsyncSupervisor(bridge, sup)
    finally:
        bridge.soon(leave.set)
        (await asyncio.shield(finished)).unwrap()


async def start_supervisor(
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
) -> AsyncSupervisor:
    """:func:`open_supervisor`, with its parameters, without a block: for a notebook
    (whose cells run on its asyncio loop, ``await`` at the top level), the supervisor
    runs, as a guest of the loop, from cell to cell until ``await sup.aclose()``.
    Raises what the ``async with`` would."""
    opening = open_supervisor(
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
    block = contextlib.AsyncExitStack()
    sup = await block.enter_async_context(opening)
    sup._block = block
    return sup


def _error_of(result: outcome.Outcome[None]) -> BaseException:
    if isinstance(result, outcome.Error):
        return result.error
    return RuntimeError("the supervisor's trio run ended before it opened")
