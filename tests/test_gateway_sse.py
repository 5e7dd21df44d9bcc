"""The HTTP gateway's session-based SSE streams (SEP-1699): each POST's stream starts with
a priming event (an id, empty data, the ``retry`` hint), and a client that lost a stream
gets the rest of it with ``GET`` and ``Last-Event-ID`` — in its own session only, from
a store that stays within its bounds. The 2026-07-28 path and a stateless gateway are
left as they were. A real gateway on 127.0.0.1 and raw HTTP requests; the store's
bounds, unit by unit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import trio
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import EventMessage

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.gateway._resume import (
    EVENT_OVERHEAD,
    MAX_AGE,
    MAX_BYTES,
    MAX_EVENTS_PER_STREAM,
    RETRY_MS,
    StreamHistory,
)
from supervisor.testing.servers import make_server
from tests.test_gateway_fidelity import raw_call
from tests.test_gateway_sessions import HEADERS, INITIALIZE, TOKEN, in_session, open_session
from tests.test_gateway_team import team, token_for

READ_ONLY = mcp_types.ToolAnnotations(read_only_hint=True)


class Gate:
    """An in-process server whose tool ``gate`` answers only once the test lets it."""

    def __init__(self) -> None:
        self.arrived = trio.Event()
        self.released = trio.Event()
        self.server = MCPServer("gate")

        @self.server.tool(annotations=READ_ONLY)
        async def gate() -> str:
            """Answer once released."""
            self.arrived.set()
            await self.released.wait()
            return "released"


@asynccontextmanager
async def gateway(apps: dict[str, Any], **options: Any) -> AsyncIterator[HttpGatewayInfo]:
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup, trio.open_nursery() as n:
        gw = Gateway(sup)
        await n.start(gw.run)
        await sup.tools()
        yield await n.start(partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, **options))
        n.cancel_scope.cancel()


def call(name: str, arguments: dict[str, Any] | None = None, id: int = 7) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments or {}}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


async def events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """The SSE events of ``response`` as they come: each a dict of its fields."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


def parse(text: str) -> list[dict[str, str]]:
    """The SSE events of a whole body."""
    parsed = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = [line.partition(":") for line in block.splitlines() if line[:1] != ":"]
        if fields:
            parsed.append({name: value.removeprefix(" ") for name, _, value in fields})
    return parsed


def resuming(session: str, last: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    return {**(headers or HEADERS), "Mcp-Session-Id": session, "Last-Event-ID": last}


async def nothing_resumed(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> None:
    """A ``GET`` with ``headers`` is answered ``200`` with a stream that ends at once,
    empty (what the SDK answers for an unknown ``Last-Event-ID``)."""
    with trio.fail_after(30):
        async with http.stream("GET", url, headers=headers) as got:
            assert got.status_code == 200
            async for event in events(got):
                raise AssertionError(f"a stream resumed: {event}")


# -- the wire ---------------------------------------------------------------------------


async def test_a_post_s_stream_starts_with_a_priming_event_and_the_retry_hint() -> None:
    """Every event of a session's POST stream has an id; the first is the priming event —
    empty data, ``retry`` 1000 ms — the opening ``initialize`` and a call alike."""
    apps = {"e": make_server("echo")}
    async with gateway(apps) as info, httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(info.url, json=INITIALIZE, headers=HEADERS)
        session = opened.headers["mcp-session-id"]
        answered = await http.post(
            info.url, json=call("e_echo", {"text": "hi"}), headers=in_session(session)
        )
        for response in (opened, answered):
            assert response.headers["content-type"].startswith("text/event-stream")
            primed, *rest = parse(response.text)
            assert primed == {"id": primed["id"], "data": "", "retry": str(RETRY_MS)}
            assert rest and all(e["id"] and e["id"] != primed["id"] for e in rest)
            assert "retry" not in json.dumps(rest)
        answer = json.loads(parse(answered.text)[-1]["data"])
        assert answer["result"]["content"][0]["text"] == "hi"

        older = {**HEADERS, "MCP-Protocol-Version": "2025-06-18"}
        opening = {
            **INITIALIZE,
            "params": {**INITIALIZE["params"], "protocolVersion": "2025-06-18"},
        }
        opened = await http.post(info.url, json=opening, headers=older)
        session = opened.headers["mcp-session-id"]
        older["Mcp-Session-Id"] = session
        answered = await http.post(info.url, json=call("e_echo", {"text": "hi"}), headers=older)
        for response in (opened, answered):  # ids, but no priming event: not expected there
            said = parse(response.text)
            assert [sorted(e) for e in said] == [["data", "event", "id"]], response.text


async def test_a_stream_cut_mid_call_is_resumed_with_last_event_id() -> None:
    """The client goes after the priming event, the call still running; it comes back
    with ``GET`` and ``Last-Event-ID``: the resumed stream is primed again, and the answer
    comes on it. A call answered whole is replayed after its priming event, the same
    event; another session, or an id never given, gets an empty stream."""
    gate = Gate()
    apps = {"g": gate.server, "e": make_server("echo")}
    async with gateway(apps) as info, httpx2.AsyncClient(timeout=30) as http:
        session = await open_session(http, info)
        with trio.fail_after(30):
            async with http.stream(
                "POST", info.url, json=call("g_gate"), headers=in_session(session)
            ) as posted:
                first = await events(posted).__anext__()
            await gate.arrived.wait()
            assert first["data"] == "" and first["retry"] == str(RETRY_MS)
            async with http.stream("GET", info.url, headers=resuming(session, first["id"])) as got:
                assert got.status_code == 200
                resumed = events(got)
                primed = await resumed.__anext__()
                assert primed["data"] == "" and primed["id"] != first["id"]
                gate.released.set()
                answer = await resumed.__anext__()
            assert json.loads(answer["data"])["result"]["content"][0]["text"] == "released"

            echoed = await http.post(
                info.url, json=call("e_echo", {"text": "again"}, id=8), headers=in_session(session)
            )
            primed, said = parse(echoed.text)
            async with http.stream("GET", info.url, headers=resuming(session, primed["id"])) as got:
                replayed = await events(got).__anext__()
            assert replayed == said

            other = await open_session(http, info)
            for stranger, last in ((other, primed["id"]), (session, "never-given.0")):
                await nothing_resumed(http, info.url, resuming(stranger, last))


async def test_another_caller_cannot_resume_a_stream_that_is_not_theirs(tmp_path: Path) -> None:
    """On a team gateway, bob given alice's session id and event id is answered 404; in
    his own session, alice's event id gets him an empty stream. Alice resumes it."""
    async with team(tmp_path) as (fx, _, url), httpx2.AsyncClient(timeout=30) as http:
        sessions = {}
        for who in ("alice", "bob"):
            headers = {**HEADERS, "Authorization": f"Bearer {token_for(fx, who, url)}"}
            opened = await http.post(url, json=INITIALIZE, headers=headers)
            assert opened.status_code == 200, opened.text
            sessions[who] = (opened.headers["mcp-session-id"], headers)
        alice, alice_headers = sessions["alice"]
        bob, bob_headers = sessions["bob"]
        listed = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            headers={**alice_headers, "Mcp-Session-Id": alice},
        )
        primed, said = parse(listed.text)
        assert "ops_echo" in said["data"]

        theirs = await http.get(url, headers=resuming(alice, primed["id"], bob_headers))
        assert theirs.status_code == 404 and "ops_echo" not in theirs.text
        await nothing_resumed(http, url, resuming(bob, primed["id"], bob_headers))
        with trio.fail_after(30):
            async with http.stream(
                "GET", url, headers=resuming(alice, primed["id"], alice_headers)
            ) as got:
                assert await events(got).__anext__() == said


async def test_the_2026_path_and_a_stateless_gateway_are_left_as_they_were() -> None:
    """A 2026-07-28 call streaming progress gets no event ids, priming or retry, on a
    session gateway; nor does a session-less 2025-11-25 call on a stateless one."""
    apps = {"s": make_server("slow")}
    body, headers = raw_call("s_sleep", {"seconds": 0.01, "steps": 1}, meta={"progressToken": 1})
    async with gateway(apps) as info, httpx2.AsyncClient(timeout=30) as http:
        modern = await http.post(info.url, json=body, headers=headers)
        assert modern.status_code == 200
        assert modern.headers["content-type"].startswith("text/event-stream"), modern.text
        said = parse(modern.text)
        assert [sorted(e) for e in said] == [["data", "event"]] * len(said)
        assert "notifications/progress" in said[0]["data"]
    async with gateway(apps, stateless=True) as info, httpx2.AsyncClient(timeout=30) as http:
        plain = await http.post(info.url, json=call("s_sleep", {"seconds": 0.01}), headers=HEADERS)
        said = parse(plain.text)
        assert [sorted(e) for e in said] == [["data", "event"]], plain.text


# -- the store --------------------------------------------------------------------------


def message(n: int, size: int = 10) -> mcp_types.JSONRPCMessage:
    return mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"n": n, "pad": "x" * size}
    )


async def replayed(history: StreamHistory, last: str) -> tuple[str | None, list[int]]:
    """What ``history`` replays after ``last``, in the session bound: the stream, and the
    numbers (``params.n``) of the messages."""
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    stream = await history.replay_events_after(last, send)
    return stream, [e.message.params["n"] for e in got]  # type: ignore[union-attr]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_stream_keeps_its_newest_events_and_resumes_only_after_what_it_kept() -> None:
    history = StreamHistory(max_events_per_stream=4, clock=Clock())
    history.bind("s1")
    primed = await history.store_event("1", None)
    ids = [await history.store_event("1", message(n)) for n in range(10)]
    assert history.kept == 4
    assert await replayed(history, ids[6]) == ("1", [7, 8, 9])
    assert await replayed(history, ids[5]) == ("1", [6, 7, 8, 9])  # ids[5] gone, 6 kept
    for gone in (primed, ids[0], ids[4]):  # what came next is gone too
        assert await replayed(history, gone) == (None, [])
    assert await replayed(history, ids[9]) == ("1", [])
    token = ids[0].partition(".")[0]
    for forged in ("", ".", f"{token}.11", f"{token}.-1", f"{token}.٣", f"{token}. 7", "x.7"):
        assert await replayed(history, forged) == (None, []), forged


async def test_an_event_is_resumed_only_in_its_own_session() -> None:
    """The session is the one bound when the event was stored; stream ids are the SDK's
    (a request id), the same in every session; event ids differ and are unguessable."""
    history = StreamHistory(clock=Clock())
    history.bind("alice")
    alice = [await history.store_event("1", message(n)) for n in range(2)]
    history.bind("bob")
    bob = [await history.store_event("1", message(n)) for n in range(2)]
    assert await replayed(history, alice[0]) == (None, [])
    assert await replayed(history, bob[0]) == ("1", [1])
    history.bind(None)
    assert await replayed(history, bob[0]) == (None, [])
    history.bind("alice")
    assert await replayed(history, alice[0]) == ("1", [1])
    tokens = {i.partition(".")[0] for i in alice + bob}
    assert len(tokens) == 2 and all(len(t) == 16 for t in tokens)
    history.ended("alice")
    assert await replayed(history, alice[0]) == (None, [])
    assert history.kept == 2


async def test_events_older_than_the_age_bound_are_dropped() -> None:
    clock = Clock()
    history = StreamHistory(max_age=60, clock=clock)
    history.bind("s")
    old = [await history.store_event("1", message(n)) for n in range(3)]
    clock.now = 30
    await history.store_event("2", message(3))
    clock.now = 61
    await history.store_event("2", message(4))
    assert history.kept == 2
    assert await replayed(history, old[0]) == (None, [])
    clock.now = 91
    assert await replayed(history, old[2]) == (None, [])
    await history.store_event("3", None)
    assert history.kept == 2  # the one at 61, and this one


async def test_the_memory_bound_holds_over_many_events_the_oldest_dropped_first() -> None:
    """100 000 events of 1 KiB over 500 sessions against a 1 MiB bound: never more than
    the bound, the newest kept, the oldest gone; ending every session empties it."""
    bound = 2**20
    history = StreamHistory(max_bytes=bound, clock=Clock())
    size = len(message(0, 1024).model_dump_json()) + EVENT_OVERHEAD
    first = last = ""
    for n in range(100_000):
        history.bind(f"session-{n % 500}")
        last = await history.store_event(str(n % 7), message(n, 1025 - len(str(n))))
        first = first or last
        assert history.bytes <= bound
    assert history.kept == bound // size
    assert history.bytes == history.kept * size
    history.bind("session-499")
    assert await replayed(history, first) == (None, [])
    assert (await replayed(history, last))[0] is not None
    for n in range(500):
        history.ended(f"session-{n}")
    assert history.kept == history.bytes == 0
    assert not history._tokens and not history._sessions  # nothing left behind


async def test_an_event_over_the_whole_bound_is_not_kept() -> None:
    history = StreamHistory(max_bytes=4096, clock=Clock())
    history.bind("s")
    kept = await history.store_event("1", message(0))
    huge = await history.store_event("1", message(1, 8192))
    assert history.kept == 0 and history.bytes == 0
    assert await replayed(history, kept) == (None, [])
    assert await replayed(history, huge) == (None, [])


def test_the_docs_say_the_retry_hint_and_the_bounds() -> None:
    text = " ".join((Path(__file__).parents[1] / "docs" / "gateway.md").read_text().split())
    said = (
        f"a `retry` of {RETRY_MS} ms",
        f"at most {MAX_EVENTS_PER_STREAM} events per stream, {MAX_BYTES // 2**20} MiB in all",
        f"each for {MAX_AGE / 60:g} minutes, the oldest dropped first",
    )
    for claim in said:
        assert claim in text, claim
