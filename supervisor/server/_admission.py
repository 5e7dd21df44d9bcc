"""Whether a tool call may be sent to one server now (docs/servers.md, "Containing a
server"): its ``rateLimit`` (a token bucket), its caller's own limits (a team gateway's
policy, :data:`~supervisor.tools._limits.caller_admission`) and its
``maxConcurrentCalls`` (slots a call waits for, within its timeout); counted for the
server's metrics. A call refused here was never sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import trio

from .._util._plural import plural
from ..errors import CallQueueTimeout, RateLimited
from ..tools._limits import CallSlots, TokenBucket, caller_admission, parse_rate, refuse
from ._health import ServerMetrics

if TYPE_CHECKING:
    from ..config._model import ServerConfig


class Admission:
    """Lets one server's tool calls be sent, or refuses them, by its callers' bounds."""

    __slots__ = ("_name", "bucket", "rate_limited", "slots")

    def __init__(self, name: str, config: ServerConfig) -> None:
        self._name = name
        #: the bound on its tool calls in flight (``maxConcurrentCalls``; ``None``: none)
        self.slots: CallSlots | None = None
        #: its ``rateLimit``'s bucket (``None``: none)
        self.bucket: TokenBucket | None = None
        #: calls refused over a rate limit: the server's own (``server``), a caller's
        self.rate_limited = {"server": 0, "caller": 0}
        self.bound(config)

    def bound(self, config: ServerConfig) -> None:
        """Take ``config``'s ``maxConcurrentCalls`` and ``rateLimit`` (a changed rate
        starts a full bucket; a changed bound applies to the next call, and lets waiting
        calls in at once if it was raised)."""
        bound = getattr(config, "max_concurrent_calls", None)  # (an embedder's own config)
        if bound is None:
            self.slots = None  # calls holding the old slots give them back to those
        elif self.slots is None:
            self.slots = CallSlots(bound)
        else:
            self.slots.set_limit(bound)
        rate = getattr(config, "rate_limit", None)
        if rate is None:
            self.bucket = None
        elif self.bucket is None or self.bucket.rate.text != rate:
            self.bucket = TokenBucket(parse_rate(rate))

    def admit(self, tool: str) -> None:
        """Let a call of ``tool`` (its merged name) be sent now, or refuse it before
        anything is sent (:class:`~supervisor.errors.RateLimited`, counted): over the
        server's ``rateLimit``, or over its caller's own limits. A call let through takes
        a token of each."""
        bucket, caller = self.bucket, caller_admission.get()
        if bucket is None and caller is None:
            return
        now = trio.current_time()
        if bucket is not None:
            wait = bucket.wait(now)
            if wait > 0:
                self.rate_limited["server"] += 1
                raise refuse(wait, bucket.rate, server=self._name, tool=tool, by="server")
        if caller is not None:
            try:
                caller(self._name, tool)
            except RateLimited:
                self.rate_limited["caller"] += 1
                raise
        if bucket is not None:
            bucket.take(now)

    async def turn(self, slots: CallSlots, tool: str, limit: float) -> float:
        """Wait for one of ``slots`` (``maxConcurrentCalls``) within ``limit`` seconds;
        the seconds left of it once taken. Past it: :class:`CallQueueTimeout`, never sent."""
        began = trio.current_time()
        with trio.move_on_after(limit):
            await slots.acquire()
            return max(limit - (trio.current_time() - began), 0.0)
        raise CallQueueTimeout(
            f"tool {tool!r} waited {limit} s (its timeout) for its turn at MCP server "
            f"{self._name!r}, which takes {plural(slots.limit, 'call')} at a time "
            "(maxConcurrentCalls): it was not sent (nothing ran); try again",
            server=self._name,
            tool=tool,
            timeout=limit,
            limit=slots.limit,
        )

    def counted(self, found: ServerMetrics) -> ServerMetrics:
        """``found`` with the counts of its callers' bounds: calls refused over a rate
        limit, and calls waiting for a ``maxConcurrentCalls`` slot."""
        slots, limited = self.slots, self.rate_limited
        if slots is None and not any(limited.values()):
            return found
        return msgspec.structs.replace(
            found,
            calls_rate_limited=limited["server"],
            calls_caller_limited=limited["caller"],
            calls_waiting=0 if slots is None else slots.waiting,
        )
