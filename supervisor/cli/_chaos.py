"""``chaos``: put a fault plan between any MCP client and an MCP server.

``chaos --plan P -- COMMAND ARGS…`` is a stdio MCP server: configure it in a client in
place of COMMAND and the client talks to COMMAND through the plan's faults. The proxy
exits as COMMAND did (137 after a ``kill``).

``chaos --plan P --listen HOST:PORT --upstream URL`` is a Streamable HTTP reverse proxy
of the remote MCP server at URL: point the client at ``http://HOST:PORT/mcp`` (said on
stderr once listening). It runs until a signal stops it (130, 143, 129).

Each fault is said on stderr as it is injected (``--quiet``: not), and ``--faults-log
PATH`` writes them all as JSON when the proxy ends; ``--report DIR`` records the client's
tool calls (:class:`~supervisor.faults._inject._link.CallRecorder`) and writes the
checker's verdict on them, with the faults, as ``chaos.json`` and ``chaos.html``.

``chaos soak --servers N --duration S --seed K [--report DIR]`` runs the soak
(:func:`supervisor.testing._soak.run_soak`): fixture servers of mixed transports under random
seeded plans with continuous calls, then the checker's verdict; exit 0 when it finds
nothing wrong, 1 when it does.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .._util._plural import plural
from ._common import EXIT_FAILURE, EXIT_USAGE, Commands, Parents, run, say
from ._serve import dashboard_address

if TYPE_CHECKING:
    from ..config._plan import Plan
    from ..faults import CallHistory
    from ..faults._inject._engine import FaultEngine, Injected

__all__ = ["register"]


def _soak_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-supervisor chaos soak",
        description="Run fixture MCP servers of mixed transports (stdio, Streamable HTTP, "
        "WebSocket, legacy SSE) under random fault plans drawn from the seed, with "
        "continuous concurrent calls, for --duration seconds; then the faults stop and every "
        "server must answer again. Exit 0 if the checker finds no call lost, duplicated or "
        "past its deadline, no process left behind and memory and descriptors bounded; 1 "
        "otherwise; 2 for a usage error.",
    )
    parser.add_argument(
        "--servers", type=_servers, default=8, metavar="N", help="how many servers (default 8)"
    )
    parser.add_argument(
        "--duration",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="seconds of faults and calls (default 60)",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=None,
        metavar="K",
        help="the seed the plans and calls are drawn from (default 0)",
    )
    parser.add_argument(
        "--concurrency", type=_servers, default=8, metavar="C", help="callers at once (default 8)"
    )
    parser.add_argument(
        "--report", default=None, metavar="DIR", help="write soak.json and soak.html to DIR"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the verdict as one JSON document on stdout"
    )
    return parser


def _servers(text: str) -> int:
    value = _seed(text)
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError("must be 1 to 64")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 1 <= value <= 86_400:
        raise argparse.ArgumentTypeError("must be 1 to 86400 seconds")
    return value


def _cmd_soak(args: argparse.Namespace, argv: list[str]) -> int:
    import sys

    from ..log import configure_logging
    from ..testing._soak import SoakOptions, SoakResult, run_soak

    try:
        soak = _soak_parser().parse_args(argv)
    except SystemExit as exc:  # argparse said why on stderr
        return int(exc.code or 0)
    if not getattr(args, "verbose", 0):  # the faults' own warnings are the point: quiet
        configure_logging(level="error", stream=sys.stderr, force=True)
    seed = soak.seed if soak.seed is not None else (args.seed or 0)
    options = SoakOptions(
        servers=soak.servers,
        duration=soak.duration,
        seed=seed,
        concurrency=soak.concurrency,
        report_dir=None if soak.report is None else Path(soak.report),
    )
    results: list[SoakResult] = []

    async def soaking() -> int:
        results.append(await run_soak(options, progress=say))
        return 0

    stopped = run(soaking)
    if not results:  # stopped by a signal: the servers are stopped, nothing is judged
        return stopped
    result = results[0]
    verdict = result.verdict
    if soak.json:
        from ._common import print_json

        print_json(verdict.to_builtins())
    else:
        from .._util._printable import printable

        print(verdict.summary())
        for problem in verdict.problems:  # they quote what the servers answered
            print(f"  - {printable(problem, keep_lines=True)}")
        calls, faults = plural(result.calls, "call"), plural(result.faults, "fault")
        print(f"{calls}, {faults} injected, seed {seed}")
        if result.report_html is not None:
            print(f"report: {result.report_html}")
    return 0 if verdict.ok else EXIT_FAILURE


def _cmd_chaos(args: argparse.Namespace) -> int:
    from ..config._plan import PlanError
    from ..faults import load_plan
    from ..faults._inject._engine import FaultEngine

    rest = list(args.rest)
    if rest[:1] == ["soak"]:
        return _cmd_soak(args, rest[1:])
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

    def announce(fault: Injected) -> None:
        if not args.quiet:
            say(f"mcp-supervisor chaos: {_described(fault)}")

    engine = FaultEngine(plan, on_inject=announce)
    history: CallHistory | None = None
    if args.report is not None:
        from ..faults import CallHistory

        history = CallHistory()
    try:
        if args.listen is not None:  # an HTTP proxy (http: --upstream is given too)
            host, port = args.listen
            return run(_http, plan, host, port, args.upstream, engine, history)
        return run(_stdio, plan, rest, engine, history)
    finally:
        if args.faults_log is not None:
            _write_log(args.faults_log, engine)
        if history is not None and args.report is not None:
            _write_report(Path(args.report), engine, history)


def _write_report(directory: Path, engine: FaultEngine, history: CallHistory) -> None:
    """The checker's verdict on the calls the proxy carried, as ``chaos.json`` and
    ``chaos.html`` in ``directory``."""
    from ..faults import check, write_html, write_json

    faults = list(engine.log)
    verdict = check(history, faults=faults)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / "chaos.json", verdict, history, faults=faults)
        write_html(
            directory / "chaos.html",
            verdict,
            history,
            faults=faults,
            title="mcp-supervisor chaos",
        )
    except OSError as exc:
        say(f"mcp-supervisor chaos: cannot write the report to {directory}: {exc.strerror or exc}")
        return
    say(f"mcp-supervisor chaos: {verdict.summary()}; report at {directory / 'chaos.html'}")


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


async def _http(
    plan: Plan,
    host: str,
    port: int,
    upstream: str,
    engine: FaultEngine,
    history: CallHistory | None,
) -> int:
    import trio

    from ..faults._http_proxy import run_http_proxy, safe_url

    async with trio.open_nursery() as nursery:
        try:
            url = await nursery.start(
                partial(
                    run_http_proxy,
                    plan,
                    host,
                    port,
                    upstream,
                    engine=engine,
                    history=history,
                )
            )
        except OSError as exc:
            say(f"mcp-supervisor chaos: cannot listen on {host}:{port}: {exc.strerror or exc}")
            return EXIT_FAILURE
        say(f"mcp-supervisor chaos: listening on {url} -> {safe_url(upstream)}")
    return EXIT_FAILURE  # the proxy ends only when a signal stops it


async def _stdio(
    plan: Plan, command: list[str], engine: FaultEngine, history: CallHistory | None
) -> int:
    from ..faults._stdio import ProxyEnded, run_stdio_proxy

    try:
        return await run_stdio_proxy(plan, command, engine=engine, history=history)
    except ProxyEnded as exc:
        say(f"mcp-supervisor chaos: {exc}")
        return exc.exit_code


def _described(fault: Injected) -> str:
    """``injected kill (rule 0) into tools/call id=3 to_server``."""
    f = fault  # an Injected
    where = []
    if getattr(f, "method", None):
        where.append(str(f.method))
    if getattr(f, "id", None) is not None:
        where.append(f"id={f.id}")
    if getattr(f, "tool", None):
        where.append(f"tool={f.tool}")
    if getattr(f, "direction", None):
        where.append(str(f.direction))
    into = f" into {' '.join(where)}" if where else ""
    return f"injected {f.detail} (rule {f.rule}){into} at {f.t:.3f} s"


def _write_log(path: str, engine: FaultEngine) -> None:
    from ..faults import faults_json

    try:
        Path(path).write_bytes(faults_json(engine.log))
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
        "Ctrl-C); 2 for a usage or plan error. `mcp-supervisor chaos soak --help` tells of "
        "the soak: many fixture servers under random plans, then the checker's verdict.",
    )
    chaos._intermixing = True  # COMMAND's options are its own
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
        "--report",
        metavar="DIR",
        default=None,
        help="record the client's tool calls and, when the proxy ends, write the checker's "
        "verdict on them with the faults to DIR/chaos.json and DIR/chaos.html",
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
