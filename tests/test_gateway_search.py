"""Tool search (``serve --tool-search``): a large catalog behind the four meta-tools
``list``, ``search``, ``load`` and ``call``, answering from what the gateway serves."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.subscriptions import ServerEvent

from supervisor.gateway._core import ERROR_META
from supervisor.gateway._search import meta_tools
from supervisor.testing.servers import make_server
from supervisor.testing.servers._big import make_big
from supervisor.testing.servers.tiny import tiny_server

from .probes import own_state
from .test_gateway import _raises, gateway_over_http, http_client, text

META = ["list", "search", "load", "call"]
#: the big fixture's tools besides its numbered ones: the extra ones, 3 controls, a marker
EXTRA = ["weather_forecast", "create_issue"]
BIG_TOOLS = 300 + len(EXTRA) + 4


def big_apps() -> dict[str, object]:
    """A 306-tool server (``big_tool_0000`` … ``big_tool_0299``, ``big_weather_forecast``,
    ``big_create_issue``, …) and the echo fixture (``e_echo``, ``e_add``, ``e_count``)."""
    return {"big": make_big(tools=300, extra_tools=EXTRA).server, "e": make_server("echo")}


async def answer(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A meta-tool's structured answer (the SDK client checks it against the tool's
    ``outputSchema``), which its text says too."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


def error(result: mcp_types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    return (result.meta or {})[ERROR_META]  # type: ignore[no-any-return]


# -- the flow ------------------------------------------------------------------------------


async def test_a_big_catalog_is_listed_as_four_meta_tools() -> None:
    """With tool search, ``tools/list`` gives exactly the four meta-tools, whose input and
    output schemas are valid JSON Schema 2020-12; a handshake-era client is told the tool
    list does not change."""
    async with gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True) as (
        sup,
        _,
        info,
    ):
        assert len(sup.snapshot.named) == BIG_TOOLS + 3  # type: ignore[attr-defined]
        for mode in ("auto", "legacy"):
            async with http_client(info.url, mode=mode) as client:
                tools = (await client.list_tools()).tools
                assert [tool.name for tool in tools] == META
                for tool in tools:
                    assert tool.description and len(tool.description) > 80
                    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
                    if tool.output_schema is not None:
                        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
                outputs = {tool.name for tool in tools if tool.output_schema is not None}
                assert outputs == {"list", "search", "load"}
        async with http_client(info.url, mode="legacy") as client:
            assert client.server_capabilities.tools.list_changed is False  # type: ignore[union-attr]
            assert "`search` finds tools" in (client.instructions or "")


async def test_search_load_and_call_a_tool_of_a_big_catalog() -> None:
    """list → search → load → call: the servers with their tool counts, a page of one
    server's tools, the right tool found first with its input schema, its full definition,
    and its result through ``call`` — and through a direct ``tools/call`` of its name."""
    async with (
        gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True) as (_, _, info),
        http_client(info.url) as client,
    ):
        listed = await answer(client, "list", {})
        assert listed == {
            "servers": [
                {"name": "big", "status": "connected", "tools": BIG_TOOLS},
                {"name": "e", "status": "connected", "tools": 3},
            ]
        }
        page = await answer(client, "list", {"server": "big", "offset": 10, "limit": 5})
        assert [t["name"] for t in page["tools"]] == [f"big_tool_{i:04d}" for i in range(10, 15)]
        assert page["tools"][0]["description"].startswith("Numbered tool 10 of a big catalog")
        assert page["total"] == BIG_TOOLS and page["nextOffset"] == 15

        found = await answer(client, "search", {"query": "weather forecast"})
        first = found["tools"][0]
        assert first["name"] == "big_weather_forecast" and first["server"] == "big"
        assert first["inputSchema"]["properties"]["text"]["type"] == "string"
        assert len((await answer(client, "search", {"query": "numbered tool"}))["tools"]) == 10
        most = await answer(client, "search", {"query": "numbered tool", "limit": 50})
        assert len(most["tools"]) == 50

        loaded = await answer(client, "load", {"names": ["big_weather_forecast", "e_echo"]})
        assert loaded["unknown"] == []
        weather, echo = loaded["tools"]
        assert weather["name"] == "big_weather_forecast"
        assert weather["description"] == "Extra tool weather_forecast: echoes text."
        assert weather["inputSchema"]["properties"] == {
            "text": {"type": "string", "description": "any text"}
        }
        assert echo["annotations"]["readOnlyHint"] is True and "outputSchema" in echo

        called = await client.call_tool(
            "call", {"name": "big_weather_forecast", "arguments": {"text": "sunny"}}
        )
        assert not called.is_error and text(called) == "weather_forecast: sunny"
        structured = await client.call_tool("call", {"name": "e_echo", "arguments": {"text": "a"}})
        assert structured.structured_content == {"result": "a"}  # the tool's own result
        direct = await client.call_tool("big_tool_0007", {"x": 3})
        assert text(direct) == "tool_0007 x=3"


async def test_load_reports_unknown_names_with_close_matches() -> None:
    """``load`` of a name that is not served answers (no protocol error) with the tools it
    found and, for each other name, the reason and the closest names; an error result
    only when it found none of them."""
    async with (
        gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True) as (_, _, info),
        http_client(info.url) as client,
    ):
        loaded = await answer(client, "load", {"names": ["big_wether_forecast", "e_add"]})
        assert [t["name"] for t in loaded["tools"]] == ["e_add"]
        (unknown,) = loaded["unknown"]
        assert unknown["name"] == "big_wether_forecast"
        assert unknown["didYouMean"][0] == "big_weather_forecast"
        assert "big_weather_forecast" in unknown["reason"]
        none = await client.call_tool("load", {"names": ["e_ecko"]})
        assert none.is_error and none.structured_content is not None
        assert none.structured_content["unknown"][0]["didYouMean"][0] == "e_echo"
        assert "e_echo" in text(none)


async def test_call_fails_as_a_direct_call_would() -> None:
    """``call`` goes through the one gate: invalid arguments are the ToolArgumentsInvalid
    tool error (not executed), a tool needing approval is refused saying how to allow it,
    an unknown name is a tool error naming close matches; arguments that do not fit a
    meta-tool's own schema are a tool error too."""
    apps = {**big_apps(), "notes": make_server("rich")}
    async with (
        gateway_over_http({"mcpServers": {}}, apps=apps, tool_search=True) as (_, _, info),
        http_client(info.url) as client,
    ):
        bad = await client.call_tool("call", {"name": "big_tool_0001", "arguments": {"x": "three"}})
        assert error(bad) == {
            "type": "ToolArgumentsInvalid",
            "server": "big",
            "effect": "not executed",
            "errors": [{"path": "x", "message": "'three' is not of type 'integer'"}],
        }
        assert "big_tool_0001" in text(bad) and "x: 'three' is not of type 'integer'" in text(bad)
        direct = await client.call_tool("big_tool_0001", {"x": "three"})
        assert text(direct) == text(bad) and error(direct) == error(bad)

        refused = await client.call_tool("call", {"name": "notes_wipe"})
        assert error(refused)["type"] == "ApprovalRequired"
        assert text(refused) == text(await client.call_tool("notes_wipe", {}))
        assert "start the gateway with --yes" in text(refused)

        unknown = await client.call_tool("call", {"name": "big_weather_forcast"})
        assert error(unknown) == {"type": "UnknownTool", "server": None, "effect": "not executed"}
        assert "big_weather_forecast" in text(unknown)
        assert "big_weather_forecast" in await _raises(client.call_tool("big_weather_forcast", {}))

        too_many = await client.call_tool("search", {"query": "tool", "limit": 500})
        assert error(too_many)["type"] == "ToolArgumentsInvalid"
        assert error(too_many)["server"] is None  # a meta-tool is the gateway's own
        assert "limit" in text(too_many) and "50" in text(too_many)
        many = await client.call_tool("load", {"names": [f"big_tool_{i:04d}" for i in range(51)]})
        assert error(many)["type"] == "ToolArgumentsInvalid" and "names" in text(many)
        no_server = await client.call_tool("list", {"server": "bigg"})
        assert error(no_server)["type"] == "UnknownServer" and "big" in text(no_server)


# -- what is served ------------------------------------------------------------------------


async def test_narrowing_applies_inside_list_search_load_and_call() -> None:
    """``tools`` globs: ``list`` counts, ``search`` finds and ``load`` gives only the tools
    served; ``call`` of another is refused as not served. ``servers``: the others are not
    listed at all."""
    tools = ["big_tool_00*", "e_*"]
    async with (
        gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True, tools=tools) as (
            _,
            _,
            info,
        ),
        http_client(info.url) as client,
    ):
        counts = {s["name"]: s["tools"] for s in (await answer(client, "list", {}))["servers"]}
        assert counts == {"big": 100, "e": 3}
        page = await answer(client, "list", {"server": "big", "limit": 500})
        assert len(page["tools"]) == 100 and "nextOffset" not in page
        assert (await answer(client, "search", {"query": "weather forecast"}))["tools"] == []
        found = await answer(client, "search", {"query": "numbered tool", "limit": 50})
        assert {t["name"] for t in found["tools"]} <= {f"big_tool_{i:04d}" for i in range(100)}
        loaded = await answer(client, "load", {"names": ["big_tool_0001", "big_tool_0100"]})
        assert [t["name"] for t in loaded["tools"]] == ["big_tool_0001"]
        assert loaded["unknown"][0]["name"] == "big_tool_0100"
        refused = await client.call_tool("call", {"name": "big_tool_0100", "arguments": {"x": 1}})
        assert "not served by this gateway" in text(refused)
        assert error(refused)["effect"] == "not executed"
    async with (
        gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True, servers=["e"]) as (
            _,
            _,
            info,
        ),
        http_client(info.url) as client,
    ):
        listed = await answer(client, "list", {})
        assert [s["name"] for s in listed["servers"]] == ["e"]
        assert (await answer(client, "search", {"query": "numbered"}))["tools"] == []
        assert "e" in text(await client.call_tool("list", {"server": "big"}))


async def test_a_failed_servers_tools_are_not_found() -> None:
    """A server that ended ``failed``: ``list`` shows its status and last error and no
    tools, ``search`` no longer finds them, ``load`` says its server is failed, and
    ``call`` is at once a tool error naming it."""
    config = {
        "mcpServers": {
            "tiny": {
                **tiny_server(),
                "maxRestarts": 0,
                "autoApprove": True,
                "description": "Adds and echoes.",
            }
        },
    }
    async with (
        gateway_over_http(config, apps=big_apps(), tool_search=True) as (sup, _, info),
        sup.subscribe("supervisor.child.gave_up") as gave_up,  # type: ignore[attr-defined]
        http_client(info.url) as client,
    ):
        found = await answer(client, "search", {"query": "add integers", "limit": 3})
        assert found["tools"][0]["name"] == "tiny_add"
        assert (
            text(await client.call_tool("call", {"name": "tiny_echo", "arguments": {"text": "hi"}}))
            == "hi"
        )
        os.kill(sup.status()["tiny"].pid, signal.SIGKILL)  # type: ignore[attr-defined,arg-type]
        with trio.fail_after(30):
            await gave_up.receive()
        assert sup.status()["tiny"].status == "failed"  # type: ignore[attr-defined]

        found = await answer(client, "search", {"query": "add integers", "limit": 50})
        assert found["tools"] and all(t["server"] != "tiny" for t in found["tools"])
        (tiny,) = (await answer(client, "list", {"server": "tiny"}))["servers"]
        assert tiny["status"] == "failed" and tiny["tools"] == 0
        assert tiny["description"] == "Adds and echoes." and "signal 9" in tiny["lastError"]
        assert (await answer(client, "list", {"server": "tiny"}))["tools"] == []
        none = await client.call_tool("load", {"names": ["tiny_add"]})
        assert none.is_error and "its server 'tiny' is failed" in text(none)
        with trio.fail_after(5):
            down = await client.call_tool(
                "call", {"name": "tiny_add", "arguments": {"a": 1, "b": 2}}
            )
        assert error(down) == {
            "type": "ServerUnavailable",
            "server": "tiny",
            "effect": "not executed",
        }


async def test_catalog_changes_are_not_announced_as_tool_list_changes() -> None:
    """The meta-tools never change: a server withdrawn (here stopped) changes the
    resources and prompts announced, but no ``tools/list_changed`` is sent."""
    apps = {**big_apps(), "notes": make_server("rich")}
    async with gateway_over_http({"mcpServers": {}}, apps=apps, tool_search=True) as (
        sup,
        gateway,
        info,
    ):
        events: list[ServerEvent] = []
        prompts_changed = trio.Event()

        def listener(event: ServerEvent) -> None:
            events.append(event)
            if type(event).__name__ == "PromptsListChanged":
                prompts_changed.set()

        unsubscribe = gateway.subscriptions.subscribe(listener)
        async with http_client(info.url) as client:
            assert (await answer(client, "list", {"server": "notes"}))["total"] > 0
            await sup.stop("notes")  # type: ignore[attr-defined]
            with trio.fail_after(10):
                await prompts_changed.wait()
            kinds = [type(event).__name__ for event in events]
            assert kinds == ["ResourcesListChanged", "PromptsListChanged"]
            (notes,) = (await answer(client, "list", {"server": "notes"}))["servers"]
            assert notes == {"name": "notes", "status": "stopped", "tools": 0}
            assert [t.name for t in (await client.list_tools()).tools] == META
        unsubscribe()


# -- the command ---------------------------------------------------------------------------


def test_serve_parses_tool_search() -> None:
    """``serve --tool-search`` parses; without it tool search is off."""
    from supervisor.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["serve", "--config", "x.json", "--tool-search"]).tool_search
    assert not parser.parse_args(["serve", "--config", "x.json"]).tool_search


async def test_serve_tool_search_over_stdio(tmp_path: Path) -> None:
    """``mcp-supervisor serve --tool-search``: a stdio client sees the four meta-tools and
    calls a tool of the config's server through ``call``."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"tiny": {**tiny_server(), "autoApprove": True}}}))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "serve", "--config", str(config), "--tool-search"],
        env=own_state(),  # (the SDK gives a stdio server its default variables only)
    )
    with trio.fail_after(60):
        async with Client(stdio_client(params), mode="legacy") as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == META
            found = await answer(client, "search", {"query": "echo"})
            assert found["tools"][0]["name"] == "tiny_echo"
            result = await client.call_tool(
                "call", {"name": "tiny_echo", "arguments": {"text": "hello"}}
            )
            assert text(result) == "hello"


def test_the_flow_in_the_docs_fits_the_meta_tools() -> None:
    """docs/gateway.md's tool-search session: each request's arguments fit its meta-tool's
    input schema, and each answer its output schema."""
    page = (Path(__file__).parent.parent / "docs" / "gateway.md").read_text()
    section = page.split("## Large catalogs: --tool-search", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    tools = {tool.name: tool for tool in meta_tools()}
    asked: list[str] = []
    for block in blocks:
        if block.keys() == {"name", "arguments"} and block["name"] in tools:
            tool = tools[block["name"]]
            jsonschema.Draft202012Validator(tool.input_schema).validate(block["arguments"])
            asked.append(tool.name)
        else:
            schema = tools[asked[-1]].output_schema
            assert schema is not None
            jsonschema.Draft202012Validator(schema).validate(block)
    assert asked == META


async def test_null_for_an_optional_meta_tool_argument_is_left_out() -> None:
    """A client's ``null`` for an optional argument of a meta-tool (``list``'s ``server``,
    ``search``'s ``limit``, ``call``'s ``arguments``) is as if it were left out, as for
    any tool; a ``null`` for a required one is still refused."""
    async with (
        gateway_over_http({"mcpServers": {}}, apps=big_apps(), tool_search=True) as (_, _, info),
        http_client(info.url) as client,
    ):
        listed = await answer(client, "list", {"server": None})
        assert {row["name"] for row in listed["servers"]} == {"big", "e"}
        found = await answer(client, "search", {"query": "weather", "limit": None})
        assert found["tools"][0]["name"] == "big_weather_forecast"
        called = await client.call_tool("call", {"name": "e_add", "arguments": None})
        assert called.is_error  # e_add's own arguments are required: its refusal
        assert "ToolArgumentsInvalid" in str(error(called))
        refused = await client.call_tool("search", {"query": None})
        assert refused.is_error and "query" in text(refused)
