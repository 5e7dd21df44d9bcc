"""A quick accept for the commonest input schemas, in front of ``jsonschema``.

Most tools take a flat object of named, typed parameters — what every MCP server SDK
generates from a function signature::

    {"type": "object", "title": "...", "required": ["title"],
     "properties": {"title": {"type": "string", "title": "Title"}, "n": {"type": "integer"}}}

For a schema made only of those keywords, :func:`quick_check` builds a plain function that
says whether an instance is valid by the same rules Draft 2020-12 applies (JSON types as
``jsonschema``'s type checker defines them: a ``bool`` is not a number, ``1.0`` is an
integer). It is only ever used to *accept*: when it says no — or the schema uses anything
else — the full ``jsonschema`` validator runs and finds the errors. So a call with valid
arguments costs a few dictionary lookups instead of a walk through the validator, and
every error message still comes from ``jsonschema``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["quick_check"]

_DRAFT_2020_12 = {
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
}
#: keywords with no effect on validity (annotations)
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly"}
)  # fmt: skip
_ROOT = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_PROPERTY = _ANNOTATIONS | {"type"}


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_integer(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_boolean(value: object) -> bool:
    return isinstance(value, bool)


def _is_null(value: object) -> bool:
    return value is None


def _is_object(value: object) -> bool:
    return isinstance(value, dict)


def _is_array(value: object) -> bool:
    return isinstance(value, list)


_TYPES: dict[str, Callable[[object], bool]] = {
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "null": _is_null,
    "object": _is_object,
    "array": _is_array,
}


def _type_test(declared: object) -> Callable[[object], bool] | None:
    """The test for a ``type`` keyword's value, or None if it is not a plain one."""
    if isinstance(declared, str):
        return _TYPES.get(declared)
    if isinstance(declared, list) and declared and all(isinstance(t, str) for t in declared):
        found = [_TYPES.get(t) for t in declared]
        tests = [test for test in found if test is not None]
        if len(tests) != len(found) or len(set(declared)) != len(declared):
            return None
        return lambda value: any(test(value) for test in tests)
    return None


def quick_check(schema: object) -> Callable[[object], bool] | None:
    """A function accepting exactly the instances valid under ``schema`` that are plain
    JSON values (rejecting the rest, for ``jsonschema`` to explain); ``None`` when
    ``schema`` is not a flat object of typed properties (then use ``jsonschema`` alone)."""
    if not isinstance(schema, Mapping) or not set(schema) <= _ROOT:
        return None
    if schema.get("type") != "object":
        return None
    if "$schema" in schema and schema["$schema"] not in _DRAFT_2020_12:
        return None  # another draft: its own rules (draft 4 says 1.0 is no integer)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    if not isinstance(properties, Mapping) or not isinstance(extra, bool):
        return None
    tests: dict[str, Callable[[object], bool] | None] = {}
    for name, sub in properties.items():
        if not isinstance(name, str) or not isinstance(sub, Mapping) or not set(sub) <= _PROPERTY:
            return None
        if "type" in sub:
            test = _type_test(sub["type"])
            if test is None:
                return None
            tests[name] = test
        else:
            tests[name] = None  # anything goes
    needed = tuple(dict.fromkeys(required))
    closed = not extra

    def check(instance: object) -> bool:
        if type(instance) is not dict:
            return False
        for name in needed:
            if name not in instance:
                return False
        for name, value in instance.items():
            if name in tests:
                test = tests[name]
                if test is not None and not test(value):
                    return False
            elif closed:
                return False
        return True

    return check
