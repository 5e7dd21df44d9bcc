"""The chaos stdio proxy: a stdio MCP server of its own that runs another one and injects
faults between its own stdin/stdout and the other's.

Any MCP client can be tested this way — configure ``mcp-supervisor chaos --plan P --
COMMAND ARGS…`` as the server's command. The proxy spawns COMMAND in its own process
group (stderr passes through), carries each line through a :class:`Link`, and
ends as the server does: when COMMAND exits, the proxy exits with its code (``128 + N``
after signal ``N``: a ``kill`` ends it as a crashed server's would, 137). When its client
closes stdin, COMMAND's stdin is closed and it gets the MCP spec's shutdown: a wait,
SIGTERM to the group, a wait, SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import suppress
from typing import Any

import trio

from ..config._plan import TO_CLIENT, TO_SERVER, Plan
from ..errors import ProxyEnded as ProxyEnded
from ..transports._children import open_process
from ._inject._engine import FaultEngine, Injected
from ._inject._link import CallRecorder, Link

__all__ = ["ProxyEnded", "run_stdio_proxy", "server_name"]

#: How long COMMAND gets to exit after its stdin closes, then after SIGTERM.
GRACE_S = 2.0
#: Lines longer than this are passed on whole without being looked at.
MAX_LINE_BYTES = 64 * 2**20


def server_name(command: Sequence[str]) -> str:
    """The name a stdio proxy gives the server COMMAND runs: its program's file name."""
    return os.path.basename(command[0])


async def read_lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    """Each line of ``stream`` without its newline; a last line without one too."""
    buffer = bytearray()
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            chunk = b""
        if not chunk:
            if buffer.strip():
                yield bytes(buffer)
            return
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if line.strip():
                yield line


class _Writer:
    """Writes whole lines to a stream, one at a time, and can be closed once."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self.stream = stream
        self.lock = trio.Lock()
        self.closed = False

    async def send(self, line: bytes) -> None:
        if self.closed:
            return
        async with self.lock:
            try:
                await self.stream.send_all(line + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self.closed = True

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self.stream.aclose()


class _Process:
    """The link's :class:`~supervisor.faults._inject._link.Target`: COMMAND's process group
    and streams."""

    def __init__(self, process: trio.Process, to_server: _Writer, to_client: _Writer) -> None:
        self.process = process
        self.to_server = to_server
        self.to_client = to_client
        self.stopped = False

    def _signal(self, sig: signal.Signals) -> None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self.stopped = True
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.stopped = False
        self._signal(signal.SIGCONT)

    async def close(self, direction: str) -> None:
        await (self.to_server if direction == TO_SERVER else self.to_client).close()

    async def shut_down(self) -> None:
        """The MCP spec's order: stdin closed, a wait, SIGTERM, a wait, SIGKILL."""
        process = self.process
        await self.to_server.close()
        if self.stopped:
            self.resume()  # a stopped process cannot exit
        with trio.move_on_after(GRACE_S):
            await process.wait()
        if process.returncode is None:
            self._signal(signal.SIGTERM)
            with trio.move_on_after(GRACE_S):
                await process.wait()
        self._signal(signal.SIGKILL)  # the group: no member outlives the proxy
        if process.returncode is None:
            await process.wait()


async def run_stdio_proxy(
    plan: Plan,
    command: Sequence[str],
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    on_inject: Callable[[Injected], None] | None = None,
    engine: FaultEngine | None = None,
    history: Any = None,  # noqa: ANN401 - a CallHistory
) -> int:
    """Run ``command`` behind ``plan`` until it exits; return the exit code to end with.

    ``stdin``/``stdout`` default to this process's (file descriptors 0 and 1).
    ``engine`` may be passed to read its fault log afterwards; ``on_inject`` is called
    with each fault as it is injected. ``history``, a
    :class:`~supervisor.faults.CallHistory`, records every tool call the client makes as
    it lived it (:class:`CallRecorder`).

    The proxy fronts one server, named by COMMAND's file name (``mcp-server-time`` for
    ``/usr/bin/mcp-server-time``): its calls and every injected fault are recorded under
    that name — or the engine's ``server``, if it names one.
    """
    plan.check_supported("a stdio server (chaos --plan P -- COMMAND)", http=False)
    if engine is None:
        engine = FaultEngine(plan, on_inject=on_inject)
    if engine.server is None:
        engine.server = server_name(command)
    engine.start()
    if stdin is None:
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    if stdout is None:
        stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    for action in engine.decide_start():
        await trio.sleep((action.ms or 0) / 1000)
    try:
        # Its own session; on Linux it dies with this proxy (supervisor._children).
        process = await open_process(
            list(command), env=os.environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
    except FileNotFoundError:
        raise ProxyEnded(f"command not found: {command[0]!r}", 127) from None
    except PermissionError:
        raise ProxyEnded(f"command not runnable: {command[0]!r}", 126) from None
    assert process.stdin is not None and process.stdout is not None
    from_server = process.stdout
    to_server = _Writer(process.stdin)
    to_client = _Writer(stdout)
    target = _Process(process, to_server, to_client)
    calls = None
    if history is not None:
        history.start()
        calls = CallRecorder(history, server=engine.server)
    try:
        async with trio.open_nursery() as nursery:
            link = Link(engine, target, nursery, to_client=to_client.send, calls=calls)

            async def client_to_server() -> None:
                async for line in read_lines(stdin):
                    if len(line) > MAX_LINE_BYTES:
                        await to_server.send(line)
                    else:
                        await link.carry(TO_SERVER, line, to_server.send, to_client.send)
                await link.flush()
                # the client is gone: shut the server down as the MCP spec says
                await target.shut_down()

            async def server_to_client() -> None:
                async for line in read_lines(from_server):
                    if len(line) > MAX_LINE_BYTES:
                        await to_client.send(line)
                    else:
                        await link.carry(TO_CLIENT, line, to_client.send, to_server.send)
                await link.flush()

            nursery.start_soon(client_to_server)
            await server_to_client()
            await process.wait()
            nursery.cancel_scope.cancel()  # the client side waits on stdin
    finally:
        if calls is not None:
            calls.finish()
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await target.shut_down()
            await to_client.close()
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stdin.aclose()
    code = process.returncode
    assert code is not None
    return 128 - code if code < 0 else code
