"""Reports of a run: its data as JSON, and one self-contained HTML page.

::

    write_json("run.json", verdict, history, faults=engine.log)
    write_html("run.html", verdict, history, faults=engine.log)

The JSON holds the verdict, the history (calls and events, on trio's clock, with its
origin) and the injected faults; :meth:`CallHistory.from_builtins` reads its history back.

The HTML page needs nothing but a browser — inline CSS and inline SVG, no script, no
external asset, every text escaped. At the top, the verdict: OK or FAILED, each problem,
and a table of each server's calls. Then one timeline per server on one time axis
(seconds since the history's origin):

- its state as bands — connecting, connected, degraded, down, failed, stopped — from
  the ``mcp.*`` and ``supervisor.child.*`` events, with a tick at each restart;
- each injected fault as a marker (hover: which rule did what to which message), and a
  faint line down through the calls;
- each call as a point at its invocation time, as high as its latency (log scale),
  shaped and coloured by outcome: ok, tool error, fail, info; lost calls as crosses on
  a lane of their own.

A legend explains the colours; hovering any mark shows its details (SVG ``<title>``).
Then the faults and the calls that did not end ``ok``, as tables.

The timelines and the legend are drawn by :mod:`supervisor.timeline`, the drawing
the web dashboard's live strips share; this module says what goes on them.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from .._util._plural import plural
from ..events._catalog import (
    ChildGaveUp,
    ChildRestarted,
    Connected,
    Connecting,
    Disconnected,
    Escalated,
    HealthRecovered,
    HealthStale,
    LocalCrashed,
    LocalShutdown,
    ServerErrored,
    kind_of,
)
from ..server._status import ServerStatus
from ..timeline._draw import (
    OUTCOMES,
    TIMELINE_CSS,
    Band,
    Layout,
    Marker,
    Point,
    Scale,
    Tick,
    decade,
    draw_timeline,
    legend,
    seconds,
)
from ..timeline._element import markup
from ._checker import Verdict, check, fault_fields, timed_events
from ._history import FAIL, OK, CallHistory, CallRecord

__all__ = ["REPORT_STATES", "render_html", "server_states", "write_html", "write_json"]

#: The states the report's timelines show (see :func:`server_states`): the statuses a
#: server's events tell.
REPORT_STATES = (
    ServerStatus.IDLE,
    ServerStatus.CONNECTING,
    ServerStatus.CONNECTED,
    ServerStatus.DEGRADED,
    ServerStatus.DISCONNECTED,
    ServerStatus.FAILED,
    ServerStatus.STOPPED,
)

#: The report's layout: a faults lane and a lost lane above the latency plot.
_LAYOUT = Layout(faults=True, lost=True)

#: Rows of the table of calls that did not end ok.
_MAX_ROWS = 500
#: Tables up to this many rows are shown open.
_OPEN_ROWS = 12


def _open(rows: int) -> str:
    return " open" if rows <= _OPEN_ROWS else ""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _outcome_class(record: CallRecord) -> str:
    if record.outcome is None:
        return "lost"
    if record.outcome == OK:
        return "tool-error" if record.is_error else "ok"
    return "fail" if record.outcome == FAIL else "info"


# -- states --------------------------------------------------------------------------------


def server_states(
    timed: Iterable[tuple[float, Mapping[str, object]]], server: str, start: float, end: float
) -> list[tuple[float, float, str]]:
    """``(from, to, state)`` bands of ``server`` between ``start`` and ``end``, from the
    events (``(time, fields)`` pairs, in time order; see :func:`timed_events`)."""
    state, since = ServerStatus.IDLE, start
    bands: list[tuple[float, float, str]] = []

    def move(t: float, new: ServerStatus) -> None:
        nonlocal state, since
        if new == state:
            return
        t = min(max(t, start), end)
        if t > since:
            bands.append((since, t, state.value))
        state, since = new, max(since, t)

    for t, fields in timed:
        kind = fields.get("kind")
        if kind in (kind_of(ChildGaveUp), kind_of(Escalated)):
            if fields.get("child") == server:
                move(t, ServerStatus.FAILED)
            continue
        if fields.get("server") != server:
            continue
        if kind == kind_of(Connecting):
            move(t, ServerStatus.CONNECTING)
        elif kind == kind_of(Connected):
            move(t, ServerStatus.CONNECTED)
        elif kind == kind_of(HealthStale):
            move(t, ServerStatus.DEGRADED)
        elif kind == kind_of(HealthRecovered):
            if state is ServerStatus.DEGRADED:
                move(t, ServerStatus.CONNECTED)
        elif kind == kind_of(Disconnected):
            clean = fields.get("was_clean")
            move(t, ServerStatus.STOPPED if clean else ServerStatus.DISCONNECTED)
        elif kind == kind_of(LocalCrashed):
            move(t, ServerStatus.DISCONNECTED)
        elif kind == kind_of(LocalShutdown):
            move(t, ServerStatus.STOPPED)
        elif kind == kind_of(ServerErrored):
            again = fields.get("retry_in") is not None
            move(t, ServerStatus.DISCONNECTED if again else ServerStatus.FAILED)
    if end > since:
        bands.append((since, end, state.value))
    return bands


# -- the page ------------------------------------------------------------------------------

_CSS = (
    """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328;
       margin: 0; padding: 20px 28px 40px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 16px; margin: 22px 0 6px; }
.verdict { font-size: 16px; padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
.verdict.ok { background: #dafbe1; border: 1px solid #2da44e; }
.verdict.failed { background: #ffebe9; border: 1px solid #cf222e; }
.verdict strong { margin-right: 8px; }
ul.problems { margin: 6px 0 10px; padding-left: 22px; color: #82071e; }
ul.notes { margin: 6px 0 10px; padding-left: 22px; color: #57606a; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border-bottom: 1px solid #d0d7de; padding: 3px 10px; text-align: left;
         vertical-align: top; }
table.servers td, table.servers th { text-align: right; }
table.servers td:first-child, table.servers th:first-child { text-align: left; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.text { max-width: 640px; overflow-wrap: anywhere; }
td.bad { color: #cf222e; font-weight: 600; }
th { background: #f6f8fa; font-weight: 600; }
section.timeline { margin: 8px 0 4px; }
section.timeline h2 { margin: 14px 0 2px; }
section.timeline h2 small { font-weight: 400; color: #57606a; margin-left: 8px; }
footer { margin-top: 24px; color: #57606a; font-size: 12px; }
"""
    + TIMELINE_CSS
)


def _fault_title(fault: Mapping[str, object], at: float) -> str:
    parts = [f"fault #{fault['seq']} at {at:.3f} s: {fault['action']}"]
    if fault.get("direction"):
        parts.append(str(fault["direction"]))
    if fault.get("method"):
        parts.append(str(fault["method"]))
    if fault.get("tool"):
        parts.append(f"tool {fault['tool']}")
    if fault.get("id") is not None:
        parts.append(f"id {fault['id']}")
    if fault.get("rule") is not None:
        parts.append(f"rule {fault['rule']}")
    if fault.get("detail"):
        parts.append(str(fault["detail"]))
    return ", ".join(parts)


def _call_title(record: CallRecord, origin: float) -> str:
    kind = _outcome_class(record)
    text = (
        f"{record.call_id} {record.tool} — {kind}, invoked at "
        f"{record.invoked_at - origin:.3f} s, latency {seconds(record.latency)}"
    )
    if record.error:
        text += f": {record.error}"
    return text


def _timeline(
    server: str,
    calls: list[CallRecord],
    timed: list[tuple[float, dict[str, object]]],
    faults: list[tuple[float, dict[str, object]]],
    scale: Scale,
    origin: float,
    verdict: Verdict,
) -> str:
    restarts = [
        Tick(
            t,
            f"restart {fields.get('restarts')} at {t - origin:.3f} s "
            f"({fields.get('strategy')}): {fields.get('reason')}",
        )
        for t, fields in timed
        if fields.get("kind") == kind_of(ChildRestarted) and fields.get("child") == server
    ]
    markers = [
        Marker(t, str(fault["action"]), _fault_title(fault, t - origin)) for t, fault in faults
    ]
    found = verdict.servers.get(server)
    lost = set(found.lost) if found is not None else set()
    points = []
    for record in calls:
        kind = _outcome_class(record)
        if kind == "lost" and record.call_id not in lost:
            continue  # in flight when checked
        points.append(Point(record.invoked_at, record.latency, kind, _call_title(record, origin)))
    drawing = draw_timeline(
        server,
        scale,
        ticks=[(scale.start + tick, f"{tick:g} s") for tick in scale.round_ticks()],
        bands=[Band(*band) for band in server_states(timed, server, scale.start, scale.end)],
        when=lambda t: f"{t - origin:.3f} s",
        restarts=restarts,
        calls=points,
        markers=markers,
    )
    return markup(drawing)


def _legend() -> str:
    return markup(legend(REPORT_STATES, OUTCOMES, faults=True))


def _server_table(verdict: Verdict) -> str:
    head = (
        "<tr><th>server</th><th>calls</th><th>ok</th><th>tool errors</th><th>failed</th>"
        "<th>indefinite</th><th>lost</th><th>duplicated</th><th>past deadline</th>"
        "<th>restarts</th><th>faults</th></tr>"
    )
    rows = []
    for s in verdict.servers.values():

        def cell(value: int, bad: bool = False) -> str:
            return f'<td class="bad">{value}</td>' if bad and value else f"<td>{value}</td>"

        rows.append(
            f'<tr data-server="{_e(s.server)}"><td>{_e(s.server)}</td>{cell(s.calls)}'
            f"{cell(s.ok)}{cell(s.tool_errors)}{cell(s.failed)}{cell(s.indefinite)}"
            f"{cell(len(s.lost), True)}{cell(len(s.duplicated), True)}"
            f"{cell(len(s.late), True)}{cell(s.restarts)}{cell(s.faults)}</tr>"
        )
    return f'<table class="servers">{head}{"".join(rows)}</table>'


def _fault_table(faults: list[tuple[float, dict[str, object]]], origin: float) -> str:
    if not faults:
        return ""
    rows = []
    for t, f in faults:
        numbers = [_e(f["seq"]), f"{t - origin:.3f} s"]
        cells = [
            _e(f["server"] if f["server"] is not None else "—"),
            _e(f["action"]),
            _e(f["direction"] or "—"),
            _e(f["method"] or "—"),
            _e(f["tool"] or "—"),
            _e(f["rule"]),
        ]
        tds = "".join(f'<td class="num">{c}</td>' for c in numbers)
        tds += "".join(f"<td>{c}</td>" for c in cells)
        rows.append(f'<tr>{tds}<td class="text">{_e(f["detail"] or "")}</td></tr>')
    head = (
        '<tr><th class="num">#</th><th class="num">at</th><th>server</th><th>action</th>'
        "<th>direction</th><th>method</th><th>tool</th><th>rule</th><th>detail</th></tr>"
    )
    return (
        f'<section class="faults"><h2>Injected faults ({len(faults)})</h2>'
        f"<details{_open(len(faults))}><summary>the table</summary>"
        f"<table>{head}{''.join(rows)}</table>"
        "</details></section>"
    )


def _calls_table(calls: list[CallRecord], origin: float) -> str:
    shown = [c for c in calls if c.outcome != OK or c.is_error]
    if not shown:
        return ""
    rows = []
    for c in shown[:_MAX_ROWS]:
        cells = [_e(c.call_id), _e(c.server or "—"), _e(c.tool), _e(_outcome_class(c))]
        numbers = [f"{c.invoked_at - origin:.3f} s", _e(seconds(c.latency))]
        tds = "".join(f"<td>{cell}</td>" for cell in cells)
        tds += "".join(f'<td class="num">{cell}</td>' for cell in numbers)
        rows.append(f'<tr>{tds}<td class="text">{_e(c.error or "")}</td></tr>')
    more = f"<p>… and {len(shown) - _MAX_ROWS} more.</p>" if len(shown) > _MAX_ROWS else ""
    head = (
        "<tr><th>call</th><th>server</th><th>tool</th><th>outcome</th>"
        '<th class="num">invoked</th><th class="num">latency</th><th>error</th></tr>'
    )
    return (
        f'<section class="calls"><h2>Calls that did not simply succeed ({len(shown)})</h2>'
        f"<details{_open(len(shown))}><summary>the table</summary>"
        f"<table>{head}{''.join(rows)}</table>"
        f"{more}</details></section>"
    )


def _inputs(
    history: CallHistory,
    events: Iterable[object] | None,
    faults: Iterable[object] | None,
    faults_origin: float | None,
) -> tuple[list[tuple[float, dict[str, object]]], list[tuple[float, dict[str, object]]], float]:
    origin = history.origin if history.origin is not None else 0.0
    timed = timed_events(history.events if events is None else events, history)
    base = origin if faults_origin is None else faults_origin
    placed = []
    for fault in faults or ():
        fields = fault_fields(fault)
        t = fields["t"]
        placed.append((base + (float(t) if isinstance(t, int | float) else 0.0), fields))
    placed.sort(key=lambda pair: pair[0])
    return timed, placed, origin


def render_html(
    verdict: Verdict | None,
    history: CallHistory,
    events: Iterable[object] | None = None,
    faults: Iterable[object] | None = None,
    *,
    title: str = "Fault-injection run",
    faults_origin: float | None = None,
) -> str:
    """The report page as a string; see :func:`write_html`."""
    events = None if events is None else list(events)
    faults = None if faults is None else list(faults)
    if verdict is None:
        verdict = check(history, events=events, faults=faults)
    timed, placed, origin = _inputs(history, events, faults, faults_origin)
    calls = list(history.calls)

    servers = list(verdict.servers)
    for name in history.servers():
        if name not in servers:
            servers.append(name)
    lone = servers[0] if len(servers) == 1 else None
    by_server: dict[str | None, list[tuple[float, dict[str, object]]]] = {}
    for t, fault in placed:
        name = fault["server"] if isinstance(fault["server"], str) else lone
        by_server.setdefault(name, []).append((t, fault))

    times = [origin]
    for c in calls:
        times.append(c.invoked_at)
        if c.ended_at is not None:
            times.append(c.ended_at)
    times += [t for t, _ in timed] + [t for t, _ in placed]
    end = max(times)
    end += max((end - origin) * 0.02, 0.001)
    scale = Scale(origin, end, [c.latency for c in calls if c.latency is not None], _LAYOUT)

    status = "ok" if verdict.ok else "failed"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>",
        f'<body data-verdict="{status}"><header>',
        f"<h1>{_e(title)}</h1>",
        f'<p class="verdict {status}"><strong>{"OK" if verdict.ok else "FAILED"}</strong>'
        f"{_e(verdict.summary().partition(': ')[2])}; a run of {end - origin:.1f} s</p>",
    ]
    if verdict.problems:
        items = "".join(f"<li>{_e(p)}</li>" for p in verdict.problems)
        parts.append(f'<ul class="problems">{items}</ul>')
    parts.append(_server_table(verdict))
    notes = list(verdict.notes)
    if verdict.unresolved is not None:
        said = plural(verdict.unresolved.calls, "call")
        notes.append(f"{said} named no known tool (no server to send them to)")
    notes.append("checked: " + ", ".join(verdict.checked))
    parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    parts.append("</header>")
    parts.append(_legend())
    parts.append("<main>")
    for name in servers:
        mine = [c for c in calls if c.server == name]
        s = verdict.servers.get(name)
        detail = (
            f"{plural(s.calls, 'call')}, {plural(s.restarts, 'restart')}, "
            f"{plural(s.faults, 'fault')}"
            if s is not None
            else plural(len(mine), "call")
        )
        parts.append(
            f'<section class="timeline" data-server="{_e(name)}">'
            f"<h2>{_e(name)}<small>{_e(detail)}</small></h2>"
            + _timeline(name, mine, timed, by_server.get(name, []), scale, origin, verdict)
            + "</section>"
        )
    if by_server.get(None):
        parts.append(
            '<section class="unattributed"><h2>Faults naming no server</h2>'
            + _timeline("", [], [], by_server[None], scale, origin, verdict)
            + "</section>"
        )
    parts.append("</main>")
    parts.append(_fault_table(placed, origin))
    parts.append(_calls_table(calls, origin))
    parts.append(
        f"<footer>Times are seconds since the history's origin (trio's clock); latency on a "
        f"log scale from {_e(decade(scale.lo))} to {_e(decade(scale.hi))}. "
        "Hover a mark for its details.</footer>"
    )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_html(
    path: str | os.PathLike[str],
    verdict: Verdict | None,
    history: CallHistory,
    events: Iterable[object] | None = None,
    faults: Iterable[object] | None = None,
    *,
    title: str = "Fault-injection run",
    faults_origin: float | None = None,
) -> Path:
    """Write the self-contained report page to ``path`` and return it (see the module
    docstring). ``verdict`` ``None`` checks the history first; ``events`` default to the
    history's own; ``faults`` are injected fault records, placed at ``faults_origin``
    plus their ``t`` (default: the history's origin; pass the engine's start on trio's
    clock when it started elsewhen)."""
    target = Path(path)
    text = render_html(verdict, history, events, faults, title=title, faults_origin=faults_origin)
    target.write_text(text, encoding="utf-8")
    return target


def write_json(
    path: str | os.PathLike[str],
    verdict: Verdict | None,
    history: CallHistory,
    events: Iterable[object] | None = None,
    faults: Iterable[object] | None = None,
) -> Path:
    """Write the run's data to ``path`` as one JSON object and return it: ``verdict``,
    ``history`` (origin, calls and events; given ``events`` replace the history's own, as
    ``{"t": ..., ...}`` objects) and ``faults`` (their records, as objects)."""
    events = None if events is None else list(events)
    faults = None if faults is None else list(faults)
    if verdict is None:
        verdict = check(history, events=events, faults=faults)
    data = history.to_builtins()
    if events is not None:
        data["events"] = [{**fields, "t": t} for t, fields in timed_events(events, history)]
    document = {
        "verdict": verdict.to_builtins(),
        "history": data,
        "faults": [fault_fields(f) for f in faults or ()],
    }
    target = Path(path)
    target.write_bytes(msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n")
    return target
