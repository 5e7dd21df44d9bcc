"""``demo``, ``check`` and ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import TYPE_CHECKING

from .._util._plural import plural
from .._util._printable import printable
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Commands, Parents, run, say
from ._serve import add_dashboard_option, resolve_dashboard
from ._trust import add_config_options

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..bench._suite import Measurement
    from ..config import FieldError, ServerConfig


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo._script import run_demo
    from ..demo._servers import DemoError
    from ..log import configure_logging

    if not resolve_dashboard(args):
        return EXIT_USAGE
    if not getattr(args, "verbose", 0):  # the demo's crashes are expected: no warnings
        configure_logging(level="error", stream=sys.stderr, force=True)
    demo = partial(
        run_demo,
        sys.stdout,
        servers=args.servers,
        dashboard=args.dashboard,
        dashboard_token=args.dashboard_token,
    )
    try:
        return run(demo)
    except DemoError as exc:
        print(f"mcp-supervisor demo: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _cmd_check(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..config._fields import _within
    from ..config._load import inspect_config
    from ..config._secrets import command_line, masked_url
    from ..log import redact
    from ._trust import config_path

    # check starts nothing (it reads the file and looks for each command on PATH), so the
    # default ./.mcp.json needs no trust here: checking a file is how one decides to trust it
    if config_path(args) is None:
        return EXIT_USAGE
    try:
        # Every server's problems at once: the structurally sound ones are loaded anyway.
        found = inspect_config(args.config)
    except ConfigError as exc:  # the file could not be read or parsed
        structural, entries, loaded = exc.errors, exc.servers, {}
    else:
        structural, entries, loaded = found.errors, found.entries, found.servers
    for server in loaded.values():
        args.secrets.add(*server.secrets())  # redacted until the command returns

    # A server invalid because of its environment, or whose program is not to be found,
    # fails the check, unless it is disabled.
    problems = {name: _problems(server) for name, server in loaded.items()}
    failures = structural + [e for s in loaded.values() if not s.disabled for e in problems[s.name]]
    if not args.json:  # with --json, the document says it all
        for error in structural:
            say(str(error))
        for server in loaded.values():
            for error in problems[server.name]:
                note = " (server is disabled)" if server.disabled else ""
                say(f"{error}{note}")
    rows = {}
    for name, server in loaded.items():
        kind = "remote" if server.remote_fallback else server.type.value
        shown = masked_url(server.url) if server.url else command_line(server)
        target = redact(shown)
        rows[name] = (server, kind, target)
    if args.json:
        # Each entry found, with its errors; what could not be validated is null.
        servers = []
        for name, where in entries.items():
            if name not in rows:
                mine = [_field_error(e) for e in structural if _within(e.path, where)]
                unknown = dict.fromkeys(("type", "target", "disabled", "lazy", "prefix"))
                servers.append({"name": name, **unknown, "errors": mine})
                continue
            server, kind, target = rows[name]
            servers.append(
                {
                    "name": name,
                    "type": kind,
                    "target": target,
                    "disabled": server.disabled,
                    "lazy": server.lazy,
                    "prefix": server.prefix,
                    "errors": [_field_error(e) for e in problems[name]],
                }
            )
        document = {
            "ok": not failures,
            "path": args.config,
            "servers": servers,
            "errors": [_field_error(e) for e in failures],
        }
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
    elif not failures:
        print(f"{args.config}: {plural(len(rows), 'server')}")
        width = max((len(name) for name in rows), default=0)
        for server, kind, target in rows.values():
            flags = "".join(
                f"  ({flag})"
                for flag, on in (("disabled", server.disabled), ("invalid", not server.valid))
                if on
            )
            name, shown = printable(server.name), printable(target)
            print(f"  {name:<{width}}  {kind:<6}  {shown}{flags}")
    return EXIT_USAGE if failures else EXIT_OK


def _problems(server: ServerConfig) -> list[FieldError]:
    """A server's errors, and for a local one that has none, whether its program is found
    where the process will look for it (its own env PATH, its cwd) and, when it asks for a
    sandbox, whether one can be made here (bubblewrap, user namespaces)."""
    from ..config import FieldError, ServerType
    from ..log import redact
    from ..transports._programs import command_problem

    if server.errors or server.type is not ServerType.STDIO or server.command is None:
        return list(server.errors)
    found = []
    if server.sandbox is not None:
        from ..transports._sandbox import sandbox_problem

        if (unsandboxed := sandbox_problem()) is not None:
            found.append(FieldError(f"{server.path}.sandboxEnabled", unsandboxed))
    problem = command_problem(server.command, env=server.env, cwd=server.cwd)
    if problem is not None:
        found.append(FieldError(f"{server.path}.command", redact(problem)))
    return found


def _field_error(error: FieldError) -> dict[str, str]:
    return {"path": error.path, "message": error.message}


def _cmd_bench(args: argparse.Namespace) -> int:
    from ..bench._registry import MEASUREMENTS
    from ..bench._run import select

    measurements = MEASUREMENTS
    if args.only:
        try:
            measurements = select(args.only)
        except LookupError as exc:
            print(f"mcp-supervisor bench: --only {exc.args[0]}", file=sys.stderr)
            return EXIT_USAGE
    return run(_bench, args.quick, args.json, measurements)


async def _bench(quick: bool, as_json: bool, measurements: Sequence[Measurement]) -> int:
    from ..bench._run import format_table, run_bench

    report = await run_bench(quick, measurements)
    if as_json:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_table(report))
    return EXIT_OK


def register(commands: Commands, parents: Parents) -> None:
    """Add ``demo`` and ``check`` to the subcommands."""
    demo = commands.add_parser(
        "demo",
        parents=parents,
        help="the quick start: example servers, a crash and its recovery, then exit",
        description="Supervise the example MCP servers shipped with mcp-supervisor "
        "(notes and calc over stdio, flaky over Streamable HTTP), call tools across them, "
        "kill two of them and print the recovery, then a summary; exit 0 (1 if something "
        "does not recover). With --dashboard, keep running with the web dashboard until "
        "Ctrl-C (exit 130). The crashes are on purpose: the log shows only errors unless -v.",
    )
    demo.add_argument(
        "--servers",
        metavar="DIR",
        default=None,
        help="a directory holding notes.py, calc.py and flaky.py to run instead of the "
        "example servers shipped with mcp-supervisor",
    )
    add_dashboard_option(demo)
    demo.set_defaults(handler=_cmd_demo)

    check = commands.add_parser(
        "check",
        parents=parents,
        help="validate a config file",
        description="Load and validate a config file: exit 0 printing its servers, or 2 "
        "listing every problem on stderr, one per line, each starting with its field path. "
        "A server that needs an environment variable which is not set is a problem, and so "
        "is a local server whose command is not found: not on PATH (the server's own, if "
        "its env sets one), or not an executable file at the path given. Check starts "
        "nothing, so it reads ./.mcp.json without asking whether it is trusted.",
    )
    add_config_options(check, trust=False)
    check.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    check.set_defaults(handler=_cmd_check, light=True)


def register_bench(commands: Commands, parents: Parents) -> None:
    """Add ``bench`` to the subcommands (listed last)."""
    bench = commands.add_parser(
        "bench",
        parents=parents,
        help="run the benchmark suite",
        description="Measure the runtime's figures and print them.",
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--quick", action="store_true", help="fewer, smaller rounds (seconds)")
    bench.add_argument(
        "--only",
        nargs="+",
        metavar="KEY",
        help="measure only these keys (shell patterns such as 'gateway_*'); a key measured "
        "with others, such as startup_8_ratio with shutdown_8_ratio, brings them along",
    )
    bench.set_defaults(handler=_cmd_bench)
