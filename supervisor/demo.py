"""The quick-start demo behind ``mcp-supervisor demo``: a supervision tree living through crashes.

Until the MCP server layer lands, the demo runs a small in-process tree::

    root (one_for_one)
    ├── clock       ticks in the background; never restarted by its siblings' crashes
    ├── worker      answers calls, crashes on command (mark-unavailable after 2 restarts)
    └── pipeline    a nested supervisor (rest_for_one)
        ├── source
        └── sink    restarted whenever source is

Every figure printed — incarnation numbers, delays, event fields, statistics — is read from
the running tree and from the events its notify hook published on a :class:`~supervisor.bus.Bus`;
nothing is scripted.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TextIO

import trio

from .actors import (
    Actor,
    ActorUnavailable,
    Backoff,
    ChildState,
    ChildStatistics,
    GiveUp,
    Intensity,
    Strategy,
    Supervisor,
    actor_spec,
    open_tree,
    supervisor_spec,
)
from .bus import Bus, Subscription
from .events import Event, to_builtins

__all__ = ["DemoCrash", "run_demo"]

#: Backoff of every child: 0.2 s, then 0.4 s ... so the whole demo takes about a second.
_BACKOFF = Backoff(initial=0.2, maximum=1.0)
#: The worker is given up on at its third crash within this window.
_WORKER_INTENSITY = Intensity(max_restarts=2, within_seconds=30)
#: How long the demo waits for anything before declaring it broken.
_PATIENCE = 5.0
_TICK = 0.05


class DemoCrash(Exception):
    """The crash a demo actor raises when it is sent ``"crash"``."""


class DemoActor(Actor):
    """Answers ``"whoami"`` with its incarnation number and ``("square", x)`` with x²;
    the cast ``"crash"`` crashes it."""

    def __init__(self, name: str, incarnation: int, stops: list[str]) -> None:
        self.name = name
        self.incarnation = incarnation
        self.stops = stops

    async def init(self) -> None:
        self.nursery.start_soon(self._note_stop)

    async def _note_stop(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self.stops.append(self.name)

    async def handle(self, message: object) -> object:
        if message == "crash":
            raise DemoCrash(f"{self.name} incarnation {self.incarnation} crashed on request")
        if message == "whoami":
            return self.incarnation
        if isinstance(message, tuple) and len(message) == 2 and message[0] == "square":
            value = message[1]
            if isinstance(value, int):
                return value * value
        raise ValueError(f"{self.name} does not understand {message!r}")


class Clock(DemoActor):
    """Counts ticks in a background task; ``"ticks"`` returns (incarnation, ticks)."""

    ticks = 0

    async def init(self) -> None:
        await super().init()
        self.nursery.start_soon(self._tick)

    async def _tick(self) -> None:
        while True:
            await trio.sleep(_TICK)
            self.ticks += 1

    async def handle(self, message: object) -> object:
        if message == "ticks":
            return (self.incarnation, self.ticks)
        return await super().handle(message)


def _factory(
    name: str, stops: list[str], cls: type[DemoActor] = DemoActor
) -> Callable[[], DemoActor]:
    """Make incarnations of ``name`` numbered 1, 2, 3 ..., noting their stops in ``stops``."""
    numbers = itertools.count(1)
    return lambda: cls(name, next(numbers), stops)


async def run_demo(out: TextIO) -> int:
    """Run the demo, printing what happens to ``out``; return the exit code (0).

    Raises whatever goes wrong (a missing event after a few seconds is a ``RuntimeError``),
    for the CLI to report as a runtime failure.
    """
    started = time.monotonic()
    wall_start = time.time()

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    def describe(event: Event) -> str:
        fields = {k: v for k, v in to_builtins(event).items() if k not in ("kind", "ts")}
        details = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"[+{event.ts - wall_start:.2f} s] {event.kind}: {details}"

    bus = Bus()
    stops: list[str] = []  # names of stopped incarnations, in order
    source_spec = actor_spec("source", _factory("source", stops))
    sink_spec = actor_spec("sink", _factory("sink", stops))
    children = [
        actor_spec("clock", _factory("clock", stops, Clock)),
        actor_spec(
            "worker",
            _factory("worker", stops),
            give_up=GiveUp.MARK_UNAVAILABLE,
            intensity=_WORKER_INTENSITY,
        ),
        supervisor_spec(
            "pipeline",
            [source_spec, sink_spec],
            strategy=Strategy.REST_FOR_ONE,
            backoff=_BACKOFF,
            notify=bus.notify,
        ),
    ]

    say("mcp-supervisor demo: an in-process supervision tree (the MCP server layer comes later)")
    say("  root (one_for_one): clock, worker, pipeline (rest_for_one: source, sink)")
    say("  restarts are published on an event bus; this demo subscribes to 'supervisor.*'")
    say("  (the tree also logs each crash to stderr)")
    say()

    with bus, bus.subscribe("supervisor.*") as events:
        async with open_tree(children, backoff=_BACKOFF, notify=bus.notify) as sup:
            worker = sup.address("worker")

            say("1. Calls to the worker")
            for x in (3, 7):
                answer = await worker.call(("square", x), timeout=_PATIENCE)
                number = await worker.call("whoami", timeout=_PATIENCE)
                say(f"   worker: square({x}) = {answer}  (incarnation {number})")
            say()

            say('2. Crash the worker (cast "crash"), then call it while it restarts')
            worker.cast("crash")
            status = await _wait_for_state(sup, "worker", ChildState.RESTARTING)
            due = (status.next_restart_at or trio.current_time()) - trio.current_time()
            say(
                f"   worker is {status.state.value} (attempt {status.attempt}, "
                f"last exit: {status.last_exit}); next start in {due:.2f} s"
            )
            sent = trio.current_time()
            number = await worker.call("whoami", timeout=_PATIENCE)
            waited = trio.current_time() - sent
            event = await _next_event(events, "supervisor.child.restarted")
            say(f"   {describe(event)}")
            say(
                f"   the call sent during the backoff was queued and answered by "
                f"incarnation {number} after {waited:.2f} s"
            )
            say()

            say("3. Crash pipeline/source: rest_for_one restarts source and the sink after it")
            source_spec.address.cast("crash")
            for _ in range(2):
                event = await _next_event(events, "supervisor.child.restarted")
                say(f"   {describe(event)}")
            source = await source_spec.address.call("whoami", timeout=_PATIENCE)
            sink = await sink_spec.address.call("whoami", timeout=_PATIENCE)
            say(f"   now serving: source incarnation {source}, sink incarnation {sink}")
            say()

            say("4. Status (Supervisor.statistics())")
            for line in _status_table(sup):
                say(f"   {line}")
            say()

            limit = _WORKER_INTENSITY
            say(
                f"5. Crash the worker until it exceeds its intensity "
                f"({limit.max_restarts} restarts in {limit.within_seconds:g} s; "
                "give_up=mark-unavailable)"
            )
            while True:
                worker.cast("crash")
                event = await _next_event(
                    events, "supervisor.child.restarted", "supervisor.child.gave_up"
                )
                say(f"   {describe(event)}")
                if event.kind == "supervisor.child.gave_up":
                    break
            sent = trio.current_time()
            try:
                await worker.call("whoami", timeout=_PATIENCE)
            except ActorUnavailable as exc:
                took = trio.current_time() - sent
                say(f"   a call now fails fast ({took * 1e6:.0f} µs): ActorUnavailable: {exc}")
            else:
                raise RuntimeError("the worker answered after it was given up on")
            reply = await sup.address("clock").call("ticks", timeout=_PATIENCE)
            assert isinstance(reply, tuple)
            clock_number, ticks = reply
            clock = _child(sup, "clock")
            say(
                f"   meanwhile the clock kept ticking: incarnation {clock_number}, {ticks} ticks, "
                f"{clock.restarts} restarts"
            )
            say()

            say('6. sup.restart_child("worker") brings it back with a fresh restart count')
            await sup.restart_child("worker")
            number = await worker.call("whoami", timeout=_PATIENCE)
            state = _child(sup, "worker").state.value
            say(f"   worker is {state} again: incarnation {number}")
            say()
            stops.clear()

    say(f"7. Leaving the tree stopped its actors in this order: {', '.join(stops)}")
    say(f"Demo took {time.monotonic() - started:.1f} s.")
    return 0


async def _next_event(events: Subscription, *kinds: str) -> Event:
    """The next event of one of ``kinds`` (others are skipped); fails after a while."""
    with trio.move_on_after(_PATIENCE):
        async for event in events:
            if event.kind in kinds:
                return event
    raise RuntimeError(f"no {' or '.join(kinds)} event within {_PATIENCE} s")


async def _wait_for_state(sup: Supervisor, child: str, state: ChildState) -> ChildStatistics:
    """Poll until ``child`` is in ``state``; return its statistics."""
    with trio.move_on_after(_PATIENCE):
        while True:
            status = _child(sup, child)
            if status.state is state:
                return status
            await trio.sleep(0.001)
    raise RuntimeError(f"child {child!r} did not become {state.value} within {_PATIENCE} s")


def _child(sup: Supervisor, id: str) -> ChildStatistics:
    for child in sup.statistics().children:
        if child.id == id:
            return child
    raise LookupError(id)


def _status_table(sup: Supervisor) -> list[str]:
    """One line per child, nested supervisors' children indented below them."""
    rows: list[tuple[str, str, str, str]] = []

    def walk(node: Supervisor, depth: int) -> None:
        stats = node.statistics()
        incarnations = {id: inc for id, _, inc in node.which_children()}
        for child in stats.children:
            rows.append(
                (
                    "  " * depth + child.id,
                    child.state.value,
                    str(child.restarts),
                    child.last_exit or "-",
                )
            )
            inner = incarnations.get(child.id)
            if isinstance(inner, Supervisor):
                walk(inner, depth + 1)

    walk(sup, 0)
    header = ("child", "state", "restarts", "last exit")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    return [
        f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}  {d}"
        for a, b, c, d in [header, *rows]
    ]
