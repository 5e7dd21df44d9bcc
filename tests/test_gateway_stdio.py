"""The gateway over stdio (supervisor/gateway/_stdio.py) and its fast lane
(supervisor/gateway/_stdio_fast.py), on pipes in this process in front of the SDK's own
low-level server: the envelope ladder's verdicts the lane keeps, its requests' dispatch
context, and the lines it writes in turn with the session's.

(tests/test_gateway_forward.py holds the lane's answers to the SDK loop's, byte for
byte, in front of real servers.)
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import SessionMessage

from supervisor.gateway._fast import Exchange
from supervisor.gateway._stdio import stdio_streams
from supervisor.gateway._stdio_fast import _TRANSPORT, StdioFastLane

ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
    types.CLIENT_CAPABILITIES_META_KEY: {},
}
#: The pipe's room for the gateway's answers: a larger answer waits for its reader.
ROOM = 4096


def _server(seen: list[Any]) -> Server[Any]:
    """A server whose ``tools/call`` of ``N`` answers ``N`` times ``x``, recording the
    dispatch context's request id and protocol version."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append((ctx.request_id, ctx.protocol_version))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="x" * int(params.name))]
        )

    return Server("t", on_call_tool=call_tool)


def _call(request_id: int, size: int, **meta: Any) -> dict[str, Any]:
    params = {"name": str(size), "arguments": {}, "_meta": {**ENVELOPE, **meta}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@asynccontextmanager
async def _stdio(server: Server[Any]) -> AsyncIterator[tuple[Any, Any, Any, int]]:
    """The gateway's stdio streams on pipes, its fast lane serving ``server``: yields
    ``send`` (a message, as a line), the session's read and write streams, and the
    descriptor its lines are read from (its pipe holding :data:`ROOM` bytes); ``send``
    sends several messages in one write."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    fcntl.fcntl(out_w, 1031, ROOM)  # F_SETPIPE_SZ

    def lane(calls: trio.Nursery, write: Any) -> StdioFastLane:
        return StdioFastLane(server, None, calls, write)

    try:
        async with (
            trio.lowlevel.FdStream(os.dup(in_w)) as requests,
            stdio_streams(in_r, out_w, lane) as (read, write),
        ):

            async def send(*messages: dict[str, Any]) -> None:
                await requests.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

            yield send, read, write, out_r
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)


async def _lines(fd: int, count: int) -> list[Any]:
    """The next ``count`` lines written to ``fd``, as JSON (each must be a whole one)."""
    buffer = bytearray()
    lines: list[Any] = []
    with trio.fail_after(30):
        while len(lines) < count:
            await trio.lowlevel.wait_readable(fd)
            buffer += os.read(fd, 1 << 16)
            while (end := buffer.find(b"\n")) >= 0:
                lines.append(json.loads(bytes(buffer[:end])))
                del buffer[: end + 1]
    return lines


async def test_the_lane_s_answers_and_the_session_s_never_interleave() -> None:
    """An answer larger than the pipe holds is written in part at once, the rest as its
    reader makes room; the session's message and the lane's next answer, written
    meanwhile, wait their turn: every line comes out whole, in turn."""
    seen: list[Any] = []
    async with _stdio(_server(seen)) as (send, read, write, out):
        await send(
            {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": ENVELOPE}}
        )
        assert (await read.receive()).message.id == 0  # (the first request: the SDK's)
        await send(_call(1, 10 * ROOM))
        await trio.testing.wait_all_tasks_blocked()  # (its answer waits for room)
        note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message")
        await send(_call(2, 10))
        await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write.send, SessionMessage(note))
            await trio.testing.wait_all_tasks_blocked()
            lines = await _lines(out, 3)
    assert [line.get("id") for line in lines] == [1, 2, None]
    assert len(lines[0]["result"]["content"][0]["text"]) == 10 * ROOM
    assert lines[1]["result"]["content"][0]["text"] == "x" * 10
    assert lines[2]["method"] == "notifications/message"
    assert seen == [(1, "2026-07-28"), (2, "2026-07-28")]


async def test_an_answer_being_written_is_not_cut_by_its_cancellation() -> None:
    """A request answered already is no longer cancelled by its client: its answer, too
    large for the pipe, goes on being written as its reader makes room, whole — the
    cancellation, read meanwhile, goes to the session, which has no such request."""
    seen: list[Any] = []
    async with _stdio(_server(seen)) as (send, read, _write, out):
        await send(
            {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": ENVELOPE}}
        )
        assert (await read.receive()).message.id == 0
        await send(_call(1, 10 * ROOM))
        await trio.testing.wait_all_tasks_blocked()  # (its answer waits for room)
        cancelled = {"requestId": 1, "reason": "too late"}
        await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled})
        with trio.fail_after(30):
            notice = (await read.receive()).message
        lines = await _lines(out, 1)
    assert notice.method == "notifications/cancelled" and notice.params["requestId"] == 1
    assert lines[0]["id"] == 1 and len(lines[0]["result"]["content"][0]["text"]) == 10 * ROOM


async def test_a_request_read_alone_is_served_in_the_reading_task_which_reads_on() -> None:
    """A request alone in what was read is served in the task that read it, and the
    reading goes on in another while it runs: a cancellation of it, and the next
    request, are read and acted on meanwhile. Two requests read at once are each served
    in a task of its own."""
    seen: list[Any] = []
    readers: list[Any] = []
    ran: dict[int, Any] = {}
    take = StdioFastLane.take

    def taking(self: StdioFastLane, line: bytes) -> Any:
        readers.append(trio.lowlevel.current_task())
        return take(self, line)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        ran[ctx.request_id] = trio.lowlevel.current_task()
        if params.name == "wait":
            await trio.sleep_forever()  # (until its client cancels it)
        seen.append(ctx.request_id)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    server = Server("t", on_call_tool=call_tool)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StdioFastLane, "take", taking)
        async with _stdio(server) as (send, read, _write, out):
            await send(
                {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": ENVELOPE}}
            )
            assert (await read.receive()).message.id == 0
            waiting = _call(1, 0)
            waiting["params"]["name"] = "wait"
            await send(waiting)
            await trio.testing.wait_all_tasks_blocked()
            assert ran[1] is readers[-1]  # (served in the task that read it)
            cancelled = {"requestId": 1, "reason": "no longer needed"}
            await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled})
            await send(_call(2, 0))
            assert [line["id"] for line in await _lines(out, 1)] == [2]
            assert ran[2] is readers[-1] is not ran[1]
            await send(_call(3, 0), _call(4, 0))  # (in one write: read at once)
            assert sorted(line["id"] for line in await _lines(out, 2)) == [3, 4]
    assert seen[0] == 2 and sorted(seen[1:]) == [3, 4]  # (1: cancelled, unanswered)
    assert readers[-1] is not ran[3] and readers[-1] is not ran[4] and ran[3] is not ran[4]


async def test_the_envelope_ladder_s_verdict_on_each_meta_is_the_sdk_s() -> None:
    """The lane takes a request whose ``_meta`` passes the SDK's envelope ladder, and
    leaves one it refuses to the SDK (which answers the refusal) — the first time a
    ``_meta`` is seen and each time after, past as many as it keeps verdicts for."""
    seen: list[Any] = []
    async with _stdio(_server(seen)) as (send, read, _write, out):
        await send(
            {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": ENVELOPE}}
        )
        assert (await read.receive()).message.id == 0
        unsupported = {types.PROTOCOL_VERSION_META_KEY: "2099-01-01"}
        requests = []
        for round_ in range(2):
            for i in range(300):  # (more than it keeps: it forgets them, then asks again)
                info = {"name": "c", "version": str(i)}
                requests.append(_call(1000 * round_ + i, 1, **{types.CLIENT_INFO_META_KEY: info}))
            requests.append(_call(1000 * round_ + 500, 1, **unsupported))
        left: list[Any] = []
        answered: list[Any] = []

        async def leftovers() -> None:
            while len(left) < 2:
                left.append((await read.receive()).message.id)

        async def answers() -> None:
            answered.extend(await _lines(out, len(requests) - 2))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(leftovers)
                nursery.start_soon(answers)
                for request in requests:
                    await send(request)
    assert left == [500, 1500]
    assert sorted(line["id"] for line in answered) == sorted(
        request["id"] for request in requests if request["id"] % 1000 != 500
    )


def test_the_lane_s_dispatch_context_is_the_http_lane_s() -> None:
    """A stdio request's dispatch context is the HTTP lane's kind, and says what it
    says: the stdio transport, no back channel, no notifications, no metadata, a
    cancellation event never set."""
    ours = Exchange(_TRANSPORT, 7, None)  # (as the lane makes it)
    assert (ours.transport, ours.request_id, ours.message_metadata) == (_TRANSPORT, 7, None)
    assert ours.transport.kind == "jsonrpc" and not ours.transport.can_send_request
    assert ours.progress_token is None and ours.can_send_request is False
    assert not ours.cancel_requested.is_set() and ours.cancel_requested is ours.cancel_requested

    async def asked() -> None:
        assert await ours.notify("notifications/message", {}) is None
        assert await ours.progress(1.0) is None
        with pytest.raises(NoBackChannelError):
            await ours.send_raw_request("sampling/createMessage", {})

    trio.run(asked)
