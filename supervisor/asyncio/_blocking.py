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
import os
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar

from ..config import Config
from . import AsyncSupervisor, start_supervisor

__all__ = ["Supervisor"]

_T = TypeVar("_T")


class Supervisor:
    """``with Supervisor(config) as sup: sup.call(tool, arguments)`` — the servers of
    ``config`` supervised for the block (or from :meth:`start` to :meth:`close`);
    ``options`` are ``open_supervisor``'s. Each method is the asyncio handle's of the
    same name, blocking until it is done. In a thread where an asyncio loop runs (an
    asyncio program, a notebook), it refuses, pointing to :mod:`supervisor.asyncio`:
    blocking would stop the very loop it needs."""

    def __init__(
        self, config: Config | Mapping[str, object] | str | os.PathLike[str], **options: Any
    ) -> None:
        self._config = config
        self._options = options
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
            self._sup = runner.run(start_supervisor(self._config, **self._options))
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
        """The asyncio handle (for its methods not repeated here)."""
        if self._sup is None:
            raise RuntimeError("this Supervisor is not started")
        return self._sup

    def call(self, name: str, arguments: Mapping[str, object] | None = None, **options: Any) -> Any:
        """``SupervisorHandle.call``: the tool's :class:`~supervisor.tools.ToolResult`."""
        return self._run(self.handle.call(name, arguments, **options))

    def tools(self) -> Any:
        """The merged catalog, once every server connected or failed."""
        return self._run(self.handle.tools())

    def search(self, query: str, limit: int = 10) -> Any:
        return self._run(self.handle.search(query, limit))

    def resources(self) -> Any:
        return self._run(self.handle.resources())

    def read(self, uri: str, **options: Any) -> Any:
        return self._run(self.handle.read(uri, **options))

    def prompts(self) -> Any:
        return self._run(self.handle.prompts())

    def prompt(self, name: str, arguments: Mapping[str, str] | None = None, **options: Any) -> Any:
        return self._run(self.handle.prompt(name, arguments, **options))

    def status(self) -> Any:
        """Each server's health record."""
        return self._run(self.handle.status())

    def metrics(self) -> Any:
        return self._run(self.handle.metrics())

    def connect_all(self, timeout: float | None = None) -> None:
        self._run(self.handle.connect_all(timeout))

    def restart(self, name: str) -> None:
        self._run(self.handle.restart(name))

    def reconfigure(self, config: Any = None) -> Any:
        """Take a new config live and return what changed (see the asyncio handle's)."""
        return self._run(self.handle.reconfigure(config))

    def stop(self, name: str) -> None:
        self._run(self.handle.stop(name))
