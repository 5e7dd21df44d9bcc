"""Counted nouns in what people read: ``1 tool``, ``2 tools``, ``0 matches``.

The one helper for every count the CLI, the status table, the session summary and error
messages show. Imports nothing of the package, so every layer may import it.
"""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` then ``word`` when it is 1, else ``words`` (by default ``word`` + "s")."""
    return f"{count} {word if count == 1 else (words or word + 's')}"
