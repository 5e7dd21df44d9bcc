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
from typing import TYPE_CHECKING

from .._util._previews import PREVIEW_LIMITS
from .._util._printable import printable
from ..server._status import ServerStatus
from . import _remote as remote
from ._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ONE_ATTEMPT_NOTE,
    Commands,
    Parents,
    load,
    log,
    one_shot,
    run,
    said,
)
from ._remote import add_gateway_options, cold_start, find_gateway
from ._render import call_error, print_tools, report_call
from ._trust import add_config_options

if TYPE_CHECKING:
    from mcp import types

    from ..config import Config
    from ..tools import ApprovalCallback, ApprovalRequest


def _cmd_tools(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None:
        code = remote.tools(gateway, args.json, args.search, args.limit)
        if code is not None:
            return code
    cold_start(args)
    config = load(args)
    if config is None:
        return EXIT_USAGE
    one_shot(args)
    return run(_tools, config, args.json, args.search, args.limit)


async def _tools(config: Config, as_json: bool, query: str | None, limit: int) -> int:
    from ..faults import Injector
    from ..monitor._document import tools_document
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        catalog = await sup.tools()
        # Disabled servers are never started: they offer nothing and are not missed.
        records = {n: r for n, r in sup.status().items() if r.status != ServerStatus.DISABLED}
        if query is None:
            entries = list(catalog.values())
        else:
            entries = catalog.load(summary.name for summary in catalog.search(query, limit))
        # The gate's own decision, so this cannot differ from what `call` would do.
        approvals = {e.name: sup.approval_reason(e.name) for e in entries}
    document = tools_document(entries, catalog, records, approvals, query=query)
    retried = any(r.status != ServerStatus.CONNECTED and r.retryable for r in records.values())
    return print_tools(document, as_json, note=ONE_ATTEMPT_NOTE if retried else None)


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
        code = remote.call(
            gateway, args.tool, arguments, args.json, timeout=args.timeout, yes=args.yes
        )
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
    what = printable(f"{request.tool} on {request.server} ({request.reason})")
    sys.stderr.write(f"Call {what}? [y/N] ")
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
    config: Config,
    name: str,
    arguments: dict[str, object],
    as_json: bool,
    approve: ApprovalCallback | None,
    timeout: float | None = None,
) -> int:
    from ..calls._gate import returned
    from ..errors import (
        ApprovalDenied,
        ApprovalRequired,
        SupervisorError,
        ToolArgumentsInvalid,
        ToolError,
        UnknownTool,
    )
    from ..faults import Injector
    from ..runtime import open_supervisor
    from ..tools import Approver, Decider
    from ..tools._outcome import error_data
    from ..tools._request import Failed, ToolCall

    def fail(exc: SupervisorError, code: int, why: str | None = None) -> int:
        data = error_data(exc)
        kind = data.pop("type")
        call_error(name, str(kind), said(exc), as_json, said=why, **data)
        return code

    def failed(outcome: Failed) -> int:
        exc = outcome.error
        if isinstance(exc, ToolError):
            answer = outcome.answer
            if answer is None or answer.raw is None:
                return fail(exc, EXIT_FAILURE, str(exc))
            document = _as_json(answer.raw)
            return report_call(name, exc.server, document, limits=limits, as_json=as_json)
        if isinstance(exc, UnknownTool | ToolArgumentsInvalid | ApprovalRequired):
            # refused before anything was sent, the same way on every try: a usage error
            return fail(exc, EXIT_USAGE)
        if isinstance(exc, ApprovalDenied):  # someone said no
            asked = isinstance(approve, Approver) and approve.by is Decider.CLI_PROMPT
            why = f"not approved; {name} was not called" if asked else None
            return fail(exc, EXIT_FAILURE, why)
        return fail(exc, EXIT_FAILURE)

    limits = {key: getattr(config.settings.limits, f) for key, f in PREVIEW_LIMITS.items()}
    async with open_supervisor(config, approve=approve, retries=False, injector=Injector()) as sup:
        # one attempt per server, as every one-shot command; nothing spilled by the
        # supervisor: the result is rendered below, as a call through a gateway is
        bar = _ProgressBar() if sys.stderr.isatty() else None
        call = ToolCall(name, arguments, timeout, bar, spill=False)
        try:
            outcome = await sup._call_outcome(call)
            if isinstance(outcome, Failed) and isinstance(outcome.error, UnknownTool):
                import difflib

                # Tools of servers never connected are known by their prefix only. Unless
                # the connected ones have a close match, connect them all once: then either
                # the tool is there after all, or the close matches can be named.
                catalog = sup.catalog
                if not difflib.get_close_matches(name, catalog, n=1, cutoff=0.6):
                    catalog = await sup.tools()
                if name not in catalog:
                    try:
                        catalog.resolve(name)
                    except UnknownTool as exc:  # naming close matches
                        return failed(Failed(exc, sent=False))
                outcome = await sup._call_outcome(call)
        finally:
            if bar is not None:
                bar.clear()
        if isinstance(outcome, Failed):
            return failed(outcome)
        server = sup.resolve(name)[0]
    result = returned(call, outcome)
    if result.raw is None:  # not from a server (no SDK result): its text is all there is
        document = {"content": [{"type": "text", "text": result.text}]}
        return report_call(name, server, document, limits=limits, as_json=as_json)
    return report_call(name, server, _as_json(result.raw), limits=limits, as_json=as_json)


def _as_json(result: types.Result) -> dict[str, object]:
    """A ``CallToolResult`` as it travels in JSON: what a gateway would answer."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


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
            line += f" {printable(message)}"
        import shutil

        width = shutil.get_terminal_size((80, 24)).columns
        sys.stderr.write("\r\x1b[K" + line[: width - 1])
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


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
        "-y",
        "--yes",
        action="store_true",
        help="approve the call if it needs approval (through a running gateway: over its "
        "local socket, not over --connect)",
    )
    call.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="give up after S seconds (default: the server's timeout, 30 s unless set); "
        "waiting for the server to start counts. Through a gateway, S goes to it, which "
        "bounds the call with it; a call without an answer then may have taken effect and "
        "is never sent again",
    )
    call.set_defaults(handler=_cmd_call)
