"""Per-user backend credentials through a team gateway (``"auth": {"perUser": true}``).

The team's authorization server (the OAuth fixture, issuing JWTs) names the callers;
two backing servers (``crm`` and ``wiki``) are OAuth fixtures of their own, whose
``whoami`` tool answers the subject of the token it was called with. The supervisor's
own login to each (the catalog's) is ``gateway-admin``; each caller's calls reach each
server with that caller's own login, made through the gateway's login page the call
pointed them to — a URL-mode elicitation: the ``-32042`` error for a session-based
client, an ``input_required`` round for a 2026-07-28 one, whose SDK opens it and calls
again. Nothing is sent before the login; one user's login is never another's, nor good
for another server; the caller's token to the gateway never reaches a backing server."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

from supervisor import open_supervisor
from supervisor.auth._users import user_account
from supervisor.config._model import GatewayAuth
from supervisor.errors import AuthRequired
from supervisor.faults import Injector
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._core import TIMEOUT_META
from supervisor.gateway._relay import Relay
from supervisor.gateway._resource import ResourceGate
from supervisor.gateway._signin import SIGNED_IN_ROUTE, SignIn
from supervisor.testing.servers import open_oauth_server
from supervisor.testing.servers._oauth import TOKEN_EXCHANGE_GRANT
from tests.test_auth import Browser, connected, entry, rows
from tests.test_gateway import http_client
from tests.test_gateway_team import GROUPS, free_port, token_for

CALL_TIMEOUT = 30
SIGN_IN_SECRET = "s" * 32


async def open_login(url: str, team: Any, backing: Any, user: str) -> httpx2.Response:
    """Play ``user``'s browser: the gateway's login page, a sign-in at the team's AS (as
    ``user``: the fixture approves at once), back to the gateway, on to the backing
    server's AS (``user`` logs in there too), back to the gateway's callback."""
    team.config.subject = backing.config.subject = user
    async with httpx2.AsyncClient(timeout=CALL_TIMEOUT, follow_redirects=True) as http:
        return await http.get(url)


def subject_of(result: Any) -> str:
    assert not result.is_error, result
    return json.loads(result.content[0].text)["subject"]


def login_link(error: MCPError) -> str:
    assert error.error.code == types.URL_ELICITATION_REQUIRED, error
    (asked,) = UrlElicitationRequiredError.from_error(error.error).elicitations
    assert asked.mode == "url" and asked.elicitation_id
    return asked.url


@asynccontextmanager
async def per_user_gateway(
    tmp_path: Path,
    faults: list[dict[str, Any]] | None = None,
    more: Callable[[Any, str], dict[str, Any]] | None = None,
    relay: Relay | None = None,
) -> AsyncIterator[tuple[Any, Any, Any, Any, str]]:
    """``(team, crm, wiki, sup, url)``: the team's AS, the two backing servers, the
    supervisor (logged in to both as ``gateway-admin``; crm with the fault plan
    ``faults``; ``more(team, url)``: more servers' config entries; with ``relay``, the
    backing servers' requests handed to it, over the session-based protocol, where a
    server asks mid-call) and its team gateway's URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as team,
        open_oauth_server(subject="gateway-admin") as crm,
        open_oauth_server(subject="gateway-admin") as wiki,
    ):
        gate = ResourceGate.from_config(GatewayAuth(issuer=team.issuer, resource=url))
        base = url.removesuffix("/mcp")
        team.provider.add_client(
            "team-gateway", SIGN_IN_SECRET, redirect_uris=[base + SIGNED_IN_ROUTE]
        )
        sign_in = SignIn(gate, "team-gateway", SIGN_IN_SECRET)
        config = {
            "mcpServers": {
                "crm": {**entry(crm.url, perUser=True), "faults": faults or []},
                "wiki": entry(wiki.url, perUser=True),
                **(more(team, url) if more is not None else {}),
            }
        }
        options: dict[str, Any] = {}
        if relay is not None:
            options = {"mode": "legacy", **relay.client_options()}
        async with (
            open_supervisor(
                config,
                auth_dir=tmp_path / "auth",
                oauth_redirect_handler=Browser(),
                injector=Injector(),  # the crm server's plan (an empty one: inject() by hand)
                **options,
            ) as sup,
            trio.open_nursery() as nursery,
        ):
            await connected(sup)
            gateway = Gateway(sup, relay=relay)
            await nursery.start(gateway.run)
            await sup.tools()
            await nursery.start(
                partial(serve_http, gateway, "127.0.0.1", port, resource=gate, sign_in=sign_in)
            )
            yield team, crm, wiki, sup, url
            nursery.cancel_scope.cancel()


async def test_each_caller_reaches_a_per_user_server_with_their_own_login(
    tmp_path: Path,
) -> None:
    async with per_user_gateway(tmp_path) as (team, crm, wiki, sup, url):
        # The supervisor's own calls (no caller) go with its own login.
        assert subject_of((await sup.call("crm_whoami", {})).raw) == "gateway-admin"
        alice_token = token_for(team, "alice", url)
        async with http_client(url, mode="legacy", token=alice_token) as alice:
            # alice has not logged in to crm: her call is answered with the gateway's
            # login page for it (URL elicitation required), and not sent.
            statuses = sum(crm.mcp_statuses.values())
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("crm_whoami", {})
            link = login_link(raised.value)
            assert link.startswith(url.removesuffix("/mcp") + "/auth/login?ticket=")
            assert sum(crm.mcp_statuses.values()) - statuses <= 1  # the session's 401 alone
            # mallory, signed in at the team's AS in the browser that opens alice's link,
            # is refused: her login would become alice's
            page = await open_login(link, team, crm, "mallory")
            assert page.status_code == 403, page.text
            assert "signed in as &#x27;mallory&#x27;" in page.text, page.text
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("crm_whoami", {})
            link = login_link(raised.value)
            page = await open_login(link, team, crm, "alice")
            assert page.status_code == 200 and "logged in" in page.text, page.text
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
            # the link was good once
            async with httpx2.AsyncClient() as http:
                again = await http.get(link)
            assert again.status_code == 400 and "used already" in again.text
            # her crm login is not one for wiki
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("wiki_whoami", {})
            assert "/auth/login?ticket=" in login_link(raised.value)

        # bob's client speaks 2026-07-28: the login is an input_required round, whose
        # URL its SDK hands to the elicitation callback — the user opens it — and calls
        # again once it is answered.
        opened: list[str] = []

        async def open_it(context: Any, params: Any) -> types.ElicitResult:
            assert params.mode == "url"
            opened.append(params.url)
            page = await open_login(params.url, team, crm, "bob")
            assert page.status_code == 200, page.text
            return types.ElicitResult(action="accept")

        bob_token = token_for(team, "bob", url)
        async with http_client(url, token=bob_token, elicitation_callback=open_it) as bob:
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await bob.call_tool("crm_whoami", {})) == "bob"
        assert len(opened) == 1

        # each login stays its user's; neither user's token to the gateway reached crm
        async with http_client(url, mode="legacy", token=alice_token) as alice:
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
        assert subject_of((await sup.call("crm_whoami", {})).raw) == "gateway-admin"
        issued_by_team = {token_for(team, s, url) for s in ("alice", "bob")}
        assert not issued_by_team & set(crm.provider.access_tokens)
        stored = {row["account"] for row in rows(tmp_path / "auth").values()}
        assert {user_account("alice"), user_account("bob")} <= stored


async def test_a_per_user_call_outside_a_team_gateway_says_how_to_log_in(tmp_path: Path) -> None:
    """A library call made for a caller, with no team gateway to log them in: refused
    before anything is sent, saying where such logins are made."""
    async with (
        open_oauth_server(subject="gateway-admin") as crm,
        open_supervisor(
            {"mcpServers": {"crm": entry(crm.url, perUser=True)}},
            auth_dir=tmp_path,
            oauth_redirect_handler=Browser(),
        ) as sup,
    ):
        await connected(sup)
        with trio.fail_after(CALL_TIMEOUT), pytest.raises(AuthRequired) as raised:
            await sup.call("crm_whoami", {}, caller="alice")
        assert raised.value.user == "alice" and raised.value.login_url is None
        assert "team gateway" in str(raised.value)


async def per_user_call(
    tmp_path: Path, faults: list[dict[str, Any]], meta: dict[str, Any] | None = None
) -> tuple[Any, Any, list[str]]:
    """alice logs in to crm through the gateway, then calls ``crm_echo`` under the fault
    plan ``faults``: ``(the call's result, crm, the actions injected)``."""
    async with per_user_gateway(tmp_path, faults=faults) as (team, crm, _, sup, url):
        async with http_client(url, mode="legacy", token=token_for(team, "alice", url)) as alice:
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("crm_echo", {"text": "hi"})
            page = await open_login(login_link(raised.value), team, crm, "alice")
            assert page.status_code == 200, page.text
            with trio.fail_after(CALL_TIMEOUT):
                result = await alice.call_tool("crm_echo", {"text": "hi"}, meta=meta)
            return result, crm, [fault.action for fault in sup.faults()]


async def test_a_per_user_call_whose_answer_is_lost_is_not_sent_again(tmp_path: Path) -> None:
    """The connection of alice's session closes with her call's answer on its way: it
    ran once, and is said to have maybe taken effect — never sent again."""
    lost = {"when": {"tool": "echo", "direction": "to_client"}, "do": "close_stream"}
    result, crm, injected = await per_user_call(tmp_path, [lost])
    assert injected == ["close_stream"]
    assert result.is_error and "may have taken effect" in result.content[0].text, result
    assert crm.provider.executions.count(("echo", "alice")) == 1


async def test_a_per_user_call_refused_unseen_is_sent_once_on_a_new_session(
    tmp_path: Path,
) -> None:
    """The server forgot alice's session (404, as after its restart): refused unseen,
    the call goes once more on a new session of hers, and runs once."""
    expired = {"when": {"tool": "echo", "direction": "to_server", "nth": 1}, "do": "expire_session"}
    result, crm, injected = await per_user_call(tmp_path, [expired])
    assert injected == ["expire_session"]
    assert not result.is_error and result.content[0].text == "hi", result
    assert crm.provider.executions == [("echo", "alice")]


def test_per_user_servers_and_sign_in_are_checked_in_the_config() -> None:
    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    def refused(auth: dict[str, Any], said: str) -> None:
        server = {"url": "https://crm.example/mcp", "auth": auth}
        with pytest.raises(ConfigError, match=said):
            load_config({"mcpServers": {"crm": server}})

    refused({"perUser": "yes"}, 'perUser: must be true, false or "token_exchange"')
    refused({"perUser": "token_exchange"}, '"token_exchange" needs clientId')
    assertion = {"grant": "identity_assertion", "clientId": "c", "clientSecret": "s"}
    assertion["idp"] = {"tokenEndpoint": "https://idp.example/token", "clientId": "c"}
    assertion["idp"]["idTokenEnv"] = "ID_TOKEN"
    refused({**assertion, "perUser": True}, "does not go with the identity_assertion grant")
    machine = {"grant": "client_credentials", "clientId": "c", "clientSecret": "s"}
    for per_user, mode in ((True, "login"), ("token_exchange", "token_exchange")):
        server = {"url": "https://crm.example/mcp", "auth": {**machine, "perUser": per_user}}
        loaded = load_config({"mcpServers": {"crm": server}}).servers["crm"].auth
        assert loaded is not None and loaded.per_user == mode
    team = {"issuer": "https://idp.example", "resource": "https://gw.example/mcp"}
    for sign_in, said in (
        ({"clientId": "gw", "clientSecret": "x"}, "clientSecret: is never written"),
        ({"clientSecretEnv": "X"}, 'needs "clientId"'),
        ({"clientId": "gw", "clientSecretEnv": "X", "clientSecretFile": "f"}, "at most one"),
    ):
        config = {
            "mcpServers": {},
            "supervisor": {"gateway": {"auth": {**team, "signIn": sign_in}}},
        }
        with pytest.raises(ConfigError, match=said):
            load_config(config)
    config = {
        "mcpServers": {},
        "supervisor": {"gateway": {"auth": {**team, "signIn": {"clientId": "gw"}}}},
    }
    loaded = load_config(config).settings.gateway
    assert loaded is not None and loaded.auth is not None
    assert loaded.auth.sign_in is not None and loaded.auth.sign_in.client_id == "gw"


def test_serve_refuses_a_team_gateway_for_per_user_servers_without_sign_in(
    tmp_path: Path,
) -> None:
    """Without ``signIn``, a login link would be a bearer link (whoever opens it logs in
    for its caller): ``serve`` says what is missing, exit 2, before starting anything."""
    import subprocess
    import sys

    config = tmp_path / "team.json"
    team = {"issuer": "https://idp.example", "resource": "http://127.0.0.1:9/mcp"}
    server = {"url": "http://127.0.0.1:9/mcp", "auth": {"perUser": True}}
    config.write_text(
        json.dumps({"mcpServers": {"crm": server}, "supervisor": {"gateway": {"auth": team}}})
    )
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    ran = subprocess.run(
        [*command, "--http", "127.0.0.1:0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 2, ran.stderr
    assert 'the servers crm are served per user ("perUser")' in ran.stderr
    assert '"signIn"' in ran.stderr


async def test_a_token_exchange_server_gets_each_callers_tokens_on_their_behalf(
    tmp_path: Path,
) -> None:
    """``"perUser": "token_exchange"``: a backing server whose tokens the team's AS issues
    (here the team fixture's own MCP endpoint). Each caller's token to the gateway is
    traded at the team's AS — the one that issued it, and no other (RFC 8693) — for one
    meant for the server, as that caller: no login, no link; the catalog is read with the
    server's own machine token. The caller's token itself never reaches the backing
    server, and an expired exchanged token is exchanged again."""
    secret = "x" * 32

    def more(team: Any, url: str) -> dict[str, Any]:
        team.provider.add_client(
            "team-gateway-docs", secret, grant_types=["client_credentials", TOKEN_EXCHANGE_GRANT]
        )
        team.provider.trust_subject_tokens(team.issuer, team.provider.jwt_public_key, url)
        auth = {"grant": "client_credentials", "clientId": "team-gateway-docs"}
        auth |= {"clientSecret": secret, "perUser": "token_exchange"}
        entry = {"type": "http", "url": team.url, "lazy": False, "autoApprove": True}
        return {"docs": {**entry, "auth": auth}}

    async with per_user_gateway(tmp_path, more=more) as (team, _, _, sup, url):
        assert subject_of((await sup.call("docs_whoami", {})).raw) is None  # the machine's
        for user in ("alice", "bob"):
            token = token_for(team, user, url)
            async with http_client(url, mode="legacy", token=token) as client:
                with trio.fail_after(CALL_TIMEOUT):
                    for _ in range(2):
                        result = await client.call_tool("docs_whoami", {})
                        said = json.loads(result.content[0].text)
                        # a token meant for docs (not the caller's token to the gateway)
                        assert said["subject"] == user and said["resource"] == team.url
                        assert said["client_id"] == "team-gateway-docs"
        assert team.provider.token_exchanges == 2  # one each: then held
        team.provider.expire_access_tokens()
        async with http_client(url, mode="legacy", token=token_for(team, "alice", url)) as a:
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await a.call_tool("docs_whoami", {})) == "alice"
        assert team.provider.token_exchanges == 3
        # a library call for a caller the gateway has not seen: no token to trade
        with trio.fail_after(CALL_TIMEOUT), pytest.raises(AuthRequired) as raised:
            await sup.call("docs_whoami", {}, caller="carol")
        assert "token exchange" in str(raised.value) and raised.value.login_url is None


def recording_as(received: list[dict[str, Any]]) -> Any:
    """An attacker's authorization server (ASGI): notes every request it receives —
    path, headers, body — and answers as a lenient AS would (its metadata; any token
    request with a token)."""
    from supervisor._serving import lifespan, respond

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        received.append({"path": scope["path"], "headers": headers, "body": body.decode()})
        issuer = f"http://{headers['host']}"
        if scope["path"] == "/token":
            answer = {"access_token": "from-the-attacker", "token_type": "Bearer"}
        else:
            answer = {"issuer": issuer, "token_endpoint": issuer + "/token"}
            answer |= {"authorization_endpoint": issuer + "/authorize"}
        await respond(send, 200, json.dumps(answer).encode(), b"application/json")

    return app


def naming_as(issuer: str, app: Any) -> Any:
    """``app`` (an MCP server's ASGI app, taking any token), whose protected-resource
    metadata names ``issuer`` as its authorization server."""
    from supervisor._serving import respond

    async def named(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(
            "/.well-known/oauth-protected-resource"
        ):
            host = dict(scope["headers"])[b"host"].decode()
            metadata = {"resource": f"http://{host}/mcp", "authorization_servers": [issuer]}
            await respond(send, 200, json.dumps(metadata).encode(), b"application/json")
            return
        await app(scope, receive, send)

    return named


async def test_token_exchange_sends_no_callers_token_to_an_as_the_backing_server_names(
    tmp_path: Path,
) -> None:
    """A hostile (or compromised) backing server served ``"perUser": "token_exchange"``
    whose protected-resource metadata names an attacker's authorization server: alice's
    token to the gateway — good there until it expires — is never sent to it; nothing
    reaches the attacker, and alice's call fails (nothing sent), naming the AS the server
    named and the team's, where tokens are exchanged."""
    from supervisor.testing.servers import make_server
    from supervisor.testing.servers._http import start_http

    received: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        attacker = await start_http(nursery, recording_as(received))
        evil = attacker.url.removesuffix("/mcp")
        shop = await start_http(nursery, naming_as(evil, make_server("echo").streamable_http_app()))

        def more(team: Any, url: str) -> dict[str, Any]:
            auth = {"grant": "client_credentials", "clientId": "gw", "clientSecret": "x" * 32}
            entry = {"type": "http", "url": shop.url, "lazy": False, "autoApprove": True}
            return {"shop": {**entry, "auth": {**auth, "perUser": "token_exchange"}}}

        async with per_user_gateway(tmp_path, more=more) as (team, _, _, sup, url):
            alice = token_for(team, "alice", url)
            async with http_client(url, mode="legacy", token=alice) as client:
                with trio.fail_after(CALL_TIMEOUT):
                    result = await client.call_tool("shop_echo", {"text": "hi"})
            said = result.content[0].text
            assert result.is_error and evil in said and team.issuer in said, said
            assert "nothing was sent" in said
            assert not [r for r in received if alice in json.dumps(r)]
            assert received == []
        nursery.cancel_scope.cancel()


def unattached_logins() -> Any:
    """The per-user logins of one ``perUser`` server no gateway serves yet: no store, no
    events, no secrets kept."""
    from supervisor.auth import _users
    from supervisor.config import load_config

    config = load_config({"mcpServers": {"crm": entry("http://127.0.0.1:9/mcp", perUser=True)}})
    return _users.UserLogins(
        config.servers,
        store=_users.AuthStore(Path("/nonexistent")),
        publish=lambda event: None,
        remember=lambda secret: None,
        forget=lambda secret: None,
    )


async def test_a_login_link_is_good_once_for_ten_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What docs/gateway.md says of the link: good once, for 10 minutes; and a link this
    gateway did not make (another key, an edited one) is refused."""
    from supervisor.auth import _users
    from supervisor.auth._tickets import _BadTicket
    from supervisor.auth._users import TICKET_SECONDS

    logins = unattached_logins()
    logins.attach("https://gw.example", b"k" * 32, None)  # type: ignore[arg-type]
    assert TICKET_SECONDS == 600

    def ticket() -> str:
        url = logins.login_url("crm", "alice")
        assert url is not None and url.startswith("https://gw.example/auth/login?ticket=")
        return url.split("ticket=", 1)[1]

    now = _users.time.time()
    late = ticket()
    monkeypatch.setattr(_users.time, "time", lambda: now + 601)
    with pytest.raises(_BadTicket, match="expired"):
        await logins.open_ticket(late)
    monkeypatch.setattr(_users.time, "time", lambda: now + 599)
    assert await logins.open_ticket(late) == ("crm", "alice")
    with pytest.raises(_BadTicket, match="used already"):
        await logins.open_ticket(late)
    body, mac = ticket().split(".")
    with pytest.raises(_BadTicket, match="not one of this gateway's"):
        await logins.open_ticket(body[:-2] + "xx." + mac)
    logins.attach("https://gw.example", b"o" * 32, None)  # type: ignore[arg-type]
    with pytest.raises(_BadTicket, match="not one of this gateway's"):
        await logins.open_ticket(body + "." + mac)


async def test_a_callers_session_closes_after_five_idle_minutes(autojump_clock: Any) -> None:
    """What docs/gateway.md says: a caller's session is closed after five idle minutes,
    not while a call of theirs is in flight."""
    from supervisor.server._users import IDLE_SECONDS, _serve_until_idle, _Session

    assert IDLE_SECONDS == 300
    transport = type("Transport", (), {"closed": trio.Event()})()
    session = _Session("alice", last_used=trio.current_time())
    start = trio.current_time()
    session.in_flight = 1  # a call in flight: kept past the idle time
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_serve_until_idle, session, transport)
        await trio.sleep(IDLE_SECONDS * 2)
        session.in_flight, session.last_used = 0, trio.current_time()
        session.used.set()
        busy_until = trio.current_time()
    assert trio.current_time() - busy_until == pytest.approx(IDLE_SECONDS)
    assert busy_until - start == pytest.approx(IDLE_SECONDS * 2)


async def test_an_operator_logs_a_user_out_of_a_per_user_server(tmp_path: Path) -> None:
    """``auth logout crm --user alice`` (alice left the team): her tokens for crm are
    forgotten; the running gateway does not refresh them back from what it holds — her
    next call once they expire asks her to log in again."""
    async with per_user_gateway(tmp_path) as (team, crm, _, sup, url):
        async with http_client(url, mode="legacy", token=token_for(team, "alice", url)) as alice:
            link = await needs_login_link(alice, "crm_whoami")
            page = await open_login(link, team, crm, "alice")
            assert page.status_code == 200, page.text
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
            config = tmp_path / "mcp.json"
            servers = {"crm": {"url": crm.url, "auth": {"perUser": True}}}
            config.write_text(
                json.dumps(
                    {"mcpServers": servers, "supervisor": {"authDir": str(tmp_path / "auth")}}
                )
            )
            command = [sys.executable, "-m", "supervisor", "auth", "logout", "crm"]
            out = await trio.run_process(
                [*command, "--user", "alice", "--config", str(config)], capture_stdout=True
            )
            assert out.stdout.decode() == "crm (alice): logged out\n"
            assert user_account("alice") not in {
                row["account"] for row in rows(tmp_path / "auth").values()
            }
            crm.provider.expire_access_tokens()
            await needs_login_link(alice, "crm_whoami")
            again = await trio.run_process(
                [*command, "--user", "alice", "--config", str(config)], capture_stdout=True
            )
            assert "nothing to log out" in again.stdout.decode()
            # without a server's name: each one served per user (wiki is not in this config)
            every = await trio.run_process(
                [*command[:-1], "--user", "alice", "--config", str(config)], capture_stdout=True
            )
            assert every.stdout.decode() == (
                "crm (alice): nothing to log out: no tokens were stored for that user\n"
            )


async def needs_login_link(client: Any, tool: str) -> str:
    """The login link a session-based client's call of ``tool`` is answered with."""
    with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
        await client.call_tool(tool, {})
    return login_link(raised.value)


async def test_a_per_user_call_unanswered_in_time_may_have_taken_effect(tmp_path: Path) -> None:
    """alice's call ran, its answer never comes: at its timeout it is said to have maybe
    taken effect, and is not sent again."""
    hang = {"when": {"tool": "echo", "direction": "to_client"}, "do": "hang"}
    result, crm, injected = await per_user_call(tmp_path, [hang], {TIMEOUT_META: 1})
    assert injected == ["hang"]
    assert result.is_error and "did not answer tool 'echo' within 1" in result.content[0].text
    assert "may have taken effect" in result.content[0].text
    assert crm.provider.executions.count(("echo", "alice")) == 1


async def test_a_per_user_call_that_never_went_out_says_nothing_was_sent(
    tmp_path: Path,
) -> None:
    """alice's call is held before it reaches the server (a request that never left):
    at its timeout it is said not to have been sent — not "may have taken effect"."""
    held = {"when": {"tool": "echo", "direction": "to_server"}, "do": "hang"}
    result, crm, injected = await per_user_call(tmp_path, [held], {TIMEOUT_META: 1})
    assert injected == ["hang"]
    text = result.content[0].text
    assert result.is_error and "nothing was sent" in text and "may have" not in text, text
    assert ("echo", "alice") not in crm.provider.executions


async def test_an_authorization_servers_answer_is_size_checked_before_it_is_parsed() -> None:
    """A token-exchange server's authorization server that answers a megabyte (its
    metadata, its token) is refused before the JSON is read; a small answer is read."""
    from supervisor._serving import lifespan
    from supervisor.auth._broker import AuthProblem
    from supervisor.auth._exchange import MAX_ANSWER_BYTES, json_answer
    from supervisor.testing.servers._http import start_http

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        size = MAX_ANSWER_BYTES * 16 if scope["path"] == "/huge" else 10
        body = b'{"a": "' + b"x" * (size - 10) + b'"}'
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, app)
        base = served.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            with pytest.raises(AuthProblem, match=f"more than {MAX_ANSWER_BYTES} bytes"):
                await json_answer(http, "GET", base + "/huge")
            assert await json_answer(http, "GET", base + "/small") == (200, {"a": ""})
        nursery.cancel_scope.cancel()


async def redirected_until(browser: httpx2.AsyncClient, url: str, where: str) -> str:
    """Follow ``url``'s redirects in ``browser`` (its cookies kept) until one points at
    ``where``: that location, not opened."""
    for _ in range(10):
        page = await browser.get(url)
        assert page.status_code in (302, 303, 307), page.text
        url = str(browser.base_url.join(page.headers["location"]))
        if url.startswith(where):
            return url
    raise AssertionError(f"never sent to {where}")


async def test_a_forwarded_authorize_url_is_refused_in_another_browser(tmp_path: Path) -> None:
    """RFC 9700 §4.7: mallory opens his own login link, signs in at the team's AS as
    himself, stops at the gateway's redirect to crm's AS and sends that URL to alice, who
    is logged in there. Her browser comes back to the gateway's callback without the
    cookie his was given when he signed in: refused, nothing stored — her account at crm
    does not become his. His flight is not ended by it: his own browser finishes his
    login, as himself."""
    async with per_user_gateway(tmp_path) as (team, crm, _, sup, url):
        token = token_for(team, "mallory", url)
        async with (
            http_client(url, mode="legacy", token=token) as mallory,
            httpx2.AsyncClient(timeout=CALL_TIMEOUT) as mallorys_browser,
            httpx2.AsyncClient(timeout=CALL_TIMEOUT, follow_redirects=True) as alices_browser,
        ):
            link = await needs_login_link(mallory, "crm_whoami")
            team.config.subject = "mallory"
            authorize = await redirected_until(mallorys_browser, link, crm.issuer)
            assert mallorys_browser.cookies, "the browser that signed in is given its cookie"
            crm.config.subject = "alice"  # alice's browser, logged in at crm's AS
            page = await alices_browser.get(authorize)
            assert page.status_code == 403, page.text
            assert "another browser" in page.text, page.text
            stored = {row["account"] for row in rows(tmp_path / "auth").values()}
            assert user_account("mallory") not in stored
            await needs_login_link(mallory, "crm_whoami")  # still not logged in
            # the honest flow, one browser all the way: his own login, as himself
            crm.config.subject = "mallory"
            page = await mallorys_browser.get(authorize, follow_redirects=True)
            assert page.status_code == 200 and "logged in" in page.text, page.text
            with trio.fail_after(CALL_TIMEOUT):
                assert subject_of(await mallory.call_tool("crm_whoami", {})) == "mallory"


async def test_the_login_cookie_is_host_only_over_https_and_bound_to_its_login() -> None:
    """What docs/gateway.md says of the cookie that binds a login to its browser:
    ``__Host-`` and ``Secure`` over https, neither over plain http (a browser would drop
    it on a loopback gateway), HttpOnly and SameSite=Lax always; a callback without it,
    or with another login's, is refused before anything is handed to a login."""

    logins = unattached_logins()

    def cookie(state: str) -> tuple[str, str, set[str]]:
        header = logins.binding(f"https://as.example/authorize?client_id=c&state={state}")
        pair, *attributes = header.decode().split("; ")
        name, _, value = pair.partition("=")
        return name, value, set(attributes)

    logins.attach("https://gw.example", b"k" * 32, None)  # type: ignore[arg-type]
    name, value, attributes = cookie("S1")
    assert name.startswith("__Host-mcp-supervisor-login-") and len(value) >= 43
    assert attributes == {"Path=/", "Max-Age=300", "HttpOnly", "SameSite=Lax", "Secure"}
    other_name, other_value, _ = cookie("S2")
    assert other_name != name and other_value != value
    for cookies in (None, "", f"{other_name}={other_value}", f"{name}={other_value}"):
        status, page, headers = await logins.callback("code=c&state=S1", cookies)
        assert (status, headers) == (403, []) and b"another browser" in page
    logins.attach("http://127.0.0.1:8000", b"k" * 32, None)  # type: ignore[arg-type]
    name, _, attributes = cookie("S1")
    assert name.startswith("mcp-supervisor-login-")
    assert attributes == {"Path=/", "Max-Age=300", "HttpOnly", "SameSite=Lax"}


async def test_a_per_user_servers_question_goes_to_the_caller_whose_session_it_is(
    tmp_path: Path,
) -> None:
    """crm, served per user, asks the user's name while a call runs (elicitation): on
    alice's own session the question goes to alice's waiting call, on bob's to bob's —
    both calls waiting on crm at once, each caller is asked once, their own question,
    and crm hears each one's answer on that one's session."""
    async with per_user_gateway(tmp_path, relay=Relay()) as (team, crm, _, sup, url):
        asked = {"alice": trio.Event(), "bob": trio.Event()}
        questions: list[tuple[str, str]] = []

        def answering(user: str, other: str) -> Any:
            async def elicitation(context: object, params: Any) -> types.ElicitResult:
                questions.append((user, params.message))
                asked[user].set()
                with trio.fail_after(CALL_TIMEOUT):
                    await asked[other].wait()  # the other's call waits on crm too
                return types.ElicitResult(action="accept", content={"name": user.title()})

            return elicitation

        said: dict[str, Any] = {}
        async with (
            http_client(
                url,
                mode="legacy",
                token=token_for(team, "alice", url),
                elicitation_callback=answering("alice", "bob"),
            ) as alice,
            http_client(
                url,
                mode="legacy",
                token=token_for(team, "bob", url),
                elicitation_callback=answering("bob", "alice"),
            ) as bob,
        ):
            for user, client in (("alice", alice), ("bob", bob)):
                link = await needs_login_link(client, "crm_whoami")
                page = await open_login(link, team, crm, user)
                assert page.status_code == 200, page.text

            async def ask(user: str, client: Any) -> None:
                with trio.fail_after(CALL_TIMEOUT):
                    result = await client.call_tool("crm_ask_name", {})
                assert not result.is_error, result
                said[user] = json.loads(result.content[0].text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "alice", alice)
                nursery.start_soon(ask, "bob", bob)
        assert said == {
            user: {"subject": user, "action": "accept", "content": {"name": user.title()}}
            for user in ("alice", "bob")
        }
        assert sorted(questions) == [("alice", "Your name?"), ("bob", "Your name?")]


def test_a_token_exchange_servers_issuer_can_only_be_the_team_gateways(tmp_path: Path) -> None:
    """What docs/gateway.md says: a token-exchange server's ``issuer`` may be left out
    (it is made the team's: its own machine grant goes there too) or be the team's;
    another is a config error naming both, and ``serve`` exits 2 on it before starting
    anything."""
    import subprocess

    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    team = {"issuer": "https://login.example.com", "resource": "http://127.0.0.1:9/mcp"}
    auth = {"grant": "client_credentials", "clientId": "c", "clientSecret": "s"}

    def config(issuer: str | None) -> dict[str, Any]:
        exchange = {**auth, "perUser": "token_exchange"}
        if issuer is not None:
            exchange["issuer"] = issuer
        server = {"url": "https://docs.example/mcp", "auth": exchange}
        return {"mcpServers": {"docs": server}, "supervisor": {"gateway": {"auth": team}}}

    for issuer in (None, "https://login.example.com", "https://login.example.com/"):
        loaded = load_config(config(issuer)).servers["docs"].auth
        assert loaded is not None and loaded.issuer == (issuer or "https://login.example.com")
    said = "mcpServers.docs.auth.issuer: is https://evil.example, not the team gateway's"
    with pytest.raises(ConfigError, match=said) as raised:
        load_config(config("https://evil.example"))
    assert "https://login.example.com (supervisor.gateway.auth.issuer)" in str(raised.value)
    path = tmp_path / "team.json"
    path.write_text(json.dumps(config("https://evil.example")))
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(path)]
    ran = subprocess.run(
        [*command, "--http", "127.0.0.1:0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 2, ran.stderr
    assert "https://evil.example" in ran.stderr and "https://login.example.com" in ran.stderr


def test_a_callers_own_session_gets_only_the_handlers_made_for_that_caller() -> None:
    """What docs/servers.md says of ``per_server(factory, for_caller=make)``: a perUser
    server's session for a caller gets ``make(name, subject)``; a handler not made for
    callers is left out of it; other options are as for every session."""
    from supervisor.server import per_server
    from supervisor.server._options import resolved

    options = {
        "elicitation_callback": per_server(
            lambda name: f"{name}'s", for_caller=lambda name, subject: f"{name}'s for {subject}"
        ),
        "sampling_callback": per_server(lambda name: f"{name}'s sampling"),
        "logging_callback": print,
        "mode": "legacy",
    }
    assert resolved(options, "crm") == {
        "elicitation_callback": "crm's",
        "sampling_callback": "crm's sampling",
        "logging_callback": print,
        "mode": "legacy",
    }
    assert resolved(options, "crm", caller="alice") == {
        "elicitation_callback": "crm's for alice",
        "mode": "legacy",
    }


async def test_a_callers_own_login_is_told_on_events_to_that_caller_alone(
    tmp_path: Path,
) -> None:
    """alice logs in to crm: her ``/events`` stream hears of it (``user`` names her),
    bob's — open all along, crm shown to him — hears nothing of it."""
    async with (
        per_user_gateway(tmp_path) as (team, crm, _, sup, url),
        httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http,
    ):
        origin = url.removesuffix("/mcp")

        def as_(who: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token_for(team, who, url)}"}

        async def until(lines: Any, kind: str, server: str) -> list[dict[str, Any]]:
            heard = []
            with trio.fail_after(CALL_TIMEOUT):
                async for line in lines:
                    heard.append(json.loads(line))
                    if (heard[-1]["kind"], heard[-1].get("server")) == (kind, server):
                        return heard
            raise AssertionError(heard)

        async with (
            http.stream("GET", origin + "/events?filter=mcp.*", headers=as_("alice")) as alice,
            http.stream("GET", origin + "/events?filter=mcp.*", headers=as_("bob")) as bob,
            http_client(url, mode="legacy", token=token_for(team, "alice", url)) as client,
        ):
            link = await needs_login_link(client, "crm_whoami")
            page = await open_login(link, team, crm, "alice")
            assert page.status_code == 200 and "logged in" in page.text, page.text
            hers = await until(alice.aiter_lines(), "mcp.auth.completed", "crm")
            assert hers[-1]["user"] == "alice"
            await sup.restart("wiki")  # what bob hears after her login: wiki's own events
            his = await until(bob.aiter_lines(), "mcp.connected", "wiki")
    assert not [e for e in his if e.get("user") or e["kind"].startswith("mcp.auth.")], his
