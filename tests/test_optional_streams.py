"""A server's optional streams never keep it from being connected and called.

The 2026-07-28 change notice stream (``subscriptions/listen``) answered as the MCP
conformance suite's reference server answers it — ``application/json``, one
acknowledgement line, a body held open — or with an HTTP error, or not at all: the
server is connected within its ``initTimeout``, its tools are called, it is not
restarted, a warning says why it has no change notices, and the stream is tried again in
the background (each try given up on, not left open), until it works: then the lists are
fetched again and change notices come. The session-based protocol's GET stream
misbehaving the same ways is never waited for. And a server's ``protocol`` field pins
the handshake era. Real HTTP servers on 127.0.0.1 (the fixture servers, with their
optional streams made to misbehave in front of them), and real stdio processes.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from supervisor import open_supervisor
from supervisor.server._listing import LISTEN_ACK_WAIT, NO_CHANGE_NOTICES
from supervisor.testing.servers import make_server, start_http, stdio_params
from supervisor.testing.servers._raw import TroubledStreams

from .probes import until

INIT_TIMEOUT = 10.0
#: Why there are no change notices, by how the listen stream is answered.
WHY = {
    "json": f"it did not acknowledge subscriptions/listen within {LISTEN_ACK_WAIT:g} s",
    "hang": f"it did not acknowledge subscriptions/listen within {LISTEN_ACK_WAIT:g} s",
    "error": (
        "it refused subscriptions/listen: Server returned an error response (MCP error -32603)"
    ),
}


def troubled(kind: str, how: str | None, *, get: bool = False) -> TroubledStreams:
    """The fixture server ``kind`` over Streamable HTTP, its optional streams answered
    by ``how``."""
    return TroubledStreams(make_server(kind).streamable_http_app(host="127.0.0.1"), how, get=get)


def remote(url: str, **fields: Any) -> dict[str, Any]:  # noqa: ANN401
    entry = {"type": "http", "url": url, "approve": False, "initTimeout": INIT_TIMEOUT}
    return {"mcpServers": {"web": {**entry, **fields}}}


def warnings_of(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == NO_CHANGE_NOTICES and e["log_level"] == "warning"]


@pytest.mark.parametrize("how", ["json", "error", "hang"])
async def test_a_listen_stream_that_misbehaves_does_not_keep_the_server_down(how: str) -> None:
    """Connected within initTimeout (at most the stream's own short wait spent on it),
    called, not restarted, healthy; one warning naming the server says why there are no
    change notices; the stream is tried again in the background, each try given up on
    (none left open), and the server stays connected meanwhile."""
    streams = troubled("echo", how)
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            web = await start_http(nursery, streams)
            async with open_supervisor(remote(web.url)) as sup:
                began = trio.current_time()
                await sup.connect_all()
                took = trio.current_time() - began
                status = sup.status()["web"]
                assert status.status == "connected", status.last_error
                assert status.protocol_version == "2026-07-28"
                assert took < INIT_TIMEOUT
                assert streams.answered >= 1
                assert (await sup.call("web_echo", {"text": "hello"})).text == "hello"
                # tried again in the background; each try given up on, not left open
                await until(lambda: streams.answered >= 3 and streams.held <= 1, 30.0)
                assert (await sup.call("web_echo", {"text": "again"})).text == "again"
                status = sup.status()["web"]
                assert status.status == "connected" and status.restarts == 0
                assert status.consecutive_failures == 0 and status.last_error is None
            nursery.cancel_scope.cancel()
    (warning,) = warnings_of(logs)
    assert warning["server"] == "web"
    assert warning["reason"] == WHY[how]


async def test_a_listen_stream_that_works_later_brings_the_lists_and_notices_back() -> None:
    """A listen stream never answered at first: the server is connected without change
    notices; a tool added meanwhile goes unannounced. Once the stream works (tried
    again in the background) the tools are listed again — the one added meanwhile is
    there — and a change announced on it from then on is heard."""
    streams = troubled("changing", "hang")
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            web = await start_http(nursery, streams)
            async with open_supervisor(remote(web.url)) as sup:
                await sup.connect_all()
                assert warnings_of(logs), logs
                await sup.call("web_add_tool", {"name": "meanwhile"})
                streams.how = None  # the streams work from now on
                await until(lambda: "web_meanwhile" in sup.catalog, 30.0)
                await sup.call("web_add_tool", {"name": "announced"})
                await until(lambda: "web_announced" in sup.catalog, 10.0)
                assert sup.status()["web"].restarts == 0
            nursery.cancel_scope.cancel()
    assert len(warnings_of(logs)) == 1  # said once, not at every try


@pytest.mark.parametrize("how", ["json", "error", "hang"])
async def test_a_session_get_stream_that_misbehaves_is_never_waited_for(how: str) -> None:
    """On the session-based protocol the SDK opens the server's GET stream after the
    handshake: answered with a JSON body held open, an error, or nothing, it keeps
    nothing waiting — the server is connected at once and called."""
    streams = troubled("echo", how, get=True)
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, streams)
        async with open_supervisor(remote(web.url, protocol="2025-11-25")) as sup:
            await sup.connect_all()
            status = sup.status()["web"]
            assert status.status == "connected" and status.protocol_version == "2025-11-25"
            await until(lambda: streams.answered >= 1, 10.0)  # the GET was made
            assert (await sup.call("web_echo", {"text": "hello"})).text == "hello"
            assert sup.status()["web"].restarts == 0
        nursery.cancel_scope.cancel()


# -- the protocol era pinned per server ---------------------------------------------------------


@pytest.mark.parametrize("pinned", ["2025-11-25", "legacy"])
async def test_a_server_pinned_to_the_handshake_era_connects_with_it(pinned: str) -> None:
    """Two of the same fixture servers, one local and one remote, each answering both
    eras: pinned to ``2025-11-25`` (or ``legacy``) it is connected with the
    ``initialize`` handshake; left to ``auto`` it speaks 2026-07-28."""
    command, args = stdio_params("echo")
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        local = {"command": command, "args": args, "approve": False}
        config = {
            "mcpServers": {
                "web": {"type": "http", "url": web.url, "approve": False, "protocol": pinned},
                "local": {**local, "protocol": pinned},
                "web_auto": {"type": "http", "url": web.url, "approve": False},
                "local_auto": local,
            }
        }
        async with open_supervisor(config) as sup:
            await sup.connect_all()
            versions = {name: s.protocol_version for name, s in sup.status().items()}
            assert versions == {
                "web": "2025-11-25",
                "local": "2025-11-25",
                "web_auto": "2026-07-28",
                "local_auto": "2026-07-28",
            }
            assert (await sup.call("web_echo", {"text": "hi"})).text == "hi"
            assert (await sup.call("local_echo", {"text": "hi"})).text == "hi"
        nursery.cancel_scope.cancel()


async def test_the_pin_wins_over_the_supervisors_mode() -> None:
    """``open_supervisor(mode=...)`` sets every server's way; a server's ``protocol``
    pin is its own: with ``mode="2026-07-28"`` the pinned one still uses the handshake."""
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        config = {
            "mcpServers": {
                "pinned": {"type": "http", "url": web.url, "protocol": "2025-11-25"},
                "other": {"type": "http", "url": web.url},
            }
        }
        async with open_supervisor(config, mode="2026-07-28") as sup:
            await sup.connect_all()
            versions = {name: s.protocol_version for name, s in sup.status().items()}
            assert versions == {"pinned": "2025-11-25", "other": "2026-07-28"}
        nursery.cancel_scope.cancel()
