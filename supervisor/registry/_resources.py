"""Resources, resource templates and prompts: merged across servers, namespaced like tools.

Each server's ``resources/list``, ``resources/templates/list`` and ``prompts/list`` are
merged in config order into :class:`MergedResource`, :class:`MergedResourceTemplate` and
:class:`MergedPrompt` values. Names follow the tools' rules (the naming template and
prefix, normalisation, the 64-character limit and the clash policy — ``_2``, ``_3`` … by
default), each kind in a namespace of its own: a prompt never clashes with a tool or a
resource. A resource without a name is named after its URI. :func:`route_resource` says
which server a read goes to.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar, cast

import attrs
import mcp_types as types
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types import Tool

from ..errors import PromptArgumentsInvalid
from ._merge import merge
from ._naming import NamingPolicy, _fit, _part


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

    Unlike tools, a resource or prompt name need not follow MCP's tool-name rule, nor be
    unique: it is made a valid name part first (``notes://x y`` → ``notes_x_y``), and a
    name one server lists twice is named as if it were ``<name>_2`` rather than dropped.
    """
    keyed: list[tuple[str, str, list[str]]] = []
    for server, prefix, originals in groups:
        seen: Counter[str] = Counter()
        keys: list[str] = []
        for original in originals:
            base = _fit(_part(original, server, original), server, original)
            seen[base] += 1
            keys.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
        keyed.append((server, prefix, keys))
    catalog = merge(
        [
            (server, prefix, [Tool(name=key, input_schema=_OBJECT) for key in dict.fromkeys(keys)])
            for server, prefix, keys in keyed
            if keys  # a server offering none names nothing (most offer no prompts, say)
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


@functools.lru_cache(maxsize=1024)
def _parse_template(template: str) -> UriTemplate | None:
    try:
        return UriTemplate.parse(template)
    except InvalidUriTemplate:
        return None


def template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` matches the RFC 6570 ``template`` as the ``mcp`` SDK's own
    :meth:`UriTemplate.match <mcp.shared.uri_template.UriTemplate.match>` — what servers
    route ``resources/read`` by — decides (see the module docstring). A template the SDK
    will not parse matches nothing."""
    parsed = _parse_template(template)
    return parsed is not None and parsed.match(uri) is not None


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
