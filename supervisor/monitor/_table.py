"""The status table: health records as a fixed-width table, for a terminal or a log.

Every string in it that a server or a config controls — names, the handshake's
``serverInfo``, command lines, errors with their stderr lines — is made printable
(:func:`supervisor._util._printable.printable`): the table's own colours are the only escape
sequences it holds."""

from __future__ import annotations

import math
import posixpath
import re
import shlex
import textwrap
import time
import unicodedata
from collections.abc import Mapping

from .._util._plural import plural
from .._util._printable import printable
from ..server import HealthRecord
from ..server._status import ServerStatus

#: The icon of each status: connected, on the way, down, not running (or disabled); a
#: connected server not heard from within its window is orange, never green.
ICONS: Mapping[ServerStatus, str] = {
    ServerStatus.CONNECTED: "🟢",
    ServerStatus.UNVERIFIED: "🟠",
    ServerStatus.CONNECTING: "🟡",
    ServerStatus.DEGRADED: "🟡",
    ServerStatus.DISCONNECTED: "🔴",
    ServerStatus.FAILED: "🔴",
    ServerStatus.NEEDS_AUTH: "🔑",
    ServerStatus.REFRESHING: "🟡",
    ServerStatus.AUTH_FAILED: "🔴",
    ServerStatus.IDLE: "⚪",
    ServerStatus.STOPPED: "⚪",
    ServerStatus.DISABLED: "⚪",
}

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_DIM = "\x1b[2m"
_RED = "\x1b[31m"
_GREEN = "\x1b[32m"
_YELLOW = "\x1b[33m"
_DETAIL_COLORS: Mapping[ServerStatus, str] = {
    ServerStatus.CONNECTING: _YELLOW,
    ServerStatus.DEGRADED: _YELLOW,
    ServerStatus.UNVERIFIED: _YELLOW,
    ServerStatus.DISCONNECTED: _RED,
    ServerStatus.FAILED: _RED,
    ServerStatus.NEEDS_AUTH: _YELLOW,
    ServerStatus.REFRESHING: _YELLOW,
    ServerStatus.AUTH_FAILED: _RED,
    ServerStatus.IDLE: _DIM,
    ServerStatus.STOPPED: _DIM,
    ServerStatus.DISABLED: _DIM,
}

_NAME_MIN = 11  # display columns before the gap: "custom-api" and a little more
_STATUS_WIDTH = 8  # "Status" and its gap; an icon is two columns wide
_TOOLS_DIGITS = 3  # tool counts are right-aligned in this many columns ...
_TOOLS_MIN = 5  # ... under a "Tools" header this wide
_HEARD_MIN = 13  # "Last Heard" and room to spare
_GAP = 2
_RULE = 57  # the rule's length with the minimum column widths
_ERROR_MIN = 12  # display columns an error keeps in a Details cell cut to fit
_TARGET_MIN = 16  # display columns a command line or URL keeps when cut in its middle
_INDENT = "      "  # the second line's, and the reason's (after its "↳ ")

_SERVER_PREFIX = re.compile(r"^MCP server '[^']*'\s*(\(pid \d+\)\s*)?")


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: East Asian wide and full-width characters
    (emoji such as 🟢) take two, combining marks and variation selectors none."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or char in "\u200d\ufe0e\ufe0f":
            continue
        width += 2 if unicodedata.east_asian_width(char) in "WF" else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def _fit(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` display columns, ending in ``…`` when cut; whole when
    ``width`` is ``None``."""
    if width is None or display_width(text) <= width:
        return text
    return _head(text, width - 1) + "…"


def _head(text: str, width: int) -> str:
    """The longest start of ``text`` at most ``width`` display columns wide."""
    out, used = [], 0
    for char in text:
        w = display_width(char)
        if used + w > width:
            break
        out.append(char)
        used += w
    return "".join(out)


def _fit_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` display columns by taking out its middle (a command
    line keeps its program and its last argument, a path its file name): ``…`` where
    the cut is."""
    if display_width(text) <= width:
        return text
    tail = _head(text[::-1], (width - 1) // 2)[::-1]
    return _head(text, width - 1 - display_width(tail)) + "…" + tail


def short_error(error: str | None) -> str:
    """The gist of an error for one cell: its first line and first clause, without the
    ``MCP server 'name' (pid N)`` every server error starts with."""
    if not error:
        return ""
    text = _SERVER_PREFIX.sub("", error.strip().splitlines()[0])
    return printable(text.split("; ", 1)[0])


def ago(then: float | None, now: float) -> str:
    """``30s ago``, ``2m ago``, ``5h ago``, ``3d ago``; ``just now`` within a second;
    ``—`` for never."""
    if then is None:
        return "—"
    seconds = max(0.0, now - then)
    if seconds < 1:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def last_heard(record: HealthRecord) -> float | None:
    """When the server was last heard from (unix seconds): anything its connection
    received from it, else its last successful communication; ``None`` for never."""
    return record.last_heard if record.last_heard is not None else record.last_ok


def details(record: HealthRecord, now: float, room: int | None = None) -> str:
    """The Details cell: what the server is doing or what went wrong, with retry info.

    Cut to ``room`` display columns when given: the error is cut (``…``), what comes
    before and after it — ``gave up after 3 attempts:``, ``(retry 2/5 in 4s)`` — kept."""
    lead, error, tail = _details(record, now)
    text = lead + error + tail
    if room is None or display_width(text) <= room:
        return text
    left = room - display_width(lead) - display_width(tail)
    if error and left >= _ERROR_MIN:
        return lead + _fit(error, left) + tail
    return _fit(text, room)


def _details(record: HealthRecord, now: float) -> tuple[str, str, str]:
    """The Details cell in three parts: what leads, the error, what follows it."""
    status = record.status
    error = short_error(record.last_error)
    if status == ServerStatus.CONNECTING:
        return f"connecting (attempt {record.retry_attempt + 1})", "", ""
    if status == ServerStatus.DEGRADED:
        return "degraded: ", error or "calls time out", ""
    if status == ServerStatus.UNVERIFIED:
        heard = last_heard(record)
        if heard is None:
            return "not heard from yet", "", ""
        return f"not heard from for {int(max(0.0, now - heard))}s", "", ""
    if status == ServerStatus.DISCONNECTED:
        tail = ""
        if record.next_retry_at is not None:
            wait = max(0, math.ceil(record.next_retry_at - now))
            tail = f" (retry {record.retry_attempt}/{record.max_attempts} in {wait}s)"
        return "", str(error or status), tail
    if status == ServerStatus.FAILED:
        if record.retryable is False:
            return "not retried: ", error or "no error recorded", ""  # retrying cannot help
        if record.max_attempts == 0 and record.consecutive_failures == 1:
            return "tried once: ", error or "no error recorded", ""  # a one-shot supervisor
        tries = record.consecutive_failures
        if tries:
            return f"gave up after {plural(tries, 'attempt')}: ", error or "no error recorded", ""
        return "", str(error or status), ""
    if status == ServerStatus.NEEDS_AUTH:
        return f"🔑 needs login: mcp-supervisor auth login {printable(record.server)}", "", ""
    if status == ServerStatus.REFRESHING:
        return "refreshing its OAuth token", "", ""
    if status == ServerStatus.AUTH_FAILED:
        return "login refused: ", error or "authorization failed", ""
    if status == ServerStatus.IDLE:
        return "not started", "", ""
    if status in (ServerStatus.STOPPED, ServerStatus.DISABLED):
        return str(status), "", ""
    return "", "", ""


def short_target(record: HealthRecord) -> str:
    """The command line or URL for the second line: a local server's program without its
    directory (``/usr/local/bin/uvx …`` is ``uvx …``)."""
    target = record.target or ""
    if record.type == "stdio":
        try:
            program = shlex.split(target)[0]
        except (ValueError, IndexError):
            program = ""
        quoted = shlex.quote(program)
        if "/" in program.rstrip("/") and target.startswith(quoted):
            target = shlex.quote(posixpath.basename(program.rstrip("/"))) + target[len(quoted) :]
    return printable(target)


def about(record: HealthRecord, width: int | None = None) -> str:
    """A server's second line: its transport and command line or URL, then what its last
    handshake said — the server's own name and version, the MCP protocol version — and the
    resources and prompts it listed; what is not known yet is left out. An in-process
    server (type ``memory``) says ``in-process`` and its server object's name.

    Whole without ``width``; with it, at most ``width`` display columns: the command line
    or URL is cut in its middle (``…``) so that the rest fits, and only when that is not
    enough is the line's end cut."""
    kind = "in-process" if record.type == "memory" else record.type
    target = short_target(record)
    after = []
    if record.server_name:
        said = (record.server_name, record.server_version)
        after.append(" ".join(printable(p) for p in said if p))
    if record.protocol_version:
        after.append(f"MCP {printable(record.protocol_version)}")
    if record.resource_count is not None and record.prompt_count is not None:
        resources = plural(record.resource_count, "resource")
        after.append(f"{resources}, {plural(record.prompt_count, 'prompt')}")

    def line(target: str) -> str:
        return " · ".join(p for p in (printable(kind), target, *after) if p)

    text = line(target)
    if width is None or display_width(text) <= width:
        return text
    room = width - (display_width(text) - display_width(target))
    if target:
        text = line(_fit_middle(target, max(room, _TARGET_MIN)))
    return _fit(text, width)


def status_table(
    records: Mapping[str, HealthRecord],
    *,
    now: float | None = None,
    color: bool = False,
    width: int | None = None,
) -> str:
    """The health records as the ``mcp-supervisor status`` table (docs/monitoring.md).

    A pure function of ``records`` and ``now`` (unix seconds, default the current time),
    which "Last Heard" and the seconds until the next retry are counted from. Each
    server's row is followed by its second line (:func:`about`), then — for a server
    down whose Details cell shows only part of the reason — the whole reason. Columns
    are aligned by display width (an icon takes two columns). Lines are whole without
    ``width`` (for a pipe or a file); with it (a terminal's), each fits in ``width``
    columns: a Details cell's error is cut with ``…``, a command line or URL in its
    middle, the reason wrapped. ``color`` adds ANSI colours (for a terminal); without it
    the text is plain. No trailing newline.
    """
    now = time.time() if now is None else now
    rows = []
    for r in records.values():
        tools = "—" if r.tool_count is None else str(r.tool_count)
        heard = ago(last_heard(r), now)
        rows.append((r, printable(r.server), ICONS.get(r.status, "?"), tools, heard))
    name_w = max([_NAME_MIN, *(display_width(row[1]) for row in rows)]) + _GAP
    digits = max([_TOOLS_DIGITS, *(display_width(row[3]) for row in rows)])
    tools_w = max(_TOOLS_MIN, digits) + _GAP
    heard_w = max([_HEARD_MIN, *(display_width(row[4]) for row in rows)]) + _GAP
    rule_w = _RULE + (name_w - _NAME_MIN - _GAP) + (tools_w - _TOOLS_MIN - _GAP)
    rule_w += heard_w - _HEARD_MIN - _GAP

    def paint(text: str, *codes: str) -> str:
        return "".join(codes) + text + _RESET if color and codes and text else text

    rule = paint(_fit("─" * rule_w, width), _DIM)
    header = (
        "  "
        + _pad("Server", name_w)
        + _pad("Status", _STATUS_WIDTH)
        + _pad("Tools", tools_w)
        + _pad("Last Heard", heard_w)
        + "Details"
    )
    lines = [paint("MCP Server Status", _BOLD), rule, paint(_fit(header, width), _BOLD), rule]
    for record, name, icon, tools, heard in rows:
        head = (
            "  "
            + _pad(name, name_w)
            + _pad(icon, _STATUS_WIDTH)
            + _pad(tools.rjust(digits), tools_w)
            + _pad(heard, heard_w)
        )
        room = None if width is None else width - display_width(head)
        detail = details(record, now)
        cut = room is not None and display_width(detail) > room
        if room is not None and room < 1:
            lines.append(_fit(head.rstrip(), width))
        else:
            detail = paint(details(record, now, room), _DETAIL_COLORS.get(record.status, ""))
            lines.append((head + detail).rstrip())
        second = about(record, None if width is None else max(1, width - len(_INDENT)))
        lines.append(paint(_fit(_INDENT + second, width), _DIM))
        lines += [paint(line, _DIM) for line in _full_reason(record, width, cut)]
    connected = [r for r in records.values() if r.status == ServerStatus.CONNECTED]
    disabled = sum(r.status == ServerStatus.DISABLED for r in records.values())
    tools_total = sum(r.tool_count or 0 for r in connected)
    everyone = len(connected) == len(records) - disabled
    up = paint(f"{len(connected)} connected", _GREEN if everyone else _YELLOW)
    configured = plural(len(records), "server") + " configured"
    if disabled:
        configured += f" ({disabled} disabled)"
    footer = f"  {configured} | {up} | {plural(tools_total, 'tool')} available"
    lines += [rule, footer]
    return "\n".join(lines)


#: continuation lines of a reason under its row, at most
_REASON_LINES = 4


def _full_reason(record: HealthRecord, width: int | None, cut: bool) -> list[str]:
    """The whole reason a server is down, under its row, when the Details cell shows
    only part of it: its gist (the first clause: "exited with code 1", say, without the
    line of stderr that says why), or the cell was ``cut`` to fit. One line without
    ``width``; wrapped to it (at most four lines) with it."""
    if (
        record.status
        not in (
            ServerStatus.DISCONNECTED,
            ServerStatus.FAILED,
            ServerStatus.DEGRADED,
            ServerStatus.AUTH_FAILED,
        )
        or not record.last_error
    ):
        return []
    full = printable(" ".join(_SERVER_PREFIX.sub("", record.last_error.strip()).split()))
    if full == short_error(record.last_error) and not cut:
        return []
    indent = _INDENT + "↳ "
    if width is None:
        return [indent + full]
    lines = textwrap.wrap(
        full,
        width=max(20, width - display_width(indent)),
        max_lines=_REASON_LINES,
        placeholder=" …",
        break_on_hyphens=False,
    )
    return [indent + lines[0], *("        " + line for line in lines[1:])]


#: The statuses a server stays in until something happens (or nothing will): what
#: ``status`` waits for.
_SETTLED = frozenset(
    {
        ServerStatus.CONNECTED,
        ServerStatus.UNVERIFIED,
        ServerStatus.FAILED,
        ServerStatus.STOPPED,
        ServerStatus.NEEDS_AUTH,
        ServerStatus.AUTH_FAILED,
    }
)


def progress_line(records: Mapping[str, HealthRecord]) -> str:
    """``connecting 3/8…``: how many servers have settled (connected, failed, stopped,
    or waiting for a login) of all enabled ones, while ``status`` waits for them."""
    enabled = [r for r in records.values() if r.status != ServerStatus.DISABLED]
    settled = sum(r.status in _SETTLED for r in enabled)
    return f"connecting {settled}/{len(enabled)}…"
