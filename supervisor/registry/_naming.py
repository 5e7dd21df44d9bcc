"""Merged names: normalising each part, fitting 64 characters, stable short hashes."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Literal

import attrs

MAX_NAME = 64
_VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_INVALID_RUN = re.compile(r"[^A-Za-z0-9_-]+")


@attrs.frozen
class NamingPolicy:
    """How merged names are formed and how clashes are settled (see the module docstring).

    ``template`` may use ``{prefix}``, ``{server}`` and ``{tool}``; the usual ones are
    ``"{prefix}_{tool}"`` (the default) and ``"mcp__{server}__{tool}"``.
    """

    template: str = "{prefix}_{tool}"
    clash: Literal["suffix", "hash", "error"] = "suffix"

    def __attrs_post_init__(self) -> None:
        if "{tool}" not in self.template:
            raise ValueError(f"name template {self.template!r} must contain {{tool}}")
        if self.clash not in ("suffix", "hash", "error"):
            raise ValueError(f"clash policy must be suffix, hash or error, not {self.clash!r}")

    def affixes(self, server: str, prefix: str) -> tuple[str, str]:
        """The normalised text before and after ``{tool}`` for this server and prefix."""
        template = self.template
        if not prefix:
            for gone in ("{prefix}_", "_{prefix}", "{prefix}-", "-{prefix}", "{prefix}"):
                template = template.replace(gone, "")
        template = template.replace("{prefix}", _part(prefix, server, prefix))
        template = template.replace("{server}", _part(server, server, server))
        head, _, tail = template.partition("{tool}")
        return head, tail

    def parse(self, name: str, servers: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
        """``(server, tool)`` for a merged ``name`` of a server whose tools are not known
        yet, by the template alone; ``servers`` are ``(server, prefix)`` pairs in config
        order. The server whose affixes match the most characters wins (an unprefixed
        server matches anything, so only when nothing longer does); ``None`` if none
        matches, or if several unprefixed ones would.
        """
        best: tuple[int, str, str] | None = None
        tied = False
        for server, prefix in servers:
            head, tail = self.affixes(server, prefix)
            fixed = len(head) + len(tail)
            if len(name) <= fixed or not (name.startswith(head) and name.endswith(tail)):
                continue
            if best is None or fixed > best[0]:
                best, tied = (fixed, server, name[len(head) : len(name) - len(tail)]), False
            elif fixed == best[0]:
                tied = True
        if best is None or tied:
            return None
        return best[1], best[2]


# --- naming ---------------------------------------------------------------------------


def _short_hash(*parts: str, size: int = 8) -> str:
    data = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()[:size]


def _part(text: str, server: str, original: str) -> str:
    """``text`` as a valid name part: readable, never empty."""
    if _VALID.fullmatch(text):
        return text
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = _INVALID_RUN.sub("_", ascii_text).strip("_")
    return cleaned or "t" + _short_hash(server, original)


def _fit(name: str, server: str, original: str) -> str:
    if len(name) <= MAX_NAME:
        return name
    return name[: MAX_NAME - 9].rstrip("_-") + "_" + _short_hash(server, original)


def _with_suffix(base: str, suffix: str) -> str:
    return base[: MAX_NAME - len(suffix)] + suffix
