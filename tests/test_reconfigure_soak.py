"""Live reconfiguration, proved end to end: a real HTTP gateway reconfigured 20 times at
random (servers added, removed, replaced, changed in place) over stdio and Streamable
HTTP fixture servers, while SDK clients of both protocol eras call it all along.

The servers that never change never fail a call; no call runs twice or hangs; the
clients' sessions live throughout; every change of the catalog reaches both clients as
``list_changed`` and shows in a fresh ``tools/list``; no server process is left behind;
memory stays flat. Calls to the servers that do change fail, when they fail, only with
the clear errors of a tool that left the catalog. And a task and resource subscriptions
held on an unchanged server outlive a reconfiguration."""

from __future__ import annotations

import gc
import os
import random
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from supervisor import open_supervisor
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._core import ERROR_META
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.gateway._relay import Relay
from supervisor.runtime import SupervisorHandle
from supervisor.server import _tasks as tasks
from supervisor.testing.servers import count_executions, executions_by_call, stdio_params
from supervisor.testing.servers._procs import open_http_fixture
from tests.test_gateway import TOKEN, gateway_over_http, http_client, text
from tests.test_gateway_fidelity import AUTO_APPROVED, NEWS, REFERENCE, WAIT, Updates
from tests.test_gateway_tasks import ADA, follow, made, result_text
from tests.test_reconfigure import alive

# The reference server's resource subscriptions and tasks are deprecated by 2026-07-28.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

SEED = 20261205
RELOADS = 20
#: Calls each caller makes from the start of each reload (bounded: this is not a
#: benchmark, and the machine is shared).
PER_RELOAD = 6
#: Seconds any one call may take. A call to an unchanged server never waits for anything
#: but a busy machine; one to a replaced server waits for the new process to start.
CALL_BOUND = 30.0
#: Seconds for a catalog change to reach a client (an added server starts first).
LIST_BOUND = 60.0
#: Seconds for a whole test: the soak takes 10-15 s on a busy 2-core machine.
WHOLE = 120.0
#: Growth of the test process's RSS (the gateway, its supervisor and the clients) allowed
#: from after the 5th reload to after the 20th. Each reload makes and drops server
#: handles, connections and processes' pipes, and ~60 calls run between measurements:
#: what leaks per reload or per call (a handle, a session, a catalog kept alive) grows
#: with them. The process is ~115 MiB and grows ~2 MiB over those 15 reloads (the call
#: history this test keeps, allocator arenas, calls in flight when measured; tracemalloc
#: shows no per-reload growth), and wanders by a few MiB more on a busy machine; a leak
#: of 1 MiB per reload (15 MiB) would not pass the bound.
RSS_GROWTH = 12 * 2**20

TOOLS = ("echo", "add", "count")
STABLE = ("ss", "hs")  # a stdio and an HTTP server, never touched
POOL = ("d0", "d1", "d2", "h0", "h1")  # the servers the reloads add, remove and change


@attrs.define
class Server:
    """One fixture server of the pool, as the test configures it now."""

    name: str
    runs: Path  # its count file
    url: str | None = None  # an HTTP fixture's (else it runs over stdio)
    generation: int = 0  # in its env (stdio) or a header (HTTP): a change replaces it
    prefix: str = ""
    timeout: float = 60.0
    description: str = ""

    @property
    def label(self) -> str:
        return self.prefix or self.name

    def tools(self) -> set[str]:
        return {f"{self.label}_{tool}" for tool in TOOLS}

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"approve": False, "lazy": False, "timeout": self.timeout}
        if self.url is None:
            command, args = stdio_params("echo", count_file=self.runs)
            entry |= {"command": command, "args": args, "initTimeout": 60}
            entry["env"] = {"SOAK_GENERATION": str(self.generation)}
        else:
            entry |= {"type": "http", "url": self.url, "auth": False}
            entry["headers"] = {"X-Soak-Generation": str(self.generation)}
        if self.prefix:
            entry["prefix"] = self.prefix
        if self.description:
            entry["description"] = self.description
        return entry


def config_of(present: dict[str, Server]) -> dict[str, Any]:
    return {"mcpServers": {name: server.entry() for name, server in present.items()}}


def catalog_of(present: dict[str, Server]) -> set[str]:
    return {name for server in present.values() for name in server.tools()}


def labels(present: dict[str, Server]) -> dict[str, str]:
    """The tool prefix of each server the reloads change: its name."""
    return {s.label: s.name for s in present.values() if s.name not in STABLE}


def step(rng: random.Random, present: dict[str, Server], pool: dict[str, Server]) -> str:
    """Change ``present`` at random, one server: what was done, for the failure messages."""
    absent = [name for name in POOL if name not in present]
    changing = [name for name in present if name not in STABLE]
    ops = (["add"] if absent else []) + (["remove", "replace", "change"] if changing else [])
    op = rng.choice(ops)
    if op == "add":
        name = rng.choice(absent)
        present[name] = pool[name]
        return f"add {name}"
    name = rng.choice(changing)
    server = present[name]
    if op == "remove":
        del present[name]
        return f"remove {name}"
    if op == "replace":
        server.generation += 1
        return f"replace {name} (generation {server.generation})"
    what = rng.choice(("prefix", "timeout", "description"))
    if what == "prefix":  # renames its tools; a prefix is unique to its server
        server.prefix = "" if server.prefix else f"{name}v{rng.randrange(1000)}"
    elif what == "timeout":
        server.timeout = rng.choice((30.0, 45.0, 90.0))
    else:
        server.description = f"soak {rng.randrange(1000)}"
    return f"change {name} {what}"


class Heard:
    """The ``tools/list_changed`` one client heard: how many, and an event for the next."""

    def __init__(self) -> None:
        self.count = 0
        self.arrived = trio.Event()

    def note(self) -> None:
        self.count += 1
        self.arrived.set()
        self.arrived = trio.Event()

    async def handler(self, message: object) -> None:  # a session-based client's
        if isinstance(message, types.ToolListChangedNotification):
            self.note()


class Pace:
    """Lets each caller make :data:`PER_RELOAD` calls from the start of each reload."""

    def __init__(self) -> None:
        self.reload = 0
        self.next = trio.Event()
        self.done = False

    def start_reload(self) -> None:
        self.reload += 1
        self.next.set()
        self.next = trio.Event()

    def finish(self) -> None:
        self.done = True
        self.next.set()

    async def turns(self) -> AsyncIterator[int]:
        """Yield a number for each call a caller may make, until :meth:`finish`."""
        n = reload = used = 0
        while not self.done:
            if self.reload != reload:
                reload, used = self.reload, 0
            if used >= PER_RELOAD:
                await self.next.wait()
                continue
            used += 1
            n += 1
            yield n


@attrs.define
class Tally:
    """What the callers saw."""

    made: Counter[str] = attrs.Factory(Counter)  # echo calls sent, by server
    answered: Counter[str] = attrs.Factory(Counter)  # answered with their own text
    failed: list[str] = attrs.Factory(list)  # calls to unchanged servers that failed
    refused: list[tuple[str, str, str]] = attrs.Factory(list)  # (tool, type, effect)
    unclear: list[str] = attrs.Factory(list)  # failures of another kind
    hung: list[str] = attrs.Factory(list)
    slowest: float = 0.0


def rss() -> int:
    """This process's resident set size, in bytes."""
    gc.collect()
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def call(client: Client, tool: str, text_: str, tally: Tally) -> types.CallToolResult | None:
    """One echo call, timed; ``None`` (noted as hung) past :data:`CALL_BOUND`."""
    start = trio.current_time()
    with trio.move_on_after(CALL_BOUND):
        result = await client.call_tool(tool, {"text": text_})
        tally.slowest = max(tally.slowest, trio.current_time() - start)
        return result
    tally.hung.append(f"{tool}({text_!r})")
    return None


async def call_stable(client: Client, who: str, pace: Pace, tally: Tally) -> None:
    """Call the unchanged servers' tools, in turn, each call's text its own."""
    async for n in pace.turns():
        server = STABLE[n % len(STABLE)]
        said = f"{who}-{server}-{n}"
        tally.made[server] += 1
        result = await call(client, f"{server}_echo", said, tally)
        if result is not None:
            if not result.is_error and text(result) == said:
                tally.answered[server] += 1
            else:
                tally.failed.append(f"{server}_echo({said!r}): {text(result)}")


async def call_changing(
    client: Client, who: str, pace: Pace, tally: Tally, offered: dict[str, str]
) -> None:
    """Call the tools of the servers that the reloads change, as a client whose list may
    be stale sees them: ``offered`` (a tool prefix: its server) has those of the config
    before the reload running and after it, so a call may go to a tool that is gone,
    renamed, being replaced or not connected yet."""
    rng = random.Random(f"{SEED}-{who}")
    async for n in pace.turns():
        if not offered:
            continue
        label, name = rng.choice(sorted(offered.items()))
        tool, said = f"{label}_echo", f"{who}-{name}-{n}"
        tally.made[name] += 1
        try:
            result = await call(client, tool, said, tally)
        except MCPError as exc:  # the gateway knows no such tool (any more, or yet)
            if exc.code == types.INVALID_PARAMS and "no tool named" in exc.error.message:
                tally.refused.append((tool, "unknown tool", "not executed"))
            else:
                tally.unclear.append(f"{tool}: error {exc.code}: {exc.error.message}")
            continue
        if result is None:
            continue
        if not result.is_error:
            assert text(result) == said, (tool, said, text(result))
            tally.answered[name] += 1
            continue
        error = (result.meta or {}).get(ERROR_META, {})
        kind, effect = error.get("type", "?"), error.get("effect", "?")
        clear = kind == "UnknownTool" or (
            kind == "ServerUnavailable" and "removed from the configuration" in text(result)
        )
        if clear:
            tally.refused.append((tool, kind, effect))
        else:
            tally.unclear.append(f"{tool}: {kind} ({effect}): {text(result)}")


async def listen_for_tools(
    client: Client, heard: Heard, ended: list[str], *, task_status: Any
) -> None:
    """A 2026-07-28 client's listen stream of tool list changes, held throughout."""
    async with client.listen(tools_list_changed=True) as events:
        task_status.started()
        async for _ in events:
            heard.note()
    ended.append("the 2026-07-28 client's listen stream ended")


async def shown(client: Client, heard: Heard, since: int, expected: set[str]) -> None:
    """Return once ``client`` heard a ``tools/list_changed`` after its ``since``-th one
    and a fresh ``tools/list`` (made after it) shows ``expected``."""
    with trio.fail_after(LIST_BOUND):
        while True:
            arrived = heard.arrived
            if heard.count > since:
                since = heard.count
                if await listed(client) == expected:
                    return
                continue
            await arrived.wait()


async def listed(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}


def pids(sup: SupervisorHandle) -> set[int]:
    return {status.pid for status in sup.status().values() if status.pid is not None}


async def note_spawned(sup: SupervisorHandle, into: set[int], *, task_status: Any) -> None:
    async with sup.subscribe("mcp.local.spawned") as events:
        task_status.started()
        async for event in events:
            into.add(event.pid)  # type: ignore[attr-defined]


@asynccontextmanager
async def http_fixtures(tmp_path: Path, names: list[str]) -> AsyncIterator[dict[str, str]]:
    """An HTTP echo fixture process per name, counting into ``runs-NAME``: their URLs."""
    async with AsyncExitStack() as stack:
        urls: dict[str, str] = {}
        for name in names:
            fixture = open_http_fixture("echo", count_file=tmp_path / f"runs-{name}")
            urls[name] = (await stack.enter_async_context(fixture)).url
        yield urls


@asynccontextmanager
async def soak_gateway(
    config: dict[str, Any], history: CallHistory
) -> AsyncIterator[tuple[SupervisorHandle, HttpGatewayInfo]]:
    """``gateway_over_http``'s, its supervisor recording every call (``history``): each
    call's id goes to its server, whose count file then says how often each call ran."""
    async with (
        open_supervisor(config, history=history) as sup,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup)
        await nursery.start(gateway.run)
        await sup.tools()
        await gateway.announce()
        info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        yield sup, info
        nursery.cancel_scope.cancel()


async def test_twenty_random_reconfigurations_under_calls_of_both_eras(tmp_path: Path) -> None:
    """20 random reloads of a running gateway (seeded: the seed is in every failure
    message) under calls from a 2026-07-28 client and a 2025-11-25 one."""
    seed = f"seed {SEED}"
    rng = random.Random(SEED)
    with trio.fail_after(WHOLE):
        http_names = [name for name in (*STABLE, *POOL) if name.startswith("h")]
        async with http_fixtures(tmp_path, http_names) as urls:
            pool = {
                name: Server(name, tmp_path / f"runs-{name}", urls.get(name))
                for name in (*STABLE, *POOL)
            }
            present = {name: pool[name] for name in (*STABLE, "d0", "h0")}
            offered = labels(present)
            spawned: set[int] = set()
            ended: list[str] = []
            modern_heard, legacy_heard = Heard(), Heard()
            pace, tally, history = Pace(), Tally(), CallHistory()
            done: list[str] = []
            memory: dict[int, int] = {}
            async with (
                soak_gateway(config_of(present), history) as (sup, info),
                trio.open_nursery() as watching,
                http_client(info.url) as modern,
                http_client(
                    info.url, mode="legacy", message_handler=legacy_heard.handler
                ) as legacy,
            ):
                await watching.start(note_spawned, sup, spawned)
                await watching.start(listen_for_tools, modern, modern_heard, ended)
                spawned |= pids(sup)
                untouched = {name: sup.status()[name].pid for name in STABLE}
                assert modern.protocol_version == "2026-07-28"
                assert legacy.protocol_version == "2025-11-25"
                legacy_session = legacy.session
                assert await listed(modern) == await listed(legacy) == catalog_of(present)

                async with trio.open_nursery() as calling:
                    for who, client in (("modern", modern), ("legacy", legacy)):
                        calling.start_soon(call_stable, client, who, pace, tally)
                        calling.start_soon(call_changing, client, who, pace, tally, offered)
                    for n in range(1, RELOADS + 1):
                        before = catalog_of(present)
                        done.append(step(rng, present, pool))
                        expected = catalog_of(present)
                        offered.update(labels(present))
                        since = (modern_heard.count, legacy_heard.count)
                        pace.start_reload()
                        change = await sup.reconfigure(config_of(present))
                        assert not change.empty, (seed, done)
                        spawned |= pids(sup)
                        if expected != before:
                            for client, heard, count in (
                                (modern, modern_heard, since[0]),
                                (legacy, legacy_heard, since[1]),
                            ):
                                try:
                                    await shown(client, heard, count, expected)
                                except trio.TooSlowError:
                                    raise AssertionError(
                                        f"{seed}: reload {n} ({done[-1]}) changed the catalog;"
                                        f" a client was not told, or its list is "
                                        f"{sorted(await listed(client))}, not {sorted(expected)}"
                                        f" (reloads: {done})"
                                    ) from None
                        # What a stale client may still call: this config's and the last.
                        offered.clear()
                        offered.update(labels(present))
                        if n == 5:
                            memory[n] = rss()
                    memory[RELOADS] = rss()
                    pace.finish()
                spawned |= pids(sup)

                # Every session answers still; the lists are as configured; the unchanged
                # servers were not touched; nothing but what runs is left running.
                assert ended == [], (seed, done)
                assert legacy.session is legacy_session
                for who, client in (("modern", modern), ("legacy", legacy)):
                    for name in STABLE:
                        said = f"{who}-{name}-last"
                        tally.made[name] += 1
                        assert text(await client.call_tool(f"{name}_echo", {"text": said})) == said
                        tally.answered[name] += 1
                    assert await listed(client) == catalog_of(present), (seed, done)
                assert {name: sup.status()[name].pid for name in STABLE} == untouched, seed
                assert all(sup.status()[name].restarts == 0 for name in STABLE), seed
                gone = spawned - pids(sup)
                assert [pid for pid in gone if alive(pid)] == [], (seed, done)
                watching.cancel_scope.cancel()
        # Out of the gateway: every process the supervisor ran is gone.
        assert [pid for pid in spawned if alive(pid)] == [], f"{seed}: processes left behind"

    ran = {name: count_executions(pool[name].runs)["echo"] for name in pool}
    report = f"{seed}; reloads: {done}; calls: {dict(tally.made)}; ran: {ran}"
    assert {line.split()[0] for line in done} == {"add", "remove", "replace", "change"}, report
    assert tally.hung == [], report
    assert tally.slowest < CALL_BOUND, report
    assert tally.failed == [], report  # none failed of the unchanged servers'
    assert tally.unclear == [], report  # the others' failures are all clear ones
    assert all(effect == "not executed" for *_, effect in tally.refused), (report, tally.refused)
    for name in STABLE:  # every call answered, and run once
        assert tally.answered[name] == tally.made[name] == ran[name] > RELOADS, report
    for name in POOL:  # what was answered ran once; what was refused did not run
        assert ran[name] == tally.answered[name], report
    # By call id: each call the supervisor sent ran once if answered, never if refused.
    executed: Counter[str] = Counter()
    for server in pool.values():
        executed += executions_by_call(server.runs)
    outcomes = {record.call_id: record.outcome for record in history.calls}
    assert set(outcomes.values()) <= {"ok", "fail"}, report  # none lost or indefinite
    assert {call_id for call_id, times in executed.items() if times != 1} == set(), report
    assert set(executed) == {call_id for call_id, o in outcomes.items() if o == "ok"}, report
    growth = memory[RELOADS] - memory[5]
    assert growth < RSS_GROWTH, f"{seed}: RSS grew {growth / 2**20:.1f} MiB over 15 reloads"
    print(
        f"soak: {report}; refused: {Counter(kind for _, kind, _ in tally.refused)}; "
        f"slowest call {tally.slowest:.2f} s; RSS {memory[5] / 2**20:.1f} -> "
        f"{memory[RELOADS] / 2**20:.1f} MiB"
    )


async def in_flight(runs: Path, tool: str, count: int) -> None:
    """Return once the fixture counting into ``runs`` has executed ``tool`` ``count``
    times (another process's file: nothing to wait on but the file)."""
    while count_executions(runs)[tool] < count:  # noqa: ASYNC110
        await trio.sleep(0.02)


async def test_a_call_in_flight_through_the_gateway_is_answered_when_its_tool_leaves(
    tmp_path: Path,
) -> None:
    """A call already running when a reconfiguration renames its tool (a new prefix),
    or removes its server (which finishes its calls in flight), is answered with its
    result — not refused as a tool the gateway does not know, which would tell the
    client it did not run and invite it to run it again."""
    runs = tmp_path / "runs"
    command, args = stdio_params("slow", count_file=runs)
    slow = {"command": command, "args": args, "approve": False, "lazy": False}
    config = {"mcpServers": {"s": slow}}
    with trio.fail_after(WHOLE):
        async with (
            gateway_over_http(config) as (sup, _, info),
            http_client(info.url, mode="legacy") as client,
        ):
            answers: list[str] = []

            async def hold(tool: str) -> None:
                answers.append(text(await client.call_tool(tool, {"seconds": 1.0})))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold, "s_hold")
                await in_flight(runs, "hold", 1)
                await sup.reconfigure({"mcpServers": {"s": {**slow, "prefix": "slow"}}})  # type: ignore[attr-defined]
            assert answers == ["held 1.0"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold, "slow_hold")
                await in_flight(runs, "hold", 2)
                await sup.reconfigure({"mcpServers": {}})  # type: ignore[attr-defined]
            assert answers == ["held 1.0", "held 1.0"]
    assert count_executions(runs)["hold"] == 2


async def test_a_task_and_subscriptions_on_an_unchanged_server_outlive_a_reconfiguration(
    tmp_path: Path,
) -> None:
    """Held on the reference server, which the reconfiguration leaves alone while it
    removes, replaces, renames and adds others: a task waiting for its client's answer
    (2026-07-28) is followed to its end after it, and a resource subscription of either
    era (``resources/subscribe``, a listen stream) still brings the resource's update."""
    relay = Relay()
    ref = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    command, args = stdio_params("echo")
    echo = {"command": command, "args": args, "approve": False, "lazy": False}
    before = {"ref": ref, "gone": echo, "swapped": echo, "tuned": echo}
    after = {"ref": ref, "swapped": {**echo, "env": {"N": "1"}}, "tuned": {**echo, "prefix": "t"}}
    updates = Updates()
    with trio.fail_after(WHOLE):
        async with (
            open_supervisor({"mcpServers": before}, **relay.client_options()) as sup,  # type: ignore[arg-type]
            trio.open_nursery() as nursery,
        ):
            gateway = Gateway(sup, relay=relay)
            await nursery.start(gateway.run)
            await sup.tools()
            info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
            async with (
                http_client(info.url, extensions=[tasks.CLIENT]) as modern,
                http_client(info.url, mode="legacy", message_handler=updates.handler) as legacy,
            ):
                created = await made(modern, "ref_job", {"ask": True})
                await legacy.subscribe_resource(NEWS)
                async with modern.listen(resource_subscriptions=[NEWS]) as subscription:
                    ref_pid = sup.status()["ref"].pid
                    change = await sup.reconfigure({"mcpServers": {**after, "new": echo}})
                    assert (change.added, change.removed) == (("new",), ("gone",))
                    assert set(change.replaced) == {"swapped"} and set(change.changed) == {"tuned"}
                    assert sup.status()["ref"].pid == ref_pid  # not touched

                    await legacy.call_tool("ref_touch", {"uri": NEWS})
                    with trio.fail_after(WAIT):
                        await updates.arrived.wait()
                        event = await subscription.__anext__()
                assert isinstance(event, ResourceUpdated) and event.uri == NEWS
                assert updates.uris == [NEWS]
                end = await follow(modern, created.task_id, ADA)
            nursery.cancel_scope.cancel()
    assert end.status == "completed" and result_text(end) == "job 1 done for Ada"
