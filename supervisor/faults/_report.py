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
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from ._checker import Verdict, check, fault_fields, plural, timed_events
from ._history import FAIL, OK, CallHistory, CallRecord

__all__ = ["STATE_COLOURS", "render_html", "server_states", "write_html", "write_json"]

#: A server's states on the timeline, and their colours.
STATE_COLOURS = {
    "idle": "#eaeef2",
    "connecting": "#d4a72c",
    "connected": "#2da44e",
    "degraded": "#fb8f44",
    "down": "#cf222e",
    "failed": "#82071e",
    "stopped": "#8c959f",
}

#: A call's outcome classes, their colours and what the legend calls them.
OUTCOMES = {
    "ok": ("#1a7f37", "ok (answered)"),
    "tool-error": ("#0969da", "tool error (isError: it ran)"),
    "fail": ("#bc4c00", "fail (not executed)"),
    "info": ("#8250df", "info (may have executed)"),
    "lost": ("#cf222e", "lost (no outcome)"),
}

_FAULT_COLOUR = "#24292f"

# The SVG's geometry (user units; the page scales it to its width).
_WIDTH = 1160
_LEFT = 84
_RIGHT = 16
_STATE_Y, _STATE_H = 8, 18
_FAULT_Y, _FAULT_H = 34, 14
_LOST_Y = 62
_PLOT_TOP, _PLOT_BOTTOM = 76, 206
_AXIS_Y = 212
_HEIGHT = 236

#: Rows of the table of calls that did not end ok.
_MAX_ROWS = 500
#: Tables up to this many rows are shown open.
_OPEN_ROWS = 12


def _open(rows: int) -> str:
    return " open" if rows <= _OPEN_ROWS else ""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _n(value: float) -> str:
    """A coordinate, short."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f} s"


def _decade(value: float) -> str:
    """A latency tick's label: ``10 µs``, ``1 ms``, ``100 ms``, ``10 s``."""
    if value >= 1:
        return f"{value:g} s"
    if value >= 1e-3:
        return f"{round(value * 1e3, 6):g} ms"
    return f"{round(value * 1e6, 6):g} µs"


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
    state, since = "idle", start
    bands: list[tuple[float, float, str]] = []

    def move(t: float, new: str) -> None:
        nonlocal state, since
        if new == state:
            return
        t = min(max(t, start), end)
        if t > since:
            bands.append((since, t, state))
        state, since = new, max(since, t)

    for t, fields in timed:
        kind = fields.get("kind")
        if kind in ("supervisor.child.gave_up", "supervisor.escalated"):
            if fields.get("child") == server:
                move(t, "failed")
            continue
        if fields.get("server") != server:
            continue
        if kind == "mcp.connecting":
            move(t, "connecting")
        elif kind == "mcp.connected":
            move(t, "connected")
        elif kind == "mcp.health.stale":
            move(t, "degraded")
        elif kind == "mcp.health.recovered":
            if state == "degraded":
                move(t, "connected")
        elif kind == "mcp.disconnected":
            move(t, "stopped" if fields.get("was_clean") else "down")
        elif kind == "mcp.local.crashed":
            move(t, "down")
        elif kind == "mcp.local.shutdown":
            move(t, "stopped")
        elif kind == "mcp.error":
            move(t, "down" if fields.get("retry_in") is not None else "failed")
    if end > since:
        bands.append((since, end, state))
    return bands


# -- the page ------------------------------------------------------------------------------

_CSS = """
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
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 10px 0 4px;
          color: #57606a; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
section.timeline { margin: 8px 0 4px; }
section.timeline h2 { margin: 14px 0 2px; }
section.timeline h2 small { font-weight: 400; color: #57606a; margin-left: 8px; }
svg.tl { width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: #57606a; }
svg .lane { font-weight: 600; fill: #1f2328; }
.grid { stroke: #d0d7de; stroke-width: 1; }
.band { fill: #f6f8fa; }
.faultline { stroke: #24292f; stroke-opacity: 0.18; stroke-dasharray: 3 3; }
.restart { stroke: #1f2328; stroke-width: 2; }
footer { margin-top: 24px; color: #57606a; font-size: 12px; }
"""


class _Scale:
    """Time (trio's clock) to x, latency to y (log), shared by every timeline of the page;
    ``start`` is the origin: ticks are seconds since then."""

    def __init__(self, start: float, end: float, latencies: list[float]) -> None:
        self.start = start
        self.end = end if end > start else start + 1.0
        positive = [v for v in latencies if v > 0]
        low = min(positive, default=1e-3)
        high = max(positive, default=1.0)
        self.lo = 10 ** math.floor(math.log10(max(low, 1e-5)))
        self.hi = 10 ** math.ceil(math.log10(max(high, self.lo * 10)))
        if self.hi <= self.lo:
            self.hi = self.lo * 10

    def x(self, t: float) -> float:
        span = _WIDTH - _LEFT - _RIGHT
        return (
            _LEFT
            + (min(max(t, self.start), self.end) - self.start) / (self.end - self.start) * span
        )

    def y(self, latency: float) -> float:
        v = min(max(latency, self.lo), self.hi)
        share = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return _PLOT_BOTTOM - share * (_PLOT_BOTTOM - _PLOT_TOP)

    def time_ticks(self) -> list[float]:
        """Round times since the origin, about eight of them."""
        span = self.end - self.start
        raw = span / 8
        step = 10 ** math.floor(math.log10(raw))
        for factor in (1, 2, 5, 10):
            if raw <= step * factor:
                step *= factor
                break
        count = int(span / step + 1e-9)
        return [round(k * step, 9) for k in range(count + 1)]

    def latency_ticks(self) -> list[float]:
        ticks, v = [], self.lo
        while v <= self.hi * 1.0001:
            ticks.append(v)
            v *= 10
        return ticks


def _shape(kind: str, x: float, y: float, title: str, role: str = "call") -> str:
    """A call's mark (``role`` ``key``: the legend's)."""
    colour = OUTCOMES[kind][0]
    inner = f"<title>{_e(title)}</title>"
    if kind == "fail":
        return (
            f'<rect class="{role} {kind}" x="{_n(x - 3.5)}" y="{_n(y - 3.5)}" width="7" '
            f'height="7" fill="{colour}">{inner}</rect>'
        )
    if kind == "info":
        points = f"{_n(x)},{_n(y - 5)} {_n(x + 5)},{_n(y)} {_n(x)},{_n(y + 5)} {_n(x - 5)},{_n(y)}"
        return f'<polygon class="{role} {kind}" points="{points}" fill="{colour}">{inner}</polygon>'
    if kind == "lost":
        d = (
            f"M{_n(x - 4)} {_n(y - 4)}L{_n(x + 4)} {_n(y + 4)}"
            f"M{_n(x - 4)} {_n(y + 4)}L{_n(x + 4)} {_n(y - 4)}"
        )
        return (
            f'<path class="{role} {kind}" d="{d}" stroke="{colour}" stroke-width="2.5" '
            f'fill="none">{inner}</path>'
        )
    opacity = "0.75" if kind == "ok" else "0.9"
    return (
        f'<circle class="{role} {kind}" cx="{_n(x)}" cy="{_n(y)}" r="3.5" fill="{colour}" '
        f'fill-opacity="{opacity}">{inner}</circle>'
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
        f"{record.invoked_at - origin:.3f} s, latency {_seconds(record.latency)}"
    )
    if record.error:
        text += f": {record.error}"
    return text


def _timeline(
    server: str,
    calls: list[CallRecord],
    timed: list[tuple[float, dict[str, object]]],
    faults: list[tuple[float, dict[str, object]]],
    scale: _Scale,
    origin: float,
    verdict: Verdict,
) -> str:
    out: list[str] = []
    add = out.append
    add(
        f'<svg class="tl" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="timeline of {_e(server)}" xmlns="http://www.w3.org/2000/svg">'
    )
    # Lanes and grid.
    add(f'<text class="lane" x="4" y="{_STATE_Y + 13}">state</text>')
    add(f'<text class="lane" x="4" y="{_FAULT_Y + 11}">faults</text>')
    add(f'<text class="lane" x="4" y="{_LOST_Y + 4}">lost</text>')
    middle = _n((_PLOT_TOP + _PLOT_BOTTOM) / 2)
    add(
        f'<text class="lane" x="14" y="{middle}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle})">latency</text>'
    )
    add(
        f'<rect class="band" x="{_LEFT}" y="{_FAULT_Y}" width="{_WIDTH - _LEFT - _RIGHT}" '
        f'height="{_FAULT_H}"/>'
    )
    add(
        f'<rect class="band" x="{_LEFT}" y="{_LOST_Y - 6}" width="{_WIDTH - _LEFT - _RIGHT}" '
        'height="12"/>'
    )
    for tick in scale.time_ticks():
        x = _n(scale.x(scale.start + tick))
        add(f'<line class="grid" x1="{x}" y1="{_LOST_Y - 6}" x2="{x}" y2="{_PLOT_BOTTOM}"/>')
        add(f'<text x="{x}" y="{_AXIS_Y + 12}" text-anchor="middle">{_e(f"{tick:g} s")}</text>')
    for tick in scale.latency_ticks():
        y = _n(scale.y(tick))
        add(f'<line class="grid" x1="{_LEFT}" y1="{y}" x2="{_WIDTH - _RIGHT}" y2="{y}"/>')
        add(f'<text x="{_LEFT - 4}" y="{_n(scale.y(tick) + 4)}" text-anchor="end">')
        add(f"{_e(_decade(tick))}</text>")
    # States.
    for start, end, state in server_states(timed, server, scale.start, scale.end):
        x1, x2 = scale.x(start), scale.x(end)
        title = f"{state} from {start - origin:.3f} s to {end - origin:.3f} s"
        add(
            f'<rect class="state {state}" data-state="{state}" x="{_n(x1)}" y="{_STATE_Y}" '
            f'width="{_n(max(x2 - x1, 0.5))}" height="{_STATE_H}" '
            f'fill="{STATE_COLOURS[state]}"><title>{_e(title)}</title></rect>'
        )
    for t, fields in timed:
        if fields.get("kind") == "supervisor.child.restarted" and fields.get("child") == server:
            x = _n(scale.x(t))
            title = (
                f"restart {fields.get('restarts')} at {t - origin:.3f} s "
                f"({fields.get('strategy')}): {fields.get('reason')}"
            )
            add(
                f'<line class="restart" x1="{x}" y1="{_STATE_Y - 3}" x2="{x}" '
                f'y2="{_STATE_Y + _STATE_H + 3}"><title>{_e(title)}</title></line>'
            )
    # Faults.
    for t, fault in faults:
        x = scale.x(t)
        add(
            f'<line class="faultline" x1="{_n(x)}" y1="{_FAULT_Y + _FAULT_H}" x2="{_n(x)}" '
            f'y2="{_PLOT_BOTTOM}"/>'
        )
        points = f"{_n(x - 6)},{_FAULT_Y} {_n(x + 6)},{_FAULT_Y} {_n(x)},{_FAULT_Y + _FAULT_H}"
        add(
            f'<polygon class="fault" data-action="{_e(fault["action"])}" points="{points}" '
            f'fill="{_FAULT_COLOUR}"><title>{_e(_fault_title(fault, t - origin))}</title>'
            "</polygon>"
        )
    # Calls.
    found = verdict.servers.get(server)
    lost = set(found.lost) if found is not None else set()
    for record in calls:
        kind = _outcome_class(record)
        x = scale.x(record.invoked_at)
        if kind == "lost" and record.call_id not in lost:
            continue  # in flight when checked
        y = _LOST_Y if kind == "lost" else scale.y(record.latency or 0.0)
        add(_shape(kind, x, y, _call_title(record, origin)))
    add(
        f'<line class="grid" x1="{_LEFT}" y1="{_PLOT_BOTTOM}" x2="{_WIDTH - _RIGHT}" '
        f'y2="{_PLOT_BOTTOM}"/>'
    )
    add("</svg>")
    return "".join(out)


def _legend() -> str:
    items = []
    for state, colour in STATE_COLOURS.items():
        items.append(
            f'<span><svg width="22" height="12"><rect width="22" height="12" '
            f'fill="{colour}"/></svg>{_e(state)}</span>'
        )
    for kind, (_, label) in OUTCOMES.items():
        shape = _shape(kind, 8, 7, label, role="key")
        items.append(f'<span><svg width="16" height="14">{shape}</svg>{_e(label)}</span>')
    items.append(
        f'<span><svg width="14" height="14"><polygon points="1,1 13,1 7,13" '
        f'fill="{_FAULT_COLOUR}"/></svg>injected fault</span>'
    )
    items.append(
        '<span><svg width="6" height="14"><line class="restart" x1="3" y1="0" x2="3" '
        'y2="14"/></svg>restart</span>'
    )
    return f'<div class="legend" aria-label="legend">{"".join(items)}</div>'


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
        numbers = [f"{c.invoked_at - origin:.3f} s", _e(_seconds(c.latency))]
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
    scale = _Scale(origin, end, [c.latency for c in calls if c.latency is not None])

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
        f"log scale from {_e(_decade(scale.lo))} to {_e(_decade(scale.hi))}. "
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
