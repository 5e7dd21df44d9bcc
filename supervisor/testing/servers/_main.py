"""The command line: ``python -m supervisor.testing.servers KIND [options]``.

Kinds that need no SDK (exit-on-start; hang-init and garbage ``only`` over stdio) never
import ``mcp``, so they start in a fraction of the time an ``MCPServer`` process takes.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, cast

import trio

from ..._sdk import lowlevel_server
from ._counting import COUNT_FILE_ENV
from ._names import GARBAGE_MODES, KINDS, GarbageMode, HttpTransport, MCPServerKind, ServerKind
from ._procs import LISTENING_PREFIX
from ._raw import ASGIApp, garbage_app, garbage_line, garbage_stdio, hang_app, hang_stdio

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ._big import BigServer

GARBAGE_BEFORE_LINES = 3
"""How many garbage lines ``--garbage before`` writes ahead of the real server."""


def _eprint(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m supervisor.testing.servers",
        description="Run an mcp-supervisor fixture MCP server.",
    )
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--crash-after",
        type=int,
        metavar="N",
        help="exit right after executing the N-th tool call, unanswered (crash: default 1)",
    )
    parser.add_argument(
        "--count-file",
        metavar="PATH",
        help=f"append each executed tool's name to PATH (default: ${COUNT_FILE_ENV})",
    )
    parser.add_argument("--stderr-line", metavar="TEXT", help="write TEXT to stderr at start")
    parser.add_argument(
        "--garbage",
        choices=GARBAGE_MODES,
        help="garbage kind: 'only' (default), 'before' or 'after-first' the first message",
    )
    parser.add_argument(
        "--exit-code", type=int, default=1, help="exit code of exit-on-start and crashes"
    )
    parser.add_argument(
        "--hold-lists",
        metavar="PATH",
        help="rich: answer resources/list, resources/templates/list and prompts/list only "
        "once no file is at PATH",
    )
    big = parser.add_argument_group("big", "options of the big kind")
    big.add_argument("--tools", type=int, metavar="N", help="numbered tools (default 1000)")
    big.add_argument("--page-size", type=int, metavar="N", help="tools/list page size (100)")
    big.add_argument("--invalid", type=int, metavar="K", help="bad tool definitions (0)")
    big.add_argument(
        "--extra-tool", action="append", metavar="NAME", help="a tool NAME(text) (repeatable)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    kind: ServerKind = args.kind
    transport: str = args.transport
    garbage: GarbageMode | None = args.garbage
    if garbage is not None and kind != "garbage":
        parser.error("--garbage applies to the garbage kind only")
    if kind == "garbage":
        garbage = garbage or "only"
        if transport != "stdio" and garbage != "only":
            parser.error(f"--garbage {garbage} is stdio-only; over HTTP garbage is 'only'")
    count_file: str | None = args.count_file or os.environ.get(COUNT_FILE_ENV) or None
    big_options = (args.tools, args.page_size, args.invalid, args.extra_tool)
    if kind != "big" and any(o is not None for o in big_options):
        parser.error("--tools, --page-size, --invalid and --extra-tool apply to big only")
    if kind == "big" and transport == "sse":
        parser.error("big serves stdio and Streamable HTTP only")
    if args.hold_lists is not None and kind != "rich":
        parser.error("--hold-lists applies to the rich kind only")

    if kind == "exit-on-start":
        if args.stderr_line is not None:
            _eprint(args.stderr_line)
        _eprint(f"fixture exit-on-start exiting with code {args.exit_code} pid={os.getpid()}")
        return int(args.exit_code)

    try:
        if transport == "stdio":
            return _run_stdio(kind, garbage, count_file, args)
        trio.run(partial(_run_http, kind, cast(HttpTransport, transport), count_file, args))
    except KeyboardInterrupt:
        return 130
    return 0


def _announce(kind: ServerKind, transport: str, stderr_line: str | None, url: str = "") -> None:
    where = f" url={url}" if url else ""
    _eprint(f"fixture {kind} ready pid={os.getpid()} transport={transport}{where}")
    if stderr_line is not None:
        _eprint(stderr_line)


def _build(kind: ServerKind, count_file: str | None, args: argparse.Namespace) -> MCPServer:
    from ._kinds import make_server

    # the kinds that are no MCPServer (exit-on-start, hang-init, big) were handled by the caller
    mcp_kind = cast("MCPServerKind", "echo" if kind == "garbage" else kind)
    return make_server(
        mcp_kind,
        crash_after=args.crash_after,
        count_file=count_file,
        exit_code=args.exit_code,
        hold_lists=args.hold_lists,
    )


def _build_big(count_file: str | None, args: argparse.Namespace) -> BigServer:
    from ._big import DEFAULT_PAGE_SIZE, DEFAULT_TOOLS, make_big

    return make_big(
        tools=DEFAULT_TOOLS if args.tools is None else args.tools,
        page_size=DEFAULT_PAGE_SIZE if args.page_size is None else args.page_size,
        invalid=args.invalid or 0,
        extra_tools=args.extra_tool or (),
        count_file=count_file,
        crash_after=args.crash_after,
        exit_code=args.exit_code,
    )


def _run_stdio(
    kind: ServerKind, garbage: GarbageMode | None, count_file: str | None, args: argparse.Namespace
) -> int:
    if kind == "hang-init":
        _announce(kind, "stdio", args.stderr_line)
        return hang_stdio()
    if garbage == "only":
        _announce(kind, "stdio", args.stderr_line)
        return garbage_stdio()
    if kind == "big":
        from ._big import serve_big_stdio

        big = _build_big(count_file, args)
        _announce(kind, "stdio", args.stderr_line)
        trio.run(serve_big_stdio, big)
        return 0
    server = _build(kind, count_file, args)
    _announce(kind, "stdio", args.stderr_line)
    if garbage == "before":
        for n in range(1, GARBAGE_BEFORE_LINES + 1):
            sys.stdout.write(garbage_line(n) + "\n")
        sys.stdout.flush()
    trio.run(partial(_serve_stdio, server, garble_after_first=garbage == "after-first"))
    return 0


class _GarblingStdout:
    """Stdout for ``stdio_server``: the first message goes out, every later one is garbage."""

    def __init__(self) -> None:
        import anyio

        wrapper = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=True)
        self._out = anyio.wrap_file(wrapper)
        self._messages = 0

    async def write(self, data: str) -> None:
        self._messages += 1
        await self._out.write(data if self._messages == 1 else garbage_line(self._messages) + "\n")

    async def flush(self) -> None:
        await self._out.flush()


async def _serve_stdio(server: MCPServer, *, garble_after_first: bool) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    # MCPServer.run_stdio_async() with a stdout of our own (stdio_server takes one).
    lowlevel = lowlevel_server(server)
    stdout = cast("anyio.AsyncFile[str]", _GarblingStdout()) if garble_after_first else None
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def _run_http(
    kind: ServerKind, transport: HttpTransport, count_file: str | None, args: argparse.Namespace
) -> None:
    from ._http import serve_http

    app: MCPServer | ASGIApp
    if kind == "hang-init":
        app = hang_app
    elif kind == "garbage":
        app = garbage_app
    elif kind == "big":
        app = _build_big(count_file, args).server.streamable_http_app(host=args.host)
    else:
        app = _build(kind, count_file, args)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            partial(serve_http, app, transport=transport, host=args.host, port=args.port)
        )
        _announce(kind, transport, args.stderr_line, url)
        _eprint(LISTENING_PREFIX + url)
        # Also on stdout (unused by HTTP fixtures): a parent can wait on that pipe alone.
        print(LISTENING_PREFIX + url, flush=True)
