"""A gateway for a team: ``serve --http`` as an OAuth 2.1 resource server in front of the
supervised servers (``supervisor.gateway.auth``), each caller narrowed to what the policy
grants them (``supervisor.gateway.policy``).

The team's authorization server is the OAuth fixture of supervisor.testing, issuing JWT
access tokens (and answering introspection) on loopback. A request without a token is
answered with the challenge MCP clients follow to the gateway's protected-resource
metadata; tokens for another audience, expired ones and revoked ones (introspection) are
refused; each caller sees and calls only what their rules grant, and the audit log names
them. A real MCP client — this project's own supervisor, logging in through OAuth with
dynamic registration — follows the gateway's challenge to the team's AS and calls
through it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.config._model import GatewayAuth, IntrospectionSettings, PolicyRule
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._policy import Policy
from supervisor.gateway._relay import Relay
from supervisor.gateway._resource import ResourceGate, _Refused
from supervisor.testing.servers import make_server, open_oauth_server

#: eng may use everything; bob the notes server's ``embedded`` tool alone; carol nothing.
RULES = (
    PolicyRule(groups=("eng",)),
    PolicyRule(subjects=("bob",), servers=("notes",), tools=("notes_embedded",)),
)
GROUPS = {"alice": ["eng"], "bob": ["sales"], "carol": []}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def team(
    tmp_path: Path,
    *,
    introspection: bool = False,
    rules: Any = RULES,
    servers: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[Any, Any, str]]:
    """The team's AS (JWT access tokens), a supervisor of two in-process servers (``notes``:
    tools, resources and prompts; ``ops``: echo tools) — or of ``servers`` — with an
    audit log, and its team gateway (``options``: the Gateway's) on a free port:
    ``(fx, sup, url)``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as fx:
        fx.provider.add_introspection_client("gateway", "introspection-secret")
        spec = None
        if introspection:
            spec = IntrospectionSettings(
                endpoint=fx.issuer + "/introspect",
                client_id="gateway",
                client_secret_env="TEAM_INTROSPECTION_SECRET",
            )
        auth = GatewayAuth(issuer=fx.issuer, resource=url, introspection=spec)
        gate = ResourceGate.from_config(
            auth, environ={"TEAM_INTROSPECTION_SECRET": "introspection-secret"}
        )
        config = {
            "mcpServers": servers or {},
            "supervisor": {"audit": {"path": str(tmp_path / "audit")}},
        }
        apps = None if servers else {"notes": make_server("rich"), "ops": make_server("echo")}
        relay = Relay()
        async with (
            open_supervisor(config, apps=apps, **relay.client_options()) as sup,  # type: ignore[arg-type]
            trio.open_nursery() as nursery,
        ):
            gateway = Gateway(sup, policy=Policy(rules), relay=relay, **options)
            await nursery.start(gateway.run)
            await sup.tools()
            await nursery.start(partial(serve_http, gateway, "127.0.0.1", port, resource=gate))
            yield fx, sup, url
            nursery.cancel_scope.cancel()


def token_for(fx: Any, subject: str, resource: str, **options: Any) -> str:
    """An access token of the team's AS for ``subject``, meant for ``resource``."""
    return fx.provider.issue_tokens(
        "team-cli", ["mcp"], resource=resource, subject=subject, **options
    ).access_token


@asynccontextmanager
async def client_of(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, **options) as client:  # type: ignore[arg-type]
        yield client


def names(listed: Any) -> set[str]:
    return {item.name for item in listed}


async def test_a_request_without_a_valid_token_is_pointed_to_the_teams_authorization_server(
    tmp_path: Path,
) -> None:
    async with team(tmp_path) as (fx, _, url), httpx2.AsyncClient() as http:
        origin = url.removesuffix("/mcp")
        metadata_url = origin + "/.well-known/oauth-protected-resource/mcp"
        answer = await http.post(url, json={})
        assert answer.status_code == 401
        challenge = answer.headers["www-authenticate"]
        assert challenge == f'Bearer resource_metadata="{metadata_url}"'
        metadata = (await http.get(metadata_url)).json()
        assert metadata["resource"] == url
        assert metadata["authorization_servers"] == [fx.issuer + "/"] or metadata[
            "authorization_servers"
        ] == [fx.issuer]
        # The probes need no token; the routes behind it all do.
        assert (await http.get(origin + "/healthz")).status_code == 200
        for path in ("/status", "/tools", "/resources", "/prompts", "/events"):
            assert (await http.get(origin + path)).status_code == 401

        refused = {
            "another audience": token_for(fx, "alice", fx.url),
            "not a token": "at-made-up",
        }
        for what, token in refused.items():
            answer = await http.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 401, what
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token", error_description="')
            assert challenge.endswith(f'resource_metadata="{metadata_url}"')
        fx.config.access_token_ttl = -120  # expired two minutes ago: past the leeway
        expired = token_for(fx, "alice", url)
        answer = await http.post(url, json={}, headers={"Authorization": f"Bearer {expired}"})
        assert answer.status_code == 401 and "expired" in answer.headers["www-authenticate"]


async def test_each_caller_lists_and_calls_only_what_the_policy_grants_them(
    tmp_path: Path,
) -> None:
    async with team(tmp_path) as (fx, sup, url):
        everything = set(await sup.tools())
        assert {"notes_embedded", "ops_echo"} <= everything
        async with client_of(url, token_for(fx, "alice", url)) as alice:
            assert names((await alice.list_tools()).tools) == everything
            result = await alice.call_tool("ops_echo", {"text": "hi"})
            assert not result.is_error
            assert "notes://index" in {str(r.uri) for r in (await alice.list_resources()).resources}
            assert names((await alice.list_prompts()).prompts)

        async with client_of(url, token_for(fx, "bob", url)) as bob:
            assert names((await bob.list_tools()).tools) == {"notes_embedded"}
            assert not (await bob.call_tool("notes_embedded", {})).is_error
            for tool in ("ops_echo", "notes_delete_note"):  # exists, not granted
                with pytest.raises(MCPError, match="not served by this gateway"):
                    await bob.call_tool(tool, {"text": "x", "title": "x"})
            # a rule naming tools grants those alone: not the server's resources
            assert (await bob.list_resources()).resources == []
            with pytest.raises(MCPError, match="not served"):
                await bob.read_resource("notes://index")

        async with client_of(url, token_for(fx, "carol", url)) as carol:
            assert (await carol.list_tools()).tools == []
            assert (await carol.list_resources()).resources == []
            assert (await carol.list_prompts()).prompts == []
            with pytest.raises(MCPError, match="not served by this gateway"):
                await carol.call_tool("ops_echo", {"text": "x"})
            with pytest.raises(MCPError, match="not served"):
                await carol.read_resource("notes://index")
            with pytest.raises(MCPError, match="not served"):
                await carol.get_prompt("notes_greet")

        # What the CLI reads is narrowed alike.
        origin = url.removesuffix("/mcp")
        async with httpx2.AsyncClient(timeout=30) as http:
            bob_token = {"Authorization": f"Bearer {token_for(fx, 'bob', url)}"}
            document = (await http.get(origin + "/tools", headers=bob_token)).json()
            assert [tool["name"] for tool in document["tools"]] == ["notes_embedded"]
            carol_token = {"Authorization": f"Bearer {token_for(fx, 'carol', url)}"}
            status = (await http.get(origin + "/status", headers=carol_token)).json()
            assert status["servers"] == []
            # resources and prompts come with the whole server: bob's rule names tools
            alice_token = {"Authorization": f"Bearer {token_for(fx, 'alice', url)}"}
            for path, key in (("/resources", "resources"), ("/prompts", "prompts")):
                whole = (await http.get(origin + path, headers=alice_token)).json()
                assert {entry["server"] for entry in whole[key]} == {"notes"}, whole
                narrowed = (await http.get(origin + path, headers=bob_token)).json()
                assert (narrowed[key], narrowed["servers"]) == ([], []), narrowed

    lines = [json.loads(line) for line in (tmp_path / "audit").read_text().splitlines()]
    made = [(line["caller"], line["tool"], line["outcome"]) for line in lines]
    assert ("alice", "ops_echo", "ok") in made
    assert ("bob", "notes_embedded", "ok") in made
    # a refused call never reached the gate: nothing was resolved, sent or written for it
    assert not any(tool == "ops_echo" and who != "alice" for who, tool, _ in made)


async def test_introspection_refuses_a_revoked_caller_at_the_next_call(tmp_path: Path) -> None:
    async with team(tmp_path, introspection=True) as (fx, _, url):
        token = token_for(fx, "alice", url)
        async with client_of(url, token) as alice:
            assert not (await alice.call_tool("ops_echo", {"text": "one"})).is_error
            asked = fx.provider.introspections
            assert not (await alice.call_tool("ops_echo", {"text": "two"})).is_error
            assert fx.provider.introspections > asked  # asked again: nothing kept
            fx.provider.revoke_subject("alice")
            with pytest.raises(MCPError):  # the SDK client's word for the 401 below
                await alice.call_tool("ops_echo", {"text": "three"})
        async with httpx2.AsyncClient() as http:
            answer = await http.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 401
            assert 'error="invalid_token"' in answer.headers["www-authenticate"]


async def test_a_gateway_that_cannot_ask_its_authorization_server_says_try_again(
    tmp_path: Path,
) -> None:
    async with team(tmp_path, introspection=True) as (fx, _, url):
        token = token_for(fx, "alice", url)
        fx.provider._introspectors.clear()  # the AS no longer answers this gateway
        async with httpx2.AsyncClient() as http:
            answer = await http.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "5"
        assert "www-authenticate" not in answer.headers  # not "your token is bad"


async def test_an_mcp_client_follows_the_challenge_to_the_teams_as_and_logs_in(
    tmp_path: Path,
) -> None:
    """This project's supervisor as the team member's client: the gateway's 401 leads it
    to the metadata, the team's AS (dynamic registration, a login through the browser),
    then its calls go through with the token the AS issued for the gateway."""
    from tests.test_auth import Browser, connected, entry

    async with team(tmp_path) as (fx, _, url):
        fx.config.subject = "alice"  # who logs in at the team's AS
        browser = Browser()
        config = {"mcpServers": {"team": entry(url)}}
        async with open_supervisor(
            config, auth_dir=tmp_path / "member", oauth_redirect_handler=browser
        ) as member:
            await connected(member, "team")
            result = await member.call("team_ops_echo", {"text": "through the team"})
            assert "through the team" in result.text
        assert len(browser.opened) == 1
        assert fx.provider.resources == [url]  # the login asked a token for the gateway
    lines = [json.loads(line) for line in (tmp_path / "audit").read_text().splitlines()]
    assert [line["caller"] for line in lines] == ["alice"]


async def test_serve_http_with_the_configs_gateway_section_is_a_team_gateway(
    tmp_path: Path,
) -> None:
    """``mcp-supervisor serve --http`` of a config with ``supervisor.gateway``, as
    docs/gateway.md shows it: no static token is made or printed, the callers' tokens are
    checked, each narrowed by the policy; ``--token-file`` is refused beside it."""
    from tests.test_gateway import fixture, text

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with open_oauth_server(jwt_access_tokens=True, resources=[url], groups=GROUPS) as fx:
        config = tmp_path / "team.json"
        policy = [{"groups": ["eng"]}, {"subjects": ["bob"], "tools": ["echo_add"]}]
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {"echo": fixture("echo", autoApprove=True)},
                    "supervisor": {
                        "gateway": {
                            "auth": {"issuer": fx.issuer, "resource": url},
                            "policy": policy,
                        }
                    },
                }
            )
        )
        command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
        token_file = tmp_path / "token"
        token_file.write_text("a-token-of-thirty-two-characters-at-least")
        refused = await trio.run_process(
            [*command, "--http", f"127.0.0.1:{port}", "--token-file", str(token_file)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert refused.returncode == 2
        assert b"--token-file is not used by a team gateway" in refused.stderr

        process = await trio.lowlevel.open_process(
            [*command, "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE
        )
        assert process.stderr is not None
        err = b""
        try:
            with trio.fail_after(60):
                while b"a team gateway for" not in err:
                    chunk = await process.stderr.receive_some()
                    assert chunk, err.decode()
                    err += chunk
            assert b"gateway token" not in err
            async with client_of(url, token_for(fx, "alice", url)) as alice:
                assert {"echo_echo", "echo_add"} <= names((await alice.list_tools()).tools)
                assert text(await alice.call_tool("echo_echo", {"text": "hi"})) == "hi"
            async with client_of(url, token_for(fx, "bob", url)) as bob:
                assert names((await bob.list_tools()).tools) == {"echo_add"}
            async with httpx2.AsyncClient() as http:
                assert (await http.post(url, json={})).status_code == 401
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                assert await process.wait() == 143
        finally:
            with suppress(ProcessLookupError):
                process.kill()
            await process.stderr.aclose()


class Stderr:
    """What a process writes to its stderr, read as it comes (:meth:`read`), and waited
    for (:meth:`shows`)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.ended = False
        self._more = trio.lowlevel.ParkingLot()

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        async for chunk in stream:
            self.data += chunk
            self._more.unpark_all()
        self.ended = True
        self._more.unpark_all()

    async def shows(self, text: bytes) -> None:
        while text not in self.data:
            assert not self.ended, self.data.decode(errors="replace")
            await self._more.park()


@asynccontextmanager
async def served_team(
    tmp_path: Path, fx: Any, url: str, env: dict[str, str] | None = None
) -> AsyncIterator[Stderr]:
    """``mcp-supervisor serve --http`` of a team config — ``fx``'s issuer, the gateway at
    ``url``, the echo fixture server behind it, no policy — in ``env``: its stderr, while
    it serves; stopped by SIGTERM (exit 143) at the end."""
    from tests.test_gateway import fixture

    config = tmp_path / "team.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"echo": fixture("echo", autoApprove=True)},
                "supervisor": {"gateway": {"auth": {"issuer": fx.issuer, "resource": url}}},
            }
        )
    )
    address = url.removeprefix("http://").removesuffix("/mcp")
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    process = await trio.lowlevel.open_process(
        [*command, "--http", address], stderr=subprocess.PIPE, env=env
    )
    assert process.stderr is not None
    err = Stderr()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(err.read, process.stderr)
            with trio.fail_after(60):
                await err.shows(b"a team gateway for")
            yield err
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                assert await process.wait() == 143
    finally:
        with suppress(ProcessLookupError):
            process.kill()
        await process.stderr.aclose()


def bearer_of(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_an_outage_of_the_teams_authorization_server_is_try_again_never_invalid(
    tmp_path: Path,
) -> None:
    """The team's AS answers its JWKS with 503 from the gateway's start: every request —
    a member's token, made-up key ids — is ``503`` with ``Retry-After``, never ``401``
    (on which MCP clients drop their tokens and send every user to log in again), and
    the flood fetches the keys no more than about once a second. Once the AS is back, the
    gateway sees it within seconds (not after a 30 s throttle); a key id then missing from
    the keys is ``401 invalid_token``."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    tools = url.removesuffix("/mcp") + "/tools"
    async with (
        open_oauth_server(
            jwt_access_tokens=True, resources=[url], groups=GROUPS, jwks_status=503
        ) as fx,
        served_team(tmp_path, fx, url) as err,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        alice = token_for(fx, "alice", url)
        mallory = ec.generate_private_key(ec.SECP256R1())
        claims = {"iss": fx.issuer, "sub": "mallory", "aud": url, "exp": 2**40}
        made_up = [
            jwt.encode(claims, mallory, algorithm="ES256", headers={"kid": f"made-up-{n}"})
            for n in range(20)
        ]
        start = trio.current_time()
        for token in [alice, *made_up, alice]:
            answer = await http.get(tools, headers=bearer_of(token))
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "5"
            assert "www-authenticate" not in answer.headers  # not "your token is bad"
        fx.config.jwks_status = 200
        with trio.fail_after(20):  # the AS's return seen at the next retry, at most 5 s on
            for _ in range(1000):
                answer = await http.get(tools, headers=bearer_of(alice))
                if answer.status_code != 503:
                    break
                await trio.sleep(0.2)  # a client trying again, sooner than it is told
        assert answer.status_code == 200, answer.text
        assert {"echo_echo", "echo_add"} <= {tool["name"] for tool in answer.json()["tools"]}
        elapsed = trio.current_time() - start
        assert fx.provider.jwks_requests <= 2 + elapsed  # retries 1, 2, 4, 5, 5... s apart
        refused = await http.get(tools, headers=bearer_of(made_up[0]))
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"')
        assert "the issuer has no key 'made-up-0'" in challenge
    assert b"Traceback" not in err.data


async def test_a_token_the_team_gateway_cannot_take_is_401_invalid_token_never_500(
    tmp_path: Path,
) -> None:
    """Tokens under the issuer's keys that must not be taken: an RSA algorithm under the
    kid of the issuer's EC key (PyJWT raised ``TypeError`` there: a 500 and a traceback
    for anyone), an empty ``sub``, an ``exp`` or ``iat`` that is a string (RFC 9068 §4).
    Each is ``401`` with ``error="invalid_token"`` and a description saying why."""
    import jwt

    from tests.test_gateway_resource import RSA_JWK, RSA_KEY

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    tools = url.removesuffix("/mcp") + "/tools"
    async with (
        open_oauth_server(
            jwt_access_tokens=True, resources=[url], groups=GROUPS, more_jwks=[RSA_JWK]
        ) as fx,
        served_team(tmp_path, fx, url) as err,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        later = int(time.time()) + 600

        def signed(algorithm: str, kid: str, **claims: Any) -> str:
            payload = {"iss": fx.issuer, "sub": "alice", "aud": url, "exp": later, **claims}
            return jwt.encode(payload, RSA_KEY, algorithm=algorithm, headers={"kid": kid})

        ec_kid = fx.provider.jwt_kid
        refused = {
            "RS256 under the EC key": (signed("RS256", ec_kid), "is not for"),
            "PS256 under the EC key": (signed("PS256", ec_kid), "is not for"),
            "an empty sub": (token_for(fx, "", url), "names no subject"),
            "exp a string": (signed("RS256", "rsa", exp=str(later)), "exp is not a NumericDate"),
            "iat a string": (signed("PS256", "rsa", iat=str(later - 600)), "iat is not a"),
        }
        for what, (token, why) in refused.items():
            answer = await http.get(tools, headers=bearer_of(token))
            assert answer.status_code == 401, (what, answer.status_code, answer.text)
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token"'), what
            assert why in challenge, (what, challenge)
        taken = await http.get(tools, headers=bearer_of(signed("PS256", "rsa")))
        assert taken.status_code == 200, taken.text  # the RSA key itself, rightly used
    assert b"Traceback" not in err.data


async def test_keys_an_issuer_names_on_plain_http_are_never_fetched(tmp_path: Path) -> None:
    """The team's AS names its ``jwks_uri`` on plain HTTP beyond loopback, and a man in
    the middle answers there (the gateway's HTTP proxy, here) with a key of its own: a
    token it signed for ``sub: admin`` is not taken (``503``: the keys cannot be had),
    nothing is fetched from that URL, and the log names it and the issuer — as the config
    refuses the same URL as ``jwksUrl``."""
    import os

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    attacker = ec.generate_private_key(ec.SECP256R1())
    jwk = jwt.algorithms.ECAlgorithm.to_jwk(attacker.public_key(), as_dict=True)
    keys = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256"}]}).encode()
    asked: list[bytes] = []

    async def in_the_middle(stream: trio.SocketStream) -> None:
        head = b""
        async with stream:
            while b"\r\n\r\n" not in head:
                chunk = await stream.receive_some()
                if not chunk:
                    return
                head += chunk
            asked.append(head.split(b"\r\n")[0])
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(keys), keys)
            )

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    tools = url.removesuffix("/mcp") + "/tools"
    jwks_uri = "http://keys.example.test/jwks"
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, in_the_middle, 0, host="127.0.0.1"))
        proxy = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        env = {**os.environ, "HTTP_PROXY": proxy, "http_proxy": proxy}
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        async with (
            open_oauth_server(
                jwt_access_tokens=True,
                resources=[url],
                metadata_overrides={"jwks_uri": jwks_uri},
            ) as fx,
            served_team(tmp_path, fx, url, env) as err,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            claims = {"iss": fx.issuer, "sub": "admin", "aud": url, "exp": time.time() + 600}
            forged = jwt.encode(claims, attacker, algorithm="ES256", headers={"kid": "k1"})
            answer = await http.get(tools, headers=bearer_of(forged))
            assert answer.status_code == 503, answer.text  # was: 200, as admin
            with trio.fail_after(30):
                await err.shows(f"names jwks_uri {jwks_uri}".encode())
            line = next(line for line in err.data.splitlines() if jwks_uri.encode() in line)
            assert fx.issuer.encode() in line and b"https://" in line, line
            assert asked == []  # the man in the middle was never asked
        nursery.cancel_scope.cancel()


async def test_a_sign_in_endpoint_the_teams_as_names_on_plain_http_is_not_used(
    tmp_path: Path,
) -> None:
    """The team's AS names its authorization or token endpoint on plain HTTP beyond
    loopback: the login page sends no browser there (and would post no code there), and
    says why, naming the URL and the issuer; with both on https (here: loopback) the same
    page sends the browser on to sign in."""
    from tests.test_gateway import http_client
    from tests.test_gateway_users import CALL_TIMEOUT, login_link, per_user_gateway

    async with (
        per_user_gateway(tmp_path) as (team, _, _, _, url),
        http_client(url, mode="legacy", token=token_for(team, "alice", url)) as alice,
        httpx2.AsyncClient(timeout=CALL_TIMEOUT) as browser,
    ):

        async def login_page() -> httpx2.Response:
            with trio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as raised:
                await alice.call_tool("crm_whoami", {})
            return await browser.get(login_link(raised.value))

        for field in ("authorization_endpoint", "token_endpoint"):
            insecure = f"http://login.example.test/{field}"
            team.config.metadata_overrides = {field: insecure}
            page = await login_page()
            assert page.status_code == 400, (field, page.status_code, page.headers)
            assert "location" not in page.headers
            assert insecure in page.text and team.issuer in page.text, page.text
        team.config.metadata_overrides = {}
        page = await login_page()
        assert page.status_code == 302
        assert page.headers["location"].startswith(team.authorization_endpoint + "?")


def test_the_policy_grants_the_union_of_the_rules_for_a_caller() -> None:
    from supervisor.gateway._resource import Caller

    policy = Policy(
        (
            PolicyRule(groups=("eng",), servers=("git*",)),
            PolicyRule(subjects=("bob",), tools=("notes_read*",)),
            PolicyRule(servers=("public",)),  # everyone
        )
    )
    eng = policy.grant(Caller("alice", groups=("eng",)))
    assert eng.tool("github", "github_push") and eng.tool("public", "public_x")
    assert not eng.tool("notes", "notes_read")
    bob = policy.grant(Caller("bob"))
    assert bob.tool("notes", "notes_read_all") and not bob.tool("notes", "notes_write")
    assert bob.sees("notes") and not bob.server("notes")  # tools named: not the server
    assert bob.server("public") and not bob.server("github")
    carol = policy.grant(Caller("carol", groups=("sales",)))
    assert carol.server("public") and not carol.sees("github")
    assert Policy(None).grant(Caller("anyone")).tool("x", "x_y")
    assert not Policy(()).grant(Caller("anyone")).server("x")


async def test_a_token_without_the_scopes_the_gateway_needs_is_403(tmp_path: Path) -> None:
    async with team(tmp_path) as (fx, _, url):
        gate = ResourceGate.from_config(
            GatewayAuth(issuer=fx.issuer, resource=url, scopes=("mcp", "tools")),
        )
        narrow = fx.provider.issue_tokens("cli", ["mcp"], resource=url, subject="alice")
        with pytest.raises(_Refused) as refused:
            await gate.authenticate(f"Bearer {narrow.access_token}")
        assert refused.value.status == 403
        challenge = refused.value.challenge or ""
        assert challenge.startswith('Bearer error="insufficient_scope"')
        assert 'scope="mcp tools"' in challenge
        wide = fx.provider.issue_tokens("cli", ["mcp", "tools"], resource=url, subject="alice")
        assert (await gate.authenticate(f"Bearer {wide.access_token}")).subject == "alice"
        with pytest.raises(_Refused) as refused:  # no token: where to get one, which scopes
            await gate.authenticate(None)
        assert refused.value.status == 401
        assert (refused.value.challenge or "").startswith(
            'Bearer scope="mcp tools", resource_metadata='
        )


async def test_a_checked_token_is_kept_until_it_expires_and_introspection_as_long_as_told(
    tmp_path: Path,
) -> None:
    async with team(tmp_path) as (fx, _, url):
        verifier = ResourceGate.from_config(GatewayAuth(issuer=fx.issuer, resource=url)).verifier
        checks = []

        class Counted:  # the real verifier, its checks counted
            async def check(self, token: str) -> Any:
                checks.append(token)
                return await verifier.check(token)

        gate = ResourceGate(Counted(), fx.issuer, url)  # type: ignore[arg-type]
        token = token_for(fx, "alice", url)
        for _ in range(3):
            assert (await gate.authenticate(f"Bearer {token}")).subject == "alice"
        assert len(checks) == 1
        now = [gate.wall_clock()]
        gate.wall_clock = lambda: now[0]
        now[0] += 3601  # past the token's expiry (on the gate's clock): checked again
        await gate.authenticate(f"Bearer {token}")
        assert len(checks) == 2

        keeping = ResourceGate.from_config(
            GatewayAuth(
                issuer=fx.issuer,
                resource=url,
                introspection=IntrospectionSettings(
                    endpoint=fx.issuer + "/introspect",
                    client_id="gateway",
                    client_secret_env="SECRET",
                    cache_seconds=60,
                ),
            ),
            environ={"SECRET": "introspection-secret"},
        )
        token = token_for(fx, "bob", url)
        asked = fx.provider.introspections
        for _ in range(3):
            assert (await keeping.authenticate(f"Bearer {token}")).subject == "bob"
        assert fx.provider.introspections == asked + 1


async def test_a_task_is_followed_only_by_the_caller_it_was_made_for(tmp_path: Path) -> None:
    from supervisor.server import _tasks as tasks
    from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE
    from tests.test_gateway_tasks import made

    ref = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    async with team(tmp_path, servers={"ref": ref}, rules=(PolicyRule(),)) as (fx, _, url):
        alice_token, bob_token = (token_for(fx, who, url) for who in ("alice", "bob"))
        async with (
            client_of(url, alice_token, extensions=[tasks.CLIENT]) as alice,
            client_of(url, bob_token, extensions=[tasks.CLIENT]) as bob,
        ):
            created = await made(alice, "ref_job", {"ask": False})
            with pytest.raises(MCPError, match="no task"):
                await tasks.get(bob, created.task_id)
            with pytest.raises(MCPError, match="no task"):
                await tasks.request(bob, "tasks/cancel", {"taskId": created.task_id})
            assert (await tasks.get(alice, created.task_id)).status in ("working", "completed")


def test_a_team_config_whose_introspection_secret_cannot_be_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before anything starts: exit 2, naming what is missing (never a secret)."""
    from supervisor.cli import main

    monkeypatch.delenv("TEAM_SECRET", raising=False)
    monkeypatch.delenv("MCP_SUPERVISOR_GATEWAY_TOKEN", raising=False)
    introspection = {
        "endpoint": "https://login.example.test/introspect",
        "clientId": "gateway",
        "clientSecretEnv": "TEAM_SECRET",
    }
    auth = {
        "issuer": "https://login.example.test",
        "resource": "https://mcp.example.test/mcp",
        "introspection": introspection,
    }
    config = tmp_path / "team.json"
    config.write_text(json.dumps({"mcpServers": {}, "supervisor": {"gateway": {"auth": auth}}}))
    serve = ["serve", "--config", str(config), "--http", "127.0.0.1:0"]
    assert main(serve) == 2
    assert "environment variable TEAM_SECRET is not set" in capsys.readouterr().err
    introspection.pop("clientSecretEnv")
    introspection["clientSecretFile"] = str(tmp_path / "missing")
    config.write_text(json.dumps({"mcpServers": {}, "supervisor": {"gateway": {"auth": auth}}}))
    assert main(serve) == 2
    said = capsys.readouterr().err
    assert f"cannot read the introspection client's secret from {tmp_path / 'missing'}" in said


async def test_tool_search_finds_and_calls_only_what_the_caller_is_granted(
    tmp_path: Path,
) -> None:
    async with team(tmp_path, tool_search=True) as (fx, _, url):
        async with client_of(url, token_for(fx, "bob", url)) as bob:
            found = await bob.call_tool("search", {"query": "echo embedded note", "limit": 50})
            assert {t["name"] for t in (found.structured_content or {})["tools"]} == {
                "notes_embedded"
            }
            listed = await bob.call_tool("list", {})
            assert [row["name"] for row in (listed.structured_content or {})["servers"]] == [
                "notes"
            ]
            loaded = await bob.call_tool("load", {"names": ["ops_echo", "notes_embedded"]})
            assert [t["name"] for t in (loaded.structured_content or {})["tools"]] == [
                "notes_embedded"
            ]
            refused = await bob.call_tool("call", {"name": "ops_echo", "arguments": {"text": "x"}})
            assert refused.is_error and "not served by this gateway" in str(refused.content)
            ran = await bob.call_tool("call", {"name": "notes_embedded", "arguments": {}})
            assert not ran.is_error
    made = [json.loads(line) for line in (tmp_path / "audit").read_text().splitlines()]
    assert [(m["caller"], m["tool"]) for m in made] == [("bob", "notes_embedded")]


async def test_completions_and_events_are_narrowed_to_the_caller(tmp_path: Path) -> None:
    async with team(tmp_path) as (fx, sup, url):
        async with client_of(url, token_for(fx, "carol", url)) as carol:
            with pytest.raises(MCPError, match="not served"):
                await carol.complete(
                    mcp_types.PromptReference(type="ref/prompt", name="notes_summarize"),
                    {"name": "title", "value": "a"},
                )
        origin = url.removesuffix("/mcp")
        bob = {"Authorization": f"Bearer {token_for(fx, 'bob', url)}"}
        seen: list[str | None] = []
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            http.stream("GET", origin + "/events?filter=mcp.*", headers=bob) as events,
        ):
            assert events.status_code == 200
            await sup.restart("ops")  # not bob's: none of its events reach him
            await sup.restart("notes")
            with trio.fail_after(30):
                async for line in events.aiter_lines():
                    seen.append(json.loads(line).get("server"))
                    if seen[-1] == "notes":
                        break
        assert set(seen) == {"notes"}


def test_a_caller_hears_of_the_resources_they_may_read_only() -> None:
    """The check a listen stream's URIs pass (2026-07-28 ``subscriptions/listen``): a
    caller whose grant covers the notes server whole may hear of its resources; one
    granted a tool of it only, or a URI no server offers, may not."""
    from types import SimpleNamespace

    from supervisor.gateway._core import CALLER_SCOPE
    from supervisor.gateway._resource import Caller

    async def check() -> list[bool]:
        async with open_supervisor({"mcpServers": {}}, apps={"notes": make_server("rich")}) as sup:
            await sup.tools()
            gateway = Gateway(sup, policy=Policy(RULES))

            def ctx(caller: Caller | None) -> Any:
                scope = {} if caller is None else {CALLER_SCOPE: caller}
                return SimpleNamespace(request=SimpleNamespace(scope=scope))

            alice, bob = Caller("alice", groups=("eng",)), Caller("bob")
            return [
                gateway.access.may_read(ctx(alice), "notes://index"),
                gateway.access.may_read(ctx(None), "notes://index"),
                gateway.access.may_read(ctx(bob), "notes://index"),
                gateway.access.may_read(ctx(alice), "elsewhere://x"),
            ]

    assert trio.run(check) == [True, True, False, False]


async def test_checks_share_one_http_client_while_the_gateway_serves() -> None:
    """Introspection at every request over one kept connection, not a client per request
    (one costs milliseconds): the gate holds a client while it runs, and lets it go."""
    gate = ResourceGate.from_config(
        GatewayAuth(
            issuer="https://login.example.test",
            resource="https://mcp.example.test/mcp",
            introspection=IntrospectionSettings(
                endpoint="https://login.example.test/introspect",
                client_id="gateway",
                client_secret_env="SECRET",
            ),
        ),
        environ={"SECRET": "introspection-secret"},
    )
    assert gate.verifier.http is None
    async with gate.running():
        held = gate.verifier.http
        assert isinstance(held, httpx2.AsyncClient) and not held.is_closed
    assert gate.verifier.http is None and held.is_closed


def test_a_broken_gateway_section_is_refused_naming_each_field() -> None:
    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    broken = {
        "mcpServers": {},
        "supervisor": {
            "gateway": {
                "auth": {
                    "issuer": "ftp://x",
                    "jwksUrl": "https://x/j",
                    "bogus": 1,
                    "introspection": {"endpoint": "https://x/i", "clientSecret": "hunter2-s3cret"},
                },
                "policy": [{"groupz": ["eng"]}, 3],
                "keyFile": "a",
                "keyEnv": "B",
            }
        },
    }
    with pytest.raises(ConfigError) as refused:
        load_config(broken)
    said = str(refused.value)
    for expected in (
        "supervisor.gateway.auth.issuer: must be an https:// URL",
        "supervisor.gateway.auth.bogus: unknown field",
        'supervisor.gateway.auth: needs "resource"',
        "supervisor.gateway.auth.introspection.clientSecret: is never written in the config",
        'supervisor.gateway.auth.introspection: needs "clientId"',
        'supervisor.gateway.auth: has "jwksUrl" and "introspection"',
        'supervisor.gateway.policy[0].groupz: unknown field; did you mean "groups"?',
        "supervisor.gateway.policy[1]: must be an object",
        'supervisor.gateway: needs at most one of "keyFile" and "keyEnv"',
    ):
        assert expected in said, expected
    assert "hunter2-s3cret" not in said  # a secret written where it should not be: not shown
    with pytest.raises(ConfigError, match='needs "auth" beside it'):
        load_config({"mcpServers": {}, "supervisor": {"gateway": {"policy": []}}})


async def test_a_session_answers_only_the_caller_who_opened_it(tmp_path: Path) -> None:
    """bob, holding alice's ``Mcp-Session-Id``, is answered as if it did not exist — a
    call in it, its stream, its ``DELETE`` — and it stays alice's: her renewed token
    (another token, the same subject) keeps using it. A 2026-07-28 call (the fast lane's
    shape) bearing her id is bob's own, sessionless, narrowed to his grant."""
    from tests.test_gateway_fidelity import raw_call
    from tests.test_replicas import INITIALIZE, LIST_TOOLS

    async with team(tmp_path) as (fx, _, url), httpx2.AsyncClient(timeout=30) as http:
        era = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }

        def as_(who: str, session: str | None = None) -> dict[str, str]:
            headers = {**era, "Authorization": f"Bearer {token_for(fx, who, url)}"}
            return headers if session is None else {**headers, "Mcp-Session-Id": session}

        opened = await http.post(url, json=INITIALIZE, headers=as_("alice"))
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=as_("alice", session))).is_success

        answers = {"list": await http.post(url, json=LIST_TOOLS, headers=as_("bob", session))}
        with trio.fail_after(30):  # (alice's stream, were it opened to bob, would not end)
            async with http.stream("GET", url, headers=as_("bob", session)) as stream:
                answers["stream"] = stream
                if stream.status_code == 404:
                    await stream.aread()
        answers["delete"] = await http.delete(url, headers=as_("bob", session))
        unknown = await http.post(url, json=LIST_TOOLS, headers=as_("bob", "0" * 32))
        assert unknown.status_code == 404
        for what, answer in answers.items():
            assert (answer.status_code, answer.text) == (404, unknown.text), what

        body, headers = raw_call("ops_echo", {"text": "x"})
        bob = {"Authorization": f"Bearer {token_for(fx, 'bob', url)}", "Mcp-Session-Id": session}
        called = await http.post(url, json=body, headers={**headers, **bob})
        assert "not served by this gateway" in called.text  # bob's grant, not alice's

        renewed = as_("alice", session)  # a new token of alice's
        listed = await http.post(url, json=LIST_TOOLS, headers=renewed)
        assert listed.status_code == 200 and "ops_echo" in listed.text
        assert (await http.delete(url, headers=renewed)).status_code == 200
        gone = await http.post(url, json=LIST_TOOLS, headers=renewed)
        assert gone.status_code == 404


async def test_events_tell_each_caller_only_what_the_policy_shows_them(tmp_path: Path) -> None:
    """``/events`` narrowed like ``/tools``: bob (granted ``notes_embedded`` alone) hears
    of that tool only in a catalog change, of no resource (his rule names tools, not the
    server whole), nothing of ``ops``, no tool conflict, and no other user's login; alice
    (granted everything) hears of all that but another user's login."""
    from supervisor.events import _catalog as events

    async with team(tmp_path) as (fx, sup, url), httpx2.AsyncClient(timeout=30) as http:
        notes = sorted(name for name in await sup.tools() if name.startswith("notes_"))
        assert "notes_embedded" in notes and len(notes) > 1
        origin = url.removesuffix("/mcp")

        def as_(who: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token_for(fx, who, url)}"}

        async def until(lines: Any, last: str) -> list[dict[str, Any]]:
            seen = []
            with trio.fail_after(30):
                async for line in lines:
                    seen.append(json.loads(line))
                    if seen[-1]["kind"] == last:
                        return seen
            raise AssertionError(seen)

        async with (
            http.stream("GET", origin + "/events", headers=as_("alice")) as alice,
            http.stream("GET", origin + "/events", headers=as_("bob")) as bob,
        ):
            alice_lines, bob_lines = alice.aiter_lines(), bob.aiter_lines()
            await sup.restart("ops")
            await sup.restart("notes")
            heard = await until(alice_lines, "tools.registered")
            while heard[-1]["server"] != "notes":
                heard += await until(alice_lines, "tools.registered")
            for event in (
                events.ResourceUpdated(server="notes", uri="notes://index"),
                events.ToolsConflict(name="echo", servers=["notes", "ops"]),
                *(
                    events.ChildRestarted(
                        supervisor=tree, child=child, strategy="one_for_one", restarts=1, reason="x"
                    )
                    for tree, child in (("servers", "ops"), ("servers", "notes"), ("root", "bus"))
                ),
                events.AuthFailed(server="notes", error="the server's own login failed"),
                events.AuthFailed(server="notes", error="alice's login failed", user="alice"),
                events.AuthCompleted(server="notes", user="dave"),
                events.HealthRecovered(server="notes", downtime=0.0),  # the last one
            ):
                sup.bus.publish(event)
            heard += await until(alice_lines, "mcp.health.recovered")
            bob_heard = await until(bob_lines, "mcp.health.recovered")
            # more of ops at once than a stream holds: bob is told he lost events
            for _ in range(2000):
                sup.bus.publish(events.HealthStale(server="ops", last_ok=None))
            sup.bus.publish(events.HealthRecovered(server="notes", downtime=0.0))
            flooded = await until(bob_lines, "mcp.health.recovered")

    def names(heard: list[dict[str, Any]], kind: str) -> list[list[str]]:
        return [sorted(e["names"]) for e in heard if e["kind"] == kind and e["server"] == "notes"]

    assert names(bob_heard, "tools.registered") == [["notes_embedded"]]
    assert names(bob_heard, "tools.deregistered") == [["notes_embedded"]]
    assert {e.get("server") for e in bob_heard if "server" in e} == {"notes"}
    assert not {e["kind"] for e in bob_heard} & {"mcp.resource.updated", "tools.conflict"}
    restarted = [e["child"] for e in bob_heard if e["kind"] == "supervisor.child.restarted"]
    assert restarted == ["notes", "bus"]  # not ops; the tree's own parts, as /status shows
    assert flooded[0]["kind"] == "bus.dropped"  # told of the loss, and nothing of ops
    assert {e["kind"] for e in flooded} == {"bus.dropped", "mcp.health.recovered"}
    assert [e["error"] for e in bob_heard if e["kind"] == "mcp.auth.failed"] == [
        "the server's own login failed"
    ]
    assert all(e.get("user") is None for e in bob_heard)

    assert names(heard, "tools.registered") == [notes]
    assert {e.get("server") for e in heard} >= {"notes", "ops"}
    assert {"mcp.resource.updated", "tools.conflict"} <= {e["kind"] for e in heard}
    restarted = [e["child"] for e in heard if e["kind"] == "supervisor.child.restarted"]
    assert restarted == ["ops", "notes", "bus"]
    assert [e["error"] for e in heard if e["kind"] == "mcp.auth.failed"] == [
        "the server's own login failed",
        "alice's login failed",
    ]
    assert not [e for e in heard if e.get("user") == "dave"]


async def test_a_request_whose_head_or_body_never_finishes_is_closed_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's request with half its body, then nothing: answered ``408`` and closed once
    the body's time (here 1 s) is up — not held open; a head that never finishes is
    closed at the head's. An event stream open all along (no body) is not cut."""
    from supervisor.gateway import _http

    assert (_http.IDLE_TIMEOUT, _http.BODY_TIMEOUT) == (5.0, 60.0)  # what gateway.md says
    monkeypatch.setattr(_http, "BODY_TIMEOUT", 1.0)
    monkeypatch.setattr(_http, "IDLE_TIMEOUT", 1.0)

    async def until_closed(stream: trio.SocketStream) -> tuple[bytes, float]:
        """All the gateway sends until it closes the connection, and when it did."""
        received = b""
        with trio.fail_after(30):
            while chunk := await stream.receive_some(65536):
                received += chunk
        return received, trio.current_time()

    async with team(tmp_path) as (fx, sup, url), httpx2.AsyncClient(timeout=30) as http:
        port = int(url.split(":")[2].split("/")[0])
        token = token_for(fx, "alice", url)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        bearer = {"Authorization": f"Bearer {token}"}
        stream_url = url.removesuffix("/mcp") + "/events"
        async with http.stream("GET", stream_url, headers=bearer) as events:
            began = trio.current_time()
            slow_body = await trio.open_tcp_stream("127.0.0.1", port)
            slow_head = await trio.open_tcp_stream("127.0.0.1", port)
            async with slow_body, slow_head:
                await slow_body.send_all(head + body[: len(body) // 2])
                await slow_head.send_all(head[: len(head) // 2])
                answered, body_closed = await until_closed(slow_body)
                said, head_closed = await until_closed(slow_head)
            assert answered.startswith(b"HTTP/1.1 408 "), answered
            assert b"did not arrive within 1 s" in answered
            assert said == b""
            assert body_closed - began >= 1.0 and head_closed - began >= 1.0
            # the stream, open longer than either bound, still tells what happens
            await sup.restart("ops")
            with trio.fail_after(30):
                async for line in events.aiter_lines():
                    if json.loads(line).get("server") == "ops":
                        break


async def test_a_granted_call_made_as_its_server_s_listing_is_merged_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller's call of a tool their grant covers, made between its server's first
    listing and the registry's merge of it (as on a replica that has just connected the
    server), waits for the merge and is made — it is not refused as not served, as it
    was under load."""
    from supervisor.gateway._policy import Narrowed
    from supervisor.gateway._resource import Caller
    from supervisor.registry._live import _RegistryActor
    from supervisor.testing.servers import stdio_params
    from supervisor.tools._request import ToolCall

    handle = _RegistryActor.handle
    armed, held, merge = False, trio.Event(), trio.Event()

    async def held_back(self: _RegistryActor, message: object) -> None:
        if armed:
            held.set()
            await merge.wait()
        await handle(self, message)

    monkeypatch.setattr(_RegistryActor, "handle", held_back)
    command, args = stdio_params("echo")
    notes = {"command": command, "args": list(args), "lazy": True, "approve": False}
    async with open_supervisor({"mcpServers": {"notes": notes}}) as sup:
        gateway = Gateway(sup, policy=Policy(RULES))
        alice = Caller("alice", groups=("eng",))
        view = Narrowed(gateway, alice, gateway.policy.grant(alice))
        answers: list[Any] = []
        armed = True
        try:
            with trio.fail_after(30):
                await sup.connect_all()  # its listing reported; its merge held back
                await held.wait()
            assert sup.registry_statistics().pending and "notes_echo" not in sup.snapshot.named
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        answers.append(await view.call(ToolCall("notes_echo", {"text": "x"})))

                    nursery.start_soon(call)
                    await trio.testing.wait_all_tasks_blocked()
                    assert answers == []  # waiting for the merge, not refused
                    merge.set()
        finally:
            merge.set()  # (a merge held back would hold the supervisor's close up)
    [result] = answers
    assert not result.is_error and result.structured_content == {"result": "x"}
