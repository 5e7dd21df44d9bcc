"""How a backing server's questions reach the client whose request waits on them.

A backing server may ask, mid-request, for elicitation, sampling or the client's roots.
:class:`Asking` gets each question to the client of the request it belongs to:

* to a session-based client, over its session, by the :class:`~._relay.Relay` (while
  :meth:`Asking.asking` holds the request open for it);
* to a 2026-07-28 client, as a round of its own request: a server that speaks 2026-07-28
  too answers ``input_required``, passed on as it is (:func:`relayed_round`,
  :func:`request_round`); one that speaks the session-based protocol sends requests,
  which only a request held in a task of the gateway's can take
  (:meth:`Asking.held_call`, :mod:`._held`), its questions then asked as a round
  (:func:`held_round`) and the answers the client makes again with handed to it
  (:meth:`Asking.answered`).

The gateway's own questions (an approval, a login) travel in rounds too, under their own
keys (:data:`~._approval.APPROVAL_KEY`, :data:`~._approval.LOGIN_KEY`), never passed on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import SupervisorError
from ..server._messages import InputRound
from ..transports._encoding import caller_capabilities
from ._answers import error_result
from ._approval import APPROVAL_KEY, LOGIN_KEY, round_state
from ._context import declared_capabilities, subject_of
from ._held import HOLD_FOR, Held, HeldCalls, Question

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..runtime import SupervisorHandle
    from ._relay import Relay

__all__ = [
    "Asking",
    "held_gone",
    "held_of",
    "relayed_round",
    "request_gone",
    "request_round",
    "rounds_of",
    "theirs",
]

#: What a held request answers: a call's, a prompt's or a read's result.
_Answer = TypeVar("_Answer")

#: The ``inputResponses`` keys of the gateway's own rounds, never a backing server's.
_OWN_KEYS = frozenset({APPROVAL_KEY, LOGIN_KEY})
#: The client capability each kind of input request needs.
_NEEDS: Mapping[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
#: The capability of each name in :data:`_NEEDS`.
_CAPABILITIES: Mapping[str, Callable[[], Any]] = {
    "elicitation": types.ElicitationCapability,
    "sampling": types.SamplingCapability,
    "roots": types.RootsCapability,
}


class Asking:
    """Gets ``sup``'s backing servers' questions to the clients whose requests wait:
    by ``relay`` (``None``: the supervisor was opened without its callbacks, and no
    client is asked), or through the requests ``held`` across 2026-07-28 round trips."""

    __slots__ = ("held", "relay", "sup")

    def __init__(self, sup: SupervisorHandle, relay: Relay | None, held: HeldCalls) -> None:
        self.sup = sup
        self.relay = relay
        #: 2026-07-28 callers' requests held while their session-based server asks them
        self.held = held

    @contextmanager
    def asking(self, ctx: ServerRequestContext[Any, Any], server: str | None) -> Iterator[None]:
        """While the block runs (a prompt got, a resource read), the backing ``server``'s
        requests — elicitation, sampling, roots — may be relayed to the client of ``ctx``
        (:attr:`relay`), as during a tool call (``None``: a server not known yet), and
        its requests declare the client's capabilities, as a call's do."""
        passing = caller_capabilities.set(declared_capabilities(ctx))  # (for a 2026-07-28 server)
        try:
            if self.relay is None:
                yield
                return
            with self.relay.waiting(ctx, server, subject_of(ctx)):
                yield
        finally:
            caller_capabilities.reset(passing)

    def asks_by_request(self, server: str) -> bool:
        """Whether ``server`` would ask its client by sending it requests (it speaks the
        session-based protocol to the gateway), which a 2026-07-28 caller can answer only
        through a held call, if one can be held now."""
        if self.relay is None or not self.held.ready():
            return False
        view = self.sup.servers.get(server)
        if view is None:
            return False
        version = view.protocol_version
        return version is not None and version not in MODERN_PROTOCOL_VERSIONS

    async def held_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        server: str,
        made: Callable[[], Awaitable[_Answer]],
        gone: Callable[[str | None], _Answer],
    ) -> _Answer | types.InputRequiredResult:
        """``made`` — a request of the 2026-07-28 caller of ``ctx`` to ``server``: a call,
        a prompt got, a resource read — made in a task of the gateway's: its answer, or
        the server's first question to the caller, as a round. ``gone`` answers a round
        whose request is no longer held (or raises)."""
        assert self.relay is not None
        subject = subject_of(ctx)
        held: Held[_Answer] = Held(server, subject)
        relay = self.relay

        async def asked() -> _Answer:
            with relay.waiting(ctx, server, subject, held=held):
                return await made()

        self.held.start(held, asked)
        return await _next_of(held, gone)

    async def answered(
        self,
        ctx: ServerRequestContext[Any, Any],
        held_id: object,
        responses: Any,
        gone: Callable[[str | None], _Answer],
    ) -> _Answer | types.InputRequiredResult:
        """The caller's answers to its held request's questions: handed to the server,
        and what comes next of the request (or the questions still unanswered, asked
        again)."""
        held: Held[_Answer] | None = self.held.get(held_id, subject_of(ctx))
        if held is None:
            return gone(None)
        if held.answer(responses):
            return held_round(held)
        return await _next_of(held, gone)


async def _next_of(
    held: Held[_Answer], gone: Callable[[str | None], _Answer]
) -> _Answer | types.InputRequiredResult:
    """What comes next of ``held``: its answer, or its server's question, a round."""
    try:
        outcome = await held.next()
    except trio.EndOfChannel:
        return gone(held.server)
    if isinstance(outcome, Question):
        return held_round(held)
    return outcome


def theirs(responses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A 2026-07-28 caller's answers for the backing server: all it brings but its
    answers to the gateway's own questions (``None`` if that leaves none)."""
    if not responses:
        return None
    kept = {key: value for key, value in responses.items() if key not in _OWN_KEYS}
    return kept or None


def _undeclared(
    ctx: ServerRequestContext[Any, Any], result: types.InputRequiredResult
) -> list[str]:
    """The capabilities ``result``'s input requests need that the client of ``ctx`` did
    not declare, by name."""
    capabilities = ctx.session.client_capabilities
    return sorted(
        {
            _NEEDS.get(request.method, request.method)
            for request in (result.input_requests or {}).values()
            if capabilities is None
            or getattr(capabilities, _NEEDS.get(request.method, ""), None) is None
        }
    )


def relayed_round(
    ctx: ServerRequestContext[Any, Any], result: types.InputRequiredResult, server: str
) -> types.CallToolResult | types.InputRequiredResult:
    """A backing server's ``input_required`` round, for the 2026-07-28 client of ``ctx``:
    its input requests as they are, its ``requestState`` untouched inside the gateway's
    own (which the SDK seals, bound to this call) — or, if it asks for what the client
    did not declare, a tool error saying so."""
    requests = result.input_requests or {}
    missing = _undeclared(ctx, result)
    if missing:
        exc = SupervisorError(
            f"MCP server {server!r} needs input this client did not declare "
            f"({', '.join(missing)}) to complete the call; it was not completed"
        )
        return error_result(exc, str(exc))
    state = json.dumps({"approved": True, "backing": result.request_state})
    return types.InputRequiredResult(input_requests=requests or None, request_state=state)


def held_of(
    ctx: ServerRequestContext[Any, Any],
    params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
) -> object | None:
    """The held request a 2026-07-28 caller's ``prompts/get`` or ``resources/read``
    answers the questions of (its ``requestState`` names it), if it does."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    return round_state(params).get("held")


def rounds_of(
    ctx: ServerRequestContext[Any, Any],
    params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
) -> InputRound | None:
    """A 2026-07-28 caller's ``prompts/get`` or ``resources/read`` as a relayed
    multi-round-trip request: the answers it brings and the backing server's
    ``requestState``, when it makes again one the gateway relayed a round of (its own
    state says so: :func:`request_round`); ``None`` for a session-based caller, whom
    the relay asks instead."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    state = round_state(params)
    # the caller's answers to the server's round (with its state, or none), passed on
    return InputRound(theirs(params.input_responses), state.get("backing"))


def request_round(
    ctx: ServerRequestContext[Any, Any],
    result: types.InputRequiredResult,
    server: str | None,
    what: str,
) -> types.InputRequiredResult:
    """A backing server's ``input_required`` round of a ``prompts/get`` or
    ``resources/read`` (``what``), for the 2026-07-28 client of ``ctx``, as
    :func:`relayed_round` passes on a call's — or, if it asks for what the client did
    not declare, the protocol's missing-capability error (``-32021``) naming it."""
    missing = _undeclared(ctx, result)
    if missing:
        required = types.ClientCapabilities(
            **{name: _CAPABILITIES[name]() for name in missing if name in _CAPABILITIES}
        )
        data = {
            "requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True),
            "server": server,
        }
        said = (
            f"MCP server {server!r} needs input this client did not declare "
            f"({', '.join(missing)}) to answer {what}; it was not answered"
        )
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, said, data)
    state = json.dumps({"backing": result.request_state})
    return types.InputRequiredResult(
        input_requests=result.input_requests or None, request_state=state
    )


def held_round(held: Held[Any]) -> types.InputRequiredResult:
    """The questions ``held``'s server asked its 2026-07-28 caller, as a round: each
    request as the server sent it, and a ``requestState`` naming the held call (which
    the SDK seals, bound to this call and caller)."""
    requests = {question.key: question.request for question in held.pending()}
    return types.InputRequiredResult(
        input_requests=requests,
        request_state=json.dumps({"held": held.id}),
    )


def _no_longer_held(server: str | None, what: str) -> str:
    where = "its MCP server" if server is None else f"MCP server {server!r}"
    return (
        f"the {what} these answers are for is no longer held: it was cancelled at {where} "
        f"after waiting {HOLD_FOR:g} s for an answer (it may have taken effect in part), "
        f"or it has already ended; make the {what} again if it should run"
    )


def held_gone(server: str | None) -> types.CallToolResult:
    """The answer to a call's round whose held call is no longer held: a tool error."""
    exc = SupervisorError(_no_longer_held(server, "call"))
    return error_result(exc, str(exc))


def request_gone(server: str | None) -> Any:
    """The answer to a prompt's or read's round no longer held: ``-32602``."""
    raise MCPError(types.INVALID_PARAMS, _no_longer_held(server, "request"))
