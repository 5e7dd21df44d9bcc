"""A session-based server's questions to a 2026-07-28 caller, in rounds: the call is held
by the gateway while the caller answers (``supervisor.gateway._held``).

The backing server is tests/reference_server.py over stdio, spoken to with the
session-based protocol; the caller posts raw 2026-07-28 requests, to see each round.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway import _held as held_module
from supervisor.gateway._relay import Relay
from tests.test_gateway import TOKEN
from tests.test_gateway_fidelity import AUTO_APPROVED, raw_call

REFERENCE = Path(__file__).with_name("reference_server.py")
ELICITATION = {"elicitation": {"form": {}}}


@asynccontextmanager
async def gateway_at() -> AsyncIterator[tuple[str, Gateway]]:
    """A gateway over HTTP in front of the reference server (``ref``), which it speaks
    the session-based protocol to; its URL and itself."""
    relay = Relay()
    server = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    async with (
        open_supervisor(
            {"mcpServers": {"ref": server}},
            mode="legacy",
            **relay.client_options(),  # type: ignore[arg-type]
        ) as sup,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup, relay=relay)
        await nursery.start(gateway.run)
        await sup.tools()
        info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        yield info.url, gateway
        nursery.cancel_scope.cancel()


async def post(http: httpx2.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    """The result of a 2026-07-28 call of ``ref_confirm`` (``params`` added)."""
    body, headers = raw_call("ref_confirm", {}, capabilities=ELICITATION, **params)
    with trio.fail_after(20):
        answer = await http.post(url, json=body, headers=headers)
    return answer.json()["result"]  # type: ignore[no-any-return]


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_the_server_s_question_is_a_round_and_its_answer_ends_the_call() -> None:
    """``confirm`` asks its client (an elicitation request): the 2026-07-28 caller gets
    it as a round, the request as the server sent it, and the same call made again with
    its answer gets the server's result; the held call is then gone."""
    async with gateway_at() as (url, gateway), httpx2.AsyncClient() as http:
        first = await post(http, url)
        assert first["resultType"] == "input_required"
        [(key, request)] = first["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Confirm?"
        assert len(gateway.held) == 1
        answer = {key: {"action": "accept"}}
        done = await post(http, url, inputResponses=answer, requestState=first["requestState"])
        assert text(done) == "accept"
        assert len(gateway.held) == 0
        # the same answer again: that call is over, and nothing is sent
        again = await post(http, url, inputResponses=answer, requestState=first["requestState"])
        assert again["isError"] is True and "no longer held" in text(again)


async def test_a_round_made_again_without_its_answer_is_asked_again() -> None:
    """The call made again without the answer the round asked for gets the same
    question again (the server still waits), and then the answer ends it."""
    async with gateway_at() as (url, _), httpx2.AsyncClient() as http:
        first = await post(http, url)
        state = first["requestState"]
        again = await post(http, url, requestState=state)
        assert again["inputRequests"] == first["inputRequests"]
        [key] = first["inputRequests"]
        done = await post(
            http,
            url,
            inputResponses={key: {"action": "decline"}},
            requestState=again["requestState"],
        )
        assert text(done) == "decline"


async def test_a_question_unanswered_too_long_cancels_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A held call waits for its caller's answer at most ``HOLD_FOR`` seconds: then it
    is cancelled, and the late answer is told the call may have taken effect."""
    monkeypatch.setattr(held_module, "HOLD_FOR", 0.2)
    async with gateway_at() as (url, gateway), httpx2.AsyncClient() as http:
        first = await post(http, url)
        assert len(gateway.held) == 1
        with trio.fail_after(10):
            await gateway.held.none_held()
        [key] = first["inputRequests"]
        late = await post(
            http,
            url,
            inputResponses={key: {"action": "accept"}},
            requestState=first["requestState"],
        )
    assert late["isError"] is True
    assert "no longer held" in text(late) and "may have taken effect" in text(late)


async def test_a_caller_that_cannot_answer_is_not_asked() -> None:
    """A 2026-07-28 caller that declared no elicitation is not handed the server's
    question: the server gets the error a client without it gives, and the caller the
    tool's answer to that — nothing is held."""
    async with gateway_at() as (url, gateway), httpx2.AsyncClient() as http:
        body, headers = raw_call("ref_confirm", {}, capabilities={})
        with trio.fail_after(20):
            result = (await http.post(url, json=body, headers=headers)).json()["result"]
        assert result.get("resultType") != "input_required"
        assert result["isError"] is True
        assert "Elicitation not supported" in text(result)
        assert len(gateway.held) == 0


async def test_a_forged_state_reaches_no_held_call() -> None:
    """A ``requestState`` the gateway did not seal naming a held call is refused by the
    SDK's boundary before anything runs; the call held for its real caller goes on."""
    async with gateway_at() as (url, gateway), httpx2.AsyncClient() as http:
        first = await post(http, url)
        [key] = first["inputRequests"]
        [held_id] = gateway.held
        body, headers = raw_call(
            "ref_confirm",
            {},
            capabilities=ELICITATION,
            inputResponses={key: {"action": "accept"}},
            requestState=f'{{"held": "{held_id}"}}',
        )
        with trio.fail_after(20):
            forged = (await http.post(url, json=body, headers=headers)).json()
        assert "error" in forged or forged["result"].get("isError") is True
        assert len(gateway.held) == 1
        done = await post(
            http,
            url,
            inputResponses={key: {"action": "accept"}},
            requestState=first["requestState"],
        )
        assert text(done) == "accept"


def test_the_hold_the_docs_state_is_the_one_kept() -> None:
    """docs/gateway.md says a held call waits at most 10 minutes for its answer."""
    docs = (Path(__file__).parents[1] / "docs" / "gateway.md").read_text()
    assert "A held call waits at most 10 minutes" in docs
    assert held_module.HOLD_FOR == 10 * 60


async def test_a_prompt_is_held_as_a_call_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """``confirm_prompt`` asks too: a 2026-07-28 caller's ``prompts/get`` is held the same
    way — a round, then the answer gets the prompt — and a late answer to one held too
    long is the protocol's invalid-params error, saying so."""

    def get(**params: Any) -> tuple[dict[str, Any], dict[str, str]]:
        body, headers = raw_call("ref_confirm_prompt", {}, capabilities=ELICITATION, **params)
        call = body["params"]
        assert isinstance(call, dict)
        call.pop("arguments")
        body["method"] = headers["Mcp-Method"] = "prompts/get"
        return body, headers

    async def post_get(http: httpx2.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
        body, headers = get(**params)
        with trio.fail_after(20):
            return (await http.post(url, json=body, headers=headers)).json()  # type: ignore[no-any-return]

    async with gateway_at() as (url, gateway), httpx2.AsyncClient() as http:
        first = (await post_get(http, url))["result"]
        [(key, request)] = first["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        answer = {key: {"action": "accept"}}
        done = await post_get(http, url, inputResponses=answer, requestState=first["requestState"])
        assert "accept" in done["result"]["messages"][0]["content"]["text"]
        monkeypatch.setattr(held_module, "HOLD_FOR", 0.2)
        second = (await post_get(http, url))["result"]
        with trio.fail_after(10):
            await gateway.held.none_held()
        [key] = second["inputRequests"]
        late = await post_get(
            http,
            url,
            inputResponses={key: {"action": "accept"}},
            requestState=second["requestState"],
        )
    assert late["error"]["code"] == -32602
    assert "no longer held" in late["error"]["message"]
