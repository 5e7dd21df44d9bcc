"""Execution counting and crash-after-N: the state every MCP fixture server shares.

No ``mcp`` import here, so the raw (non-SDK) fixtures and the helpers stay cheap to load.

The count file has one line per execution: the tool's name, then — when the request
carried a call id in its ``_meta`` (``"mcp-supervisor/call-id"``, sent by a supervisor
recording a call history) — a tab and that id.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from ...tools._call_id import CALL_ID_META

COUNT_FILE_ENV = "MCP_FIXTURE_COUNT_FILE"
"""Environment variable naming the count file when ``--count-file`` is not given."""


def _lines(path: str | os.PathLike[str]) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line]


def count_executions(path: str | os.PathLike[str]) -> Counter[str]:
    """Return how many times each tool was executed, as recorded in the count file `path`.

    A fixture server appends one line (the tool name) per execution *before* it answers, so
    a call that was executed and then lost to a crash is still counted. A missing file means
    nothing was executed: an empty ``Counter``.
    """
    return Counter(line.partition("\t")[0] for line in _lines(path))


def executions_by_call(path: str | os.PathLike[str]) -> Counter[str]:
    """Return how many times each call id was executed, as recorded in the count file
    `path`: 1 for a call that ran once, 2 for one that ran twice. Executions of requests
    that carried no call id are not counted here (:func:`count_executions` counts them)."""
    counts: Counter[str] = Counter()
    for line in _lines(path):
        _, tab, call_id = line.partition("\t")
        if tab and call_id:
            counts[call_id] += 1
    return counts


def call_id_of(request: object) -> str | None:
    """The call id a request carries in its ``_meta``, if any. ``request`` is a tool's
    ``Context`` (``MCPServer``), a low-level ``ServerRequestContext``, or the ``_meta``
    mapping itself."""
    request = getattr(request, "request_context", request)
    meta = getattr(request, "meta", request)
    if not isinstance(meta, Mapping):
        return None
    value = meta.get(CALL_ID_META)
    return value if isinstance(value, str) and value else None


class ExecutionRecorder:
    """Counts tool executions in this process, appends them to a count file, crashes on cue.

    ``crash_after=N`` makes the N-th recorded execution end the process with
    ``os._exit(exit_code)`` right after it is recorded: the call took effect (the count file
    shows it) but is never answered. Observers such as the ``count`` tool are not recorded.
    """

    def __init__(
        self,
        *,
        count_file: str | os.PathLike[str] | None = None,
        crash_after: int | None = None,
        exit_code: int = 1,
    ) -> None:
        if crash_after is not None and crash_after < 1:
            raise ValueError(f"crash_after must be at least 1, got {crash_after}")
        self.count_file = None if count_file is None else Path(count_file)
        self.crash_after = crash_after
        self.exit_code = exit_code
        self.executions = 0

    def record(self, tool: str, call_id: str | None = None) -> None:
        """Record one execution of `tool` (for the call `call_id`, if the request named
        one); crash now if this was the ``crash_after``-th."""
        self.executions += 1
        if self.count_file is not None:
            line = tool if call_id is None else f"{tool}\t{call_id}"
            with self.count_file.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        if self.crash_after is not None and self.executions >= self.crash_after:
            print(
                f"fixture crashing after {self.executions} tool calls "
                f"(last: {tool}) with exit code {self.exit_code} pid={os.getpid()}",
                file=sys.stderr,
                flush=True,
            )
            os._exit(self.exit_code)
