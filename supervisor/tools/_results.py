"""Result normalisation: a ``CallToolResult`` as a :class:`ToolResult`, within the limits.

:func:`normalize_result` joins the text blocks (a preview when long, the whole text
spilled to a private file in a :class:`SpillDirectory`), keeps images inline up to the
limits (the others are spilled to files too), keeps audio and resources, previews
``structuredContent`` (spilled whole when long) and checks it against the
``outputSchema``. Whatever a preview leaves out, it says so, and where the rest is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import attrs
import mcp_types as types
import msgspec

from .._util._previews import SpillDirectory as SpillDirectory
from .._util._previews import (
    b64_size,
    decoded,
    image_kept,
    image_note,
    structured_preview,
    suffix_for,
    text_preview,
)
from .._util._previews import spill as _spill
from ..config._limits import DEFAULT_MAX_PREVIEW_BYTES, Limits
from ..errors import ToolError, ToolOutputInvalid
from . import _validate
from ._validate import ArgumentValidator, JSONSchema

#: Largest text kept in memory in a :class:`ToolResult`; more is spilled to a file (24 KiB).
DEFAULT_PREVIEW_BYTES = DEFAULT_MAX_PREVIEW_BYTES
_DEFAULT_LIMITS = Limits()


@attrs.frozen
class MediaContent:
    """An image or audio block: base64 ``data``, its ``mime_type``, ``size`` in bytes
    once decoded."""

    data: str
    mime_type: str
    size: int


@attrs.frozen
class ResourceContent:
    """A resource in a result: ``kind`` is ``"embedded"`` (its contents are here: ``text``,
    or ``blob`` in base64) or ``"link"`` (only a reference; ``name``, and ``size`` if the
    server said). ``size`` is in bytes: UTF-8 text, decoded blob."""

    kind: Literal["embedded", "link"]
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    size: int | None = None
    name: str | None = None


@attrs.frozen
class ToolResult:
    """A normalised tool result.

    ``text`` is the result's text blocks joined with newlines — or, when that is longer than
    the preview limits (bytes or lines), its beginning followed by a line naming
    ``spilled_to``, the file holding the whole text — then a line for each image not kept
    inline (more than the limit, or too large), naming the file it was saved to.
    ``structured`` is ``structuredContent`` (validated against the ``outputSchema`` when
    the tool has one), whole; ``structured_preview`` is it as JSON, cut to the limit with a
    last line naming the file holding the whole of it. ``is_error`` means the tool reported
    failure: :meth:`raise_for_error` turns it into :class:`~supervisor.errors.ToolError`.
    """

    tool: str
    text: str
    images: tuple[MediaContent, ...] = ()
    audio: tuple[MediaContent, ...] = ()
    resources: tuple[ResourceContent, ...] = ()
    structured: object | None = None
    is_error: bool = False
    spilled_to: Path | None = None
    structured_preview: str | None = None
    #: the result exactly as the server sent it (for a relayed multi-round-trip call, the
    #: ``InputRequiredResult`` of a round, or the task handle a server made of it, with
    #: no text: see ``SupervisorHandle.call``)
    raw: types.CallToolResult | types.InputRequiredResult | types.Result | None = attrs.field(
        default=None, eq=False, repr=False
    )

    def raise_for_error(self, *, server: str | None = None) -> None:
        """Raise :class:`~supervisor.errors.ToolError` with the tool's text if ``is_error``;
        do nothing otherwise."""
        if self.is_error:
            said = self.text.strip() or "(no message)"
            raise ToolError(
                f"tool {self.tool!r} reported an error: {said}",
                tool=self.tool,
                text=self.text,
                server=server,
                result=self,
            )


def normalize_result(
    result: types.CallToolResult,
    *,
    tool: types.Tool | str,
    output_schema: JSONSchema | None = None,
    preview_bytes: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    validator: ArgumentValidator | None = None,
    limits: Limits | None = None,
    spill: bool = True,
) -> ToolResult:
    """Normalise a tool's result into a :class:`ToolResult`.

    ``tool`` is the tool (or its name, used in messages and the spill file's name); its
    ``output_schema`` applies unless ``output_schema`` is given. When the result is not an
    error and there is an output schema, ``structuredContent`` must be present and match it,
    or :class:`~supervisor.errors.ToolOutputInvalid` is raised naming the path. An error
    result is never validated (it need not conform).

    ``limits`` (:class:`Limits`; ``preview_bytes`` overrides its
    ``max_preview_bytes``) bound what is kept in memory. Text longer than
    ``max_preview_bytes`` (UTF-8) or ``max_preview_lines`` lines is written whole to a new
    file of mode 0600, in ``spill_dir`` — a :class:`SpillDirectory` (a supervisor
    session's), or a path (created with mode 0700 if missing, never removed) — or else in
    a private per-process directory of mode 0700 created on first use and removed at exit;
    ``text`` is then the preview, cut at a character boundary, and a last line saying how
    much was kept and where the whole output is. Images past the first
    ``max_inline_images``, and any larger than ``max_image_bytes``, are saved (decoded) to
    files there too, each named in a line of ``text``. ``structuredContent`` longer than
    ``max_structured_preview_bytes`` as JSON is saved whole, and its preview says where.

    ``spill=False`` keeps the whole result in memory and writes no file: ``text`` is all
    of the text, every image is inline, ``structured_preview`` all of the JSON — for a
    caller that passes the result on as it came (the gateway) or renders it itself.
    """
    name = tool if isinstance(tool, str) else tool.name
    if output_schema is None and not isinstance(tool, str):
        output_schema = tool.output_schema
    limits = limits or _DEFAULT_LIMITS
    where = _Spill(name, spill_dir) if spill else None
    content = result.content
    # (text alone, the common answer: no block to sort, none saved)
    texts = [block.text for block in content if type(block) is types.TextContent]
    blocks = _TEXT_ONLY if len(texts) == len(content) else _Blocks.of(content, limits, where)
    if blocks is not _TEXT_ONLY:
        texts = blocks.texts
    structured = result.structured_content
    if output_schema is not None and not result.is_error:
        _check_output(name, output_schema, structured, validator)
    preview = None
    if structured is not None:
        encoded = msgspec.json.encode(structured, enc_hook=str)  # compact UTF-8, as sent
        if where is None:
            preview = encoded.decode()
        else:
            preview = structured_preview(
                encoded, name, spill_dir, limits.max_structured_preview_bytes
            )
    text, spilled_to = "\n".join(texts), None
    if where is not None:
        max_bytes = limits.max_preview_bytes if preview_bytes is None else preview_bytes
        text, spilled_to = text_preview(text, name, spill_dir, max_bytes, limits.max_preview_lines)
    if blocks.notes:
        text = "\n".join([text, *blocks.notes]) if text else "\n".join(blocks.notes)
    return ToolResult(
        tool=name,
        text=text,
        images=tuple(blocks.images),
        audio=tuple(blocks.audio),
        resources=tuple(blocks.resources),
        structured=structured,
        is_error=bool(result.is_error),
        spilled_to=spilled_to,
        structured_preview=preview,
        raw=result,
    )


@attrs.frozen
class _Spill:
    """Where a result's overflow goes: files named after ``tool``, in ``directory``."""

    tool: str
    directory: str | os.PathLike[str] | None


@attrs.define
class _Blocks:
    """A result's content blocks sorted by kind; ``notes`` say where images were saved."""

    texts: list[str] = attrs.Factory(list)
    images: list[MediaContent] = attrs.Factory(list)
    audio: list[MediaContent] = attrs.Factory(list)
    resources: list[ResourceContent] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)

    @classmethod
    def of(
        cls, content: Iterable[types.ContentBlock], limits: Limits, spill: _Spill | None
    ) -> _Blocks:
        """The blocks of ``content``; with ``spill``, the images past the limits are saved
        there (decoded), in order, each with a note."""
        blocks = cls()
        seen_images = 0
        for block in content:
            if isinstance(block, types.TextContent):
                blocks.texts.append(block.text)
            elif isinstance(block, types.ImageContent):
                seen_images += 1
                blocks._image(block, seen_images, limits, spill)
            elif isinstance(block, types.AudioContent):
                blocks.audio.append(MediaContent(block.data, block.mime_type, b64_size(block.data)))
            elif isinstance(block, types.EmbeddedResource):
                blocks.resources.append(_embedded(block.resource))
            elif isinstance(block, types.ResourceLink):
                blocks.resources.append(
                    ResourceContent(
                        "link", str(block.uri), block.mime_type, size=block.size, name=block.name
                    )
                )
        return blocks

    def _image(
        self, block: types.ImageContent, seen: int, limits: Limits, spill: _Spill | None
    ) -> None:
        """Keep the ``seen``-th image inline, or save it and say so in a note."""
        image = MediaContent(block.data, block.mime_type, b64_size(block.data))
        why = None
        if spill is not None:
            kept = len(self.images)
            why = image_kept(image.size, kept, limits.max_inline_images, limits.max_image_bytes)
        if why is None:
            self.images.append(image)
            return
        assert spill is not None
        path = _spill(decoded(image.data), spill.tool, spill.directory, suffix_for(image.mime_type))
        self.notes.append(image_note(seen, image.mime_type, image.size, why, path))


#: The blocks of a result of text blocks alone, but for its texts (none to sort or save).
_TEXT_ONLY = _Blocks()


def _check_output(
    name: str,
    output_schema: JSONSchema,
    structured: object,
    validator: ArgumentValidator | None,
) -> None:
    """A result that is not an error must have ``structuredContent`` matching the tool's
    ``outputSchema``: :class:`~supervisor.errors.ToolOutputInvalid` otherwise."""
    if structured is None:
        raise ToolOutputInvalid(
            name, [("(root)", "no structuredContent, but the tool declares an outputSchema")]
        )
    (validator or _validate._default_validator).validate_output(name, output_schema, structured)


def _embedded(
    contents: types.TextResourceContents | types.BlobResourceContents,
) -> ResourceContent:
    uri = str(contents.uri)
    if isinstance(contents, types.TextResourceContents):
        size = len(contents.text.encode("utf-8", "replace"))
        return ResourceContent("embedded", uri, contents.mime_type, text=contents.text, size=size)
    return ResourceContent(
        "embedded", uri, contents.mime_type, blob=contents.blob, size=b64_size(contents.blob)
    )
