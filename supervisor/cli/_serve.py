"""``serve``: the supervised servers served as one MCP server (the gateway), over stdio
or Streamable HTTP, optionally with the web dashboard (``--dashboard HOST:PORT``).
Other commands add the dashboard with :func:`add_dashboard_option` and
:func:`start_dashboard`::

    add_dashboard_option(parser)                 # in register()
    if not resolve_dashboard(args):              # first, before anything starts
        return EXIT_USAGE
    if args.dashboard is not None:               # inside the supervisor's block
        await start_dashboard(nursery, sup, args)
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ..config._limits import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE
from ._common import EXIT_OK, EXIT_USAGE, Commands, Parents, load, run
from ._trust import add_config_options

if TYPE_CHECKING:
    import trio

    from ..config import Config
    from ..dashboard import DashboardInfo
    from ..runtime import SupervisorHandle

__all__ = ["add_dashboard_option", "register", "resolve_dashboard", "start_dashboard"]

#: The environment variable the dashboard's token may be given in.
DASHBOARD_TOKEN_ENV = "MCP_SUPERVISOR_DASHBOARD_TOKEN"


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (``--session-idle``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def _count(text: str) -> int:
    """A positive whole number (``--max-sessions``)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)


def dashboard_address(text: str) -> tuple[str, int]:
    """argparse ``type=`` for ``HOST:PORT``: a clear usage error (exit 2) when malformed."""
    from ..dashboard._address import parse_address

    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_dashboard_option(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """Add ``--dashboard HOST:PORT`` (``args.dashboard``: ``(host, port)``, or ``None``
    when it is not ``required`` and not given) and ``--dashboard-token-file F``."""
    parser.add_argument(
        "--dashboard",
        type=dashboard_address,
        default=None,
        required=required,
        metavar="HOST:PORT",
        help="serve the web dashboard there (127.0.0.1:8080, [::1]:8080, :0 for any port; "
        "the host defaults to 127.0.0.1); restart and stop need the login URL it prints, "
        "and a host beyond loopback needs a token you choose",
    )
    parser.add_argument(
        "--dashboard-token-file",
        metavar="F",
        default=None,
        help=f"the dashboard's token (its login and bearer token), read from F (else "
        f"${DASHBOARD_TOKEN_ENV}, else one is generated and its login URL printed once "
        "on stderr)",
    )


def resolve_dashboard(args: argparse.Namespace) -> bool:
    """Before anything starts, set ``args.dashboard_token``: read from
    ``--dashboard-token-file``, else ``$MCP_SUPERVISOR_DASHBOARD_TOKEN``, else ``None``
    (the dashboard makes one). ``False``, said why on stderr, when the file cannot be
    read, the token is unfit, or ``--dashboard``'s host is beyond loopback without one."""
    from ..dashboard._security import check_token, exposure

    def refuse(message: str) -> bool:
        print(f"mcp-supervisor {args.command}: {message}", file=sys.stderr, flush=True)
        return False

    args.dashboard_token = None
    if args.dashboard is None:
        if args.dashboard_token_file is not None:
            return refuse("--dashboard-token-file is the dashboard's: add --dashboard HOST:PORT")
        return True
    if args.dashboard_token_file is not None:
        source = f"--dashboard-token-file {args.dashboard_token_file}"
        try:
            with open(args.dashboard_token_file, encoding="utf-8") as file:
                token: str | None = file.read().strip()
        except OSError as exc:
            return refuse(f"cannot read {source}: {exc.strerror or exc}")
    else:
        source = f"${DASHBOARD_TOKEN_ENV}"
        token = os.environ.get(DASHBOARD_TOKEN_ENV, "").strip() or None
    if token is not None and (unfit := check_token(token)) is not None:
        return refuse(f"the dashboard's token in {source} is refused: {unfit}")
    refused = exposure(args.dashboard[0], token)
    if refused is not None:
        return refuse(
            f"{refused}: set ${DASHBOARD_TOKEN_ENV} (or --dashboard-token-file F) to a "
            f"secret of at least 16 characters, or listen on 127.0.0.1"
        )
    args.dashboard_token = token
    args.dashboard_token_source = source
    return True


async def start_dashboard(
    nursery: trio.Nursery, sup: SupervisorHandle, args: argparse.Namespace
) -> DashboardInfo:
    """Start the dashboard of *sup* at ``args.dashboard``, with the token
    :func:`resolve_dashboard` found, in *nursery*, and say on stderr where it is and
    where to log in (with the token only when it was generated: said once, here, never
    logged).

    Returns its :class:`~supervisor.dashboard.DashboardInfo`. Binding failures raise
    ``OSError``.
    """
    from ..dashboard import serve_dashboard

    host, port = args.dashboard
    token = args.dashboard_token
    info = await nursery.start(partial(serve_dashboard, sup, host, port, token=token))
    login = info.login_url if token is None else f"{info.url}login?token=TOKEN"
    if token is not None:
        login += f" (TOKEN: the one in {args.dashboard_token_source})"
    for line in (
        f"dashboard at {info.url}",
        f"dashboard login (to restart and stop servers): {login}",
    ):
        print(f"mcp-supervisor: {line}", file=sys.stderr, flush=True)
    if info.login_to_read:
        print(
            f"mcp-supervisor: the dashboard listens on {host}, beyond this machine: reading "
            "it needs the login too",
            file=sys.stderr,
            flush=True,
        )
    return info


def _cmd_serve(args: argparse.Namespace) -> int:
    if not resolve_dashboard(args):
        return EXIT_USAGE
    token: str | None = None
    if args.http is not None:  # before the config: a bad token file is refused at once
        token = _token(args)
        if token is None:
            return EXIT_USAGE
    args.config_chosen = args.config is not None  # else ./.mcp.json: reloaded while trusted
    config = load(args)
    if config is None:
        return EXIT_USAGE
    from ..gateway._resource import ResourceGate, gateway_key
    from ..gateway._signin import SignIn

    base = config.path.parent if config.path is not None else None
    team = _team_auth(config)
    field = "supervisor.gateway"
    try:
        args.gateway_key = gateway_key(config.settings.gateway, base=base)
        if args.http is not None and team is not None:
            token = None
            if args.token_file is not None:
                _say(
                    "--token-file is not used by a team gateway (supervisor.gateway.auth in "
                    "the config): its callers bring their own OAuth access tokens"
                )
                return EXIT_USAGE
            field = "supervisor.gateway.auth"
            args.resource_gate = ResourceGate.from_config(team, base=base)
            per_user = [
                s.name for s in config.servers.values() if s.auth and s.auth.per_user == "login"
            ]
            if team.sign_in is not None:
                field = "supervisor.gateway.auth.signIn"
                args.sign_in = SignIn.from_config(args.resource_gate, team.sign_in, base=base)
            elif per_user:
                _say(
                    f"supervisor.gateway.auth: the servers {', '.join(per_user)} are served per "
                    'user ("perUser"): a team gateway needs "signIn" for their logins (the '
                    "browser that opens a login link signs in first, as the caller it is for)"
                )
                return EXIT_USAGE
    except ValueError as exc:  # a secret that cannot be read, or is unfit
        _say(f"{field}: {exc}")
        return EXIT_USAGE
    return run(_serve, config, args, token)


def _team_auth(config: Any) -> Any:
    """The config's ``supervisor.gateway.auth``, if it has one."""
    gateway = config.settings.gateway
    return None if gateway is None else gateway.auth


#: The environment variable a gateway's bearer token may be given in.
TOKEN_ENV = "MCP_SUPERVISOR_GATEWAY_TOKEN"


def _token(args: argparse.Namespace) -> str | None:
    """The HTTP gateway's bearer token: ``--token-file``, else ``$MCP_SUPERVISOR_GATEWAY_TOKEN``,
    else ``""`` (one is generated when serving starts); ``None`` (said why) when the file
    cannot be read or holds no token."""
    if args.token_file is not None:
        try:
            with open(args.token_file, encoding="utf-8") as file:
                token = file.read().strip()
        except OSError as exc:
            _say(f"cannot read --token-file {args.token_file}: {exc.strerror or exc}")
            return None
        if not token or any(c.isspace() for c in token):
            held = "several words" if token else "nothing"
            _say(f"--token-file {args.token_file} must hold one token (no spaces), not {held}")
            return None
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token and any(c.isspace() for c in token):
        _say(f"${TOKEN_ENV} must be one token, without spaces")
        return None
    return token


def _say(message: str) -> None:
    print(f"mcp-supervisor serve: {message}", file=sys.stderr, flush=True)


async def _serve(config: Config, args: argparse.Namespace, token: str | None) -> int:
    """Serve until the stdio client closes its end (exit 0) or, over HTTP, until cancelled:
    :func:`~._common.run` cancels it on a signal."""
    import trio

    from .._util._heap import settle
    from ..faults import Injector
    from ..gateway import Gateway, new_token, serve_http, serve_stdio
    from ..gateway._http import serve_local
    from ..gateway._policy import Policy
    from ..gateway._relay import Relay
    from ..runtime import open_supervisor
    from ..tools import Approver, Decider
    from ._reload import Reloader
    from ._tools import approve_all
    from ._watch import watch_files

    approve = Approver(approve_all, Decider.CLI_YES) if args.yes else None
    settings = config.settings.gateway
    relay = Relay()  # backing servers' sampling, elicitation, roots: to the waiting client
    async with (
        # the relay's four callbacks, each of its keyword's type (its dict says only "object")
        open_supervisor(
            config,
            approve=approve,
            injector=Injector(),  # the servers' fault plans, if any (docs/faults.md)
            **cast("dict[str, Any]", relay.client_options()),
        ) as sup,
        trio.open_nursery() as nursery,
    ):
        # The dashboard before connecting, so that the page's timeline shows the connections.
        if args.dashboard is not None:
            await start_dashboard(nursery, sup, args)
        gateway = Gateway(
            sup,
            tools=args.tools or (),
            servers=args.servers or (),
            tool_search=args.tool_search,
            relay=relay,
            policy=Policy(None if settings is None else settings.policy),
            key=args.gateway_key,
        )
        await nursery.start(gateway.run)  # which connects every server
        # The config file applied live: when it (or a file it pulls in) changes and
        # settles, and when `mcp-supervisor reload` asks on the local socket.
        reloader = Reloader(
            sup, args.config, chosen=args.config_chosen, secrets=args.secrets, gateway=gateway
        )
        await nursery.start(watch_files, reloader.watched, reloader.file_changed)
        # Where status, tools, call, events and reload find this gateway for this config.
        await nursery.start(partial(serve_local, gateway, args.config, reload=reloader.answer))
        settle()  # start-up is over: what it made stays out of the collector's way
        if args.stdio or (args.http is None and args.dashboard is None):
            await serve_stdio(gateway)  # until the client closes standard input
            nursery.cancel_scope.cancel()
            return EXIT_OK
        if args.http is None:  # the dashboard alone
            await trio.sleep_forever()
        host, port = args.http
        resource = getattr(args, "resource_gate", None)
        generated = not token and resource is None
        if resource is None:
            token = token or new_token()
        info = await nursery.start(
            partial(
                serve_http,
                gateway,
                host,
                port,
                token=token,
                resource=resource,
                sign_in=getattr(args, "sign_in", None),
                stateless=args.stateless,
                session_idle=args.session_idle,
                max_sessions=args.max_sessions,
            )
        )
        print(f"mcp-supervisor: gateway at {info.url}", file=sys.stderr, flush=True)
        if resource is not None:
            print(
                f"mcp-supervisor: a team gateway for {resource.resource}: it takes access "
                f"tokens from {resource.issuer}",
                file=sys.stderr,
                flush=True,
            )
        if generated:  # said once, here; never logged
            print(
                f"mcp-supervisor: gateway token (send 'Authorization: Bearer TOKEN'): {token}",
                file=sys.stderr,
                flush=True,
            )
        await trio.sleep_forever()
    return EXIT_OK  # not reached: the nursery ends only by cancellation


def register(commands: Commands, parents: Parents) -> None:
    """Add ``serve`` to the subcommands."""
    serve = commands.add_parser(
        "serve",
        parents=parents,
        help="serve every server's tools, resources and prompts as one MCP server",
        description="Connect every enabled server, keep them supervised, and serve their "
        "merged tools, resources and prompts as one MCP server (docs/gateway.md): over "
        "stdio until the client closes it (exit 0), or over Streamable HTTP at --http "
        "HOST:PORT until Ctrl-C, SIGTERM or SIGHUP; then stop the servers and exit 130, "
        "143 or 129. Stdio is the default unless --http or --dashboard is given: "
        "--dashboard alone serves the web dashboard only. A change to the config file "
        "(or a file it pulls in) is applied live once it settles, as `mcp-supervisor "
        "reload` applies it (a ./.mcp.json found without --config only while trusted); "
        "SIGHUP stops serve, as it stops every command. Exit 1 if the supervisor gives "
        "up, 2 for a usage or config error.",
    )
    add_config_options(serve)
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument(
        "--stdio",
        action="store_true",
        help="serve over standard input and output (the default without --http or --dashboard)",
    )
    mode.add_argument(
        "--http",
        type=dashboard_address,
        default=None,
        metavar="HOST:PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp (127.0.0.1 unless a host is "
        "given), with /healthz, /readyz and /metrics",
    )
    serve.add_argument(
        "--token-file",
        metavar="F",
        default=None,
        help=f"the HTTP bearer token, read from F (else ${TOKEN_ENV}, else one is generated "
        "and printed once on stderr)",
    )
    serve.add_argument(
        "--stateless",
        action="store_true",
        help="HTTP without sessions: any replica can answer any request",
    )
    serve.add_argument(
        "--session-idle",
        type=_seconds,
        default=DEFAULT_SESSION_IDLE,
        metavar="S",
        help="close an HTTP session after S seconds without a request (default "
        f"{DEFAULT_SESSION_IDLE:g}); its client then opens a new one",
    )
    serve.add_argument(
        "--max-sessions",
        type=_count,
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help=f"keep at most N HTTP sessions open (default {DEFAULT_MAX_SESSIONS}); past "
        "that a new one closes the one idle the longest, or gets 503 when all are in use",
    )
    serve.add_argument(
        "--tools", nargs="+", metavar="GLOB", default=None, help="serve only these tools"
    )
    serve.add_argument(
        "--servers", nargs="+", metavar="NAME", default=None, help="serve only these servers"
    )
    serve.add_argument(
        "--tool-search",
        action="store_true",
        help="list four tools (list, search, load, call) in place of the whole catalog, for "
        "clients and models that take only so many tools",
    )
    serve.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="approve every call that needs approval (without this, a client that "
        "declared elicitation is asked, and other clients' such calls are refused, saying "
        "how to allow them)",
    )
    add_dashboard_option(serve)
    serve.set_defaults(handler=_cmd_serve)
