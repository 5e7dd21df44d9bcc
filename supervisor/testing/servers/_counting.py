"""Execution counting and crash-after-N: the state every MCP fixture server shares.

No ``mcp`` import here, so the raw (non-SDK) fixtures and the helpers stay cheap to load.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

COUNT_FILE_ENV = "MCP_FIXTURE_COUNT_FILE"
"""Environment variable naming the count file when ``--count-file`` is not given."""


def count_executions(path: str | os.PathLike[str]) -> Counter[str]:
    """Return how many times each tool was executed, as recorded in the count file `path`.

    A fixture server appends one line (the tool name) per execution *before* it answers, so
    a call that was executed and then lost to a crash is still counted. A missing file means
    nothing was executed: an empty ``Counter``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return Counter()
    return Counter(line for line in text.splitlines() if line)


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

    def record(self, tool: str) -> None:
        """Record one execution of `tool`; crash now if this was the ``crash_after``-th."""
        self.executions += 1
        if self.count_file is not None:
            with self.count_file.open("a", encoding="utf-8") as f:
                f.write(tool + "\n")
        if self.crash_after is not None and self.executions >= self.crash_after:
            print(
                f"fixture crashing after {self.executions} tool calls "
                f"(last: {tool}) with exit code {self.exit_code} pid={os.getpid()}",
                file=sys.stderr,
                flush=True,
            )
            os._exit(self.exit_code)
