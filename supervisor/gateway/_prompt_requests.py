"""The gateway's answers to prompt requests: ``prompts/list``, ``prompts/get``, and
``completion/complete`` of a prompt's (or a resource template's) arguments.

Listings are the prompts of the servers listed now, as the request's caller may see them
(:class:`~._access.Access`); a prompt or a completion of a server the caller may not use
is answered as not found. A ``prompts/get`` is bounded by
:data:`~._context.TIMEOUT_META`, and the backing server's questions while it answers
reach the caller through :class:`~._asking.Asking`. A server that completes nothing
answers an empty completion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import (
    PromptArgumentsInvalid,
    RequestUnencodable,
    ServerRequestError,
    SupervisorError,
    UnknownPrompt,
    UnknownResource,
)
from ..tools._outcome import error_data
from ._answers import unstamped
from ._asking import held_of, request_gone, request_round, rounds_of
from ._context import TIMEOUT_META, timeout

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._access import Access
    from ._asking import Asking
    from ._served import Served

__all__ = ["PromptRequests"]


class PromptRequests:
    """Answers the prompt requests of a gateway's clients: what ``served`` serves, to
    whom ``access`` lets use it, the servers' questions asked through ``asking``."""

    __slots__ = ("access", "asking", "served")

    def __init__(self, served: Served, access: Access, asking: Asking) -> None:
        self.served = served
        self.access = access
        self.asking = asking

    def _owner(self, name: str) -> str | None:
        """The server of the merged prompt ``name`` (``None``: not listed)."""
        return next((p.server for p in self.served.sup.snapshot.prompts if p.name == name), None)

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self.served.first_listing()
        up = self.access.up_for(ctx)
        return types.ListPromptsResult(
            **self.served.cache_hint("prompts", up),
            prompts=[
                p.prompt.model_copy(update={"name": p.name})
                for p in self.served.sup.snapshot.prompts
                if p.server in up
            ],
        )

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = params.name
        backing = self._owner(name)  # (``None``: not listed yet)
        access, asking, sup = self.access, self.asking, self.served.sup
        if access.seen_by(ctx) is not access.host:
            access.refuse_unserved(ctx, backing)
        bound = timeout((params.meta or {}).get(TIMEOUT_META))
        held = held_of(ctx, params)
        if held is not None:  # the caller's answers to its held request's questions
            return await asking.answered(ctx, held, params.input_responses, request_gone)
        rounds = rounds_of(ctx, params)

        async def made() -> types.GetPromptResult | types.InputRequiredResult:
            try:
                with asking.asking(ctx, backing):
                    prompt = await sup.get_prompt(
                        name, params.arguments or {}, timeout=bound, rounds=rounds
                    )
                if isinstance(prompt, types.InputRequiredResult):
                    server = backing or self._owner(name)
                    return request_round(ctx, prompt, server, f"prompt {name!r}")
                return unstamped(prompt)
            except (UnknownPrompt, PromptArgumentsInvalid, RequestUnencodable) as exc:
                data = error_data(exc, sent=False)
                raise MCPError(types.INVALID_PARAMS, str(exc), data) from None
            except (SupervisorError, TimeoutError) as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None

        if rounds is not None and backing is not None and asking.asks_by_request(backing):
            return await asking.held_call(ctx, backing, made, request_gone)
        return await made()

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        context = None if params.context is None else params.context.arguments
        argument = {"name": params.argument.name, "value": params.argument.value}
        access = self.access
        if access.seen_by(ctx) is not access.host:
            ref = params.ref
            if isinstance(ref, types.PromptReference):
                access.refuse_unserved(ctx, self._owner(ref.name))
            else:
                access.resource_owner(ctx, str(ref.uri))
        try:
            return await self.served.sup.complete(params.ref, argument, context)
        except (UnknownPrompt, UnknownResource) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except RequestUnencodable as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)) from None
        except ServerRequestError as exc:
            if exc.code == types.METHOD_NOT_FOUND:  # that server completes nothing
                return types.CompleteResult(completion=types.Completion(values=[]))
            raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None
        except (SupervisorError, TimeoutError) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None
