"""A call that needs approval is asked of the gateway's client through elicitation,
when that client declared it (session-based protocol) and the gateway was given no
``--yes``: accept runs that one call, decline refuses it; a client that cannot be asked
gets the refusal that says how to allow the call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._approval import APPROVAL_KEY, APPROVAL_META
from supervisor.gateway._core import ERROR_META
from supervisor.tools import ApprovalCallback
from tests.test_gateway import TOKEN, fixture, http_client, text
from tests.test_gateway_fidelity import raw_call

# The gateway declares logging when a server does; its deprecation (2026-07-28) is not ours.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

Asked = list[types.ElicitRequestParams]


@asynccontextmanager
async def gateway(
    tmp_path: Path, approve: ApprovalCallback | None = None, **options: Any
) -> AsyncIterator[tuple[str, CallHistory, Path]]:
    """A gateway over HTTP in front of the echo fixture (nothing auto-approved), its
    calls in a history and an audit log; yields its URL, the history and the log."""
    audit = tmp_path / "audit.jsonl"
    config = {
        "mcpServers": {"asks": fixture("echo")},
        "supervisor": {"audit": {"path": str(audit)}},
    }
    history = CallHistory()
    async with (
        open_supervisor(config, history=history, approve=approve) as sup,
        trio.open_nursery() as nursery,
    ):
        served = Gateway(sup, **options)
        await nursery.start(served.run)
        await sup.tools()
        info = await nursery.start(partial(serve_http, served, "127.0.0.1", 0, token=TOKEN))
        yield info.url, history, audit
        nursery.cancel_scope.cancel()


def answering(action: str, asked: Asked) -> Any:
    """An elicitation callback that records what it is asked and answers ``action``."""

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    return elicit


def decisions(audit: Path) -> list[tuple[str, str, str]]:
    """``(decision, by, outcome)`` of each audit line."""
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    return [(ln["approval"]["decision"], ln["approval"]["by"], ln["outcome"]) for ln in lines]


async def test_an_accepted_approval_runs_the_call(tmp_path: Path) -> None:
    """The client is asked once, in form mode, the message naming the tool, its server,
    why it asks and the arguments (the same as data in ``_meta``); its accept runs the
    call, and the audit log says the client decided."""
    asked: Asked = []
    async with (
        gateway(tmp_path) as (url, history, audit),
        http_client(url, mode="legacy", elicitation_callback=answering("accept", asked)) as c,
    ):
        result = await c.call_tool("asks_echo", {"text": "hello"})
    assert not result.is_error
    assert text(result) == "hello"
    [params] = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert "'echo'" in params.message and "'asks'" in params.message
    assert "not auto-approved" in params.message and '{"text": "hello"}' in params.message
    assert (params.meta or {})[APPROVAL_META] == {  # type: ignore[typeddict-item]
        "server": "asks",
        "tool": "asks_echo",
        "reason": "not auto-approved",
    }
    assert [call.outcome for call in history.calls] == ["ok"]
    assert decisions(audit) == [("approved", "client", "ok")]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_approval_refuses_the_call_unsent(tmp_path: Path, action: str) -> None:
    """Decline (or dismiss) refuses that call: a tool error of type ``ApprovalDenied``,
    not executed; the next call is asked again."""
    asked: Asked = []
    async with (
        gateway(tmp_path) as (url, history, audit),
        http_client(url, mode="legacy", elicitation_callback=answering(action, asked)) as c,
    ):
        first = await c.call_tool("asks_echo", {"text": "no"})
        second = await c.call_tool("asks_echo", {"text": "still no"})
    for result in (first, second):
        assert result.is_error
        assert (result.meta or {})[ERROR_META] == {
            "type": "ApprovalDenied",
            "server": "asks",
            "effect": "not executed",
        }
    assert len(asked) == 2
    assert [call.outcome for call in history.calls] == ["fail", "fail"]
    assert all(call.sent_at is None for call in history.calls)
    assert decisions(audit) == [("refused", "client", "refused")] * 2


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_cannot_be_asked_is_refused_saying_how_to_allow(
    tmp_path: Path, mode: str
) -> None:
    """A client without elicitation, of either era, is not asked: the call is refused,
    saying why and how to allow it."""
    async with gateway(tmp_path) as (url, history, _), http_client(url, mode=mode) as c:
        result = await c.call_tool("asks_echo", {"text": "x"})
    assert result.is_error
    assert "cannot be asked" in text(result) and "start the gateway with --yes" in text(result)
    assert (result.meta or {})[ERROR_META]["type"] == "ApprovalRequired"
    assert [call.sent_at for call in history.calls] == [None]


@pytest.mark.parametrize(("action", "answer"), [("accept", "hello"), ("decline", None)])
async def test_a_2026_client_is_asked_in_another_round_trip(
    tmp_path: Path, action: str, answer: str | None
) -> None:
    """A 2026-07-28 client takes no requests from its server: the call is answered with an
    ``input_required`` result holding the same form (its key says it is an approval: the
    protocol keeps no ``_meta`` there), which the SDK client answers through its
    elicitation callback and calls again with; accept runs the call once, decline refuses
    it. The first round sent nothing."""
    asked: Asked = []
    async with (
        gateway(tmp_path) as (url, history, audit),
        http_client(url, mode="auto", elicitation_callback=answering(action, asked)) as c,
    ):
        result = await c.call_tool("asks_echo", {"text": "hello"})
    [params] = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert "'echo'" in params.message and "'asks'" in params.message
    if answer is None:
        assert result.is_error
        assert (result.meta or {})[ERROR_META]["type"] == "ApprovalDenied"
    else:
        assert text(result) == answer
    first, second = history.calls
    assert (first.outcome, first.sent_at, first.error or "") == ("fail", None, first.error or "")
    assert "ApprovalAsked" in (first.error or "")
    assert second.outcome == ("ok" if answer else "fail")
    assert (second.sent_at is not None) == (answer is not None)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert lines[1]["approval"]["by"] == "client"


async def test_an_approval_answer_is_bound_to_its_call(tmp_path: Path) -> None:
    """The ``requestState`` of an approval asked about one call cannot approve another:
    called again with other arguments, the gateway refuses the state (``-32602``) and
    runs nothing."""
    elicitation = {"elicitation": {"form": {}}}

    def call(text: str, **retry: object) -> tuple[dict[str, object], dict[str, str]]:
        return raw_call("asks_echo", {"text": text}, capabilities=elicitation, **retry)

    async with gateway(tmp_path) as (url, history, _), httpx2.AsyncClient() as http:
        body, headers = call("harmless")
        first = (await http.post(url, json=body, headers=headers)).json()["result"]
        assert first["resultType"] == "input_required"
        answer = {APPROVAL_KEY: {"action": "accept"}}
        body, headers = call("rm -rf", inputResponses=answer, requestState=first["requestState"])
        other = await http.post(url, json=body, headers=headers)
    assert other.json()["error"]["code"] == types.INVALID_PARAMS
    assert [call.sent_at for call in history.calls] == [None]


async def test_a_gateway_that_approves_itself_does_not_ask(tmp_path: Path) -> None:
    """``serve --yes`` (the supervisor's own approval callback) decides: the client's
    elicitation is never asked."""
    asked: Asked = []

    async def yes(request: object) -> bool:
        return True

    async with (
        gateway(tmp_path, approve=yes) as (url, _, audit),
        http_client(url, mode="legacy", elicitation_callback=answering("decline", asked)) as c,
    ):
        result = await c.call_tool("asks_echo", {"text": "ok"})
    assert text(result) == "ok"
    assert asked == []
    assert decisions(audit) == [("approved", "callback", "ok")]


async def test_a_call_through_tool_search_is_asked_too(tmp_path: Path) -> None:
    """With ``--tool-search`` the meta-tool ``call`` runs the tool through the same
    approval: the client is asked about the tool it names, and its accept runs it."""
    asked: Asked = []
    async with (
        gateway(tmp_path, tool_search=True) as (url, _, audit),
        http_client(url, mode="legacy", elicitation_callback=answering("accept", asked)) as c,
    ):
        result = await c.call_tool("call", {"name": "asks_echo", "arguments": {"text": "via"}})
    assert text(result) == "via"
    assert [(params.meta or {})[APPROVAL_META]["tool"] for params in asked] == ["asks_echo"]  # type: ignore[typeddict-item]
    assert decisions(audit) == [("approved", "client", "ok")]
