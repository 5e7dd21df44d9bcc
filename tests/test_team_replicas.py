"""A team gateway as it is deployed: two ``serve --http --stateless`` replicas behind
Debian's haproxy (docs/gateway.md's config), taking the team's JWT access tokens
(``supervisor.gateway.auth`` for the balancer's URL), one key between them, and the
OAuth login of their backing server kept in one PostgreSQL token store.

The backing server is logged in once, before the replicas start (into the store); both
replicas use that login. A caller of the team's group calls through the balancer and
reaches both replicas; one the policy grants nothing sees and calls nothing. When the
backing server's tokens expire, calls through both replicas lead to one refresh. With
tokens introspected, a user the team's AS revokes is refused at the next call, by either
replica. A caller's login link, good once, is good once across the replicas (their store
records its use). No process is left."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.gateway._signin import SIGNED_IN_ROUTE
from supervisor.testing.servers import open_oauth_server
from tests.postgres import needs_postgres, postgres_server
from tests.test_auth import Browser, connected, entry
from tests.test_gateway_team import GROUPS, client_of, free_port, token_for
from tests.test_gateway_users import login_link, open_login, subject_of
from tests.test_replicas import (
    CALL_TIMEOUT,
    EXIT_TIMEOUT,
    HAPROXY,
    haproxy_config,
    needs_haproxy,
    start,
)


@asynccontextmanager
async def replicas_of(
    tmp_path: Path, config: Path, nursery: trio.Nursery, stack: AsyncExitStack
) -> AsyncIterator[tuple[list[Any], list[int]]]:
    """Two ``serve --http --stateless`` replicas of ``config`` (their auth directory
    unused: ``tmp_path/unused``), run in ``nursery`` (reaped by ``stack``): ``(replicas,
    their ports)``. On the way out each is stopped with SIGTERM, and must exit as a
    SIGTERM's (143)."""
    env = {**os.environ, "MCP_SUPERVISOR_AUTH_DIR": str(tmp_path / "unused")}
    serve = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    # (-v: each replica logs when it connects its servers, for a failure to show)
    serve += ["--http", "127.0.0.1:0", "--stateless", "-v"]
    replicas = [
        await stack.enter_async_context(start(nursery, f"r{i}", serve, env=env)) for i in range(2)
    ]
    ports = []
    for replica in replicas:
        found = await replica.wait_for(rb"gateway at http://127\.0\.0\.1:(\d+)/mcp\n")
        ports.append(int(found[1]))
    yield replicas, ports
    for child in replicas:
        child.process.send_signal(signal.SIGTERM)
        with trio.fail_after(EXIT_TIMEOUT):
            await child.process.wait()
    assert [r.process.returncode for r in replicas] == [143, 143]


@asynccontextmanager
async def behind_haproxy(
    tmp_path: Path, config: Path, front: socket.socket
) -> AsyncIterator[tuple[list[Any], Any]]:
    """Two replicas of ``config`` (:func:`replicas_of`), and haproxy over them listening
    on ``front``: ``(replicas, haproxy)``. On the way out haproxy is stopped with SIGTERM,
    then the replicas."""
    async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
        async with replicas_of(tmp_path, config, nursery, stack) as (replicas, ports):
            haproxy_cfg = tmp_path / "haproxy.cfg"
            haproxy_cfg.write_text(haproxy_config(front.fileno(), ports))
            haproxy = await stack.enter_async_context(
                start(
                    nursery,
                    "haproxy",
                    [HAPROXY, "-f", str(haproxy_cfg), "-db"],
                    pass_fds=[front.fileno()],
                )
            )
            yield replicas, haproxy
            haproxy.process.send_signal(signal.SIGTERM)
            with trio.fail_after(EXIT_TIMEOUT):
                await haproxy.process.wait()
        nursery.cancel_scope.cancel()


def crm_entry(url: str) -> dict[str, Any]:
    backing = entry(url)
    backing.pop("auth")  # no loopback callback: its login is in the store already
    return backing


@needs_haproxy
@needs_postgres
@pytest.mark.parametrize("check", ["jwt", "introspection"])
async def test_two_team_replicas_behind_haproxy_share_the_backends_login_and_refresh_once(
    check: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tokens checked as JWTs, or introspected at every request — then a user the
    team's AS revokes is refused at their next call, whichever replica takes it."""
    assert HAPROXY is not None, "haproxy is required here (MCP_SUPERVISOR_REQUIRE_HAPROXY=1)"
    keys = {"TEAM_KEY": "t" * 40, "STORE_KEY": "s" * 40, "INTROSPECTION": "i" * 24}
    with postgres_server() as database, socket.socket() as front:
        front.bind(("127.0.0.1", 0))
        front.listen(64)
        url = f"http://127.0.0.1:{front.getsockname()[1]}/mcp"
        async with (
            open_oauth_server(
                jwt_access_tokens=True, resources=[url], groups={**GROUPS, "dave": ["eng"]}
            ) as team,
            open_oauth_server() as crm,
        ):
            store = {"url": database, "keyEnv": "STORE_KEY"}
            # The backing server's login, once, into the store (as `auth login` would).
            for name, value in keys.items():
                monkeypatch.setenv(name, value)
            login = {"mcpServers": {"crm": entry(crm.url)}, "supervisor": {"tokenStore": store}}
            async with open_supervisor(
                login, auth_dir=tmp_path / "admin", oauth_redirect_handler=Browser()
            ) as admin:
                await connected(admin)
            assert crm.provider.authorizations == 1

            config = tmp_path / "team.json"
            policy = [{"groups": ["eng"]}]
            auth: dict[str, Any] = {"issuer": team.issuer, "resource": url}
            if check == "introspection":
                team.provider.add_introspection_client("gateway", keys["INTROSPECTION"])
                auth["introspection"] = {
                    "endpoint": team.issuer + "/introspect",
                    "clientId": "gateway",
                    "clientSecretEnv": "INTROSPECTION",
                }
            gateway = {"auth": auth, "policy": policy}
            config.write_text(
                json.dumps(
                    {
                        "mcpServers": {"crm": crm_entry(crm.url)},
                        "supervisor": {
                            "gateway": {**gateway, "keyEnv": "TEAM_KEY"},
                            "tokenStore": store,
                        },
                    }
                )
            )
            async with behind_haproxy(tmp_path, config, front) as (replicas, haproxy):
                await through_the_balancer(url, team, crm, replicas, haproxy)
                if check == "introspection":
                    await revoked(url, team)
    unused = tmp_path / "unused"  # the store, not the directory
    assert not (unused / "tokens").exists() and not (unused / "tokens.db").exists()


async def through_the_balancer(
    url: str, team: Any, crm: Any, replicas: list[Any], haproxy: Any
) -> None:
    """alice (group eng) calls the backing server through both replicas; bob is granted
    nothing; the backing server's tokens expire and calls through both replicas lead to
    one refresh."""
    async with client_of(url, token_for(team, "alice", url)) as alice:
        with trio.fail_after(CALL_TIMEOUT):
            assert "crm_whoami" in {t.name for t in (await alice.list_tools()).tools}
        for _ in range(4):  # round robin: both replicas answer
            result = await whoami(alice, replicas, haproxy)
            assert not result.is_error, (result, replicas[0].stderr, replicas[1].stderr)
        crm.provider.expire_access_tokens()
        refreshes = crm.provider.refreshes
        # round robin: each replica meets the refused token; one refreshes, the other
        # (waiting on the store's lock) takes the new token — a second refresh, with the
        # rotated refresh token, would fail its call
        for _ in range(4):
            result = await whoami(alice, replicas, haproxy)
            assert not result.is_error, (result, replicas[0].stderr, replicas[1].stderr)
        assert crm.provider.refreshes == refreshes + 1, haproxy.stderr
    async with client_of(url, token_for(team, "bob", url)) as bob:
        with trio.fail_after(CALL_TIMEOUT):
            assert (await bob.list_tools()).tools == []
            with pytest.raises(MCPError, match="not served by this gateway"):
                await bob.call_tool("crm_whoami", {})


async def whoami(alice: Any, replicas: list[Any], haproxy: Any) -> Any:
    """alice's call of ``crm_whoami`` through the balancer; refused (an MCP error, which
    once came under the full suite's load: "not served by this gateway"), the test fails
    with what each replica and haproxy wrote, to tell which replica refused it and why."""
    try:
        with trio.fail_after(CALL_TIMEOUT):
            return await alice.call_tool("crm_whoami", {})
    except MCPError as exc:
        pytest.fail(f"{exc}: {[replica.stderr for replica in replicas]} {haproxy.stderr}")


async def revoked(url: str, team: Any) -> None:
    """dave of eng calls; the team's AS revokes him; his next calls, whichever replica
    takes them, are refused (401: the SDK client's error)."""
    async with client_of(url, token_for(team, "dave", url)) as dave:
        with trio.fail_after(CALL_TIMEOUT):
            assert not (await dave.call_tool("crm_whoami", {})).is_error
        team.provider.revoke_subject("dave")
        for _ in range(2):  # both replicas refuse
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError):
                await dave.call_tool("crm_whoami", {})


@needs_haproxy
@needs_postgres
async def test_team_replicas_reach_per_user_servers_with_each_users_own_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two backing OAuth servers served per user (``"perUser": true``) behind the same
    two replicas: each user's call is answered with the gateway's login link; the
    browser's steps (the link, the sign-in at the team's AS, its answer, the backing
    server's AS, its answer) go round robin across the replicas — the logins in progress
    are handed over through the store — and then each user's calls, through either
    replica, reach each server as that user. One user's login is never another's, nor
    good for the other server; nobody's token to the gateway reaches a backing server."""
    assert HAPROXY is not None, "haproxy is required here (MCP_SUPERVISOR_REQUIRE_HAPROXY=1)"
    keys = {"TEAM_KEY": "t" * 40, "STORE_KEY": "s" * 40, "SIGN_IN": "g" * 32}
    with postgres_server() as database, socket.socket() as front:
        front.bind(("127.0.0.1", 0))
        front.listen(64)
        url = f"http://127.0.0.1:{front.getsockname()[1]}/mcp"
        base = url.removesuffix("/mcp")
        async with (
            open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as team,
            open_oauth_server(subject="gateway-admin") as crm,
            open_oauth_server(subject="gateway-admin") as wiki,
        ):
            team.provider.add_client(
                "team-gateway", keys["SIGN_IN"], redirect_uris=[base + SIGNED_IN_ROUTE]
            )
            store = {"url": database, "keyEnv": "STORE_KEY"}
            for name, value in keys.items():
                monkeypatch.setenv(name, value)
            # The supervisor's own logins (the catalog's), once, into the store.
            login = {
                "mcpServers": {"crm": entry(crm.url), "wiki": entry(wiki.url)},
                "supervisor": {"tokenStore": store},
            }
            async with open_supervisor(
                login, auth_dir=tmp_path / "admin", oauth_redirect_handler=Browser()
            ) as admin:
                await connected(admin)

            servers = {
                name: {**crm_entry(fx.url), "auth": {"perUser": True}}
                for name, fx in (("crm", crm), ("wiki", wiki))
            }
            auth = {
                "issuer": team.issuer,
                "resource": url,
                "signIn": {"clientId": "team-gateway", "clientSecretEnv": "SIGN_IN"},
            }
            config = tmp_path / "team.json"
            config.write_text(
                json.dumps(
                    {
                        "mcpServers": servers,
                        "supervisor": {
                            "gateway": {"auth": auth, "keyEnv": "TEAM_KEY"},
                            "tokenStore": store,
                        },
                    }
                )
            )
            async with behind_haproxy(tmp_path, config, front) as (replicas, haproxy):
                seen = (replicas[0].stderr, replicas[1].stderr, haproxy.stderr)
                for user in ("alice", "bob"):
                    async with client_of(url, token_for(team, user, url), mode="legacy") as client:
                        # not logged in: the login link, nothing sent
                        link = await needs_login(client, "crm_whoami")
                        page = await open_login(link, team, crm, user)
                        assert page.status_code == 200, (page.text, *seen)
                        for _ in range(4):  # round robin: both replicas take the login
                            with trio.fail_after(CALL_TIMEOUT):
                                result = await client.call_tool("crm_whoami", {})
                            assert subject_of(result) == user, (result, *seen)
                        # a login to crm is not one to wiki
                        await needs_login(client, "wiki_whoami")
                async with client_of(url, token_for(team, "alice", url)) as alice:
                    with trio.fail_after(CALL_TIMEOUT):  # bob's login did not replace hers
                        assert subject_of(await alice.call_tool("crm_whoami", {})) == "alice"
                issued = {token_for(team, s, url) for s in ("alice", "bob")}
                assert not issued & set(crm.provider.access_tokens)


async def needs_login(client: Any, tool: str) -> str:
    """The login link a call of ``tool`` is answered with (the client speaks the
    session-based protocol: the -32042 error)."""
    with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
        await client.call_tool(tool, {})
    return login_link(raised.value)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_login_link_is_good_once_across_the_replicas(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas of a team gateway serving a server per user, sharing one token store
    (a SQLite file of one machine, or PostgreSQL), each called directly: alice's login
    link, opened at one replica (which sends the browser on to the team's sign-in), is
    refused at the other; a new link opened at both at once is taken by one of them."""
    if kind == "postgres" and needs_postgres.args[0]:
        pytest.skip(needs_postgres.kwargs["reason"])
    keys = {"TEAM_KEY": "t" * 40, "STORE_KEY": "s" * 40, "SIGN_IN": "g" * 32}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    with ExitStack() as databases:
        if kind == "postgres":
            database = databases.enter_context(postgres_server())
        else:
            database = f"sqlite:///{tmp_path / 'shared.db'}"
        url = f"http://127.0.0.1:{free_port()}/mcp"  # a balancer's: nothing listens there
        base = url.removesuffix("/mcp")
        async with (
            open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as team,
            open_oauth_server(subject="gateway-admin") as crm,
        ):
            team.provider.add_client(
                "team-gateway", keys["SIGN_IN"], redirect_uris=[base + SIGNED_IN_ROUTE]
            )
            store = {"url": database, "keyEnv": "STORE_KEY"}
            # The supervisor's own login (the catalog's), once, into the store.
            login = {"mcpServers": {"crm": entry(crm.url)}, "supervisor": {"tokenStore": store}}
            async with open_supervisor(
                login, auth_dir=tmp_path / "admin", oauth_redirect_handler=Browser()
            ) as admin:
                await connected(admin)
            auth = {
                "issuer": team.issuer,
                "resource": url,
                "signIn": {"clientId": "team-gateway", "clientSecretEnv": "SIGN_IN"},
            }
            config = tmp_path / "team.json"
            config.write_text(
                json.dumps(
                    {
                        "mcpServers": {"crm": {**crm_entry(crm.url), "auth": {"perUser": True}}},
                        "supervisor": {
                            "gateway": {"auth": auth, "keyEnv": "TEAM_KEY"},
                            "tokenStore": store,
                        },
                    }
                )
            )
            async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
                async with replicas_of(tmp_path, config, nursery, stack) as (replicas, ports):
                    await links_once(team, url, ports, replicas)
                nursery.cancel_scope.cancel()


async def links_once(team: Any, url: str, ports: list[int], replicas: list[Any]) -> None:
    """alice's link opened at the first replica, then at the second; a new one at both
    at once (see the test above)."""
    base = url.removesuffix("/mcp")

    def at(link: str, replica: int) -> str:
        assert link.startswith(base + "/"), link
        return link.replace(base, f"http://127.0.0.1:{ports[replica]}", 1)

    def said() -> tuple[str, ...]:
        return tuple(r.stderr for r in replicas)

    async with (
        client_of(at(url, 0), token_for(team, "alice", url), mode="legacy") as alice,
        httpx2.AsyncClient(timeout=CALL_TIMEOUT) as browser,
    ):
        link = await needs_login(alice, "crm_whoami")
        assert link.startswith(base + "/auth/login?ticket="), link
        with trio.fail_after(CALL_TIMEOUT):
            first = await browser.get(at(link, 0))
        assert first.status_code == 302, (first.text, *said())
        assert first.headers["location"].startswith(team.issuer)  # on to the sign-in
        with trio.fail_after(CALL_TIMEOUT):
            again = await browser.get(at(link, 1))
        assert again.status_code == 400 and "used already" in again.text, (again.text, *said())

        link = await needs_login(alice, "crm_whoami")
        statuses: list[int] = []
        with trio.fail_after(CALL_TIMEOUT):
            async with trio.open_nursery() as race:
                for replica in (0, 1):

                    async def open_at(replica: int = replica) -> None:
                        statuses.append((await browser.get(at(link, replica))).status_code)

                    race.start_soon(open_at)
        assert sorted(statuses) == [302, 400], (statuses, *said())
