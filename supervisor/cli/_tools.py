"""``tools`` and ``call``: the merged catalog from the command line.

``call`` sorts its failures by whether trying again the same way could ever work: a tool
that reported an error, a server failure, or approval refused by the person at the prompt
is 1; bad ARGS_JSON, an unknown tool, arguments that do not fit the tool's schema, and a
call needing approval with nobody to give it (no terminal, no ``--yes``) are refused
before anything is sent, the same way every time, and are 2 — like a config error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import _remote as remote
from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ONE_ATTEMPT_NOTE,
    Commands,
    Parents,
    load,
    log,
    one_shot,
    print_json,
    run,
    said,
)
from ._remote import add_gateway_options, cold_start, find_gateway
from ._trust import add_config_options

if TYPE_CHECKING:
    from ..registry import Entry
    from ..tools import ApprovalCallback, ApprovalRequest, MediaContent, ToolResult


def _cmd_tools(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None and (code := remote.tools(gateway, args.json, args.search)) is not None:
        return code
    cold_start(args)
    config = load(args)
    if config is None:
        return EXIT_USAGE
    one_shot(args)
    return run(_tools, config, args.json, args.search, args.limit)


async def _tools(config: object, as_json: bool, query: str | None, limit: int) -> int:
    import attrs
    import msgspec

    from ..runtime import open_supervisor
    from ..tools import parameters

    async with open_supervisor(config, retries=False) as sup:  # type: ignore[arg-type]
        catalog = await sup.tools()
        # Disabled servers are never started: they offer nothing and are not missed.
        records = {n: r for n, r in sup.status().items() if r.status != "disabled"}
        if query is None:
            entries = list(catalog.values())
        else:
            entries = catalog.load(summary.name for summary in catalog.search(query, limit))
        # The gate's own decision, so this cannot differ from what `call` would do.
        approvals = {e.name: sup.approval_reason(e.name) for e in entries}
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
    if any(records[name].retryable for name in down):
        print(f"mcp-supervisor tools: {ONE_ATTEMPT_NOTE}", file=sys.stderr)
    if as_json:
        document: dict[str, object] = {
            "tools": [
                {
                    "name": e.name,
                    "server": e.server,
                    "original_name": e.original_name,
                    "description": e.description,
                    "input_schema": e.input_schema,
                    "annotations": _annotations(e),
                    "approval": approvals[e.name],
                    "parameters": [attrs.asdict(p) for p in parameters(e.input_schema)],
                    "provenance": msgspec.to_builtins(e.provenance),
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
        print(_tools_table(entries, approvals))
        connected = len(records) - len(down)
        unsupported = sum(catalog.unsupported.get(name, 0) for name in records)
        print(_tools_footer(len(entries), len(catalog), connected, unsupported, down, query))
    return EXIT_FAILURE if records and len(down) == len(records) else EXIT_OK


#: The hints column: a letter where the tool's annotation says so, ``-`` elsewhere.
_HINTS = (
    ("r", "read_only_hint"),
    ("d", "destructive_hint"),
    ("i", "idempotent_hint"),
    ("o", "open_world_hint"),
)


def _annotations(entry: Entry) -> dict[str, object]:
    """The tool's annotations as the server sent them (MCP's names; only those given)."""
    hints = entry.tool.annotations
    return {} if hints is None else hints.model_dump(by_alias=True, exclude_none=True)


def _hints(entry: Entry) -> str:
    """``r-i-``: read-only, destructive, idempotent, open-world, where annotated true."""
    hints = entry.tool.annotations
    return "".join(
        letter if hints is not None and getattr(hints, field) is True else "-"
        for letter, field in _HINTS
    )


def _tools_table(entries: Sequence[Entry], approvals: Mapping[str, str | None]) -> str:
    """A fixed-width table — name, server, whether a call asks for approval, the hints,
    the first line of the description — and under each tool its parameters."""
    import shutil

    from ..tools import parameters, signature

    rows = [("name", "server", "approval", "hints", "description", None)]
    for e in entries:
        asks = "auto" if approvals[e.name] is None else "ask"
        description = e.description.strip().split("\n", 1)[0]
        params = signature(parameters(e.input_schema))
        rows.append((e.name, e.server, asks, _hints(e), description, params))
    width = shutil.get_terminal_size((120, 24)).columns
    name_w = max(len(r[0]) for r in rows)
    server_w = max(len(r[1]) for r in rows)

    def fit(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    lines = []
    for name, server, asks, hints, description, params in rows:
        line = f"{name:<{name_w}}  {server:<{server_w}}  {asks:<8}  {hints:<5}  {description}"
        lines.append(fit(line.rstrip()))
        if params is not None:
            lines.append(fit(f"    {params}"))
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
    gateway = find_gateway(args)
    if gateway is not None:
        code = remote.call(gateway, args.tool, arguments, args.json)
        if code is not None:
            return code
    cold_start(args)
    config = load(args)
    if config is None:
        return EXIT_USAGE
    from ..tools import Approver, Decider

    approve: ApprovalCallback | None = None
    if args.yes:
        approve = Approver(approve_all, Decider.CLI_YES)
    elif os.isatty(0) and os.isatty(2):
        approve = Approver(_ask_on_terminal, Decider.CLI_PROMPT)
    one_shot(args)
    return run(_call, config, args.tool, arguments, args.json, approve, args.timeout)


async def approve_all(request: ApprovalRequest) -> bool:
    log.info("approved by --yes", server=request.server, tool=request.tool, reason=request.reason)
    return True


async def _ask_on_terminal(request: ApprovalRequest) -> bool:
    """Ask on stderr, read one line from the terminal on stdin: only y or yes approves."""
    import trio

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
    timeout: float | None = None,
) -> int:
    from ..errors import (
        ApprovalDenied,
        ApprovalRequired,
        SupervisorError,
        ToolArgumentsInvalid,
        ToolError,
        UnknownTool,
    )
    from ..runtime import open_supervisor
    from ..tools import Approver, Decider, ToolResult

    def fail(exc: SupervisorError, code: int, why: str | None = None) -> int:
        why = why or f"{type(exc).__name__}: {said(exc)}"
        print(f"mcp-supervisor call: {why}", file=sys.stderr)
        if as_json:
            error: dict[str, object] = {"type": type(exc).__name__, "message": said(exc)}
            if isinstance(exc, ToolArgumentsInvalid):
                error["errors"] = [{"path": p, "message": m} for p, m in exc.errors]
            print_json({"tool": name, "error": error})
        return code

    # A spilled result's file must outlive the command, which names it: a directory of
    # our own naming is kept (the session's default one would be removed), made on a spill.
    import secrets

    spill = Path(tempfile.gettempdir()) / f"mcp-supervisor-call-{secrets.token_hex(8)}"
    async with open_supervisor(  # one attempt per server, as every one-shot command
        config,  # type: ignore[arg-type]
        approve=approve,
        spill_dir=spill,
        retries=False,
    ) as sup:
        bar = _ProgressBar() if sys.stderr.isatty() else None
        try:
            try:
                result = await sup.call(name, arguments, timeout=timeout, progress=bar)
            except UnknownTool:
                import difflib

                # Tools of servers never connected are known by their prefix only. Unless
                # the connected ones have a close match, connect them all once: then either
                # the tool is there after all, or the close matches can be named.
                catalog = sup.catalog
                if not difflib.get_close_matches(name, catalog, n=1, cutoff=0.6):
                    catalog = await sup.tools()
                if name not in catalog:
                    catalog.resolve(name)  # raises UnknownTool, naming close matches
                result = await sup.call(name, arguments, timeout=timeout, progress=bar)
            finally:
                if bar is not None:
                    bar.clear()
        except ToolError as exc:
            print(f"mcp-supervisor call: {exc}", file=sys.stderr)
            if as_json and isinstance(exc.result, ToolResult):
                print_json(_result_document(exc.result, exc.server))
            return EXIT_FAILURE
        except (UnknownTool, ToolArgumentsInvalid, ApprovalRequired) as exc:
            # refused before anything was sent, the same way on every try: a usage error
            return fail(exc, EXIT_USAGE)
        except ApprovalDenied as exc:  # someone said no
            asked = isinstance(approve, Approver) and approve.by is Decider.CLI_PROMPT
            why = f"not approved; {name} was not called" if asked else None
            return fail(exc, EXIT_FAILURE, why)
        except SupervisorError as exc:
            return fail(exc, EXIT_FAILURE)
        server = sup.resolve(name)[0]
    if as_json:
        print_json(_result_document(result, server))
    else:
        _print_result(result)
    return EXIT_OK


class _ProgressBar:
    """The call's MCP progress on a terminal's stderr, redrawn in place:
    ``[########------------] 2/5 step 2``; without a total, the count and message."""

    WIDTH = 20

    def __init__(self) -> None:
        self.drawn = False

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        if total:
            filled = max(0, min(self.WIDTH, round(self.WIDTH * done / total)))
            line = f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {done:g}/{total:g}"
        else:
            line = f"progress {done:g}"
        if message:
            line += f" {message}"
        import shutil

        width = shutil.get_terminal_size((80, 24)).columns
        sys.stderr.write("\r\x1b[K" + line[: width - 1])
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


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
    image, audio clip and resource; the structured content's preview when there is no
    text."""
    if result.text:
        print(result.text)
    elif result.structured_preview is not None:
        print(result.structured_preview)
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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def register(commands: Commands, parents: Parents) -> None:
    """Add ``tools``, ``call`` to the subcommands."""
    tools = commands.add_parser(
        "tools",
        parents=parents,
        help="connect every enabled server and list the merged tool catalog",
        description="Connect every enabled server (lazy ones too) and print the merged "
        "catalog: a table of name, server, approval (ask: a call needs approval; auto: it "
        "goes ahead), hints (r read-only, d destructive, i idempotent, o open-world, as "
        "annotated) and description, each tool's parameters under it (* required); or "
        "with --json one document whose 'tools' entries carry name, server, "
        "original_name, description, input_schema, annotations, approval (why a call "
        "needs it, or null), parameters and provenance (name, source, serverId, "
        "originalName); a tool listed without a description gets \"Tool '<name>' from "
        "MCP server '<server>'\". Servers that could not be connected are "
        "named on stderr. Exit 0; 1 if no server could be connected; 2 for a config "
        "error.",
    )
    add_config_options(tools)
    add_gateway_options(tools)
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
        parents=parents,
        help="call one tool and print its result",
        description="Call TOOL (its merged name, as 'tools' lists it) with the JSON object "
        "ARGS_JSON ('-': read it from stdin; default {}). Only the server offering the "
        "tool is connected. A call that needs approval asks on the terminal, is approved "
        "by --yes, and fails closed otherwise. Exit 0 ok; 1 the tool reported an error "
        "(its text on stderr), a server failure, or approval refused at the prompt; 2 bad "
        "ARGS_JSON, an unknown tool, arguments that do not match the tool's schema, "
        "approval needed without a terminal or --yes, or a config error.",
    )
    add_config_options(call)
    add_gateway_options(call)
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
    call.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="give up after S seconds (default: the server's timeout, 30 s unless set); "
        "waiting for the server to start counts",
    )
    call.set_defaults(handler=_cmd_call)
