"""Text a server sent, made safe to show on a terminal: shown, never obeyed.

A server controls much of what the CLI and the logs print — its ``serverInfo`` name and
version, tool names, titles and descriptions, error messages, stderr lines, results. A
terminal acts on some characters instead of showing them: ESC starts sequences that set
the window title (OSC 0), write the clipboard (OSC 52) or clear the screen (``ESC[2J``);
the C1 controls do the same in one character (``U+009B`` is CSI, ``U+009D`` OSC); a
carriage return or backspace overwrites what was shown; the bidirectional overrides and
isolates reorder what a person reads (the "Trojan Source" characters). :func:`printable`
writes each of them as a visible escape (``\\x1b``, ``\\u202e``), so the text is still
all there to read; :func:`printable_json` does the same inside a JSON text, where the
escape (``\\u001b``) keeps the document's meaning.

The one place that says which characters those are, for every human renderer (the
CLI's tables and messages, the status table, the console log). The standard library
only, and nothing of the package: every layer may import it.
"""

from __future__ import annotations

__all__ = ["UNPRINTABLE", "printable", "printable_json"]

#: The code points a terminal would act on rather than show: the C0 controls (tab and
#: line feed among them), DEL, the C1 controls, the bidirectional embeddings, overrides
#: and isolates, and lone surrogates (which cannot even be written out as UTF-8).
UNPRINTABLE: frozenset[int] = frozenset(
    [
        *range(0x00, 0x20),
        0x7F,
        *range(0x80, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        *range(0xD800, 0xE000),
    ]
)


def _shown(c: int) -> str:
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


_ONE_LINE = {c: _shown(c) for c in UNPRINTABLE} | {0x0A: "\\n", 0x09: "\\t"}
_LINES = {c: s for c, s in _ONE_LINE.items() if c not in (0x0A, 0x09)}
_JSON = {c: f"\\u{c:04x}" for c in _LINES}


def printable(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every character of :data:`UNPRINTABLE` written as a visible escape
    — ``\\x1b``, ``\\x9b``, ``\\u202e``; a line feed as ``\\n`` and a tab as ``\\t`` —
    so that it is shown as it was sent, on one line. With ``keep_lines``, line feeds and
    tabs stay as they are (a result's text keeps its lines); a carriage return is still
    written ``\\x0d``: it would overwrite the line."""
    return text.translate(_LINES if keep_lines else _ONE_LINE)


def printable_json(text: str) -> str:
    """A JSON text (a line of JSON lines, say) with every character of
    :data:`UNPRINTABLE` but line feed and tab written as a ``\\uXXXX`` escape: the same
    JSON value — such a character stands only inside a string there, as the encoder
    escapes none but the C0 controls — and nothing a terminal acts on."""
    return text.translate(_JSON)
