"""The HTTP gateway's fast lane (supervisor/gateway/_fast.py): a 2026-07-28 ``tools/call``
that needs no stream is served around the SDK's kernel, not through its HTTP entry —
and answers exactly what the SDK's entry answers.

Each test posts the same raw requests to two gateways in front of the reference server
(tests/reference_server.py over stdio; in one test also over Streamable HTTP, and spoken
to on either protocol era), one with the fast lane and one without
(``serve_http(fast=False)``), and compares status and body; a spy counts what the fast
lane served itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp.shared.inbound import classify_inbound_request

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._call_answers import CallAnswers
from supervisor.gateway._fast import FastLane, Verdicts
from supervisor.gateway._relay import Relay
from supervisor.transports._encoding import caller_capabilities
from tests.test_gateway import TOKEN
from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE, WAIT, backing, raw_call

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICITATION = {"elicitation": {"form": {}}}
#: ``job_status`` is left out: a call of it asks for approval
APPROVED = [name for name in AUTO_APPROVED if name != "job_status"]


@asynccontextmanager
async def gateway(
    fast: bool,
    history: CallHistory | None = None,
    entry: dict[str, object] | None = None,
    mode: str = "auto",
) -> AsyncIterator[str]:
    """The URL of an HTTP gateway, the fast lane on or off, in front of the reference
    server (``ref``: its own process over stdio, unless ``entry`` says where it is), the
    supervisor speaking ``mode`` to it."""
    relay = Relay()
    entry = entry or {"command": sys.executable, "args": [str(REFERENCE)]}
    ref = {**entry, "autoApprove": APPROVED}
    async with (
        open_supervisor(
            {"mcpServers": {"ref": ref}}, history=history, mode=mode, **relay.client_options()
        ) as sup,  # type: ignore[arg-type]
        trio.open_nursery() as nursery,
    ):
        served = Gateway(sup, relay=relay)
        await nursery.start(served.run)
        await sup.tools()
        serve = partial(serve_http, served, "127.0.0.1", 0, token=TOKEN, fast=fast)
        info = await nursery.start(serve)
        yield info.url
        nursery.cancel_scope.cancel()


@pytest.fixture
def fast_served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tools whose calls the fast lane served, in order."""
    served: list[str] = []
    serve = FastLane._serve

    async def counted(self: FastLane, *args: Any) -> None:
        served.append(args[4]["params"]["name"])  # the decoded request
        await serve(self, *args)

    monkeypatch.setattr(FastLane, "_serve", counted)
    return served


def sealed(document: Any) -> Any:
    """``document`` with each ``requestState`` (sealed with a key of its process's own,
    and a time) replaced by a marker: what is left must be equal."""
    if isinstance(document, dict):
        return {k: ("<sealed>" if k == "requestState" else sealed(v)) for k, v in document.items()}
    if isinstance(document, list):
        return [sealed(v) for v in document]
    return document


def read(answer: httpx2.Response) -> Any:
    """An answer's JSON-RPC message: its JSON body, the last message of its event stream,
    or (an HTTP-level refusal) its text."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    try:
        return answer.json()
    except ValueError:
        return answer.text


async def exchange(url: str, requests: list[tuple[dict[str, Any], dict[str, str]]]) -> list[Any]:
    """Post each request in turn; each answer's status and JSON body. A request whose
    body holds ``"requestState": "<from previous>"`` gets the last answer's state."""
    answers: list[Any] = []
    state = None
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        for body, headers in requests:
            if body["params"].get("requestState") == "<from previous>":
                body = {**body, "params": {**body["params"], "requestState": state}}
            answer = await http.post(url, json=body, headers=headers)
            document = read(answer)
            if isinstance(document, dict):
                state = (document.get("result") or {}).get("requestState")
            kind = answer.headers.get("content-type")
            answers.append((answer.status_code, kind, sealed(document)))
    return answers


async def both(
    requests: list[tuple[dict[str, Any], dict[str, str]]],
) -> tuple[list[Any], list[Any]]:
    async with gateway(fast=True) as url:
        fast = await exchange(url, requests)
    async with gateway(fast=False) as url:
        slow = await exchange(url, requests)
    return fast, slow


async def test_plain_calls_and_their_failures_answer_as_through_the_sdk(
    fast_served: list[str],
) -> None:
    """A call, a call with arguments its schema refuses, and a call of an unknown tool
    answer the same status, content type and JSON with the fast lane as without — the
    fast lane serving the first two (a tool it does not know it leaves to the SDK)."""
    requests = [
        raw_call("ref_chatter", {}),
        raw_call("ref_job", {"ask": "yes"}),
        raw_call("ref_nothing", {}),
    ]
    fast, slow = await both(requests)
    assert fast == slow
    assert [status for status, _, _ in fast] == [200, 200, 400]
    assert fast[0][2]["result"]["content"][0]["text"] == "chattered"
    assert fast[1][2]["result"]["isError"] is True
    assert fast[2][2]["error"]["code"] == -32602
    assert fast_served == ["ref_chatter", "ref_job"]


@pytest.mark.parametrize(
    ("transport", "mode"),
    [("stdio", "legacy"), ("http", "auto"), ("http", "legacy")],
    ids=["stdio-session", "http-2026", "http-session"],
)
async def test_the_fast_lane_answers_as_the_sdk_whatever_the_backing_server(
    fast_served: list[str], transport: str, mode: str
) -> None:
    """The same answers with the fast lane as without whatever the backing server is —
    over stdio (its calls forwarded as JSON) or Streamable HTTP (through the SDK's
    client), spoken to on the session-based protocol or on 2026-07-28 (the tests above:
    over stdio): plain calls, a job that fails, arguments its schema refuses, an unknown
    tool, a call that needs approval (a round), a server's own round, and a task."""
    requests = [
        raw_call("ref_chatter", {}),
        raw_call("ref_count", {}),
        raw_call("ref_job", {"fail": True}),
        raw_call("ref_job", {"ask": "yes"}),
        raw_call("ref_nothing", {}),
        raw_call("ref_job_status", {"id": "job-9"}, capabilities=ELICITATION),
        raw_call("ref_confirm", {}, capabilities=ELICITATION),
        raw_call("ref_job", {}, capabilities=TASKS),
    ]
    answers = []
    for fast in (True, False):
        async with backing(transport) as entry, gateway(fast, entry=entry, mode=mode) as url:
            answers.append(await exchange(url, requests))
    fast, slow = answers
    assert fast == slow
    assert [status for status, _, _ in fast] == [200] * 4 + [400] + [200] * 3
    texts = [answer[2]["result"]["content"][0]["text"] for answer in fast[:4]]
    assert texts[:2] == ["chattered", "counted"] and texts[2]
    assert fast[3][2]["result"]["isError"] is True
    assert [fast[i][2]["result"]["resultType"] for i in (5, 6)] == ["input_required"] * 2
    named = [body["params"]["name"] for body, _ in requests]
    assert fast_served == named[:4] + named[5:]  # (a tool it does not know: the SDK's)


async def test_rounds_sealed_in_the_fast_lane_are_opened_by_the_sdk(
    fast_served: list[str],
) -> None:
    """A call that needs approval, from a client that declared elicitation, is answered
    with an ``input_required`` round whose ``requestState`` the fast lane had the SDK's
    boundary seal; the client's answer (a request the fast lane does not take) is opened
    by the SDK's path and runs the call. So is a backing server's own round
    (``confirm``). Same answers either way."""
    asked = raw_call("ref_job_status", {"id": "job-9"}, capabilities=ELICITATION)
    answered = raw_call(
        "ref_job_status",
        {"id": "job-9"},
        capabilities=ELICITATION,
        inputResponses={"mcp-supervisor/approval": {"action": "accept", "content": {}}},
        requestState="<from previous>",
    )
    confirm = raw_call("ref_confirm", {}, capabilities=ELICITATION)
    confirmed = raw_call(
        "ref_confirm",
        {},
        capabilities=ELICITATION,
        inputResponses={"confirm": {"action": "accept", "content": {}}},
        requestState="<from previous>",
    )
    fast, slow = await both([asked, answered, confirm, confirmed])
    assert fast == slow
    assert fast[0][2]["result"]["resultType"] == "input_required"
    assert fast[1][2]["result"]["content"][0]["text"] == "unknown"
    assert fast[2][2]["result"]["resultType"] == "input_required"
    assert fast[3][2]["result"]["content"][0]["text"] == "accept after round-1"
    assert fast_served == ["ref_job_status", "ref_confirm"]  # the first round of each


async def test_what_the_fast_lane_does_not_take_is_answered_by_the_sdk(
    fast_served: list[str],
) -> None:
    """Headers that disagree with the body, a progress token (a stream), a log level,
    and a body the SDK's check refuses are left to the SDK's entry — answered as they
    are without the fast lane; a task handle, which needs nothing of the kind, is
    served by it."""
    requests = [
        raw_call("ref_chatter", {}, headers={"Mcp-Name": "ref_wait"}),
        raw_call("ref_chatter", {}, meta={"progressToken": 7}),
        raw_call("ref_chatter", {}, meta={"io.modelcontextprotocol/logLevel": "info"}),
        raw_call("ref_chatter", {}, headers={"Content-Type": "text/plain"}),
        raw_call("ref_job", {}, capabilities=TASKS),
    ]
    fast, slow = await both(requests)
    assert fast == slow
    assert fast[0][0] == 400 and fast[0][2]["error"]["code"] == -32020
    assert fast[4][2]["result"]["resultType"] == "task"
    assert fast_served == ["ref_job"]


async def test_a_fast_lane_call_its_client_gives_up_on_is_cancelled_at_the_server(
    fast_served: list[str],
) -> None:
    """The client of a fast-lane call that goes away (its connection closed) has the
    call cancelled at the backing server, as on the SDK's path; the history records it
    as indefinite."""
    history = CallHistory()
    async with gateway(fast=True, history=history) as url:
        body, headers = raw_call("ref_wait", {})
        async with httpx2.AsyncClient() as http:
            with pytest.raises(httpx2.TimeoutException):
                await http.post(url, json=body, headers=headers, timeout=1.0)
        body, headers = raw_call("ref_cancelled", {})
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            answer = await http.post(url, json=body, headers=headers)
    assert json.loads(answer.text)["result"]["content"][0]["text"] == "cancelled"
    assert fast_served == ["ref_wait", "ref_cancelled"]
    assert [c.outcome for c in history.calls if c.tool == "ref_wait"] == ["info"]


async def test_a_fast_lane_call_s_context_is_the_one_the_sdk_makes(
    fast_served: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's handler sees the same context for a call the fast lane serves as
    for one through the SDK's entry — its ``_meta`` (a copy of the request's own, for
    each request), the caller's capabilities and client params read from the envelope —
    the second time an envelope comes as the first (read once, then kept); and makes
    the same call of it, past the params' model as through it."""
    seen: list[Any] = []
    declared: list[Any] = []
    made = CallAnswers.made

    async def spied(
        self: CallAnswers,
        ctx: Any,
        host: Any,
        call: Any,
        served_by: Any,
        meta: Any,
        *,
        modern: bool,
    ) -> Any:
        # (where the SDK's way, ToolRequests.call_tool, and the fast lane's past the
        # params' model, CallAnswers.plain, meet: the call made, through the gateway)
        session = ctx.session
        client = session.client_params
        seen.append(
            (
                ctx.meta,
                ctx.meta is not meta,
                session.client_capabilities.model_dump(by_alias=True),
                None if client is None else client.model_dump(by_alias=True),
                ctx.protocol_version,
                call,
                served_by,
                modern,
            )
        )
        declared.append(json.loads(json.dumps(caller_capabilities.get())))
        return await made(self, ctx, host, call, served_by, meta, modern=modern)

    monkeypatch.setattr(CallAnswers, "made", spied)
    info = {types.CLIENT_INFO_META_KEY: {"name": "c", "version": "2", "title": "C"}}
    requests = [
        raw_call("ref_chatter", {}),
        raw_call("ref_chatter", {}, capabilities=ELICITATION, meta=info),
        raw_call("ref_chatter", {}, capabilities={"sampling": {}, "roots": {}}, meta=info),
        raw_call("ref_chatter", {}, capabilities=TASKS),
    ]
    fast, slow = await both(requests * 2)
    assert fast == slow
    assert fast_served == ["ref_chatter"] * 8
    assert seen[:8] == seen[8:]  # (fast, then slow)
    assert seen[3][5].rounds.tasks and not seen[0][5].rounds.tasks
    assert all(entry[1] for entry in seen)
    assert seen[1][3]["clientInfo"]["title"] == "C" and seen[0][3] is None
    assert declared[:8] == declared[8:] and declared[:4] == declared[4:8]
    tasks = {"io.modelcontextprotocol/tasks": {}}
    assert declared[0] == {"extensions": tasks}
    assert declared[2] == {"sampling": {}, "roots": {}, "extensions": tasks}


def test_the_lane_s_envelope_verdicts_are_the_sdk_s_whatever_it_saw_before() -> None:
    """The envelope ladder's verdict the fast lanes keep (:class:`Verdicts`) is the one
    the SDK's ladder gives each request — after it kept one for the same ``_meta``
    with other headers, another method or tool name, or none, and once it forgot them
    all (past as many as it keeps)."""
    envelope = {
        types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
        types.CLIENT_CAPABILITIES_META_KEY: {},
    }

    def request(name: str, method: str = "tools/call", **meta: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": {}, "_meta": {**envelope, **meta}}
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}

    def headers(name: str, version: str = "2026-07-28", method: str = "tools/call") -> Any:
        return {"mcp-protocol-version": version, "mcp-method": method, "mcp-name": name}

    cases: list[tuple[dict[str, Any], dict[str, str] | None]] = [
        (request("a"), headers("a")),
        (request("a"), headers("b")),  # the same _meta, the name header another's
        (request("b"), headers("a")),
        (request("b"), headers("b")),
        (request("a"), headers("a", version="2025-11-25")),
        (request("a"), headers("a", method="tools/list")),
        (request("a", method="tools/list"), headers("a")),
        (request("a"), None),  # over stdio: no headers
        (request("a", **{types.PROTOCOL_VERSION_META_KEY: "2099-01-01"}), None),
        (request("a", **{types.PROTOCOL_VERSION_META_KEY: "2099-01-01"}), headers("a")),
        (
            request("a", **{types.PROTOCOL_VERSION_META_KEY: "2099-01-01"}),
            headers("a", "2099-01-01"),
        ),
    ]
    many = [
        (request("a", **{types.CLIENT_INFO_META_KEY: {"name": "c", "version": str(i)}}), None)
        for i in range(300)
    ]
    verdicts = Verdicts()
    for body, given in [*cases, *cases, *many, *cases]:
        ours = verdicts.of(body, given)
        assert ours == classify_inbound_request(body, headers=given), (body, given)
    kinds = {type(verdicts.of(body, given)).__name__ for body, given in cases}
    assert kinds == {"InboundModernRoute", "InboundLadderRejection"}
