"""Watching files for a change that has settled: what makes ``serve`` apply its config file
when it is edited.

:func:`watch_files` polls, under trio (no thread, no notification API): every
:data:`POLL_INTERVAL` seconds it takes each watched file's identity — its device, inode,
size and modification time (``mtime_ns``), or that it is missing — and calls ``changed``
once a difference from what was last seen has stayed the same for one more poll. So a
file written in several steps is taken once it is whole, and an editor's save (written
to a temporary file, then renamed over the file) counts once. While the first file (the
config itself) is missing — between an editor's unlink and its rename, say — nothing is
called: it is waited for. The set of files is asked for at every poll (a reload may name
a new ``envFile``); a file first seen is taken as it is.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

__all__ = ["POLL_INTERVAL", "Stat", "file_stat", "watch_files"]

#: Seconds between two looks at the watched files; a change is taken once it has stayed
#: the same for one more look (so between one and two of these after the last write).
POLL_INTERVAL = 0.5

#: What a file's identity is made of: device, inode, size, ``mtime_ns``; ``None`` while
#: the file is missing (or cannot be looked at).
Stat = tuple[int, int, int, int] | None


def file_stat(path: str | os.PathLike[str]) -> Stat:
    """The identity of the file at ``path`` now (``None``: missing)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


async def watch_files(
    paths: Callable[[], Sequence[Path]],
    changed: Callable[[], Awaitable[object]],
    *,
    interval: float = POLL_INTERVAL,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Await ``changed()`` each time the files ``paths()`` names (the first the one that
    must exist) have changed and then stayed the same for one more poll; see the module's
    docstring. Runs until cancelled; reports started once the files as they are now are
    known. ``changed`` is awaited before the next poll: changes made meanwhile are seen
    then."""
    seen = {path: file_stat(path) for path in paths()}
    pending: dict[Path, Stat] | None = None  # a change not yet seen to have settled
    task_status.started()
    while True:
        await trio.sleep(interval)
        watched = paths()
        now = {path: file_stat(path) for path in watched}
        for path, stat in now.items():  # a file newly named is taken as it is
            seen.setdefault(path, stat)
        seen = {path: seen[path] for path in now}
        if now == seen or (watched and now[watched[0]] is None):
            pending = None  # as it was; or the config is away (an editor's rename)
            continue
        if now != pending:
            pending = now  # changed since the last poll: not settled yet
            continue
        seen, pending = now, None
        await changed()
