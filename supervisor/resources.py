"""Resources and prompts: merged across servers, namespaced like tools.

Each server's ``resources/list``, ``resources/templates/list`` and ``prompts/list`` (kept on
its :class:`~supervisor.server.ManagedServer`, refetched on ``list_changed``) are merged in
config order into :class:`MergedResource`, :class:`MergedResourceTemplate` and
:class:`MergedPrompt` values. Names follow the tools' rules (:mod:`supervisor.registry`:
the naming template and prefix, normalisation, the 64-character limit and the clash
policy — ``_2``, ``_3`` … by default), each kind in a namespace of its own: a prompt never
clashes with a tool or a resource. A resource without a name is named after its URI.

Routing a read, in order:

1. ``server=`` sends it to that server, listed or not.
2. Otherwise the first server in config order that *lists* that exact URI. Two servers
   listing the same URI (two copies of one server, say) are not an error: the earlier one
   answers; pass ``server=`` to read the other's.
3. Otherwise the first server in config order with a *template* matching the URI:
   RFC 6570 ``{var}`` matches a non-empty run of characters other than ``/``; ``{+var}``
   and ``{#var}`` (reserved expansion) match anything non-empty, ``/`` included;
   ``{/var}``, ``{.var}`` and ``{;var}`` a segment with their leading character, and
   ``{?var}`` / ``{&var}`` an optional query.
4. Otherwise :class:`~supervisor.errors.UnknownResource`, naming close matches.

Servers never connected yet (lazy) are connected to find out what they offer when
listing, and when a URI or prompt name is not known otherwise. A server that is
restarting keeps its last lists, and a read routed to it waits for it.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

import attrs
import mcp_types as types
from mcp_types import Tool

from .actors import AddressState
from .errors import PromptArgumentsInvalid, UnknownPrompt, UnknownResource, UnknownServer
from .registry import NamingPolicy, merge

if TYPE_CHECKING:
    from .server import ManagedServer

__all__ = [
    "MergedPrompt",
    "MergedResource",
    "MergedResourceTemplate",
    "ResourcesMixin",
    "check_prompt_arguments",
    "merge_prompts",
    "merge_resource_templates",
    "merge_resources",
    "route_resource",
    "template_matches",
]


# -- values --------------------------------------------------------------------------------


@attrs.frozen
class MergedResource:
    """A resource a server lists: ``name`` is the merged name (``{prefix}_{name}``),
    ``original_name`` the server's; ``resource`` is the object the server listed."""

    uri: str
    name: str
    server: str
    original_name: str
    description: str | None
    mime_type: str | None
    size: int | None
    resource: types.Resource


@attrs.frozen
class MergedResourceTemplate:
    """A resource template (RFC 6570 ``uri_template``) a server lists, named like
    :class:`MergedResource`; ``template`` is the object the server listed."""

    uri_template: str
    name: str
    server: str
    original_name: str
    description: str | None
    mime_type: str | None
    template: types.ResourceTemplate


@attrs.frozen
class MergedPrompt:
    """A prompt a server offers: ``name`` is the merged name to get it by,
    ``original_name`` the server's; ``arguments`` as the server declares them."""

    name: str
    server: str
    original_name: str
    description: str | None
    arguments: tuple[types.PromptArgument, ...]
    prompt: types.Prompt

    @property
    def required(self) -> tuple[str, ...]:
        """The names of the arguments the prompt requires."""
        return tuple(a.name for a in self.arguments if a.required)


_OBJECT: dict[str, object] = {"type": "object"}
_I = TypeVar("_I")


# -- merging (pure) ------------------------------------------------------------------------


def _namespace(
    groups: Iterable[tuple[str, str, Sequence[str]]], policy: NamingPolicy
) -> list[list[str]]:
    """Merged names for each server's original names, in order, by the tools' rules:
    :func:`supervisor.registry.merge` itself names them.

    Unlike tools, one server may list a name twice (resource names need not be unique):
    the second is named as if it were ``<name>_2`` rather than dropped.
    """
    keyed: list[tuple[str, str, list[str]]] = []
    for server, prefix, originals in groups:
        seen: Counter[str] = Counter()
        keys: list[str] = []
        for original in originals:
            seen[original] += 1
            keys.append(original if seen[original] == 1 else f"{original}_{seen[original]}")
        keyed.append((server, prefix, keys))
    catalog = merge(
        [
            (server, prefix, [Tool(name=key, input_schema=_OBJECT) for key in dict.fromkeys(keys)])
            for server, prefix, keys in keyed
        ],
        policy,
    )
    out: list[list[str]] = []
    for server, _, keys in keyed:
        named = {e.original_name: e.name for e in catalog.by_server.get(server, ())}
        out.append([named.get(key, key) for key in keys])
    return out


def _named(
    servers: Iterable[tuple[str, str, Sequence[_I]]],
    original: Callable[[_I], str],
    policy: NamingPolicy | None,
) -> Iterator[tuple[str, _I, str]]:
    """``(server, item, merged name)`` for every server's items, in config order then
    listing order; ``original`` gives an item's own name."""
    groups = [(s, p, list(items)) for s, p, items in servers]
    names = _namespace(
        [(s, p, [original(item) for item in items]) for s, p, items in groups],
        policy or NamingPolicy(),
    )
    for (server, _, items), merged in zip(groups, names, strict=True):
        for item, name in zip(items, merged, strict=True):
            yield server, item, name


def merge_resources(
    servers: Iterable[tuple[str, str, Sequence[types.Resource]]],
    policy: NamingPolicy | None = None,
) -> list[MergedResource]:
    """Every server's resources, in config order then listing order, with merged names."""
    return [
        MergedResource(
            uri=r.uri,
            name=name,
            server=server,
            original_name=r.name,
            description=r.description,
            mime_type=r.mime_type,
            size=r.size,
            resource=r,
        )
        for server, r, name in _named(servers, lambda r: r.name or r.uri, policy)
    ]


def merge_resource_templates(
    servers: Iterable[tuple[str, str, Sequence[types.ResourceTemplate]]],
    policy: NamingPolicy | None = None,
) -> list[MergedResourceTemplate]:
    """Every server's resource templates, in config order, with merged names."""
    return [
        MergedResourceTemplate(
            uri_template=t.uri_template,
            name=name,
            server=server,
            original_name=t.name,
            description=t.description,
            mime_type=t.mime_type,
            template=t,
        )
        for server, t, name in _named(servers, lambda t: t.name or t.uri_template, policy)
    ]


def merge_prompts(
    servers: Iterable[tuple[str, str, Sequence[types.Prompt]]],
    policy: NamingPolicy | None = None,
) -> list[MergedPrompt]:
    """Every server's prompts, in config order, with merged names (unique: a clash
    between servers is settled by the clash policy, ``_2`` by default)."""
    return [
        MergedPrompt(
            name=name,
            server=server,
            original_name=prompt.name,
            description=prompt.description,
            arguments=tuple(prompt.arguments or ()),
            prompt=prompt,
        )
        for server, prompt, name in _named(servers, lambda p: p.name, policy)
    ]


# -- templates and routing (pure) ----------------------------------------------------------

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_OPERATOR_PATTERNS = {
    "": r"[^/]+",
    "+": r".+",
    "#": r"#.+",
    "/": r"(?:/[^/]+)+",
    ".": r"\.[^/.]+",
    ";": r";[^/;]*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)?",
}


# Module-level, so bounded: the templates of every supervisor of the process share it.
@functools.lru_cache(maxsize=1024)
def _template_regex(template: str) -> re.Pattern[str] | None:
    parts: list[str] = []
    end = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[end : match.start()]))
        body = match.group(1)
        operator = body[0] if body and body[0] in "+#/.;?&" else ""
        if not body[len(operator) :]:
            return None  # "{}" or "{+}": not a template
        parts.append(_OPERATOR_PATTERNS[operator])
        end = match.end()
    parts.append(re.escape(template[end:]))
    return re.compile("".join(parts), re.S)


def template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` could be an expansion of the RFC 6570 ``template`` (see the module
    docstring for what each expression matches). A malformed template matches nothing."""
    regex = _template_regex(template)
    return regex is not None and regex.fullmatch(uri) is not None


def route_resource(
    uri: str,
    resources: Iterable[MergedResource],
    templates: Iterable[MergedResourceTemplate],
) -> str | None:
    """The server a read of ``uri`` goes to: the first (in the order given, config order)
    that lists it, else the first with a matching template; ``None`` if there is none."""
    for resource in resources:
        if resource.uri == uri:
            return resource.server
    for template in templates:
        if template_matches(template.uri_template, uri):
            return template.server
    return None


def check_prompt_arguments(
    prompt: MergedPrompt, arguments: Mapping[str, object] | None
) -> dict[str, str]:
    """``arguments`` as the string mapping ``prompts/get`` takes; raises
    :class:`~supervisor.errors.PromptArgumentsInvalid` naming every required argument
    missing and every value that is not a string."""
    given = dict(arguments or {})
    errors = [(name, "required argument missing") for name in prompt.required if name not in given]
    errors += [
        (name, f"must be a string, not {type(value).__name__}")
        for name, value in given.items()
        if not isinstance(value, str)
    ]
    if errors:
        raise PromptArgumentsInvalid(prompt.name, sorted(errors))
    return cast("dict[str, str]", given)


# -- the handle's methods ------------------------------------------------------------------


class ResourcesMixin:
    """The supervisor handle's resource and prompt methods (see the module docstring).

    Uses the handle's ``_servers`` (name → :class:`~supervisor.server.ManagedServer`, in
    config order), ``_policy`` (a :class:`~supervisor.registry.NamingPolicy`) and
    ``connect_all()``.
    """

    _servers: dict[str, ManagedServer]
    _policy: NamingPolicy

    if TYPE_CHECKING:

        async def connect_all(self, timeout: float | None = None) -> None: ...

    def _naming(self) -> NamingPolicy:
        return self._policy

    def _unlisted(self) -> bool:
        """Whether a server that could be connected has never listed what it offers."""
        return any(
            not s.listed and s.error is None and s.address.state is AddressState.OPEN
            for s in self._servers.values()
        )

    def _known_resources(self) -> list[MergedResource]:
        return merge_resources(
            ((s.name, s.config.prefix, s.resources) for s in self._servers.values()),
            self._naming(),
        )

    def _known_templates(self) -> list[MergedResourceTemplate]:
        return merge_resource_templates(
            ((s.name, s.config.prefix, s.resource_templates) for s in self._servers.values()),
            self._naming(),
        )

    def _known_prompts(self) -> list[MergedPrompt]:
        return merge_prompts(
            ((s.name, s.config.prefix, s.prompts) for s in self._servers.values()),
            self._naming(),
        )

    async def resources(self) -> list[MergedResource]:
        """Every server's resources, merged (connecting lazy servers to find out), in
        config order. A server that is restarting contributes its last list."""
        await self.connect_all()
        return self._known_resources()

    async def resource_templates(self) -> list[MergedResourceTemplate]:
        """Every server's resource templates, merged like :meth:`resources`."""
        await self.connect_all()
        return self._known_templates()

    async def prompts(self) -> list[MergedPrompt]:
        """Every server's prompts under their merged names, like :meth:`resources`."""
        await self.connect_all()
        return self._known_prompts()

    async def read_resource(
        self, uri: str, *, server: str | None = None, timeout: float | None = None
    ) -> types.ReadResourceResult:
        """Read ``uri`` from the server that offers it (see the module docstring for the
        routing), or from ``server``; returns the SDK's ``ReadResourceResult`` as the
        server sent it (``contents``: ``TextResourceContents`` / ``BlobResourceContents``).

        The read waits while that server connects or restarts, within ``timeout`` (default:
        the server's request timeout), and is sent once more if the connection dies with
        it in flight. Raises :class:`~supervisor.errors.UnknownResource` without sending
        when no server offers ``uri``; :class:`~supervisor.errors.UnknownServer` for an
        unknown ``server``; and what :meth:`ManagedServer.read_resource
        <supervisor.server.ManagedServer.read_resource>` raises: ``ServerUnavailable``,
        ``RequestTimeout``, ``ServerRequestError`` (the server's own error answer).
        """
        if server is not None:
            managed = self._servers.get(server)
            if managed is None:
                known = ", ".join(self._servers) or "none"
                raise UnknownServer(f"no MCP server named {server!r} (configured: {known})")
            return await managed.read_resource(uri, timeout)
        owner = route_resource(uri, self._known_resources(), self._known_templates())
        if owner is None and self._unlisted():
            await self.connect_all()
            owner = route_resource(uri, self._known_resources(), self._known_templates())
        if owner is None:
            raise self._unknown_resource(uri)
        return await self._servers[owner].read_resource(uri, timeout)

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

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.GetPromptResult:
        """Get a prompt by its merged name from its server; returns the SDK's
        ``GetPromptResult`` (``description``, ``messages``) as the server sent it.

        Raises, without sending, :class:`~supervisor.errors.UnknownPrompt` (naming close
        matches) and :class:`~supervisor.errors.PromptArgumentsInvalid` when a required
        argument is missing or a value is not a string; then what
        :meth:`ManagedServer.get_prompt <supervisor.server.ManagedServer.get_prompt>`
        raises. Waits and retries as :meth:`read_resource` does.
        """
        prompts = {p.name: p for p in self._known_prompts()}
        if name not in prompts and self._unlisted():
            await self.connect_all()
            prompts = {p.name: p for p in self._known_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            close = difflib.get_close_matches(name, prompts, n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise UnknownPrompt(f"no prompt named {name!r}{hint}", name=name)
        checked = check_prompt_arguments(prompt, arguments)
        server = self._servers[prompt.server]
        return await server.get_prompt(prompt.original_name, checked, timeout)
