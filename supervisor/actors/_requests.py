"""Requests to a running supervisor: sent on its control channel, answered by its loop."""

from __future__ import annotations

import math

import trio

from ._errors import SupervisorNotRunning
from ._mailbox import Envelope


async def request(
    control: trio.MemorySendChannel[object] | None, name: str, op: str, arg: object
) -> None:
    """Ask the supervisor ``name`` to run ``op(arg)`` between its other work; wait for it.

    Raises what the operation raised, or :class:`SupervisorNotRunning` if the supervisor
    is not running or stops before serving it.
    """
    if control is None:
        raise SupervisorNotRunning(f"supervisor {name!r} is not running")
    env = Envelope((op, arg), math.inf, True)
    event = env._event
    assert event is not None  # it wants a reply
    control.send_nowait(env)
    try:
        await event.wait()
    except BaseException:
        env.abandon()
        raise
    env.unwrap()


def fail_requests(receive: trio.MemoryReceiveChannel[object], name: str) -> None:
    """Fail every request still queued on a supervisor's control channel: it stopped."""
    while True:
        try:
            item = receive.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return
        if isinstance(item, Envelope):
            item.fail(SupervisorNotRunning(f"supervisor {name!r} stopped"))
