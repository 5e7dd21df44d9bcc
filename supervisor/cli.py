"""The ``mcp-supervisor`` command line (DESIGN §7).

Human output goes to standard output, diagnostics and logs to standard error. Exit codes:
0 ok, 1 runtime failure, 2 usage error (argparse's own code).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

import trio

from .log import configure_logging, get_logger

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

log = get_logger(__name__)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return trio.run(run_demo, sys.stdout)


def _cmd_check(args: argparse.Namespace) -> int:
    from .config import ConfigError, command_line, load_config, masked_url
    from .log import redact

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        if args.json:
            errors = [{"path": e.path, "message": e.message} for e in exc.errors]
            json.dump({"ok": False, "path": args.config, "errors": errors}, sys.stdout)
            sys.stdout.write("\n")
        return EXIT_USAGE

    # A server invalid only because of its environment fails the check, unless disabled.
    failures = [e for s in config.servers.values() if not s.disabled for e in s.errors]
    for server in config.servers.values():
        for error in server.errors:
            note = " (server is disabled)" if server.disabled else ""
            print(f"{error}{note}", file=sys.stderr)
    rows = []
    for server in config.servers.values():
        kind = "remote" if server.remote_fallback else server.type.value
        target = redact(masked_url(server.url) if server.url else command_line(server))
        rows.append((server, kind, target))
    if args.json:
        document = {
            "ok": not failures,
            "path": args.config,
            "servers": [
                {
                    "name": server.name,
                    "type": kind,
                    "target": target,
                    "disabled": server.disabled,
                    "lazy": server.lazy,
                    "prefix": server.prefix,
                    "errors": [{"path": e.path, "message": e.message} for e in server.errors],
                }
                for server, kind, target in rows
            ],
            "errors": [{"path": e.path, "message": e.message} for e in failures],
        }
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
    elif not failures:
        count = len(rows)
        print(f"{args.config}: {count} server{'s' if count != 1 else ''}")
        width = max((len(server.name) for server, _, _ in rows), default=0)
        for server, kind, target in rows:
            flags = "".join(
                f"  ({flag})"
                for flag, on in (("disabled", server.disabled), ("invalid", not server.valid))
                if on
            )
            print(f"  {server.name:<{width}}  {kind:<6}  {target}{flags}")
    return EXIT_USAGE if failures else EXIT_OK


def _load(path: str):  # noqa: ANN202 - Config, or None after reporting the errors
    from .config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return None


def _cmd_status(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return EXIT_USAGE
    return trio.run(_status, config, args.json, args.watch)


async def _status(config: object, as_json: bool, watch: bool) -> int:
    from .monitor import status_document, status_table
    from .runtime import open_supervisor

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
    config = _load(args.config)
    if config is None:
        return EXIT_USAGE
    return trio.run(_events, config, args.filter, args.duration)


async def _events(config: object, pattern: str, duration: float | None) -> int:
    from .events import encode
    from .runtime import open_supervisor

    out = sys.stdout.buffer
    with trio.move_on_after(duration if duration is not None else float("inf")):
        async with open_supervisor(config) as sup, sup.subscribe(pattern) as events:  # type: ignore[arg-type]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.connect_all)
                async for event in events:
                    out.write(encode(event) + b"\n")
                    out.flush()
    return EXIT_OK


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import format_table, run_bench

    report = trio.run(run_bench, args.quick)
    if args.json:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_table(report))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    verbosity = argparse.ArgumentParser(add_help=False)
    verbosity.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log more to stderr: -v info, -vv debug (default: warnings only)",
    )
    parser = argparse.ArgumentParser(
        prog="mcp-supervisor",
        description="Keep many MCP servers available to an agent, "
        "the way an Erlang/OTP supervision tree keeps processes alive.",
        parents=[verbosity],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        parents=[verbosity],
        help="the quick start: a supervision tree, a crash and its recovery, then exit",
        description="Run a small in-process supervision tree through crashes, restarts and "
        "a give-up, printing what happens.",
    )
    demo.set_defaults(handler=_cmd_demo)

    check = commands.add_parser(
        "check",
        parents=[verbosity],
        help="validate a config file",
        description="Load and validate a config file: exit 0 printing its servers, or 2 "
        "listing every problem on stderr, one per line, each starting with its field path. "
        "A server that needs an environment variable which is not set is a problem.",
    )
    check.add_argument("--config", required=True, metavar="F", help="the config file (JSON)")
    check.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    check.set_defaults(handler=_cmd_check)

    status = commands.add_parser(
        "status",
        parents=[verbosity],
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
        parents=[verbosity],
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

    bench = commands.add_parser(
        "bench",
        parents=[verbosity],
        help="run the benchmark suite",
        description="Measure the runtime's figures (DESIGN §9) and print them.",
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--quick", action="store_true", help="fewer, smaller rounds (seconds)")
    bench.set_defaults(handler=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with usage on stderr for a usage error
    verbose = getattr(args, "verbose", 0)
    level = "warning" if verbose == 0 else "info" if verbose == 1 else "debug"
    configure_logging(level=level, stream=sys.stderr, force=True)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("mcp-supervisor: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        log.debug("command failed", command=args.command, exc_info=True)
        error = _root_cause(exc)
        print(
            f"mcp-supervisor {args.command}: error: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _root_cause(exc: BaseException) -> BaseException:
    """The single error inside nested exception groups (ignoring cancellations), if any."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        if len(real) != 1:
            return exc
        exc = real[0]
    return exc
