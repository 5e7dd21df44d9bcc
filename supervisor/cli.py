"""The ``mcp-supervisor`` command line (DESIGN §7).

Human output goes to standard output, diagnostics and logs to standard error. Exit codes:
0 ok, 1 runtime failure, 2 usage error (argparse's own code).

``call`` sorts its failures by whether trying again the same way could ever work: a tool
that reported an error, a server failure, or approval refused by the person at the prompt
is 1; bad ARGS_JSON, an unknown tool, arguments that do not fit the tool's schema, and a
call needing approval with nobody to give it (no terminal, no ``--yes``) are refused
before anything is sent, the same way every time, and are 2 — like a config error.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from .log import configure_logging, get_logger

if TYPE_CHECKING:
    from .registry import Entry
    from .tools import ApprovalCallback, ApprovalRequest, MediaContent, ToolResult

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


# -- tools and call ----------------------------------------------------------------------


def _cmd_tools(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return EXIT_USAGE
    return trio.run(_tools, config, args.json, args.search, args.limit)


async def _tools(config: object, as_json: bool, query: str | None, limit: int) -> int:
    from .runtime import open_supervisor

    async with open_supervisor(config) as sup:  # type: ignore[arg-type]
        catalog = await sup.tools()
        records = sup.status()
    if query is None:
        entries = list(catalog.values())
    else:
        entries = catalog.load(summary.name for summary in catalog.search(query, limit))
    servers: list[dict[str, object]] = []
    down = []
    for name, record in records.items():
        up = record.status == "connected"
        servers.append(
            {
                "name": name,
                "status": record.status,
                "tool_count": len(catalog.by_server.get(name, ())),
                "unsupported": catalog.unsupported.get(name, 0),
                "skipped": list(catalog.invalid.get(name, ())),
                "error": None if up else record.last_error,
            }
        )
        for why in catalog.invalid.get(name, ()):
            print(f"mcp-supervisor tools: server {name!r} skipped {why}", file=sys.stderr)
        if not up:
            down.append(name)
            why = record.last_error or "not connected"
            print(
                f"mcp-supervisor tools: server {name!r} is {record.status}: {why}", file=sys.stderr
            )
    if as_json:
        document: dict[str, object] = {
            "tools": [
                {
                    "name": e.name,
                    "server": e.server,
                    "original_name": e.original_name,
                    "description": e.description,
                    "input_schema": e.input_schema,
                }
                for e in entries
            ],
            "servers": servers,
        }
        if query is not None:
            document["search"] = query
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(_tools_table(entries))
        connected = len(records) - len(down)
        unsupported = sum(catalog.unsupported.get(name, 0) for name in records)
        print(_tools_footer(len(entries), len(catalog), connected, unsupported, down, query))
    return EXIT_FAILURE if records and len(down) == len(records) else EXIT_OK


def _tools_table(entries: Sequence[Entry]) -> str:
    """A fixed-width table: name, server, the first line of the description."""
    import shutil

    rows = [("name", "server", "description")]
    for e in entries:
        rows.append((e.name, e.server, e.description.strip().split("\n", 1)[0]))
    width = shutil.get_terminal_size((120, 24)).columns
    name_w = max(len(r[0]) for r in rows)
    server_w = max(len(r[1]) for r in rows)
    lines = []
    for name, server, description in rows:
        line = f"{name:<{name_w}}  {server:<{server_w}}  {description}".rstrip()
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return "\n".join(lines)


def _tools_footer(
    shown: int, total: int, connected: int, unsupported: int, down: Sequence[str], query: str | None
) -> str:
    """``N tools from M servers``, or ``K matches for 'Q' among N tools from M servers``,
    then what was skipped and which servers are not connected."""

    def count(n: int, one: str, many: str) -> str:
        return f"{n} {one if n == 1 else many}"

    line = f"{count(total, 'tool', 'tools')} from {count(connected, 'server', 'servers')}"
    if query is not None:
        line = f"{count(shown, 'match', 'matches')} for {query!r} among {line}"
    if unsupported:
        line += f"; {count(unsupported, 'tool', 'tools')} skipped as unsupported"
    if down:
        line += f"; not connected: {', '.join(down)} (see stderr)"
    return line


def _cmd_call(args: argparse.Namespace) -> int:
    raw = sys.stdin.read() if args.arguments == "-" else args.arguments
    try:
        arguments = json.loads(raw)
    except ValueError as exc:
        where = "standard input" if args.arguments == "-" else "ARGS_JSON"
        print(f"mcp-supervisor call: {where} is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        print(
            "mcp-supervisor call: the arguments must be a JSON object, like "
            f'\'{{"text": "hi"}}\', not {type(arguments).__name__} {raw.strip()[:60]}',
            file=sys.stderr,
        )
        return EXIT_USAGE
    config = _load(args.config)
    if config is None:
        return EXIT_USAGE
    approve: ApprovalCallback | None = None
    if args.yes:
        approve = _approve_all
    elif os.isatty(0) and os.isatty(2):
        approve = _ask_on_terminal
    return trio.run(_call, config, args.tool, arguments, args.json, approve)


async def _approve_all(request: ApprovalRequest) -> bool:
    log.info("approved by --yes", server=request.server, tool=request.tool, reason=request.reason)
    return True


async def _ask_on_terminal(request: ApprovalRequest) -> bool:
    """Ask on stderr, read one line from the terminal on stdin: only y or yes approves."""
    shown = json.dumps(dict(request.arguments))
    if len(shown) > 200:
        shown = shown[:199] + "…"
    sys.stderr.write(f"  arguments: {shown}\n")
    sys.stderr.write(f"Call {request.tool} on {request.server} ({request.reason})? [y/N] ")
    sys.stderr.flush()
    answer = b""
    async with trio.lowlevel.FdStream(os.dup(0)) as stdin:
        while b"\n" not in answer:
            chunk = await stdin.receive_some(1024)
            if not chunk:
                sys.stderr.write("\n")
                break
            answer += chunk
    return answer.decode(errors="replace").strip().lower() in ("y", "yes")


async def _call(
    config: object,
    name: str,
    arguments: dict[str, object],
    as_json: bool,
    approve: ApprovalCallback | None,
) -> int:
    from .errors import (
        ApprovalDenied,
        ApprovalRequired,
        SupervisorError,
        ToolArgumentsInvalid,
        ToolError,
        UnknownTool,
    )
    from .runtime import open_supervisor
    from .tools import ToolResult

    def fail(exc: SupervisorError, code: int, said: str | None = None) -> int:
        print(f"mcp-supervisor call: {said or f'{type(exc).__name__}: {exc}'}", file=sys.stderr)
        if as_json:
            error: dict[str, object] = {"type": type(exc).__name__, "message": str(exc)}
            if isinstance(exc, ToolArgumentsInvalid):
                error["errors"] = [{"path": p, "message": m} for p, m in exc.errors]
            _print_json({"tool": name, "error": error})
        return code

    async with open_supervisor(config, approve=approve) as sup:  # type: ignore[arg-type]
        try:
            try:
                result = await sup.call(name, arguments)
            except UnknownTool:
                # Tools of servers never connected are known by their prefix only. Unless
                # the connected ones have a close match, connect them all once: then either
                # the tool is there after all, or the close matches can be named.
                catalog = sup.catalog
                if not difflib.get_close_matches(name, catalog, n=1, cutoff=0.6):
                    catalog = await sup.tools()
                if name not in catalog:
                    catalog.resolve(name)  # raises UnknownTool, naming close matches
                result = await sup.call(name, arguments)
        except ToolError as exc:
            print(f"mcp-supervisor call: {exc}", file=sys.stderr)
            if as_json and isinstance(exc.result, ToolResult):
                _print_json(_result_document(exc.result, exc.server))
            return EXIT_FAILURE
        except (UnknownTool, ToolArgumentsInvalid, ApprovalRequired) as exc:
            # refused before anything was sent, the same way on every try: a usage error
            return fail(exc, EXIT_USAGE)
        except ApprovalDenied as exc:  # someone said no
            said = f"not approved; {name} was not called" if approve is _ask_on_terminal else None
            return fail(exc, EXIT_FAILURE, said)
        except SupervisorError as exc:
            return fail(exc, EXIT_FAILURE)
        server = sup.resolve(name)[0].name
    if as_json:
        _print_json(_result_document(result, server))
    else:
        _print_result(result)
    return EXIT_OK


def _print_json(document: object) -> None:
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


def _result_document(result: ToolResult, server: str | None) -> dict[str, object]:
    def media(items: Sequence[MediaContent]) -> list[dict[str, object]]:
        return [{"mime_type": m.mime_type, "size": m.size, "data": m.data} for m in items]

    return {
        "tool": result.tool,
        "server": server,
        "text": result.text,
        "structured": result.structured,
        "is_error": result.is_error,
        "images": media(result.images),
        "audio": media(result.audio),
        "resources": [
            {
                "kind": r.kind,
                "uri": r.uri,
                "mime_type": r.mime_type,
                "name": r.name,
                "size": r.size,
                "text": r.text,
                "blob": r.blob,
            }
            for r in result.resources
        ],
        "spilled_to": None if result.spilled_to is None else str(result.spilled_to),
    }


def _print_result(result: ToolResult) -> None:
    """The text (a preview naming the spill file when it was too big), then a line per
    image, audio clip and resource; the structured content when there is no text."""
    if result.text:
        print(result.text)
    elif result.structured is not None:
        print(json.dumps(result.structured, indent=2))
    for kind, items in (("image", result.images), ("audio", result.audio)):
        for m in items:
            print(f"[{kind}: {m.mime_type}, {m.size} bytes]")
    for r in result.resources:
        details = ", ".join(
            part
            for part in (
                r.mime_type,
                None if r.size is None else f"{r.size} bytes",
                None if r.name is None else f"name {r.name!r}",
            )
            if part
        )
        print(f"[resource ({r.kind}): {r.uri}{', ' + details if details else ''}]")


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

    tools = commands.add_parser(
        "tools",
        parents=[verbosity],
        help="connect every enabled server and list the merged tool catalog",
        description="Connect every enabled server (lazy ones too) and print the merged "
        "catalog: a table of name, server and description, or with --json one document "
        "whose 'tools' entries carry name, server, original_name, description and "
        "input_schema. Servers that could not be connected are named on stderr. Exit 0; "
        "1 if no server could be connected; 2 for a config error.",
    )
    tools.add_argument("--config", required=True, metavar="F", help="the config file (JSON)")
    tools.add_argument("--json", action="store_true", help="one JSON document on stdout")
    tools.add_argument(
        "--search",
        metavar="Q",
        help="only the tools matching Q (names and descriptions), best first",
    )
    tools.add_argument(
        "--limit", type=int, default=20, metavar="N", help="at most N matches (default: 20)"
    )
    tools.set_defaults(handler=_cmd_tools)

    call = commands.add_parser(
        "call",
        parents=[verbosity],
        help="call one tool and print its result",
        description="Call TOOL (its merged name, as 'tools' lists it) with the JSON object "
        "ARGS_JSON ('-': read it from stdin; default {}). Only the server offering the "
        "tool is connected. A call that needs approval asks on the terminal, is approved "
        "by --yes, and fails closed otherwise. Exit 0 ok; 1 the tool reported an error "
        "(its text on stderr), a server failure, or approval refused at the prompt; 2 bad "
        "ARGS_JSON, an unknown tool, arguments that do not match the tool's schema, "
        "approval needed without a terminal or --yes, or a config error.",
    )
    call.add_argument("--config", required=True, metavar="F", help="the config file (JSON)")
    call.add_argument("tool", metavar="TOOL", help="the tool's merged name, e.g. notes_add_note")
    call.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        metavar="ARGS_JSON",
        help="the arguments, a JSON object; '-' reads it from stdin (default: {})",
    )
    call.add_argument("--json", action="store_true", help="one JSON document on stdout")
    call.add_argument(
        "-y", "--yes", action="store_true", help="approve the call if it needs approval"
    )
    call.set_defaults(handler=_cmd_call)

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
