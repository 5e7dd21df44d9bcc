"""Result normalisation: a ``CallToolResult`` as a :class:`ToolResult`, within the limits.

:func:`normalize_result` joins the text blocks (a preview when long, the whole text
spilled to a private file in a :class:`SpillDirectory`), keeps images inline up to the
limits (the others are spilled to files too), keeps audio and resources, previews
``structuredContent`` (spilled whole when long) and checks it against the
``outputSchema``. Whatever a preview leaves out, it says so, and where the rest is.
"""

from __future__ import annotations

import atexit
import binascii
import mimetypes
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Literal

import attrs
import mcp_types as types
import msgspec

from .._limits import DEFAULT_MAX_PREVIEW_BYTES, Limits, size_text
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
    #: the result exactly as the server sent it
    raw: types.CallToolResult | None = attrs.field(default=None, eq=False, repr=False)

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
) -> ToolResult:
    """Normalise a tool's result into a :class:`ToolResult`.

    ``tool`` is the tool (or its name, used in messages and the spill file's name); its
    ``output_schema`` applies unless ``output_schema`` is given. When the result is not an
    error and there is an output schema, ``structuredContent`` must be present and match it,
    or :class:`~supervisor.errors.ToolOutputInvalid` is raised naming the path. An error
    result is never validated (it need not conform).

    ``limits`` (:class:`~supervisor.server.Limits`; ``preview_bytes`` overrides its
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
    """
    name = tool if isinstance(tool, str) else tool.name
    if output_schema is None and not isinstance(tool, str):
        output_schema = tool.output_schema
    limits = limits or _DEFAULT_LIMITS

    texts: list[str] = []
    images: list[MediaContent] = []
    audio: list[MediaContent] = []
    resources: list[ResourceContent] = []
    notes: list[str] = []
    seen_images = 0
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            seen_images += 1
            image = MediaContent(block.data, block.mime_type, _b64_size(block.data))
            if image.size > limits.max_image_bytes:
                why = f"larger than the {size_text(limits.max_image_bytes)} limit"
            elif len(images) >= limits.max_inline_images:
                n = limits.max_inline_images
                why = f"only {n} image{' is' if n == 1 else 's are'} kept inline"
            else:
                images.append(image)
                continue
            path = _spill(_decoded(image.data), name, spill_dir, _suffix(image.mime_type))
            notes.append(
                f"[image {seen_images} ({image.mime_type}, {image.size} bytes) not kept "
                f"inline: {why}; it is at {path}]"
            )
        elif isinstance(block, types.AudioContent):
            audio.append(MediaContent(block.data, block.mime_type, _b64_size(block.data)))
        elif isinstance(block, types.EmbeddedResource):
            resources.append(_embedded(block.resource))
        elif isinstance(block, types.ResourceLink):
            resources.append(
                ResourceContent(
                    "link", str(block.uri), block.mime_type, size=block.size, name=block.name
                )
            )

    structured = result.structured_content
    if output_schema is not None and not result.is_error:
        if structured is None:
            raise ToolOutputInvalid(
                name, [("(root)", "no structuredContent, but the tool declares an outputSchema")]
            )
        (validator or _validate._default_validator).validate_output(name, output_schema, structured)
    structured_preview = None
    if structured is not None:
        structured_preview = _structured_preview(
            structured, name, spill_dir, limits.max_structured_preview_bytes
        )

    text, spilled_to = _text_preview(
        "\n".join(texts),
        name,
        spill_dir,
        limits.max_preview_bytes if preview_bytes is None else preview_bytes,
        limits.max_preview_lines,
    )
    if notes:
        text = "\n".join([text, *notes]) if text else "\n".join(notes)
    return ToolResult(
        tool=name,
        text=text,
        images=tuple(images),
        audio=tuple(audio),
        resources=tuple(resources),
        structured=structured,
        is_error=bool(result.is_error),
        spilled_to=spilled_to,
        structured_preview=structured_preview,
        raw=result,
    )


def _text_preview(
    text: str,
    tool: str,
    spill_dir: str | os.PathLike[str] | None,
    max_bytes: int,
    max_lines: int,
) -> tuple[str, Path | None]:
    """``text``, or its preview and the file holding all of it when it is longer than
    ``max_bytes`` (UTF-8) or ``max_lines`` lines."""
    encoded = text.encode("utf-8", "replace")
    # Lines as people count them: a last line break ends a line, it does not start one.
    lines = text.count("\n") + (not text.endswith("\n"))
    if len(encoded) <= max_bytes and lines <= max_lines:
        return text, None
    spilled_to = _spill(encoded, tool, spill_dir)
    preview = encoded[:max_bytes].decode("utf-8", "ignore")
    if lines > max_lines:
        preview = "\n".join(preview.split("\n", max_lines)[:max_lines])
    kept = len(preview.encode())
    if lines > max_lines:
        shown = preview.count("\n") + 1
        said = f"{shown} of {lines} lines, {kept} of {len(encoded)} bytes"
    else:
        said = f"{kept} of {len(encoded)} bytes"
    note = f"[output truncated at {said}; the full output is at {spilled_to}]"
    return f"{preview}\n{note}", spilled_to


def _structured_preview(
    structured: object, tool: str, spill_dir: str | os.PathLike[str] | None, max_bytes: int
) -> str:
    """``structured`` as JSON, or its first ``max_bytes`` and a line naming the file
    holding all of it."""
    encoded = msgspec.json.encode(structured, enc_hook=str)  # compact UTF-8, as sent
    if len(encoded) <= max_bytes:
        return encoded.decode()
    path = _spill(encoded, tool, spill_dir, ".json")
    preview = encoded[:max_bytes].decode("utf-8", "ignore")
    return (
        f"{preview}\n[structured content truncated at {len(preview.encode())} of "
        f"{len(encoded)} bytes; the whole of it is at {path}]"
    )


def _decoded(data: str) -> bytes:
    """Base64 ``data`` decoded; the text itself if it is not base64."""
    try:
        return binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return data.encode("utf-8", "replace")


def _suffix(mime_type: str) -> str:
    return mimetypes.guess_extension(mime_type.split(";", 1)[0].strip()) or ".bin"


def _b64_size(data: str) -> int:
    body = "".join(data.split()).rstrip("=")
    return len(body) * 3 // 4


def _embedded(
    contents: types.TextResourceContents | types.BlobResourceContents,
) -> ResourceContent:
    uri = str(contents.uri)
    if isinstance(contents, types.TextResourceContents):
        size = len(contents.text.encode("utf-8", "replace"))
        return ResourceContent("embedded", uri, contents.mime_type, text=contents.text, size=size)
    return ResourceContent(
        "embedded", uri, contents.mime_type, blob=contents.blob, size=_b64_size(contents.blob)
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class SpillDirectory(os.PathLike[str]):
    """Where a supervisor session writes text results too large to keep in memory.

    * Named — ``SpillDirectory(path)``: that directory, created (mode 0700, parents
      too) on the first spill if it does not exist. It is never removed.
    * Default — ``SpillDirectory()``: a private ``mcp-supervisor-*`` temporary
      directory of mode 0700, created on the first spill (never, if nothing spills) and
      removed with everything in it by :meth:`close`. ``open_supervisor`` makes one for
      its block and closes it when the block ends, so the files of a session that named
      no ``spill_dir`` do not outlive it.

    A context manager (:meth:`close` on exit), and an :class:`os.PathLike`: ``os.fspath()``
    gives the directory, creating it if need be. A directory is only removed by the
    process that made it (not by a forked child).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._named = None if path is None else Path(path)
        self._temp: tuple[int, Path] | None = None  # (the pid that made it, the dir)
        self._closed = False

    def __repr__(self) -> str:
        if self._named is not None:
            return f"SpillDirectory({os.fspath(self._named)!r})"
        state = "closed" if self._closed else self.path or "not created yet"
        return f"<SpillDirectory private, {state}>"

    @property
    def named(self) -> bool:
        """Whether the user named the directory (then it is never removed)."""
        return self._named is not None

    @property
    def path(self) -> Path | None:
        """The directory: the named one, or the private one once created (else ``None``)."""
        if self._named is not None:
            return self._named
        return None if self._temp is None else self._temp[1]

    def get(self) -> Path:
        """The directory, created now if it does not exist yet.

        Raises :exc:`RuntimeError` for a default directory that has been closed.
        """
        if self._named is not None:
            if not self._named.exists():
                self._named.mkdir(mode=0o700, parents=True)
                self._named.chmod(0o700)  # whatever the umask
            return self._named
        if self._closed:
            raise RuntimeError("the spill directory has been closed (its session ended)")
        temp = self._temp
        if temp is None or temp[0] != os.getpid() or not temp[1].is_dir():
            temp = self._temp = (os.getpid(), Path(tempfile.mkdtemp(prefix="mcp-supervisor-")))
        return temp[1]

    def __fspath__(self) -> str:
        return os.fspath(self.get())

    def close(self) -> None:
        """Remove the private directory and its files, if this process made it; a named
        directory is left alone. Later spills raise; calling it again does nothing."""
        self._closed = True
        temp, self._temp = self._temp, None
        if temp is not None and temp[0] == os.getpid():
            shutil.rmtree(temp[1], ignore_errors=True)

    def __enter__(self) -> SpillDirectory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# Where normalize_result() spills when called without a spill_dir (outside a supervisor
# session): one private directory per process, bounded to that one, made on the first
# spill and removed at exit (the atexit hook is registered then, not at import).
_process_spill: SpillDirectory | None = None


def _process_spill_directory() -> SpillDirectory:
    global _process_spill
    if _process_spill is None:
        _process_spill = SpillDirectory()
        atexit.register(_process_spill.close)
    return _process_spill


def _spill_directory(spill_dir: str | os.PathLike[str] | None) -> Path:
    if isinstance(spill_dir, SpillDirectory):
        return spill_dir.get()
    if spill_dir is None:
        return _process_spill_directory().get()
    return SpillDirectory(spill_dir).get()


def _spill(
    data: bytes, tool: str, spill_dir: str | os.PathLike[str] | None, suffix: str = ".txt"
) -> Path:
    directory = _spill_directory(spill_dir)
    prefix = (_UNSAFE.sub("_", tool)[:64] or "tool") + "-"
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)  # mode 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)
