"""The call history: every tool call, from its invocation to its one outcome.

::

    history = CallHistory()
    async with open_supervisor(config, history=history) as sup:
        await sup.call("notes_echo", {"text": "hi"})
    verdict = check(history, executions=executions_by_call(count_file))

A call is *invoked*, then ends once, with one outcome — ``ok`` (answered), ``fail``
(definitely not executed) or ``info`` (it may have executed): the labels of
:mod:`supervisor.tools._outcome` (:func:`classify` decides which an error is). The history is one
of the gate's call observers (:class:`~supervisor.tools._observer.CallObserver`).

A call with no outcome when the run is checked is *lost* (:func:`supervisor.faults.check`).

Each call has a ``call_id``, unique across histories (a random prefix and a counter),
which the supervisor sends to the server in the request's ``_meta`` under
:data:`CALL_ID_META`; the fixture servers count executions per call id
(:func:`supervisor.testing.servers.executions_by_call`), so a call that ran twice shows.

Times are trio's clock (:func:`trio.current_time`), in seconds. The history also keeps
the events the supervisor published while it was attached (``events``, each with the
trio time it was published at), so calls, events and injected faults line up on one
clock. :meth:`CallHistory.start` pins the history's origin, on both clocks: the reports
show times since then, and place an event known only by its unix ``ts`` with it.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator
from typing import cast

import msgspec
import trio

from ..events._catalog import Event
from ..tools._observer import Call, CallWatch
from ..tools._outcome import (
    CALL_ID_META,
    FAIL,
    INFO,
    OK,
    Outcome,
    classify,
    describe_error,
)

__all__ = [
    "CALL_ID_META",
    "FAIL",
    "INFO",
    "OK",
    "CallHistory",
    "CallRecord",
    "Outcome",
    "classify",
]


class CallRecord(msgspec.Struct, kw_only=True):
    """One tool call, as the history saw it (times on trio's clock, in seconds).

    Attributes:
      call_id: Unique id; sent to the server in ``_meta`` once the call is handed over.
      tool: The name it was called by (the merged catalog name, through the gate).
      server: Its server, once the name was resolved (``None``: never resolved).
      original: The server's own name for the tool, once resolved.
      invoked_at: When it was invoked.
      sent_at: When it was handed to its server (``None``: never).
      deadline: When its timeout ran out, once handed to its server.
      outcome: ``"ok"``, ``"fail"`` or ``"info"``; ``None`` while it has none.
      ended_at: When it got its outcome.
      is_error: The tool reported failure (``isError``): it ran, so the outcome is ok.
      error: What went wrong, as ``"ErrorType: message"`` (``None`` for a clean result).
    """

    call_id: str
    tool: str
    invoked_at: float
    server: str | None = None
    original: str | None = None
    sent_at: float | None = None
    deadline: float | None = None
    outcome: Outcome | None = None
    ended_at: float | None = None
    is_error: bool = False
    error: str | None = None

    @property
    def latency(self) -> float | None:
        """Seconds from invocation to outcome (``None`` without an outcome)."""
        return None if self.ended_at is None else self.ended_at - self.invoked_at

    def meta(self) -> dict[str, str]:
        """The request ``_meta`` entry that names this call to its server."""
        return {CALL_ID_META: self.call_id}


class CallHistory:
    """Every tool call of a run, in invocation order (``calls``), and the events published
    while it was attached to a supervisor (``events``: ``(trio time, event)`` pairs).

    ``prefix`` starts every call id (``"<prefix>-<n>"``); by default a random one, so ids
    from two histories never collide in a shared count file. ``clock`` is trio's by
    default. ``record_events=False`` keeps no events.

    The history is a call observer of the gate (:meth:`watch`): it records each call
    with :meth:`invoke`, :meth:`sent` and then exactly one of :meth:`ok`, :meth:`fail`,
    :meth:`info` or :meth:`ended` (which classifies an exception); any other front end
    (a proxy) may do the same. An outcome is final: a second one is ignored.
    """

    def __init__(
        self,
        *,
        prefix: str | None = None,
        clock: Callable[[], float] | None = None,
        record_events: bool = True,
    ) -> None:
        self.prefix = secrets.token_hex(3) if prefix is None else prefix
        self._clock = trio.current_time if clock is None else clock
        self._numbers = itertools.count(1)
        self.record_events = record_events
        #: every call, in invocation order
        self.calls: list[CallRecord] = []
        #: ``(trio time, event)`` for each event published while attached
        self.events: list[tuple[float, Event]] = []
        #: the history's origin on trio's clock, and the unix time at that moment
        self.origin: float | None = None
        self.origin_wall: float | None = None
        self._by_id: dict[str, CallRecord] = {}

    def __repr__(self) -> str:
        return f"<CallHistory {self.prefix!r}: {len(self.calls)} calls>"

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.calls)

    # -- time ---------------------------------------------------------------------------

    def start(self) -> None:
        """Pin the origin now (once; later calls keep the first)."""
        if self.origin is None:
            self.origin = self._clock()
            self.origin_wall = time.time()

    def now(self) -> float:
        """The clock's time (the origin is pinned on first use)."""
        now = self._clock()
        if self.origin is None:
            self.origin, self.origin_wall = now, time.time()
        return now

    def from_unix(self, ts: float) -> float:
        """The clock's time at unix time ``ts`` (exact while both clocks run alike; under
        a mock clock only events recorded by the history itself are placed exactly)."""
        if self.origin is None or self.origin_wall is None:
            self.start()
        assert self.origin is not None and self.origin_wall is not None
        return self.origin + (ts - self.origin_wall)

    # -- recording ----------------------------------------------------------------------

    def watch(self, call: Call) -> CallWatch:
        """Record ``call``, just invoked through the gate, to its outcome; it is named by
        its record's id (``call.call_id``, unless an earlier observer named it)."""
        record = self.invoke(call.tool)
        if call.call_id is None:
            call.call_id = record.call_id
        return _Recording(self, record)

    def invoke(
        self,
        tool: str,
        *,
        server: str | None = None,
        original: str | None = None,
        deadline: float | None = None,
    ) -> CallRecord:
        """Record a new call of ``tool`` and return its record (no outcome yet)."""
        record = CallRecord(
            call_id=f"{self.prefix}-{next(self._numbers)}",
            tool=tool,
            invoked_at=self.now(),
            server=server,
            original=original,
            deadline=deadline,
        )
        self.calls.append(record)
        self._by_id[record.call_id] = record
        return record

    def sent(self, record: CallRecord, *, deadline: float | None = None) -> None:
        """``record``'s call is handed to its server now, to be answered by ``deadline``."""
        record.sent_at = self.now()
        if deadline is not None:
            record.deadline = deadline

    def ok(
        self,
        record: CallRecord,
        *,
        is_error: bool = False,
        error: str | None = None,
        at: float | None = None,
    ) -> None:
        """``record``'s call was answered (``is_error``: the tool reported failure).

        ``at`` (any outcome's): when the caller learnt it, if earlier than now — a proxy
        that knows only later what became of a call its client gave up on."""
        self._end(record, OK, error, is_error=is_error, at=at)

    def fail(self, record: CallRecord, error: str, *, at: float | None = None) -> None:
        """``record``'s call was definitely not executed, because of ``error``."""
        self._end(record, FAIL, error, at=at)

    def info(self, record: CallRecord, error: str, *, at: float | None = None) -> None:
        """``record``'s call may or may not have executed (``error`` says why)."""
        self._end(record, INFO, error, at=at)

    def ended(self, record: CallRecord, exc: BaseException) -> Outcome:
        """``record``'s call raised ``exc``: record the outcome :func:`classify` gives."""
        outcome, is_error = classify(exc, sent=record.sent_at is not None)
        self._end(record, outcome, describe_error(exc), is_error=is_error)
        return outcome

    def _end(
        self,
        record: CallRecord,
        outcome: Outcome,
        error: str | None,
        *,
        is_error: bool = False,
        at: float | None = None,
    ) -> None:
        if record.outcome is not None:
            return  # the first outcome is the call's
        now = self.now()
        record.outcome = outcome
        record.ended_at = now if at is None else min(at, now)
        record.is_error = is_error
        record.error = error

    def observe(self, event: Event) -> None:
        """Keep ``event``, published now."""
        if self.record_events:
            self.events.append((self.now(), event))

    def tap(self, publish: Callable[[Event], None]) -> Callable[[Event], None]:
        """``publish``, keeping each event in this history first (:meth:`observe`)."""

        def publish_and_keep(event: Event) -> None:
            self.observe(event)
            publish(event)

        return publish_and_keep

    # -- reading ------------------------------------------------------------------------

    def get(self, call_id: str) -> CallRecord | None:
        """The call of that id, if this history has it."""
        return self._by_id.get(call_id)

    def pending(self) -> list[CallRecord]:
        """The calls that have no outcome (yet)."""
        return [c for c in self.calls if c.outcome is None]

    def servers(self) -> list[str]:
        """The servers the calls went to, in order of first call."""
        return list(dict.fromkeys(c.server for c in self.calls if c.server is not None))

    def to_builtins(self) -> dict[str, object]:
        """The history as JSON-ready data: its origin, calls and events (each event a flat
        object with ``t``, its trio time, besides its own fields)."""
        return {
            "prefix": self.prefix,
            "origin": self.origin,
            "origin_wall": self.origin_wall,
            "calls": msgspec.to_builtins(self.calls),
            "events": [{"t": t, **msgspec.to_builtins(event)} for t, event in self.events],
        }

    @classmethod
    def from_builtins(cls, data: dict[str, object]) -> CallHistory:
        """A history read back from :meth:`to_builtins` data (events as plain dicts are
        decoded into events; unknown kinds are skipped)."""
        from ..events._catalog import EVENT_TYPES

        history = cls(prefix=str(data.get("prefix") or "") or None)
        # the data is what to_builtins wrote: its fields have the types it gave them
        history.origin = cast("float | None", data.get("origin"))
        history.origin_wall = cast("float | None", data.get("origin_wall"))
        history.calls = msgspec.convert(data.get("calls") or [], list[CallRecord])
        history._by_id = {c.call_id: c for c in history.calls}
        history._numbers = itertools.count(len(history.calls) + 1)  # new ids stay unique
        for raw in cast("list[dict[str, object]]", data.get("events") or []):
            fields = dict(raw)
            t = float(cast("float", fields.pop("t")))
            cls_ = EVENT_TYPES.get(str(fields.get("kind")))
            if cls_ is None:
                continue
            event = msgspec.convert(fields, cls_)
            history.events.append((t, event))
        return history


class _Recording(CallWatch):
    """One call through the gate, kept in ``history`` as ``record``."""

    __slots__ = ("history", "record")

    def __init__(self, history: CallHistory, record: CallRecord) -> None:
        self.history = history
        self.record = record

    def resolved(self, call: Call) -> None:
        self.record.server, self.record.original = call.server, call.original

    def sending(self, call: Call, timeout: float) -> None:
        self.history.sent(self.record, deadline=self.history.now() + timeout)

    def answered(self, call: Call, result: object) -> None:
        self.history.ok(self.record)

    def failed(self, call: Call, exc: BaseException) -> None:
        self.history.ended(self.record, exc)
