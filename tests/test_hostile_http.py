"""What a hostile server can do over Streamable HTTP and legacy SSE: answers far larger than
``maxMessageBytes`` (streamed, chunked or with a length, compressed), listing pages over
the catalog limits (on a JSON body, an event, a resumed stream), a page that is not JSON;
a real server on 127.0.0.1 (``tests/hostile_http_server.py``), the supervisor's memory
measured in a process of its own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
from structlog.testing import capture_logs

from supervisor.errors import ResultTooLarge
from supervisor.server import ServerStatus
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.transports._bodies import BoundedTransport, _Events
from supervisor.transports._pages import ANY, UNREADABLE, PageGuard

from .probes import until
from .test_hostile_wire import _with_tests_importable, assert_refused_unparsed, measure
from .test_server import Recorder, Settings

HOSTILE = str(Path(__file__).with_name("hostile_http_server.py"))
#: the answer the hostile server sends, and the limit it meets
BIG = 50 * 2**20
LIMIT = 2**20
#: the ways it answers: a chunked JSON body, one with a length, a Streamable HTTP event
#: stream, legacy SSE
ANSWERED = ["/mcp", "/mcp?length=1", "/mcp?answer=sse", "/sse"]


@attrs.define
class Served:
    """``hostile_http_server.py`` running: its base URL."""

    url: str
    process: subprocess.Popen[str]

    def stop(self) -> str:
        """Stop it (its own process, by pid); what it wrote to stderr."""
        self.process.kill()
        return self.process.communicate(timeout=30)[1]


@pytest.fixture
def hostile() -> Iterator[Served]:
    process = subprocess.Popen(
        [sys.executable, HOSTILE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    served = Served(process.stdout.readline().strip(), process)
    try:
        assert served.url.startswith("http://127.0.0.1:"), served.url
        yield served
    finally:
        if process.poll() is None:
            served.stop()


def http(url: str, **fields: object) -> Settings:
    kind = "sse" if "/sse" in url else "http"
    fields.setdefault("lazy", False)
    return Settings(name="h", command="", args=[], type=kind, url=url, **fields)  # type: ignore[arg-type]


# -- an answer over maxMessageBytes fails its own call; memory stays bounded ---------------

#: Run in a subprocess of its own: connect to the hostile server at URL (maxMessageBytes
#: 1 MiB), call ``small``, then ``big`` for SIZE bytes, then ``small`` again; report what
#: each did and how much the peak RSS grew over ``big`` (ru_maxrss).
ANSWER = """
import json, resource, sys, trio
from supervisor.config._limits import Limits
from supervisor.server import ServerStatus
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from tests.test_hostile_http import http

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

async def main(url, size):
    server = ServerHandle(http(url, max_attempts=3), publish=lambda event: None,
                          limits=Limits(max_message_bytes=2**20))
    async with open_servers([server]):
        with trio.fail_after(60):
            while server.status() is not ServerStatus.CONNECTED:
                await trio.sleep(0.01)
        before = (await server.call_tool("small", {}, None)).content[0].text
        peak_before = peak()
        try:
            await server.call_tool("big", {"bytes": int(size)}, None)
            error = None
        except Exception as exc:
            error = {"type": type(exc).__name__, "text": str(exc),
                     "size": getattr(exc, "size", None), "limit": getattr(exc, "limit", None)}
        grew = peak() - peak_before
        after = (await server.call_tool("small", {}, None)).content[0].text
        print(json.dumps({"error": error, "grew": grew, "before": before, "after": after,
                          "status": server.status().value, "restarts": server.health.restarts,
                          "incarnations": server.incarnations}))

trio.run(main, *sys.argv[1:])
"""


def answered(tmp_path: Path, url: str) -> dict[str, Any]:
    """What calling ``big`` for :data:`BIG` bytes at ``url`` did (see :data:`ANSWER`)."""
    script = tmp_path / "answer.py"
    script.write_text(ANSWER)
    done = subprocess.run(
        [sys.executable, str(script), url, str(BIG)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_with_tests_importable(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def assert_only_that_call_failed(got: dict[str, Any]) -> None:
    """The calls before and after were answered on the same connection, and the peak
    memory grew by a fraction of the answer (parsing it costs several times its size)."""
    assert got["before"] == got["after"] == "ok", got
    assert got["status"] == "connected" and got["restarts"] == 0, got
    assert got["incarnations"] == 1, got  # no reconnection
    assert got["grew"] < BIG // 5, got


@pytest.mark.parametrize("path", ANSWERED)
def test_an_answer_over_the_limit_fails_that_call_and_keeps_the_connection(
    tmp_path: Path, hostile: Served, path: str
) -> None:
    """A tool answering 50 MiB (maxMessageBytes 1 MiB) as a chunked JSON body, a JSON
    body with its length, an event on the request's stream, or an event on the legacy SSE
    stream: that call raises ResultTooLarge naming the size and the limit, read past and
    dropped; the next call on the same connection is answered; the peak memory grows by
    a fraction of the answer."""
    got = answered(tmp_path, hostile.url + path)
    error = got["error"]
    assert error is not None and error["type"] == "ResultTooLarge", got
    assert error["limit"] == LIMIT and error["size"] > BIG
    assert f"with {error['size']} bytes, more than maxMessageBytes ({LIMIT})" in error["text"]
    assert "the answer was dropped and the connection kept" in error["text"]
    assert_only_that_call_failed(got)


def test_a_compressed_answer_is_not_inflated(tmp_path: Path, hostile: Served) -> None:
    """A server answering gzip although the request asked for no coding (a few kilobytes
    that inflate to 50 MiB): that call fails, the answer unread; the connection is
    kept and the memory does not grow by the inflated size."""
    got = answered(tmp_path, hostile.url + "/mcp?gzip=1")
    error = got["error"]
    assert error is not None and error["type"] == "ServerRequestError", got
    assert "the answer came compressed (Content-Encoding)" in error["text"]
    assert "it was dropped unread" in error["text"]
    assert_only_that_call_failed(got)


async def test_over_legacy_sse_an_event_is_bounded_by_what_the_sdk_reads(hostile: Served) -> None:
    """Over legacy SSE the SDK reads an event of at most 1 MiB: an answer of 2 MiB, under
    the default maxMessageBytes (16 MiB), fails that call with ResultTooLarge naming
    that bound (raising maxMessageBytes would not help), the connection kept."""
    server = ServerHandle(http(hostile.url + "/sse"), publish=Recorder())
    async with open_servers([server]):
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        with pytest.raises(ResultTooLarge) as info:
            await server.call_tool("big", {"bytes": 2 * 2**20}, None)
        assert info.value.limit == 2**20 and info.value.size > 2 * 2**20
        said = str(info.value)
        assert "more than a legacy SSE event may hold (1048576)" in said
        assert "maxMessageBytes" not in said
        answer = await server.call_tool("big", {"bytes": 1000}, None)
        assert answer.content[0].text == "x" * 1000  # type: ignore[union-attr]
        assert server.health.restarts == 0 and server.incarnations == 1


# -- a listing page over the catalog limits is refused before it is parsed ---------------


@pytest.mark.parametrize(
    "path",
    [
        "/mcp?resources=1500",
        "/mcp?answer=sse&resources=1500",
        "/mcp?answer=sse&resume=1&resources=1500",
        "/sse?resources=1500",
    ],
)
async def test_a_listing_page_over_the_catalog_limits_is_refused_unparsed(
    hostile: Served, path: str
) -> None:
    """resources/list answered with one page of 1500 resources (maxToolsPerServer 1000),
    as a JSON body, as an event on the request's stream, on a stream the client resumed
    (under another id), or on the legacy SSE stream: the page is refused before it is
    parsed, the listing fails with CatalogTooLarge naming the count, the tools are
    served and the next call on the same connection is answered."""
    server = ServerHandle(http(hostile.url + path), publish=Recorder())
    with capture_logs() as logs:
        async with open_servers([server]):
            await until(lambda: server.listed, 20.0)
            assert server.resources == []
            answer = await server.call_tool("small", {}, None)
            assert answer.content[0].text == "ok"  # type: ignore[union-attr]
            assert server.status() is ServerStatus.CONNECTED
            assert server.health.restarts == 0 and server.incarnations == 1
    (dropped,) = [e for e in logs if e["event"] == "listing page over the catalog limits dropped"]
    assert dropped["server"] == "h" and dropped["count"] == 1500
    (failed,) = [e for e in logs if e["event"] == "listing resources failed"]
    assert "MCP server 'h' lists 1500 resources" in failed["error"]
    assert "maxToolsPerServer, maxCatalogBytes" in failed["error"]


async def test_a_listing_page_that_is_not_json_is_refused_unparsed(hostile: Served) -> None:
    """A page of 1500 resources that also holds a NaN (not JSON, so the page guard
    cannot measure it, but the SDK's parser takes it): refused unparsed all the same,
    the listing failing with the parse error; the connection is kept."""
    server = ServerHandle(http(hostile.url + "/mcp?resources=1500&nan=1"), publish=Recorder())
    with capture_logs() as logs:
        async with open_servers([server]):
            await until(lambda: server.listed, 20.0)
            assert server.resources == []
            answer = await server.call_tool("small", {}, None)
            assert answer.content[0].text == "ok"  # type: ignore[union-attr]
            assert server.health.restarts == 0 and server.incarnations == 1
    events = [e["event"] for e in logs]
    assert "listing page that could not be measured dropped" in events
    (failed,) = [e for e in logs if e["event"] == "listing resources failed"]
    assert "could not be read as JSON to be measured" in failed["error"]


@pytest.mark.parametrize("path", ["/mcp?tools=200000", "/mcp?answer=sse&tools=200000"])
def test_a_200000_tool_page_over_http_is_refused_unparsed(
    tmp_path: Path, hostile: Served, path: str
) -> None:
    """200,000 tiny tools in one tools/list page (about 10 MB, under maxMessageBytes) as
    a JSON body or an event: refused with the limit error before it is parsed; memory
    peaks at a few times the page's bytes (parsing them cost some eighty times) and
    comes back after."""
    got = measure(tmp_path, hostile.url + path)
    said = hostile.stop()
    got["page"] = next(int(line.split()[1]) for line in said.splitlines() if "page " in line)
    assert_refused_unparsed(got)


# -- an event stream is cut as the SSE reader cuts it ------------------------------------

#: An answer over the limit (256 bytes), as an event with an id.
OVER = b'id: 7\ndata: {"jsonrpc":"2.0","id":7,"result":{"text":"' + b"y" * 300 + b'"}}\n\n'
#: An event stream of every shape: comments, retry and id fields, a priming event, line
#: ends CRLF, LF and CR, data over two lines, another event type, a byte that is not
#: UTF-8, an answer over the limit and a notification over it, an event the stream ends
#: inside.
STREAM = b"".join(
    [
        b": a comment\r\nretry: 10\r\n\r\n",
        b"id: 1\r\ndata:\r\n\r\n",
        b'event: message\ndata: {"jsonrpc":"2.0","method":"n"}\n\n',
        b'data: {"jsonrpc":"2.0",\r\ndata: "id":1,"result":{}}\r\r',
        b"event: other\rdata: x\r\r",
        b"data: caf\xc3\xa9 \xff\n\n",
        OVER,
        b'data: {"jsonrpc":"2.0","method":"' + b"z" * 300 + b'"}\r\n\r\n',
        b"data: last\n\n",
        b"data: never ends",
    ]
)


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def cut(data: bytes, size: int) -> _Chunks:
    return _Chunks([data[i : i + size] for i in range(0, len(data), size)])


async def events_of(stream: httpx2.AsyncByteStream) -> list[httpx2.ServerSentEvent]:
    response = httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=stream,
        request=httpx2.Request("GET", "http://127.0.0.1/"),
    )
    return [event async for event in httpx2.EventSource(response)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 64, len(STREAM)])
async def test_events_reach_the_sse_reader_whole_and_as_it_would_read_them(size: int) -> None:
    """The stream in pieces of every size: each event is handed on whole, once its empty
    line has come (a CRLF split between two pieces is one line end); the reader gets the
    events it gets from the stream itself, but for the answer over the limit, which is an
    error for its request (with its event id), and the notification over it, which is
    left out."""
    owner = BoundedTransport(
        httpx2.AsyncHTTPTransport(),
        server="h",
        max_message_bytes=256,
        pages=PageGuard(max_items=10, max_bytes=1000),
    )
    handed = [piece async for piece in _Events(cut(STREAM, size), owner, None, None)]
    events = re.findall(rb".*?(?:\r\n|\r(?!\n)|\n){2}", STREAM, re.DOTALL)
    whole = [event.decode(errors="replace").encode() for event in events]  # as UTF-8
    (over,) = [i for i, event in enumerate(whole) if event == OVER]
    assert handed[:over] == whole[:over] and handed[over + 1 :] == whole[over + 2 :]
    bounded = await events_of(_Chunks(handed))
    raw = await events_of(cut(STREAM, size))
    (answer,) = [i for i, e in enumerate(raw) if '"id":7' in e.data]
    (notice,) = [i for i, e in enumerate(raw) if '"zzz' in e.data]
    error = json.loads(bounded[answer].data)
    assert error["id"] == 7 and error["error"]["code"] == -32099
    assert error["error"]["data"] == {"size": len(OVER), "limit": 256}
    assert bounded[answer].id == raw[answer].id == "7"
    expected = [*raw[:answer], bounded[answer], *raw[answer + 1 : notice], *raw[notice + 1 :]]
    assert bounded == expected
    assert len(raw) == 9 and raw[-1].data == "last"  # the stream's end ended no event
    assert "caf\N{LATIN SMALL LETTER E WITH ACUTE} \ufffd" in [e.data for e in bounded]


def test_the_page_guard_takes_a_page_for_the_request_the_client_will_give_it_to() -> None:
    """A page on a request's own event stream answers that request whatever id it names
    (the SDK puts the request's id on it); one on a resumed stream answers any listing
    waiting; one msgspec cannot read (a NaN, nesting too deep) is refused unmeasured
    when it answers a listing, and left to the parser otherwise — as is one that is not
    JSON at all."""
    guard = PageGuard(max_items=2, max_bytes=1000)

    def page(request_id: object, field: str = "tools", extra: str = "") -> bytes:
        items = ",".join(['{"name":"a"}'] * 3)
        result = f'{{"{field}":[{items}]{extra}}}'
        return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{result}}}'.encode()

    guard.sent("tools/list", 7)
    refused = guard.check(page(99), answering=7)
    assert refused is not None and refused[0] == 7 and refused[1]["code"] == -32098
    assert not guard.waiting
    guard.sent("resources/list", 8)
    assert guard.check(page(5, "tools"), answering=ANY) is None  # not the listing waiting
    refused = guard.check(page(5, "resources"), answering=ANY)
    assert refused is not None and refused[1]["data"] == {"count": 3, "size": 3 * 12}
    assert guard.check(page(8, "resources", ',"x":NaN')) == (8, UNREADABLE)
    assert not guard.waiting
    guard.sent("prompts/list", 9)
    assert guard.check(page(3, "prompts", ',"x":NaN')) is None  # not a listing's answer
    deep = b"[" * 5000 + b"]" * 5000  # deeper than msgspec reads (it raises RecursionError)
    assert guard.check(b'{"jsonrpc":"2.0","id":9,"result":{"x":' + deep + b"}}") == (9, UNREADABLE)
    # Not JSON the SDK's parser takes either (a stray byte before it, bytes after it):
    # left to the parser, which refuses it as not a JSON-RPC message.
    guard.sent("tools/list", 10)
    assert guard.check(b"\x0b" + page(10)) is None
    assert guard.check(page(10) + b"x") is None
    assert guard.check(b"\x0b" + page(10, extra=',"x":NaN')) is None
    assert guard.waiting
    assert guard.check(page(10, extra=',"x":-Infinity')) == (10, UNREADABLE)
