"""``chaos``: put a fault plan between any MCP client and an MCP server.

``chaos --plan P -- COMMAND ARGS…`` is a stdio MCP server: configure it in a client in
place of COMMAND and the client talks to COMMAND through the plan's faults. Each fault is
said on stderr as it is injected (``--quiet``: not), and ``--faults-log PATH`` writes
them all as JSON when the proxy ends. The proxy exits as COMMAND did (137 after a
``kill``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import EXIT_USAGE, Commands, Parents, run, say

__all__ = ["register"]


def _cmd_chaos(args: argparse.Namespace) -> int:
    from ..faults import FaultEngine, PlanError, load_plan

    rest = list(args.rest)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    elif rest:
        say(f"mcp-supervisor chaos: put -- before the server's command: -- {' '.join(rest)}")
        return EXIT_USAGE
    if not rest:
        say(
            "mcp-supervisor chaos: give the server's command after --: "
            "chaos --plan PLAN.json -- COMMAND ARGS..."
        )
        return EXIT_USAGE
    if args.plan is None:
        say("mcp-supervisor chaos: --plan PLAN.json is required")
        return EXIT_USAGE
    try:
        plan = load_plan(args.plan, seed=args.seed)
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
        return run(_stdio, plan, rest, engine)
    finally:
        if args.faults_log is not None:
            _write_log(args.faults_log, engine)


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
        "COMMAND ARGS...` in any MCP client in place of COMMAND. The same plan and seed "
        "inject the same faults in the same order for the same messages. Exits as COMMAND "
        "does (137 after a kill); 2 for a usage or plan error.",
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
    chaos.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")
    chaos.set_defaults(handler=_cmd_chaos)
