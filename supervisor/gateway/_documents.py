"""What the command line's ``tools``, ``resources`` and ``prompts`` print of a running
gateway (its HTTP front's ``/tools``, ``/resources`` and ``/prompts``).

Each document is the one :mod:`supervisor.monitor._document` makes for a command that
runs the servers itself, made of what the gateway serves (:class:`~._served.Served`) —
for a team gateway's caller, of what their grant covers (:class:`~._access.Access`) —
once the servers' first connections are made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..monitor._document import prompts_document, resources_document, tools_document
from ..server._status import ServerStatus

if TYPE_CHECKING:
    from ..server import HealthRecord
    from ._access import Access
    from ._resource import Caller
    from ._served import Served

__all__ = ["Documents"]


class Documents:
    """The listing documents of what ``served`` serves, as ``access`` narrows it for a
    caller."""

    __slots__ = ("access", "served")

    def __init__(self, served: Served, access: Access) -> None:
        self.served = served
        self.access = access

    async def tools_document(
        self, query: str | None = None, limit: int = 20, *, caller: Caller | None = None
    ) -> dict[str, object]:
        """What ``mcp-supervisor tools`` prints of this gateway (``/tools``): the served
        catalog — or the ``limit`` best matches of ``query`` in it — its servers and each
        tool's approval, as :func:`~supervisor.monitor._document.tools_document` makes it
        for a command that runs the servers itself; for a team gateway's ``caller``, what
        their grant covers."""
        await self.served.first_listing()
        sup = self.served.sup
        host = self.access.narrowed(caller)
        catalog = host.catalog()
        if query is None:
            entries = list(catalog.values())
        else:
            entries = catalog.load(summary.name for summary in catalog.search(query, limit))
        records = {
            name: record
            for name, record in sup.status().items()
            if record.status != ServerStatus.DISABLED and host.serves(name)
        }
        approvals = {e.name: sup.approval_reason(e.name) for e in entries}
        return tools_document(entries, catalog, records, approvals, query=query)

    async def resources_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor resources`` prints of this gateway (``/resources``): the
        resources and templates it serves, and its servers' statuses, as
        :func:`~supervisor.monitor._document.resources_document` makes them for a command
        that runs the servers itself; for a team gateway's ``caller``, what their grant
        covers."""
        up, records = await self._listed_for(caller)
        snapshot = self.served.sup.snapshot
        resources = [r for r in snapshot.resources if r.server in up]
        templates = [t for t in snapshot.templates if t.server in up]
        return resources_document(resources, templates, records)

    async def prompts_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor prompts`` prints of this gateway (``/prompts``), as
        :meth:`resources_document` does for resources."""
        up, records = await self._listed_for(caller)
        prompts = [p for p in self.served.sup.snapshot.prompts if p.server in up]
        return prompts_document(prompts, records)

    async def _listed_for(self, caller: Caller | None) -> tuple[set[str], dict[str, HealthRecord]]:
        """For a listing once the first connections are made: the servers whose
        resources and prompts ``caller`` (``None``: anyone let in) is served now, and the
        records of the servers served to them (a disabled one never started: left out)."""
        served, access = self.served, self.access
        await served.first_listing()
        host = access.narrowed(caller)
        records = {
            name: record
            for name, record in served.sup.status().items()
            if record.status != ServerStatus.DISABLED and access.whole(host, name)
        }
        return {name for name in served.up() if access.whole(host, name)}, records
