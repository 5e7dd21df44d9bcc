"""``serve``: run the supervised servers until a signal, with what serves them to others.

For now that is the web dashboard (``--dashboard HOST:PORT``); the MCP gateway
(``--stdio`` / ``--http HOST:PORT``) will be another mode of the same command.
Other commands add the dashboard with :func:`add_dashboard_option` and
:func:`start_dashboard`::

    add_dashboard_option(parser)                 # in register()
    if args.dashboard is not None:               # inside the supervisor's block
        await start_dashboard(nursery, sup, args.dashboard)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NoReturn

from ._common import EXIT_USAGE, Commands, Parents, load, run
from ._trust import add_config_options

if TYPE_CHECKING:
    import trio

__all__ = ["add_dashboard_option", "register", "start_dashboard"]


def dashboard_address(text: str) -> tuple[str, int]:
    """argparse ``type=`` for ``HOST:PORT``: a clear usage error (exit 2) when malformed."""
    from ..dashboard import parse_address

    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_dashboard_option(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """Add ``--dashboard HOST:PORT`` (``args.dashboard``: ``(host, port)``, or ``None``
    when it is not ``required`` and not given)."""
    parser.add_argument(
        "--dashboard",
        type=dashboard_address,
        default=None,
        required=required,
        metavar="HOST:PORT",
        help="serve the web dashboard there (127.0.0.1:8080, [::1]:8080, :0 for any port; "
        "the host defaults to 127.0.0.1)",
    )


async def start_dashboard(nursery: trio.Nursery, sup: object, address: tuple[str, int]) -> object:
    """Start the dashboard of *sup* in *nursery* and say where it is on stderr.

    Returns its :class:`~supervisor.dashboard.DashboardInfo`. The URL printed carries no
    token (the page embeds it). Binding failures raise ``OSError``.
    """
    from ..dashboard import serve_dashboard
    from ..dashboard._address import is_loopback

    host, port = address
    info = await nursery.start(serve_dashboard, sup, host, port)
    print(f"mcp-supervisor: dashboard at {info.url}", file=sys.stderr, flush=True)
    if not is_loopback(host):
        print(
            f"mcp-supervisor: warning: the dashboard listens on {host}, not only on this "
            "machine: anyone who can reach it can read the servers' status",
            file=sys.stderr,
            flush=True,
        )
    return info


def _cmd_serve(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return EXIT_USAGE
    return run(_serve, config, args.dashboard)


async def _serve(config: object, dashboard: tuple[str, int]) -> NoReturn:
    """Serve until cancelled: :func:`~._common.run` cancels it on a signal."""
    import trio

    from ..runtime import open_supervisor

    async with open_supervisor(config) as sup, trio.open_nursery() as nursery:  # type: ignore[arg-type]
        # The dashboard before connecting, so that the page's timeline shows the connections.
        await start_dashboard(nursery, sup, dashboard)
        nursery.start_soon(sup.connect_all)
        await trio.sleep_forever()


def register(commands: Commands, parents: Parents) -> None:
    """Add ``serve`` to the subcommands."""
    serve = commands.add_parser(
        "serve",
        parents=parents,
        help="run the servers until Ctrl-C, with the web dashboard",
        description="Connect every enabled server and keep them supervised, serving the "
        "web dashboard at --dashboard HOST:PORT, until Ctrl-C, SIGTERM or SIGHUP; then stop "
        "them and exit 130, 143 or 129. Exit 1 if the supervisor gives up, 2 for a usage or "
        "config error.",
    )
    add_config_options(serve)
    add_dashboard_option(serve, required=True)  # the one thing serve serves
    serve.set_defaults(handler=_cmd_serve)
