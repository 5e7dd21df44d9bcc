"""The ``mcp-supervisor`` command line.

Human output goes to standard output, diagnostics and logs to standard error. Exit codes:
0 ok, 1 runtime failure, 2 usage error (argparse's own code); 130, 143 and 129 after
Ctrl-C, SIGTERM and SIGHUP stopped the command (:func:`~._common.run`); 141 when standard
output was closed early (``| head``), which ends the command quietly. Each module here
adds its subcommands to the parser (``register``) and implements them; options are
accepted anywhere on a subcommand's line (:class:`~._common.Parser`).

Start-up is kept short: :func:`main` builds the parser of the command it runs only (the
whole parser for ``--help`` or a mistake), which imports only the standard library and
the command modules, which import what a command needs when it runs (the MCP SDK, HTTP
stacks and trio are loaded by commands that connect to servers). A command that only
reads files (``check``) sets the parser default ``light``: :func:`main` then configures
logging only if ``-v`` asks for more than warnings, which still reach standard error
through the library's default.

:func:`main` configures logging (:func:`~supervisor.log.configure_logging`; importing
configures nothing) and opens a redaction scope (``args.secrets``, a
:class:`~supervisor.log.RedactionScope`) for the command: the secrets of the config it
loads are redacted until the command returns, error messages included. Before anything
else it says, in one line on standard error, if supervisord's package (which also imports
as ``supervisor``) shares this one's folder (:mod:`supervisor._clash`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from .._clash import check_command_line
from ..log import redact, redacting
from . import _auth, _basics, _chaos, _manage, _reload, _resources, _serve, _servers, _tools
from ._common import (
    EPILOG,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    Commands,
    Parser,
    configure_cli_logging,
    log,
    said,
    say,
)

__all__ = ["build_parser", "main"]


class _Skipped:
    """Stands in for the parser of a subcommand not being run: takes every call (adding
    arguments, groups, defaults …) and builds nothing."""

    def __getattr__(self, name: str) -> Callable[..., _Skipped]:
        return lambda *args, **kwargs: self

    def __setattr__(self, name: str, value: object) -> None:
        pass  # an epilog, a parser class (``add``'s): nothing to keep


class _Only:
    """``parser.add_subparsers()``'s result, passed to each module's ``register`` when
    only ``wanted`` will run: that command's parser is built, the others are skipped
    (building all of them costs a command's start-up about 10 ms)."""

    def __init__(self, commands: Commands, wanted: str) -> None:
        self._commands = commands
        self._wanted = wanted
        self.found = False

    def add_parser(self, name: str, **kwargs: Any) -> Parser:
        if name != self._wanted and self._wanted not in kwargs.get("aliases", ()):
            return cast(Parser, _Skipped())
        self.found = True
        return self._commands.add_parser(name, **kwargs)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs, when nothing before it but ``-v`` asks for the
    whole parser (``--help``, a mistake): then only that command's parser is needed."""
    for arg in argv:
        if arg in ("-v", "--verbose") or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            continue
        return None if arg.startswith("-") else arg
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of every subcommand; with ``only``, a parser whose single
    subcommand is ``only`` (the whole one when there is no such command)."""
    verbosity = Parser(add_help=False)
    verbosity.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log more to stderr: -v info, -vv debug (default: warnings only)",
    )
    parser = Parser(
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
    adding: Commands = commands if only is None else cast(Commands, _Only(commands, only))
    _basics.register(adding, parents)
    _manage.register(adding, parents)
    _servers.register(adding, parents)
    _tools.register(adding, parents)
    _resources.register(adding, parents)
    _serve.register(adding, parents)
    _reload.register(adding, parents)
    _chaos.register(adding, parents)
    _auth.register(adding, parents)
    _basics.register_bench(adding, parents)
    if isinstance(adding, _Only) and not adding.found:
        return build_parser()
    for command in commands.choices.values():
        command.epilog = EPILOG
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    check_command_line()  # supervisord's package in ours: say so first, then run as we can
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_command_of(argv))
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
