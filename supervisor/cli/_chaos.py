"""``chaos``: put a fault plan between any MCP client and an MCP server.

``chaos --plan P -- COMMAND ARGS…`` is a stdio MCP server: configure it in a client in
place of COMMAND and the client talks to COMMAND through the plan's faults. The proxy
exits as COMMAND did (137 after a ``kill``).

``chaos --plan P --listen HOST:PORT --upstream URL`` is a Streamable HTTP reverse proxy
of the remote MCP server at URL: point the client at ``http://HOST:PORT/mcp`` (said on
stderr once listening). It runs until a signal stops it (130, 143, 129).

Each fault is said on stderr as it is injected (``--quiet``: not), and ``--faults-log
PATH`` writes them all as JSON when the proxy ends.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import trio

from ._common import EXIT_FAILURE, EXIT_USAGE, Commands, Parents, run, say
from ._serve import dashboard_address

__all__ = ["register"]


def _cmd_chaos(args: argparse.Namespace) -> int:
    from ..faults import FaultEngine, PlanError, load_plan

    rest = list(args.rest)
    http = args.listen is not None or args.upstream is not None
    if http:
        if args.listen is None or args.upstream is None:
            say(
                "mcp-supervisor chaos: give both --listen HOST:PORT and --upstream URL "
                "(an HTTP proxy), or neither and -- COMMAND (a stdio one)"
            )
            return EXIT_USAGE
        if rest:
            say(
                "mcp-supervisor chaos: an HTTP proxy (--listen, --upstream) runs no command: "
                f"drop {' '.join(rest)}"
            )
            return EXIT_USAGE
        problem = _upstream_problem(args.upstream)
        if problem is not None:
            say(f"mcp-supervisor chaos: --upstream {problem}")
            return EXIT_USAGE
    elif rest[:1] == ["--"]:
        rest = rest[1:]
    elif rest:
        say(f"mcp-supervisor chaos: put -- before the server's command: -- {' '.join(rest)}")
        return EXIT_USAGE
    if not http and not rest:
        say(
            "mcp-supervisor chaos: give the server's command after --: "
            "chaos --plan PLAN.json -- COMMAND ARGS... (or --listen HOST:PORT --upstream URL "
            "for an HTTP server)"
        )
        return EXIT_USAGE
    if args.plan is None:
        say("mcp-supervisor chaos: --plan PLAN.json is required")
        return EXIT_USAGE
    try:
        plan = load_plan(args.plan, seed=args.seed)
        if http:
            plan.check_supported("an HTTP proxy (chaos --listen)", http=True)
        else:
            plan.check_supported("a stdio server (chaos --plan P -- COMMAND)", http=False)
    except PlanError as exc:
        for error in exc.errors:
            say(f"mcp-supervisor chaos: {error}")
        return EXIT_USAGE

    def announce(fault: object) -> None:
        if not args.quiet:
            say(f"mcp-supervisor chaos: {_described(fault)}")

    engine = FaultEngine(plan, on_inject=announce)
    try:
        if http:
            host, port = args.listen
            return run(_http, plan, host, port, args.upstream, engine)
        return run(_stdio, plan, rest, engine)
    finally:
        if args.faults_log is not None:
            _write_log(args.faults_log, engine)


def _upstream_problem(url: str) -> str | None:
    """Why ``url`` cannot be a proxy's upstream, or ``None``."""
    import httpx2

    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError) as exc:
        return f"{url!r} is not a URL: {exc}"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"must be an http:// or https:// URL, e.g. http://127.0.0.1:8000/mcp, not {url!r}"
    return None


async def _http(plan: object, host: str, port: int, upstream: str, engine: object) -> int:
    from ..faults import run_http_proxy
    from ..faults._http_proxy import safe_url

    async with trio.open_nursery() as nursery:
        try:
            url = await nursery.start(
                partial(run_http_proxy, plan, host, port, upstream, engine=engine)  # type: ignore[arg-type]
            )
        except OSError as exc:
            say(f"mcp-supervisor chaos: cannot listen on {host}:{port}: {exc.strerror or exc}")
            return EXIT_FAILURE
        say(f"mcp-supervisor chaos: listening on {url} -> {safe_url(upstream)}")
    return EXIT_FAILURE  # the proxy ends only when a signal stops it


async def _stdio(plan: object, command: list[str], engine: object) -> int:
    from ..faults import ProxyEnded, run_stdio_proxy

    try:
        return await run_stdio_proxy(plan, command, engine=engine)  # type: ignore[arg-type]
    except ProxyEnded as exc:
        say(f"mcp-supervisor chaos: {exc}")
        return exc.exit_code


def _described(fault: object) -> str:
    """``injected kill (rule 0) into tools/call id=3 to_server``."""
    f = fault  # an Injected
    where = []
    if getattr(f, "method", None):
        where.append(str(f.method))  # type: ignore[attr-defined]
    if getattr(f, "id", None) is not None:
        where.append(f"id={f.id}")  # type: ignore[attr-defined]
    if getattr(f, "tool", None):
        where.append(f"tool={f.tool}")  # type: ignore[attr-defined]
    if getattr(f, "direction", None):
        where.append(str(f.direction))  # type: ignore[attr-defined]
    into = f" into {' '.join(where)}" if where else ""
    return f"injected {f.detail} (rule {f.rule}){into} at {f.t:.3f} s"  # type: ignore[attr-defined]


def _write_log(path: str, engine: object) -> None:
    from ..faults import faults_json

    try:
        Path(path).write_bytes(faults_json(engine.log))  # type: ignore[attr-defined]
    except OSError as exc:
        say(f"mcp-supervisor chaos: cannot write the fault log {path}: {exc.strerror or exc}")


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def register(commands: Commands, parents: Parents) -> None:
    """Add ``chaos`` to the subcommands."""
    chaos = commands.add_parser(
        "chaos",
        parents=parents,
        help="test any MCP client against a server under a seeded fault plan",
        description="Run COMMAND (an MCP stdio server) behind a fault plan and serve it on "
        "this process's stdin/stdout: configure `mcp-supervisor chaos --plan PLAN.json -- "
        "COMMAND ARGS...` in any MCP client in place of COMMAND. Or, with --listen "
        "HOST:PORT --upstream URL, serve a Streamable HTTP proxy of the remote MCP server "
        "at URL on http://HOST:PORT/mcp (the URL is said on stderr). The same plan and "
        "seed inject the same faults in the same order for the same messages. Exits as "
        "COMMAND does (137 after a kill), the HTTP proxy 143 after SIGTERM (130 after "
        "Ctrl-C); 2 for a usage or plan error.",
    )
    chaos._intermixing = True  # type: ignore[attr-defined]  # COMMAND's options are its own
    chaos.add_argument("--plan", metavar="PLAN", help="the fault plan: a JSON file")
    chaos.add_argument(
        "--seed", type=_seed, default=None, metavar="K", help="use this seed, not the plan's"
    )
    chaos.add_argument(
        "--faults-log",
        metavar="PATH",
        default=None,
        help="write the injected faults to PATH as JSON when the proxy ends",
    )
    chaos.add_argument(
        "--quiet", action="store_true", help="do not say each injected fault on stderr"
    )
    chaos.add_argument(
        "--listen",
        type=dashboard_address,
        default=None,
        metavar="HOST:PORT",
        help="serve an HTTP proxy there (127.0.0.1:0 for any free port), with --upstream",
    )
    chaos.add_argument(
        "--upstream",
        default=None,
        metavar="URL",
        help="the Streamable HTTP MCP server the proxy forwards to (http://HOST:PORT/mcp)",
    )
    chaos.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")
    chaos.set_defaults(handler=_cmd_chaos)
