"""Which connection of one server made each task it passed on to a caller, to tell later
whether the server restarted since (a restarted local server has likely lost the task).
"""

from __future__ import annotations

#: Tasks passed on to their callers that a server remembers having made (the latest).
TASKS_KEPT = 4096


class TasksMade:
    """Remembers the incarnation that made each of one server's latest tasks."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: dict[str, int] = {}

    def made(self, task_id: str, incarnation: int) -> None:
        """The connection ``incarnation`` passed on the task ``task_id``; the latest
        :data:`TASKS_KEPT` are remembered."""
        made = self._made
        made.pop(task_id, None)
        made[task_id] = incarnation
        while len(made) > TASKS_KEPT:
            del made[next(iter(made))]

    def outlived(self, task_id: str, live: int | None) -> bool:
        """Whether the connection ``live`` (``None``: none is) is not the one that made
        ``task_id`` (as far as this process remembers)."""
        made = self._made.get(task_id)
        return made is not None and live != made
