"""The timeline drawing the fault report and the dashboard share (``supervisor.timeline``):
drawings as data, escaped when written out, and the lanes a layout asks for."""

from __future__ import annotations

import msgspec

from supervisor.dashboard._strips import STATUS_STATES
from supervisor.faults._report import REPORT_STATES
from supervisor.server._status import ServerStatus
from supervisor.timeline._draw import (
    OUTCOMES,
    STATES,
    Band,
    Layout,
    Marker,
    Point,
    Scale,
    Tick,
    draw_timeline,
    legend,
)
from supervisor.timeline._element import Element, markup

HOSTILE = "<script>alert('x')</script> & \"quoted\""


def find(node: Element | str, tag: str) -> list[Element]:
    """Every element of *tag* in the tree, in document order."""
    if isinstance(node, str):
        return []
    found = [node] if node.tag == tag else []
    for child in node.children:
        found += find(child, tag)
    return found


def test_markup_escapes_every_text_and_attribute() -> None:
    """Text and attribute values are escaped, so a server's words never become markup; an
    element without children is self-closed."""
    drawing = Element(
        "svg", {"aria-label": HOSTILE}, [Element("title", {}, [HOSTILE]), Element("line", {})]
    )
    text = markup(drawing)
    assert "<script>" not in text
    assert text == (
        '<svg aria-label="&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; '
        '&quot;quoted&quot;"><title>&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; '
        "&amp; &quot;quoted&quot;</title><line/></svg>"
    )


def test_a_drawing_is_json_arrays_a_page_can_build() -> None:
    """Its JSON form is ``[tag, {attributes}, [children]]``, text children as strings."""
    drawing = Element("g", {"class": "x"}, [Element("text", {"x": "1"}, ["hi"])])
    assert msgspec.json.decode(msgspec.json.encode(drawing)) == [
        "g",
        {"class": "x"},
        [["text", {"x": "1"}, ["hi"]]],
    ]


def test_the_report_layout_has_every_lane_and_a_strip_only_state_and_latency() -> None:
    """With faults and lost lanes (the report) they come in that order above the plot;
    without them (the dashboard's strips) the plot follows the state lane."""
    report = Layout(faults=True, lost=True)
    assert (report.fault_y, report.lost_y, report.plot_top, report.plot_bottom) == (
        34,
        62,
        76,
        206,
    )
    assert report.height == 236
    strip = Layout(plot_height=44)
    assert strip.plot_top == report.fault_y and strip.grid_top == strip.plot_top
    assert strip.height < report.height


def test_a_timeline_draws_its_bands_restarts_calls_and_faults() -> None:
    """Each band, restart, call and fault is one titled mark, coloured as the tables say;
    a layout without a faults or lost lane has no label for one."""
    scale = Scale(0.0, 10.0, [0.001, 0.2], Layout(faults=True, lost=True))
    drawing = draw_timeline(
        HOSTILE,
        scale,
        ticks=[(0.0, "0 s"), (10.0, "10 s")],
        bands=[Band(0.0, 4.0, "connected"), Band(4.0, 10.0, "needs_auth")],
        when=lambda t: f"{t:g}s",
        restarts=[Tick(4.0, "restart 1")],
        calls=[
            Point(1.0, 0.001, "ok", "a"),
            Point(2.0, 0.2, "tool-error", "b"),
            Point(3.0, None, "lost", "c"),
        ],
        markers=[Marker(5.0, "kill", "fault")],
    )
    rects = [r for r in find(drawing, "rect") if "state" in r.attrs.get("class", "")]
    assert [(r.attrs["data-state"], r.attrs["fill"]) for r in rects] == [
        ("connected", STATES["connected"][0]),
        ("needs_auth", STATES["needs_auth"][0]),
    ]
    assert find(rects[1], "title")[0].children == ["needs login from 4s to 10s"]
    assert [c.attrs["fill"] for c in find(drawing, "circle")] == [
        OUTCOMES["ok"][0],
        OUTCOMES["tool-error"][0],
    ]
    assert len(find(drawing, "path")) == 1  # the lost call's cross
    assert [p.attrs.get("data-action") for p in find(drawing, "polygon")] == ["kill"]
    lanes = [t.children[0] for t in find(drawing, "text") if t.attrs.get("class") == "lane"]
    assert lanes == ["state", "faults", "lost", "latency"]
    assert "<script>" not in markup(drawing)

    strip = draw_timeline(
        "s", Scale(0.0, 10.0, [], Layout()), ticks=[], bands=[], when=str, calls=[]
    )
    lanes = [t.children[0] for t in find(strip, "text") if t.attrs.get("class") == "lane"]
    assert lanes == ["state", "latency"]


def test_the_legend_names_what_it_is_given() -> None:
    """One swatch per state (by its label), one mark per outcome class, and the
    restart tick."""
    key = legend(["disconnected", "needs_auth"], ["ok", "fail"])
    spans = find(key, "span")
    assert [s.children[-1] for s in spans] == [
        "disconnected",
        "needs login",
        OUTCOMES["ok"][1],
        OUTCOMES["fail"][1],
        "restart",
    ]


def test_a_timeline_s_states_are_status_words() -> None:
    """One vocabulary: every state a timeline draws is a server status's own word (the
    dashboard's strips and the fault report map statuses onto them), and each status a
    strip can show is drawn as a state of the timeline."""
    words = {status.value for status in ServerStatus}
    assert set(STATES) <= words, set(STATES) - words
    assert set(REPORT_STATES) <= set(STATES)
    assert set(STATUS_STATES) == set(ServerStatus)
    for status, state in STATUS_STATES.items():
        assert state in STATES
        if status.value in STATES:  # drawn as itself: only the rest are drawn as another
            assert state == status.value, status
