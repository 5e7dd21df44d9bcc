"""Previews of tool results: what is kept in memory and shown, and the files that hold the
rest.

The pieces :func:`~supervisor.tools._results.normalize_result` builds a
:class:`~supervisor.tools.ToolResult` from, and that ``mcp-supervisor call`` renders a
result with — whether it made the call itself or a gateway did — so that both cut a text
at the same place, say the same thing about it, and spill it to the same kind of file:

* :func:`text_preview` — a text, or its beginning and a line naming the file holding all
  of it, when it is longer than the limits (bytes, lines);
* :func:`structured_preview` — ``structuredContent`` as JSON, cut the same way;
* :func:`image_kept` — whether an image stays inline, or why not;
* :class:`SpillDirectory` — where the files go: private (0700, files 0600), bounded in
  count and bytes, removed with the session unless the user named it.

The standard library only, imported where used: the command line's call through a gateway
renders with these and must not load the MCP SDK, attrs or trio to do so.
"""

from __future__ import annotations

import os
import re
from collections import deque
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_SPILL_BYTES",
    "DEFAULT_MAX_SPILL_FILES",
    "PREVIEW_LIMITS",
    "SpillDirectory",
    "b64_size",
    "decoded",
    "image_kept",
    "image_note",
    "size_text",
    "spill",
    "structured_preview",
    "suffix_for",
    "text_preview",
]

#: The limits a result's preview is made within: their names in the config's
#: ``supervisor.limits`` -> the fields of its :class:`supervisor.config.Limits`.
PREVIEW_LIMITS = {
    "maxPreviewBytes": "max_preview_bytes",
    "maxPreviewLines": "max_preview_lines",
    "maxStructuredPreviewBytes": "max_structured_preview_bytes",
    "maxInlineImages": "max_inline_images",
    "maxImageBytes": "max_image_bytes",
}

#: Most files one spill directory keeps for its session; the oldest go first.
DEFAULT_MAX_SPILL_FILES = 100
#: Most bytes those files may hold together (256 MiB); the oldest go first.
DEFAULT_MAX_SPILL_BYTES = 256 * 2**20


def size_text(n: int) -> str:
    """A limit in bytes as people read it: ``16 KiB``, ``4 MiB``, else ``N bytes``."""
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def text_preview(
    text: str,
    tool: str,
    spill_dir: str | os.PathLike[str] | None,
    max_bytes: int,
    max_lines: int,
) -> tuple[str, Path | None]:
    """``text``, or its preview and the file holding all of it when it is longer than
    ``max_bytes`` (UTF-8) or ``max_lines`` lines: the preview is cut at a character
    boundary and ends with a line saying how much was kept and where the whole text is."""
    encoded = text.encode("utf-8", "replace")
    # Lines as people count them: a last line break ends a line, it does not start one.
    lines = text.count("\n") + (not text.endswith("\n"))
    if len(encoded) <= max_bytes and lines <= max_lines:
        return text, None
    spilled_to = spill(encoded, tool, spill_dir)
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


def structured_preview(
    encoded: bytes, tool: str, spill_dir: str | os.PathLike[str] | None, max_bytes: int
) -> str:
    """``encoded`` (structured content as compact UTF-8 JSON), or its first ``max_bytes``
    and a line naming the file holding all of it."""
    if len(encoded) <= max_bytes:
        return encoded.decode()
    path = spill(encoded, tool, spill_dir, ".json")
    preview = encoded[:max_bytes].decode("utf-8", "ignore")
    return (
        f"{preview}\n[structured content truncated at {len(preview.encode())} of "
        f"{len(encoded)} bytes; the whole of it is at {path}]"
    )


def image_kept(size: int, kept: int, max_inline: int, max_bytes: int) -> str | None:
    """Why an image of ``size`` decoded bytes is not kept inline, when ``kept`` images of
    its result already are — or ``None``: it is."""
    if size > max_bytes:
        return f"larger than the {size_text(max_bytes)} limit"
    if kept >= max_inline:
        return f"only {max_inline} image{' is' if max_inline == 1 else 's are'} kept inline"
    return None


def image_note(index: int, mime_type: str, size: int, why: str, path: Path) -> str:
    """The line a result's text gets for its ``index``-th image, saved to ``path``."""
    return f"[image {index} ({mime_type}, {size} bytes) not kept inline: {why}; it is at {path}]"


def decoded(data: str) -> bytes:
    """Base64 ``data`` decoded; the text itself if it is not base64."""
    import binascii

    try:
        return binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return data.encode("utf-8", "replace")


def suffix_for(mime_type: str) -> str:
    """The file name suffix of a media type (``.png``), ``.bin`` when none is known."""
    import mimetypes

    return mimetypes.guess_extension(mime_type.split(";", 1)[0].strip()) or ".bin"


def b64_size(data: str) -> int:
    """The decoded size of base64 ``data``, in bytes, without decoding it."""
    body = "".join(data.split()).rstrip("=")
    return len(body) * 3 // 4


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class SpillDirectory(os.PathLike[str]):
    """Where a supervisor session writes results too large to keep in memory.

    * Named — ``SpillDirectory(path)``: that directory, created (mode 0700, parents
      too) on the first spill if it does not exist. It is never removed.
    * Default — ``SpillDirectory()``: a private ``mcp-supervisor-*`` temporary
      directory of mode 0700, created on the first spill (never, if nothing spills) and
      removed with everything in it by :meth:`close`. ``open_supervisor`` makes one for
      its block and closes it when the block ends, so the files of a session that named
      no ``spill_dir`` do not outlive it.

    Either way it is bounded: of the files this object spilled, it keeps the
    ``max_files`` newest holding at most ``max_bytes`` together, removing the oldest as
    new ones come — a supervisor that runs for months does not fill the disk (a result
    whose file was removed names a file that is gone). Files it did not write are left
    alone.

    A context manager (:meth:`close` on exit), and an :class:`os.PathLike`: ``os.fspath()``
    gives the directory, creating it if need be. A directory is only removed by the
    process that made it (not by a forked child).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_files: int = DEFAULT_MAX_SPILL_FILES,
        max_bytes: int = DEFAULT_MAX_SPILL_BYTES,
    ) -> None:
        if max_files < 1 or max_bytes < 1:
            raise ValueError("a spill directory keeps at least one file and one byte")
        self._named = None if path is None else Path(path)
        self._temp: tuple[int, Path] | None = None  # (the pid that made it, the dir)
        self._closed = False
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._files: deque[tuple[Path, int]] = deque()  # what this object spilled, oldest first
        self._bytes = 0

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

    @property
    def files(self) -> list[Path]:
        """The files this directory keeps of those it spilled, oldest first."""
        return [path for path, _ in self._files]

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
            import tempfile

            temp = self._temp = (os.getpid(), Path(tempfile.mkdtemp(prefix="mcp-supervisor-")))
        return temp[1]

    def write(self, data: bytes, tool: str, suffix: str = ".txt") -> Path:
        """A new file of mode 0600 holding ``data``, named after ``tool``; then the oldest
        files are removed while more than ``max_files``, or more than ``max_bytes``, are
        kept (never the new one)."""
        import tempfile

        prefix = (_UNSAFE.sub("_", tool)[:64] or "tool") + "-"
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=self.get())  # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        path = Path(name)
        self._files.append((path, len(data)))
        self._bytes += len(data)
        while len(self._files) > 1 and (
            len(self._files) > self.max_files or self._bytes > self.max_bytes
        ):
            old, size = self._files.popleft()
            self._bytes -= size
            old.unlink(missing_ok=True)
        return path

    def __fspath__(self) -> str:
        return os.fspath(self.get())

    def close(self) -> None:
        """Remove the private directory and its files, if this process made it; a named
        directory is left alone. Later spills raise; calling it again does nothing."""
        self._closed = True
        temp, self._temp = self._temp, None
        if temp is not None and temp[0] == os.getpid():
            import shutil

            shutil.rmtree(temp[1], ignore_errors=True)

    def __enter__(self) -> SpillDirectory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# Where results spill when no spill_dir is given (outside a supervisor session): one
# private directory per process, made on the first spill and removed at exit (the atexit
# hook is registered then, not at import).
_process_spill: SpillDirectory | None = None


def _process_spill_directory() -> SpillDirectory:
    global _process_spill
    if _process_spill is None:
        import atexit

        _process_spill = SpillDirectory()
        atexit.register(_process_spill.close)
    return _process_spill


def spill(
    data: bytes, tool: str, spill_dir: str | os.PathLike[str] | None, suffix: str = ".txt"
) -> Path:
    """Write ``data`` to a new private file in ``spill_dir`` — a :class:`SpillDirectory`
    (bounded, see there), a path (made 0700 if missing, never removed), or ``None``: this
    process's own private directory — and return the file's path."""
    if isinstance(spill_dir, SpillDirectory):
        directory = spill_dir
    elif spill_dir is None:
        directory = _process_spill_directory()
    else:
        directory = SpillDirectory(spill_dir)
    return directory.write(data, tool, suffix)
