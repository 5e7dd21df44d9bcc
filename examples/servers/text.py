"""A tiny text-transform MCP server (stdio): deterministic, no state, no side effects.

Run it with ``python examples/servers/text.py``. Tools (all annotated read-only):

- ``word_count(text)`` — the number of words (runs of non-whitespace);
- ``summarize(text, max_words=12)`` — the first ``max_words`` words, followed by ``…``
  when the text had more; whitespace collapsed to single spaces;
- ``upper(text)`` — the text in upper case.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

PURE = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def summarize_words(text: str, max_words: int) -> str:
    """The first ``max_words`` words of ``text``, then ``…`` if some were left out."""
    words = text.split()
    head = " ".join(words[:max_words])
    return head + " …" if len(words) > max_words else head


def make_server() -> MCPServer:
    """The text server."""
    server: MCPServer = MCPServer("text", log_level="WARNING")

    @server.tool(annotations=PURE)
    def word_count(text: str) -> int:
        """Count the words of a text (runs of non-whitespace characters)."""
        return len(text.split())

    @server.tool(annotations=PURE, structured_output=False)
    def summarize(text: str, max_words: Annotated[int, Field(ge=1, le=1000)] = 12) -> str:
        """Shorten a text to its first max_words words, marking a cut with an ellipsis."""
        return summarize_words(text, max_words)

    @server.tool(annotations=PURE, structured_output=False)
    def upper(text: str) -> str:
        """Return the text in upper case."""
        return text.upper()

    return server


if __name__ == "__main__":
    make_server().run()
