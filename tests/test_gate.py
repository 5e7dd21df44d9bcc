"""One gate for every tool call, names parsed by the one naming policy, and the tree's
own actors (bus, registry) restarted without touching servers or calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio

from supervisor import (
    ApprovalDenied,
    ApprovalRequired,
    ToolArgumentsInvalid,
    ToolError,
    UnknownTool,
    open_supervisor,
)
from supervisor.calls._gate import Gate
from supervisor.events._bus import Subscription
from supervisor.events._catalog import Event, ToolsRegistered
from supervisor.monitor._metrics import status_document
from supervisor.registry import NamingPolicy
from supervisor.registry import _live as registry_live
from supervisor.registry._live import Registry
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, executions_by_call, stdio_params
from supervisor.tools import ApprovalRequest, parameters
from supervisor.tools._observer import Call, CallWatch
from supervisor.tools._request import ToolCall

from .probes import until


def rich(count_file: Path, **fields: object) -> dict[str, object]:
    command, args = stdio_params("rich", count_file=count_file)
    return {"command": command, "args": args, "initTimeout": 120, **fields}


def never_started(**fields: object) -> dict[str, object]:
    return {"command": "/nonexistent/never-started", **fields}


# -- names: formed and parsed by the one policy ---------------------------------------------


def test_the_policy_parses_names_it_would_form() -> None:
    """parse() undoes affixes() for the template in use; the longest match wins, and two
    unprefixed servers are ambiguous."""
    claude = NamingPolicy("mcp__{server}__{tool}")
    servers = [("github", "github"), ("git", "git")]
    assert claude.parse("mcp__github__create_issue", servers) == ("github", "create_issue")
    assert claude.parse("mcp__git__log", servers) == ("git", "log")
    assert claude.parse("github_create_issue", servers) is None
    plain = NamingPolicy()
    assert plain.parse("github_create_issue", servers) == ("github", "create_issue")
    assert plain.parse("git_hub_x", [("git", "git"), ("git_hub", "git_hub")]) == ("git_hub", "x")
    assert plain.parse("anything", [("a", "")]) == ("a", "anything")
    assert plain.parse("anything", [("a", ""), ("b", "")]) is None


async def test_resolve_follows_the_name_template_for_a_lazy_server(tmp_path: Path) -> None:
    """With toolNames.template mcp__{server}__{tool}, a server never connected is found by
    that template, not by '<prefix>_'; and the call goes through under that name."""
    runs = tmp_path / "runs"
    config = {
        "mcpServers": {"github": never_started(), "notes": rich(runs, approve=False)},
        "supervisor": {"toolNames": {"template": "mcp__{server}__{tool}"}},
    }
    async with open_supervisor(config) as sup:
        assert sup.resolve("mcp__github__create_issue") == ("github", "create_issue")
        with pytest.raises(UnknownTool):
            sup.resolve("github_create_issue")
        assert (await sup.call("mcp__notes__echo", {"text": "hi"})).text == "hi"
        with pytest.raises(UnknownTool):
            await sup.call("notes_echo", {"text": "hi"})


# -- one gate -------------------------------------------------------------------------------------


async def test_a_servers_view_cannot_call_around_the_gate(tmp_path: Path) -> None:
    """handle.server(name).call_tool() validates and applies the approval policy exactly
    like handle.call(); nothing is sent when either refuses."""
    runs = tmp_path / "runs"
    config = {"mcpServers": {"r": rich(runs, autoApprove=["echo"])}}
    async with open_supervisor(config) as sup:
        view = sup.server("r")
        assert not hasattr(view, "address") and not hasattr(view, "current")
        assert (await view.call_tool("echo", {"text": "ok"})).text == "ok"
        with pytest.raises(ApprovalRequired):
            await view.call_tool("add", {"a": 1, "b": 2})
        with pytest.raises(ToolArgumentsInvalid):
            await view.call_tool("echo", {"text": 3})
    assert count_executions(runs) == {"echo": 1}


class Watcher:
    """A call observer of its own (what ``open_supervisor(history=...)`` takes): it names
    each call, writes down every step it hears, and refuses calls of ``refused``."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.steps: list[tuple[str, ...]] = []
        self.events: list[object] = []

    def start(self) -> None:
        self.steps.append(("start",))

    def tap(self, publish: Callable[[Event], None]) -> Callable[[Event], None]:
        def keep(event: Event) -> None:
            self.events.append(event)
            publish(event)

        return keep

    def watch(self, call: Call) -> CallWatch:
        call.call_id = f"mine-{sum(step[0] == 'watch' for step in self.steps) + 1}"
        self.steps.append(("watch", call.tool, call.call_id))
        watcher = self

        class Steps(CallWatch):
            def admit(self, call: Call) -> None:
                watcher.steps.append(("admit", call.tool))
                if call.tool == watcher.refused:
                    raise RuntimeError("refused by the observer")

            def resolved(self, call: Call) -> None:
                watcher.steps.append(("resolved", str(call.server), str(call.original)))

            def sending(self, call: Call, timeout: float) -> None:
                watcher.steps.append(
                    ("sending", call.tool, str(call.approval.answer), str(timeout))
                )

            def answered(self, call: Call, result: object) -> None:
                watcher.steps.append(("answered", call.tool, str(call.outcome)))

            def failed(self, call: Call, exc: BaseException) -> None:
                watcher.steps.append(("failed", call.tool, str(call.outcome), type(exc).__name__))

        return Steps()


async def test_a_call_observer_hears_each_step_of_each_call_once(tmp_path: Path) -> None:
    """An observer given as ``history`` watches every call from its invocation: admit,
    resolved, sending, then one ending — a refusal in admit fails the call before it
    is resolved, and nothing reaches the server; the id it gives goes in ``_meta``."""
    runs = tmp_path / "runs"
    config = {"mcpServers": {"r": rich(runs, autoApprove=["echo"], timeout=7)}}
    watcher = Watcher(refused="r_add")
    async with open_supervisor(config, history=watcher) as sup:
        assert (await sup.call("r_echo", {"text": "hi"})).text == "hi"
        with pytest.raises(RuntimeError, match="refused by the observer"):
            await sup.call("r_add", {"a": 1, "b": 2})
        with pytest.raises(UnknownTool):
            await sup.call("r_nope")
    assert watcher.steps == [
        ("start",),
        ("watch", "r_echo", "mine-1"),
        ("admit", "r_echo"),
        ("resolved", "r", "echo"),  # by the naming template: the server is not connected yet
        ("resolved", "r", "echo"),  # again once it is, by what it listed
        ("sending", "r_echo", "not required", "7.0"),
        ("answered", "r_echo", "ok"),
        ("watch", "r_add", "mine-2"),
        ("admit", "r_add"),
        ("failed", "r_add", "failed", "RuntimeError"),
        ("watch", "r_nope", "mine-3"),
        ("admit", "r_nope"),
        ("failed", "r_nope", "unknown_tool", "UnknownTool"),
    ]
    assert watcher.events  # it saw the run's events too
    assert executions_by_call(runs) == {"mine-1": 1}


def _tool(destructive: bool) -> types.Tool:
    hints = types.ToolAnnotations(destructive_hint=destructive)
    return types.Tool(name="tidy", input_schema={"type": "object"}, annotations=hints)


async def test_approval_reason_is_what_a_call_decides(tmp_path: Path) -> None:
    """handle.approval_reason(name) is, for every tool, the reason the call's approval
    callback is asked with — or ``None`` exactly when the call goes ahead unasked; an
    unknown name is UnknownTool."""
    runs = tmp_path / "runs"
    config = {
        "mcpServers": {
            "r": rich(runs, approve=["add_*"], autoApprove=["echo", "fail", "delete_*", "wipe"])
        }
    }
    asked: dict[str, str] = {}

    async def refuse(request: ApprovalRequest) -> bool:
        asked[request.tool] = request.reason
        return False

    sample = {"string": "x", "integer": 1}
    async with open_supervisor(config, approve=refuse) as sup:
        catalog = await sup.tools()
        expected = {name: sup.approval_reason(name) for name in catalog}
        for entry in catalog.values():
            arguments = {p.name: sample[p.type] for p in parameters(entry.input_schema)}
            try:
                await sup.call(entry.name, arguments)
            except (ApprovalDenied, ToolError):
                pass
        with pytest.raises(UnknownTool):
            sup.approval_reason("r_nope")
    assert asked == {name: reason for name, reason in expected.items() if reason is not None}
    assert expected["r_echo"] is None and expected["r_add"] == "not auto-approved"
    assert expected["r_add_note"] == "listed in approve"
    assert expected["r_delete_note"] == "destructive name"  # a glob does not cover it
    assert expected["r_wipe"] is None  # named exactly: the user reviewed that one


def test_a_relisted_destructive_tool_is_decided_again() -> None:
    """The approval decision is cached per tool definition: a tool listed again with
    destructiveHint needs approval, although the old definition did not."""
    config_entry = {"command": "unused", "autoApprove": ["ti*"]}
    from supervisor.config import load_config

    config = load_config({"mcpServers": {"s": config_entry}}).servers["s"]
    server = ServerHandle(config, publish=lambda event: None)
    gate = Gate({"s": server}, Registry(["s"], publish=lambda event: None))
    harmless = _tool(destructive=False)
    assert gate.approval_reason(server, "tidy", harmless, "s_tidy") is None
    assert gate.approval_reason(server, "tidy", harmless, "s_tidy") is None  # cached
    relisted = _tool(destructive=True)
    assert gate.approval_reason(server, "tidy", relisted, "s_tidy") is not None


# -- the tree's own actors ----------------------------------------------------------------


async def next_of(events: Subscription, kind: str) -> Event:
    """The next event of ``kind`` (earlier ones of other kinds are skipped)."""
    with trio.fail_after(120):
        async for event in events:
            if event.kind == kind:
                return event
    raise AssertionError(f"the subscription ended before a {kind} event")


async def test_approve_and_auto_approve_match_the_merged_name_too() -> None:
    """As documented, a policy entry matches the tool's own name or its catalog name:
    ``r_image`` in autoApprove lets ``r_image`` go ahead; ``r_audio`` in approve asks."""
    config = {"mcpServers": {"r": never_started(autoApprove=["r_image"], approve=["r_aud*"])}}
    image = types.Tool(name="image", input_schema={"type": "object"})
    audio = types.Tool(name="audio", input_schema={"type": "object"})
    async with open_supervisor(config) as sup:
        gate = sup._gate
        server = sup._servers["r"]
        assert gate.approval_reason(server, "image", image, "r_image") is None
        assert gate.approval_reason(server, "audio", audio, "r_audio") == "listed in approve"
        assert gate.approval_reason(server, "image", image, "x_image") == "not auto-approved"


async def test_killing_the_registry_and_the_bus_mid_run_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge that raises crashes the registry and a fan-out that raises crashes the
    bus: each is restarted (supervisor.child.restarted names it), calls keep working
    meanwhile, the catalog is rebuilt, and subscribers keep receiving."""
    runs = tmp_path / "runs"
    config = {"mcpServers": {"r": rich(runs, approve=False, lazy=False)}}
    async with open_supervisor(config) as sup:
        async with sup.subscribe("supervisor.*", "tools.*") as events:
            await until(lambda: "r_echo" in sup.catalog, 120)
            merge = registry_live.merge
            broken = {"merge": 1}

            def failing_merge(*args: object, **kwargs: object) -> object:
                if broken["merge"]:
                    broken["merge"] -= 1
                    raise RuntimeError("a bug in merging")
                return merge(*args, **kwargs)  # type: ignore[arg-type]

            monkeypatch.setattr(registry_live, "merge", failing_merge)
            sup._servers["r"].changed()  # a report: the actor merges, and crashes
            restarted = await next_of(events, "supervisor.child.restarted")
            assert restarted.child == "registry"
            assert sup.registry_statistics().failures == 1
            snapshot = await sup._registry.settled()  # the new incarnation rebuilt it
            assert "r_echo" in snapshot.current
            assert (await sup.call("r_echo", {"text": "during"})).text == "during"

            fan_out = sup.bus._fan_out
            broken["fan_out"] = 1

            def failing_fan_out(event: object) -> None:
                if broken["fan_out"] and getattr(event, "kind", "") == "tools.registered":
                    broken["fan_out"] -= 1
                    raise RuntimeError("a bug in fan-out")
                fan_out(event)  # type: ignore[arg-type]

            monkeypatch.setattr(sup.bus, "_fan_out", failing_fan_out)
            sup.bus.publish(ToolsRegistered(server="r", names=["lost"]))
            dropped = await next_of(events, "bus.dropped")
            assert dropped.count == 1
            again = await next_of(events, "supervisor.child.restarted")
            assert again.child == "bus"
            assert (await sup.call("r_echo", {"text": "after"})).text == "after"
            children = {c.id: c for c in sup.statistics().children}
            assert children["bus"].restarts == 1 and children["registry"].restarts == 1
            assert children["servers"].restarts == 0
            assert "RuntimeError: a bug in fan-out" in (children["bus"].last_exit or "")
            document = status_document(sup.status(), actors=sup.statistics())
            actors = {a["actor"]: a for a in document["actors"]}  # type: ignore[union-attr]
            assert actors["registry"]["restarts"] == 1 and actors["registry"]["state"] == "running"
            assert "a bug in merging" in actors["registry"]["last_exit"]
    # Subscriptions end when the supervisor does.
    assert sup.bus.closed
    assert count_executions(runs) == {"echo": 2}


async def test_every_subscription_ends_with_the_supervisor() -> None:
    """When open_supervisor's block ends, iterating a subscription ends too."""
    async with open_supervisor({"mcpServers": {"x": never_started()}}) as sup:
        sub = sup.subscribe("*")
        sub.__enter__()
    with trio.fail_after(30):
        rest = [event async for event in sub]
    assert all(e.kind != "bus.dropped" for e in rest)


async def test_a_call_right_after_a_listing_waits_for_the_registrys_merge() -> None:
    """A server that has just listed its tools is known to the gate: the call waits for
    the registry's pending merge rather than failing with UnknownTool."""
    from supervisor.config import load_config
    from supervisor.server import ServerStatus

    config = load_config({"mcpServers": {"s": {"command": "unused", "approve": False}}})
    registry = Registry(["s"], publish=lambda event: None)
    server = ServerHandle(config.servers["s"], publish=lambda e: None, report=registry.report)
    sent: list[str] = []

    async def call(
        request: object, tool: str, arguments: object, call_id: object = None
    ) -> types.CallToolResult:
        sent.append(tool)
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    server.call = call  # type: ignore[method-assign]
    gate = Gate({"s": server}, registry)
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.incarnation().run)
        server.state.tools_listed([types.Tool(name="echo", input_schema={"type": "object"})])
        server.health.status = ServerStatus.CONNECTED
        server.changed()
        assert registry.pending and "s_echo" not in registry.snapshot.named
        assert (await gate.call(ToolCall("s_echo"))).text == "ok"
        with pytest.raises(UnknownTool):
            await gate.call(ToolCall("s_nothing"))  # nothing pending: no wait, no send
        nursery.cancel_scope.cancel()
    assert sent == ["echo"]
