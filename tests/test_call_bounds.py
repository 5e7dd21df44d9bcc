"""Bounds on callers: a server's ``maxConcurrentCalls`` and ``rateLimit``, and a team
gateway's per-caller ``rateLimit`` in its policy (docs/servers.md, "Bounds on callers";
docs/gateway.md, "Rate limits").

Real servers: a fixture server that counts its executions (a call refused must never
reach it) and reports the most calls it had in flight at once; the gateway's caller is a
real MCP client over HTTP with a token of the OAuth fixture's, as in test_gateway_team.
A token bucket's refill runs on trio's mock clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest
import trio
import trio.testing

from supervisor import open_supervisor
from supervisor.config import load_config
from supervisor.config._apps import with_apps
from supervisor.config._diff import compare
from supervisor.config._model import PolicyRule
from supervisor.errors import CallQueueTimeout, ConfigError, RateLimited
from supervisor.gateway._core import ERROR_META
from supervisor.gateway._policy import Policy
from supervisor.gateway._resource import Caller
from supervisor.monitor import prometheus_text
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, make_server, stdio_params
from supervisor.tools._limits import CallSlots, Rate, TokenBucket, parse_rate
from supervisor.tools._outcome import classify
from tests.test_gateway_team import client_of, team, token_for


def fixture(kind: str, count_file: Path, **fields: Any) -> dict[str, Any]:
    command, args = stdio_params(kind, count_file=count_file)  # type: ignore[arg-type]
    return {"command": command, "args": args, "autoApprove": True, **fields}


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- the config -----------------------------------------------------------------------------


def test_the_fields_are_read_and_a_wrong_one_is_named_by_its_path() -> None:
    config = load_config(
        {
            "mcpServers": {
                "a": {"command": "a-mcp", "maxConcurrentCalls": 4, "rateLimit": "60/min"},
                "b": {"url": "https://b.example.com/mcp", "rateLimit": " 5 / 10s "},
            }
        }
    )
    a, b = config.servers["a"], config.servers["b"]
    assert (a.max_concurrent_calls, a.rate_limit) == (4, "60/min")
    assert (b.max_concurrent_calls, parse_rate(b.rate_limit)) == (None, Rate(5, 10.0, "5 / 10s"))
    with pytest.raises(ConfigError) as caught:
        load_config(
            {
                "mcpServers": {
                    "a": {"command": "a-mcp", "maxConcurrentCalls": 0, "rateLimit": "fast"},
                    "b": {"command": "b-mcp", "rateLimit": "0/s", "maxConcurrentCalls": "4"},
                },
                "supervisor": {
                    "gateway": {
                        "auth": {
                            "issuer": "https://login.example.com",
                            "resource": "https://mcp.example.com/mcp",
                        },
                        "policy": [{"groups": ["eng"]}, {"rateLimit": "10/fortnight"}],
                    }
                },
            }
        )
    paths = {error.path for error in caught.value.errors}
    assert paths == {
        "mcpServers.a.maxConcurrentCalls",
        "mcpServers.a.rateLimit",
        "mcpServers.b.rateLimit",
        "mcpServers.b.maxConcurrentCalls",
        "supervisor.gateway.policy[1].rateLimit",
    }, caught.value
    said = {error.path: error.message for error in caught.value.errors}
    assert "a period of s, min, h or d" in said["mcpServers.a.rateLimit"]
    assert "between 1 and" in said["mcpServers.b.rateLimit"]


async def test_a_reload_changes_the_bounds_in_place() -> None:
    """Both fields are applied in place: the same rate keeps what was spent, a new one
    starts full; the bound's slots follow a new limit (calls in flight keep theirs)."""
    entries = [
        {"maxConcurrentCalls": 2, "rateLimit": "5/s"},
        {"maxConcurrentCalls": 3, "rateLimit": "5/s"},
        {"rateLimit": "1/s"},
        {},
    ]
    configs = [
        load_config({"mcpServers": {"s": {"command": "s-mcp", **entry}}}).servers["s"]
        for entry in entries
    ]
    assert compare(
        load_config({"mcpServers": {"s": {"command": "s-mcp", **entries[0]}}}),
        load_config({"mcpServers": {"s": {"command": "s-mcp", **entries[2]}}}),
    ).changed == {"s": ("max_concurrent_calls", "rate_limit")}
    server = ServerHandle(configs[0], publish=lambda event: None)
    bounds = server.admission
    slots, bucket = bounds.slots, bounds.bucket
    assert slots is not None and bucket is not None
    assert (slots.limit, bucket.rate.text) == (2, "5/s")
    server.reconfigured(configs[1])
    assert (bounds.slots, slots.limit, bounds.bucket) == (slots, 3, bucket)
    server.reconfigured(configs[2])
    assert bounds.slots is None and bounds.bucket is not bucket
    assert bounds.bucket is not None and bounds.bucket.rate.text == "1/s"
    server.reconfigured(configs[3])
    assert (bounds.slots, bounds.bucket) == (None, None)


def test_a_token_bucket_spends_a_burst_then_refills_steadily() -> None:
    bucket = TokenBucket(parse_rate("3/s"), now=0.0)
    for _ in range(3):
        assert bucket.wait(0.0) == 0.0
        bucket.take(0.0)
    assert bucket.wait(0.0) == pytest.approx(1 / 3)
    assert bucket.wait(0.2) == pytest.approx(1 / 3 - 0.2)
    assert bucket.wait(1 / 3 + 1e-9) == 0.0  # one call a third of a second
    bucket.take(1 / 3 + 1e-9)
    assert bucket.wait(0.5) > 0
    assert bucket.full(100.0) and bucket.wait(100.0) == 0.0  # full, never more than full
    for _ in range(3):
        bucket.take(100.0)
    assert bucket.wait(100.0) > 0


async def test_call_slots_let_waiters_in_by_order_and_follow_a_new_limit() -> None:
    slots = CallSlots(1)
    order: list[int] = []
    await slots.acquire()
    async with trio.open_nursery() as nursery:

        async def wait(n: int) -> None:
            await slots.acquire()
            order.append(n)

        for n in range(3):
            nursery.start_soon(wait, n)
            await trio.testing.wait_all_tasks_blocked()
        assert (slots.in_flight, slots.waiting, order) == (1, 3, [])
        slots.release()  # handed to the first waiter
        await trio.testing.wait_all_tasks_blocked()
        assert (slots.in_flight, slots.waiting, order) == (1, 2, [0])
        slots.set_limit(3)  # raised: both others in at once
        await trio.testing.wait_all_tasks_blocked()
        # (both let in at once: trio runs the woken in any order)
        assert (slots.in_flight, slots.waiting, sorted(order), slots.peak) == (3, 0, [0, 1, 2], 3)
    slots.set_limit(1)  # lowered: it takes effect as calls end
    for _ in range(3):
        slots.release()
    assert slots.in_flight == 0


# -- the library: a server's own bounds --------------------------------------------------


async def test_a_burst_over_a_servers_rate_limit_is_refused_unsent_then_refills(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    counts, audit = tmp_path / "count", tmp_path / "audit"
    config = load_config({"mcpServers": {}, "supervisor": {"audit": {"path": str(audit)}}})
    config = with_apps(config, {"calc": make_server("echo", count_file=counts)})
    calc = msgspec.structs.replace(config.servers["calc"], rate_limit="2/min")
    config = msgspec.structs.replace(config, servers={"calc": calc})
    async with open_supervisor(config) as sup:
        outcomes: list[object] = []

        async def add(n: int) -> None:
            try:
                outcomes.append((await sup.call("calc_add", {"a": n, "b": 1})).text)
            except RateLimited as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(add, n)
        refused = [o for o in outcomes if isinstance(o, RateLimited)]
        assert len(refused) == 3 and len(outcomes) == 5
        assert count_executions(counts) == {"add": 2}  # none of the excess reached it
        first = refused[0]
        said = (first.server, first.tool, first.limit, first.by)
        assert said == ("calc", "calc_add", "2/min", "server")
        assert 0 < first.retry_after <= 30  # one call every 30 s
        assert classify(first, sent=False)[0] == "fail"  # not executed
        metrics = sup.metrics()["calc"]
        assert (metrics.calls_rate_limited, metrics.calls_caller_limited) == (3, 0)
        text = prometheus_text(sup.metrics())
        assert 'mcp_supervisor_server_calls_rate_limited_total{server="calc",by="server"} 3' in text

        await trio.sleep(max(r.retry_after for r in refused))  # one call's worth refilled
        assert (await sup.call("calc_add", {"a": 1, "b": 1})).text == "2"
        with pytest.raises(RateLimited):
            await sup.call("calc_add", {"a": 1, "b": 1})
        await trio.sleep(60.0)  # full again: two more
        for _ in range(2):
            await sup.call("calc_echo", {"text": "x"})
    assert count_executions(counts) == {"add": 3, "echo": 2}
    outcomes_logged = [line["outcome"] for line in audit_lines(audit)]
    assert outcomes_logged.count("rate_limited") == 4 and outcomes_logged.count("ok") == 5
    limited = next(line for line in audit_lines(audit) if line["outcome"] == "rate_limited")
    assert limited["error"]["type"] == "RateLimited" and limited["server"] == "calc"


async def test_concurrency_never_goes_above_the_servers_bound(tmp_path: Path) -> None:
    counts = tmp_path / "count"
    config = {"mcpServers": {"slow": fixture("slow", counts, maxConcurrentCalls=2)}}
    async with open_supervisor(config) as sup:
        await sup.call("slow_echo", {"text": "connected"})
        peaks: list[int] = []
        waiting: list[int] = []

        async def busy() -> None:
            result = await sup.call("slow_busy", {"seconds": 0.3})
            peaks.append(int(result.text))

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(busy)
            await trio.testing.wait_all_tasks_blocked()  # each sent, or waiting its turn
            waiting.append(sup.metrics()["slow"].calls_waiting)
        assert len(peaks) == 6 and max(peaks) <= 2
        assert (await sup.call("slow_peak", {})).text == "2"  # the bound, reached, never passed
        assert waiting == [4]  # two in flight, the others waiting their turn
        assert sup.metrics()["slow"].calls_waiting == 0
    assert count_executions(counts) == {"echo": 1, "busy": 6}


async def test_a_call_whose_deadline_passes_while_it_waits_is_not_executed(
    tmp_path: Path,
) -> None:
    counts = tmp_path / "count"
    config = {"mcpServers": {"slow": fixture("slow", counts, maxConcurrentCalls=1)}}
    async with open_supervisor(config) as sup, trio.open_nursery() as nursery:
        await sup.call("slow_echo", {"text": "connected"})
        started = trio.Event()

        async def hold() -> None:
            started.set()
            await sup.call("slow_busy", {"seconds": 30})

        nursery.start_soon(hold)
        await started.wait()
        await trio.testing.wait_all_tasks_blocked(0.05)
        with pytest.raises(CallQueueTimeout) as caught:
            await sup.call("slow_echo", {"text": "late"}, timeout=0.5)
        assert (caught.value.server, caught.value.limit, caught.value.timeout) == ("slow", 1, 0.5)
        assert "it was not sent (nothing ran)" in str(caught.value)
        assert classify(caught.value, sent=True)[0] == "fail"  # not executed, though handed on
        assert sup.status()["slow"].status == "connected"  # not a timeout of the server's
        nursery.cancel_scope.cancel()
    assert count_executions(counts) == {"echo": 1, "busy": 1}  # "late" never ran


# -- a team gateway: each caller's own rate --------------------------------------------


async def test_a_burst_over_a_callers_rate_is_refused_exactly_past_it_and_never_sent(
    tmp_path: Path,
) -> None:
    """alice may make 3 calls a minute; a burst of 5 gets 3 answers and 2 refusals that
    never reach the server, each saying when to retry; bob, on another rule, is not
    touched by alice's spending; the refusals are in the audit log and in /metrics."""
    counts = tmp_path / "count"
    rules = (
        PolicyRule(subjects=("alice",), rate_limit="3/min"),
        PolicyRule(subjects=("bob",), servers=("calc",)),
    )
    servers = {"calc": fixture("echo", counts)}
    async with team(tmp_path, rules=rules, servers=servers) as (fx, _, url):
        async with client_of(url, token_for(fx, "alice", url)) as alice:
            results: list[Any] = []

            async def add(n: int) -> None:
                results.append(await alice.call_tool("calc_add", {"a": n, "b": 1}))

            async with trio.open_nursery() as nursery:
                for n in range(5):
                    nursery.start_soon(add, n)
            refused = [r for r in results if r.is_error]
            assert len(results) == 5 and len(refused) == 2
            for result in refused:
                said = (result.meta or {})[ERROR_META]
                assert said["type"] == "RateLimited" and said["effect"] == "not executed"
                assert (said["by"], said["limit"], said["server"]) == ("caller", "3/min", "calc")
                assert 0 < said["retryAfter"] <= 20
                assert "alice" in result.content[0].text and "3/min" in result.content[0].text
        assert count_executions(counts) == {"add": 3}
        async with client_of(url, token_for(fx, "bob", url)) as bob:
            for n in range(4):
                assert not (await bob.call_tool("calc_add", {"a": n, "b": 1})).is_error
        assert count_executions(counts) == {"add": 7}
        async with httpx2.AsyncClient() as http:
            text = (await http.get(url.removesuffix("/mcp") + "/metrics")).text
        assert 'mcp_supervisor_server_calls_rate_limited_total{server="calc",by="caller"} 2' in text
        assert 'mcp_supervisor_server_calls_rate_limited_total{server="calc",by="server"} 0' in text
    lines = audit_lines(tmp_path / "audit")
    limited = [line for line in lines if line["outcome"] == "rate_limited"]
    assert [line["caller"] for line in limited] == ["alice", "alice"]
    assert all(line["error"]["type"] == "RateLimited" for line in limited)
    assert sorted(line["caller"] for line in lines if line["outcome"] == "ok") == (
        ["alice"] * 3 + ["bob"] * 4
    )


async def test_a_callers_limits_are_every_rule_of_theirs_and_a_reload_keeps_them() -> None:
    """A call is held to each limiting rule that grants its tool; one over any is refused
    and takes nothing of the others; a reloaded policy keeps what was spent of a rule it
    still has, and a changed rule starts full."""
    alice = Caller(subject="alice", groups=("eng",))
    everything = PolicyRule(groups=("eng",), rate_limit="3/min")
    search = PolicyRule(groups=("eng",), servers=("search",), rate_limit="1/min")
    policy = Policy((everything, search))
    admit = policy.admission(alice, policy.grant(alice))
    assert admit is not None
    admit("search", "search_find")  # one of each
    with pytest.raises(RateLimited) as caught:
        admit("search", "search_find")  # over search's: takes nothing of the other
    said = (caught.value.by, caught.value.limit, caught.value.server)
    assert said == ("caller", "1/min", "search")
    admit("calc", "calc_add")
    admit("calc", "calc_add")  # everything's 3 spent now
    with pytest.raises(RateLimited):
        admit("calc", "calc_add")
    unlimited = Policy((PolicyRule(groups=("eng",)),))
    assert unlimited.admission(alice, unlimited.grant(alice)) is None

    reloaded = Policy((everything, PolicyRule(subjects=("bob",))))
    reloaded.keep_limits(policy)
    again = reloaded.admission(alice, reloaded.grant(alice))
    assert again is not None
    with pytest.raises(RateLimited):
        again("calc", "calc_add")
    changed = Policy((PolicyRule(groups=("eng",), rate_limit="4/min"),))
    changed.keep_limits(policy)
    fresh = changed.admission(alice, changed.grant(alice))
    assert fresh is not None
    for _ in range(4):
        fresh("calc", "calc_add")
