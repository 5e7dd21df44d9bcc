"""Status snapshots for people and scripts: the health table and its JSON form."""

from __future__ import annotations

import time
from collections.abc import Mapping

import msgspec

from .server import HealthRecord

_COLUMNS = ("server", "type", "status", "tools", "restarts", "calls", "p50 ms", "pid", "last error")


def status_document(records: Mapping[str, HealthRecord]) -> dict[str, object]:
    """The ``status --json`` document: ``{"servers": [record, ...], "ts": now}``."""
    return {"ts": time.time(), "servers": [msgspec.to_builtins(r) for r in records.values()]}


def status_table(records: Mapping[str, HealthRecord], *, width: int = 120) -> str:
    """A plain-text table of health records, one server per line."""
    rows = [_COLUMNS]
    for r in records.values():
        calls = f"{r.calls_ok}/{r.calls_ok + r.calls_failed}"
        rows.append(
            (
                r.server,
                r.type,
                r.status,
                "-" if r.tool_count is None else str(r.tool_count),
                str(r.restarts),
                calls,
                "-" if r.latency_p50_ms is None else f"{r.latency_p50_ms:.1f}",
                "-" if r.pid is None else str(r.pid),
                r.last_error or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    lines = []
    for row in rows:
        head = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        line = f"{head}  {row[-1]}".rstrip()
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return "\n".join(lines)


__all__ = ["status_document", "status_table"]
