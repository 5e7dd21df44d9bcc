"""What the HTTP gateway's session-based SSE streams sent, kept a while so that a client
that lost a stream gets the rest of it (SEP-1699, resumption with ``Last-Event-ID``).

The SDK's Streamable HTTP transport, given an event store, gives every event of a
session's SSE streams an id, starts the stream of each POST of a 2025-11-25 session with a
priming event (an id, empty data, and the ``retry`` hint :data:`RETRY_MS`: how long a
client waits before it reconnects), and answers a ``GET`` with ``Last-Event-ID`` with the
events of that stream after that one, then what comes next on it. :class:`StreamHistory`
is that store:

* Bounded, the oldest dropped first: at most :data:`MAX_EVENTS_PER_STREAM` events per
  stream, :data:`MAX_BYTES` in all (each event's JSON plus :data:`EVENT_OVERHEAD`), none
  older than :data:`MAX_AGE` seconds; a session's events are dropped when it ends. A
  ``Last-Event-ID`` whose next event is no longer kept, or that names nothing kept, is
  answered as the SDK answers an unknown one: the stream ends at once, empty.
* An event id is ``TOKEN.N``: a random token of its stream (96 bits) and the event's
  number in it — unguessable, and tied to its session: the session of the request (or
  the session's own task) that stored it. Only a request in that same session resumes it
  (the SDK's session manager lets a session's own caller alone reach it; another session,
  another caller's included, gets what an unknown id gets).

The 2026-07-28 path (one POST, one answer, no session) and a stateless gateway keep
nothing: the SDK uses no store there.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from collections.abc import Callable
from contextvars import ContextVar, Token

import trio
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter

__all__ = [
    "EVENT_OVERHEAD",
    "MAX_AGE",
    "MAX_BYTES",
    "MAX_EVENTS_PER_STREAM",
    "RETRY_MS",
    "StreamHistory",
]

#: Milliseconds a client is told to wait before it reconnects to a stream that ended
#: without its answer (the priming event's ``retry``): the SDK client's own default.
RETRY_MS = 1000
#: Events kept per stream (a call's, or a session's ``GET`` stream).
MAX_EVENTS_PER_STREAM = 1000
#: Bytes kept in all, every session's streams together.
MAX_BYTES = 16 * 2**20
#: Seconds an event is kept.
MAX_AGE = 600.0
#: Bytes an event is counted for beyond its JSON (its id, its place in the indexes).
EVENT_OVERHEAD = 160

#: The MCP session of the request being served: the ``Mcp-Session-Id`` it carries, or
#: the session it opens (:meth:`StreamHistory.bind`); inherited by the session's own task.
_SESSION: ContextVar[str | None] = ContextVar("supervisor_gateway_session", default=None)


class _Event:
    __slots__ = ("at", "data", "id", "number", "size", "stream")

    def __init__(self, stream: _Stream, number: int, data: bytes | None, at: float) -> None:
        self.stream = stream
        self.number = number
        self.id = f"{stream.token}.{number}"
        self.data = data  # the message's JSON; None for a priming event
        self.size = EVENT_OVERHEAD + (0 if data is None else len(data))
        self.at = at


class _Stream:
    __slots__ = ("events", "next", "session", "stream_id", "token")

    def __init__(self, session: str | None, stream_id: str) -> None:
        self.session = session
        self.stream_id = stream_id
        self.token = secrets.token_urlsafe(12)
        self.next = 0
        self.events: deque[_Event] = deque()


class StreamHistory(EventStore):
    """The events of the gateway's session-based SSE streams, kept within the bounds
    (see the module docstring; the arguments override them, ``clock`` the time in
    seconds, trio's by default)."""

    def __init__(
        self,
        *,
        max_events_per_stream: int = MAX_EVENTS_PER_STREAM,
        max_bytes: int = MAX_BYTES,
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._clock = clock
        #: every event kept, the oldest first
        self._order: OrderedDict[str, _Event] = OrderedDict()
        #: the streams with an event kept, by session and the SDK's stream id
        self._sessions: dict[str | None, dict[str, _Stream]] = {}
        self._tokens: dict[str, _Stream] = {}
        self.bytes = 0

    @property
    def kept(self) -> int:
        """Events kept. (No ``__len__``: the SDK tests the store for truth, and an empty
        one must be one all the same.)"""
        return len(self._order)

    @staticmethod
    def bind(session_id: str | None) -> Token[str | None]:
        """Say which session the current task serves (a request's ``Mcp-Session-Id``, or
        the session it opens): the events it stores are that session's, and only that
        session's requests resume them. Tasks started from here on inherit it."""
        return _SESSION.set(session_id)

    @staticmethod
    def unbind(token: Token[str | None]) -> None:
        _SESSION.reset(token)

    def ended(self, session_id: str) -> None:
        """Drop what the session ``session_id`` (which ended) sent."""
        for stream in self._sessions.pop(session_id, {}).values():
            for event in stream.events:
                del self._order[event.id]
                self.bytes -= event.size
            stream.events.clear()
            del self._tokens[stream.token]

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        now = self._clock()
        self._expire(now)
        session = _SESSION.get()
        streams = self._sessions.setdefault(session, {})
        stream = streams.get(stream_id)
        if stream is None:
            stream = streams[stream_id] = _Stream(session, stream_id)
            self._tokens[stream.token] = stream
        data = None
        if message is not None:
            data = jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)
        event = _Event(stream, stream.next, data, now)
        stream.next += 1
        stream.events.append(event)
        self._order[event.id] = event
        self.bytes += event.size
        if len(stream.events) > self.max_events_per_stream:
            self._drop(stream.events[0])
        while self.bytes > self.max_bytes:  # the event just stored too, if it alone is over
            self._drop(next(iter(self._order.values())))
        return event.id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        self._expire(self._clock())
        token, _, number = last_event_id.partition(".")
        stream = self._tokens.get(token)
        session = _SESSION.get()
        if stream is None or session is None or stream.session != session:
            return None  # unknown, or another session's: as for an id never given
        if not (number.isascii() and number.isdigit()):
            return None
        after = int(number)
        if after >= stream.next or after < stream.events[0].number - 1:
            return None  # never given, or what came next is no longer kept
        missed = [e for e in stream.events if e.number > after and e.data is not None]
        for event in missed:
            assert event.data is not None
            message = jsonrpc_message_adapter.validate_json(event.data)
            await send_callback(EventMessage(message, event.id))
        return stream.stream_id

    def _expire(self, now: float) -> None:
        """Drop the events older than ``max_age``."""
        oldest = now - self.max_age
        while self._order:
            event = next(iter(self._order.values()))
            if event.at > oldest:
                return
            self._drop(event)

    def _drop(self, event: _Event) -> None:
        """Drop ``event``, the oldest of its stream (every bound drops the oldest first),
        and the stream with it when it was its last."""
        stream = event.stream
        stream.events.popleft()
        del self._order[event.id]
        self.bytes -= event.size
        if not stream.events:
            del self._tokens[stream.token]
            streams = self._sessions[stream.session]
            del streams[stream.stream_id]
            if not streams:
                del self._sessions[stream.session]
