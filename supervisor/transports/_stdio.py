"""A local MCP server over stdio: spawned, watched and shut down by the transport.

:class:`StdioTransport` is an SDK ``Transport`` — an async context manager yielding the
``(read_stream, write_stream)`` pair of ``SessionMessage`` that ``mcp.Client`` drives —
with what the SDK's own lacks: it *reports how the connection ended* (``closed`` is set
when the process exited, stdout ended or the server broke the protocol, and ``failure``
says why), so the server actor learns of a death from the transport itself rather than
from a request that later fails. It spawns the server in its own process group, exposes
its ``pid``, its process family, its exit code and a ring buffer of its stderr lines (an
exit's reason names the line that says what went wrong: :mod:`._diagnosis`), and shuts
it down in the MCP spec's order: close stdin, wait, SIGTERM to the group, wait, SIGKILL.
With a server's fault injection (``faults=``) each message in either direction passes
through its :class:`~supervisor.transports._faults.FaultLink` first, at the transport's fault
point (docs/faults.md).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import subprocess
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import trio
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from .._sdk import TransportStreams
from ..config._limits import (
    DEFAULT_MAX_CATALOG_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_TOOLS_PER_SERVER,
)
from ..errors import BoundExceeded, ProtocolViolation, ServerExited, TransportError
from ..log import get_logger, redact
from . import _bounds, _children
from ._diagnosis import downloader, error_line
from ._errors import translate
from ._oversize import Skipped, too_large
from ._pages import PageGuard, refusal
from ._programs import command_problem, find_program
from ._proxy import FilteringProxy
from ._receipts import Answers, Receipt, ReceiptStream
from ._sandbox import SandboxLaunch, sandbox_problem
from ._stderr import PROBE_METHOD, StderrTail, pending

if TYPE_CHECKING:
    from ..config._model import Resources, SandboxConfig
    from ._faults import FaultLink, Faults

log = get_logger("supervisor.transports")

#: Default bound on one JSON-RPC message (the config's limits).
MAX_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES
#: How long a server gets to exit after its stdin closes, then after SIGTERM.
GRACE_SECONDS = 2.0
KILL_AFTER_SECONDS = 2.0
#: How many stderr lines a transport keeps.
STDERR_LINES = 200
_PREVIEW = 120

_ToSession = anyio.abc.ObjectSendStream[SessionMessage | Exception]


#: Bytes read from a server's stdout at a time.
_READ_CHUNK = 65536


#: How long an exit's report waits for the rest of the process's stderr.
_STDERR_DRAIN_S = 1.0
#: How many of its last stderr lines a handshake timeout's error shows.
_STALLED_LINES = 3


def child_environment(
    env: Mapping[str, str] | None = None, *, inherit_env: bool = False
) -> dict[str, str]:
    """The environment a :class:`StdioTransport` gives its process: a minimal platform
    environment (``PATH``, ``HOME``, … as the SDK chooses), or all of :data:`os.environ`
    with ``inherit_env``, and then ``env`` over it."""
    base = dict(os.environ) if inherit_env else get_default_environment()
    return base | dict(env or {})


class StdioTransport:
    """Spawn an MCP server and talk to it over its stdin and stdout.

    The child gets a minimal platform environment (``PATH``, ``HOME``, … as the SDK
    chooses) plus ``env`` — not the whole parent environment, unless ``inherit_env`` —
    and runs in its own process group, so shutdown reaches anything it spawned. On Linux it
    dies with this process (``PR_SET_PDEATHSIG``), and shutdown also reaches its processes
    outside the group (:mod:`supervisor.transports._children`).

    While entered: ``pid`` is the server's pid (``on_spawn`` hears it), each stderr line
    (decoded, redacted) goes to ``on_stderr`` and into ``stderr_tail`` (which leaves out what
    the server wrote about the client's ``server/discover`` probe, as an mcp 1.x server's
    pydantic errors: see :mod:`supervisor.transports._stderr`); a line on stdout
    that is not JSON-RPC (a last one without its newline included) is a
    :class:`ProtocolViolation` that closes the connection. A line longer than
    ``max_message_bytes`` is skipped (read and dropped up to its end, never held in
    memory) and the connection stays up: if it was the answer to a request,
    that request gets an error instead (code :data:`~._oversize.RESULT_TOO_LARGE`,
    naming the limit and its size), which the supervisor raises as
    :class:`~supervisor.errors.ResultTooLarge`. ``closed`` is set when the
    connection is gone (exit, end of stdout, violation; a process that closes its stdout
    but does not exit within ``grace`` seconds is a failure) and ``failure`` holds why;
    requests still waiting then fail with the SDK's "Connection closed". Leaving closes
    stdin, waits ``grace`` seconds, sends SIGTERM to the process group, waits
    ``kill_after`` more, then SIGKILL — shielded from cancellation and bounded, so
    leaving never hangs and leaves no process behind. A server that exits on its own
    gets no request from then on, and what it started that lives on (``npm exec``'s real
    server, when the wrapper died), still holding the pipes, is stopped the same way
    before the exit is reported: it answers nothing more. :meth:`family` lists the
    running server's processes. A transport is entered once; a restart makes a new one.
    It tracks delivery: see :class:`Receipt`. On Linux, a request whose bytes are all
    still unread in the stdin pipe once the server and what it started are gone (or that
    was written once the server was being killed, when it started nothing that lives on)
    was never received: its receipt goes back to not delivered, so it can be sent again;
    one the server read even a byte of may have taken effect.

    ``resources`` bounds the server's process family (Linux; :mod:`._bounds`): its
    ``openFiles`` and ``cpuSeconds`` are set as each process's limits, and over its
    ``memory`` (the family's RSS) or ``processes`` the family is killed and the
    connection fails with :class:`~supervisor.errors.BoundExceeded`.

    ``sandbox`` runs the server under bubblewrap (:mod:`._sandbox`): its command line is
    ``bwrap … -- COMMAND ARGS``, :attr:`pid` and the family are bwrap's and below, and a
    filtering proxy (:mod:`._proxy`, :attr:`proxy`) runs in this transport's nursery when
    it allows domains. Where no sandbox can be made the transport fails to start with a
    :class:`ServerExited` that is not retryable, saying what is missing.

    ``faults``, a :class:`~._faults.Faults`, injects its plan's faults: a ``slow_start``
    delays the spawn; each line read from stdout is carried through a
    :class:`~._faults.FaultLink` towards the session before it is parsed (an injected
    garbage line is the :class:`ProtocolViolation` a real one is), and each message
    written to stdin the other way. The link's target is the process group: ``kill`` is
    SIGKILL (a crash, reported as one), ``hang`` is SIGSTOP until SIGCONT (and a stopped
    server is resumed before it is shut down), closing the way to the server closes its
    stdin, closing the way back ends the read side. A request handed to the link counts
    as delivered: whatever happens to it next happens on the server's side of the pipe.
    Without ``faults`` nothing of this runs.
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
        self.env = dict(env or {})
        self.cwd = cwd
        self.inherit_env = inherit_env
        self.name = name or command
        self.on_stderr = on_stderr
        self.on_spawn = on_spawn
        self.max_message_bytes = max_message_bytes
        self.grace = grace
        self.kill_after = kill_after
        self.pid: int | None = None
        self.returncode: int | None = None
        #: its last stderr lines, less what it wrote about our protocol probe (see
        #: :mod:`supervisor.transports._stderr`)
        self.stderr_tail = StderrTail(stderr_lines)
        self._probe_id: types.RequestId | None = None  # the first server/discover's id
        self._probed = False  # only the first is the handshake's (later ones are pings)
        # Set once stderr reached its end: an exit is reported after it (with its last line).
        self._stderr_done = trio.Event()
        self.closed = trio.Event()
        self.failure: TransportError | None = None
        #: which requests the server answered (every message read is the server's)
        self.answers = Answers()
        self._pages = PageGuard(max_items=max_items, max_bytes=max_catalog_bytes)
        self._process: trio.Process | None = None
        self._stack: AsyncExitStack | None = None
        self._stopping = False  # our own shutdown: the exit it causes is no failure
        self._orphans_ended: trio.Event | None = None  # set once an exit's family is ended
        self._tail_at_stop: list[str] | None = None  # what it had said when we stopped it
        self._mark = _children.spawn_mark()  # what its descendants inherit (see _children)
        self.faults = faults
        self._fault_point: _FaultPoint | None = None
        #: bytes written into its stdin so far, and where each request's first byte went
        #: (by its receipt): what is still unread once it is gone was never received
        self._stdin_written = 0
        self._stdin_starts: weakref.WeakKeyDictionary[Receipt, int] = weakref.WeakKeyDictionary()
        #: requests written when the server was already being killed (see _dying), and
        #: whether it left processes of its own behind, which may have read them
        self._stdin_late: weakref.WeakSet[Receipt] = weakref.WeakSet()
        self._left_family = False
        self._unread_counted = False
        #: its resource bounds (:mod:`._bounds`), and the one its family went over:
        #: (``"memory"`` or ``"processes"``, what it used, the bound)
        self.resources = resources
        self._over: tuple[str, int, int] | None = None
        #: its sandbox (:mod:`._sandbox`), that spawn's files, and its proxy (if any)
        self.sandbox = sandbox
        self._launch: SandboxLaunch | None = None
        self.proxy: FilteringProxy | None = None

    def __repr__(self) -> str:
        return f"<StdioTransport {self.name!r} pid={self.pid}>"

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

    def _environment(self) -> dict[str, str]:
        return child_environment(self.env, inherit_env=self.inherit_env)

    def _fail(self, error: TransportError) -> None:
        if self.failure is None:
            self.failure = error
        self.closed.set()

    @asynccontextmanager
    async def _run(self) -> AsyncIterator[TransportStreams]:
        if self.faults is not None:
            for action in self.faults.decide_start():  # slow_start: the spawn waits
                await trio.sleep((action.ms or 0.0) / 1000)
        argv, serve_proxy = [self.command, *self.args], None
        if self.sandbox is not None:
            argv, serve_proxy = await self._sandboxed(self.sandbox)
        try:
            process = await _children.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._environment(),
                mark=self._mark,
                cwd=self.cwd,
                rlimits=_bounds.rlimits(self.resources) if _children.LINUX else (),
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL, or text the OS cannot hold
            self._close_sandbox()
            raise translate(exc, server=self.name, starting=self.command) from exc
        self._process = process
        self.pid = process.pid
        if self.on_spawn is not None:
            self.on_spawn(process.pid)
        # No await until the nursery is entered: a cancellation here would leak it.
        to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        raw_write, from_session = anyio.create_memory_object_stream[
            tuple[Receipt | None, SessionMessage, str]
        ](0)
        write_stream = ReceiptStream(raw_write, self.answers, self.name)
        try:
            async with trio.open_nursery() as nursery:
                link = None
                if self.faults is not None:
                    point = self._fault_point = _FaultPoint(self, process, to_session)
                    link = self.faults.open_link(point, nursery, to_client=point.to_client)
                nursery.start_soon(self._read_stdout, process, to_session, link)
                nursery.start_soon(self._write_stdin, process, from_session, link)
                nursery.start_soon(self._read_stderr, process)
                nursery.start_soon(self._watch_exit, process, to_session)
                if serve_proxy is not None:
                    nursery.start_soon(serve_proxy)
                if _children.LINUX and self.resources is not None:
                    nursery.start_soon(self._watch_bounds, process)
                try:
                    yield read_stream, write_stream
                finally:
                    self._stopping = True
                    self._tail_at_stop = list(self.stderr_tail)
                    if link is not None:
                        link.retire()
                    with trio.CancelScope(shield=True):
                        await self._stop(process)
                        for stream in (read_stream, raw_write, to_session, from_session):
                            await stream.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            # Belt and braces: whatever happened above, the group gets no reprieve.
            self._kill_group(signal.SIGKILL)
            self._close_sandbox()

    async def _sandboxed(
        self, sandbox: SandboxConfig
    ) -> tuple[list[str], Callable[[], Awaitable[None]] | None]:
        """The command line that runs the server in its sandbox, and what serves its
        proxy (when it has allowed domains: its socket is listening on return). Raises
        :class:`ServerExited` (not retryable) when no sandbox can be made here, or the
        command is not found: the server never runs unconfined."""
        problem = await trio.to_thread.run_sync(sandbox_problem)
        if problem is not None:
            raise ServerExited(
                f"MCP server {self.name!r} asks for a sandbox (sandboxEnabled), which cannot "
                f"be made here: {problem}",
                exit_code=None,
                retryable=False,
            )
        missing = command_problem(self.command, env=self._environment(), cwd=self.cwd)
        if missing is not None:
            raise ServerExited(
                f"cannot start MCP server {self.name!r}: {redact(missing)}",
                exit_code=None,
                retryable=False,
            )
        launch = self._launch = SandboxLaunch(sandbox)
        try:
            program = find_program(self.command, env=self._environment(), cwd=self.cwd)
            argv = launch.argv(self.command, self.args, self.cwd, program=program)
            for path in launch.skipped:
                log.info("sandbox path not found: skipped", server=self.name, path=path)
            if launch.socket_path is None:
                return argv, None
            listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listening.bind(launch.socket_path)
                listening.listen(64)
            except OSError:
                listening.close()
                raise
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(listening))
            self.proxy = FilteringProxy(self.name, sandbox.allowed_domains, sandbox.denied_domains)
            return argv, partial(self.proxy.serve, listener)
        except OSError as exc:
            self._close_sandbox()
            raise ServerExited(
                f"cannot make the sandbox of MCP server {self.name!r}: {exc}",
                exit_code=None,
            ) from exc

    def _close_sandbox(self) -> None:
        if self._launch is not None:
            self._launch.close()

    async def _read_stdout(
        self, process: trio.Process, to_session: _ToSession, link: FaultLink | None = None
    ) -> None:
        assert process.stdout is not None
        point = self._fault_point
        buffer = bytearray()
        limit = self.max_message_bytes
        skipping: Skipped | None = None  # a line over the limit, being read past
        try:
            while True:
                chunk = await process.stdout.receive_some(_READ_CHUNK)
                ended = not chunk
                if ended:  # a last line without its newline is a line all the same
                    if skipping is None and not buffer:
                        break
                    chunk = b"\n"
                if skipping is not None:
                    end = chunk.find(b"\n")
                    skipping.add(chunk if end < 0 else chunk[:end])
                    if end < 0:
                        continue
                    await self._skipped(skipping, to_session)
                    skipping, chunk = None, chunk[end + 1 :]
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    with memoryview(buffer) as view:
                        line = bytes(view[:end])
                    del buffer[: end + 1]
                    if len(line) > limit:
                        await self._skipped(Skipped(line), to_session)
                    elif not line.strip():
                        continue
                    elif link is None:
                        message = self._parse(line)
                        del line  # the message is what lives on (a refused page: not even that)
                        await to_session.send(message)
                        del message
                    else:
                        assert point is not None
                        await link.carry(_TO_CLIENT, line, point.to_client, point.to_server)
                        if point.read_closed:
                            return  # a violation or an injected close ended the read side
                    line = b""
                if len(buffer) > limit:
                    skipping = Skipped(bytes(buffer))
                    buffer.clear()
                if buffer.__alloc__() > 2 * _READ_CHUNK and len(buffer) <= _READ_CHUNK:
                    buffer = bytearray(buffer)  # a long line was read: give its room back
                if ended:
                    break
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
            if process.returncode is None and not self._stopping:
                self._fail(
                    TransportError(
                        f"MCP server {self.name!r} (pid {self.pid}) closed its stdout but "
                        "is still running; stdout carries its MCP messages, so it can no "
                        "longer answer"
                    )
                )
            else:
                await self._wait_exit(process)
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await to_session.aclose()

    async def _skipped(self, skipped: Skipped, to_session: _ToSession) -> None:
        """A line over ``max_message_bytes`` was read past: answer its request with an
        error, if it was a response whose id can be found; otherwise only log it."""
        limit = self.max_message_bytes
        request_id = skipped.response_id()
        log.warning(
            "message over maxMessageBytes skipped",
            server=self.name,
            size=skipped.size,
            limit=limit,
            request_id=request_id,
        )
        if request_id is None:
            return
        error = too_large(skipped.size, limit)
        await to_session.send(
            SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        )

    def _parse(self, line: bytes) -> SessionMessage:
        refused = self._pages.check(line)
        if refused is not None:
            # Over the catalog limits: never parsed, answered with an error instead.
            parsed = refusal(refused, server=self.name)
            self.answers.received(parsed)
            return parsed
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            preview = redact(line[:_PREVIEW].decode("utf-8", "replace"))
            raise ProtocolViolation(
                f"MCP server {self.name!r} wrote a line to stdout that is not a JSON-RPC "
                f"message: {preview!r}; stdout is reserved for MCP messages, so the server "
                "must log to stderr"
            ) from None
        if (
            self._probe_id is not None
            and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id == self._probe_id
        ):
            self._probe_id = None
            refused = isinstance(message, types.JSONRPCError)
            self.stderr_tail.probe_answered(refused, self._stderr_pending())
        parsed = SessionMessage(message)
        self.answers.received(parsed)
        return parsed

    def _sending(self, message: SessionMessage) -> None:
        """Note the connection's first protocol probe, and each listing request, on its
        way to the server."""
        request = message.message
        if isinstance(request, types.JSONRPCRequest):
            self._pages.sent(request.method, request.id)
        if (
            isinstance(request, types.JSONRPCRequest)
            and request.method == PROBE_METHOD
            and not self._probed
        ):
            self._probed = True
            self._probe_id = request.id
            self.stderr_tail.probe_sent(self._stderr_pending())

    def _stderr_pending(self) -> int:
        stderr = None if self._process is None else self._process.stderr
        return pending(stderr.fileno()) if isinstance(stderr, trio.lowlevel.FdStream) else 0

    async def _write_stdin(
        self,
        process: trio.Process,
        from_session: anyio.abc.ObjectReceiveStream[tuple[Receipt | None, SessionMessage, str]],
        link: FaultLink | None = None,
    ) -> None:
        # Each message comes written as JSON by its sender (ReceiptStream): one that
        # cannot be failed there, alone, and never reaches this task.
        assert process.stdin is not None
        point = self._fault_point
        # Its /proc status, held open: read again for each request (see _dying).
        status = _status_fd(process.pid) if _children.LINUX and link is None else None
        try:
            async for receipt, message, data in from_session:
                if process.returncode is not None:
                    # It exited: what it started may live on, holding the pipes (a
                    # launcher's real server), and gets no request; it is being stopped.
                    return  # (the request stays undelivered)
                if receipt is not None and not receipt.deliver():
                    continue  # given up as never sent (and sent again elsewhere): not now
                self._sending(message)
                if link is not None:
                    assert point is not None  # the link is the server's side of the pipe
                    await link.carry(_TO_SERVER, data.encode(), point.to_server, point.to_client)
                    continue
                start = self._stdin_written
                if receipt is not None:  # a listing's pages: where the first one went
                    self._stdin_starts.setdefault(receipt, start)
                    if status is not None and _dying(status):
                        self._stdin_late.add(receipt)
                try:
                    await self._send_line(process.stdin, data.encode() + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    # The pipe refused it. None of it went in: never received. Some of it
                    # (on Linux, where what is left unread is counted once the process
                    # is gone: _count_unread): the server may have read that part.
                    if receipt is not None and (
                        self._stdin_written == start or not _children.LINUX
                    ):
                        receipt.delivered = False
                    raise
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the process is gone: its exit is reported by _watch_exit
        finally:
            if status is not None:
                os.close(status)

    async def _send_line(self, stdin: trio.abc.SendStream, line: bytes) -> None:
        """Write ``line`` into stdin as ``send_all`` does, counting each byte as it goes in
        (a write the pipe refuses half-way leaves the count exact)."""
        if not isinstance(stdin, trio.lowlevel.FdStream):
            await stdin.send_all(line)
            self._stdin_written += len(line)
            return
        fd = stdin.fileno()
        await trio.lowlevel.checkpoint()
        with memoryview(line) as view:
            sent = 0
            while sent < len(line):
                try:
                    with view[sent:] as rest:
                        count = os.write(fd, rest)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(fd)  # closed meanwhile: ClosedResourceError
                    continue
                except OSError as exc:
                    if exc.errno == errno.EBADF:
                        raise trio.ClosedResourceError("stdin was closed") from None
                    raise trio.BrokenResourceError from exc
                sent += count
                self._stdin_written += count

    def _count_unread(self, process: trio.Process) -> None:
        """The server and what it started are gone (it exited on its own): each request
        whose bytes are all still unread in its stdin pipe was never received — its
        receipt goes back to not delivered, so it may be sent again. A request it read
        even a byte of stays delivered. Counted once, on Linux (``FIONREAD`` on the pipe's
        write end), and only when nothing holds the pipe's read end any more (then no
        byte more can be read, nor written); elsewhere, or with a fault link between,
        nothing changes."""
        if self._unread_counted or self._stopping or self._fault_point is not None:
            return
        self._unread_counted = True
        stdin = process.stdin
        if not _children.LINUX or not isinstance(stdin, trio.lowlevel.FdStream):
            return
        try:
            fd = stdin.fileno()
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            events = poller.poll(0)
        except (OSError, ValueError):
            return
        if not any(mask & select.POLLERR for _, mask in events):
            return  # a reader is left (something it started that escaped): it may read on
        first_unread = self._stdin_written - pending(fd)
        for receipt, start in list(self._stdin_starts.items()):
            if start >= first_unread and receipt.delivered:
                receipt.delivered = False
        if not self._left_family:
            # Written once it was being killed: the bytes may have gone into a read its
            # thread was blocked in, but no code of its own ran after that read.
            for receipt in list(self._stdin_late):
                receipt.delivered = False

    async def _read_stderr(self, process: trio.Process) -> None:
        assert process.stderr is not None
        buffer = bytearray()
        try:
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                while True:
                    chunk = await process.stderr.receive_some(65536)
                    if not chunk:
                        break
                    # Counted before anything else runs: the probe's positions rely on it.
                    self.stderr_tail.received(len(chunk))
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        self._stderr_line(bytes(buffer[:end]), end + 1)
                        del buffer[: end + 1]
                    if len(buffer) > 65536:  # a line without end: keep it bounded
                        self._stderr_line(bytes(buffer), len(buffer))
                        buffer.clear()
            if buffer:
                self._stderr_line(bytes(buffer), len(buffer))
        finally:
            self._stderr_done.set()

    def _stderr_line(self, raw: bytes, size: int) -> None:
        line = redact(raw.decode("utf-8", "replace").rstrip("\r"))
        self.stderr_tail.add(line, size)
        if self.on_stderr is not None:
            self.on_stderr(line)

    async def _watch_exit(self, process: trio.Process, to_session: _ToSession) -> None:
        await self._wait_exit(process)
        # Wake requests waiting for a reply that will never come.
        await to_session.aclose()

    async def _wait_exit(self, process: trio.Process) -> None:
        """Wait for the process to exit; unless we stopped it, stop what it leaves
        running (:meth:`_end_orphans`); then wait for the rest of its stderr (a process
        that fails at once says why in its last lines, which may still be in the pipe),
        then report the exit. A grandchild holding stderr open delays it by at most
        :data:`_STDERR_DRAIN_S`."""
        await process.wait()
        if not self._stopping:
            await self._end_orphans(process)
            self._count_unread(process)  # before the exit is reported: see Receipt
        with trio.move_on_after(_STDERR_DRAIN_S):
            await self._stderr_done.wait()
        self._note_exit(process)

    async def _watch_bounds(self, process: trio.Process) -> None:
        """Every :data:`~._bounds.SAMPLE_S` seconds while the server runs, sum what its
        family uses: over its ``memory`` or ``processes`` bound, kill the whole family
        (``SIGKILL``; the exit is then reported as :class:`BoundExceeded`). A process of
        the family found for the first time gets the ``openFiles`` and ``cpuSeconds``
        limits too (one forked before they were set on the server keeps the old ones
        otherwise: see :mod:`._bounds`)."""
        resources = self.resources
        assert resources is not None
        limits = _bounds.rlimits(resources)
        seen: set[int] = {process.pid}
        if not resources.watched and not limits:
            return
        while True:
            await trio.sleep(_bounds.SAMPLE_S)
            if self._stopping or process.returncode is not None:
                return
            pids = _children.descendants(process.pid)
            if limits and (new := [pid for pid in pids if pid not in seen]):
                _bounds.set_rlimits(new, limits)
                seen.update(new)
            used = _bounds.usage(pids)
            if resources.memory is not None and used.rss > resources.memory:
                self._over = ("memory", used.rss, resources.memory)
            elif resources.processes is not None and used.processes > resources.processes:
                self._over = ("processes", used.processes, resources.processes)
            if self._over is not None:
                log.warning(
                    "over its resource bound: killed",
                    server=self.name,
                    resource=self._over[0],
                    used=self._over[1],
                    limit=self._over[2],
                )
                members = _children.family(process, self._mark)
                try:
                    self._kill_group(signal.SIGKILL)
                    for member in members:
                        member.signal(signal.SIGKILL)
                finally:
                    for member in members:
                        member.close()
                return

    def _note_exit(self, process: trio.Process) -> None:
        if self.returncode is not None:
            return
        self.returncode = process.returncode
        code = self.returncode
        if code is not None and code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        point = self._fault_point
        if point is not None and point.killed:
            how += " (an injected fault: kill)"
        said = error_line(list(self.stderr_tail))  # (it slices: a deque's view cannot)
        if said is None:
            last = ""
        elif said in (self.stderr_tail[-1], self.stderr_tail[-1].strip()):
            last = f"; last stderr line: {said!r}"
        else:  # an error further up: a Node stack's "Error: …" before "Node.js v20"
            last = f"; error on stderr: {said!r}"
        message = f"MCP server {self.name!r} (pid {self.pid}) {how}{last}"
        if self._stopping:
            self.closed.set()
        elif self._over is not None:
            self._fail(self._exceeded(code))
        else:
            self._fail(ServerExited(message, exit_code=code))

    def _exceeded(self, code: int | None) -> BoundExceeded:
        """The failure of a server killed over a resource bound (see :meth:`_watch_bounds`)."""
        assert self._over is not None
        resource, used, limit = self._over
        if resource == "memory":
            said = (
                f"memory {_bounds.format_bytes(used)} over its bound "
                f"{_bounds.format_bytes(limit)} (resources.memory)"
            )
        else:
            said = f"{used} processes over its bound {limit} (resources.processes)"
        return BoundExceeded(
            f"MCP server {self.name!r} (pid {self.pid}) was killed: {said}",
            resource=resource,
            used=used,
            limit=limit,
            exit_code=code,
        )

    async def _end_orphans(self, process: trio.Process) -> None:
        """The server exited on its own: stop its family — what it started that lives on
        (``npm exec``'s real server when the wrapper died), which still holds the pipes
        and would answer — as a shutdown does: SIGTERM, wait, SIGKILL (on Linux; elsewhere
        the shutdown that follows stops the group). Once per transport: a second caller
        waits for the first."""
        if self._orphans_ended is not None:
            await self._orphans_ended.wait()
            return
        self._orphans_ended = trio.Event()
        try:
            if _children.LINUX:
                members = _children.family(process, self._mark)
                self._left_family = bool(members)
                try:
                    await _children.end_family(process, members, self.kill_after)
                finally:
                    for member in members:
                        member.close()
        finally:
            self._orphans_ended.set()

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
        lines before it was stopped (up to :data:`_STALLED_LINES`) and, when its command
        is a launcher that fetches its package on a first run (``npx``, ``uvx``,
        ``pipx run`` …), that it may still have been doing so. Starts with ``"; "``, or
        is empty."""
        tail = self.stderr_tail if self._tail_at_stop is None else self._tail_at_stop
        said = [line for line in tail if line.strip()][-_STALLED_LINES:]
        text = ""
        if len(said) == 1:
            text = f"; last stderr line: {said[0]!r}"
        elif said:
            text = "; last stderr lines: " + ", ".join(repr(line) for line in said)
        launcher = downloader(self.command, self.args)
        if launcher is not None:
            text += (
                f"; {launcher} may still have been fetching the package (a first run "
                "downloads it): raise initTimeout, or install the package first"
            )
        return text

    async def _stop(self, process: trio.Process) -> None:
        """Close stdin and wait; then the SDK's escalation for the whole process group
        (SIGTERM, wait for every member, SIGKILL) — which also reaches members that
        outlive the leader; every wait bounded. On Linux the escalation also reaches the
        server's family outside its group (:func:`~supervisor.transports._children.family`),
        looked for both before stdin closes (while the server's descendants are still below
        it) and after (what it left to this process)."""
        point = self._fault_point
        if point is not None and point.stopped:
            point.resume()  # an injected hang: a stopped process cannot exit
        members = _children.family(process, self._mark)
        try:
            if process.returncode is None:
                assert process.stdin is not None
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await process.stdin.aclose()
                with trio.move_on_after(self.grace):
                    await process.wait()
            if _children.LINUX:
                known = {member.pid for member in members}
                for member in _children.family(process, self._mark):
                    if member.pid in known:
                        member.close()
                    else:
                        members.append(member)
                await _children.end_family(process, members, self.kill_after)
            else:
                # typed for anyio's Process, it reads only pid and returncode: trio's has both
                await terminate_posix_process_tree(process, self.kill_after)  # pyright: ignore[reportArgumentType]
        finally:
            for member in members:
                member.close()
        with trio.move_on_after(self.kill_after):
            await process.wait()
        if self.returncode is None and process.returncode is not None:
            self._note_exit(process)

    def _kill_group(self, sig: signal.Signals) -> None:
        if self.pid is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)


def _status_fd(pid: int) -> int | None:
    """An open ``/proc/PID/status`` of process ``pid`` for :func:`_dying` (``None`` when
    it cannot be opened): read again from its start, it tells the process's state then."""
    try:
        return os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


#: SIGKILL's bit in the pending-signal masks of ``/proc/PID/status``.
_KILL_BIT = 1 << (signal.SIGKILL - 1)


def _dying(status: int) -> bool:
    """Whether the process whose ``/proc/PID/status`` is open as ``status`` is being
    killed (Linux): SIGKILL is pending for it (``SigPnd``, or ``ShdPnd`` for the whole
    process). It runs no code of its own from then on — not even to handle what a read one
    of its threads was blocked in returns. ``False`` when that cannot be told."""
    try:
        text = os.pread(status, 4096, 0)  # about 1.5 KiB: its whole state, made anew
    except OSError:
        return False  # gone (reaped): its exit is reported, and counted, elsewhere
    for field in (b"\nSigPnd:", b"\nShdPnd:"):
        at = text.find(field)
        end = text.find(b"\n", at + 1)
        if at < 0 or end < 0:
            return False
        try:
            if int(text[at + len(field) : end], 16) & _KILL_BIT:
                return True
        except ValueError:
            return False
    return False


#: The directions a message travels (as :mod:`supervisor.config._plan` names them).
_TO_SERVER = "to_server"
_TO_CLIENT = "to_client"


class _FaultPoint:
    """Where a :class:`StdioTransport`'s fault link meets its process: the link's two
    ways to send (towards the session, into stdin) and its
    :class:`~supervisor.transports._faults.FaultTarget` (the process group and its pipes).

    Sending never raises: a line for a session that is gone, or for a stdin that is
    closed, is dropped (the exit, if that is why, is reported by the transport).
    """

    def __init__(
        self, transport: StdioTransport, process: trio.Process, to_session: _ToSession
    ) -> None:
        self.transport = transport
        self.process = process
        self.to_session = to_session
        self._stdin = trio.Lock()  # the link writes from more than one task
        #: the read side ended: a line that is not JSON-RPC, or an injected close
        self.read_closed = False
        self.stopped = False
        self.killed = False

    async def to_client(self, line: bytes) -> None:
        """Parse ``line`` and hand it to the session, as an unfaulted transport does: a
        line that is not JSON-RPC fails the connection with a :class:`ProtocolViolation`."""
        if self.read_closed:
            return
        transport = self.transport
        try:
            message = transport._parse(line)
        except ProtocolViolation as exc:
            transport._fail(exc)
            await self._end_read_side()
            return
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.to_session.send(message)

    async def to_server(self, line: bytes) -> None:
        """Write ``line`` (one message, no newline) into the server's stdin."""
        stdin = self.process.stdin
        assert stdin is not None
        if self.process.returncode is not None:
            return  # it exited: what it left running gets nothing (see _write_stdin)
        async with self._stdin:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stdin.send_all(line + b"\n")

    async def _end_read_side(self) -> None:
        self.read_closed = True
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.to_session.aclose()

    # -- the link's Target -----------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL to the process group: a crash, reported when the process exits."""
        self.killed = True
        self.transport._kill_group(signal.SIGKILL)

    def stop(self) -> None:
        """SIGSTOP to the process group: the server stops answering."""
        self.stopped = True
        self.transport._kill_group(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT to the process group."""
        self.stopped = False
        self.transport._kill_group(signal.SIGCONT)

    async def close(self, direction: str) -> None:
        """Close the server's stdin (``to_server``), or end the read side
        (``to_client``): the connection is then lost, as when stdout ends."""
        if direction == _TO_SERVER:
            stdin = self.process.stdin
            assert stdin is not None
            async with self._stdin:
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await stdin.aclose()
            return
        transport = self.transport
        transport._fail(
            TransportError(
                f"the connection to MCP server {transport.name!r} was closed "
                "(an injected fault: close_stream)"
            )
        )
        await self._end_read_side()
