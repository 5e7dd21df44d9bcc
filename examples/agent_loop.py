"""A long-running agent loop over supervised MCP servers, with fallback when one is down.

Run it::

    python examples/agent_loop.py                 # built-in demo servers, until Ctrl-C
    python examples/agent_loop.py --rounds 20     # or stop after 20 rounds
    python examples/agent_loop.py --duration 30   # or after 30 seconds
    python examples/agent_loop.py --config .mcp.json --task 'search={"query": "trio"}'

By default it supervises two fixture MCP servers that ship with mcp-supervisor:

- ``steady``, an ``echo`` server that never fails;
- ``flaky``, a ``crash`` server that dies (without answering) every fifth tool call.

Both offer the tools ``echo(text)`` (annotated read-only and idempotent) and ``add(a, b)``
(not annotated, so it must be assumed to have side effects). Each round the agent asks
for ``echo`` (preferring ``flaky``) and ``add`` (preferring ``steady``).

What it shows:

- a background task follows the ``mcp.*`` and ``supervisor.*`` events and keeps a view of
  which servers are up, printing a line for each event;
- a call goes to the preferred server that the view says is up. When the call fails
  because of the *server* — it is unavailable (failed or stopped), the connection died
  during the call, or the call timed out — the agent falls back to another server
  offering the same tool. After a death or a timeout the call may already have run, so
  it falls back only for tools annotated read-only or idempotent; otherwise it reports
  the call as not retried;
- an error *answer* (an MCP error, or ``ToolError`` for a tool result with ``isError``)
  is the request's fault, not the server's: no fallback;
- calls are approved by the agent's own policy (``approve_call``): everything except
  destructive tools (``delete_*``, ``destructiveHint``…), which it refuses;
- a server the supervisor gave up on (``failed``) is restarted by the agent after a
  cool-down (``--revive-after``);
- Ctrl-C (or SIGTERM) stops the loop cleanly: the supervisor stops every server, and a
  summary is printed.

Output: one line per round and per event on stdout; the supervisor's own log lines go to
stderr (errors only, unless ``--verbose``). Exit status: 0, or 2 for a bad config or
arguments.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import signal
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import attrs
import trio

from supervisor import (
    ApprovalRequest,
    Bus,
    CallMayHaveTakenEffect,
    ConfigError,
    ServerUnavailable,
    SupervisorError,
    SupervisorHandle,
    ToolCallTimeout,
    ToolError,
    configure_logging,
    load_config,
    open_supervisor,
)
from supervisor.events import Event, Subscription
from supervisor.testing.servers import stdio_params

#: The built-in ``flaky`` server dies on every CRASH_EVERY-th tool call it receives.
CRASH_EVERY = 5

Arguments = Mapping[str, object]


# -- what the agent does each round ----------------------------------------------------


@attrs.frozen
class Task:
    """One tool call the agent makes every round.

    ``tool`` is the tool's own name, as servers list it (``echo``), not the merged
    ``<prefix>_<tool>`` name: any server offering it can do the job. ``arguments`` is a
    mapping, or a function of the round number returning one. ``prefer`` lists servers
    to try first, in order; the others follow in config order.
    """

    tool: str
    arguments: Arguments | Callable[[int], Arguments] = attrs.field(factory=dict)
    prefer: tuple[str, ...] = ()

    def arguments_for(self, round_number: int) -> Arguments:
        if callable(self.arguments):
            return self.arguments(round_number)
        return self.arguments


BUILTIN_TASKS = (
    Task("echo", lambda n: {"text": f"round {n}"}, prefer=("flaky",)),
    Task("add", lambda n: {"a": n, "b": n}, prefer=("steady",)),
)


def builtin_config() -> dict[str, object]:
    """Two fixture servers run by this interpreter, with quick restarts."""
    steady_command, steady_args = stdio_params("echo")
    flaky_command, flaky_args = stdio_params("crash", crash_after=CRASH_EVERY)
    return {
        "mcpServers": {
            "steady": {"command": steady_command, "args": steady_args, "lazy": False},
            "flaky": {"command": flaky_command, "args": flaky_args, "lazy": False},
        },
        # Restart after 0.25 s, 0.5 s, 1 s ... at most 2 s apart; the count starts over once
        # a server stayed up 1.5 s, and a server is given up on after 20 restarts in a row.
        "supervisor": {
            "backoff": {"local": {"initial": 0.25, "max": 2, "stableAfter": 1.5, "maxAttempts": 20}}
        },
    }


# -- the agent's view of the servers, kept current by events ----------------------------


class Fleet:
    """Which servers are usable, as far as the events tell.

    States are those of the health record: ``idle`` (lazy, not connected yet),
    ``connecting``, ``connected``, ``disconnected``, ``failed`` and ``stopped``.
    """

    def __init__(self, sup: SupervisorHandle) -> None:
        self.state = {name: record.status for name, record in sup.status().items()}

    def usable(self, server: str) -> bool:
        # An idle server is fine: the supervisor connects it on the first call.
        return self.state.get(server) in ("connected", "idle")

    def apply(self, event: Event) -> None:
        kind = event.kind
        server = getattr(event, "server", None) or getattr(event, "child", None)
        if server is None:
            return
        if kind == "mcp.connecting":
            self.state[server] = "connecting"
        elif kind == "mcp.connected":
            self.state[server] = "connected"
        elif kind in ("mcp.disconnected", "mcp.local.crashed", "mcp.error", "mcp.health.stale"):
            if self.state.get(server) != "failed":
                self.state[server] = "disconnected"
        elif kind == "supervisor.child.gave_up":
            self.state[server] = "failed"


def describe(event: Event) -> str:
    """One readable line for an event."""
    e = event
    match e.kind:
        case "mcp.connecting":
            text = f"connecting (attempt {e.attempt} of {e.max_attempts})"
        case "mcp.local.spawned":
            text = f"process started, pid {e.pid}"
        case "mcp.connected":
            tools = f"{e.tool_count} tool{'' if e.tool_count == 1 else 's'}"
            text = f"connected: {tools}, handshake took {e.connect_time:.2f} s"
        case "mcp.disconnected":
            text = f"disconnected ({'clean' if e.was_clean else 'unexpected'})"
        case "mcp.local.crashed":
            text = f"process crashed, exit code {e.exit_code}"
        case "mcp.local.shutdown":
            text = "process stopped"
        case "mcp.error":
            retry = f"retry in {e.retry_in:.2f} s" if e.retry_in is not None else "no retry"
            text = f"error #{e.attempt}, {retry}: {shorten(e.error, 80)}"
        case "mcp.health.stale":
            text = "stale: a ping went unanswered"
        case "mcp.health.recovered":
            text = f"back up after {e.downtime:.2f} s down"
        case "supervisor.child.restarted":
            text = f"restarted by the supervisor (restart {e.restarts})"
        case "supervisor.child.gave_up":
            text = f"given up on after {e.restarts} restarts: calls now fail fast"
        case "bus.dropped":
            return f"  event  (missed {e.count} events: this reader was too slow)"
        case _:
            text = e.kind
    server = getattr(e, "server", None) or getattr(e, "child", "?")
    return f"  event  {server}: {text}"


async def watch_events(
    events: Subscription,
    fleet: Fleet,
    sup: SupervisorHandle,
    nursery: trio.Nursery,
    revive_after: float,
) -> None:
    """Follow the events: update the view, print them, revive servers given up on."""
    async for event in events:
        fleet.apply(event)
        say(describe(event))
        if event.kind == "supervisor.child.gave_up" and revive_after > 0:
            nursery.start_soon(revive, sup, event.child, revive_after)


async def revive(sup: SupervisorHandle, server: str, after: float) -> None:
    """Restart a failed server after a cool-down, with a fresh count of attempts."""
    await trio.sleep(after)
    say(f"  agent  restarting {server} after a {after:g} s cool-down")
    try:
        await sup.restart(server)
    except SupervisorError as exc:
        say(f"  agent  could not restart {server}: {exc}")


# -- one call, with fallback --------------------------------------------------------------


@attrs.frozen
class Route:
    """A server that offers the task's tool, and how to call it there."""

    server: str
    name: str  # the merged tool name, e.g. "flaky_echo"
    repeatable: bool  # annotated read-only or idempotent: safe to run twice


def routes(sup: SupervisorHandle, task: Task) -> list[Route]:
    """The servers offering ``task.tool``: preferred ones first, then in config order."""
    found = []
    for position, (name, server) in enumerate(sup.servers.items()):
        tool = next((t for t in server.tools if t.name == task.tool), None)
        if tool is None:
            continue
        hints = tool.annotations
        repeatable = bool(hints and (hints.read_only_hint or hints.idempotent_hint))
        prefix = sup.config.servers[name].prefix
        merged = f"{prefix}_{task.tool}" if prefix else task.tool
        rank = task.prefer.index(name) if name in task.prefer else len(task.prefer) + position
        found.append((rank, Route(name, merged, repeatable)))
    return [route for _, route in sorted(found, key=lambda pair: pair[0])]


@attrs.define
class Stats:
    rounds: int = 0
    ok: int = 0
    fallbacks: int = 0
    failed: int = 0
    answered_by: Counter[str] = attrs.Factory(Counter)
    errors: Counter[str] = attrs.Factory(Counter)


async def perform(
    sup: SupervisorHandle,
    fleet: Fleet,
    task: Task,
    round_number: int,
    stats: Stats,
    timeout: float,
) -> str:
    """Make the task's call, falling back across servers; return what happened, in brief."""
    options = routes(sup, task)
    if not options:
        stats.failed += 1
        stats.errors["no server offers it"] += 1
        return f"{task.tool}: no server offers it"
    # Skip servers known to be down. If all are, try them anyway: a call to a server
    # that is restarting waits in its mailbox and is served once it is back (or times out).
    up = [route for route in options if fleet.usable(route.server)]
    notes = [
        f"{route.server} {fleet.state.get(route.server)}" for route in options if route not in up
    ]
    arguments = task.arguments_for(round_number)
    for route in up or options:
        started = trio.current_time()
        try:
            result = await sup.call(route.name, arguments, timeout=timeout)
        except ServerUnavailable:
            # Failed or stopped: the call was never sent, so another server may do it.
            stats.errors["ServerUnavailable"] += 1
            fleet.state[route.server] = "failed"
            notes.append(f"{route.server} ServerUnavailable")
            continue
        except (CallMayHaveTakenEffect, ToolCallTimeout) as exc:
            # The connection died during the call, or it took too long: it may have run.
            kind = type(exc).__name__
            stats.errors[kind] += 1
            if route.repeatable:
                notes.append(f"{route.server} {kind}")
                continue
            stats.failed += 1
            return (
                f"{task.tool}: {route.server} {kind}, not retried: it may have run "
                "and the tool is not idempotent"
            )
        except ToolError as exc:
            # The tool ran and said it failed: the request's fault, not the server's.
            stats.errors["tool error"] += 1
            stats.failed += 1
            return f"{task.tool}: {route.server} tool error {shorten(exc.text, 40)}"
        except SupervisorError as exc:
            # An error answer (ServerRequestError), a refused approval or a bad tool name:
            # not the server's fault.
            kind = type(exc).__name__
            stats.errors[kind] += 1
            stats.failed += 1
            return f"{task.tool}: {route.server} {kind}: {shorten(str(exc), 80)}"
        took = (trio.current_time() - started) * 1000
        answer = shorten(repr(result.text), 40)
        stats.ok += 1
        stats.answered_by[route.server] += 1
        if route is not options[0]:
            stats.fallbacks += 1
            return (
                f"{task.tool}: {', '.join(notes)} -> fell back to {route.server}: "
                f"ok {answer} ({took:.0f} ms)"
            )
        return f"{task.tool}: {route.server} ok {answer} ({took:.0f} ms)"
    stats.failed += 1
    return f"{task.tool}: {', '.join(notes)} -> no server left to try"


async def approve_call(request: ApprovalRequest) -> bool:
    """The agent's approval policy: every call it makes, except a destructive one."""
    destructive = request.reason in ("destructive name", "destructive annotation")
    if destructive:
        say(f"  agent  refused {request.tool} ({request.reason})")
    return not destructive


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def say(line: str) -> None:
    print(line, flush=True)


# -- the loop -----------------------------------------------------------------------------


async def agent_loop(
    sup: SupervisorHandle,
    fleet: Fleet,
    tasks: Sequence[Task],
    args: argparse.Namespace,
    stats: Stats,
) -> None:
    """Round after round, each task in turn, until ``--rounds`` (or forever)."""
    for round_number in itertools.count(1):
        if args.rounds and round_number > args.rounds:
            return
        outcomes = [
            await perform(sup, fleet, task, round_number, stats, args.call_timeout)
            for task in tasks
        ]
        stats.rounds = round_number
        say(f"round {round_number:>3} | " + " | ".join(outcomes))
        await trio.sleep(args.interval)


async def stop_on_signals(scope: trio.CancelScope) -> None:
    """First Ctrl-C or SIGTERM: stop the loop cleanly (once stopped, trio's default
    handling is back, so a second Ctrl-C interrupts the shutdown)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            say(f"  agent  {signal.Signals(signum).name}: stopping")
            scope.cancel()
            return


async def main(args: argparse.Namespace) -> int:
    configure_logging(level="info" if args.verbose else "error")
    config = load_config(args.config) if args.config else load_config(builtin_config())
    for name, errors in config.invalid.items():
        say(f"  agent  {name} cannot start: {'; '.join(map(str, errors))}")
    stats = Stats()
    started = trio.current_time()
    # Subscribe before the supervisor starts, so that no event is missed: servers with
    # `lazy: false` start connecting as soon as it does.
    bus = Bus()
    with bus.subscribe("mcp.*", "supervisor.*") as events:
        async with open_supervisor(config, bus=bus, approve=approve_call) as sup:
            await sup.tools()  # connect every server once, to learn what it offers
            fleet = Fleet(sup)
            if not any(routes(sup, task) for task in args.tasks):
                print(
                    "no server offers any of the tools to call; pass --task TOOL=JSON",
                    file=sys.stderr,
                )
                return 2
            say("servers: " + ", ".join(f"{n} {s}" for n, s in fleet.state.items()))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_events, events, fleet, sup, nursery, args.revive_after)
                nursery.start_soon(stop_on_signals, nursery.cancel_scope)
                with trio.move_on_after(args.duration or math.inf):
                    await agent_loop(sup, fleet, args.tasks, args, stats)
                nursery.cancel_scope.cancel()  # the loop is done: stop watching
            report(sup, stats, trio.current_time() - started)
    return 0


def report(sup: SupervisorHandle, stats: Stats, elapsed: float) -> None:
    """The final summary: calls, fallbacks, errors by type, and each server's state."""
    answered = ", ".join(f"{n} {c}" for n, c in sorted(stats.answered_by.items()))
    say(
        f"summary: {stats.rounds} rounds in {elapsed:.1f} s; calls ok: {stats.ok} "
        f"({answered or 'none'}); fallbacks: {stats.fallbacks}; failed: {stats.failed}"
    )
    errors = ", ".join(f"{kind} {n}" for kind, n in stats.errors.most_common())
    say(f"errors by type: {errors or 'none'}")
    status = ", ".join(
        f"{name} {record.status} (restarts {record.restarts})"
        for name, record in sup.status().items()
    )
    say(f"servers at the end: {status}")


def parse_task(text: str) -> Task:
    """``TOOL`` or ``TOOL=JSON`` (the JSON object is the tool's arguments)."""
    tool, _, raw = text.partition("=")
    if not tool:
        raise argparse.ArgumentTypeError(f"--task {text!r}: the tool name is missing")
    try:
        arguments = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--task {text!r}: invalid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise argparse.ArgumentTypeError(f"--task {text!r}: arguments must be a JSON object")
    return Task(tool, arguments)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A long-running agent loop over supervised MCP servers, with fallback.",
    )
    parser.add_argument(
        "--config", metavar="PATH", help="your MCP config (default: two built-in fixture servers)"
    )
    parser.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="TOOL[=JSON]",
        help="a tool to call every round, with its arguments (repeatable); default: echo and add",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        metavar="N",
        help="stop after N rounds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=0,
        metavar="S",
        help="stop after S seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.5,
        metavar="S",
        help="pause between rounds (default: 0.5)",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="give up on one call after S seconds (default: 5)",
    )
    parser.add_argument(
        "--revive-after",
        type=float,
        default=10.0,
        metavar="S",
        help="restart a failed server after S seconds; 0: never (default: 10)",
    )
    parser.add_argument("--verbose", action="store_true", help="the supervisor's info logs")
    args = parser.parse_args(argv)
    try:
        args.tasks = [parse_task(text) for text in args.task] or list(BUILTIN_TASKS)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.task and not args.config:
        parser.error("--task needs --config: the built-in servers offer echo and add only")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    try:
        sys.exit(trio.run(main, arguments))
    except ConfigError as exc:
        print(f"invalid config:\n{exc}", file=sys.stderr)
        sys.exit(2)
