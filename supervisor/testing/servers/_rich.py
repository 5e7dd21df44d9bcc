"""The ``rich`` fixture: every kind of content, structured output, resources and prompts.

``make_server("rich")`` builds the common ``echo``/``add``/``count`` server and then calls
``add_rich_features`` (this module) on it.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import wave
import zlib

from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

from ..._sdk import lowlevel_server, tool_manager
from ._advertise import advertise
from ._counting import ExecutionRecorder, call_id_of

NOTE_TITLES = ("hello", "todo")
"""The notes a fresh ``rich`` server has (``notes://index`` lists them, one a line)."""

COUNT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}
"""The output schema ``structured_ok`` and ``structured_bad`` both declare."""


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def tiny_png() -> bytes:
    """A valid 1×1 RGBA PNG (one transparent pixel), built deterministically."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixels = zlib.compress(b"\x00" + b"\x00\x00\x00\x00")  # filter byte + one pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


def tiny_wav() -> bytes:
    """A valid WAV file: mono, 8 kHz, 16-bit, four silent samples."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 4)
    return buffer.getvalue()


def big_text(kib: int) -> str:
    """``kib`` × 1024 ASCII characters: lines ``line 1``, ``line 2``, … cut to length."""
    size = kib * 1024
    parts: list[str] = []
    length = 0
    n = 0
    while length < size:
        n += 1
        line = f"line {n}\n"
        parts.append(line)
        length += len(line)
    return "".join(parts)[:size]


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def add_rich_features(server: MCPServer, recorder: ExecutionRecorder) -> None:
    """Add the ``rich`` kind's tools, resources and prompts to `server` (see ``make_server``)."""
    titles: list[str] = list(NOTE_TITLES)
    png = tiny_png()
    _advertise_list_changes(server)

    @server.tool()
    async def image(ctx: Context) -> CallToolResult:
        """A tiny PNG image and a text block."""
        recorder.record("image", call_id_of(ctx))
        data = base64.b64encode(png).decode("ascii")
        return CallToolResult(
            content=[ImageContent(data=data, mime_type="image/png"), _text("an image")]
        )

    @server.tool()
    async def audio(ctx: Context) -> CallToolResult:
        """A short silent WAV clip."""
        recorder.record("audio", call_id_of(ctx))
        data = base64.b64encode(tiny_wav()).decode("ascii")
        return CallToolResult(content=[AudioContent(data=data, mime_type="audio/wav")])

    @server.tool(name="big_text")
    async def big_text_tool(kib: int, ctx: Context) -> CallToolResult:
        """Exactly `kib` KiB of ASCII text (lines "line N")."""
        recorder.record("big_text", call_id_of(ctx))
        return CallToolResult(content=[_text(big_text(kib))])

    @server.tool()
    async def structured_ok(ctx: Context) -> CallToolResult:
        """Structured content that fits the declared output schema: {"count": 3}."""
        recorder.record("structured_ok", call_id_of(ctx))
        value = {"count": 3}
        return CallToolResult(content=[_text(json.dumps(value))], structured_content=value)

    @server.tool()
    async def structured_bad(ctx: Context) -> CallToolResult:
        """Structured content that breaks the declared output schema: {"count": "three"}."""
        recorder.record("structured_bad", call_id_of(ctx))
        value = {"count": "three"}
        return CallToolResult(content=[_text(json.dumps(value))], structured_content=value)

    # A tool annotated `-> CallToolResult` has no output model, so the SDK neither derives
    # a schema nor validates the result; a schema set on its metadata is published as is
    # ("advertised but not validated"): the bad result reaches the client unchanged.
    tools = tool_manager(server)
    for name in ("structured_ok", "structured_bad"):
        tool = tools.get_tool(name)
        assert tool is not None
        tool.fn_metadata.output_schema = dict(COUNT_SCHEMA)

    @server.tool()
    async def fail(message: str, ctx: Context) -> CallToolResult:
        """A tool failure: a result with isError set and `message` as its text."""
        recorder.record("fail", call_id_of(ctx))
        return CallToolResult(content=[_text(message)], is_error=True)

    @server.tool()
    async def delete_note(title: str, ctx: Context) -> str:
        """Delete the note `title` (destructive by its name; not annotated). Answers "ok"."""
        recorder.record("delete_note", call_id_of(ctx))
        return "ok"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def wipe(ctx: Context) -> str:
        """Annotated destructive, though its name does not say so. Answers "ok"."""
        recorder.record("wipe", call_id_of(ctx))
        return "ok"

    @server.tool()
    async def embedded(ctx: Context) -> CallToolResult:
        """An embedded text resource (note://hello) and a link to notes://index."""
        recorder.record("embedded", call_id_of(ctx))
        note = TextResourceContents(uri="note://hello", text="note hello", mime_type="text/plain")
        link = ResourceLink(name="index", uri="notes://index", mime_type="text/plain")
        return CallToolResult(content=[EmbeddedResource(type="resource", resource=note), link])

    @server.tool()
    async def add_note(title: str, ctx: Context) -> str:
        """Add a static resource notes://<title> and announce that the resources changed."""
        recorder.record("add_note", call_id_of(ctx))
        titles.append(title)

        async def read_note() -> str:
            return f"note {title}"

        server.resource(f"notes://{title}", name=title, mime_type="text/plain")(read_note)
        # Both eras, as the `changing` kind announces tool changes.
        await ctx.request_context.session.send_resource_list_changed()
        await ctx.notify_resources_changed()
        return f"added {title}"

    @server.resource("notes://index", name="index", mime_type="text/plain")
    async def index() -> str:
        return "\n".join(titles) + "\n"

    @server.resource("notes://logo", name="logo", mime_type="image/png")
    async def logo() -> bytes:
        return png

    @server.resource("note://{title}", name="note", mime_type="text/plain")
    async def note(title: str) -> str:
        recorder.record("note")  # a read that counts (and can crash, with --crash-after)
        return f"note {title}"

    @server.prompt()
    async def summarize(title: str) -> str:
        """Ask for a summary of the note `title`."""
        return f"Summarize note {title}"

    @server.prompt()
    async def greet() -> str:
        """A greeting; takes no arguments."""
        return "Hello!"


def _advertise_list_changes(server: MCPServer) -> None:
    # As the `changing` kind does for tools: the handshake's capabilities say
    # resources/prompts `listChanged: true` (2026-07-28 derives it from `subscriptions/listen`).
    notifications = NotificationOptions(resources_changed=True, prompts_changed=True)
    advertise(lowlevel_server(server), notifications)
