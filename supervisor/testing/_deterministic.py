"""Deterministic runs: the same seeds, the same run, byte for byte (docs/faults.md).

::

    async def main() -> bytes:
        history = CallHistory()
        async with open_supervisor(
            config, apps=apps, faults=plans, injector=Injector(), history=history
        ) as sup:
            ...  # the workload
        return replay_log(history, sup.faults())

    assert run_deterministic(main) == run_deterministic(main)

Four things vary between two runs of one workload, and each is pinned: time (trio's
``MockClock`` — every sleep and timeout lasts exactly as long as asked, however loaded the
machine), the fault plans' draws (their seeds), trio's scheduler, which runs the tasks
ready at one moment in a random order, and the restarts' backoff jitter
(:func:`run_deterministic` seeds both from its ``seed``). The servers
run in-process (``open_supervisor(apps=...)``): no subprocess, socket or thread whose
timing the run would depend on.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import trio
import trio.testing

from ..actors._rules import jitter_rng
from ..events._catalog import to_builtins

if TYPE_CHECKING:
    from ..faults import CallHistory
    from ..transports._faults import Injected

__all__ = ["replay_log", "run_deterministic"]

T = TypeVar("T")

#: Event fields that hold a unix time (the wall clock), which no trio time stands for.
_WALL_FIELDS = ("last_ok",)


def replay_log(history: CallHistory, faults: Iterable[Injected] = ()) -> bytes:
    """``history``'s calls and events, and the injected ``faults``, as canonical JSON.

    Every time is trio time since the history's origin
    (:meth:`~supervisor.faults.CallHistory.start`: where ``open_supervisor`` starts it),
    rounded to the microsecond: a call's ``invoked_at``, ``sent_at``, ``deadline`` and
    ``ended_at``, and each event's ``ts`` — the unix time it was created is replaced by
    the trio time the history saw it at. An event field that holds a unix time of
    something else (``mcp.health.stale``'s ``last_ok``) is ``null``; durations
    (``connect_time``, ``downtime``, ``retry_in``) are measured on trio's clock already,
    as are the faults' ``t`` (since their engine started, which ``open_supervisor`` does
    with the history's origin). Call ids lose the history's random prefix (``"3"`` for
    ``"9f2c1a-3"``). Keys are sorted.

    The result is ``{"calls": [...], "events": [...], "faults": [...]}`` as UTF-8 bytes:
    under trio's ``MockClock`` with in-process servers (``open_supervisor(apps=...)``),
    two runs of the same workload with the same plans and seeds give equal bytes.
    """
    origin = history.origin if history.origin is not None else 0.0
    prefix = f"{history.prefix}-"

    def since(t: float | None) -> float | None:
        return None if t is None else round(t - origin, 6)

    calls = []
    for call in history.calls:
        record = msgspec.to_builtins(call)
        record["call_id"] = call.call_id.removeprefix(prefix)
        for field in ("invoked_at", "sent_at", "deadline", "ended_at"):
            record[field] = since(getattr(call, field))
        calls.append(record)
    events = []
    for t, event in history.events:
        record = to_builtins(event)
        record["ts"] = since(t)
        for field in _WALL_FIELDS:
            if record.get(field) is not None:
                record[field] = None
        events.append(record)
    document = {"calls": calls, "events": events, "faults": msgspec.to_builtins(list(faults))}
    return msgspec.json.encode(document, order="sorted")


def run_deterministic(
    async_fn: Callable[..., Awaitable[T]],
    *args: object,
    seed: int = 0,
    clock: trio.abc.Clock | None = None,
    **run_options: Any,
) -> T:
    """``trio.run(async_fn, *args)``, deterministic: on trio's mock clock and with trio's
    scheduler seeded with ``seed``; returns what ``async_fn`` returns.

    ``clock`` is by default ``trio.testing.MockClock(autojump_threshold=0)``: time stands
    still while a task can run and jumps to the next deadline as soon as none can, so
    timeouts, backoff and injected delays cost no real time. Trio runs the tasks that
    are ready at one moment in a random order, on purpose (code must not depend on it);
    for the duration of the run that order is drawn from ``seed`` instead — trio's own
    deterministic mode, the one it uses under Hypothesis — whatever else this process
    imported; its previous state is restored afterwards. The scheduler's ``seed`` is not
    the fault plans' seeds: those decide the faults, this one the order of simultaneous
    steps — and the backoff jitter of restarts, drawn from a generator seeded with it.
    ``run_options`` go to :func:`trio.run`.

    Raises :class:`RuntimeError` if this trio has no deterministic scheduling to turn on.
    """
    from trio._core import _run

    rng = getattr(_run, "_r", None)
    if rng is None or not hasattr(_run, "_ALLOW_DETERMINISTIC_SCHEDULING"):
        raise RuntimeError(
            f"trio {trio.__version__} has no deterministic scheduling mode to turn on"
        )
    state, allowed = rng.getstate(), _run._ALLOW_DETERMINISTIC_SCHEDULING
    rng.seed(seed)
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True
    jitter = jitter_rng.set(random.Random(seed))  # the restarts' jitter: from the seed too
    try:
        if clock is None:
            clock = trio.testing.MockClock(autojump_threshold=0)
        return trio.run(async_fn, *args, clock=clock, **run_options)
    finally:
        jitter_rng.reset(jitter)
        rng.setstate(state)
        _run._ALLOW_DETERMINISTIC_SCHEDULING = allowed
