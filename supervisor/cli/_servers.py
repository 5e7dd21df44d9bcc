"""``status`` and ``events``: run the servers and watch them."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, NoReturn

from ..server._status import ServerStatus
from . import _remote as remote
from ._common import (
    EXIT_OK,
    EXIT_USAGE,
    ONE_ATTEMPT_NOTE,
    Commands,
    Parents,
    load,
    one_shot,
    run,
)
from ._remote import add_gateway_options, cold_start, find_gateway
from ._render import print_status
from ._serve import add_dashboard_option, resolve_dashboard, start_dashboard
from ._trust import add_config_options

if TYPE_CHECKING:
    from ..config import Config
    from ..runtime import SupervisorHandle


def _cmd_status(args: argparse.Namespace) -> int:
    if not resolve_dashboard(args):
        return EXIT_USAGE
    if not args.watch and args.dashboard is None:
        gateway = find_gateway(args)
        if gateway is not None and (code := remote.status(gateway, args.json)) is not None:
            return code
    cold_start(args)
    config = load(args)
    if config is None:
        return EXIT_USAGE
    return run(_status, config, args)


def _show(sup: SupervisorHandle, as_json: bool, *, redraw: bool = False, once: bool = False) -> int:
    """Print the table (or the JSON document) once; exit 0 when every enabled server is
    connected (a disabled one is shown, never started, and counts for nothing)."""
    from ..monitor._metrics import status_document

    records = sup.status()
    document = None
    if as_json:
        document = status_document(records, sup.metrics(), actors=sup.statistics())
    code = print_status(records, document, redraw=redraw)
    if once and any(r.status == ServerStatus.FAILED and r.retryable for r in records.values()):
        print(f"mcp-supervisor status: {ONE_ATTEMPT_NOTE}", file=sys.stderr)
    return code


async def _connect_all(sup: SupervisorHandle) -> None:
    """Connect every server; on a terminal, show ``connecting 3/8…`` on stderr meanwhile."""
    import trio

    from ..monitor import progress_line

    if not sys.stderr.isatty() or len(sup.servers) < 2:
        await sup.connect_all()
        return

    def draw() -> None:
        sys.stderr.write("\r\x1b[K" + progress_line(sup.status()))
        sys.stderr.flush()

    async with sup.subscribe("mcp.*", "supervisor.*") as events, trio.open_nursery() as nursery:

        async def connect() -> None:
            await sup.connect_all()
            nursery.cancel_scope.cancel()

        nursery.start_soon(connect)
        draw()
        async for _ in events:
            events.drain()
            draw()
    sys.stderr.write("\r\x1b[K")
    sys.stderr.flush()


async def _watch(sup: SupervisorHandle, as_json: bool) -> NoReturn:
    """Redraw on every change (and every second on a terminal, for the clocks), until
    cancelled (a signal, see :func:`~._common.run`)."""
    import trio

    tty = sys.stdout.isatty()
    async with sup.subscribe("mcp.*", "supervisor.*") as events, trio.open_nursery() as nursery:
        nursery.start_soon(sup.connect_all)
        while True:
            _show(sup, as_json, redraw=tty and not as_json)
            with trio.move_on_after(1.0 if tty else math.inf):
                await events.receive()
                await trio.sleep(0.1)  # one redraw for a burst of events
            events.drain()


async def _status(config: Config, args: argparse.Namespace) -> int:
    import trio

    from ..faults import Injector
    from ..runtime import open_supervisor

    # Without --watch (or the dashboard) status is a one-shot command: one attempt each.
    watching = args.watch or args.dashboard is not None
    if not watching:
        one_shot(args)
    async with open_supervisor(config, retries=watching, injector=Injector()) as sup:
        if args.dashboard is not None:  # the page and the table, live, until a signal
            async with trio.open_nursery() as nursery:
                await start_dashboard(nursery, sup, args)
                await _watch(sup, args.json)
        if args.watch:
            await _watch(sup, args.json)
        await _connect_all(sup)
        return _show(sup, args.json, once=True)


def _cmd_events(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None:
        code = remote.events(gateway, args.filter, args.duration)
        if code is not None:
            return code
    cold_start(args)
    config = load(args)
    if config is None:
        return EXIT_USAGE
    return run(_events, config, args.filter, args.duration)


async def _events(config: Config, pattern: str, duration: float | None) -> int:
    import trio

    from .._util._printable import printable_json
    from ..events._catalog import encode
    from ..faults import Injector
    from ..runtime import open_supervisor

    out = sys.stdout.buffer
    with trio.move_on_after(duration if duration is not None else float("inf")):
        async with (
            open_supervisor(config, injector=Injector()) as sup,
            sup.subscribe(pattern) as events,
        ):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.connect_all)
                async for event in events:
                    line = printable_json(encode(event).decode())  # no raw escape sequences
                    out.write(line.encode() + b"\n")
                    out.flush()
    return EXIT_OK


def register(commands: Commands, parents: Parents) -> None:
    """Add ``status``, ``events`` to the subcommands."""
    status = commands.add_parser(
        "status",
        parents=parents,
        help="connect every enabled server and print its health",
        description="Connect every enabled server and print the status table, disabled "
        "servers included (docs/monitoring.md; exit 0 when every enabled one is connected, "
        "1 otherwise). --json prints "
        "the health records and metrics as one JSON document; --watch keeps redrawing the "
        "table as events arrive, until Ctrl-C (exit 130) or another signal.",
    )
    add_config_options(status)
    add_gateway_options(status)
    status.add_argument("--json", action="store_true", help="one JSON document on stdout")
    status.add_argument("--watch", action="store_true", help="redraw on every change (Ctrl-C)")
    add_dashboard_option(status)  # implies --watch
    status.set_defaults(handler=_cmd_status)

    events = commands.add_parser(
        "events",
        parents=parents,
        help="run the servers and print their events as JSON lines",
        description="Connect every enabled server and print each event as one "
        "JSON line on stdout (control and bidirectional characters a server sent as "
        "\\uXXXX escapes), until --duration seconds have passed (exit 0) or Ctrl-C "
        "(exit 130) or another signal.",
    )
    add_config_options(events)
    add_gateway_options(events)
    events.add_argument(
        "--filter", default="*", metavar="PATTERN", help="glob over event kinds (mcp.*)"
    )
    events.add_argument(
        "--duration", type=float, default=None, metavar="S", help="stop after S seconds"
    )
    events.set_defaults(handler=_cmd_events)
