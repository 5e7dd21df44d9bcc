"""Shared test helpers: a journal, a controllable probe actor, a command answered on a
pseudo-terminal, whether a process still runs, a bare socket where the command line
looks for a gateway, and the variables that keep a process's state in the suite's own
directory."""

from __future__ import annotations

import os
import pathlib
import pty
import select
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence

import attrs
import trio

from supervisor.actors import Actor, Child, ChildSpec, Normal, Shutdown


class Boom(Exception):
    """The crash our probes raise on command."""


@attrs.define
class Journal:
    """Starts and stops of probe incarnations, in order, with the trio time they happened."""

    entries: list[tuple[str, str, float]] = attrs.Factory(list)
    fail_starts: dict[str, int] = attrs.Factory(dict)
    starts_seen: dict[str, int] = attrs.Factory(dict)

    def add(self, what: str, who: str) -> None:
        self.entries.append((what, who, trio.current_time()))

    def of(self, what: str) -> list[str]:
        return [who for w, who, _ in self.entries if w == what]

    def times(self, what: str, who: str) -> list[float]:
        return [t for w, x, t in self.entries if w == what and x == who]

    def clear(self) -> None:
        self.entries.clear()


class Probe(Actor):
    """An actor that obeys casts: "crash", "normal", "shutdown"; answers calls.

    Call messages: "whoami" → (id, incarnation number); ("sleep", s) sleeps then answers;
    "hang" never answers; "raise" raises Boom to the caller.
    """

    def __init__(
        self, id: str, journal: Journal, *, concurrency: int = 1, honour_stop: bool = True
    ) -> None:
        self.id = id
        self.journal = journal
        self.max_concurrency = concurrency
        self.honour_stop = honour_stop
        self.number = journal.starts_seen.get(id, 0) + 1
        journal.starts_seen[id] = self.number
        self.cancelled_handlers = 0

    async def init(self) -> None:
        if self.journal.fail_starts.get(self.id, 0) > 0:
            self.journal.fail_starts[self.id] -= 1
            raise Boom(f"{self.id} failed to start")
        self.journal.add("start", self.id)
        self.nursery.start_soon(self._watch)

    async def _watch(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self.journal.add("stop", self.id)

    def exit(self, reason=None) -> None:  # noqa: ANN001 - test double
        super().exit(reason)

    async def handle(self, message: object) -> object:
        if message == "crash":
            raise Boom(f"{self.id} crashed")
        if message == "normal":
            self.exit(Normal())
            return None
        if message == "shutdown":
            self.exit(Shutdown())
            return None
        if message == "whoami":
            return (self.id, self.number)
        if message == "raise":
            raise Boom("handler error")
        if message == "hang":
            try:
                await trio.sleep_forever()
            finally:
                self.cancelled_handlers += 1
                self.journal.add("handler-cancelled", self.id)
        if isinstance(message, tuple) and message[0] == "sleep":
            await trio.sleep(message[1])
            return (self.id, self.number)
        return message


class Deaf:
    """Wraps a child so that it ignores graceful stop requests: only cancellation ends it."""

    def __init__(self, inner: Child) -> None:
        self.inner = inner

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED):  # noqa: ANN201
        return await self.inner.run(task_status=task_status)

    def request_stop(self) -> None:
        pass


def deaf(spec: ChildSpec) -> ChildSpec:
    """The same child spec, but its incarnations ignore stop requests."""
    start = spec.start
    return attrs.evolve(spec, start=lambda: Deaf(start()))


async def until(predicate: Callable[[], bool], timeout: float = 600.0) -> None:
    """Wait (in trio time) until ``predicate()`` holds; fail after ``timeout``."""
    with trio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - a predicate over state, in trio time
            await trio.sleep(0.001)


#: how long a command on a pseudo-terminal may take to ask, and to end once answered
TERMINAL_TIMEOUT = 60


def answer_on_a_terminal(
    args: Sequence[str], answer: bytes, *, before_answer: Callable[[], None] | None = None
) -> tuple[int, str, str]:
    """Run ``python -m supervisor ARGS`` with stdin and stderr on a pseudo-terminal and
    answer its ``[y/N]`` question once it shows (``before_answer`` runs just before).
    Returns the exit code, stdout and what the terminal showed."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", *args],
        stdin=terminal, stderr=terminal, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(terminal)
    shown = b""
    try:
        while b"[y/N]" not in shown:
            ready, _, _ = select.select([controller], [], [], TERMINAL_TIMEOUT)
            assert ready, f"no prompt; the terminal showed {shown!r}"
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the process closed the terminal
                chunk = b""
            assert chunk, f"no prompt; the terminal showed {shown!r}"
            shown += chunk
        if before_answer is not None:
            before_answer()
        os.write(controller, answer)
        out, _ = process.communicate(timeout=TERMINAL_TIMEOUT)
        shown += rest_of_terminal(controller)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return process.returncode, out, shown.decode(errors="replace")


def rest_of_terminal(controller: int) -> bytes:
    """What the terminal still has to show, once the process has ended."""
    rest = b""
    while select.select([controller], [], [], 0)[0]:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        rest += chunk
    return rest


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def stand_in_gateway(
    door: str, config: pathlib.Path, local: pathlib.Path
) -> tuple[trio.socket.SocketType, list[str]]:
    """A bare socket listening where the command line looks for ``config``'s gateway —
    its local socket ``local`` (``door == "local"``), or a port on 127.0.0.1 it is sent to
    with ``--connect`` — and the options that send a command there."""
    if door == "local":
        local.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await listener.bind(str(local))
        options = ["--config", str(config)]
    else:
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        options = ["--config", str(config), "--connect", f"http://127.0.0.1:{port}/mcp"]
    listener.listen(8)
    return listener, options


async def close_after_the_request(
    listener: trio.socket.SocketType, method: bytes, taken: list[bytes]
) -> None:
    """Take each connection's bytes up to a request of ``method`` (into ``taken``), then
    close it unanswered: a gateway that went away with the request."""
    while True:
        conn, _ = await listener.accept()
        with conn:
            data = b""
            while method not in data and (chunk := await conn.recv(65536)):
                data += chunk
            taken.append(data)


#: The variables that keep what ``serve``, the CLI and the token store keep (sockets,
#: trusted configs, tokens) in a directory of the suite's own: ``tests/conftest.py`` sets
#: them for each test process.
STATE_VARIABLES = ("MCP_SUPERVISOR_STATE_DIR", "MCP_SUPERVISOR_AUTH_DIR", "XDG_RUNTIME_DIR")


def own_state() -> dict[str, str]:
    """:data:`STATE_VARIABLES` as this test process has them, for a process started with
    an environment of its own: a stdio server the SDK starts gets only its default
    variables, and a ``serve`` started so would keep its socket under the home directory."""
    return {name: os.environ[name] for name in STATE_VARIABLES if name in os.environ}
