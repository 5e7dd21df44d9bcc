"""The fault engine and the message link: which rules fire on which message, from the seed
alone, and what each action does to a message stream."""

from __future__ import annotations

import json

import pytest
import trio

from supervisor.config._plan import TO_CLIENT, TO_SERVER
from supervisor.faults import faults_json, load_plan
from supervisor.faults._inject._engine import FaultEngine, read_faults
from supervisor.faults._inject._link import LIST_CHANGED, REORDER_HOLD_S, Link, garbage


def request(msg_id: int, method: str = "tools/call", tool: str | None = "echo") -> bytes:
    params: dict[str, object] = {"name": tool, "arguments": {}} if tool else {}
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


def response(msg_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {"content": []}}).encode()


def notification(method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def engine(rules: object, seed: int = 0, clock: Clock | None = None) -> FaultEngine:
    return FaultEngine(load_plan(rules, seed=seed), clock=clock or Clock())


def fired(e: FaultEngine, direction: str, raw: bytes) -> list[str]:
    return [a.kind for a in e.decide(direction, e.classify(direction, raw))]


def exchange(e: FaultEngine, n: int) -> list[tuple[int, list[str], list[str]]]:
    """``n`` tools/call requests, each answered: which actions fired on each leg."""
    out = []
    for i in range(1, n + 1):
        out.append((i, fired(e, TO_SERVER, request(i)), fired(e, TO_CLIENT, response(i))))
    return out


class TestWhen:
    def test_nth_fires_on_that_matching_message_only(self) -> None:
        e = engine([{"when": {"method": "tools/call", "nth": 3}, "do": "kill"}])
        legs = exchange(e, 5)
        assert [i for i, up, _ in legs if up] == [3]
        assert [f.id for f in e.log] == [3]

    def test_a_response_matches_only_a_rule_that_names_its_direction(self) -> None:
        e = engine([{"when": {"method": "tools/call", "nth": 2}, "do": "drop"}])
        legs = exchange(e, 3)
        # responses carry no method: the rule counts requests only, and fires on the 2nd
        assert [(i, up, down) for i, up, down in legs if up or down] == [(2, ["drop"], [])]
        e = engine(
            [{"when": {"method": "tools/call", "direction": "to_client", "nth": 2}, "do": "drop"}]
        )
        legs = exchange(e, 3)
        assert [(i, up, down) for i, up, down in legs if up or down] == [(2, [], ["drop"])]
        assert (e.log[0].method, e.log[0].tool, e.log[0].direction) == (
            "tools/call",
            "echo",
            TO_CLIENT,
        )

    def test_every_and_times(self) -> None:
        e = engine([{"when": {"method": "tools/*", "every": 2, "times": 2}, "do": "duplicate"}])
        assert [i for i, up, _ in exchange(e, 9) if up] == [2, 4]

    def test_tool_glob_and_method_glob(self) -> None:
        e = engine(
            [
                {"when": {"tool": "ad*"}, "do": "drop"},
                {"when": {"method": "notifications/*"}, "do": {"delay_ms": 5}},
            ]
        )
        assert fired(e, TO_SERVER, request(1, tool="echo")) == []
        assert fired(e, TO_SERVER, request(2, tool="add")) == ["drop"]
        assert fired(e, TO_CLIENT, notification("notifications/progress")) == ["delay"]
        assert fired(e, TO_SERVER, request(3, method="tools/list", tool=None)) == []

    def test_after_s_counts_from_the_start(self) -> None:
        clock = Clock()
        e = engine(
            [{"when": {"method": "tools/call", "after_s": 10, "nth": 1}, "do": "drop"}], clock=clock
        )
        e.start()
        clock.now = 9.9
        assert fired(e, TO_SERVER, request(1)) == []
        clock.now = 10.0
        assert fired(e, TO_SERVER, request(2)) == ["drop"]
        assert e.log[0].t == 10.0

    def test_until_s_ends_the_rule(self) -> None:
        clock = Clock()
        e = engine([{"when": {"until_s": 5}, "do": "drop"}], clock=clock)
        e.start()
        clock.now = 4.9
        assert fired(e, TO_SERVER, request(1)) == ["drop"]
        clock.now = 5.0
        assert fired(e, TO_SERVER, request(2)) == []

    def test_a_terminal_action_ends_the_rules_consulted(self) -> None:
        e = engine(
            [
                {"when": {}, "do": {"delay_ms": 1}},
                {"when": {}, "do": "drop"},
                {"when": {}, "do": "duplicate"},
            ]
        )
        assert fired(e, TO_SERVER, request(1)) == ["delay", "drop"]

    def test_exit_on_initialize_matches_the_opening_request_only(self) -> None:
        e = engine([{"when": {"nth": 1}, "do": "exit_on_initialize"}])
        assert fired(e, TO_SERVER, request(1, method="tools/list", tool=None)) == []
        assert fired(e, TO_SERVER, request(2, method="server/discover", tool=None)) == [
            "exit_on_initialize"
        ]

    def test_slow_start_is_decided_at_start_only(self) -> None:
        e = engine([{"when": {"nth": 2}, "do": {"slow_start_ms": 250}}])
        assert fired(e, TO_SERVER, request(1)) == []
        assert e.decide_start() == []
        assert [a.ms for a in e.decide_start()] == [250]
        assert e.log[0].detail == "start delayed 250 ms"


class TestSeeds:
    RULES = [
        {"when": {"method": "tools/call", "probability": 0.3}, "do": "drop"},
        {
            "when": {"method": "tools/call", "direction": "to_client", "probability": 0.5},
            "do": {"delay_ms": 10, "jitter_ms": 90},
        },
        {"when": {"every": 7}, "do": "duplicate"},
    ]

    def log(self, seed: int) -> bytes:
        e = engine(self.RULES, seed=seed)
        exchange(e, 200)
        return faults_json(e.log)

    def test_the_same_seed_gives_the_same_fault_log(self) -> None:
        assert self.log(11) == self.log(11)
        assert len(read_faults(self.log(11))) > 50

    def test_another_seed_gives_another(self) -> None:
        assert self.log(11) != self.log(12)

    def test_a_rule_s_draws_do_not_depend_on_the_other_rules(self) -> None:
        alone = engine(self.RULES[:1], seed=5)
        exchange(alone, 100)
        together = engine(self.RULES, seed=5)
        exchange(together, 100)
        drops = [f.id for f in together.log if f.action == "drop"]
        assert drops == [f.id for f in alone.log]

    def test_probability_is_about_right(self) -> None:
        e = engine([{"when": {"method": "tools/call", "probability": 0.25}, "do": "drop"}], seed=3)
        exchange(e, 2000)
        assert 400 < len(e.log) < 600

    def test_jitter_is_drawn_within_its_range(self) -> None:
        e = engine(
            [
                {
                    "when": {"direction": "to_client", "method": "tools/call"},
                    "do": {"delay_ms": 100, "jitter_ms": 50},
                }
            ],
            seed=9,
        )
        delays = []
        for i in range(50):
            e.classify(TO_SERVER, request(i))
            delays += [a.delay_ms for a in e.decide(TO_CLIENT, e.classify(TO_CLIENT, response(i)))]
        assert len(delays) == 50 and all(100 <= d <= 150 for d in delays)
        assert len(set(delays)) > 40


class Peer:
    """Both ends of a link, and the server it stands in front of."""

    def __init__(self) -> None:
        self.server: list[bytes] = []
        self.client: list[bytes] = []
        self.calls: list[str] = []

    async def to_server(self, line: bytes) -> None:
        self.server.append(line)

    async def to_client(self, line: bytes) -> None:
        self.client.append(line)

    def kill(self) -> None:
        self.calls.append("kill")

    def stop(self) -> None:
        self.calls.append("stop")

    def resume(self) -> None:
        self.calls.append("resume")

    async def close(self, direction: str) -> None:
        self.calls.append(f"close {direction}")


async def carry(rules: object, *lines: bytes, direction: str = TO_SERVER) -> Peer:
    peer = Peer()
    async with trio.open_nursery() as nursery:
        link = Link(engine(rules, clock=trio.current_time), peer, nursery)
        for line in lines:
            if direction == TO_SERVER:
                await link.carry(TO_SERVER, line, peer.to_server, peer.to_client)
            else:
                await link.carry(TO_CLIENT, line, peer.to_client, peer.to_server)
    return peer


class TestLink:
    async def test_no_rule_passes_everything_on(self) -> None:
        peer = await carry([], request(1), request(2))
        assert peer.server == [request(1), request(2)] and peer.client == []

    async def test_drop_and_duplicate(self) -> None:
        peer = await carry(
            [{"when": {"nth": 1}, "do": "drop"}, {"when": {"nth": 2}, "do": "duplicate"}],
            request(1),
            request(2),
            request(3),
        )
        assert peer.server == [request(2), request(2), request(3)]

    async def test_delay_holds_the_message_back(self, autojump_clock: trio.abc.Clock) -> None:
        start = trio.current_time()
        peer = await carry([{"when": {}, "do": {"delay_ms": 1500}}], request(1))
        assert trio.current_time() - start == pytest.approx(1.5)
        assert peer.server == [request(1)]

    async def test_reorder_lets_the_next_message_overtake(self) -> None:
        peer = await carry([{"when": {"nth": 1}, "do": "reorder"}], request(1), request(2))
        assert peer.server == [request(2), request(1)]

    async def test_a_reordered_message_is_sent_anyway_after_a_while(
        self, autojump_clock: trio.abc.Clock
    ) -> None:
        start = trio.current_time()
        peer = await carry([{"when": {"nth": 1}, "do": "reorder"}], request(1))
        assert peer.server == [request(1)]
        assert trio.current_time() - start == pytest.approx(REORDER_HOLD_S)

    async def test_garbage_comes_before_the_message(self) -> None:
        peer = await carry(
            [{"when": {"direction": "to_client"}, "do": "garbage_line"}],
            response(1),
            direction=TO_CLIENT,
        )
        assert peer.client == [garbage(1), response(1)]
        with pytest.raises(ValueError):
            json.loads(peer.client[0])

    async def test_truncate_cuts_the_message(self) -> None:
        peer = await carry([{"when": {}, "do": "truncate"}], request(1))
        assert peer.server == [request(1)[: len(request(1)) // 2]]

    async def test_error_answers_a_request_in_the_server_s_place(self) -> None:
        peer = await carry(
            [{"when": {}, "do": {"error": {"code": -32001, "message": "no"}}}], request(7)
        )
        assert peer.server == []
        assert [json.loads(line) for line in peer.client] == [
            {"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "no"}}
        ]

    async def test_error_replaces_a_response(self) -> None:
        peer = Peer()
        async with trio.open_nursery() as nursery:
            rules = [{"when": {"direction": "to_client"}, "do": {"error": {"code": 5}}}]
            link = Link(engine(rules), peer, nursery)
            await link.carry(TO_SERVER, request(3), peer.to_server, peer.to_client)
            await link.carry(TO_CLIENT, response(3), peer.to_client, peer.to_server)
        assert json.loads(peer.client[0])["error"] == {"code": 5, "message": "injected fault"}

    async def test_list_changed_reaches_the_client_whichever_way_the_message_went(self) -> None:
        peer = await carry([{"when": {}, "do": "list_changed"}], request(1))
        assert peer.server == [request(1)] and peer.client == [LIST_CHANGED]

    async def test_kill_close_and_hang_are_the_target_s(
        self, autojump_clock: trio.abc.Clock
    ) -> None:
        peer = await carry([{"when": {"nth": 1}, "do": "kill"}], request(1), request(2))
        assert peer.calls == ["kill"] and peer.server == [request(2)]
        peer = await carry([{"when": {}, "do": "close_stream"}], request(1))
        assert peer.calls == [f"close {TO_SERVER}"] and peer.server == []
        peer = await carry([{"when": {}, "do": {"hang_ms": 500}}], request(1))
        assert peer.calls == ["stop", "resume"] and peer.server == [request(1)]
