"""A local MCP server over stdio: spawned, watched and shut down by the transport.

:class:`StdioTransport` is an SDK ``Transport`` — an async context manager yielding the
``(read_stream, write_stream)`` pair of ``SessionMessage`` that ``mcp.Client`` drives —
with what the SDK's own lacks: it *reports how the connection ended* (``closed`` is set
when the process exited, stdout ended or the server broke the protocol, and ``failure``
says why), so the server actor learns of a death from the transport itself rather than
from a request that later fails. It runs one connection and reports how it ended; its
parts, each in a module of its own, do the rest:

* :class:`~._spawn.Spawner` — starting the process: command line, environment, sandbox;
* :class:`~._stdout.StdoutReader` — stdout framed into the session's messages, each line
  bounded;
* :class:`~._conversation.Conversation` — each message checked as it crosses the pipes;
* :class:`~._stdin.StdinWriter` — stdin written, each byte counted for delivery
  (:class:`~._intake.Intake`);
* :class:`~._forward.Forwarding` — requests forwarded as JSON past the SDK's session;
* :class:`~._capture.StderrCapture` — stderr read into the tail that failures quote;
* :class:`~._bounded.BoundsWatch` — the process family held to its resource bounds;
* :class:`~._group.ProcessGroup` — the process family ended, leaving no process behind;
* :class:`~._fault_point.FaultPoint` — where a fault link meets the process.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
import trio
from mcp.shared.message import SessionMessage

from .._sdk import TransportStreams
from ..config._limits import (
    DEFAULT_MAX_CATALOG_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_TOOLS_PER_SERVER,
)
from ..errors import ProtocolViolation, ServerExited, TransportError
from . import _children
from ._bounded import BoundsWatch
from ._capture import StderrCapture
from ._conversation import Conversation
from ._errors import translate
from ._fault_point import FaultPoint, ToSession
from ._group import ProcessGroup
from ._receipts import Answers, ReceiptStream, Written
from ._spawn import Spawner
from ._spawn import child_environment as child_environment
from ._stdin import StdinWriter
from ._stdout import StdoutReader

if TYPE_CHECKING:
    from ..config._model import Resources, SandboxConfig
    from ._faults import FaultLink, Faults
    from ._proxy import FilteringProxy

#: Default bound on one JSON-RPC message (the config's limits).
MAX_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES
#: How long a server gets to exit after its stdin closes, then after SIGTERM.
GRACE_SECONDS = 2.0
KILL_AFTER_SECONDS = 2.0
#: How many stderr lines a transport keeps.
STDERR_LINES = 200
#: How long an exit's report waits for the rest of the process's stderr.
_STDERR_DRAIN_S = 1.0


class StdioTransport:
    """Spawn an MCP server and talk to it over its stdin and stdout.

    The child gets a minimal platform environment (``PATH``, ``HOME``, … as the SDK
    chooses) plus ``env`` — not the whole parent environment, unless ``inherit_env`` —
    and runs in its own process group, so shutdown reaches anything it spawned. On Linux it
    dies with this process (``PR_SET_PDEATHSIG``), and shutdown also reaches its processes
    outside the group (:mod:`supervisor.transports._children`).

    While entered: ``pid`` is the server's pid (``on_spawn`` hears it), each stderr line
    (decoded, redacted) goes to ``on_stderr`` and into ``stderr_tail`` (which leaves out
    what the server wrote about the client's ``server/discover`` probe, as an mcp 1.x
    server's pydantic errors: see :mod:`supervisor.transports._stderr`); a line on stdout
    that is not JSON-RPC (a last one without its newline included) is a
    :class:`ProtocolViolation` that closes the connection. A line longer than
    ``max_message_bytes`` is skipped, never held in memory, and the connection stays up: the
    request it answered gets an error instead (:class:`~._stdout.StdoutReader`), which the
    supervisor raises as :class:`~supervisor.errors.ResultTooLarge`. ``closed`` is set when
    the connection is gone (exit, end of stdout, violation; a process that closes its stdout
    but does not exit within ``grace`` seconds is a failure) and ``failure`` holds why;
    requests still waiting then fail with the SDK's "Connection closed". Leaving closes
    stdin, waits ``grace`` seconds, sends SIGTERM to the process group, waits ``kill_after``
    more, then SIGKILL — shielded from cancellation and bounded, so leaving never hangs and
    leaves no process behind. A server that exits on its own gets no request from then on,
    and what it started that lives on (``npm exec``'s real server, when the wrapper died),
    still holding the pipes, is stopped the same way before the exit is reported: it answers
    nothing more. :meth:`family` lists the running server's processes. A transport is
    entered once; a restart makes a new one. It tracks delivery (:class:`~._receipts.Receipt`;
    :class:`~._stdin.StdinWriter`). On Linux, a request whose bytes are all still unread in
    the stdin pipe once the server and what it started are gone (or that was written once
    the server was being killed, when it started nothing that lives on) was never received:
    its receipt goes back to not delivered, so it can be sent again; one the server read
    even a byte of may have taken effect.

    ``resources`` bounds the server's process family (Linux: :class:`~._bounded.BoundsWatch`):
    over its ``memory`` or ``processes`` the family is killed and the connection fails
    with :class:`~supervisor.errors.BoundExceeded`. ``sandbox`` runs the server under
    bubblewrap (:class:`~._spawn.Spawner`): :attr:`pid` and the family are bwrap's and
    below, and its filtering proxy (:attr:`proxy`) runs in this transport's nursery.

    ``faults``, a :class:`~._faults.Faults`, injects its plan's faults: a ``slow_start``
    delays the spawn, and each message in either direction is carried through a
    :class:`~._faults.FaultLink` (an injected garbage line is the
    :class:`ProtocolViolation` a real one is), whose target is the process group
    (:class:`~._fault_point.FaultPoint`; a stopped server is resumed before it is shut
    down). A request handed to the link counts as delivered: whatever happens to it next
    happens on the server's side of the pipe. Without ``faults`` nothing of this runs.
    """

    tracks_delivery = True

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = False,
        name: str | None = None,
        on_stderr: Callable[[str], None] | None = None,
        on_spawn: Callable[[int], None] | None = None,
        stderr_lines: int = STDERR_LINES,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_items: int = DEFAULT_MAX_TOOLS_PER_SERVER,
        max_catalog_bytes: int = DEFAULT_MAX_CATALOG_BYTES,
        grace: float = GRACE_SECONDS,
        kill_after: float = KILL_AFTER_SECONDS,
        faults: Faults | None = None,
        resources: Resources | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.name = name = name or command
        self.on_spawn = on_spawn
        self.max_message_bytes = max_message_bytes
        self.grace = grace
        self.kill_after = kill_after
        self.faults = faults
        self.pid: int | None = None
        self.returncode: int | None = None
        self.closed = trio.Event()
        self.failure: TransportError | None = None
        #: which requests the server answered (every message read is the server's)
        self.answers = Answers()
        self.group = group = ProcessGroup(grace=grace, kill_after=kill_after)
        self.spawner = Spawner(
            command,
            args,
            name=name,
            env=env or {},
            cwd=cwd,
            inherit_env=inherit_env,
            mark=group.mark,
            resources=resources,
            sandbox=sandbox,
        )
        self.stderr_capture = stderr = StderrCapture(stderr_lines, on_stderr)
        #: its last stderr lines, less what it wrote about our protocol probe (see
        #: :mod:`supervisor.transports._stderr`)
        self.stderr_tail = stderr.tail
        self.conversation = talk = Conversation(
            name, self.answers, stderr, max_items=max_items, max_bytes=max_catalog_bytes
        )
        self.forwarding = talk.forwarding  #: those forwarded past the session (:mod:`._forward`)
        self.stdout_reader = StdoutReader(name, max_message_bytes, talk.parse, talk.forwarding)
        self.stdin_writer = StdinWriter(talk.sending)
        self.bounds = None if resources is None else BoundsWatch(name, resources, group)
        self._process: trio.Process | None = None
        self._stack: AsyncExitStack | None = None
        self._fault_point: FaultPoint | None = None

    def __repr__(self) -> str:
        return f"<StdioTransport {self.name!r} pid={self.pid}>"

    @property
    def proxy(self) -> FilteringProxy | None:
        """The filtering proxy of its sandbox, while it serves one."""
        return self.spawner.proxy

    async def __aenter__(self) -> TransportStreams:
        if self._stack is not None or self.closed.is_set():
            raise RuntimeError("a StdioTransport can be entered only once")
        stack = AsyncExitStack()
        streams = await stack.enter_async_context(self._run())
        self._stack = stack
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(exc_type, exc, tb)

    def _fail(self, error: TransportError) -> None:
        if self.failure is None:
            self.failure = error
        self.closed.set()

    @asynccontextmanager
    async def _run(self) -> AsyncIterator[TransportStreams]:
        if self.faults is not None:
            for action in self.faults.decide_start():  # slow_start: the spawn waits
                await trio.sleep((action.ms or 0.0) / 1000)
        process, serve_proxy = await self.spawner.spawn()
        self._process = self.group.process = process
        self.stderr_capture.stream = process.stderr
        self.pid = process.pid
        if self.on_spawn is not None:
            self.on_spawn(process.pid)
        # No await until the nursery is entered: a cancellation here would leak it.
        to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        raw_write, from_session = anyio.create_memory_object_stream[Written](0)
        now = self.stdin_writer.write_now  # (a message written in its sender's task, if it can)
        write_stream = ReceiptStream(raw_write, self.answers, self.name, now)
        self.forwarding.attach(raw_write, now)
        talk = self.conversation
        try:
            async with trio.open_nursery() as nursery:
                link = point = None
                if self.faults is not None:
                    point = FaultPoint(self.name, self.group, to_session, talk, self._fail)
                    self._fault_point = point
                    link = self.faults.open_link(point, nursery, to_client=point.to_client)
                nursery.start_soon(self._read_stdout, process, to_session, link, point)
                nursery.start_soon(self.stdin_writer.write, process, from_session, link, point)
                nursery.start_soon(self.stderr_capture.read)
                nursery.start_soon(self._watch_exit, process, to_session)
                if serve_proxy is not None:
                    nursery.start_soon(serve_proxy)
                if _children.LINUX and self.bounds is not None:
                    nursery.start_soon(self.bounds.watch)
                try:
                    yield read_stream, write_stream
                finally:
                    self.group.stopping = True
                    self.stderr_capture.stopping()
                    if link is not None:
                        link.retire()
                    self.forwarding.close()
                    with trio.CancelScope(shield=True):
                        if point is not None and point.stopped:
                            point.resume()  # an injected hang: a stopped process cannot exit
                        await self.group.stop()
                        self._note_exit(process)
                        for stream in (read_stream, raw_write, to_session, from_session):
                            await stream.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            # Belt and braces: whatever happened above, the group gets no reprieve.
            self.group.signal(signal.SIGKILL)
            self.spawner.close()

    async def _read_stdout(
        self,
        process: trio.Process,
        to_session: ToSession,
        link: FaultLink | None,
        point: FaultPoint | None,
    ) -> None:
        assert process.stdout is not None
        try:
            if not await self.stdout_reader.read(process.stdout, to_session, link, point):
                return  # a violation or an injected close ended the read side
        except ProtocolViolation as exc:
            self._fail(exc)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, trio.ClosedResourceError):
            pass  # the session went away, or we are shutting down
        except OSError as exc:
            failure = translate(exc, server=self.name)
            assert isinstance(failure, TransportError)
            self._fail(failure)
        else:
            # End of stdout: the process is exiting — or it closed its stdout and lives
            # on, unable to answer anything: the connection is gone either way.
            with trio.move_on_after(self.grace):
                await process.wait()
            if process.returncode is None and not self.group.stopping:
                self._fail(
                    TransportError(
                        f"MCP server {self.name!r} (pid {self.pid}) closed its stdout but "
                        "is still running; stdout carries its MCP messages, so it can no "
                        "longer answer"
                    )
                )
            else:
                await self._wait_exit(process)
        self.forwarding.close()
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await to_session.aclose()

    async def _watch_exit(self, process: trio.Process, to_session: ToSession) -> None:
        await self._wait_exit(process)
        self.forwarding.close()  # wakes requests waiting for a reply that will never come
        await to_session.aclose()

    async def _wait_exit(self, process: trio.Process) -> None:
        """Wait for the process to exit; unless we stopped it, stop what it leaves
        running and count what it never read (before the exit is reported: see
        :class:`~._receipts.Receipt`); then wait for the rest of its stderr (its last lines may say
        why it failed), at most :data:`_STDERR_DRAIN_S`; then report the exit."""
        await process.wait()
        group = self.group
        if not group.stopping:
            await group.end_orphans()
            if not group.stopping and self._fault_point is None:
                self.stdin_writer.intake.count_unread(process, left_family=group.left_family)
        with trio.move_on_after(_STDERR_DRAIN_S):
            await self.stderr_capture.done.wait()
        self._note_exit(process)

    def _note_exit(self, process: trio.Process) -> None:
        if self.returncode is not None or process.returncode is None:
            return
        self.returncode = code = process.returncode
        if self.group.stopping:
            self.closed.set()
        elif self.bounds is not None and self.bounds.over is not None:
            self._fail(self.bounds.exceeded(code))
        else:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            point = self._fault_point
            if point is not None and point.killed:
                how += " (an injected fault: kill)"
            said = self.stderr_capture.last_said()
            message = f"MCP server {self.name!r} (pid {self.pid}) {how}{said}"
            self._fail(ServerExited(message, exit_code=code))

    def family(self) -> list[int]:
        """The pids of the server's process family while it runs: its own (:attr:`pid`)
        first, then its descendants (a launcher's real server: ``npx`` runs ``npm exec``,
        which runs the server), each parent before its children; ``[]`` once it exited or
        before it started. Off Linux, its own alone."""
        process = self._process
        if process is None or self.closed.is_set() or process.returncode is not None:
            return []
        return _children.descendants(process.pid)

    def stalled(self) -> str:
        """What a handshake that timed out adds to its error: the server's last stderr
        lines before it was stopped and, for a launcher that fetches its package on a
        first run, that it may still have been doing so
        (:meth:`~._capture.StderrCapture.stalled`). Starts with ``"; "``, or is empty."""
        return self.stderr_capture.stalled(self.command, self.args)
