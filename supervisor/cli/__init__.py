"""The ``mcp-supervisor`` command line.

Human output goes to standard output, diagnostics and logs to standard error. Exit codes:
0 ok, 1 runtime failure, 2 usage error (argparse's own code); 130, 143 and 129 after
Ctrl-C, SIGTERM and SIGHUP stopped the command (:func:`~._common.run`); 141 when standard
output was closed early (``| head``), which ends the command quietly. Each module here
adds its subcommands to the parser (``register``) and implements them; options are
accepted anywhere on a subcommand's line (:class:`~._common.Parser`).

Start-up is kept short: building the parser imports only the standard library and the
command modules, which import what a command needs when it runs (the MCP SDK, HTTP
stacks and trio are loaded by commands that connect to servers). A command that only
reads files (``check``) sets the parser default ``light``: :func:`main` then configures
logging only if ``-v`` asks for more than warnings, which still reach standard error
through the library's default.

:func:`main` configures logging (:func:`~supervisor.log.configure_logging`; importing
configures nothing) and opens a redaction scope (``args.secrets``, a
:class:`~supervisor.log.RedactionScope`) for the command: the secrets of the config it
loads are redacted until the command returns, error messages included.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence

from ..log import redact, redacting
from . import _auth, _basics, _chaos, _manage, _resources, _serve, _servers, _tools
from ._common import (
    EPILOG,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    Parser,
    configure_cli_logging,
    log,
    said,
    say,
)

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
        epilog=EPILOG,
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=Parser
    )
    parents = [verbosity]
    _basics.register(commands, parents)
    _manage.register(commands, parents)
    _servers.register(commands, parents)
    _tools.register(commands, parents)
    _resources.register(commands, parents)
    _serve.register(commands, parents)
    _chaos.register(commands, parents)
    _auth.register(commands, parents)
    _basics.register_bench(commands, parents)
    for command in commands.choices.values():
        command.epilog = EPILOG
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with usage on stderr for a usage error
    if getattr(args, "verbose", 0) or not getattr(args, "light", False):
        configure_cli_logging(args)
    handler: Callable[[argparse.Namespace], int] = args.handler
    with redacting() as args.secrets:  # the loaded config's secrets, for the command
        try:
            code = handler(args)
            sys.stdout.flush()  # output still buffered meets a closed pipe here
            return code
        except BaseException as exc:
            leaves = list(_leaves(exc))
            # Ctrl-C before run() watched for it: nothing was started yet
            if any(isinstance(e, KeyboardInterrupt) for e in leaves):
                say("mcp-supervisor: interrupted")
                return 128 + signal.SIGINT
            if leaves and all(isinstance(e, BrokenPipeError) for e in leaves):
                _silence_stdout()
                return EXIT_BROKEN_PIPE
            if not all(isinstance(e, Exception) for e in leaves):
                raise
            log.debug("command failed", command=args.command, exc_info=True)
            error = _root_cause(exc)
            say(
                f"mcp-supervisor {args.command}: error: {type(error).__name__}: "
                + redact(said(error))
            )
            return EXIT_FAILURE


def _root_cause(exc: BaseException) -> BaseException:
    """The single error inside nested exception groups (ignoring cancellations), if any."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not _cancelled(e)]
        if len(real) != 1:
            return exc
        exc = real[0]
    return exc


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The errors inside nested exception groups, cancellations left out."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    elif not _cancelled(exc):
        yield exc


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is trio's cancellation; trio is not imported to find out (a
    command that never loaded it raised none)."""
    trio = sys.modules.get("trio")
    return trio is not None and isinstance(exc, trio.Cancelled)


def _silence_stdout() -> None:
    """Standard output was closed by its reader (``| head``): point it at /dev/null, so
    that flushing it at exit raises nothing, as the Python documentation's note on
    SIGPIPE advises."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
