"""The pytest plugin (entry point ``pytest11``: installed with the package, active in any
pytest run that has pytest-trio): fixture servers, a supervisor over them with a fault
plan, and a checker that fails a test which lost or duplicated a call.

::

    async def test_agent_survives_a_crash(mcp_servers, mcp_checker):
        mcp_servers.stdio("calc", faults=[{"when": {"tool": "add", "nth": 2}, "do": "kill"}])
        await mcp_servers.http("notes")
        async with mcp_servers.supervise() as sup:
            ...  # drive your agent against sup
        # at the end of the test, mcp_checker fails it on a lost or duplicated call

Fixtures (all function-scoped):

``mcp_servers``
    A :class:`FixtureServers`: ``stdio(name, kind="echo", faults=None, **fields)`` and
    ``await http(name, kind="echo", faults=None, **fields)`` add fixture servers (see
    :mod:`supervisor.testing.servers`), each counting its executions per call in its own
    count file; ``supervise(**open_supervisor_options)`` opens a supervisor over them that
    records a :class:`~supervisor.faults.CallHistory`; ``executions()`` is what the
    servers executed, per call id.
``mcp_checker``
    A :class:`CallChecker` over every supervisor ``mcp_servers`` opened: at the end of the
    test it runs :func:`~supervisor.faults.check` and fails the test (with the report's
    path) on a lost, duplicated or late call, an execution of a call reported not
    executed, or a server process left behind. ``verdict()`` checks earlier.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..faults._checker import ResourceSampler
    from .servers._names import HttpTransport, ServerKind

__all__ = ["CallChecker", "FixtureServers", "mcp_checker", "mcp_servers"]


class _Run:
    """One supervisor opened by :meth:`FixtureServers.supervise`, and what it did."""

    def __init__(self, sup: Any, history: Any) -> None:  # noqa: ANN401
        self.sup = sup
        self.history = history
        self.faults: list[object] = []


class FixtureServers:
    """Fixture MCP servers for one test, and supervisors over them; see the module."""

    def __init__(self, directory: Path, stack: AsyncExitStack) -> None:
        self.directory = directory
        self._stack = stack
        self.servers: dict[str, dict[str, object]] = {}
        self.runs: list[_Run] = []

    def count_file(self, name: str) -> Path:
        """The file server ``name`` records its executions in."""
        return self.directory / f"{name}.executions"

    def _check_name(self, name: str) -> None:
        if name in self.servers:
            raise ValueError(f"a fixture server named {name!r} was added already")

    def stdio(
        self,
        name: str,
        kind: ServerKind = "echo",
        *,
        faults: object = None,
        **fields: object,
    ) -> dict[str, object]:
        """Add the stdio fixture server ``kind`` as ``name``; ``faults`` is its plan
        (docs/faults.md); ``fields`` are more of its config fields (``timeout``, ...)."""
        from .servers import stdio_params

        self._check_name(name)
        command, args = stdio_params(kind, count_file=self.count_file(name))
        entry: dict[str, object] = {
            "command": command,
            "args": args,
            "approve": False,
            "initTimeout": 120,  # a busy CI machine may take seconds to start Python
        }
        if faults is not None:
            entry["faults"] = faults
        entry.update(fields)
        self.servers[name] = entry
        return entry

    async def http(
        self,
        name: str,
        kind: ServerKind = "echo",
        *,
        faults: object = None,
        transport: HttpTransport = "http",
        **fields: object,
    ) -> dict[str, object]:
        """Start the fixture server ``kind`` over Streamable HTTP (or ``transport="sse"``)
        in a process of its own on 127.0.0.1, stopped at the end of the test, and add it as
        ``name``."""
        from .servers._procs import open_http_fixture

        self._check_name(name)
        fixture = await self._stack.enter_async_context(
            open_http_fixture(
                kind,
                transport,
                count_file=self.count_file(name),
                start_timeout=120,
            )
        )
        entry: dict[str, object] = {
            "type": transport,
            "url": fixture.url,
            "approve": False,
            "initTimeout": 60,
        }
        if faults is not None:
            entry["faults"] = faults
        entry.update(fields)
        self.servers[name] = entry
        return entry

    def config(self, **settings: object) -> dict[str, object]:
        """A config of every server added, with ``settings`` as its ``supervisor``
        section."""
        config: dict[str, object] = {"mcpServers": dict(self.servers)}
        if settings:
            config["supervisor"] = settings
        return config

    @asynccontextmanager
    async def supervise(
        self, config: Mapping[str, object] | None = None, **options: Any
    ) -> AsyncIterator[Any]:
        """``open_supervisor`` over :meth:`config` (or ``config``), recording every tool
        call in a :class:`~supervisor.faults.CallHistory` (``sup.history``) for the
        checker, the servers' fault plans injected by a :class:`~supervisor.faults.Injector`
        (unless ``injector`` is given)."""
        from ..faults import CallHistory, Injector
        from ..runtime import open_supervisor

        history = options.pop("history", None) or CallHistory()
        options.setdefault("injector", Injector())
        async with open_supervisor(
            self.config() if config is None else config,
            history=history,
            **options,
        ) as sup:
            run = _Run(sup, history)
            self.runs.append(run)
            try:
                yield sup
            finally:
                run.faults = list(sup.faults())

    def executions(self) -> Counter[str]:
        """How many times each call id was executed, over every server's count file."""
        from .servers import executions_by_call

        total: Counter[str] = Counter()
        for name in self.servers:
            total.update(executions_by_call(self.count_file(name)))
        return total


class _CheckOptions(TypedDict, total=False):
    """The options of :func:`~supervisor.faults.check` a :class:`CallChecker` does not
    give itself."""

    events: Iterable[object] | None
    now: float | None
    deadline_slack: float
    restart_limits: object
    catalog: tuple[Iterable[str], Iterable[str]] | None
    resources: ResourceSampler | None
    max_rss_growth_kb: float | None
    max_fd_growth: int | None
    warmup: int


class CallChecker:
    """Checks the runs of one test's :class:`FixtureServers`; see the module."""

    def __init__(self, servers: FixtureServers, report_dir: Path) -> None:
        self.servers = servers
        self.report_dir = report_dir
        #: checker options for :func:`~supervisor.faults.check` (``restart_limits``, ...)
        self.options: _CheckOptions = {}

    def verdict(self) -> Any:  # noqa: ANN401 - a supervisor.faults.Verdict
        """The verdict over every run so far (ended runs: every call must have ended)."""
        from ..faults import CallHistory, check
        from ..faults._checker import spawned_pids

        runs = self.servers.runs
        history = CallHistory()
        faults: list[object] = []
        pids: list[int] = []
        for run in runs:
            history.calls.extend(run.history.calls)
            history.events.extend(run.history.events)
            faults.extend(run.faults)
            pids.extend(spawned_pids(run.history.events))
        if runs:
            history.origin = runs[0].history.origin
            history.origin_wall = runs[0].history.origin_wall
        return check(
            history,
            executions=self.servers.executions(),
            faults=faults,
            processes=pids,
            **self.options,
        )

    def report(self, verdict: Any) -> Path:  # noqa: ANN401
        """Write the JSON and HTML reports of the runs; the HTML page's path."""
        from ..faults import write_html, write_json

        self.report_dir.mkdir(parents=True, exist_ok=True)
        runs = self.servers.runs
        history = runs[0].history if len(runs) == 1 else None
        faults = [f for run in runs for f in run.faults]
        if history is None:
            from ..faults import CallHistory

            history = CallHistory()
            for run in runs:
                history.calls.extend(run.history.calls)
                history.events.extend(run.history.events)
            if runs:
                history.origin = runs[0].history.origin
                history.origin_wall = runs[0].history.origin_wall
        write_json(self.report_dir / "report.json", verdict, history, faults=faults)
        page = self.report_dir / "report.html"
        write_html(page, verdict, history, faults=faults)
        return page


@pytest.fixture
async def mcp_servers(tmp_path: Path) -> AsyncIterator[FixtureServers]:
    """Fixture MCP servers and supervisors over them, for one test."""
    directory = tmp_path / "mcp-servers"
    directory.mkdir()
    async with AsyncExitStack() as stack:
        yield FixtureServers(directory, stack)


@pytest.fixture
async def mcp_checker(mcp_servers: FixtureServers, tmp_path: Path) -> AsyncIterator[CallChecker]:
    """Fails the test, at its end, on a lost or duplicated call (and the other problems
    :func:`~supervisor.faults.check` finds) in the runs of ``mcp_servers``."""
    checker = CallChecker(mcp_servers, tmp_path / "mcp-report")
    yield checker
    if not mcp_servers.runs:
        return
    verdict = checker.verdict()
    if not verdict.ok:
        page = checker.report(verdict)
        lines = "\n".join(f"  - {problem}" for problem in verdict.problems)
        pytest.fail(
            f"the call checker found problems ({verdict.summary()}):\n{lines}\n"
            f"report: {os.fspath(page)}",
            pytrace=False,
        )
