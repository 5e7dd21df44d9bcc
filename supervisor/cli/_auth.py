"""``auth login|logout|status``: OAuth logins of remote servers (docs/auth.md).

What an authorization server said (issuer, scopes, errors) and a server's tool names
are made printable (:func:`supervisor._util._printable.printable`) before they are shown."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from .._util._printable import printable
from ..server._status import ServerStatus
from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Commands,
    Parents,
    Parser,
    load,
    run,
    said,
)
from ._trust import add_config_options

if TYPE_CHECKING:
    from ..auth._broker import BrokerInfo
    from ..auth._service import AuthService
    from ..config import Config, ServerConfig
    from ..runtime import SupervisorHandle


def _service(config: Config, args: argparse.Namespace) -> AuthService:
    """The brokers of ``config``'s servers, outside a supervisor (status, logout)."""
    import trio

    from ..auth._service import AuthService
    from ..runtime import token_store

    service = AuthService(
        [c for c in config.servers.values() if not c.disabled],
        store=token_store(None, config),
        publish=lambda event: None,
        remember=args.secrets.add,
        base_dir=config.path.parent if config.path is not None else None,
    )
    trio.run(service.load)
    return service


def _chosen(service: AuthService, config: Config, name: str | None) -> list[str] | None:
    """The OAuth servers the command is about; ``None`` (said on stderr) when ``name`` is
    not one."""
    oauth = list(service.brokers)
    if name is None:
        if not oauth:
            print("mcp-supervisor auth: no server in the config uses OAuth", file=sys.stderr)
            return None
        return oauth
    if name in oauth:
        return [name]
    if name not in config.servers:
        known = ", ".join(config.servers) or "none"
        print(
            f"mcp-supervisor auth: no MCP server named {name!r} (configured: {known})",
            file=sys.stderr,
        )
    else:
        print(
            f"mcp-supervisor auth: MCP server {name!r} does not use OAuth (only remote "
            'servers do, unless "auth" is false or they send their own Authorization '
            "header)",
            file=sys.stderr,
        )
    return None


def _expiry(expires_at: float | None, now: float) -> str:
    if expires_at is None:
        return "no expiry given"
    left = expires_at - now
    if left <= 0:
        return f"expired {_span(-left)} ago"
    return f"in {_span(left)}"


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    if seconds < 172800:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} days"


def _document(name: str, info: BrokerInfo) -> dict[str, Any]:
    return {
        "server": name,
        "account": info.account,
        "grant": info.grant,
        "logged_in": info.state != "no tokens",
        "issuer": info.issuer,
        "scopes": list(info.scopes),
        "expires_at": info.expires_at,
        "refreshable": info.has_refresh_token,
        "resource": info.resource,
        "token_file": info.token_file,
    }


def _describe(name: str, info: BrokerInfo, now: float) -> list[str]:
    return [printable(line) for line in _lines(name, info, now)]


def _lines(name: str, info: BrokerInfo, now: float) -> list[str]:
    if info.state == "no tokens":
        head = f"{name}: not logged in (account {info.account})"
        if info.grant == "authorization_code":
            head += f" — run `mcp-supervisor auth login {name}`"
        return [head]
    refresh = "refreshable" if info.has_refresh_token else "no refresh token"
    return [
        f"{name}: logged in (account {info.account})",
        f"  issuer   {info.issuer or 'unknown'}",
        f"  scopes   {' '.join(info.scopes) or '(none)'}",
        f"  expires  {_expiry(info.expires_at, now)} ({refresh})",
    ]


# -- status, logout: no servers run ---------------------------------------------------


def _offline(args: argparse.Namespace) -> tuple[AuthService, list[str]] | None:
    """The config's brokers and the OAuth servers named (all without a name), for a
    command that runs no server; ``None`` after saying what is wrong."""
    config = load(args)
    if config is None:
        return None
    service = _service(config, args)
    names = _chosen(service, config, args.server)
    return None if names is None else (service, names)


def _cmd_status(args: argparse.Namespace) -> int:
    found = _offline(args)
    if found is None:
        return EXIT_USAGE
    service, names = found
    now = time.time()
    infos = {name: service.brokers[name].info() for name in names}
    if args.json:
        print(json.dumps([_document(n, i) for n, i in infos.items()]))
    else:
        for name, info in infos.items():
            print("\n".join(_describe(name, info, now)))
    logged_in = all(i.state != "no tokens" for i in infos.values())
    return EXIT_OK if logged_in else EXIT_FAILURE


def _cmd_logout(args: argparse.Namespace) -> int:
    import trio

    found = _offline(args)
    if found is None:
        return EXIT_USAGE
    service, names = found
    done: set[int] = set()
    forgot = False
    if args.user is not None:  # a team gateway's caller's own logins
        per_user = [n for n in names if service.users is not None and n in service.users.servers]
        if not per_user:
            print(
                'mcp-supervisor auth: --user is for servers served per user ("perUser" in '
                "their auth); " + (f"{names[0]!r} is not" if len(names) == 1 else "none is"),
                file=sys.stderr,
            )
            return EXIT_USAGE
        names = per_user
    for name in names:
        if args.user is not None:
            assert service.users is not None
            broker = service.users.broker(name, args.user)
            shown = f"{name} ({printable(args.user)})"
            if trio.run(partial(broker.logout, client=args.forget_client)):
                forgot = True
                print(f"{shown}: logged out")
            else:
                print(f"{shown}: nothing to log out: no tokens were stored for that user")
            continue
        broker = service.brokers[name]
        if id(broker) in done:
            continue
        done.add(id(broker))
        if trio.run(partial(broker.logout, client=args.forget_client)):
            forgot = True
            print(f"{name}: logged out")
        else:
            print(f"{name}: nothing to log out: no tokens were stored for it")
        if args.forget_client:
            print(f"{name}: its client registration forgotten (the next login registers anew)")
    if forgot:  # tokens were removed: one may still be in use
        print(
            "(a supervisor already running keeps its connection until the server refuses "
            "the old token)",
            file=sys.stderr,
        )
    return EXIT_OK


# -- login: the browser, the listener, and a pasted URL ---------------------------------


def _cmd_login(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return EXIT_USAGE
    names = _chosen(_service(config, args), config, args.server)
    if names is None:
        return EXIT_USAGE
    return run(_login, config, names, args)


async def _login(config: Config, names: Sequence[str], args: argparse.Namespace) -> int:
    import trio

    from ..errors import SupervisorError
    from ..faults import Injector
    from ..runtime import open_supervisor

    only = {n: c for n, c in config.servers.items() if n in names}
    import msgspec

    config = msgspec.structs.replace(config, servers=only)
    failed = 0
    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        async with trio.open_nursery() as nursery:
            if not args.no_paste:
                nursery.start_soon(_read_pasted, sup)
            results = await _login_all(sup, names)
            nursery.cancel_scope.cancel()
        now = time.time()
        for name, outcome in results.items():
            if isinstance(outcome, SupervisorError):
                failed += 1
                shown = printable(said(outcome), keep_lines=True)
                print(f"mcp-supervisor auth: {name}: {shown}", file=sys.stderr)
                continue
            print("\n".join(_describe(name, outcome, now)))
            await sup.connect_all()
            record = await _settled(sup, name)
            if record.status != ServerStatus.CONNECTED:
                failed += 1
                reason = printable(record.last_error or record.status, keep_lines=True)
                print(f"mcp-supervisor auth: {name}: logged in, but: {reason}", file=sys.stderr)
                continue
            tools = sorted(t.name for t in sup.server(name).tools)
            shown = printable(", ".join(tools[:8])) + (" …" if len(tools) > 8 else "")
            print(f"  tools    {len(tools)}{': ' + shown if tools else ''}")
    return EXIT_FAILURE if failed else EXIT_OK


async def _settled(sup: SupervisorHandle, name: str) -> Any:
    """``name``'s record once its connection after the login succeeded or failed (the
    server reconnects by itself when its broker has the new token)."""
    import trio

    server = sup.server(name)
    # ServerView.config says only "object": it is the server's ServerConfig
    limit = cast("ServerConfig", server.config).init_timeout + 5.0
    # still waiting for the login to be used: needs_auth; refused, or not reachable: settled
    settled = (
        ServerStatus.CONNECTED,
        ServerStatus.FAILED,
        ServerStatus.AUTH_FAILED,
        ServerStatus.DISCONNECTED,
    )
    with trio.move_on_after(limit):
        async with sup.subscribe("*") as events:
            while server.status() not in settled:
                await events.__anext__()
    return server.record()


async def _login_all(sup: SupervisorHandle, names: Sequence[str]) -> dict[str, Any]:
    """Log every one of ``names`` in, concurrently (one callback listener for all)."""
    import trio

    from ..errors import SupervisorError

    results: dict[str, Any] = {}

    async def one(name: str) -> None:
        try:
            results[name] = await sup.login(name, "browser")
        except SupervisorError as exc:
            results[name] = exc

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(one, name)
    return {name: results[name] for name in names}


async def _read_pasted(sup: SupervisorHandle) -> None:
    """Take redirected URLs pasted on the terminal (a browser on another machine lands
    on a page that does not load: its address holds the answer)."""
    import trio

    logins = sup._auth.logins if sup._auth is not None else None
    if logins is None:
        return
    try:
        fileno = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return  # no standard input at all
    if sys.stdin.isatty():
        print(
            "(If the browser is on another machine, paste the address it was sent back "
            "to here and press Enter.)",
            file=sys.stderr,
            flush=True,
        )
    fd = os.dup(fileno)
    stream = trio.lowlevel.FdStream(fd)
    buffer = b""
    try:
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                text = line.decode(errors="replace").strip()
                if text and not logins.deliver(text):
                    print("That is not an answer a login is waiting for.", file=sys.stderr)
    finally:
        await stream.aclose()
        with contextlib.suppress(OSError):
            os.set_blocking(fileno, True)  # the terminal (or pipe) is shared


def register(commands: Commands, parents: Parents) -> None:
    """Add ``auth`` (``login``, ``logout``, ``status``) to the subcommands."""
    auth = commands.add_parser(
        "auth",
        parents=parents,
        help="OAuth logins of remote servers: login, logout, status",
        description="Log remote servers in with OAuth, log them out, or show what is "
        "stored (docs/auth.md). Tokens are kept in ~/.mcp-supervisor/auth (0600 files), or "
        "$MCP_SUPERVISOR_AUTH_DIR, or the config's supervisor.authDir.",
    )
    actions = auth.add_subparsers(
        dest="action", metavar="ACTION", required=True, parser_class=Parser
    )
    login = actions.add_parser(
        "login",
        parents=parents,
        help="log in now (every OAuth server without SERVER)",
        description="Authorize from the start: a browser login for the authorization-code "
        "grant (the URL is printed and opened with $BROWSER or the system's browser; a "
        "redirected URL pasted on the terminal also works), the machine grant otherwise. "
        "Then connect once and list the server's tools. Exit 0 when every login worked.",
    )
    logout = actions.add_parser(
        "logout",
        parents=parents,
        help="forget the stored tokens (every OAuth server without SERVER)",
        description="Delete the stored tokens; the client registration is kept for the next login.",
    )
    status = actions.add_parser(
        "status",
        parents=parents,
        help="show the stored logins: issuer, scopes, expiry, account (never a token)",
        description="Show each OAuth server's stored login without contacting it. Exit 0 "
        "when every one shown is logged in.",
    )
    for sub in (login, logout, status):
        sub.add_argument("server", nargs="?", metavar="SERVER", help="one server's name")
        add_config_options(sub)
    login.add_argument(
        "--no-paste", action="store_true", help="do not read a pasted URL from the terminal"
    )
    status.add_argument("--json", action="store_true", help="one JSON document on stdout")
    logout.add_argument(
        "--user",
        metavar="SUBJECT",
        help="a team gateway's caller (their token's subject): forget their own tokens for "
        'the servers served per user ("perUser"), as when they leave the team',
    )
    logout.add_argument(
        "--forget-client",
        action="store_true",
        help="forget the dynamic client registration too (the next login registers anew)",
    )
    login.set_defaults(handler=_cmd_login)
    logout.set_defaults(handler=_cmd_logout)
    status.set_defaults(handler=_cmd_status)
