"""Benchmark helpers (registry_merge_ms_32k, search_ms_32k); not public API."""

from __future__ import annotations

import statistics
import time

from mcp_types import Tool

from ._merge import Listing, ServerTools, merge

# --- benchmark helpers ----------------------------------------------------------------
# Called by the bench (registry_merge_ms_32k, search_ms_32k); not public API.

_VERBS = ("get", "list", "create", "update", "delete", "search", "read", "write")
_NOUNS = ("issue", "file", "page", "user", "repo", "commit", "ticket", "record")


def _sample_tools(servers: int = 32, per_server: int = 1000) -> list[ServerTools]:
    """``servers`` × ``per_server`` realistic tools with small schemas."""
    out: list[ServerTools] = []
    for s in range(servers):
        tools = []
        for t in range(per_server):
            verb, noun = _VERBS[t % 8], _NOUNS[(t // 8) % 8]
            tools.append(
                Tool(
                    name=f"{verb}_{noun}_{t}",
                    description=f"{verb.title()} a {noun} by id in workspace {t} of "
                    f"service {s}; returns the {noun} as JSON.",
                    input_schema={
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": f"the {noun} id"},
                            "limit": {"type": "integer", "minimum": 1},
                        },
                        "required": ["id"],
                    },
                )
            )
        out.append((f"server{s}", f"server{s}", tools))
    return out


async def registry_merge_ms_32k(n: int) -> float:
    """Median milliseconds to :func:`merge` 32 servers × 1000 tools, over ``n`` rounds.

    Each round merges fresh :class:`Listing` objects — what the live catalog holds, each
    server's list checked once when it arrived — built before the clock starts; nothing
    from an earlier round is reused. (:func:`listing_ms_32k` times the checking.)
    """
    servers = _sample_tools()
    times = []
    for _ in range(max(n, 1)):
        listed = [(server, prefix, Listing(tools)) for server, prefix, tools in servers]
        start = time.perf_counter()
        catalog = merge(listed)
        times.append((time.perf_counter() - start) * 1000)
        del catalog, listed  # freeing them is not part of the merge
    return statistics.median(times)


async def listing_ms_32k(n: int) -> float:
    """Median milliseconds to check 32 × 1000 listed tools into :class:`Listing` objects
    (done once per tool list received, not per merge), over ``n`` rounds."""
    servers = _sample_tools()
    times = []
    for _ in range(max(n, 1)):
        start = time.perf_counter()
        listed = [Listing(tools) for _, _, tools in servers]
        times.append((time.perf_counter() - start) * 1000)
        del listed
    return statistics.median(times)


async def search_ms_32k(n: int) -> float:
    """Median milliseconds for one :meth:`~.Catalog.search` over 32 × 1000 tools."""
    catalog = merge(_sample_tools())
    queries = ("create issue", "readFile", "ticket", "commit json", "delete user 42")
    times = []
    for i in range(max(n, 1)):
        query = queries[i % len(queries)]
        start = time.perf_counter()
        catalog.search(query)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
