"""``status`` and ``events``: run the servers and watch them."""

from __future__ import annotations

import argparse
import json
import sys

import trio

from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Commands, Parents, load


def _cmd_status(args: argparse.Namespace) -> int:
    config = load(args.config)
    if config is None:
        return EXIT_USAGE
    return trio.run(_status, config, args.json, args.watch)


async def _status(config: object, as_json: bool, watch: bool) -> int:
    from ..monitor import status_document, status_table
    from ..runtime import open_supervisor

    def show(sup: object) -> int:
        records = sup.status()  # type: ignore[attr-defined]
        if as_json:
            print(json.dumps(status_document(records)), flush=True)
        else:
            if watch and sys.stdout.isatty():
                print("\x1b[2J\x1b[H", end="")
            print(status_table(records), flush=True)
        return EXIT_OK if all(r.status == "connected" for r in records.values()) else EXIT_FAILURE

    async with open_supervisor(config) as sup:  # type: ignore[arg-type]
        if not watch:
            await sup.connect_all()
            return show(sup)
        async with sup.subscribe("mcp.*", "supervisor.*") as events, trio.open_nursery() as n:
            n.start_soon(sup.connect_all)
            show(sup)
            async for _ in events:
                await trio.sleep(0.1)  # one redraw for a burst of events
                events.drain()
                show(sup)
    return EXIT_OK


def _cmd_events(args: argparse.Namespace) -> int:
    config = load(args.config)
    if config is None:
        return EXIT_USAGE
    return trio.run(_events, config, args.filter, args.duration)


async def _events(config: object, pattern: str, duration: float | None) -> int:
    from ..events import encode
    from ..runtime import open_supervisor

    out = sys.stdout.buffer
    with trio.move_on_after(duration if duration is not None else float("inf")):
        async with open_supervisor(config) as sup, sup.subscribe(pattern) as events:  # type: ignore[arg-type]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.connect_all)
                async for event in events:
                    out.write(encode(event) + b"\n")
                    out.flush()
    return EXIT_OK


def register(commands: Commands, parents: Parents) -> None:
    """Add ``status``, ``events`` to the subcommands."""
    status = commands.add_parser(
        "status",
        parents=parents,
        help="connect every enabled server and print its health",
        description="Connect every enabled server and print a health table (exit 0 when all "
        "are connected, 1 otherwise). --watch keeps redrawing it as events arrive.",
    )
    status.add_argument("--config", required=True, metavar="F", help="the config file (JSON)")
    status.add_argument("--json", action="store_true", help="one JSON document on stdout")
    status.add_argument("--watch", action="store_true", help="redraw on every change (Ctrl-C)")
    status.set_defaults(handler=_cmd_status)

    events = commands.add_parser(
        "events",
        parents=parents,
        help="run the servers and print their events as JSON lines",
        description="Connect every enabled server and print each event (DESIGN §8) as one "
        "JSON line on stdout, until --duration seconds have passed or Ctrl-C.",
    )
    events.add_argument("--config", required=True, metavar="F", help="the config file (JSON)")
    events.add_argument(
        "--filter", default="*", metavar="PATTERN", help="glob over event kinds (mcp.*)"
    )
    events.add_argument(
        "--duration", type=float, default=None, metavar="S", help="stop after S seconds"
    )
    events.set_defaults(handler=_cmd_events)
