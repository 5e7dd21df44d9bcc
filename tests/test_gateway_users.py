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
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._core import TIMEOUT_META
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
) -> AsyncIterator[tuple[Any, Any, Any, Any, str]]:
    """``(team, crm, wiki, sup, url)``: the team's AS, the two backing servers, the
    supervisor (logged in to both as ``gateway-admin``; crm with the fault plan
    ``faults``; ``more(team, url)``: more servers' config entries) and its team
    gateway's URL."""
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
        async with (
            open_supervisor(
                config, auth_dir=tmp_path / "auth", oauth_redirect_handler=Browser()
            ) as sup,
            trio.open_nursery() as nursery,
        ):
            await connected(sup)
            gateway = Gateway(sup)
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
    """``"perUser": "token_exchange"``: a backing server whose AS trusts the team's tokens.
    Each caller's token to the gateway is traded there (RFC 8693) for one of theirs — no
    login, no link; the catalog is read with the server's own machine token. The
    caller's token itself never reaches the backing server, and an expired exchanged
    token is exchanged again."""
    secret = "x" * 32
    async with open_oauth_server() as docs:
        docs.provider.add_client(
            "team-gateway-docs",
            secret,
            grant_types=["client_credentials", TOKEN_EXCHANGE_GRANT],
        )

        def more(team: Any, url: str) -> dict[str, Any]:
            docs.provider.trust_subject_tokens(team.issuer, team.provider.jwt_public_key, url)
            auth = {"grant": "client_credentials", "clientId": "team-gateway-docs"}
            auth |= {"clientSecret": secret, "perUser": "token_exchange"}
            entry = {"type": "http", "url": docs.url, "lazy": False, "autoApprove": True}
            return {"docs": {**entry, "auth": auth}}

        async with per_user_gateway(tmp_path, more=more) as (team, _, _, sup, url):
            assert subject_of((await sup.call("docs_whoami", {})).raw) is None  # the machine's
            for user in ("alice", "bob"):
                token = token_for(team, user, url)
                async with http_client(url, mode="legacy", token=token) as client:
                    with trio.fail_after(CALL_TIMEOUT):
                        assert subject_of(await client.call_tool("docs_whoami", {})) == user
                        assert subject_of(await client.call_tool("docs_whoami", {})) == user
            assert docs.provider.token_exchanges == 2  # one each: then held
            docs.provider.expire_access_tokens()
            async with http_client(url, mode="legacy", token=token_for(team, "alice", url)) as a:
                with trio.fail_after(CALL_TIMEOUT):
                    assert subject_of(await a.call_tool("docs_whoami", {})) == "alice"
            assert docs.provider.token_exchanges == 3
            issued = {token_for(team, s, url) for s in ("alice", "bob")}
            assert not issued & set(docs.provider.access_tokens)
            # a library call for a caller the gateway has not seen: no token to trade
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(AuthRequired) as raised:
                await sup.call("docs_whoami", {}, caller="carol")
            assert "token exchange" in str(raised.value) and raised.value.login_url is None


def test_a_login_link_is_good_once_for_ten_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """What docs/gateway.md says of the link: good once, for 10 minutes; and a link this
    gateway did not make (another key, an edited one) is refused."""
    from supervisor.auth import _users
    from supervisor.auth._users import TICKET_SECONDS, UserLogins, _BadTicket
    from supervisor.config import load_config

    config = load_config({"mcpServers": {"crm": entry("http://127.0.0.1:9/mcp", perUser=True)}})
    logins = UserLogins(
        config.servers,
        store=_users.AuthStore(Path("/nonexistent")),
        publish=lambda event: None,
        remember=lambda secret: None,
        forget=lambda secret: None,
    )
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
        logins.open_ticket(late)
    monkeypatch.setattr(_users.time, "time", lambda: now + 599)
    assert logins.open_ticket(late) == ("crm", "alice")
    with pytest.raises(_BadTicket, match="used already"):
        logins.open_ticket(late)
    body, mac = ticket().split(".")
    with pytest.raises(_BadTicket, match="not one of this gateway's"):
        logins.open_ticket(body[:-2] + "xx." + mac)
    logins.attach("https://gw.example", b"o" * 32, None)  # type: ignore[arg-type]
    with pytest.raises(_BadTicket, match="not one of this gateway's"):
        logins.open_ticket(body + "." + mac)


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
    from supervisor._util._serving import lifespan
    from supervisor.auth._broker import AuthProblem
    from supervisor.auth._users import MAX_ANSWER_BYTES, _json_answer
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
                await _json_answer(http, "GET", base + "/huge")
            assert await _json_answer(http, "GET", base + "/small") == (200, {"a": ""})
        nursery.cancel_scope.cancel()
