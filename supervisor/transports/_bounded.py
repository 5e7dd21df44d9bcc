"""A local server's process family held to its resource bounds while it runs (Linux).

A :class:`~._stdio.StdioTransport` with ``resources`` runs one :class:`BoundsWatch` in
its nursery. The ``openFiles`` and ``cpuSeconds`` bounds are each process's limits, set
on the server at its spawn and here on each process of its family found for the first
time; the ``memory`` (the family's RSS) and ``processes`` bounds are sampled every
:data:`~._bounds.SAMPLE_S` seconds, and a family over one is killed: its exit is then
reported as :class:`~supervisor.errors.BoundExceeded` (:meth:`BoundsWatch.exceeded`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..errors import BoundExceeded
from ..log import get_logger
from . import _bounds, _children
from ._group import ProcessGroup

if TYPE_CHECKING:
    from ..config._model import Resources

log = get_logger("supervisor.transports")


class BoundsWatch:
    """One server's family sampled against its resource bounds, killed over one."""

    __slots__ = ("group", "name", "over", "resources")

    def __init__(self, name: str, resources: Resources, group: ProcessGroup) -> None:
        self.name = name
        self.resources = resources
        self.group = group
        #: the bound its family went over: (``"memory"`` or ``"processes"``, what it
        #: used, the bound)
        self.over: tuple[str, int, int] | None = None

    async def watch(self) -> None:
        """Every :data:`~._bounds.SAMPLE_S` seconds while the server runs (and is not
        being stopped), sum what its family uses: over its ``memory`` or
        ``processes`` bound, kill the whole family (``SIGKILL``). A process of the family
        found for the first time gets the ``openFiles`` and ``cpuSeconds`` limits too (one
        forked before they were set on the server keeps the old ones otherwise: see
        :mod:`._bounds`)."""
        resources, process = self.resources, self.group.process
        assert process is not None
        limits = _bounds.rlimits(resources)
        seen: set[int] = {process.pid}
        if not resources.watched and not limits:
            return
        while True:
            await trio.sleep(_bounds.SAMPLE_S)
            if self.group.stopping or process.returncode is not None:
                return
            pids = _children.descendants(process.pid)
            if limits and (new := [pid for pid in pids if pid not in seen]):
                _bounds.set_rlimits(new, limits)
                seen.update(new)
            used = _bounds.usage(pids)
            if resources.memory is not None and used.rss > resources.memory:
                self.over = ("memory", used.rss, resources.memory)
            elif resources.processes is not None and used.processes > resources.processes:
                self.over = ("processes", used.processes, resources.processes)
            if self.over is not None:
                log.warning(
                    "over its resource bound: killed",
                    server=self.name,
                    resource=self.over[0],
                    used=self.over[1],
                    limit=self.over[2],
                )
                self.group.kill()
                return

    def exceeded(self, code: int | None) -> BoundExceeded:
        """The failure of a server killed over a resource bound (see :meth:`watch`)."""
        assert self.over is not None and self.group.process is not None
        resource, used, limit = self.over
        if resource == "memory":
            said = (
                f"memory {_bounds.format_bytes(used)} over its bound "
                f"{_bounds.format_bytes(limit)} (resources.memory)"
            )
        else:
            said = f"{used} processes over its bound {limit} (resources.processes)"
        return BoundExceeded(
            f"MCP server {self.name!r} (pid {self.group.process.pid}) was killed: {said}",
            resource=resource,
            used=used,
            limit=limit,
            exit_code=code,
        )
