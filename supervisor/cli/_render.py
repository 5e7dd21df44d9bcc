"""What ``call`` and ``tools`` print, built once for both ways a command gets its answer:
from servers it started itself, or from a running gateway.

Each command has one document — what ``--json`` prints — built from the same input both
ways, and one printer of it for people:

* ``call``: the tool's result as MCP sends it (``CallToolResult`` as JSON: what a
  gateway answers, or what the command's own supervisor received) →
  :func:`call_document` → :func:`print_call`; a failure → :func:`call_error`.
* ``tools``: the document of :func:`supervisor.monitor._document.tools_document` (which a gateway
  serves at ``/tools``) → :func:`print_tools`.

The standard library only (and :mod:`supervisor._util._previews`): a call through a running
gateway renders its answer without loading the MCP SDK, attrs or trio. Every string a
server sent is made printable (:func:`supervisor._util._printable.printable`) before it reaches
a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from .._util._plural import plural
from .._util._previews import (
    SpillDirectory,
    b64_size,
    decoded,
    image_kept,
    image_note,
    spill,
    structured_preview,
    suffix_for,
    text_preview,
)
from .._util._printable import printable
from ..server._status import ServerStatus

__all__ = [
    "CallOutput",
    "call_document",
    "call_error",
    "call_spill_dir",
    "print_call",
    "print_status",
    "print_tools",
    "report_call",
    "signature",
    "stdout_width",
]


def stdout_width() -> int | None:
    """The display columns a table's lines are cut to: the terminal's (``$COLUMNS``
    first) when standard output is one; ``None`` — whole lines — when it is a pipe or a
    file, which has no width (as ``ls``, ``git`` and ``ps`` do)."""
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def call_spill_dir() -> SpillDirectory:
    """Where ``call`` writes what a preview leaves out: a directory of its own naming in
    the temporary directory, made on the first spill (never, if nothing spills) and kept
    after the command, which names its files."""
    import tempfile

    name = f"mcp-supervisor-call-{os.urandom(8).hex()}"
    return SpillDirectory(Path(tempfile.gettempdir()) / name)


class CallDocument(TypedDict):
    """What ``call --json`` prints of a call's result."""

    tool: str
    server: object
    text: str
    structured: object
    is_error: bool
    images: list[dict[str, object]]
    audio: list[dict[str, object]]
    resources: list[dict[str, object]]
    spilled_to: str | None


class CallOutput:
    """A rendered call: :attr:`document` (``call --json``) and :attr:`preview`, the
    structured content's preview printed when the result has no text."""

    __slots__ = ("document", "preview")

    def __init__(self, document: CallDocument, preview: str | None) -> None:
        self.document = document
        self.preview = preview


def call_document(
    tool: str,
    server: object,
    result: Mapping[str, Any],
    *,
    limits: Mapping[str, int] | None,
    spill_dir: SpillDirectory,
) -> CallOutput:
    """The ``call --json`` document of ``result`` (a ``CallToolResult`` as JSON) of
    ``tool`` on ``server``: the text joined — within ``limits`` (``supervisor.limits``
    names: ``maxPreviewBytes``, ``maxPreviewLines``, ``maxStructuredPreviewBytes``,
    ``maxInlineImages``, ``maxImageBytes``), a preview and the file in ``spill_dir``
    holding the whole of it, as :func:`supervisor.tools._results.normalize_result` cuts it; without
    limits, whole — images inline (past the limits, saved to files named in the text),
    audio, resources, and the structured content."""
    texts: list[str] = []
    images: list[dict[str, object]] = []
    audio: list[dict[str, object]] = []
    resources: list[dict[str, object]] = []
    notes: list[str] = []
    seen_images = 0
    for block in result.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            data, mime = str(block.get("data", "")), str(block.get("mimeType", ""))
            media = {"mime_type": mime, "size": b64_size(data), "data": data}
            if kind == "audio":
                audio.append(media)
                continue
            seen_images += 1
            why = None
            if limits is not None:
                kept = len(images)
                why = image_kept(
                    b64_size(data), kept, limits["maxInlineImages"], limits["maxImageBytes"]
                )
            if why is None:
                images.append(media)
                continue
            path = spill(decoded(data), tool, spill_dir, suffix_for(mime))
            notes.append(image_note(seen_images, mime, b64_size(data), why, path))
        elif kind == "resource" and isinstance(block.get("resource"), Mapping):
            resources.append(_embedded(block["resource"]))
        elif kind == "resource_link":
            resources.append(
                {
                    "kind": "link",
                    "uri": str(block.get("uri")),
                    "mime_type": block.get("mimeType"),
                    "name": block.get("name"),
                    "size": block.get("size"),
                    "text": None,
                    "blob": None,
                }
            )
    structured = result.get("structuredContent")
    preview = None
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False, separators=(",", ":")).encode()
        if limits is None:
            preview = encoded.decode()
        else:
            limit = limits["maxStructuredPreviewBytes"]
            preview = structured_preview(encoded, tool, spill_dir, limit)
    text, spilled_to = "\n".join(texts), None
    if limits is not None:
        max_bytes, max_lines = limits["maxPreviewBytes"], limits["maxPreviewLines"]
        text, spilled_to = text_preview(text, tool, spill_dir, max_bytes, max_lines)
    if notes:
        text = "\n".join([text, *notes]) if text else "\n".join(notes)
    document: CallDocument = {
        "tool": tool,
        "server": server,
        "text": text,
        "structured": structured,
        "is_error": bool(result.get("isError")),
        "images": images,
        "audio": audio,
        "resources": resources,
        "spilled_to": None if spilled_to is None else str(spilled_to),
    }
    return CallOutput(document, preview)


def _embedded(inner: Mapping[str, Any]) -> dict[str, object]:
    text, blob = inner.get("text"), inner.get("blob")
    size = None
    if isinstance(text, str):
        size = len(text.encode("utf-8", "replace"))
    elif isinstance(blob, str):
        size = b64_size(blob)
    return {
        "kind": "embedded",
        "uri": str(inner.get("uri")),
        "mime_type": inner.get("mimeType"),
        "name": None,
        "size": size,
        "text": text if isinstance(text, str) else None,
        "blob": blob if isinstance(blob, str) else None,
    }


def report_call(
    tool: str,
    server: object,
    result: Mapping[str, Any],
    *,
    limits: Mapping[str, int] | None,
    as_json: bool,
) -> int:
    """Print the result of a call that was answered (:func:`call_document`, then
    :func:`print_call`) and return the exit code: 0, or 1 when the tool reported an
    error — its text then on stderr (the ``--json`` document on stdout all the same)."""
    output = call_document(tool, server, result, limits=limits, spill_dir=call_spill_dir())
    if output.document["is_error"]:
        said = str(output.document["text"]).strip() or "(no message)"
        line = f"mcp-supervisor call: tool {tool!r} reported an error: {said}"
        print(printable(line, keep_lines=True), file=sys.stderr)
        if as_json:
            print_call(output, True)
        return 1
    print_call(output, as_json)
    return 0


def print_call(output: CallOutput, as_json: bool) -> None:
    """Print a call's result: its ``--json`` document; or the text (a preview naming the
    file holding the rest when it was too long) — else the structured content's preview —
    then a line per image, audio clip and resource."""
    document = output.document
    if as_json:
        _print_json(document)
        return
    if document["text"]:
        print(printable(str(document["text"]), keep_lines=True))
    elif output.preview is not None:
        print(printable(output.preview, keep_lines=True))
    for kind, key in (("image", "images"), ("audio", "audio")):
        for media in document[key]:
            print(f"[{kind}: {printable(str(media['mime_type']))}, {media['size']} bytes]")
    for r in document["resources"]:
        parts = [
            None if r["mime_type"] is None else printable(str(r["mime_type"])),
            None if r["size"] is None else f"{printable(str(r['size']))} bytes",
            None if r["name"] is None else f"name {printable(repr(r['name']))}",
        ]
        details = ", ".join(p for p in parts if p)
        uri = printable(str(r["uri"]))
        print(f"[resource ({r['kind']}): {uri}{', ' + details if details else ''}]")


def call_error(
    tool: str,
    kind: str,
    message: str,
    as_json: bool,
    *,
    said: str | None = None,
    **data: object,
) -> None:
    """A call that failed before a result: ``mcp-supervisor call: KIND: MESSAGE`` (or
    ``said``) on stderr and, with ``--json``, ``{"tool", "error": {"type", "message",
    ...data}}`` on stdout — ``data`` is ``server``, ``effect`` ("not executed" or "may
    have taken effect"), and ``errors`` for invalid arguments."""
    line = said if said is not None else f"{kind}: {message}"
    print(f"mcp-supervisor call: {printable(line, keep_lines=True)}", file=sys.stderr)
    if as_json:
        _print_json({"tool": tool, "error": {"type": kind, "message": message, **data}})


# -- status ------------------------------------------------------------------------------


def print_status(
    records: Mapping[str, Any], document: object | None, *, redraw: bool = False
) -> int:
    """Print the ``status`` of ``records`` (server name -> health record): ``document``
    (the ``status --json`` one) as JSON when given, else the table — coloured on a
    terminal unless ``$NO_COLOR``, drawn over the last one with ``redraw``. Returns the
    exit code: 0 when every enabled server is connected (a disabled one counts for
    nothing)."""
    if document is not None:
        print(json.dumps(document), flush=True)
    else:
        from ..monitor import status_table

        tty = sys.stdout.isatty()
        color = tty and "NO_COLOR" not in os.environ
        table = status_table(records, color=color, width=stdout_width())
        # Home and clear-to-end: the table is redrawn in place, without flicker.
        print(("\x1b[H\x1b[J" if redraw else "") + table, flush=True)
    enabled = [r for r in records.values() if r.status != ServerStatus.DISABLED]
    return 0 if all(r.status == ServerStatus.CONNECTED for r in enabled) else 1


# -- tools -------------------------------------------------------------------------------

#: The hints column: a letter where the tool's annotation says so, ``-`` elsewhere.
_HINTS = (
    ("r", "readOnlyHint"),
    ("d", "destructiveHint"),
    ("i", "idempotentHint"),
    ("o", "openWorldHint"),
)
#: The approval column for each reason a call needs approval (none: ``auto``).
_ASKS = {"destructive annotation": "ask (d)", "destructive name": "ask (d)"}
#: Said under the table when a tool asks because it is destructive.
DESTRUCTIVE_NOTE = (
    "ask (d): destructive, asks even when autoApprove is true or a glob; "
    "name it exactly in autoApprove to let it go ahead"
)


def print_tools(document: Mapping[str, Any], as_json: bool, *, note: str | None = None) -> int:
    """Print a ``tools`` document (:func:`supervisor.monitor._document.tools_document`): as JSON,
    or a table — name, server, approval (``auto``: goes ahead; ``ask``: needs approval;
    ``ask (d)``: needs approval as a destructive tool, even where ``autoApprove`` is
    true or a glob), the
    hints, the first line of the description, and under each tool its parameters — and
    a footer; each server that is not connected, or skipped tools, said on stderr (with
    ``note`` after them, if given). Returns the exit code: 1 when no server is connected."""
    servers = document.get("servers") or []
    down = [s for s in servers if s.get("status") != ServerStatus.CONNECTED]
    for server in servers:
        for why in server.get("skipped") or ():
            _warn(f"server {server['name']!r} skipped {why}")
        if server.get("status") != ServerStatus.CONNECTED:
            why = server.get("error") or "not connected"
            _warn(f"server {server['name']!r} is {server.get('status')}: {why}")
    if note is not None and down:
        _warn(note)
    if as_json:
        _print_json(dict(document))
    else:
        tools = document.get("tools") or []
        print(_tools_table(tools))
        if any(_asks(t) == "ask (d)" for t in tools):
            print(DESTRUCTIVE_NOTE)
        print(_tools_footer(document, down))
    return 1 if servers and len(down) == len(servers) else 0


def _warn(line: str) -> None:
    print(f"mcp-supervisor tools: {printable(line, keep_lines=True)}", file=sys.stderr)


def _asks(tool: Mapping[str, Any]) -> str:
    reason = tool.get("approval")
    return "auto" if reason is None else _ASKS.get(str(reason), "ask")


def _hints(tool: Mapping[str, Any]) -> str:
    """``r-i-``: read-only, destructive, idempotent, open-world, where annotated true."""
    hints = tool.get("annotations") or {}
    return "".join(letter if hints.get(key) is True else "-" for letter, key in _HINTS)


def signature(params: Sequence[Mapping[str, Any]]) -> str:
    """``title*: string, tags: array<string>``: each parameter's name, ``*`` when it is
    required, and its type; ``(no parameters)`` for none — as
    :func:`supervisor.tools._params.signature` writes
    :class:`~supervisor.tools._params.Parameter` s."""
    if not params:
        return "(no parameters)"
    return ", ".join(f"{p['name']}{'*' if p['required'] else ''}: {p['type']}" for p in params)


def _tools_table(tools: Sequence[Mapping[str, Any]]) -> str:
    rows: list[tuple[str, str, str, str, str, str | None]] = [
        ("name", "server", "approval", "hints", "description", None)
    ]
    for t in tools:
        description = str(t.get("description") or "").strip().split("\n", 1)[0]
        params = signature(t.get("parameters") or [])
        rows.append(
            (
                printable(str(t["name"])),
                printable(str(t["server"])),
                _asks(t),
                _hints(t),
                printable(description),
                printable(params),
            )
        )
    width = stdout_width()
    name_w = max(len(r[0]) for r in rows)
    server_w = max(len(r[1]) for r in rows)
    asks_w = max(len(r[2]) for r in rows)

    def fit(line: str) -> str:
        return line if width is None or len(line) <= width else line[: width - 1] + "…"

    lines = []
    for name, server, asks, hints, description, params in rows:
        line = (
            f"{name:<{name_w}}  {server:<{server_w}}  {asks:<{asks_w}}  {hints:<5}  {description}"
        )
        lines.append(fit(line.rstrip()))
        if params is not None:
            lines.append(fit(f"    {params}"))
    return "\n".join(lines)


def _tools_footer(document: Mapping[str, Any], down: Sequence[Mapping[str, Any]]) -> str:
    """``N tools from M servers``, or ``K matches for 'Q' among N tools from M servers``,
    then what was skipped and which servers are not connected."""
    servers = document.get("servers") or []
    shown = len(document.get("tools") or ())
    total = int(document.get("total", shown))
    line = f"{plural(total, 'tool')} from {plural(len(servers) - len(down), 'server')}"
    query = document.get("search")
    if query is not None:
        line = f"{plural(shown, 'match', 'matches')} for {printable(repr(query))} among {line}"
    unsupported = sum(int(s.get("unsupported") or 0) for s in servers)
    if unsupported:
        line += f"; {plural(unsupported, 'tool')} skipped as unsupported"
    if down:
        names = ", ".join(printable(str(s["name"])) for s in down)
        line += f"; not connected: {names} (see stderr)"
    return line


def _print_json(document: object) -> None:
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
