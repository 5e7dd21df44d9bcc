"""Whose fault an answer is: a backing server's answer that does not fit the protocol is
the server's (``ResultInvalid``, naming it and what was wrong), never the caller's
invalid request — through the library and through the gateway, in both protocol eras —
and a resource not found is said in each caller's own era's code (SEP-2164).

The backing servers are ``tests/malformed_server.py`` subprocesses, speaking 2026-07-28
(``modern``) or the session-based protocol (``legacy``) by hand."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.errors import ResultInvalid
from supervisor.gateway._core import ERROR_META, SERVER_META

from .test_gateway import gateway_over_http, http_client, text

MALFORMED = str(Path(__file__).with_name("malformed_server.py"))
ERAS = ("modern", "legacy")
#: The protocol version each era of the fixture speaks, as the connection says it.
VERSION = {"modern": "2026-07-28", "legacy": "2025-11-25"}
#: The gateway's clients: a 2026-07-28 one (``auto`` discovers it) and a session-based one.
CLIENT_MODES = ("auto", "legacy")
WAIT = 60


def server(era: str) -> dict[str, object]:
    """The config entry of the fixture speaking ``era``."""
    return {"command": sys.executable, "args": [MALFORMED, era], "autoApprove": True}


def config(*eras: str) -> dict[str, object]:
    """A supervisor of one fixture per era, each named after its era."""
    return {"mcpServers": {era: server(era) for era in eras}}


# -- through the library -----------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_result_with_content_not_a_list_is_the_server_s_fault(era: str) -> None:
    """``content`` an object, not a list: ``sup.call`` raises ``ResultInvalid`` naming the
    server, the tool, the protocol version and the path — not pydantic's
    ``ValidationError`` — and the connection is kept: the next call is answered."""
    with trio.fail_after(WAIT):
        async with open_supervisor(config(era)) as sup:
            with pytest.raises(ResultInvalid) as caught:
                await sup.call(f"{era}_content_not_list")
            assert (await sup.call(f"{era}_fine")).text == "ok"
    error = caught.value
    assert error.server == era and error.protocol == VERSION[era]
    assert error.request == "tool 'content_not_list'"
    assert [path for path, _ in error.errors] == ["content"]
    assert str(error).startswith(
        f"MCP server {era!r} answered tool 'content_not_list' with an invalid result "
        f"({VERSION[era]}): content: "
    )


async def test_a_2026_result_without_result_type_is_complete() -> None:
    """A 2026-07-28 result without ``resultType`` is ``complete``: the protocol's default,
    which a client must take it as (SEP-2322; the conformance suite's
    ``sep-2322-client-request-state``), though the SDK's client requires the field — it
    is written in before the SDK reads the result."""
    with trio.fail_after(WAIT):
        async with open_supervisor(config("modern")) as sup:
            assert (await sup.call("modern_no_result_type")).text == "ok"


async def test_a_session_based_result_has_no_result_type_to_miss() -> None:
    """The session-based protocol has no ``resultType``: the same answer is a valid
    result there."""
    with trio.fail_after(WAIT):
        async with open_supervisor(config("legacy")) as sup:
            assert (await sup.call("legacy_no_result_type")).text == "ok"


@pytest.mark.parametrize("era", ERAS)
async def test_a_content_block_of_no_known_kind_is_said_by_its_path(era: str) -> None:
    """A content block whose ``type`` is no kind of content (a terminal escape sequence,
    here): the problems are said at their paths inside the result, as the first kind of
    content would have them — not under the names of the SDK's models."""
    with trio.fail_after(WAIT):
        async with open_supervisor(config(era)) as sup:
            with pytest.raises(ResultInvalid) as caught:
                await sup.call(f"{era}_escape")
    assert sorted(caught.value.errors) == [
        ("content[0].text", "Field required"),
        ("content[0].type", "Input should be 'text'"),
    ]
    assert "\x1b" not in str(caught.value)


def test_what_a_server_sent_is_shown_in_an_invalid_result_never_obeyed() -> None:
    """A problem may quote what the server sent (a key, a tag): its message writes any
    character a terminal would act on as a visible escape."""
    error = ResultInvalid(
        server="s",
        request="tool 't'",
        protocol=None,
        errors=[("content[0]", "Input tag 'text\x1b]0;owned\x07' does not match")],
    )
    assert str(error) == (
        "MCP server 's' answered tool 't' with an invalid result: "
        "content[0]: Input tag 'text\\x1b]0;owned\\x07' does not match"
    )


@pytest.mark.parametrize("era", ERAS)
async def test_a_read_answered_with_contents_not_a_list_is_the_server_s_fault(era: str) -> None:
    with trio.fail_after(WAIT):
        async with open_supervisor(config(era)) as sup:
            with pytest.raises(ResultInvalid) as caught:
                await sup.read_resource(f"bad-{era}://contents")
    assert caught.value.server == era
    assert caught.value.request == f"resource 'bad-{era}://contents'"
    assert [path for path, _ in caught.value.errors] == ["contents"]


# -- through the gateway -----------------------------------------------------------------


@asynccontextmanager
async def gateway(mode: str) -> AsyncIterator[Client]:
    """A client of ``mode`` to an HTTP gateway serving one fixture of each era."""
    async with (
        gateway_over_http(config(*ERAS)) as (_, _, info),
        http_client(info.url, mode=mode) as client,  # type: ignore[attr-defined]
    ):
        yield client


def failure(result: mcp_types.CallToolResult) -> dict[str, object]:
    assert result.is_error, result
    return (result.meta or {})[ERROR_META]


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_the_gateway_answers_an_invalid_result_with_a_tool_error_naming_the_server(
    mode: str,
) -> None:
    """Each invalid answer of a backing server of either era reaches a client of either
    era as a tool error naming the server and what was wrong — not ``-32602 Invalid
    request parameters``, an error about the client's own request; a valid answer is
    passed on as it is."""
    with trio.fail_after(WAIT):
        async with gateway(mode) as client:
            missing = await client.call_tool("modern_no_result_type", {})
            not_list = {era: await client.call_tool(f"{era}_content_not_list", {}) for era in ERAS}
            fine = await client.call_tool("legacy_no_result_type", {})
    assert not missing.is_error and text(missing) == "ok"  # (complete, by default)
    for era, result in not_list.items():
        assert failure(result)["server"] == era
        assert text(result).startswith(f"MCP server {era!r} answered tool 'content_not_list'")
    assert not fine.is_error and text(fine) == "ok"
    assert (fine.meta or {})[SERVER_META] == "legacy"


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_the_gateway_answers_an_invalid_read_with_an_error_naming_the_server(
    mode: str,
) -> None:
    with trio.fail_after(WAIT):
        async with gateway(mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource("bad-modern://contents")
    assert caught.value.error.code == mcp_types.INTERNAL_ERROR
    assert caught.value.error.message.startswith(
        "MCP server 'modern' answered resource 'bad-modern://contents' with an invalid result"
    )


# -- a resource not found ----------------------------------------------------------------

#: A resource not found, in each client's era: 2026-07-28 retired -32002 for -32602.
NOT_FOUND = {"auto": mcp_types.INVALID_PARAMS, "legacy": -32002}


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_a_resource_not_found_is_said_in_the_client_s_era_s_code(mode: str) -> None:
    """A URI no backing server offers, and one a backing server says it does not have
    (in its own era's code, whichever it speaks): each is a resource not found in the
    code of the client's era, ``-32002`` on the session-based protocol, ``-32602`` on
    2026-07-28."""
    codes: dict[str, int] = {}
    with trio.fail_after(WAIT):
        async with gateway(mode) as client:
            for uri in ("nowhere://x", "gone-modern://x", "gone-legacy://x"):
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(uri)
                codes[uri] = caught.value.error.code
    assert codes == dict.fromkeys(codes, NOT_FOUND[mode])
