"""Resources and prompts through the supervisor: merged, namespaced, routed, refetched."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import attrs
import mcp_types as types
import pytest
import trio
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from structlog.testing import capture_logs

from supervisor.actors import Backoff, GiveUp, Restart
from supervisor.calls._resources import (
    MergedPrompt,
    check_prompt_arguments,
    merge_prompts,
    merge_resources,
    route_resource,
    template_matches,
)
from supervisor.errors import (
    PromptArgumentsInvalid,
    ServerRequestError,
    ServerUnavailable,
    ToolNameConflict,
    UnknownPrompt,
    UnknownResource,
    UnknownServer,
)
from supervisor.registry import NamingPolicy
from supervisor.runtime import open_supervisor
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, stdio_params

from .probes import until


def stdio(kind: str, **kw: object) -> dict[str, object]:
    fixture = {k: kw.pop(k) for k in ("crash_after", "count_file") if k in kw}
    command, args = stdio_params(kind, **fixture)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **kw}


def text(contents: types.TextResourceContents | types.BlobResourceContents) -> str:
    assert isinstance(contents, types.TextResourceContents)
    return contents.text


def prompt_text(result: types.GetPromptResult) -> str:
    (message,) = result.messages
    assert message.role == "user" and isinstance(message.content, types.TextContent)
    return message.content.text


# --- pure: templates, naming, routing, arguments ------------------------------------------


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("note://{title}", "note://todo", True),
        ("note://{title}", "note://a/b", False),
        ("note://{title}", "note://a%2Fb", True),
        ("note://{title}", "note://", True),  # the SDK binds an empty value
        ("note://{title}", "note://a?b", False),
        ("note://{title}", "notes://todo", False),
        ("file:///{+path}", "file:///etc/hosts", True),
        ("file:///{+path}", "file:///etc/hosts?x=1", False),
        ("repo://{owner}/{name}", "repo://me/it", True),
        ("repo://{owner}/{name}", "repo://me", False),
        ("search://{q}{?limit}", "search://x?limit=3", True),
        ("search://{q}{?limit}", "search://x", True),
        ("search://{q}{?limit}", "search://x?limit=3&page=2", True),
        ("files://{/path*}", "files:///a/b/c", True),
        ("weird://{}", "weird://x", False),
        ("weird://{a}{b}", "weird://ab", False),
        ("weird://{a:3}", "weird://abc", False),
    ],
    ids=lambda v: str(v) if not isinstance(v, bool) else ("match" if v else "no-match"),
)
def test_template_matching(template: str, uri: str, matches: bool) -> None:
    """The SDK's matcher: {var} is one segment without '/' or '?' (maybe empty); {+var} may
    span '/'; {?q} is optional and extra query parameters are ignored; a template the SDK
    rejects ({}, adjacent variables, prefix modifiers) matches nothing."""
    assert template_matches(template, uri) is matches


def test_names_follow_the_tools_rules() -> None:
    """Prefix, normalisation, clash suffix across servers and within one; no name → URI."""
    listed = [
        types.Resource(name="index", uri="notes://index"),
        types.Resource(name="index", uri="notes://other-index"),
        types.Resource(name="", uri="notes://x y"),
    ]
    merged = merge_resources([("a", "", listed), ("b", "", listed[:1]), ("c", "c c", [])])
    assert [(r.name, r.server, r.uri) for r in merged] == [
        ("index", "a", "notes://index"),
        ("index_2", "a", "notes://other-index"),
        ("notes_x_y", "a", "notes://x y"),
        ("index_3", "b", "notes://index"),
    ]
    prompts = [types.Prompt(name="summarize")]
    with pytest.raises(ToolNameConflict, match="'summarize' is wanted by a and b"):
        merge_prompts([("a", "", prompts), ("b", "", prompts)], NamingPolicy(clash="error"))
    hashed = merge_prompts([("a", "", prompts), ("b", "", prompts)], NamingPolicy(clash="hash"))
    assert hashed[1].name.startswith("summarize_") and len(hashed[1].name) == len("summarize") + 7


def test_exact_uri_wins_over_templates_in_config_order() -> None:
    """A listed URI goes to the first server listing it, before any template matches."""
    from supervisor.calls._resources import merge_resource_templates

    templates = merge_resource_templates(
        [("t", "t", [types.ResourceTemplate(name="any", uri_template="notes://{x}")])]
    )
    index = types.Resource(name="index", uri="notes://index")
    resources = merge_resources([("a", "a", []), ("b", "b", [index]), ("c", "c", [index])])
    assert route_resource("notes://index", resources, templates) == "b"
    assert route_resource("notes://other", resources, templates) == "t"
    assert route_resource("other://x", resources, templates) is None


def test_prompt_arguments_are_checked_before_sending() -> None:
    """Every missing required argument and every non-string value is named."""
    prompt = types.Prompt(
        name="p",
        arguments=[
            types.PromptArgument(name="title", required=True),
            types.PromptArgument(name="style"),
        ],
    )
    (merged,) = merge_prompts([("s", "s", [prompt])])
    assert isinstance(merged, MergedPrompt) and merged.required == ("title",)
    assert check_prompt_arguments(merged, {"title": "x"}) == {"title": "x"}
    with pytest.raises(PromptArgumentsInvalid) as info:
        check_prompt_arguments(merged, {"style": 3})
    assert info.value.errors == [
        ("style", "must be a string, not int"),
        ("title", "required argument missing"),
    ]
    assert str(info.value).startswith("prompt 's_p': invalid arguments")


# --- through the supervisor, real stdio servers -------------------------------------------


async def test_two_servers_merged_routed_and_refetched() -> None:
    """Two rich servers with distinct prefixes and an echo server (which offers neither
    resources nor prompts) in one supervisor: merged names, routing by URI and template,
    prompts with arguments, clear errors, and a resources list_changed refetched (the
    2026-07-28 subscription stream)."""
    config = {
        "mcpServers": {
            "a": stdio("rich"),
            "b": stdio("rich", prefix="b2"),
            "plain": stdio("echo"),
        }
    }
    async with open_supervisor(config) as sup:
        resources = await sup.resources()
        assert [(r.name, r.server, r.uri, r.original_name) for r in resources] == [
            ("a_index", "a", "notes://index", "index"),
            ("a_logo", "a", "notes://logo", "logo"),
            ("b2_index", "b", "notes://index", "index"),
            ("b2_logo", "b", "notes://logo", "logo"),
        ]
        assert resources[1].mime_type == "image/png"
        templates = await sup.resource_templates()
        assert [(t.name, t.server, t.uri_template) for t in templates] == [
            ("a_note", "a", "note://{title}"),
            ("b2_note", "b", "note://{title}"),
        ]
        prompts = await sup.prompts()
        assert [(p.name, p.server, p.required) for p in prompts] == [
            ("a_summarize", "a", ("title",)),
            ("a_greet", "a", ()),
            ("b2_summarize", "b", ("title",)),
            ("b2_greet", "b", ()),
        ]

        (index,) = (await sup.read_resource("notes://index")).contents
        assert text(index).splitlines() == ["hello", "todo"]
        (logo,) = (await sup.read_resource("notes://logo", server="b")).contents
        assert isinstance(logo, types.BlobResourceContents) and logo.mime_type == "image/png"
        (note,) = (await sup.read_resource("note://groceries")).contents
        assert text(note) == "note groceries"
        summary = await sup.get_prompt("b2_summarize", {"title": "todo"})
        assert prompt_text(summary) == "Summarize note todo"
        assert prompt_text(await sup.get_prompt("a_greet")) == "Hello!"

        with pytest.raises(PromptArgumentsInvalid, match="title: required argument missing"):
            await sup.get_prompt("a_summarize")
        with pytest.raises(UnknownPrompt, match="did you mean 'a_summarize'"):
            await sup.get_prompt("a_summarise", {"title": "x"})
        with pytest.raises(UnknownResource, match="did you mean 'notes://index'") as info:
            await sup.read_resource("notes://indx")
        assert info.value.uri == "notes://indx" and "note://{title} (a)" in str(info.value)
        with pytest.raises(UnknownServer, match="'nope'"):
            await sup.read_resource("notes://index", server="nope")

        plain = sup.server("plain")
        assert (plain.resources, plain.resource_templates, plain.prompts) == ([], [], [])
        assert (await sup.call("plain_echo", {"text": "still here"})).text == "still here"

        # b announces a new resource; it is refetched, listed and routed to b.
        b = sup.server("b")
        await sup.call("b2_add_note", {"title": "new"})
        await until(lambda: any(r.uri == "notes://new" for r in b.resources), 20)
        assert "b2_new" in [r.name for r in await sup.resources()]
        (new,) = (await sup.read_resource("notes://new")).contents
        assert text(new) == "note new"

        # A URI both list goes to the first in config order, whatever its state.
        await sup.stop("a")
        with pytest.raises(ServerUnavailable, match="'a' is stopped"):
            await sup.read_resource("notes://index")
        (other,) = (await sup.read_resource("notes://index", server="b")).contents
        assert text(other).splitlines() == ["hello", "todo", "new"]  # b's own index


async def test_unprefixed_clash_legacy_era_and_restart() -> None:
    """Handshake era (mode="legacy"): two unprefixed rich servers' prompts and resources
    clash and get ``_2``; a resources/list_changed notification is refetched; a read
    waits while its server restarts and is answered by the new process."""
    config = {
        "mcpServers": {"one": stdio("rich", prefix=""), "two": stdio("rich", prefix="")},
        "supervisor": {"backoff": {"local": {"initial": 0.1}}},
    }
    async with open_supervisor(config, mode="legacy") as sup:
        prompts = await sup.prompts()
        assert [(p.name, p.server, p.original_name) for p in prompts] == [
            ("summarize", "one", "summarize"),
            ("greet", "one", "greet"),
            ("summarize_2", "two", "summarize"),
            ("greet_2", "two", "greet"),
        ]
        assert [r.name for r in await sup.resources()] == ["index", "logo", "index_2", "logo_2"]

        one = sup.server("one")
        await sup.call("add_note", {"title": "late"})  # one's; two's is add_note_2
        await until(lambda: any(r.uri == "notes://late" for r in one.resources), 20)
        assert not any(r.uri == "notes://late" for r in sup.server("two").resources)

        pid = sup.status()["one"].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(20):
            (index,) = (await sup.read_resource("notes://index")).contents
        assert text(index).splitlines() == ["hello", "todo"]
        record = sup.status()["one"]
        assert record.restarts == 1 and record.pid != pid

        await sup.stop("one")
        assert prompt_text(await sup.get_prompt("summarize_2", {"title": "x"})) == (
            "Summarize note x"
        )
        with pytest.raises(ServerUnavailable):
            await sup.get_prompt("summarize", {"title": "x"})


async def test_a_read_lost_with_its_connection_is_sent_once_more(tmp_path: Path) -> None:
    """Reads are read-only: one in flight when the server dies goes to the next process —
    once. Here every process crashes on its first read: two executions, then an error."""
    count_file = tmp_path / "count"
    config = {
        "mcpServers": {"notes": stdio("rich", crash_after=1, count_file=count_file)},
        "supervisor": {"backoff": {"local": {"initial": 0.1}}},
    }
    async with open_supervisor(config) as sup:
        with pytest.raises(ServerRequestError, match="twice") as info:
            await sup.read_resource("note://doomed")
        assert info.value.code == types.CONNECTION_CLOSED and info.value.server == "notes"
    assert count_executions(count_file) == {"note": 2}


# --- servers that lack (or break) resources and prompts: in-process, low-level -----------


@attrs.define
class Settings:
    """What a server actor reads from its config, for an in-process ("memory") server."""

    name: str
    app: object
    type: str = "memory"
    command: str | None = None
    args: list[str] = attrs.Factory(list)
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    lazy: bool = True
    timeout: float = 10.0
    init_timeout: float = 10.0
    ping_interval: float = 0.0
    max_attempts: int = 1
    backoff: Backoff = Backoff(initial=0.1, maximum=0.1)
    restart: Restart = Restart.PERMANENT
    give_up: GiveUp = GiveUp.MARK_UNAVAILABLE
    shutdown_timeout: float = 10.0
    prefix: str = ""


async def _list_tools(ctx: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])


async def _call_tool(ctx: object, params: object) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


async def _broken_listing(ctx: object, params: object) -> types.ListResourcesResult:
    raise MCPError(code=types.INTERNAL_ERROR, message="cannot list resources today")


async def _list_prompts(ctx: object, params: object) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="p")])


async def _read(ctx: object, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    contents = types.TextResourceContents(uri=params.uri, text="read anyway")
    return types.ReadResourceResult(contents=[contents])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_missing_or_broken_listings_leave_tools_alone(mode: str) -> None:
    """A server advertising neither resources nor prompts is not asked for them (nothing
    fails); one whose resources/list fails (and has no templates handler: that is fine)
    still serves its tools, lists its prompts, and answers reads sent to it."""
    bare = Server("bare", on_list_tools=_list_tools, on_call_tool=_call_tool)
    broken = Server(
        "broken",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_broken_listing,
        on_read_resource=_read,
        on_list_prompts=_list_prompts,
    )
    options = {"mode": mode}
    servers = [
        ServerHandle(Settings(name=s.name, app=s), publish=lambda e: None, client_options=options)
        for s in (bare, broken)
    ]
    async with open_servers(servers):
        with capture_logs() as logs:
            for server in servers:
                assert [t.name for t in await server.list_tools()] == ["t"]
                assert server.listed and server.resources == []
                assert server.resource_templates == []
        failures = [e for e in logs if e["event"].startswith("listing")]
        # The bare server was not asked; the broken one has no templates handler: fine.
        assert [(e["event"], e["server"]) for e in failures] == [
            ("listing resources failed", "broken")
        ]
        assert "cannot list resources today" in failures[0]["error"]
        assert [p.name for p in servers[0].prompts] == []
        assert [p.name for p in servers[1].prompts] == ["p"]
        result = await servers[1].call_tool("t", {}, None)
        assert not result.is_error
        (contents,) = (await servers[1].read_resource("x://y")).contents
        assert text(contents) == "read anyway"
