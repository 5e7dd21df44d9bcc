"""The live catalog: coalesced refreshes, events, and the catalog's must-show cases over real
stdio fixture servers (the ``big`` kind) through ``open_supervisor``."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio
import trio.testing
from mcp_types import Tool

from supervisor import log
from supervisor.config import load_config
from supervisor.errors import SupervisorError
from supervisor.events._bus import Bus, Subscription
from supervisor.events._catalog import (
    Event,
    ToolsConflict,
    ToolsDeregistered,
    ToolsRegistered,
    ToolsUpdated,
)
from supervisor.registry import NamingPolicy
from supervisor.registry._live import Registry
from supervisor.runtime import open_supervisor
from supervisor.server import ServerStatus
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, stdio_params

# -- in process: real ServerHandle objects, no processes ---------------------------------


def managed(name: str, prefix: str | None = None) -> ServerHandle:
    """A configured server that is never started: its tools and status are set by hand."""
    entry: dict[str, object] = {"command": "unused"}
    if prefix is not None:
        entry["prefix"] = prefix
    config = load_config({"mcpServers": {name: entry}})
    return ServerHandle(config.servers[name], publish=lambda event: None)


def tool(name: str, description: str = "", schema: dict[str, object] | None = None) -> Tool:
    return Tool(
        name=name,
        description=description,
        input_schema=schema if schema is not None else {"type": "object"},
    )


def listed(server: ServerHandle, *tools: Tool | str) -> None:
    """``server`` connected (again) and listed ``tools``: what its actor does, then tells."""
    server.state.tools_listed([t if isinstance(t, Tool) else tool(t) for t in tools])
    server.health.tool_count = len(server.tools)
    server.health.status = ServerStatus.CONNECTED
    server.changed()


def down(server: ServerHandle) -> None:
    server.health.status = ServerStatus.DISCONNECTED
    server.changed()


class Live:
    """The registry as these tests read it: its snapshot's catalog, and its actor."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    @property
    def current(self):  # noqa: ANN201
        return self.registry.snapshot.current

    def statistics(self):  # noqa: ANN201
        return self.registry.statistics()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        await self.registry.incarnation().run(task_status=task_status)


def live(servers: Sequence[ServerHandle], **options: object) -> tuple[Live, list[Event]]:
    published: list[Event] = []
    registry = Registry(
        [s.name for s in servers],
        publish=published.append,
        **options,  # type: ignore[arg-type]
    )
    for server in servers:
        server._report = registry.report
    return Live(registry), published


def summary(events: Sequence[Event]) -> list[tuple[str, object, object]]:
    out: list[tuple[str, object, object]] = []
    for e in events:
        if isinstance(e, ToolsConflict):
            out.append((e.kind, e.name, e.servers))
        else:
            out.append((e.kind, getattr(e, "server", None), getattr(e, "names", None)))
    return out


class TestCoalescing:
    """Refreshes with and without the refresher task."""

    async def test_without_a_refresher_every_change_is_published_at_once(self) -> None:
        """Before run() starts, each change is merged and published as it happens."""
        a, b = managed("a"), managed("b")
        catalog, published = live([a, b])
        listed(a, "x")
        assert summary(published) == [("tools.registered", "a", ["a_x"])]
        listed(b, "y")
        assert len(published) == 2
        assert catalog.statistics().refreshes == 2

    async def test_a_burst_of_changes_is_one_refresh(self) -> None:
        """With the refresher running, changes made without yielding are merged once, one
        scheduling round later, and published as one difference."""
        a, b = managed("a"), managed("b")
        catalog, published = live([a, b])
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            for n in range(100):
                listed(a, f"t{n}")
            listed(b, "y")
            assert published == []
            assert catalog.statistics().pending
            await trio.testing.wait_all_tasks_blocked()
            stats = catalog.statistics()
            assert (stats.refreshes, stats.pending, stats.running) == (1, False, True)
            assert summary(published) == [
                ("tools.registered", "a", ["a_t99"]),
                ("tools.registered", "b", ["b_y"]),
            ]
            nursery.cancel_scope.cancel()
        assert not catalog.statistics().running

    async def test_a_servers_newer_report_replaces_its_older_one_in_the_mailbox(self) -> None:
        """The registry's mailbox coalesces by server: however many reports a burst
        holds, at most one per server waits, the newest, and the merge reflects it."""
        a, b = managed("a"), managed("b")
        catalog, published = live([a, b])
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            for n in range(100):
                listed(a, f"t{n}")
            listed(b, "y")
            mailbox = catalog.registry.address.statistics()
            assert (mailbox.queued, mailbox.casts, mailbox.dropped) == (2, 101, 0)
            snapshot = await catalog.registry.settled()
            assert sorted(snapshot.current) == ["a_t99", "b_y"]
            assert catalog.statistics().refreshes == 1
            nursery.cancel_scope.cancel()

    async def test_readers_never_merge_but_can_wait_until_settled(self) -> None:
        """A reader's snapshot does not change under it: a report is merged by the actor,
        and settled() returns once everything reported before it is in."""
        a = managed("a")
        catalog, published = live([a])
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            await trio.testing.wait_all_tasks_blocked()
            listed(a, "x")
            assert "a_x" not in catalog.current and published == []  # not merged by us
            snapshot = await catalog.registry.settled()
            assert "a_x" in snapshot.current and snapshot is catalog.registry.snapshot
            assert summary(published) == [("tools.registered", "a", ["a_x"])]
            await trio.testing.wait_all_tasks_blocked()
            assert catalog.statistics().refreshes == 1  # one merge, for the one report
            nursery.cancel_scope.cancel()

    async def test_events_keep_their_order_within_a_refresh(self) -> None:
        """One refresh publishes deregistered, registered, updated, then new conflicts."""
        a, b = managed("a", prefix=""), managed("b", prefix="")
        catalog, published = live([a, b])
        listed(a, "x", tool("y", "old"))
        published.clear()
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            listed(a, tool("y", "new"), "z")
            listed(b, "z")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert summary(published) == [
            ("tools.deregistered", "a", ["x"]),
            ("tools.registered", "a", ["z"]),
            ("tools.registered", "b", ["z_2"]),
            ("tools.updated", "a", ["y"]),
            ("tools.conflict", "z", ["a", "b"]),
        ]

    async def test_changes_that_cancel_out_publish_nothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A server that drops and comes back with the same tools within one round
        publishes nothing; the same tool objects are never hashed."""
        import supervisor.registry._catalog as registry

        a = managed("a")
        catalog, published = live([a])
        listed(a, "x")
        before = catalog.current["a_x"]
        published.clear()
        hashed: list[object] = []
        monkeypatch.setattr(registry, "_ENCODER", type("Spy", (), {"encode": hashed.append})())
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            down(a)
            a.health.status = ServerStatus.CONNECTED
            a.changed()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert published == [] and hashed == []
        assert catalog.statistics().refreshes == 2
        assert catalog.current["a_x"].tool is before.tool

    async def test_pending_changes_are_published_when_the_refresher_ends(self) -> None:
        """Cancelling the refresher publishes what is pending; later changes are merged
        as they happen."""
        a = managed("a")
        catalog, published = live([a])
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            listed(a, "x")
            nursery.cancel_scope.cancel()
        assert summary(published) == [("tools.registered", "a", ["a_x"])]
        down(a)
        assert summary(published)[-1] == ("tools.deregistered", "a", ["a_x"])

    async def test_a_failing_merge_keeps_the_previous_catalog(self) -> None:
        """Under the 'error' clash policy a clash is logged; the refresher keeps running and
        the catalogs stay as they were."""
        a, b = managed("a", prefix=""), managed("b", prefix="")
        catalog, published = live([a, b], policy=NamingPolicy(clash="error"))
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            listed(a, "x")
            await trio.testing.wait_all_tasks_blocked()
            listed(b, "x")
            await trio.testing.wait_all_tasks_blocked()
            assert catalog.statistics().running
            assert list(catalog.current) == ["x"] and catalog.current["x"].server == "a"
            listed(b, "y")  # the clash is gone: merging works again
            await trio.testing.wait_all_tasks_blocked()
            assert list(catalog.current) == ["x", "y"]
            nursery.cancel_scope.cancel()

    async def test_run_twice_is_refused(self) -> None:
        """One refresher per catalog."""
        catalog, _ = live([managed("a")])
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            with pytest.raises(RuntimeError, match="already running"):
                await catalog.run()
            nursery.cancel_scope.cancel()


class TestInvalidAndBuiltins:
    """Invalid tools are counted in health; built-in clashes are warnings."""

    async def test_invalid_tools_are_counted_in_the_health_record(self) -> None:
        """The count is set when the list arrives, before any merge."""
        a = managed("a")
        catalog, _ = live([a])
        assert a.record().unsupported_tools is None  # never listed
        bad = tool("bad", schema={"type": "object", "properties": {"x": {"type": "nonsense"}}})
        async with trio.open_nursery() as nursery:
            await nursery.start(catalog.run)
            listed(a, "x", bad, "x", tool(""))
            assert a.record().unsupported_tools == 3  # before any merge
            await catalog.registry.settled()
            assert list(catalog.current) == ["a_x"]
            assert len(catalog.current.invalid["a"]) == 3
            nursery.cancel_scope.cancel()

    async def test_builtin_clash_is_a_warning_event_and_log(self) -> None:
        """A tool wanting a built-in's name keeps a prefixed name; the tools.conflict event
        is marked builtin and names "<built-in>" first; a warning is logged."""
        stream = io.StringIO()
        log.configure_logging(level="debug", stream=stream, json=True, force=True)
        try:
            web = managed("web", prefix="")
            catalog, published = live([web], builtins={"search"})
            listed(web, "search", "fetch")
        finally:
            log.reset_logging()
        assert list(catalog.current) == ["web_search", "fetch"]
        (conflict,) = [e for e in published if isinstance(e, ToolsConflict)]
        assert (conflict.name, conflict.servers, conflict.builtin) == (
            "search",
            ["<built-in>", "web"],
            True,
        )
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        (warning,) = [line for line in lines if line.get("name") == "search"]
        assert warning["level"] == "warning" and "built-in" in warning["event"]


# -- over real subprocess servers -----------------------------------------------------------


def big(*options: str, count_file: Path | None = None, **entry: object) -> dict[str, object]:
    """A config entry for a ``big`` fixture over stdio; calls need no approval."""
    command, args = stdio_params("big", count_file=count_file)
    return {"command": command, "args": [*args, *options], "approve": False, **entry}


def config(**servers: dict[str, object]) -> dict[str, object]:
    return {"supervisor": {"limits": {"maxToolsPerServer": 2000}}, "mcpServers": servers}


async def wait_for(
    events: Subscription, predicate: Callable[[Event], bool], timeout: float = 30
) -> Event:
    with trio.fail_after(timeout):
        async for event in events:
            if predicate(event):
                return event
    raise AssertionError("the bus closed")  # pragma: no cover


def registers(server: str, name: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, ToolsRegistered) and e.server == server and name in e.names


def fetches(count_file: Path) -> int:
    return count_executions(count_file)["tools/list"]


async def test_unprefixed_servers_offering_search_clash() -> None:
    """Two servers with an empty prefix both list `search`: the second's is `search_2`, a
    tools.conflict names both servers, and each name reaches its own server."""
    cfg = config(
        one=big("--tools", "2", "--extra-tool", "search", prefix=""),
        two=big("--tools", "2", "--extra-tool", "search", prefix=""),
    )
    bus = Bus()
    async with bus.subscribe("tools.conflict") as conflicts, open_supervisor(cfg, bus=bus) as sup:
        await sup.connect_all()
        catalog = sup.catalog
        assert (catalog["search"].server, catalog["search_2"].server) == ("one", "two")
        assert catalog["search_2"].original_name == "search"
        event = await wait_for(conflicts, lambda e: getattr(e, "name", None) == "search")
        assert isinstance(event, ToolsConflict)
        assert (event.servers, event.builtin) == (["one", "two"], False)
        await sup.call("search_2", {"text": "q"})
        await sup.call("search", {"text": "q"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_list_changed_during_a_call(tmp_path: Path, mode: str) -> None:
    """The server changes its list and announces it while a call is in flight (it answers
    only once the new list was fetched): the call returns, the new tool is registered and
    callable."""
    cfg = config(srv=big("--tools", "5", count_file=tmp_path / "count"))
    async with open_supervisor(cfg, mode=mode) as sup, sup.subscribe("tools.*") as events:
        await sup.connect_all()
        assert "srv_late" not in sup.catalog
        await sup.call("srv_change_during", {"name": "late", "timeout": 20})
        await wait_for(events, registers("srv", "srv_late"))
        assert sup.catalog["srv_late"].original_name == "late"
        await sup.call("srv_late", {})
    assert count_executions(tmp_path / "count")["late"] == 1


async def test_a_thousand_tools_are_all_in_the_catalog_and_searchable() -> None:
    """A server listing 1000 tools (in pages of 100) has every one in the catalog, and
    search finds any of them."""
    cfg = config(big=big())
    async with open_supervisor(cfg) as sup:
        await sup.connect_all()
        catalog = sup.catalog
        numbered = [n for n in catalog if n.startswith("big_tool_")]
        assert numbered == [f"big_tool_{i:04d}" for i in range(1000)]
        assert sup.status()["big"].tool_count == 1004
        assert sup.search("tool_0042")[0].name == "big_tool_0042"
        assert sup.search("big_tool_0999", limit=1)[0].name == "big_tool_0999"
        await sup.call("big_tool_0999", {"x": 1})


async def test_invalid_tools_are_skipped_and_counted_the_rest_work(tmp_path: Path) -> None:
    """Invalid schemas, a duplicate and an empty name are left out of the catalog and
    counted as unsupported in status; the server's other tools are callable (the first
    of two tools of one name included)."""
    count_file = tmp_path / "count"
    cfg = config(srv=big("--tools", "3", "--invalid", "4", count_file=count_file))
    async with open_supervisor(cfg) as sup:
        await sup.connect_all()
        record = sup.status()["srv"]
        assert (record.tool_count, record.unsupported_tools) == (3 + 3 + 1 + 4, 4)
        names = set(sup.catalog)
        assert {"srv_tool_0000", "srv_tool_0001", "srv_tool_0002", "srv_burst"} <= names
        assert not {n for n in names if "bad_" in n}
        assert sup.catalog["srv_tool_0000"].description.startswith("Numbered tool 0")
        await sup.call("srv_tool_0000", {"x": 1})
        await sup.call("srv_tool_0002", {"x": 2})
        with pytest.raises(SupervisorError):
            await sup.call("srv_bad_type_0", {"x": 1})
    assert count_executions(count_file)["tool_0000"] == 1
    assert count_executions(count_file)["bad_type_0"] == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_burst_of_list_changed_costs_at_most_two_fetches(tmp_path: Path, mode: str) -> None:
    """100 list_changed back to back (the list changes each time) are fetched at most
    twice: one fetch for the first notice, one more for all that came meanwhile. The
    catalog ends with the last list."""
    count_file = tmp_path / "count"
    cfg = config(srv=big("--tools", "1000", count_file=count_file))
    async with open_supervisor(cfg, mode=mode) as sup, sup.subscribe("tools.*") as events:
        await sup.connect_all()
        assert fetches(count_file) == 1
        await sup.call("srv_burst", {"n": 100})
        await wait_for(events, registers("srv", "srv_generation_100"))
        assert fetches(count_file) - 1 <= 2  # the burst's fetches, as it settled
        catalog = sup.catalog
        assert "srv_generation_100" in catalog and "srv_generation_0" not in catalog
        assert len([n for n in catalog if n.startswith("srv_tool_")]) == 1000
        # One more change, answered once it was fetched: nothing else was pending.
        await sup.call("srv_change_during", {"name": "marker", "timeout": 20})
        await wait_for(events, registers("srv", "srv_marker"))
        assert fetches(count_file) - 1 <= 3
        drained = events.drain()
    assert not [
        e
        for e in drained
        if isinstance(e, ToolsDeregistered | ToolsUpdated) and "srv_tool_0000" in e.names
    ]


async def test_builtin_clash_keeps_the_prefixed_name_and_warns() -> None:
    """An MCP tool named like an embedder's built-in keeps a prefixed name (the server's,
    as its prefix is empty); a tools.conflict warning names "<built-in>" first."""
    cfg = config(web=big("--tools", "1", "--extra-tool", "search", prefix=""))
    bus = Bus()
    async with (
        bus.subscribe("tools.conflict") as conflicts,
        open_supervisor(cfg, bus=bus, builtins=["search"]) as sup,
    ):
        await sup.connect_all()
        assert "search" not in sup.catalog
        assert sup.catalog["web_search"].original_name == "search"
        event = await wait_for(conflicts, lambda e: getattr(e, "name", None) == "search")
        assert isinstance(event, ToolsConflict)
        assert (event.servers, event.builtin) == (["<built-in>", "web"], True)
        await sup.call("web_search", {"text": "q"})


def undescribed_app() -> object:
    """A low-level server listing tools without a description (absent, null, empty,
    blank) and one with its own."""
    import mcp_types as types
    from mcp.server import Server

    listed = [
        types.Tool.model_validate({"name": "absent", "inputSchema": {"type": "object"}}),
        types.Tool(name="null", description=None, input_schema={"type": "object"}),
        types.Tool(name="empty", description="", input_schema={"type": "object"}),
        types.Tool(name="blank", description=" \n ", input_schema={"type": "object"}),
        types.Tool(name="own", description="Has its own.", input_schema={"type": "object"}),
    ]

    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    return Server("bare", on_list_tools=list_tools)


async def test_tools_listed_without_descriptions_get_the_default_and_provenance() -> None:
    """Through a running supervisor, each description-less tool is described as "Tool
    '{name}' from MCP server '{serverId}'" in the catalog, its summaries and search, and
    every entry carries its provenance."""
    async with open_supervisor({"mcpServers": {}}, apps={"plain": undescribed_app()}) as sup:
        catalog = await sup.tools()
        descriptions = {e.original_name: e.description for e in catalog.values()}
        assert descriptions == {
            "absent": "Tool 'absent' from MCP server 'plain'",
            "null": "Tool 'null' from MCP server 'plain'",
            "empty": "Tool 'empty' from MCP server 'plain'",
            "blank": "Tool 'blank' from MCP server 'plain'",
            "own": "Has its own.",
        }
        assert [s.description for s in catalog.list(limit=1)] == [descriptions["absent"]]
        (hit,) = sup.search("blank")
        assert (hit.name, hit.description) == ("plain_blank", descriptions["blank"])
        assert sup.search("server") == []
        provenance = catalog["plain_null"].provenance
        assert (provenance.name, provenance.source) == ("plain_null", "mcp")
        assert (provenance.server_id, provenance.original_name) == ("plain", "null")
