"""Ending a local server's process family, leaving no process of it behind.

A :class:`~._stdio.StdioTransport` spawns its server as the leader of a process group of
its own; on Linux each process the server starts also carries the transport's mark
(:func:`~._children.spawn_mark`), so that what left the group (a daemon, a launcher's
real server re-parented to this process) is found too (:func:`~._children.family`). Its
:class:`ProcessGroup` ends them, each way bounded in time: a shutdown in the MCP spec's
order (:meth:`ProcessGroup.stop`: close stdin, wait, SIGTERM, wait, SIGKILL); what a
server that exited on its own left running (:meth:`ProcessGroup.end_orphans`); everything
at once (:meth:`ProcessGroup.kill`); and a signal to the group (:meth:`ProcessGroup.signal`).
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import trio
from mcp.os.posix.utilities import terminate_posix_process_tree

from . import _children


class ProcessGroup:
    """One server's process family, from its spawn on: signalled, stopped, killed."""

    __slots__ = (
        "_orphans_ended",
        "grace",
        "kill_after",
        "left_family",
        "mark",
        "process",
        "stopping",
    )

    def __init__(self, *, grace: float, kill_after: float) -> None:
        #: what its descendants inherit (see :mod:`._children`)
        self.mark = _children.spawn_mark()
        self.grace = grace
        self.kill_after = kill_after
        #: the server's process (its group's leader), once spawned
        self.process: trio.Process | None = None
        #: the transport is stopping it: the exit this causes is no failure
        self.stopping = False
        #: whether the server, exiting on its own, left processes of its own behind
        self.left_family = False
        self._orphans_ended: trio.Event | None = None  # set once an exit's family is ended

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process group (nothing before the spawn, or once it is
        gone)."""
        if self.process is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole family, its members outside the group included."""
        assert self.process is not None
        members = _children.family(self.process, self.mark)
        try:
            self.signal(signal.SIGKILL)
            for member in members:
                member.signal(signal.SIGKILL)
        finally:
            for member in members:
                member.close()

    async def stop(self) -> None:
        """Close stdin and wait; then the SDK's escalation for the whole process group
        (SIGTERM, wait for every member, SIGKILL) — which also reaches members that
        outlive the leader; every wait bounded. On Linux the escalation also reaches the
        server's family outside its group (:func:`~supervisor.transports._children.family`),
        looked for both before stdin closes (while the server's descendants are still below
        it) and after (what it left to this process)."""
        process = self.process
        assert process is not None
        members = _children.family(process, self.mark)
        try:
            if process.returncode is None:
                assert process.stdin is not None
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await process.stdin.aclose()
                with trio.move_on_after(self.grace):
                    await process.wait()
            if _children.LINUX:
                known = {member.pid for member in members}
                for member in _children.family(process, self.mark):
                    if member.pid in known:
                        member.close()
                    else:
                        members.append(member)
                await _children.end_family(process, members, self.kill_after)
            else:
                # typed for anyio's Process, it reads only pid and returncode: trio's has both
                await terminate_posix_process_tree(process, self.kill_after)  # pyright: ignore[reportArgumentType]
        finally:
            for member in members:
                member.close()
        with trio.move_on_after(self.kill_after):
            await process.wait()

    async def end_orphans(self) -> None:
        """The server exited on its own: stop its family — what it started that lives on
        (``npm exec``'s real server when the wrapper died), which still holds the pipes
        and would answer — as a shutdown does: SIGTERM, wait, SIGKILL (on Linux; elsewhere
        the shutdown that follows stops the group). Once per transport: a second caller
        waits for the first."""
        if self._orphans_ended is not None:
            await self._orphans_ended.wait()
            return
        self._orphans_ended = trio.Event()
        try:
            if _children.LINUX:
                assert self.process is not None
                members = _children.family(self.process, self.mark)
                self.left_family = bool(members)
                try:
                    await _children.end_family(self.process, members, self.kill_after)
                finally:
                    for member in members:
                        member.close()
        finally:
            self._orphans_ended.set()
