"""The ``mcp-supervisor`` command line.

Human output goes to standard output, diagnostics and logs to standard error. Exit codes:
0 ok, 1 runtime failure, 2 usage error (argparse's own code). Each module here adds its
subcommands to the parser (``register``) and implements them; options are accepted
anywhere on a subcommand's line (:class:`~._common.Parser`).

:func:`main` configures logging (:func:`~supervisor.log.configure_logging`; importing
configures nothing) and opens a redaction scope (``args.secrets``, a
:class:`~supervisor.log.RedactionScope`) for the command: the secrets of the config it
loads are redacted until the command returns, error messages included.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import trio

from ..log import configure_logging, redact, redacting
from . import _basics, _serve, _servers, _tools
from ._common import EXIT_FAILURE, Parser, log

__all__ = ["build_parser", "main"]


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
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=Parser
    )
    parents = [verbosity]
    _basics.register(commands, parents)
    _servers.register(commands, parents)
    _tools.register(commands, parents)
    _serve.register(commands, parents)
    _basics.register_bench(commands, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with usage on stderr for a usage error
    verbose = getattr(args, "verbose", 0)
    level = "warning" if verbose == 0 else "info" if verbose == 1 else "debug"
    configure_logging(level=level, stream=sys.stderr, force=True)
    handler: Callable[[argparse.Namespace], int] = args.handler
    with redacting() as args.secrets:  # the loaded config's secrets, for the command
        try:
            return handler(args)
        except KeyboardInterrupt:
            print("mcp-supervisor: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:
            log.debug("command failed", command=args.command, exc_info=True)
            error = _root_cause(exc)
            print(
                f"mcp-supervisor {args.command}: error: {type(error).__name__}: "
                + redact(str(error)),
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
