"""The checker: what a run's call history, executions and events say went wrong.

::

    verdict = check(
        history,
        executions=executions_by_call(count_file),   # call id -> times executed
        restart_limits={"*": Intensity(max_restarts=5, within_seconds=60)},
        processes=spawned_pids(history.events),       # after the supervisor's block
    )
    assert verdict.ok, "\\n".join(verdict.problems)

Per server it counts the calls ``ok`` (tool errors among them), ``fail`` and ``info``
(see :mod:`supervisor.tools._outcome`), and finds:

- **lost** calls: invoked, with no answer and no error by their deadline (plus
  ``deadline_slack``) — or, when the run is over (``now=None``), none at all;
- **duplicated** calls: executed more than once, per the servers' execution counts;
- calls reported ``fail`` (definitely not executed) that the server executed all the same;
- calls that outlived their deadline: ended more than ``deadline_slack`` after it.

Then, for whatever inputs it is given, the run's invariants: restarts within each
child's intensity (``supervisor.child.restarted`` events in any sliding window); the
catalog equal to the union of the connected servers' tools once quiet (the two sets);
no process of ours left behind (pids, via ``/proc``, or a check function); resident
memory and open file descriptors bounded after a warm-up (:class:`ResourceSampler`).

The :class:`Verdict` says ``ok`` or not, each problem as one sentence, and converts to
JSON. Nothing here needs a running supervisor: a history read back from a report is
checked the same way.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import msgspec
import trio

from .._util._plural import plural
from ..events._catalog import ChildGaveUp, ChildRestarted, Escalated, LocalSpawned, kind_of
from ..tools._outcome import FAIL, INFO, OK
from ._history import CallHistory, CallRecord

if TYPE_CHECKING:
    from _typeshed import ConvertibleToFloat

__all__ = [
    "DEFAULT_DEADLINE_SLACK",
    "ResourceSample",
    "ResourceSampler",
    "ServerVerdict",
    "Verdict",
    "check",
    "fault_fields",
    "leftover_processes",
    "open_fds",
    "rss_kb",
    "spawned_pids",
    "timed_events",
]

#: Seconds a call may end after its deadline before it counts as outliving it.
DEFAULT_DEADLINE_SLACK = 0.5

#: Call ids listed in one problem sentence before "and N more".
_LISTED = 5

#: The fields of an injected fault record (``supervisor.faults.Injected``).
FAULT_FIELDS = (
    "seq",
    "t",
    "rule",
    "action",
    "direction",
    "method",
    "id",
    "tool",
    "server",
    "detail",
)


# -- the verdict ---------------------------------------------------------------------------


class ServerVerdict(msgspec.Struct, kw_only=True):
    """What the checker found for one server.

    Attributes:
      server: The server's name.
      calls: Calls resolved to it.
      ok: Calls answered (``tool_errors`` of them with the tool's own failure).
      failed: Calls definitely not executed.
      indefinite: Calls that may or may not have executed (``info``).
      in_flight: Calls without an outcome whose deadline had not passed yet.
      lost: Ids of calls with no outcome by their deadline or the end of the run.
      duplicated: Executions per call id, for calls executed more than once.
      executed_though_failed: Ids of calls reported ``fail`` but executed.
      late: Ids of calls that ended more than the slack after their deadline.
      restarts: ``supervisor.child.restarted`` events for it.
      faults: Faults injected into its traffic.
    """

    server: str
    calls: int = 0
    ok: int = 0
    tool_errors: int = 0
    failed: int = 0
    indefinite: int = 0
    in_flight: int = 0
    lost: list[str] = msgspec.field(default_factory=list)
    duplicated: dict[str, int] = msgspec.field(default_factory=dict)
    executed_though_failed: list[str] = msgspec.field(default_factory=list)
    late: list[str] = msgspec.field(default_factory=list)
    restarts: int = 0
    faults: int = 0


class Verdict(msgspec.Struct, kw_only=True):
    """The checker's verdict on a run.

    Attributes:
      ok: No problem found.
      problems: Each problem as one sentence.
      notes: Facts worth knowing that are no problem (faults without a server, a
        supervisor giving up as configured, executions of unknown calls).
      servers: One :class:`ServerVerdict` per server, in order of first appearance.
      unresolved: The calls whose name never resolved to a server (unknown tools),
        counted like a server's (``server`` is empty); ``None`` when there were none.
      checked: The invariants checked (``calls``, ``executions``, ``deadlines``,
        ``restarts``, ``catalog``, ``processes``, ``resources``).
    """

    ok: bool
    problems: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    servers: dict[str, ServerVerdict] = msgspec.field(default_factory=dict)
    unresolved: ServerVerdict | None = None
    checked: list[str] = msgspec.field(default_factory=list)

    def to_builtins(self) -> dict[str, object]:
        """The verdict as JSON-ready data."""
        data: dict[str, object] = msgspec.to_builtins(self)
        return data

    def to_json(self) -> bytes:
        """The verdict as one JSON object."""
        return msgspec.json.encode(self)

    def summary(self) -> str:
        """One line: OK or FAILED, with the counts over every server."""
        total = Counter[str]()
        tallies = list(self.servers.values())
        if self.unresolved is not None:
            tallies.append(self.unresolved)
        for s in tallies:
            total.update(
                calls=s.calls,
                ok=s.ok,
                tool_errors=s.tool_errors,
                failed=s.failed,
                indefinite=s.indefinite,
                lost=len(s.lost),
                duplicated=len(s.duplicated),
                late=len(s.late),
            )
        head = "OK" if self.ok else f"FAILED ({plural(len(self.problems), 'problem')})"
        return (
            f"{head}: {plural(total['calls'], 'call')} to "
            f"{plural(len(self.servers), 'server')}: {total['ok']} ok "
            f"({plural(total['tool_errors'], 'tool error')}), {total['failed']} failed, "
            f"{total['indefinite']} indefinite, {total['lost']} lost, "
            f"{total['duplicated']} duplicated, {total['late']} past their deadline"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *(f"- {p}" for p in self.problems)])


# -- inputs --------------------------------------------------------------------------------


def _seconds(value: object) -> float:
    """A time field of an event's JSON form (a number) as a float; ``float`` raises on
    anything else."""
    return float(cast("ConvertibleToFloat", value))


def _fields(event: object) -> dict[str, object]:
    if isinstance(event, Mapping):
        return dict(event)
    data = msgspec.to_builtins(event)
    if not isinstance(data, dict):
        raise TypeError(f"not an event: {event!r}")
    return data


def timed_events(
    events: Iterable[object], history: CallHistory | None = None
) -> list[tuple[float, dict[str, object]]]:
    """Events as ``(time, fields)`` pairs, on the history's clock, in time order.

    Each event is an ``(time, event)`` pair (what a :class:`CallHistory`'s ``events`` holds), an
    :class:`~supervisor.events.Event`, or a dict (its JSON form); ``fields`` always has
    ``kind``. A dict with ``t`` is at that time; otherwise the event's unix ``ts`` is
    placed by the history's origin (:meth:`CallHistory.from_unix`), or used as it is.
    """
    found: list[tuple[float, dict[str, object]]] = []
    for item in events:
        if isinstance(item, tuple) and len(item) == 2:
            t, event = item
            fields = _fields(event)
            found.append((float(t), fields))
            continue
        fields = _fields(item)
        if "t" in fields:
            found.append((_seconds(fields["t"]), fields))
            continue
        ts = _seconds(fields.get("ts", 0.0))
        found.append((history.from_unix(ts) if history is not None else ts, fields))
    found.sort(key=lambda pair: pair[0])
    return found


def fault_fields(fault: object) -> dict[str, object]:
    """An injected fault record (``supervisor.faults.Injected``, another struct with those
    attribute names, or a dict) as a dict of its fields (missing ones ``None``)."""
    if isinstance(fault, Mapping):
        return {name: fault.get(name) for name in FAULT_FIELDS}
    return {name: getattr(fault, name, None) for name in FAULT_FIELDS}


def spawned_pids(events: Iterable[object]) -> list[int]:
    """The pids of the local servers started, from ``mcp.local.spawned`` events (each form
    :func:`timed_events` takes), in order."""
    pids = []
    for _, fields in timed_events(events):
        pid = fields.get("pid")
        if fields.get("kind") == kind_of(LocalSpawned) and isinstance(pid, int):
            pids.append(int(pid))
    return pids


# -- processes and resources ---------------------------------------------------------------


def _proc_stat(pid: int | str) -> tuple[str, str] | None:
    """``(command name, state)`` of a process, from ``/proc``; ``None`` if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    head, _, tail = stat.rpartition(")")
    name = head.partition("(")[2]
    return name, tail.split()[0]


def leftover_processes(pids: Iterable[int]) -> list[str]:
    """Which of ``pids`` still run (zombies, awaiting their parent's ``wait``, do not),
    each described as ``"pid 1234 (python3, state S): <command line>"``.

    Read from ``/proc`` (Linux). A pid reused by an unrelated process since would show as
    left behind: check soon after the run.
    """
    found = []
    for pid in dict.fromkeys(pids):
        stat = _proc_stat(pid)
        if stat is None or stat[1] == "Z":
            continue
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            raw = b""
        command = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        found.append(f"pid {pid} ({stat[0]}, state {stat[1]}): {command or '?'}")
    return found


def rss_kb(pid: int | str = "self") -> int | None:
    """A process's resident set size in KiB (``VmRSS`` in ``/proc/<pid>/status``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def open_fds(pid: int | str = "self") -> int | None:
    """How many file descriptors a process has open (entries of ``/proc/<pid>/fd``)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class ResourceSample(msgspec.Struct, frozen=True):
    """One sample: when (trio's clock), resident memory in KiB, open file descriptors
    (either ``None`` when ``/proc`` could not tell)."""

    t: float
    rss_kb: int | None
    fds: int | None


class ResourceSampler:
    """Samples a process's resident memory and open file descriptors over a run.

    Call :meth:`sample` at points of the run, or start :meth:`run` in a nursery to sample
    every ``interval`` seconds (trio's clock: an autojump clock jumps over the waits);
    :meth:`check` then bounds the growth after the warm-up samples. ``pid`` is this
    process by default.
    """

    def __init__(
        self, pid: int | str = "self", *, clock: Callable[[], float] | None = None
    ) -> None:
        self.pid = pid
        self._clock = trio.current_time if clock is None else clock
        self.samples: list[ResourceSample] = []

    def __repr__(self) -> str:
        return f"<ResourceSampler pid={self.pid} {len(self.samples)} samples>"

    def sample(self) -> ResourceSample:
        """Take one sample now, keep it and return it."""
        taken = ResourceSample(t=self._clock(), rss_kb=rss_kb(self.pid), fds=open_fds(self.pid))
        self.samples.append(taken)
        return taken

    async def run(
        self, interval: float, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Sample now and every ``interval`` seconds until cancelled."""
        self.sample()
        task_status.started()
        while True:
            await trio.sleep(interval)
            self.sample()

    def growth(self, *, warmup: int = 1) -> tuple[int | None, int | None]:
        """``(KiB, descriptors)``: the most either rose above its first sample after the
        ``warmup`` samples (``None``: not enough samples, or ``/proc`` said nothing)."""
        kept = self.samples[warmup:]

        def rise(values: list[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            if len(known) < 2:
                return None
            return max(known) - known[0]

        return rise([s.rss_kb for s in kept]), rise([s.fds for s in kept])

    def check(
        self,
        *,
        max_rss_growth_kb: float | None = None,
        max_fd_growth: int | None = None,
        warmup: int = 1,
    ) -> list[str]:
        """The problems with the samples after ``warmup``: memory that grew more than
        ``max_rss_growth_kb``, descriptors that grew more than ``max_fd_growth``, or too
        few samples to tell."""
        if max_rss_growth_kb is None and max_fd_growth is None:
            return []
        if len(self.samples) < warmup + 2:
            return [
                f"resources: {len(self.samples)} samples are too few to bound growth "
                f"after a warm-up of {warmup} (take at least {warmup + 2})"
            ]
        rss, fds = self.growth(warmup=warmup)
        span = self.samples[-1].t - self.samples[warmup].t
        problems = []
        if max_rss_growth_kb is not None:
            if rss is None:
                problems.append("resources: resident memory could not be read from /proc")
            elif rss > max_rss_growth_kb:
                problems.append(
                    f"resident memory grew by {rss} KiB over {span:.1f} s after the warm-up, "
                    f"more than the {max_rss_growth_kb:g} KiB allowed"
                )
        if max_fd_growth is not None:
            if fds is None:
                problems.append("resources: open file descriptors could not be read from /proc")
            elif fds > max_fd_growth:
                problems.append(
                    f"open file descriptors grew by {fds} over {span:.1f} s after the warm-up, "
                    f"more than the {max_fd_growth} allowed"
                )
        return problems


# -- the check -----------------------------------------------------------------------------


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown if len(ids) <= _LISTED else f"{shown} and {len(ids) - _LISTED} more"


class _Intensity(Protocol):
    """What :func:`_limit` reads of an :class:`~supervisor.actors.Intensity` (or a
    struct with its attribute names)."""

    @property
    def max_restarts(self) -> float: ...

    @property
    def within_seconds(self) -> float: ...


def _limit(value: object) -> tuple[float, float]:
    """``(max restarts, within seconds)`` of an ``Intensity`` or a pair."""
    if isinstance(value, tuple):
        most, within = value
        return float(most), float(within)
    intensity = cast("_Intensity", value)  # read as the docstring says: raises if it is not
    return float(intensity.max_restarts), float(intensity.within_seconds)


def _describe_limit(most: float, within: float) -> str:
    if within == math.inf:
        return f"{most:g} in all"
    return f"{most:g} in {within:g} s"


def _worst_window(times: list[float], most: float, within: float) -> tuple[int, float, float]:
    """The most restarts in any window of ``within`` seconds, and that window; the first
    window found holding more than ``most``."""
    times = sorted(times)
    best = (0, 0.0, 0.0)
    start = 0
    for end, t in enumerate(times):
        while t - times[start] > within:
            start += 1
        count = end - start + 1
        if count > best[0]:
            best = (count, times[start], t)
            if count > most:
                break
    return best


def _where(record: CallRecord, origin: float) -> str:
    return f"call {record.call_id} ({record.tool}, invoked at {record.invoked_at - origin:.3f} s)"


class _Findings:
    """What one :func:`check` found so far: a verdict per server (and one for calls that
    named none), the problems and notes in the order found, and the invariants checked."""

    def __init__(self, origin: float) -> None:
        #: the history's origin on its clock: times in sentences are since then
        self.origin = origin
        self.servers: dict[str, ServerVerdict] = {}
        self.unresolved: ServerVerdict | None = None
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.checked = ["calls", "deadlines"]

    def server(self, name: str) -> ServerVerdict:
        """The verdict on server ``name``, begun on first use (servers in that order)."""
        found = self.servers.get(name)
        if found is None:
            found = self.servers[name] = ServerVerdict(server=name)
        return found

    def bucket(self, record: CallRecord) -> ServerVerdict:
        """Where ``record`` is counted: its server's verdict, or the unresolved calls'."""
        if record.server is not None:
            return self.servers[record.server]
        if self.unresolved is None:
            self.unresolved = ServerVerdict(server="")
        return self.unresolved

    def where(self, record: CallRecord) -> str:
        return _where(record, self.origin)

    def verdict(self) -> Verdict:
        return Verdict(
            ok=not self.problems,
            problems=self.problems,
            notes=self.notes,
            servers=self.servers,
            unresolved=self.unresolved,
            checked=self.checked,
        )


def check(
    history: CallHistory | Iterable[CallRecord],
    *,
    executions: Mapping[str, int] | None = None,
    events: Iterable[object] | None = None,
    faults: Iterable[object] | None = None,
    now: float | None = None,
    deadline_slack: float = DEFAULT_DEADLINE_SLACK,
    restart_limits: Mapping[str, object] | object | None = None,
    catalog: tuple[Iterable[str], Iterable[str]] | None = None,
    processes: Iterable[int] | Callable[[], Iterable[str]] | None = None,
    resources: ResourceSampler | None = None,
    max_rss_growth_kb: float | None = None,
    max_fd_growth: int | None = None,
    warmup: int = 1,
) -> Verdict:
    """Check a run; see the module docstring.

    ``history`` is a :class:`CallHistory` (or its calls). ``executions`` maps call ids to
    how often the servers executed them (:func:`~supervisor.testing.servers.executions_by_call`).
    ``events`` default to the history's own; ``faults`` are the injected fault records
    (counted per server). ``now`` (trio's clock) checks a run still going: a call without
    an outcome is lost only once its deadline plus ``deadline_slack`` has passed; by
    default the run is over and every such call is lost.

    ``restart_limits`` maps a child's name (``"*"``: any other) to an
    :class:`~supervisor.actors.Intensity` or a ``(max_restarts, within_seconds)`` pair;
    one value alone applies to every child. ``catalog`` is ``(the names the catalog
    lists, the union of the connected servers' tools)``, taken once quiet. ``processes``
    are the pids of processes that must be gone (:func:`spawned_pids`, after the
    supervisor's block), or a function returning descriptions of those left behind.
    ``resources`` with ``max_rss_growth_kb`` / ``max_fd_growth`` bounds the growth after
    ``warmup`` samples (:meth:`ResourceSampler.check`).
    """
    owner = history if isinstance(history, CallHistory) else None
    calls = list(history.calls if isinstance(history, CallHistory) else history)
    if events is None:
        events = owner.events if owner is not None else ()
    timed = timed_events(events, owner)
    found = _Findings(owner.origin if owner is not None and owner.origin is not None else 0.0)
    fault_list = [fault_fields(f) for f in faults or ()]
    _name_servers(found, calls, timed, fault_list)
    for record in calls:
        _check_call(found, record, now, deadline_slack)
    if executions is not None:
        _check_executions(found, calls, executions)
    restarts = _restarts(found, timed)
    if restart_limits is not None:
        _check_restarts(found, restarts, restart_limits)
    if catalog is not None:
        _check_catalog(found, set(catalog[0]), set(catalog[1]))
    if processes is not None:
        _check_processes(found, processes)
    if resources is not None:
        found.checked.append("resources")
        found.problems.extend(
            resources.check(
                max_rss_growth_kb=max_rss_growth_kb, max_fd_growth=max_fd_growth, warmup=warmup
            )
        )
    if fault_list:
        _count_faults(found, fault_list)
    return found.verdict()


def _name_servers(
    found: _Findings,
    calls: list[CallRecord],
    timed: list[tuple[float, dict[str, object]]],
    faults: list[dict[str, object]],
) -> None:
    """Begin a verdict for each server the calls, the events and the faults name, in
    order of first appearance."""
    for record in calls:
        if record.server is not None:
            found.server(record.server)
    for _, fields in timed:
        if isinstance(fields.get("server"), str):
            found.server(str(fields["server"]))
    for fault in faults:
        if isinstance(fault["server"], str):
            found.server(fault["server"])


def _check_call(
    found: _Findings, record: CallRecord, now: float | None, deadline_slack: float
) -> None:
    """Count ``record`` by its outcome; a problem if it was lost or outlived its deadline."""
    bucket = found.bucket(record)
    bucket.calls += 1
    on = f" to server {record.server!r}" if record.server is not None else ""
    if record.outcome is None:
        due = record.deadline
        if now is not None and (due is None or now <= due + deadline_slack):
            bucket.in_flight += 1
            return
        bucket.lost.append(record.call_id)
        by = "by the end of the run" if now is None else "by its deadline"
        found.problems.append(f"{found.where(record)}{on} was lost: no answer and no error {by}")
        return
    if record.outcome == OK:
        bucket.ok += 1
        bucket.tool_errors += record.is_error
    elif record.outcome == FAIL:
        bucket.failed += 1
    elif record.outcome == INFO:
        bucket.indefinite += 1
    if (
        record.deadline is not None
        and record.ended_at is not None
        and record.ended_at - record.deadline > deadline_slack
    ):
        bucket.late.append(record.call_id)
        found.problems.append(
            f"{found.where(record)}{on} outlived its deadline: it ended "
            f"{record.ended_at - record.deadline:.3f} s after it ({record.outcome}), "
            f"more than the {deadline_slack:g} s allowed"
        )


def _check_executions(
    found: _Findings, calls: list[CallRecord], executions: Mapping[str, int]
) -> None:
    """Problems for calls executed more than once, and for calls said not to have run
    that did; a note for executions of calls the history never invoked."""
    found.checked.append("executions")
    by_id = {record.call_id: record for record in calls}
    unknown = 0
    for call_id, count in executions.items():
        record = by_id.get(call_id)
        if record is None:
            unknown += count
            continue
        name = record.server or ""
        bucket = found.servers.get(name) if name else None
        on = f" on server {name!r}" if name else ""
        if count > 1:
            if bucket is not None:
                bucket.duplicated[call_id] = count
            found.problems.append(
                f"{found.where(record)}{on} was executed {count} times: duplicated"
            )
        if count > 0 and record.outcome == FAIL:
            if bucket is not None:
                bucket.executed_though_failed.append(call_id)
            found.problems.append(
                f"{found.where(record)}{on} was reported as not executed "
                f"({record.error}) but was executed {plural(count, 'time')}"
            )
    if unknown:
        found.notes.append(
            f"{plural(unknown, 'execution')} carry call ids this history never invoked"
        )


def _restarts(
    found: _Findings, timed: list[tuple[float, dict[str, object]]]
) -> dict[str, list[float]]:
    """When each child was restarted, from the events, counted on its server's verdict
    (a note for a child that is no server); a note for each give-up and escalation."""
    restarts: dict[str, list[float]] = {}
    for t, fields in timed:
        kind = fields.get("kind")
        if kind == kind_of(ChildRestarted):
            restarts.setdefault(str(fields.get("child")), []).append(t)
        elif kind in (kind_of(ChildGaveUp), kind_of(Escalated)):
            what = "gave up on" if kind == kind_of(ChildGaveUp) else "escalated over"
            found.notes.append(
                f"supervisor {fields.get('supervisor')!r} {what} {fields.get('child')!r} "
                f"after {fields.get('restarts')} restarts: {fields.get('reason')}"
            )
    for child, times in restarts.items():
        if child in found.servers:
            found.servers[child].restarts = len(times)
        else:
            found.notes.append(f"{child!r} was restarted {plural(len(times), 'time')}")
    return restarts


def _check_restarts(
    found: _Findings, restarts: Mapping[str, list[float]], restart_limits: object
) -> None:
    """A problem for each child restarted more often, in some window, than its limit."""
    found.checked.append("restarts")
    if isinstance(restart_limits, Mapping):
        limits = dict(restart_limits)
    else:
        limits = {"*": restart_limits}
    for child, times in restarts.items():
        limit = limits.get(child, limits.get("*"))
        if limit is None:
            continue
        most, within = _limit(limit)
        if most == math.inf:
            continue
        count, first, last = _worst_window(times, most, within)
        if count > most:
            found.problems.append(
                f"{child!r} was restarted {count} times between {first - found.origin:.3f} s "
                f"and {last - found.origin:.3f} s, more than its intensity allows "
                f"({_describe_limit(most, within)})"
            )


def _check_catalog(found: _Findings, listed: set[str], expected: set[str]) -> None:
    """A problem if the catalog, once quiet, is not the union of the servers' tools."""
    found.checked.append("catalog")
    if listed == expected:
        return
    missing, extra = sorted(expected - listed), sorted(listed - expected)
    said = []
    if missing:
        said.append(f"missing {_ids(missing)}")
    if extra:
        said.append(f"listing {_ids(extra)}, which no connected server offers")
    found.problems.append(
        "the catalog is not the union of the connected servers' tools once quiet: "
        + "; ".join(said)
    )


def _check_processes(
    found: _Findings, processes: Iterable[int] | Callable[[], Iterable[str]]
) -> None:
    """A problem for each process of the run left behind."""
    found.checked.append("processes")
    left = list(processes()) if callable(processes) else leftover_processes(processes)
    for description in left:
        found.problems.append(f"a process was left behind: {description}")


def _count_faults(found: _Findings, faults: list[dict[str, object]]) -> None:
    """Count the injected faults per server; a note of them all by action, and one of
    those that named no server."""
    unattributed = 0
    actions = Counter(str(f["action"]) for f in faults)
    for fault in faults:
        if isinstance(fault["server"], str):
            found.servers[fault["server"]].faults += 1
        else:
            unattributed += 1
    kinds = ", ".join(f"{action} ×{n}" for action, n in sorted(actions.items()))
    found.notes.append(f"{plural(len(faults), 'fault')} injected: {kinds}")
    if unattributed:
        found.notes.append(f"{plural(unattributed, 'injected fault')} named no server")
