"""printable: every character a terminal would obey is written as a visible escape, and
nothing else changes; printable_json does the same inside JSON, keeping its value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor._util._printable import UNPRINTABLE, printable, printable_json

TABLE = [
    # (text, one line, with keep_lines)
    pytest.param("plain text", "plain text", "plain text", id="plain"),
    pytest.param("héllo 🟢 日本", "héllo 🟢 日本", "héllo 🟢 日本", id="unicode-stays"),
    pytest.param("a\nb\tc", "a\\nb\\tc", "a\nb\tc", id="lines-and-tabs"),
    pytest.param("\x1b]0;title\x07", "\\x1b]0;title\\x07", "\\x1b]0;title\\x07", id="osc0-title"),
    pytest.param("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07", None, id="osc52-clipboard"),
    pytest.param("\x1b]8;;http://x\x1b\\", "\\x1b]8;;http://x\\x1b\\", None, id="osc8-link"),
    pytest.param("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H", None, id="clear-screen"),
    pytest.param("\x1bc", "\\x1bc", None, id="reset"),
    pytest.param("\x9b31m", "\\x9b31m", None, id="c1-csi"),
    pytest.param("\x9d0;t\x9c", "\\x9d0;t\\x9c", None, id="c1-osc-st"),
    pytest.param("\x85\x90\x9f\x80", "\\x85\\x90\\x9f\\x80", None, id="c1-others"),
    pytest.param("ok\rfake", "ok\\x0dfake", "ok\\x0dfake", id="carriage-return"),
    pytest.param("x\x08y\x7f", "x\\x08y\\x7f", None, id="backspace-del"),
    pytest.param("\x00\x0b\x0c", "\\x00\\x0b\\x0c", None, id="nul-vt-ff"),
    pytest.param(
        "a\u202eb\u202ac\u202bd\u202ce\u202d",
        "a\\u202eb\\u202ac\\u202bd\\u202ce\\u202d",
        None,
        id="bidi-overrides",
    ),  # fmt: skip
    pytest.param(
        "\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069", None, id="bidi-isolates"
    ),
    pytest.param("\ud800", "\\ud800", None, id="lone-surrogate"),
    pytest.param("\\x1b", "\\x1b", "\\x1b", id="an-escape-written-out-stays"),
]


@pytest.mark.parametrize(("text", "one_line", "lines"), TABLE)
def test_printable(text: str, one_line: str, lines: str | None) -> None:
    """Each character a terminal acts on becomes its visible escape; line breaks and tabs
    stay with ``keep_lines`` (elsewhere the two are the same)."""
    assert printable(text) == one_line
    assert printable(text, keep_lines=True) == (one_line if lines is None else lines)


@given(st.text())
def test_nothing_a_terminal_obeys_is_left(text: str) -> None:
    """Whatever the text, its printable form holds no character of UNPRINTABLE (on one
    line, none at all; with keep_lines, only line feeds and tabs), and a text without
    any is left as it is."""
    assert not {ord(c) for c in printable(text)} & UNPRINTABLE
    assert not {ord(c) for c in printable(text, keep_lines=True)} & UNPRINTABLE - {0x0A, 0x09}
    if not {ord(c) for c in text} & UNPRINTABLE:
        assert printable(text) == text


@given(st.recursive(st.text() | st.integers() | st.none(), lambda inner: st.lists(inner)
                    | st.dictionaries(st.text(), inner)))  # fmt: skip
def test_printable_json_keeps_the_value(value: object) -> None:
    """JSON made printable decodes to the same value, whatever the encoder left raw,
    and holds nothing a terminal obeys."""
    for text in (json.dumps(value, ensure_ascii=False), json.dumps(value)):
        shown = printable_json(text)
        assert json.loads(shown) == value
        assert not {ord(c) for c in shown} & UNPRINTABLE
