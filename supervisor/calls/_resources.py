"""Reads, prompts and completions routed to their server: the gate's half for resources
and prompts.

The merged lists a :class:`Resources` serves — :class:`MergedResource`,
:class:`MergedResourceTemplate`, :class:`MergedPrompt`, named by the tools' rules — are
the catalog's (:mod:`supervisor.registry._resources` merges and names them from each
server's lists, kept on its :class:`~supervisor.server._managed.ServerHandle` and refetched
on ``list_changed``); here each read, prompt, subscription and completion is sent to the
server that offers it, through that server's handle.

Routing a read, in order:

1. ``server=`` sends it to that server, listed or not.
2. Otherwise the first server in config order that *lists* that exact URI. Two servers
   listing the same URI (two copies of one server, say) are not an error: the earlier one
   answers; pass ``server=`` to read the other's.
3. Otherwise the first server in config order with a *template* matching the URI, as
   the ``mcp`` SDK's :mod:`mcp.shared.uri_template` matches it (what servers built on the
   SDK route by): ``{var}`` matches a possibly empty run of characters other than
   ``/ ? # & ,`` (``%2F`` and the like are fine); ``{+var}`` may span ``/`` but stops at
   ``?`` and ``#``; ``{#var}`` takes the rest; ``{/var}`` and ``{.var}`` match a segment
   after their leading character, ``{;var}`` a ``;var=value`` (or bare ``;var``), and
   ``{/var*}`` and the like a run of them. A trailing ``{?a,b}`` (``{&c}``) query is
   optional, in any order, and extra parameters are ignored. A template the SDK rejects
   — ``{}``, two variables with no literal between them, two multi-segment variables, a
   repeated name, ``{var:3}`` — matches nothing.
4. Otherwise :class:`~supervisor.errors.UnknownResource`, naming close matches.

Servers never connected yet (lazy) are connected to find out what they offer when
listing, and when a URI or prompt name is not known otherwise. A server that is
restarting keeps its last lists, and a read routed to it waits for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Mapping
from typing import overload

import mcp_types as types

from ..actors._mailbox import AddressState
from ..errors import UnknownPrompt, UnknownResource, UnknownServer
from ..registry import MergedPrompt, MergedResource, MergedResourceTemplate
from ..registry._live import Registry
from ..registry._resources import (
    check_prompt_arguments,
    merge_prompts,
    merge_resource_templates,
    merge_resources,
    route_resource,
    template_matches,
)
from ..server._managed import ServerHandle
from ..server._messages import InputRound

__all__ = [
    "MergedPrompt",
    "MergedResource",
    "MergedResourceTemplate",
    "Resources",
    "check_prompt_arguments",
    "merge_prompts",
    "merge_resource_templates",
    "merge_resources",
    "route_resource",
    "template_matches",
]


class Resources:
    """The supervisor handle's resource and prompt requests (see the module docstring):
    merged listings from the registry, requests routed to the server that offers them.

    ``servers`` are the managed servers by name, in config order; ``connect_all``
    connects every server not connected yet (to learn what lazy ones offer).
    """

    def __init__(
        self,
        servers: Mapping[str, ServerHandle],
        registry: Registry,
        connect_all: Callable[[], Awaitable[None]],
    ) -> None:
        self._servers = servers
        self._registry = registry
        self.connect_all = connect_all

    def _unlisted(self) -> bool:
        """Whether a server that could be connected has never listed what it offers."""
        return any(
            not s.listed and s.error is None and s.address.state is AddressState.OPEN
            for s in self._servers.values()
        )

    def _known_resources(self) -> list[MergedResource]:
        return list(self._registry.snapshot.resources)

    def _known_templates(self) -> list[MergedResourceTemplate]:
        return list(self._registry.snapshot.templates)

    def _known_prompts(self) -> list[MergedPrompt]:
        return list(self._registry.snapshot.prompts)

    async def _current(self) -> None:
        """Wait for the registry to merge what servers reported, if anything is pending."""
        if self._registry.pending:
            await self._registry.settled()

    async def _connect_all(self) -> None:
        await self.connect_all()
        await self._registry.settled()

    async def resources(self) -> list[MergedResource]:
        """Every server's resources, merged (connecting lazy servers to find out), in
        config order. A server that is restarting contributes its last list."""
        await self._connect_all()
        return self._known_resources()

    async def resource_templates(self) -> list[MergedResourceTemplate]:
        """Every server's resource templates, merged like :meth:`resources`."""
        await self._connect_all()
        return self._known_templates()

    async def prompts(self) -> list[MergedPrompt]:
        """Every server's prompts under their merged names, like :meth:`resources`."""
        await self._connect_all()
        return self._known_prompts()

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.ReadResourceResult: ...

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` from the server that offers it (see the module docstring for the
        routing), or from ``server``; returns the SDK's ``ReadResourceResult`` as the
        server sent it (``contents``: ``TextResourceContents`` / ``BlobResourceContents``).
        ``rounds`` relays a multi-round-trip read (2026-07-28) for a front end whose own
        client answers the server's input requests: its ``input_required`` answer is
        then returned as it is (see :meth:`ServerHandle.read_resource
        <supervisor.server._managed.ServerHandle.read_resource>`).

        The read waits while that server connects or restarts, within ``timeout`` (default:
        the server's request timeout), and is sent once more if the connection dies with
        it in flight. Raises :class:`~supervisor.errors.UnknownResource` without sending
        when no server offers ``uri``; :class:`~supervisor.errors.UnknownServer` for an
        unknown ``server``; and what :meth:`ServerHandle.read_resource
        <supervisor.server._managed.ServerHandle.read_resource>` raises: ``ServerUnavailable``,
        ``RequestTimeout``, ``ServerRequestError`` (the server's own error answer).
        """
        owner = await self._owner(uri, server)
        return await self._servers[owner].read_resource(uri, timeout, rounds=rounds)

    async def subscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Subscribe to changes of ``uri`` at the server that offers it (routed as
        :meth:`read_resource` routes), or at ``server``; returns that server's name. Each
        change the server announces is published as ``mcp.resource.updated`` (``server``,
        ``uri``); the subscription is asked of each new connection, so it outlives
        restarts. A server that does not offer subscriptions (``resources.subscribe``) is
        not asked, and publishes nothing. Raises :class:`~supervisor.errors.UnknownResource`
        when no server offers ``uri``, :class:`~supervisor.errors.UnknownServer` for an
        unknown ``server``."""
        owner = await self._owner(uri, server)
        await self._servers[owner].subscribe_resource(uri)
        return owner

    async def unsubscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Stop the subscription to ``uri`` (routed like :meth:`subscribe_resource`);
        returns the server's name."""
        owner = await self._owner(uri, server)
        self._servers[owner].unsubscribe_resource(uri)
        return owner

    async def _owner(self, uri: str, server: str | None) -> str:
        """The server a request about ``uri`` goes to: ``server``, or the one that offers
        it (see the module docstring)."""
        if server is not None:
            if server not in self._servers:
                known = ", ".join(self._servers) or "none"
                raise UnknownServer(f"no MCP server named {server!r} (configured: {known})")
            return server
        await self._current()
        owner = route_resource(uri, self._known_resources(), self._known_templates())
        if owner is None and self._unlisted():
            await self._connect_all()
            owner = route_resource(uri, self._known_resources(), self._known_templates())
        if owner is None:
            raise self._unknown_resource(uri)
        return owner

    def _unknown_resource(self, uri: str) -> UnknownResource:
        listed = list(dict.fromkeys(r.uri for r in self._known_resources()))
        close = difflib.get_close_matches(uri, listed, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        templates = self._known_templates()
        offered = (
            "; templates: " + ", ".join(f"{t.uri_template} ({t.server})" for t in templates)
            if templates
            else ""
        )
        return UnknownResource(
            f"no server lists resource {uri!r} nor has a template matching it{hint}"
            f"{offered}; pass server= to read it from one server anyway",
            uri=uri,
        )

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.GetPromptResult: ...

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get a prompt by its merged name from its server; returns the SDK's
        ``GetPromptResult`` (``description``, ``messages``) as the server sent it
        (``rounds``: relayed as :meth:`read_resource` relays a read's).

        Raises, without sending, :class:`~supervisor.errors.UnknownPrompt` (naming close
        matches) and :class:`~supervisor.errors.PromptArgumentsInvalid` when a required
        argument is missing or a value is not a string; then what
        :meth:`ServerHandle.get_prompt <supervisor.server._managed.ServerHandle.get_prompt>`
        raises. Waits and retries as :meth:`read_resource` does.
        """
        await self._current()
        prompts = {p.name: p for p in self._known_prompts()}
        if name not in prompts and self._unlisted():
            await self._connect_all()
            prompts = {p.name: p for p in self._known_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            close = difflib.get_close_matches(name, prompts, n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise UnknownPrompt(f"no prompt named {name!r}{hint}", name=name)
        checked = check_prompt_arguments(prompt, arguments)
        server = self._servers[prompt.server]
        return await server.get_prompt(prompt.original_name, checked, timeout, rounds=rounds)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Completions for ``argument`` (``{"name": …, "value": …}``) of a prompt (``ref``
        a ``PromptReference`` by its merged name) or a resource template (a
        ``ResourceTemplateReference`` by its URI template), asked of the server that
        offers it under its own names; ``context`` holds the arguments given so far.
        Returns the SDK's ``CompleteResult`` as the server sent it.

        Raises, without sending, :class:`~supervisor.errors.UnknownPrompt` or
        :class:`~supervisor.errors.UnknownResource` when no server offers ``ref``; then
        what :meth:`ServerHandle.complete <supervisor.server._managed.ServerHandle.complete>`
        raises. Waits and retries as :meth:`read_resource` does.
        """
        await self._current()
        found = self._completion_owner(ref)
        if found is None and self._unlisted():
            await self._connect_all()
            found = self._completion_owner(ref)
        if found is None:
            if isinstance(ref, types.PromptReference):
                raise UnknownPrompt(f"no prompt named {ref.name!r} to complete", name=ref.name)
            raise UnknownResource(
                f"no server has the resource template {ref.uri!r} to complete", uri=ref.uri
            )
        server, own = found
        return await self._servers[server].complete(own, argument, context, timeout)

    def _completion_owner(
        self, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> tuple[str, types.PromptReference | types.ResourceTemplateReference] | None:
        """The server offering ``ref`` and ``ref`` in that server's own names."""
        if isinstance(ref, types.PromptReference):
            for prompt in self._known_prompts():
                if prompt.name == ref.name:
                    return prompt.server, ref.model_copy(update={"name": prompt.original_name})
            return None
        for template in self._known_templates():
            if template.uri_template == ref.uri:
                return template.server, ref
        return None
