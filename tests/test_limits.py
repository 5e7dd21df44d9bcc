"""The limits of ``supervisor.limits``: each at its boundary and one past it, in the
config, in what a server lists (tool definitions, pagination) and in results."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server.lowlevel import Server

from supervisor import open_supervisor
from supervisor.config import ConfigError, _limits, load_config
from supervisor.config._limits import Limits as ServerLimits
from supervisor.config._model import Limits
from supervisor.errors import ServerUnavailable
from supervisor.registry import merge
from supervisor.registry._merge import Listing
from supervisor.tools._results import normalize_result

OBJECT: dict[str, Any] = {"type": "object"}


def tool(name: str = "t", **fields: Any) -> types.Tool:
    return types.Tool(name=name, input_schema=fields.pop("input_schema", OBJECT), **fields)


def schema_of(size: int) -> dict[str, Any]:
    """An object schema whose compact JSON is exactly ``size`` bytes."""
    schema: dict[str, Any] = {"type": "object", "description": ""}
    base = len(json.dumps(schema, separators=(",", ":")))
    schema["description"] = "d" * (size - base)
    assert len(json.dumps(schema, separators=(",", ":"))) == size
    return schema


# -- the config -------------------------------------------------------------------------

CONFIG_KEYS = {
    "maxConfigBytes": 262144,
    "maxServers": 32,
    "maxToolsPerServer": 1000,
    "maxCatalogBytes": 2097152,
    "maxMessageBytes": 16777216,
    "maxListPages": 100,
    "maxDescriptionBytes": 16384,
    "maxSchemaBytes": 65536,
    "maxInlineImages": 4,
    "maxImageBytes": 4194304,
    "maxStructuredPreviewBytes": 16384,
    "maxPreviewBytes": 24576,
    "maxPreviewLines": 1000,
}


def servers(n: int) -> dict[str, Any]:
    return {f"s{i}": {"command": "x"} for i in range(n)}


def test_the_defaults_are_the_documented_ones_and_the_runtime_gets_each() -> None:
    """Every limit's default is the one documented, and every one the running supervisor
    reads comes from the config (a changed value included)."""
    loaded = load_config({"mcpServers": {}, "supervisor": {"limits": CONFIG_KEYS}})
    assert loaded.settings.limits == Limits()
    changed = {k: v + 1 for k, v in CONFIG_KEYS.items() if k != "maxConfigBytes"}
    config = load_config({"mcpServers": {}, "supervisor": {"limits": changed}})
    assert ServerLimits is Limits  # one class: what the config holds, the servers read
    assert config.settings.limits == Limits(
        max_tools_per_server=1001,
        max_catalog_bytes=2097153,
        max_message_bytes=16777217,
        max_list_pages=101,
        max_description_bytes=16385,
        max_schema_bytes=65537,
        max_inline_images=5,
        max_image_bytes=4194305,
        max_structured_preview_bytes=16385,
        max_preview_bytes=24577,
        max_preview_lines=1001,
        max_servers=33,
    )


def test_at_most_32_servers_unless_raised() -> None:
    """32 servers load; a 33rd is an error naming the count, the limit and the field to
    raise; maxServers raises (or lowers) it."""
    assert len(load_config({"mcpServers": servers(32)}).servers) == 32
    with pytest.raises(ConfigError) as info:
        load_config({"mcpServers": servers(33)})
    assert str(info.value) == (
        "mcpServers: has 33 servers, more than the limit of 32; remove some, or raise "
        "supervisor.limits.maxServers"
    )
    raised = {"mcpServers": servers(33), "supervisor": {"limits": {"maxServers": 33}}}
    assert len(load_config(raised).servers) == 33
    lowered = {"servers": servers(3), "supervisor": {"limits": {"maxServers": 2}}}
    with pytest.raises(ConfigError, match=r"^servers: has 3 servers, more than the limit of 2"):
        load_config(lowered)


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"maxListPages": 0}, "supervisor.limits.maxListPages: must be at least 1"),
        ({"maxSchemaBytes": "64k"}, "supervisor.limits.maxSchemaBytes: must be a whole number"),
        ({"maxInlineImages": -1}, "supervisor.limits.maxInlineImages: must be at least 0"),
        ({"maxPreviewLine": 5}, "supervisor.limits.maxPreviewLine: unknown field; did you mean"),
    ],
    ids=["zero-pages", "not-an-integer", "negative-images", "misspelt"],
)
def test_a_wrong_limit_is_an_error_at_its_path(limits: dict[str, object], error: str) -> None:
    """A wrong value (or name) in supervisor.limits is a ConfigError at its field path."""
    with pytest.raises(ConfigError) as info:
        load_config({"mcpServers": {}, "supervisor": {"limits": limits}})
    assert str(info.value).startswith(error), str(info.value)


def test_no_image_inline_is_allowed() -> None:
    """maxInlineImages may be 0: every image is then saved to a file."""
    config = {"mcpServers": {}, "supervisor": {"limits": {"maxInlineImages": 0}}}
    assert load_config(config).settings.limits.max_inline_images == 0


# -- what a server lists ----------------------------------------------------------------


def test_tool_names_are_1_to_128_of_mcps_characters() -> None:
    """A name of 128 allowed characters is offered; 129, or one other character, makes the
    tool unsupported, saying why."""
    ok = "a.b-c_D9" + "x" * 120
    listing = Listing([tool(ok), tool(ok + "x"), tool("a/b"), tool("naïve")])
    assert [row[1] for row in listing._rows] == [ok]
    long, slash, accent = listing.problems
    assert long == (
        f"tool {ok + 'x'!r}: its name is 129 characters long, more than the 128 MCP allows"
    )
    assert slash == (
        "tool 'a/b': its name has characters MCP does not allow in a tool name ('/'); "
        "only A-Z, a-z, 0-9, '_', '.' and '-'"
    )
    assert "('ï')" in accent


def test_a_description_over_16_kib_is_cut_saying_so() -> None:
    """A 16 KiB description is kept whole; one byte more is cut to 16 KiB with a marker
    saying by how much, and the listing notes it (the tool is still offered)."""
    limit = _limits.DEFAULT_MAX_DESCRIPTION_BYTES
    at, past = "é" * (limit // 2), "é" * (limit // 2) + "x"
    catalog = merge(
        [("s", "", Listing([tool("at", description=at), tool("past", description=past)]))]
    )
    assert catalog["at"].description == at
    cut = catalog["past"].description
    assert len(cut.encode()) <= limit
    assert cut.endswith("\n… [description truncated: 1 byte over the 16 KiB limit]")
    assert past.startswith(cut.split("\n…")[0])
    listing = Listing([tool("past", description=past)])
    assert listing.problems == ()
    assert listing.notes == (
        "tool 'past': its description (16385 bytes) was cut to the 16 KiB limit",
    )


@pytest.mark.parametrize("limit", [1, 2, 3, 10, 40, 80])
def test_a_description_limit_too_small_for_the_marker_still_holds(limit: int) -> None:
    """However small ``maxDescriptionBytes`` is, a cut description fits in it: the full
    marker where it fits, else a bare ``…``, else just the cut text."""
    description = "xé" * 50  # cuts fall on character boundaries
    catalog = merge(
        [
            (
                "s",
                "",
                Listing(
                    [tool("t", description=description)], ServerLimits(max_description_bytes=limit)
                ),
            )
        ]
    )
    cut = catalog["t"].description
    assert len(cut.encode()) <= limit
    if limit >= 80:
        assert "[description truncated: " in cut
    elif limit >= 3:
        assert cut.endswith("…") and description.startswith(cut[:-1])
    else:
        assert description.startswith(cut)


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
def test_a_schema_over_64_kib_makes_the_tool_unsupported(which: str) -> None:
    """An input or output schema of 64 KiB (compact JSON) is accepted; one byte more
    makes the tool unsupported, naming the size and the limit."""
    limit = _limits.DEFAULT_MAX_SCHEMA_BYTES
    listing = Listing(
        [tool("at", **{which: schema_of(limit)}), tool("past", **{which: schema_of(limit + 1)})]
    )
    assert [row[1] for row in listing._rows] == ["at"]
    what = "inputSchema" if which == "input_schema" else "outputSchema"
    assert listing.problems == (
        f"tool 'past': its {what} is 65537 bytes, more than the limit of 65536 "
        "(supervisor.limits.maxSchemaBytes)",
    )
    smaller = Listing([tool("at", **{which: schema_of(limit)})], ServerLimits(max_schema_bytes=100))
    assert len(smaller.problems) == 1  # the limit is the one given


def test_an_external_ref_makes_the_tool_unsupported() -> None:
    """A $ref inside the schema ('#...') is fine; one to another document (a URL or a
    relative file), in the input or output schema, makes the tool unsupported."""
    local = {
        "type": "object",
        "$defs": {"id": {"type": "string"}},
        "properties": {"id": {"$ref": "#/$defs/id"}, "$ref": {"type": "string"}},
    }
    remote = {"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}
    relative = {"type": "object", "items": [{"$ref": "other.json#/a"}]}
    listing = Listing(
        [
            tool("local", input_schema=local),
            tool("remote", input_schema=remote),
            tool("out", output_schema=relative),
        ]
    )
    assert [row[1] for row in listing._rows] == ["local"]
    assert listing.problems == (
        "tool 'remote': its inputSchema refers to 'https://example.com/x.json', outside the "
        "schema; only local references ('#...') are supported",
        "tool 'out': its outputSchema refers to 'other.json#/a', outside the schema; only "
        "local references ('#...') are supported",
    )


def test_an_unknown_dialect_makes_the_tool_unsupported() -> None:
    """$schema of 2020-12 or draft-07 (either scheme, with or without '#') is accepted;
    2019-09 or anything else is not, in the input or the output schema."""
    ok = [
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft-07/schema",
    ]
    tools = [tool(f"ok{i}", input_schema={**OBJECT, "$schema": d}) for i, d in enumerate(ok)]
    later = {**OBJECT, "$schema": "https://json-schema.org/draft/2019-09/schema"}
    tools += [tool("in", input_schema=later), tool("out", output_schema=later)]
    listing = Listing(tools)
    assert [row[1] for row in listing._rows] == ["ok0", "ok1", "ok2"]
    assert [p.split(":")[0] for p in listing.problems] == ["tool 'in'", "tool 'out'"]
    assert "dialect 'https://json-schema.org/draft/2019-09/schema'" in listing.problems[1]


# -- pagination: an in-process server ------------------------------------------------------


def pager(pages: int | None, *, repeat: str | None = None) -> Server[Any]:
    """A server listing one tool a page over ``pages`` pages — or, with ``repeat``, one
    that answers every page with no tools and ``repeat`` as the next cursor, forever."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        if repeat is not None:
            return types.ListToolsResult(tools=[], next_cursor=repeat)
        assert pages is not None
        page = int(params.cursor) if params is not None and params.cursor else 0
        more = str(page + 1) if page + 1 < pages else None
        return types.ListToolsResult(tools=[tool(f"t{page}")], next_cursor=more)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    return Server("pager", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_100_pages_are_listed_and_the_101st_request_is_refused() -> None:
    """A listing of exactly maxListPages pages (100 by default) is offered whole; one more
    page fails the server, naming it, the page count and the limit to raise."""
    apps = {"hundred": pager(100), "more": pager(101)}
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup:
        catalog = await sup.tools()
        assert len(catalog.by_server["hundred"]) == 100
        assert "more" not in catalog.by_server or not catalog.by_server["more"]
        record = sup.status()["more"]
        assert record.status == "failed" and record.retryable is False
        assert record.last_error == (
            "MCP server 'more' was still paginating its tools after 100 requests, the limit "
            "(supervisor.limits.maxListPages); the listing was stopped. Raise that limit if "
            "the server really has that many pages"
        )


async def test_a_repeated_cursor_is_stopped_with_a_clear_error() -> None:
    """A server that answers with the cursor it was just given (empty pages, forever) is
    stopped at its second page: failed at once, the error naming the server and the
    cursor, and calls to it fail fast saying so."""
    config = {"mcpServers": {}, "supervisor": {"limits": {"maxListPages": 3}}}
    async with open_supervisor(config, apps={"loop": pager(None, repeat="again")}) as sup:
        await sup.tools()
        record = sup.status()["loop"]
        assert (record.status, record.restarts, record.retryable) == ("failed", 0, False)
        assert record.last_error == (
            "MCP server 'loop' sent the tools cursor 'again' a second time (after 2 pages): "
            "its pagination would never end, so the listing was stopped. The server is at "
            "fault: fix or update it"
        )
        with pytest.raises(ServerUnavailable, match="cursor 'again' a second time"):
            await sup.server("loop").call_tool("t0", {})


async def test_max_list_pages_is_read_from_the_config() -> None:
    """maxListPages: 3 lets a 3-page server list and stops a 4-page one."""
    config = {"mcpServers": {}, "supervisor": {"limits": {"maxListPages": 3}}}
    async with open_supervisor(config, apps={"three": pager(3), "four": pager(4)}) as sup:
        catalog = await sup.tools()
        assert len(catalog.by_server["three"]) == 3
        assert "after 3 requests" in (sup.status()["four"].last_error or "")


async def test_unsupported_tools_are_counted_in_the_servers_health() -> None:
    """Tools breaking the definition limits are left out of a live server's catalog,
    counted in its health and explained in the catalog; the others are offered."""
    tools = [tool("fine"), tool("bad name"), tool("huge", input_schema=schema_of(70_000))]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    app = Server("odd", on_list_tools=list_tools)
    async with open_supervisor({"mcpServers": {}}, apps={"odd": app}) as sup:
        catalog = await sup.tools()
        assert [e.original_name for e in catalog.by_server["odd"]] == ["fine"]
        assert sup.status()["odd"].unsupported_tools == 2
        assert [p.split(":")[0] for p in catalog.invalid["odd"]] == [
            "tool 'bad name'",
            "tool 'huge'",
        ]


# -- results ------------------------------------------------------------------------------


def image(size: int) -> types.ImageContent:
    data = base64.b64encode(b"\x89" * size).decode()
    return types.ImageContent(type="image", data=data, mime_type="image/png")


def result(*content: Any, structured: object = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured)


def test_four_images_are_kept_inline_and_a_fifth_is_saved(tmp_path: Path) -> None:
    """Four images stay inline; the fifth is saved to a file (decoded), and the text says
    which, why and where."""
    out = normalize_result(
        result(types.TextContent(type="text", text="look"), *[image(10 + i) for i in range(5)]),
        tool="pics",
        spill_dir=tmp_path,
    )
    assert [i.size for i in out.images] == [10, 11, 12, 13]
    text, note = out.text.split("\n")
    assert text == "look"
    path = Path(note.rsplit(" it is at ", 1)[1].rstrip("]"))
    assert note == (
        f"[image 5 (image/png, 14 bytes) not kept inline: only 4 images are kept inline; "
        f"it is at {path}]"
    )
    assert path.parent == tmp_path and path.suffix == ".png" and path.read_bytes() == b"\x89" * 14
    assert out.spilled_to is None  # the text itself was short


def test_an_image_over_4_mib_is_saved_not_kept(tmp_path: Path) -> None:
    """An image of 4 MiB stays inline; one byte more is saved, the text saying why."""
    limit = _limits.DEFAULT_MAX_IMAGE_BYTES
    out = normalize_result(result(image(limit), image(limit + 1)), tool="t", spill_dir=tmp_path)
    assert [i.size for i in out.images] == [limit]
    assert out.text.startswith(
        f"[image 2 (image/png, {limit + 1} bytes) not kept inline: larger than the 4 MiB limit;"
    )
    none_inline = normalize_result(
        result(image(3)), tool="t", spill_dir=tmp_path, limits=ServerLimits(max_inline_images=0)
    )
    assert none_inline.images == () and "only 0 images are kept inline" in none_inline.text


def test_text_over_1000_lines_is_spilled_saying_so(tmp_path: Path) -> None:
    """1000 lines (well under 24 KiB) stay inline, a final line break included; 1001 are
    spilled, the preview keeping 1000 and saying how many of how many."""
    at = "\n".join(f"line {i}" for i in range(1000))
    for body in (at, at + "\n"):
        assert (
            normalize_result(
                result(types.TextContent(type="text", text=body)), tool="t", spill_dir=tmp_path
            ).text
            == body
        )
    past = at + "\nline 1000"
    out = normalize_result(
        result(types.TextContent(type="text", text=past)), tool="t", spill_dir=tmp_path
    )
    assert out.spilled_to is not None and out.spilled_to.read_text() == past
    *kept, note = out.text.split("\n")
    assert kept == at.split("\n")
    size = len(past.encode())
    assert note == (
        f"[output truncated at 1000 of 1001 lines, {len(at.encode())} of {size} bytes; "
        f"the full output is at {out.spilled_to}]"
    )


def test_text_over_24_kib_is_spilled(tmp_path: Path) -> None:
    """24 KiB of text stays inline; one byte more is spilled, the preview keeping 24 KiB."""
    limit = _limits.DEFAULT_MAX_PREVIEW_BYTES
    at = normalize_result(
        result(types.TextContent(type="text", text="x" * limit)), tool="t", spill_dir=tmp_path
    )
    assert at.spilled_to is None and at.text == "x" * limit
    past = normalize_result(
        result(types.TextContent(type="text", text="x" * (limit + 1))), tool="t", spill_dir=tmp_path
    )
    assert past.text.split("\n") == [
        "x" * limit,
        f"[output truncated at {limit} of {limit + 1} bytes; the full output is at "
        f"{past.spilled_to}]",
    ]


def test_structured_content_preview_is_at_most_16_kib(tmp_path: Path) -> None:
    """Structured content of 16 KiB as JSON is previewed whole; one byte more is cut to
    16 KiB, saved whole, and the preview says where; ``structured`` stays whole."""
    limit = _limits.DEFAULT_MAX_STRUCTURED_PREVIEW_BYTES
    base = len('{"v":""}')
    at = {"v": "a" * (limit - base)}
    out = normalize_result(result(structured=at), tool="t", spill_dir=tmp_path)
    assert out.structured_preview == json.dumps(at, separators=(",", ":"))
    assert list(tmp_path.iterdir()) == []
    past = {"v": "a" * (limit - base + 1)}
    out = normalize_result(result(structured=past), tool="t", spill_dir=tmp_path)
    assert out.structured == past
    preview, note = out.structured_preview.split("\n")
    assert len(preview.encode()) == limit
    (path,) = tmp_path.iterdir()
    assert path.suffix == ".json" and json.loads(path.read_text()) == past
    assert note == (
        f"[structured content truncated at {limit} of {limit + 1} bytes; the whole of it "
        f"is at {path}]"
    )


async def test_the_configured_result_limits_reach_calls(tmp_path: Path) -> None:
    """A call through the supervisor applies the config's result limits: with
    maxInlineImages 1 and maxPreviewLines 2, the second image is saved and the text cut."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("show")])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return result(types.TextContent(type="text", text="a\nb\nc"), image(1), image(2))

    app = Server("pics", on_list_tools=list_tools, on_call_tool=call_tool)
    limits = {"maxInlineImages": 1, "maxPreviewLines": 2}
    config = {"mcpServers": {}, "supervisor": {"limits": limits}}
    async with open_supervisor(config, apps={"pics": app}, spill_dir=tmp_path) as sup:
        out = await sup.call("pics_show", {})
    assert len(out.images) == 1 and out.spilled_to is not None
    lines = out.text.split("\n")
    assert lines[:2] == ["a", "b"]
    assert lines[2].startswith("[output truncated at 2 of 3 lines")
    assert lines[3].startswith("[image 2 (image/png, 2 bytes) not kept inline: only 1 image is")
