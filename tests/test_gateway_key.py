"""The gateway's key (``supervisor.gateway.keyFile`` / ``keyEnv``): what replicas share so
that each takes what another handed out — an approval's ``requestState`` (a 2026-07-28
call asked in another round trip) and, for a team gateway, a task id sealed to the
caller it was made for. Two gateways over one supervisor stand for two replicas here:
with one key each takes the other's state, with a key of their own neither does; and the
state and the task of one caller are refused to another."""

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
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._approval import APPROVAL_KEY
from supervisor.gateway._resource import MIN_KEY_BYTES, ResourceGate, gateway_key
from tests.test_gateway import TOKEN, fixture
from tests.test_gateway_fidelity import raw_call

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

KEY = b"k" * MIN_KEY_BYTES
ELICITATION = {"elicitation": {"form": {}}}


@asynccontextmanager
async def replicas(
    keys: tuple[bytes | None, bytes | None],
    *,
    gate: Callable[[int], ResourceGate] | None = None,
    ports: tuple[int, int] = (0, 0),
    servers: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[CallHistory, list[str]]]:
    """Two gateways (with ``keys``) over one supervisor of the echo fixture (nothing
    auto-approved), each over HTTP on its port of ``ports`` — with the static token, or
    as team gateways checking tokens with ``gate(port)``; yields the call history and
    their URLs. ``servers``: other backing servers."""
    history = CallHistory()
    config = {"mcpServers": servers or {"asks": fixture("echo")}}
    async with open_supervisor(config, history=history) as sup, trio.open_nursery() as nursery:
        urls = []
        for key, port in zip(keys, ports, strict=True):
            gateway = Gateway(sup, key=key)
            await nursery.start(gateway.run)
            auth: dict[str, Any] = {"token": TOKEN} if gate is None else {"resource": gate(port)}
            info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", port, **auth))
            urls.append(info.url)
        await sup.tools()
        yield history, urls
        nursery.cancel_scope.cancel()


def call(text: str, token: str = TOKEN, **retry: object) -> tuple[dict[str, Any], dict[str, str]]:
    return raw_call(
        "asks_echo",
        {"text": text},
        capabilities=ELICITATION,
        headers={"Authorization": f"Bearer {token}"},
        **retry,
    )


async def approved_elsewhere(first: str, second: str, *, tokens: tuple[str, str]) -> Any:
    """Ask for the call's approval at ``first``; answer it (accept) at ``second``: the
    second answer's JSON."""
    async with httpx2.AsyncClient(timeout=30) as http:
        body, headers = call("hello", tokens[0])
        asked = (await http.post(first, json=body, headers=headers)).json()["result"]
        assert asked["resultType"] == "input_required"
        answer = {APPROVAL_KEY: {"action": "accept"}}
        body, headers = call(
            "hello", tokens[1], inputResponses=answer, requestState=asked["requestState"]
        )
        return (await http.post(second, json=body, headers=headers)).json()


async def test_replicas_with_one_key_take_each_others_approval_state() -> None:
    async with replicas((KEY, KEY)) as (history, (a, b)):
        answer = await approved_elsewhere(a, b, tokens=(TOKEN, TOKEN))
    assert answer["result"]["content"][0]["text"] == "hello"
    assert [call.outcome for call in history.calls] == ["fail", "ok"]  # asked, then run


async def test_replicas_with_keys_of_their_own_refuse_each_others_state() -> None:
    async with replicas((None, None)) as (history, (a, b)):
        answer = await approved_elsewhere(a, b, tokens=(TOKEN, TOKEN))
    assert answer["error"]["code"] == types.INVALID_PARAMS
    assert [call.sent_at for call in history.calls] == [None]  # nothing was sent


async def test_one_callers_approval_state_is_refused_to_another() -> None:
    """A team gateway binds the state to its caller: bob cannot answer alice's."""
    from tests.test_gateway_team import token_for

    async with team_replicas((KEY, KEY)) as (fx, history, (a, b)):
        alice = (token_for(fx, "alice", a), token_for(fx, "alice", b))
        answer = await approved_elsewhere(a, b, tokens=alice)
        assert answer["result"]["content"][0]["text"] == "hello"
        bob = token_for(fx, "bob", b)
        refused = await approved_elsewhere(a, b, tokens=(alice[0], bob))
        assert refused["error"]["code"] == types.INVALID_PARAMS
    assert [call.outcome for call in history.calls] == ["fail", "ok", "fail"]


@asynccontextmanager
async def team_replicas(
    keys: tuple[bytes | None, bytes | None], servers: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Any, CallHistory, list[str]]]:
    """:func:`replicas` as team gateways of the test AS: ``(fx, history, urls)``."""
    from supervisor.config._model import GatewayAuth
    from supervisor.testing.servers import open_oauth_server
    from tests.test_gateway_team import GROUPS, free_port

    ports = (free_port(), free_port())
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    async with open_oauth_server(jwt_access_tokens=True, resources=urls, groups=GROUPS) as fx:

        def gate(port: int) -> ResourceGate:
            url = f"http://127.0.0.1:{port}/mcp"
            return ResourceGate.from_config(GatewayAuth(issuer=fx.issuer, resource=url))

        async with replicas(keys, gate=gate, ports=ports, servers=servers) as (history, urls):
            yield fx, history, urls


@pytest.mark.parametrize("shared", [True, False])
async def test_a_task_id_is_sealed_to_its_caller_and_taken_by_replicas_with_the_key(
    shared: bool,
) -> None:
    from supervisor.server import _tasks as tasks
    from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE
    from tests.test_gateway_tasks import made
    from tests.test_gateway_team import client_of, token_for

    ref = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    keys = (KEY, KEY) if shared else (None, None)
    async with team_replicas(keys, {"ref": ref}) as (fx, _, (a, b)):
        extensions = {"extensions": [tasks.CLIENT]}
        async with client_of(a, token_for(fx, "alice", a), **extensions) as alice_a:
            created = await made(alice_a, "ref_job", {"ask": False})
        assert "~" in created.task_id  # ref/job-1~<seal>
        async with (
            client_of(b, token_for(fx, "alice", b), **extensions) as alice_b,
            client_of(b, token_for(fx, "bob", b), **extensions) as bob_b,
        ):
            with pytest.raises(MCPError, match="no task"):
                await tasks.get(bob_b, created.task_id)
            if shared:
                state = await tasks.get(alice_b, created.task_id)
                assert state.task_id == created.task_id
            else:
                with pytest.raises(MCPError, match="no task"):
                    await tasks.get(alice_b, created.task_id)


def test_the_key_comes_from_a_file_or_the_environment_and_must_be_long(tmp_path: Path) -> None:
    from supervisor.config._model import GatewaySettings

    assert gateway_key(None) is None
    assert gateway_key(GatewaySettings()) is None
    (tmp_path / "key").write_text("x" * 40 + "\n")
    assert gateway_key(GatewaySettings(key_file="key"), base=tmp_path) == b"x" * 40
    environ = {"GATEWAY_KEY": "y" * 32}
    assert gateway_key(GatewaySettings(key_env="GATEWAY_KEY"), environ=environ) == b"y" * 32
    with pytest.raises(ValueError, match="one word"):
        gateway_key(
            GatewaySettings(key_env="K"), environ={"K": "REPLACE WITH A KEY OF 32 BYTES OR MORE"}
        )
    with pytest.raises(ValueError, match="needs at least 32"):
        gateway_key(GatewaySettings(key_env="GATEWAY_KEY"), environ={"GATEWAY_KEY": "short"})
    with pytest.raises(ValueError, match="environment variable GATEWAY_KEY is not set"):
        gateway_key(GatewaySettings(key_env="GATEWAY_KEY"), environ={})
    with pytest.raises(ValueError, match="cannot read the gateway's key from"):
        gateway_key(GatewaySettings(key_file="missing"), base=tmp_path)


def test_serve_refuses_a_key_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.cli import main

    monkeypatch.setenv("GATEWAY_KEY", "tooshort")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {}, "supervisor": {"gateway": {"keyEnv": "GATEWAY_KEY"}}})
    )
    assert main(["serve", "--config", str(config), "--http", "127.0.0.1:0"]) == 2
    assert "the gateway's key is 8 bytes: it needs at least 32" in capsys.readouterr().err
