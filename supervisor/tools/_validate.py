"""Argument and output validation: tool schemas compiled once, checked before sending.

:func:`validate_arguments` checks a call's arguments against the tool's ``inputSchema``
(JSON Schema Draft 2020-12 unless the schema declares another ``$schema``) before anything
is sent, and raises :class:`~supervisor.errors.ToolArgumentsInvalid` naming each bad path
— a string or key holding a lone surrogate (``"\\ud800"``, which JSON text cannot carry)
among them, whatever the schema says.
:func:`prepare_arguments` is what a call sends: the same check, but a ``null`` given for
an optional parameter whose schema does not take ``null`` is left out instead of refused
(a null and an absent parameter mean the same: SEP-2243 has the client omit it).
Validators are compiled once per :func:`fingerprint` and kept in a bounded LRU cache
(:class:`ArgumentValidator`). :func:`invalid_output` translates the SDK client's own
``outputSchema`` check.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TypeAlias

import attrs
import jsonschema
import jsonschema.protocols
import jsonschema.validators
import mcp_types as types
import msgspec
import referencing.exceptions

from .._util._jsontext import json_path as _path
from .._util._jsontext import unencodable
from ..errors import ToolArgumentsInvalid, ToolOutputInvalid, ToolSchemaInvalid
from ._quickcheck import quick_check

#: How many compiled validators an :class:`ArgumentValidator` keeps by default.
DEFAULT_CACHE_SIZE = 4096

#: Longest single validation message kept (values in messages can be huge).
_MAX_MESSAGE = 300

JSONSchema: TypeAlias = Mapping[str, object]


def _digest(kind: str, name: str, schema: object) -> str:
    payload = msgspec.json.encode([kind, name, schema], order="sorted")
    return hashlib.sha256(payload).hexdigest()


def fingerprint(tool: types.Tool) -> str:
    """A stable hex digest (SHA-256) of the tool's name and ``inputSchema``.

    Key order in the schema does not matter; any other change to the name or the schema
    gives a different fingerprint. Description, annotations and ``outputSchema`` are not
    part of it.
    """
    return _digest("input", tool.name, tool.input_schema)


@attrs.frozen
class ValidatorStatistics:
    """What :meth:`ArgumentValidator.statistics` reports."""

    #: validators currently cached
    size: int
    #: the cache's bound
    maxsize: int
    #: lookups answered from the cache
    hits: int
    #: schemas compiled (each was a cache miss)
    compilations: int


class ArgumentValidator:
    """Validates tool arguments and structured outputs, compiling each schema once.

    Compiled validators are cached by fingerprint, least recently used evicted first once
    ``maxsize`` are held. A schema that is itself invalid raises
    :class:`~supervisor.errors.ToolSchemaInvalid` each time it is used (it is not cached).
    Not thread-safe; meant to be owned by one actor (or used from one trio thread).
    """

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._maxsize = maxsize
        self._cache: OrderedDict[str, jsonschema.protocols.Validator] = OrderedDict()
        # Quick accepts for flat input schemas (see supervisor._quickcheck), by fingerprint;
        # None where the schema needs the full validator.
        self._quick: dict[str, Callable[[object], bool] | None] = {}
        # The same, by tool object (id → the tool, kept alive, and its quick check).
        self._seen: dict[int, tuple[types.Tool, Callable[[object], bool] | None]] = {}
        self._hits = 0
        self._compilations = 0

    def statistics(self) -> ValidatorStatistics:
        """Cache size, bound, hits and compilations so far."""
        return ValidatorStatistics(
            size=len(self._cache),
            maxsize=self._maxsize,
            hits=self._hits,
            compilations=self._compilations,
        )

    def check_schema(self, tool: types.Tool) -> None:
        """Compile the tool's input schema (and output schema, if any) now, raising
        :class:`~supervisor.errors.ToolSchemaInvalid` if either is not a valid schema."""
        self._validator(fingerprint(tool), tool.name, tool.input_schema, "inputSchema")
        if tool.output_schema is not None:
            self._output_validator(tool.name, tool.output_schema)

    def validate(
        self,
        tool: types.Tool,
        arguments: Mapping[str, object],
        *,
        called: str | None = None,
        server: str | None = None,
    ) -> None:
        """Raise :class:`~supervisor.errors.ToolArgumentsInvalid` listing every error if
        ``arguments`` does not match the tool's ``inputSchema``, or holds text that JSON
        cannot carry (a lone surrogate: :func:`~supervisor._util._jsontext.unencodable`);
        return ``None`` if it is fine. The error names the tool as it was ``called`` (its
        merged name; default: its own) and its ``server``.
        """
        instance = dict(arguments) if isinstance(arguments, Mapping) else arguments
        unsendable = unencodable(instance)  # a schema cannot say it: it would be sent
        # The call path: a tool object seen before (a listed tool is never changed in
        # place) with a quick check that accepts these arguments costs no hashing at all.
        seen = self._seen.get(id(tool))
        if (
            not unsendable
            and seen is not None
            and seen[0] is tool
            and seen[1] is not None
            and seen[1](instance)
        ):
            return
        key = fingerprint(tool)
        validator = self._validator(key, tool.name, tool.input_schema, "inputSchema")
        try:
            quick = self._quick[key]
        except KeyError:
            quick = self._quick[key] = quick_check(tool.input_schema)
        if len(self._seen) >= self._maxsize:
            self._seen.clear()  # rebuilt as tools are used again
        self._seen[id(tool)] = (tool, quick)
        if not unsendable and quick is not None and quick(instance):
            return  # valid: the full validator would find nothing
        errors = _errors(validator, instance, tool.name, "inputSchema")
        if unsendable:
            errors = sorted(dict.fromkeys([*errors, *unsendable]))
        if errors:
            raise ToolArgumentsInvalid(called or tool.name, errors, server=server)

    def prepare(
        self,
        tool: types.Tool,
        arguments: Mapping[str, object],
        *,
        called: str | None = None,
        server: str | None = None,
    ) -> Mapping[str, object]:
        """The arguments to send for a call of ``tool``: ``arguments`` themselves when they
        pass :meth:`validate`; otherwise, when each top-level ``null`` the schema refuses is
        for an optional parameter (not in the schema's ``required``), ``arguments`` without
        those keys — a null and an absent parameter mean the same, and the MCP
        specification has a client omit it (SEP-2243) — provided what is left passes.
        Otherwise it raises what :meth:`validate` raises for ``arguments`` as given
        (:class:`~supervisor.errors.ToolArgumentsInvalid`, every error named as ever); so
        a ``null`` for a required parameter stays an error, and a ``null`` the schema
        takes (``"type": ["boolean", "null"]``) is sent as it is. ``called`` and
        ``server`` name the call in the error, as :meth:`validate`'s do.
        """
        try:
            self.validate(tool, arguments, called=called, server=server)
        except ToolArgumentsInvalid as exc:
            omitted = self._refused_nulls(tool, arguments)
            if not omitted:
                raise
            kept = {key: value for key, value in arguments.items() if key not in omitted}
            try:
                self.validate(tool, kept, called=called, server=server)
            except ToolArgumentsInvalid:
                raise exc from None
            return kept
        return arguments

    def _refused_nulls(self, tool: types.Tool, arguments: Mapping[str, object]) -> set[str]:
        """The optional top-level parameters ``arguments`` gives as ``null`` that the
        schema refuses as such (an error found at that key itself)."""
        if not isinstance(arguments, Mapping):
            return set()
        nulls = {key for key, value in arguments.items() if value is None}
        required = tool.input_schema.get("required")
        if isinstance(required, list):
            nulls.difference_update(key for key in required if isinstance(key, str))
        if not nulls:
            return set()
        validator = self._validator(fingerprint(tool), tool.name, tool.input_schema, "inputSchema")
        # typeshed's stub wants a JSON value; this is untrusted, any object: checking it is why
        errors = validator.iter_errors(dict(arguments))  # pyright: ignore[reportArgumentType]
        return {
            path[0]
            for error in errors
            if len(path := error.absolute_path) == 1 and path[0] in nulls
        }

    def validate_output(self, tool: str, schema: JSONSchema, structured: object) -> None:
        """Raise :class:`~supervisor.errors.ToolOutputInvalid` if ``structured`` does not
        match ``schema`` (the tool's ``outputSchema``)."""
        errors = _errors(self._output_validator(tool, schema), structured, tool, "outputSchema")
        if errors:
            raise ToolOutputInvalid(tool, errors)

    def _output_validator(self, tool: str, schema: JSONSchema) -> jsonschema.protocols.Validator:
        return self._validator(_digest("output", tool, schema), tool, schema, "outputSchema")

    def _validator(
        self, key: str, tool: str, schema: object, what: str
    ) -> jsonschema.protocols.Validator:
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self._hits += 1
            return cached
        validator = _compile(tool, schema, what)
        self._compilations += 1
        self._cache[key] = validator
        if len(self._cache) > self._maxsize:
            evicted, _ = self._cache.popitem(last=False)
            self._quick.pop(evicted, None)
        return validator


def _compile(tool: str, schema: object, what: str) -> jsonschema.protocols.Validator:
    if not isinstance(schema, Mapping):
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} is not a JSON object (got {type(schema).__name__})",
            tool=tool,
        )
    schema = dict(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} is not a valid JSON Schema: "
            f"at {where}: {_short(exc.message)}",
            tool=tool,
        ) from exc
    return cls(schema)


def _errors(
    validator: jsonschema.protocols.Validator, instance: object, tool: str, what: str
) -> list[tuple[str, str]]:
    try:
        # typeshed's stub wants a JSON value; this is untrusted, any object: checking it is why
        errors = validator.iter_errors(instance)  # pyright: ignore[reportArgumentType]
        found = [(_path(e.absolute_path), _short(e.message)) for e in errors]
    except referencing.exceptions.Unresolvable as exc:
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} has a $ref that cannot be resolved: {exc}", tool=tool
        ) from exc
    return sorted(dict.fromkeys(found))


def invalid_output(
    tool: str, error: RuntimeError, *, server: str | None = None
) -> ToolOutputInvalid | None:
    """The SDK client's own check of a result against the tool's ``outputSchema`` (it
    raises a bare ``RuntimeError``) as :class:`~supervisor.errors.ToolOutputInvalid`
    naming the path, ``tool`` (the name it was called by) and its ``server``; ``None``
    for any other ``RuntimeError``."""
    cause = error.__cause__
    if isinstance(cause, jsonschema.ValidationError):
        errors = [(_path(cause.absolute_path), _short(cause.message))]
        return ToolOutputInvalid(tool, errors, server=server)
    said = str(error)
    if said.endswith("has an output schema but did not return structured content"):
        errors = [("(root)", "no structuredContent, but the tool declares an outputSchema")]
        return ToolOutputInvalid(tool, errors, server=server)
    if said.startswith("Invalid schema for tool"):
        errors = [("(root)", f"the outputSchema is unusable: {said}")]
        return ToolOutputInvalid(tool, errors, server=server)
    return None


def _short(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


# The process-wide validator behind validate_arguments(), prepare_arguments() and
# normalize_result(): it outlives every supervisor, so it is bounded — at most
# DEFAULT_CACHE_SIZE compiled validators (LRU), quick checks evicted with them, and at most
# as many tool objects remembered.
_default_validator = ArgumentValidator()


#: Quick accepts of output schemas by identity (see :func:`output_accepted`): id → the
#: schema, kept alive, and its check (``None``: the schema needs ``jsonschema``).
_quick_outputs: dict[int, tuple[object, Callable[[object], bool] | None]] = {}


def output_accepted(schema: object, structured: object) -> bool:
    """Whether ``structured`` is surely valid under the output schema ``schema`` — a flat
    object of typed properties (:func:`~._quickcheck.quick_check`) that is itself a valid
    Draft 2020-12 schema — without ``jsonschema``'s walk. ``False`` says nothing: the full
    check must run. Checks are built once per schema object (a listed schema is never
    changed in place), at most :data:`DEFAULT_CACHE_SIZE` remembered."""
    seen = _quick_outputs.get(id(schema))
    if seen is None or seen[0] is not schema:
        check = quick_check(schema)
        if check is not None:
            try:
                # typeshed's stub wants a Mapping: quick_check took this one as an object schema
                jsonschema.Draft202012Validator.check_schema(schema)  # pyright: ignore[reportArgumentType]
            except jsonschema.SchemaError:
                check = None  # broken: the full check says how
        if len(_quick_outputs) >= DEFAULT_CACHE_SIZE:
            _quick_outputs.clear()
        seen = _quick_outputs[id(schema)] = (schema, check)
    check = seen[1]
    return check is not None and check(structured)


def validate_arguments(tool: types.Tool, arguments: Mapping[str, object]) -> None:
    """Check ``arguments`` against ``tool.input_schema`` with the process-wide
    :class:`ArgumentValidator`; see :meth:`ArgumentValidator.validate`."""
    _default_validator.validate(tool, arguments)


def prepare_arguments(
    tool: types.Tool,
    arguments: Mapping[str, object],
    called: str | None = None,
    server: str | None = None,
) -> Mapping[str, object]:
    """The arguments to send for a call of ``tool`` (``called`` by its merged name, of
    ``server``: what an error names), checked with the process-wide
    :class:`ArgumentValidator`; see :meth:`ArgumentValidator.prepare`."""
    return _default_validator.prepare(tool, arguments, called=called, server=server)
