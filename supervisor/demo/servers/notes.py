"""A small notes MCP server (stdio): titled notes kept in a JSON file.

Run it (in a checkout, ``python examples/servers/notes.py`` does the same)::

    NOTES_FILE=notes.json python -m supervisor.demo.servers.notes   # notes kept in notes.json
    python -m supervisor.demo.servers.notes                         # notes kept in memory

or point a config at it::

    {"mcpServers": {"notes": {"command": "python3",
                              "args": ["-m", "supervisor.demo.servers.notes"],
                              "env": {"NOTES_FILE": "${PROJECT_ROOT}/notes.json"}}}}

Tools:

- ``add_note(title, body)`` — create the note, or replace the body of the note of that
  title; answers ``added note 'T'`` or ``replaced note 'T'``;
- ``get_note(title)`` — the note's body; a missing note is a tool error (``isError``);
- ``list_notes()`` — the titles, one per line, sorted;
- ``delete_note(title)`` — delete it (annotated destructive); a missing note is a tool
  error.

Resource ``notes://index``: the titles, one a line (plain text).

The file (given by the environment variable ``NOTES_FILE``; created on the first write)
holds one JSON object mapping each title to its body. It is read on every request, so
edits made while the server runs are seen, and replaced atomically on every change.
Titles are 1 to 200 characters, with no line breaks.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

Title = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\r\n]+$")]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


class NoteStore:
    """Notes by title, in a JSON file (``path``) or, with no path, in memory."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None
        self._memory: dict[str, str] = {}

    def load(self) -> dict[str, str]:
        if self.path is None:
            return dict(self._memory)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ToolError(f"{self.path} is not a JSON object of title -> body strings")
        return data

    def save(self, notes: dict[str, str]) -> None:
        if self.path is None:
            self._memory = dict(notes)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".notes-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(notes, out, indent=2, ensure_ascii=False)
                out.write("\n")
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise


def make_server(path: str | os.PathLike[str] | None = None) -> MCPServer:
    """The notes server, keeping its notes in ``path`` (or in memory)."""
    store = NoteStore(path)
    server: MCPServer = MCPServer(
        "notes",
        instructions="Titled plain-text notes. Use list_notes to see what exists.",
        log_level="WARNING",
    )

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True), structured_output=False)
    def add_note(title: Title, body: str) -> str:
        """Add a note, or replace the body of the note with that title."""
        notes = store.load()
        verb = "replaced" if title in notes else "added"
        notes[title] = body
        store.save(notes)
        return f"{verb} note {title!r}"

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def get_note(title: str) -> str:
        """Return the body of the note with this title."""
        notes = store.load()
        if title not in notes:
            raise ToolError(f"no note titled {title!r}")
        return notes[title]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def list_notes() -> str:
        """List the titles of all notes, one per line, sorted."""
        return "\n".join(sorted(store.load()))

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
        structured_output=False,
    )
    def delete_note(title: str) -> str:
        """Delete the note with this title."""
        notes = store.load()
        if title not in notes:
            raise ToolError(f"no note titled {title!r}")
        del notes[title]
        store.save(notes)
        return f"deleted note {title!r}"

    @server.resource("notes://index", name="index", mime_type="text/plain")
    def index() -> str:
        """The titles of all notes, one a line."""
        return "".join(f"{title}\n" for title in sorted(store.load()))

    return server


if __name__ == "__main__":
    make_server(os.environ.get("NOTES_FILE") or None).run()
