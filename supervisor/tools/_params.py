"""A tool's parameters for people: each property of its ``inputSchema`` as a name, a short
type and whether it is required — what ``mcp-supervisor tools`` shows of a tool's input.

Only a summary: the schema itself is what arguments are checked against
(:func:`~supervisor.tools._validate.validate_arguments`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs

#: Enumerations with more values than this show as ``enum``, not value by value.
_ENUM_SHOWN = 4
#: How deep ``array<…>`` and unions are followed before the rest is ``…``.
_DEPTH = 3


@attrs.frozen
class Parameter:
    """One top-level property of a tool's ``inputSchema``."""

    name: str
    #: a short type: ``string``, ``integer``, ``array<string>``, ``integer|null``,
    #: ``"asc"|"desc"`` (an enumeration), ``Point`` (a ``$ref``), ``object``; ``any`` when
    #: the schema does not say
    type: str
    #: listed in the schema's ``required``
    required: bool
    #: the property's ``description``, if it has one
    description: str | None = None


def parameters(schema: Mapping[str, object]) -> list[Parameter]:
    """The parameters ``schema`` (an ``inputSchema``) declares, in its order; an empty list
    for a schema without ``properties``. Anything malformed reads as ``any``, never an
    error: listing tools must not fail on one odd schema."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out = []
    for name, prop in properties.items():
        description = prop.get("description") if isinstance(prop, Mapping) else None
        out.append(
            Parameter(
                name=str(name),
                type=type_of(prop),
                required=name in needed,
                description=description if isinstance(description, str) else None,
            )
        )
    return out


def type_of(schema: object, depth: int = 0) -> str:
    """A short name for the type a JSON Schema admits (see :attr:`Parameter.type`)."""
    if depth > _DEPTH:
        return "…"
    if not isinstance(schema, Mapping):
        return "any"  # true, false, or not a schema at all
    if "const" in schema:
        return json.dumps(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "|".join(map(json.dumps, enum)) if len(enum) <= _ENUM_SHOWN else "enum"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1] or "any"
    kind = schema.get("type")
    if isinstance(kind, str):
        return _typed(kind, schema, depth)
    if isinstance(kind, list) and kind:
        return "|".join(_typed(str(k), schema, depth) for k in kind)
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union)
        if isinstance(branches, list) and branches:
            names = dict.fromkeys(type_of(b, depth + 1) for b in branches)
            return "|".join(names)
    everything = schema.get("allOf")
    if isinstance(everything, list) and len(everything) == 1:
        return type_of(everything[0], depth + 1)
    if "properties" in schema:
        return "object"
    return "any"


def _typed(kind: str, schema: Mapping[str, object], depth: int) -> str:
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array<{type_of(schema['items'], depth + 1)}>"
    return kind


def signature(params: Sequence[Parameter]) -> str:
    """``title*: string, tags: array<string>``: each parameter's name, ``*`` when it is
    required, and its type; ``(no parameters)`` for none."""
    if not params:
        return "(no parameters)"
    return ", ".join(f"{p.name}{'*' if p.required else ''}: {p.type}" for p in params)
