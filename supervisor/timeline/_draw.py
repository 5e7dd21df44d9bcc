"""The drawing of a server's timeline and of its legend (see the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import attrs

from ._element import Element

__all__ = [
    "FAULT_COLOUR",
    "HEALTH_MARKS",
    "OUTCOMES",
    "STATES",
    "TIMELINE_CSS",
    "Band",
    "Layout",
    "Mark",
    "Marker",
    "Point",
    "Scale",
    "Tick",
    "decade",
    "draw_timeline",
    "legend",
    "seconds",
]

#: A server's states on a timeline, under the words of its status (``ServerStatus``'s
#: values, which the caller maps a status to): their colours, and what a legend calls them.
STATES: dict[str, tuple[str, str]] = {
    "idle": ("#eaeef2", "idle"),
    "connecting": ("#d4a72c", "connecting"),
    "connected": ("#2da44e", "connected"),
    "degraded": ("#fb8f44", "degraded"),
    "unverified": ("#ffd8b5", "unverified (not heard from)"),
    "disconnected": ("#cf222e", "disconnected"),
    "needs_auth": ("#a475f9", "needs login"),
    "failed": ("#82071e", "failed"),
    "stopped": ("#8c959f", "stopped"),
}

#: A call's outcome classes, their colours and what a legend calls them.
OUTCOMES: dict[str, tuple[str, str]] = {
    "ok": ("#1a7f37", "ok (answered)"),
    "tool-error": ("#0969da", "tool error (isError: it ran)"),
    "fail": ("#bc4c00", "fail (not executed)"),
    "info": ("#8250df", "info (may have executed)"),
    "lost": ("#cf222e", "lost (no outcome)"),
}

#: What health watching found, marked above the state lane: a probe, or calls in a row,
#: went unanswered (``mcp.health.stale``), the connection was found dead
#: (``mcp.health.down``), the server answered again (``mcp.health.recovered``); and a
#: reload of the config that added, replaced or changed the server
#: (``supervisor.config.reloaded``); their colours and what a legend calls them.
HEALTH_MARKS: dict[str, tuple[str, str]] = {
    "stale": ("#fb8f44", "stale (degraded)"),
    "down": ("#cf222e", "found down"),
    "recovered": ("#2da44e", "recovered"),
    "reloaded": ("#0969da", "config reloaded"),
}

#: The colour of an injected fault's marker.
FAULT_COLOUR = "#24292f"

#: The styles of the drawing's classes (a page includes them; the drawing has no
#: ``<style>`` of its own, so a page's Content-Security-Policy needs no exception).
TIMELINE_CSS = """\
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 10px 0 4px;
          color: #57606a; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
svg.tl { width: 100%; height: auto; display: block; }
svg.tl text { font: 11px system-ui, sans-serif; fill: #57606a; }
svg.tl .lane { font-weight: 600; fill: #1f2328; }
svg.tl .grid { stroke: #d0d7de; stroke-width: 1; }
svg.tl .band { fill: #f6f8fa; }
svg.tl .faultline { stroke: #24292f; stroke-opacity: 0.18; stroke-dasharray: 3 3; }
svg .restart { stroke: #1f2328; stroke-width: 2; }
"""


# -- the marks ----------------------------------------------------------------------------


class Band(NamedTuple):
    """The server was in ``state`` (a key of :data:`STATES`) from ``start`` to ``end``."""

    start: float
    end: float
    state: str


class Tick(NamedTuple):
    """A restart at ``t``, with its title."""

    t: float
    title: str


class Mark(NamedTuple):
    """What health watching found at ``t`` (``kind``: a key of :data:`HEALTH_MARKS`),
    with its title."""

    t: float
    kind: str
    title: str


class Point(NamedTuple):
    """A call invoked at ``t`` that took ``latency`` seconds (``None``: not known), of
    outcome class ``kind`` (a key of :data:`OUTCOMES`; ``lost`` goes on the lost lane)."""

    t: float
    latency: float | None
    kind: str
    title: str


class Marker(NamedTuple):
    """An injected fault at ``t``: its ``action`` and its title."""

    t: float
    action: str
    title: str


# -- geometry -----------------------------------------------------------------------------


@attrs.frozen
class Layout:
    """Where a timeline's lanes are, in user units (a page scales the drawing to its
    width): the ``faults`` and ``lost`` lanes only when asked for, and a latency plot
    ``plot_height`` high."""

    faults: bool = False
    lost: bool = False
    plot_height: float = 130.0
    width: float = 1160.0
    left: float = 84.0
    right: float = 16.0

    state_y = 8.0
    state_h = 18.0
    fault_h = 14.0
    _GAP = 8.0

    @property
    def fault_y(self) -> float:
        return self.state_y + self.state_h + self._GAP

    @property
    def lost_y(self) -> float:
        """The middle of the lost lane (12 high)."""
        top = self.fault_y + self.fault_h + self._GAP if self.faults else self.fault_y
        return top + 6

    @property
    def plot_top(self) -> float:
        if self.lost:
            return self.lost_y + 6 + self._GAP
        return self.fault_y + self.fault_h + self._GAP if self.faults else self.fault_y

    @property
    def plot_bottom(self) -> float:
        return self.plot_top + self.plot_height

    @property
    def axis_y(self) -> float:
        return self.plot_bottom + 6

    @property
    def height(self) -> float:
        return self.axis_y + 24

    @property
    def grid_top(self) -> float:
        """Where the time grid's lines begin (the lost lane, else the plot)."""
        return self.lost_y - 6 if self.lost else self.plot_top


class Scale:
    """Time to x (``start`` to ``end``), latency to y (log, whole decades around
    ``latencies``), in ``layout``; shared by every timeline of a page, so that they
    line up."""

    def __init__(
        self, start: float, end: float, latencies: Iterable[float], layout: Layout
    ) -> None:
        self.layout = layout
        self.start = start
        self.end = end if end > start else start + 1.0
        positive = [v for v in latencies if v > 0]
        low = min(positive, default=1e-3)
        high = max(positive, default=1.0)
        self.lo = 10 ** math.floor(math.log10(max(low, 1e-5)))
        self.hi = 10 ** math.ceil(math.log10(max(high, self.lo * 10)))
        if self.hi <= self.lo:
            self.hi = self.lo * 10
        # Computed once: a strip of the dashboard places thousands of points each time.
        self._left = layout.left
        self._span = layout.width - layout.left - layout.right
        self._log_lo = math.log10(self.lo)
        self._log_span = math.log10(self.hi) - self._log_lo
        self._top = layout.plot_top
        self._bottom = layout.plot_bottom

    def x(self, t: float) -> float:
        start, end = self.start, self.end
        return self._left + (min(max(t, start), end) - start) / (end - start) * self._span

    def y(self, latency: float) -> float:
        v = min(max(latency, self.lo), self.hi)
        share = (math.log10(v) - self._log_lo) / self._log_span
        bottom = self._bottom
        return bottom - share * (bottom - self._top)

    def round_ticks(self) -> list[float]:
        """Round offsets from ``start`` (1, 2 or 5 × a power of ten), about eight of them."""
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


# -- text -----------------------------------------------------------------------------------


def _n(value: float) -> str:
    """A coordinate, short."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def seconds(value: float | None) -> str:
    """A duration for people: ``12.5 ms``, ``1.250 s``, ``—`` for none."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f} s"


def decade(value: float) -> str:
    """A latency tick's label: ``10 µs``, ``1 ms``, ``100 ms``, ``10 s``."""
    if value >= 1:
        return f"{value:g} s"
    if value >= 1e-3:
        return f"{round(value * 1e3, 6):g} ms"
    return f"{round(value * 1e6, 6):g} µs"


# -- drawing --------------------------------------------------------------------------------

#: The height a latency label needs, in user units.
_LABEL_SPACE = 14.0


def _el(tag: str, children: list[Element | str] | None = None, **attrs: str) -> Element:
    """An element; ``class_`` is ``class``, ``text_anchor`` is ``text-anchor``."""
    names = {name: name.rstrip("_").replace("_", "-") for name in attrs}
    return Element(tag, {names[name]: value for name, value in attrs.items()}, children or [])


def _titled(tag: str, title: str, attrs: dict[str, str]) -> Element:
    return Element(tag, attrs, [Element("title", {}, [title])])


def shape(kind: str, x: float, y: float, title: str, role: str = "call") -> Element:
    """A call's mark of outcome class *kind* at (*x*, *y*): a circle (ok, tool error), a
    square (fail), a diamond (info), a cross (lost). ``role`` is its first class
    (``key`` in a legend)."""
    colour = OUTCOMES[kind][0]
    cls = f"{role} {kind}"
    if kind == "fail":
        return _titled(
            "rect",
            title,
            {
                "class": cls,
                "x": _n(x - 3.5),
                "y": _n(y - 3.5),
                "width": "7",
                "height": "7",
                "fill": colour,
            },
        )
    if kind == "info":
        points = f"{_n(x)},{_n(y - 5)} {_n(x + 5)},{_n(y)} {_n(x)},{_n(y + 5)} {_n(x - 5)},{_n(y)}"
        return _titled("polygon", title, {"class": cls, "points": points, "fill": colour})
    if kind == "lost":
        d = (
            f"M{_n(x - 4)} {_n(y - 4)}L{_n(x + 4)} {_n(y + 4)}"
            f"M{_n(x - 4)} {_n(y + 4)}L{_n(x + 4)} {_n(y - 4)}"
        )
        return _titled(
            "path",
            title,
            {"class": cls, "d": d, "stroke": colour, "stroke-width": "2.5", "fill": "none"},
        )
    opacity = "0.75" if kind == "ok" else "0.9"
    return _titled(
        "circle",
        title,
        {
            "class": cls,
            "cx": _n(x),
            "cy": _n(y),
            "r": "3.5",
            "fill": colour,
            "fill-opacity": opacity,
        },
    )


def draw_timeline(
    name: str,
    scale: Scale,
    *,
    ticks: Sequence[tuple[float, str]],
    bands: Iterable[Band],
    when: Callable[[float], str],
    restarts: Iterable[Tick] = (),
    calls: Iterable[Point] = (),
    markers: Iterable[Marker] = (),
    marks: Iterable[Mark] = (),
) -> Element:
    """Server *name*'s timeline (an ``<svg class="tl">``) on *scale*: the time grid at
    *ticks* (``(time, label)``), its state *bands* (titled with *when*, which says a
    time for people), its *restarts*, its health *marks* (a small triangle above the
    state lane), its *calls* and, with a faults lane, *markers*. Lost calls need a
    layout with a lost lane."""
    layout = scale.layout
    width, left, right = layout.width, layout.left, layout.right
    inner = width - left - right
    out: list[Element | str] = []
    add = out.append
    # Lanes and grid.
    add(_el("text", ["state"], class_="lane", x="4", y=_n(layout.state_y + 13)))
    if layout.faults:
        add(_el("text", ["faults"], class_="lane", x="4", y=_n(layout.fault_y + 11)))
    if layout.lost:
        add(_el("text", ["lost"], class_="lane", x="4", y=_n(layout.lost_y + 4)))
    middle = _n((layout.plot_top + layout.plot_bottom) / 2)
    add(
        _el(
            "text",
            ["latency"],
            class_="lane",
            x="14",
            y=middle,
            text_anchor="middle",
            transform=f"rotate(-90 14 {middle})",
        )
    )
    if layout.faults:
        add(
            _el(
                "rect",
                class_="band",
                x=_n(left),
                y=_n(layout.fault_y),
                width=_n(inner),
                height=_n(layout.fault_h),
            )
        )
    if layout.lost:
        add(
            _el(
                "rect",
                class_="band",
                x=_n(left),
                y=_n(layout.lost_y - 6),
                width=_n(inner),
                height="12",
            )
        )
    for t, label in ticks:
        x = _n(scale.x(t))
        add(
            _el(
                "line", class_="grid", x1=x, y1=_n(layout.grid_top), x2=x, y2=_n(layout.plot_bottom)
            )
        )
        add(_el("text", [label], x=x, y=_n(layout.axis_y + 12), text_anchor="middle"))
    decades = scale.latency_ticks()
    # Every decade has its line; on a low plot only every other one (or fewer) its label,
    # so that labels never overlap.
    apart = layout.plot_height / max(len(decades) - 1, 1)
    every = max(1, math.ceil(_LABEL_SPACE / apart))
    for index, tick in enumerate(decades):
        y = _n(scale.y(tick))
        add(_el("line", class_="grid", x1=_n(left), y1=y, x2=_n(width - right), y2=y))
        if index % every == 0:
            label_y = _n(scale.y(tick) + 4)
            add(_el("text", [decade(tick)], x=_n(left - 4), y=label_y, text_anchor="end"))
    # States.
    for start, end, state in bands:
        x1, x2 = scale.x(start), scale.x(end)
        colour, label = STATES[state]
        add(
            _titled(
                "rect",
                f"{label} from {when(start)} to {when(end)}",
                {
                    "class": f"state {state}",
                    "data-state": state,
                    "x": _n(x1),
                    "y": _n(layout.state_y),
                    "width": _n(max(x2 - x1, 0.5)),
                    "height": _n(layout.state_h),
                    "fill": colour,
                },
            )
        )
    for t, title in restarts:
        x = _n(scale.x(t))
        add(
            _titled(
                "line",
                title,
                {
                    "class": "restart",
                    "x1": x,
                    "y1": _n(layout.state_y - 3),
                    "x2": x,
                    "y2": _n(layout.state_y + layout.state_h + 3),
                },
            )
        )
    for t, kind, title in marks:
        x, tip = scale.x(t), layout.state_y - 1
        points = f"{_n(x - 4)},{_n(tip - 6)} {_n(x + 4)},{_n(tip - 6)} {_n(x)},{_n(tip)}"
        colour = HEALTH_MARKS[kind][0]
        attributes = {"class": f"mark {kind}", "data-mark": kind, "points": points}
        add(_titled("polygon", title, {**attributes, "fill": colour}))
    # Faults.
    top, bottom = layout.fault_y, layout.fault_y + layout.fault_h
    for t, action, title in markers:
        x = scale.x(t)
        add(
            _el(
                "line",
                class_="faultline",
                x1=_n(x),
                y1=_n(bottom),
                x2=_n(x),
                y2=_n(layout.plot_bottom),
            )
        )
        points = f"{_n(x - 6)},{_n(top)} {_n(x + 6)},{_n(top)} {_n(x)},{_n(bottom)}"
        add(
            _titled(
                "polygon",
                title,
                {"class": "fault", "data-action": action, "points": points, "fill": FAULT_COLOUR},
            )
        )
    # Calls.
    for t, latency, kind, title in calls:
        y = layout.lost_y if kind == "lost" else scale.y(latency or 0.0)
        add(shape(kind, scale.x(t), y, title))
    add(
        _el(
            "line",
            class_="grid",
            x1=_n(left),
            y1=_n(layout.plot_bottom),
            x2=_n(width - right),
            y2=_n(layout.plot_bottom),
        )
    )
    return Element(
        "svg",
        {
            "class": "tl",
            "viewBox": f"0 0 {_n(width)} {_n(layout.height)}",
            "role": "img",
            "aria-label": f"timeline of {name}",
            "xmlns": "http://www.w3.org/2000/svg",
        },
        out,
    )


def legend(
    states: Iterable[str],
    kinds: Iterable[str],
    *,
    faults: bool = False,
    restarts: bool = True,
    marks: Iterable[str] = (),
) -> Element:
    """The key to a timeline's colours: *states* (keys of :data:`STATES`), call outcome
    *kinds* (keys of :data:`OUTCOMES`), the fault marker, the restart tick and health
    *marks* (keys of :data:`HEALTH_MARKS`)."""
    items: list[Element | str] = []
    for state in states:
        colour, label = STATES[state]
        swatch = _el("rect", width="22", height="12", fill=colour)
        items.append(_el("span", [_el("svg", [swatch], width="22", height="12"), label]))
    for kind in kinds:
        label = OUTCOMES[kind][1]
        mark = _el("svg", [shape(kind, 8, 7, label, role="key")], width="16", height="14")
        items.append(_el("span", [mark, label]))
    if faults:
        marker = _el("polygon", points="1,1 13,1 7,13", fill=FAULT_COLOUR)
        items.append(_el("span", [_el("svg", [marker], width="14", height="14"), "injected fault"]))
    if restarts:
        tick = _el("line", class_="restart", x1="3", y1="0", x2="3", y2="14")
        items.append(_el("span", [_el("svg", [tick], width="6", height="14"), "restart"]))
    for kind in marks:
        colour, label = HEALTH_MARKS[kind]
        mark = _el("polygon", points="1,3 11,3 6,11", fill=colour)
        items.append(_el("span", [_el("svg", [mark], width="12", height="14"), label]))
    return _el("div", items, class_="legend", aria_label="legend")
