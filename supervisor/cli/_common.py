"""What every subcommand shares: exit codes, the parser class, running a command under
trio with signals handled, config loading, JSON output.

A command that runs servers does so in :func:`run`: Ctrl-C (SIGINT), SIGTERM and SIGHUP
cancel it, so that its ``open_supervisor`` block stops the servers the usual way, and
the command then exits ``128 +`` the signal's number (130, 143, 129), as a process ended
by that signal would in a shell. A closed standard output (``| head``) ends a command
quietly with :data:`EXIT_BROKEN_PIPE` (``main`` handles it).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

from ..log import get_logger

if TYPE_CHECKING:
    import trio

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: standard output was closed before the command was done: 128 + SIGPIPE, as a shell
#: reports a process that SIGPIPE ended (``yes | head``)
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE

#: The signals that stop a command gracefully; it exits ``128 +`` the signal's number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STOPPED = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}

#: What every subcommand's ``--help`` ends with.
EPILOG = (
    "Exit status: 0 done, 1 failed, 2 usage or config error. Ctrl-C, SIGTERM and SIGHUP "
    "stop the servers gracefully, then the command exits 130, 143 or 129 (128 + the "
    "signal's number); the stop is bounded, and further signals do not cut it short. "
    "Output cut short by a closed pipe (| head) ends the command quietly with 141. "
    "Options may come before or after the positional arguments."
)

#: ``parser.add_subparsers()``'s result, to which each module adds its commands
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
#: the parent parsers every subcommand takes (``-v``)
Parents: TypeAlias = "list[Parser]"

log = get_logger("supervisor.cli")

_N = TypeVar("_N")


class Parser(argparse.ArgumentParser):
    """A command's parser: options are accepted anywhere, after positionals too
    (``call TOOL --json ARGS``), as ``parse_intermixed_args`` parses them.

    Mistakes are said by the parser they belong to, with a suggestion where one is close:
    an unknown choice gets *did you mean 'status'?* (a misspelt command included), and
    arguments a subcommand does not know are an error of that subcommand, shown with its
    own usage (``status --bogus``), a misspelt option with the closest one it has.
    """

    _intermixing = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            choices = list(action.choices or ())
            close = _closest(value, choices)
            if close is None:
                raise
            listed = ", ".join(map(repr, choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}; did you mean {close!r}? (choose from {listed})"
            ) from None

    def unrecognized(self, extras: Sequence[str]) -> None:
        """Exit 2 with this parser's usage: ``extras`` are arguments it does not know."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        options = [o[2:] for o in self._option_string_actions if o.startswith("--")]
        for extra in extras:
            name = extra.partition("=")[0]
            close = _closest(name[2:], options) if name.startswith("--") else None
            if close is not None:
                message += f" (did you mean --{close}?)"
                break
        self.error(message)

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None, namespace: _N
    ) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: object = None
    ) -> tuple[object, list[str]]:
        return self._parse_known(args, namespace)

    def _parse_known(
        self, args: Iterable[str] | None, namespace: object
    ) -> tuple[object, list[str]]:
        """What :meth:`parse_known_args` does (its overloads say its types): what a
        command's own parser changes, below them."""
        # parse_known_intermixed_args parses in two passes, each through this method; a
        # command with actions of its own (`auth login`) leaves it to their parsers.
        positionals = self._get_positional_actions()
        nested = any(isinstance(a, argparse._SubParsersAction) for a in positionals)
        if self._intermixing or not positionals or nested:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


class _Subcommands(argparse._SubParsersAction):
    """The subcommands of a :class:`Parser`: what the chosen one's parser does not know
    is its error (with its usage), not left for the parser above to report."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        extras = getattr(namespace, argparse._UNRECOGNIZED_ARGS_ATTR, None)
        chosen = self._name_parser_map[values[0]]
        if extras and isinstance(chosen, Parser):
            chosen.unrecognized(extras)


def _closest(word: object, choices: Any) -> str | None:
    """The one of ``choices`` closest to ``word`` (a typo's likely meaning), if any is."""
    if not isinstance(word, str):
        return None
    import difflib  # only on a mistake: it costs a command's start-up

    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1)
    return close[0] if close else None


def run(command: Callable[..., Awaitable[int]], *args: object) -> int:
    """``trio.run(command, *args)``; return its exit code, or ``128 + N`` if signal ``N``
    (one of :data:`STOP_SIGNALS`) stopped it.

    The first such signal says so on stderr and cancels ``command``, whose blocks then
    exit as on any cancellation: the servers are stopped gracefully before this returns.
    That stop is bounded (each server's ``shutdownTimeout``, then a few seconds for its
    process), so later signals do not cut it short, which could leave processes behind:
    they only say that it is under way. An error the command raises once stopped by a
    signal (such as writing to a terminal that hung up) is logged at debug level: the exit
    code is the signal's.
    """
    import trio

    caught: list[signal.Signals] = []  # the signal that stopped the command
    unheard: list[signal.Signals] = []  # those trio's receiver was not there to take

    def not_listening(signum: int, frame: object) -> None:
        # Before the watcher listens, or as it stops: trio raises again the signals its
        # receiver still held when it closed. Not the signal's default action (which
        # would end this process with the servers still running), but noted.
        unheard.append(signal.Signals(signum))

    previous = {signum: signal.signal(signum, not_listening) for signum in STOP_SIGNALS}
    try:
        code = trio.run(_stoppable, command, args, caught, unheard)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if unheard and not caught:  # it came as the command ended: nothing left to stop
        caught.append(unheard[0])
        say(f"mcp-supervisor: {_STOPPED[caught[0]]}")
    return 128 + caught[0] if caught else code


async def _stoppable(
    command: Callable[..., Awaitable[int]],
    args: Sequence[object],
    caught: list[signal.Signals],
    unheard: list[signal.Signals],
) -> int:
    import trio

    code = EXIT_FAILURE  # replaced unless a signal cancels the command
    error: Exception | None = None
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        await nursery.start(_stop_on_signal, scope, caught, unheard)
        try:
            with scope:  # takes the cancellations it caused out of any error group
                code = await command(*args)
        except Exception as exc:  # raised below as itself, not in the nursery's group
            error = exc
        nursery.cancel_scope.cancel()  # the watcher
    if error is not None and caught:
        log.debug("error while stopping", signal=caught[0].name, exc_info=error)
    elif error is not None:
        raise error
    return code


async def _stop_on_signal(
    scope: trio.CancelScope,
    caught: list[signal.Signals],
    unheard: list[signal.Signals],
    *,
    task_status: trio.TaskStatus[None],
) -> None:
    """Cancel ``scope`` at the first of :data:`STOP_SIGNALS` (one that came before this
    listened included), noting it in ``caught``; listen (and only say so) until
    cancelled."""
    import trio

    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        for signum in unheard[:1]:
            caught.append(signum)
            say(f"mcp-supervisor: {_STOPPED[signum]}, stopping the servers")
            scope.cancel()
        async for signum in signals:
            if caught:
                say("mcp-supervisor: still stopping the servers")
                continue
            caught.append(signal.Signals(signum))
            say(f"mcp-supervisor: {_STOPPED[caught[0]]}, stopping the servers")
            scope.cancel()


def said(error: BaseException) -> str:
    """``error``'s message as the command line says it: where the library's message names
    a Python call (``handle.restart``, an approval callback), the error's ``cli_message``
    gives the same facts with the command line's remedy."""
    from ..errors import ApprovalRequired, ServerUnavailable

    if isinstance(error, ServerUnavailable | ApprovalRequired):
        return error.cli_message
    return str(error)


def say(line: str) -> None:
    """One line on stderr, now, made printable (:func:`~supervisor._util._printable.printable`,
    line breaks kept): what it quotes of a server or a config is shown, never obeyed. A
    stderr that is gone (a closed terminal) is no error."""
    from .._util._printable import printable

    with suppress(OSError):
        print(printable(line, keep_lines=True), file=sys.stderr, flush=True)


def load(args: argparse.Namespace) -> Any:  # noqa: ANN401 - a Config, or None after errors
    """Load ``args.config`` — without one, ``./.mcp.json`` once it is trusted
    (:mod:`._trust`); its secrets are redacted for the rest of the command (they join
    ``args.secrets``, the command's :class:`~supervisor.log.RedactionScope`). ``None``
    when there is no file, it does not load, or it is not trusted: said on stderr."""
    from ..config import ConfigError, load_config
    from ._trust import config_path, digest, trust_default

    chosen = args.config is not None
    path = config_path(args)
    if path is None:
        return None
    before = None if chosen else digest(path)
    try:
        config = load_config(path)
    except ConfigError as exc:
        for error in exc.errors:
            say(str(error))
        return None
    args.secrets.add(*config.secrets())
    if chosen:
        return config
    if before is None or digest(path) != before:
        say(f"mcp-supervisor {args.command}: {path} changed while it was read; try again")
        return None
    return config if trust_default(args, config, before) else None


def configure_cli_logging(args: argparse.Namespace) -> None:
    """Log to stderr: warnings, or more with ``-v`` (info) and ``-vv`` (debug). Done for
    every command but the light ones (``light=True``), which do it once they know they
    need it: ``call`` through a running gateway never loads the logging stack."""
    from ..log import configure_logging

    verbose = getattr(args, "verbose", 0)
    level = "warning" if verbose == 0 else "info" if verbose == 1 else "debug"
    configure_logging(level=level, stream=sys.stderr, force=True)


def one_shot(args: argparse.Namespace) -> None:
    """A one-shot command (``status``, ``tools``, ``call``) gives each server one attempt
    and reports every outcome itself: the supervisor's own warnings (a server failed,
    would be restarted) would only repeat its output, so only errors are logged unless
    ``-v`` asked for more."""
    if not getattr(args, "verbose", 0):
        from ..log import configure_logging

        configure_logging(level="error", stream=sys.stderr, force=True)


#: what a one-shot command says about servers it tried once and found failing
ONE_ATTEMPT_NOTE = (
    "tried once, as every one-shot command does; a long-running supervisor "
    "(`mcp-supervisor serve`, `status --watch`) retries a failed server with backoff"
)


def print_json(document: object) -> None:
    """One JSON document on standard output, and a newline."""
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
