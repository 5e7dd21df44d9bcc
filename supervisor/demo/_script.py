"""The demo's story: connect three servers, call across them, break two, watch them recover."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TextIO

import attrs
import trio

from .._util._plural import plural
from ..errors import ApprovalDenied, ToolError
from ..events._bus import Bus, Subscription
from ..events._catalog import (
    BusDropped,
    ChildRestarted,
    Connected,
    Connecting,
    Disconnected,
    Event,
    HealthRecovered,
    LocalCrashed,
    LocalSpawned,
    ServerErrored,
)
from ..monitor import status_table, summary_text
from ..runtime import SupervisorHandle, open_supervisor
from ..server._status import ServerStatus
from ..tools import ApprovalRequest
from ._servers import DemoError, FlakyProcess, find_servers, run_flaky, write_config

#: How long the demo waits for anything (a recovery, a call) before calling it broken.
PATIENCE = 20.0

Say = Callable[[str], None]


def describe(event: Event, since: float) -> str:
    """One line for an event: seconds since ``since`` (unix time), server, kind, details."""
    match event:
        case Connecting():
            text = f"attempt {event.attempt} of {event.max_attempts}"
        case LocalSpawned():
            text = f"pid {event.pid}"
        case Connected():
            text = f"{plural(event.tool_count, 'tool')}, handshake {event.connect_time:.2f} s"
        case Disconnected():
            text = "clean" if event.was_clean else "unexpected"  # the reason: see mcp.error
        case LocalCrashed():
            text = f"exit code {event.exit_code}"
        case ServerErrored():
            when = "no retry" if event.retry_in is None else f"retry in {event.retry_in:.2f} s"
            text = f"#{event.attempt}, {when}: {_short(event.error)}"
        case HealthRecovered():
            text = f"back after {event.downtime:.2f} s down"
        case ChildRestarted():
            text = f"restart {event.restarts} ({event.strategy})"
        case BusDropped():
            text = f"{plural(event.count, 'event')} missed"
        case _:
            text = ""
    return f"{_at(event.ts, since)}{_origin(event):<6} {event.kind:<27} {text}".rstrip()


def _at(when: float, since: float) -> str:
    """The start of an event line: seconds from ``since`` to ``when`` (unix times)."""
    return f"  {when - since:5.2f} s  "


def _short(text: str, limit: int = 56) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _origin(event: Event) -> str:
    """The server an event is about (a restart's child is the server of that name)."""
    if isinstance(event, ChildRestarted):
        return event.child
    return getattr(event, "server", "")


@attrs.define
class PendingCall:
    """A call made in the background, to see when and how it is answered."""

    name: str
    arguments: Mapping[str, object]
    answer: str = ""
    took: float = 0.0
    sent: bool = False
    done: trio.Event = attrs.Factory(trio.Event)

    def send(self, sup: SupervisorHandle, nursery: trio.Nursery) -> None:
        """Make the call in a task of ``nursery``."""
        self.sent = True
        nursery.start_soon(self._run, sup)

    async def _run(self, sup: SupervisorHandle) -> None:
        sent = trio.current_time()
        try:
            result = await sup.call(self.name, self.arguments)
            self.answer = result.text
        except Exception as exc:  # shown, not raised: the demo reports what happened
            self.answer = f"{type(exc).__name__}: {exc}"
        self.took = trio.current_time() - sent
        self.done.set()

    def shown(self) -> str:
        return _shown(self.name, self.arguments)


def _shown(name: str, arguments: Mapping[str, object]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


async def show_call(sup: SupervisorHandle, say: Say, name: str, **arguments: object) -> None:
    """Call a tool and print one line: its answer, or the error it was handled as."""
    try:
        result = await sup.call(name, arguments)
    except ToolError as exc:
        say(f"  {_shown(name, arguments)} -> ToolError, handled: {exc.text}")
    except ApprovalDenied as exc:
        say(f"  {_shown(name, arguments)} -> not sent: {type(exc).__name__} ({exc.reason})")
    else:
        say(f"  {_shown(name, arguments)} -> {result.text}")


async def run_demo(
    out: TextIO = sys.stdout,
    *,
    servers: str | os.PathLike[str] | None = None,
    dashboard: tuple[str, int] | None = None,
    dashboard_token: str | None = None,
) -> int:
    """Run the demo, printing to ``out``; return the exit code (0).

    With ``dashboard`` (host, port) the web dashboard is served from the start (with
    ``dashboard_token``, else one it makes and whose login URL it prints), and the
    demo keeps running after its script until it is cancelled (the command line cancels
    it on Ctrl-C, SIGTERM or SIGHUP), stopping every server it started. Raises
    :class:`DemoError` when the example servers are missing or do not start, and
    ``trio.TooSlowError`` when a recovery does not happen within :data:`PATIENCE`.
    """
    started = time.monotonic()
    directory = find_servers(servers)

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    async def refuse(request: ApprovalRequest) -> bool:
        say(f"  approval asked for {request.tool} ({request.reason}): the demo says no")
        return False

    say("mcp-supervisor demo: three example MCP servers under supervision")
    with tempfile.TemporaryDirectory(prefix="mcp-supervisor-demo-") as temporary:
        async with trio.open_nursery() as processes:
            flaky: FlakyProcess = await processes.start(run_flaky, directory / "flaky.py", 0)
            config = write_config(Path(temporary), directory, flaky.url)
            say(f"  notes  stdio  {directory / 'notes.py'}")
            say("                autoApprove: add_note, get_note, list_notes")
            say(f"  calc   stdio  {directory / 'calc.py'}")
            say("                approve: false (no tool needs approval)")
            say(f"  flaky  http   {flaky.url}")
            say(f"                autoApprove: true; flaky.py, pid {flaky.pid}, run by the demo")
            say(f"  config {config}")
            bus = Bus()
            with bus.subscribe("mcp.*", "supervisor.*") as events:
                # The demo's tools are all read-only: a call the crash may have caught on
                # its way is sent again after the restart rather than failing.
                async with (
                    open_supervisor(config, bus=bus, approve=refuse, retry_idempotent=True) as sup,
                    trio.open_nursery() as nursery,
                ):
                    info = None  # the dashboard's, when there is one
                    if dashboard is not None:
                        from ..dashboard import serve_dashboard

                        info = await nursery.start(
                            partial(serve_dashboard, sup, *dashboard, token=dashboard_token)
                        )
                        say(f"  dashboard {info.url}")
                        if dashboard_token is None:  # a chosen one is the user's to know
                            say(f"            log in to restart and stop: {info.login_url}")
                    tty = out.isatty()  # a pipe or a file has no width: whole lines
                    width = shutil.get_terminal_size().columns if tty else None
                    await _script(sup, events, say, processes, flaky, color=tty, width=width)
                    if info is not None:
                        say(f"\nThe dashboard stays at {info.url} until Ctrl-C.")
                        try:
                            await trio.sleep_forever()
                        finally:
                            say("Stopping.")
                    nursery.cancel_scope.cancel()
            processes.cancel_scope.cancel()  # kills the flaky server's process group
    say(f"\nDemo took {time.monotonic() - started:.1f} s; all servers stopped.")
    return 0


async def _script(
    sup: SupervisorHandle,
    events: Subscription,
    say: Say,
    processes: trio.Nursery,
    flaky: FlakyProcess,
    *,
    color: bool,
    width: int | None = None,
) -> None:
    say("\n1. Connect every server")
    with trio.fail_after(PATIENCE):
        await sup.connect_all()
    down = [
        f"{n} ({r.last_error})"
        for n, r in sup.status().items()
        if r.status != ServerStatus.CONNECTED
    ]
    if down:
        raise DemoError(f"example servers did not connect: {'; '.join(down)}")
    say(status_table(sup.status(), color=color, width=width))
    events.drain()

    say("\n2. Calls across servers")
    await show_call(sup, say, "calc_multiply", a=19.5, b=4)
    await show_call(sup, say, "notes_add_note", title="total", body="19.5 x 4 = 78")
    await show_call(sup, say, "flaky_fetch", key="exchange-rate")
    await show_call(sup, say, "notes_get_note", title="total")
    await show_call(sup, say, "calc_divide", a=1, b=0)
    await show_call(sup, say, "notes_delete_note", title="total")

    pid = sup.status()["calc"].pid
    say(f"\n3. Crash: kill -9 the calc server (pid {pid}); a call made during the outage waits")
    assert pid is not None
    since = time.time()
    os.kill(pid, signal.SIGKILL)
    call = PendingCall("calc_add", {"a": 2, "b": 40})
    await _recovery(sup, events, say, "calc", since, call)

    say(
        f"\n4. Outage: the flaky HTTP server goes away (kill -9 pid {flaky.pid}) "
        f"and comes back on port {flaky.port}"
    )
    since = time.time()
    await flaky.kill()

    async def bring_back() -> None:
        back: FlakyProcess = await processes.start(run_flaky, flaky.script, flaky.port)
        say(f"{_at(time.time(), since)}flaky  serving again on port {back.port} (pid {back.pid})")

    def on_error() -> None:  # the first failed reconnection: show the table, then recover
        if not flaky_back:
            flaky_back.append(True)
            say(status_table(sup.status(), color=color, width=width))
            processes.start_soon(bring_back)

    flaky_back: list[bool] = []

    # Nothing tells an HTTP client that its server died until it asks it something: the
    # call finds the server gone, waits in the mailbox, and goes to the next connection.
    call = PendingCall("flaky_fetch", {"key": "exchange-rate"})
    await _recovery(sup, events, say, "flaky", since, call, send_first=True, on_error=on_error)

    say("\n5. Status after the recovery")
    say(status_table(sup.status(), color=color, width=width))
    say("")
    say(summary_text(sup.summary()))


async def _recovery(
    sup: SupervisorHandle,
    events: Subscription,
    say: Say,
    server: str,
    since: float,
    call: PendingCall,
    *,
    send_first: bool = False,
    on_error: Callable[[], None] | None = None,
) -> None:
    """Print the events of ``server``'s recovery until it is back, and what ``call``
    answers. The call is made at once with ``send_first``, else once the server is seen
    down (``mcp.disconnected``); ``on_error()`` is called at each ``mcp.error``."""
    async with trio.open_nursery() as nursery:
        with trio.fail_after(PATIENCE):
            if send_first:
                call.send(sup, nursery)
                say(f"{_at(time.time(), since)}{call.shown()} sent")
            async for event in events:
                if _origin(event) != server:
                    continue
                say(describe(event, since))
                if event.kind == "mcp.disconnected" and not call.sent:
                    call.send(sup, nursery)
                    say(f"{_at(time.time(), since)}{call.shown()} sent")
                if event.kind == "mcp.error" and on_error is not None:
                    on_error()
                if event.kind == "mcp.health.recovered":
                    break
            await call.done.wait()
    say(f"  {call.shown()}, sent during the outage -> {call.answer} (after {call.took:.2f} s)")
