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
