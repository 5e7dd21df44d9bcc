"""The JSON-RPC messages crossing a local server's pipes, as its transport checks them.

A :class:`~._stdio.StdioTransport` holds one :class:`Conversation`. Each line read from
the server's stdout is made into the session's message here (:meth:`Conversation.parse`):
the answer to a forwarded request is taken by its caller first, never parsed for the
session (:mod:`._forward`); a page of a listing over the catalog limits is never parsed,
and is answered with an error instead (:mod:`._pages`); a line that is not JSON-RPC is a
:class:`~supervisor.errors.ProtocolViolation`; every message read is an answer of the
server's (:class:`~._receipts.Answers`). Each message on its way into stdin is noted
(:meth:`Conversation.sending`): a listing's request, whose pages are then checked, and
the connection's first protocol probe, whose stderr echo the tail leaves out (see
:mod:`supervisor.transports._stderr`).
"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.message import SessionMessage

from ..errors import ProtocolViolation
from ..log import redact
from ._capture import StderrCapture
from ._forward import Forwarding
from ._pages import PageGuard, refusal
from ._receipts import Answers
from ._stderr import PROBE_METHOD

#: How much of a line that is not JSON-RPC its violation quotes.
_PREVIEW = 120


class Conversation:
    """One connection's messages, checked one by one: each line read parsed, each message
    sent noted."""

    __slots__ = ("_pages", "_probe_id", "_probed", "answers", "forwarding", "name", "stderr")

    def __init__(
        self, name: str, answers: Answers, stderr: StderrCapture, *, max_items: int, max_bytes: int
    ) -> None:
        self.name = name
        #: which requests the server answered (every message read is the server's)
        self.answers = answers
        #: the requests forwarded past the session, whose answers are taken here
        self.forwarding = Forwarding(name, answers)
        self.stderr = stderr
        self._pages = PageGuard(max_items=max_items, max_bytes=max_bytes)
        self._probe_id: types.RequestId | None = None  # the first server/discover's id
        self._probed = False  # only the first is the handshake's (later ones are pings)

    def parse(self, line: bytes) -> SessionMessage | None:
        """The message ``line`` (one line of stdout, without its newline) is, for the
        session — ``None`` for the answer to a forwarded request, taken by its caller;
        :class:`ProtocolViolation` when it is not JSON-RPC."""
        forwarding = self.forwarding
        if forwarding.claim(line):
            return None
        refused = self._pages.check(line)
        if refused is not None:
            # Over the catalog limits: never parsed, answered with an error instead.
            parsed = refusal(refused, server=self.name)
            self.answers.received(parsed)
            return parsed
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            preview = redact(line[:_PREVIEW].decode("utf-8", "replace"))
            raise ProtocolViolation(
                f"MCP server {self.name!r} wrote a line to stdout that is not a JSON-RPC "
                f"message: {preview!r}; stdout is reserved for MCP messages, so the server "
                "must log to stderr"
            ) from None
        if (
            self._probe_id is not None
            and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id == self._probe_id
        ):
            self._probe_id = None
            refused = isinstance(message, types.JSONRPCError)
            self.stderr.tail.probe_answered(refused, self.stderr.pending())
        parsed = SessionMessage(message)
        if forwarding.claim_parsed(parsed):
            return None
        self.answers.received(parsed)
        return parsed

    def sending(self, message: SessionMessage) -> None:
        """Note the connection's first protocol probe, and each listing request, on its
        way to the server."""
        request = message.message
        if isinstance(request, types.JSONRPCRequest):
            self._pages.sent(request.method, request.id)
        if (
            isinstance(request, types.JSONRPCRequest)
            and request.method == PROBE_METHOD
            and not self._probed
        ):
            self._probed = True
            self._probe_id = request.id
            self.stderr.tail.probe_sent(self.stderr.pending())
