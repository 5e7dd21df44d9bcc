"""Checking each server's tool list once (:class:`Listing`), merging the lists into a
catalog, and diffing catalogs."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, overload

import msgspec
from mcp_types import Tool

from ..config._limits import Limits, size_text
from ..errors import ToolNameConflict
from ._catalog import BUILTIN, Catalog, CatalogDiff, Conflict, Entry, default_description
from ._naming import _VALID, MAX_NAME, NamingPolicy, _fit, _part, _short_hash, _with_suffix

ServerTools = tuple[str, str, Sequence[Tool]]
"""One server's input to :func:`merge`: ``(server name, prefix, tools as listed)``; the
tools may be a :class:`Listing`."""


# --- merge and diff -------------------------------------------------------------------


class Listing(Sequence[Tool]):
    """One server's tools as it listed them, each checked once (see the module docstring).

    A sequence of every listed tool, invalid ones included; ``problems`` explains each
    invalid tool in one line. :func:`merge` takes a listing as it is and checks any other
    sequence first, so a caller that merges again whenever *some* server changes (the live
    catalog) builds one listing per tool list it receives and checks each tool once. The
    tools must not change afterwards.
    """

    __slots__ = ("_rows", "_tools", "notes", "problems")

    def __init__(self, tools: Iterable[Tool], limits: Limits | None = None) -> None:
        self._tools = tuple(tools)
        limits = limits or _DEFAULT_LIMITS
        max_schema = limits.max_schema_bytes
        max_description = limits.max_description_bytes
        # (tool, name, description, schema, whether the name is a plain ASCII identifier)
        rows: list[tuple[Tool, str, str, dict[str, object], bool]] = []
        problems: list[str] = []
        notes: list[str] = []
        seen: set[str] = set()
        check = msgspec.convert
        shape = _InputSchema
        encode_into = msgspec.json.Encoder().encode_into
        encoded = bytearray()  # reused: each schema encoded into it, resized to fit
        named = _TOOL_NAME.fullmatch
        for tool in self._tools:
            original = tool.name
            schema = tool.input_schema
            description = tool.description
            problem = None
            if type(schema) is dict:
                # The common case costs one encoding and one search: no "$" keyword at all.
                try:
                    encode_into(schema, encoded)
                    ok = True
                except (TypeError, ValueError, OverflowError):
                    ok = False
                if not ok or len(encoded) > max_schema or b'"$' in encoded:
                    known = bytes(encoded) if ok else None
                    problem = _schema_limits(schema, known, "inputSchema", max_schema)
            if problem is None:
                try:
                    check(schema, shape)  # a dict, "type": "object", shaped like JSON Schema
                except msgspec.ValidationError as exc:
                    problem = _schema_problem(schema, exc)
            if problem is None and (output := tool.output_schema) is not None:
                problem = _schema_limits(output, None, "outputSchema", max_schema)
            if problem is None:
                if type(original) is not str or original in seen:
                    problem = _name_problem(original)
                elif description is not None and type(description) is not str:
                    problem = "its description is not a string"
            plain = problem is None and original.isascii() and original.isidentifier()
            if problem is None and not (plain and len(original) <= MAX_TOOL_NAME):
                if not named(original):
                    problem = _name_problem(original)
            if problem is not None:
                problems.append(f"tool {original!r}: {problem}")
                continue
            seen.add(original)
            if not description or description.isspace():  # merge gives it the default
                description = ""
            elif len(description) * 4 > max_description:
                description, note = _cut_description(description, max_description)
                if note:
                    notes.append(f"tool {original!r}: {note}")
            rows.append((tool, original, description, schema, plain))
        self._rows = rows
        #: why each invalid tool is skipped, one line each
        self.problems: tuple[str, ...] = tuple(problems)
        #: what was changed to offer a tool (a description cut to the limit), one line each
        self.notes: tuple[str, ...] = tuple(notes)

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Tool, ...]: ...
    def __getitem__(self, index: int | slice) -> Tool | tuple[Tool, ...]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<Listing of {len(self._tools)} tools, {len(self.problems)} invalid>"


def merge(
    servers: Iterable[ServerTools],
    policy: NamingPolicy | None = None,
    builtins: frozenset[str] | set[str] = frozenset(),
    *,
    refuse: bool = False,
) -> Catalog:
    """Merge each server's tools, given in config order, into one :class:`Catalog`.

    Each server's tools may be a :class:`Listing` (checked already) or any sequence (checked
    now). When ``policy.clash`` is ``"error"`` and two tools (or a tool and a built-in)
    want the same name, this raises :class:`~supervisor.errors.ToolNameConflict` — or,
    with ``refuse`` (what a running supervisor does: one server's clash must not hide
    everyone's tools), leaves the later tool out and records a :class:`Conflict` with
    ``refused`` set. A server listed twice keeps only its first listing's tools.
    """
    # Tens of thousands of small acyclic allocations: pausing the cycle collector
    # meanwhile keeps it from rescanning a big heap many times over (it runs again after).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _merge(servers, policy or NamingPolicy(), builtins, refuse)
    finally:
        if paused:
            gc.enable()


def _merge(
    servers: Iterable[ServerTools],
    policy: NamingPolicy,
    builtins: frozenset[str] | set[str],
    refuse: bool = False,
) -> Catalog:
    entries: dict[str, Entry] = {}
    refused: dict[tuple[str, bool], list[str]] = {}  # (name, built-in?) -> servers
    clashes: dict[str, list[str]] = {}  # wanted name -> every server that wanted it
    builtin_clashes: dict[str, list[str]] = {}
    by_server: dict[str, tuple[Entry, ...]] = {}
    unsupported: dict[str, int] = {}
    invalid: dict[str, tuple[str, ...]] = {}
    valid = _VALID.fullmatch
    for server, prefix, tools in servers:
        if server in by_server:
            continue
        listing = tools if type(tools) is Listing else Listing(tools)
        head, tail = policy.affixes(server, prefix)
        limit = MAX_NAME - len(head) - len(tail)
        mine: list[Entry] = []
        for tool, original, description, schema, plain in listing._rows:
            name = head + original + tail
            if not (plain and len(original) <= limit) and not valid(name):
                name = _fit(head + _part(original, server, original) + tail, server, original)
            if name in entries or name in builtins:
                try:
                    name = _settle(
                        name,
                        server,
                        prefix,
                        original,
                        policy,
                        entries,
                        builtins,
                        clashes,
                        builtin_clashes,
                    )
                except ToolNameConflict:
                    if not refuse:
                        raise
                    if name in builtins:  # not even its prefixed name was free
                        builtin_clashes[name].remove(server)
                        refused.setdefault((name, True), []).append(server)
                    else:
                        refused.setdefault((name, False), [entries[name].server]).append(server)
                    continue
            entry = Entry(
                name=name,
                server=server,
                original_name=original,
                description=description or default_description(original, server),
                input_schema=schema,
                tool=tool,
            )
            entries[name] = entry
            mine.append(entry)
        by_server[server] = tuple(mine)
        unsupported[server] = len(listing.problems)
        if listing.problems:
            invalid[server] = listing.problems
    conflicts = [Conflict(n, tuple(s), builtin=True) for n, s in builtin_clashes.items() if s]
    conflicts += [Conflict(n, tuple(dict.fromkeys(s))) for n, s in clashes.items()]
    conflicts += [
        Conflict(n, tuple(dict.fromkeys(s)), builtin=b, refused=True)
        for (n, b), s in refused.items()
    ]
    return Catalog(entries, by_server, unsupported, conflicts, invalid)


def _settle(
    wanted: str,
    server: str,
    prefix: str,
    original: str,
    policy: NamingPolicy,
    entries: Mapping[str, Entry],
    builtins: frozenset[str] | set[str],
    clashes: dict[str, list[str]],
    builtin_clashes: dict[str, list[str]],
) -> str:
    """A free name for a tool whose ``wanted`` name is taken; records the conflict."""

    def taken(n: str) -> bool:
        return n in builtins or n in entries

    if wanted in builtins:
        builtin_clashes.setdefault(wanted, []).append(server)
        if not prefix:
            head, tail = policy.affixes(server, server)
            qualified = _fit(head + _part(original, server, original) + tail, server, original)
            if not taken(qualified):
                return qualified
        servers = [BUILTIN, server]
    else:
        # The name is an earlier tool's: that tool's server got it first.
        servers = [*clashes.get(wanted, [entries[wanted].server]), server]
    if policy.clash == "error":
        raise ToolNameConflict(
            f"tool name {wanted!r} is wanted by {' and '.join(servers)}; set a distinct "
            "prefix for one of these servers, or use the 'suffix' or 'hash' clash policy",
            name=wanted,
            servers=servers,
        )
    if wanted not in builtins:
        clashes.setdefault(wanted, [entries[wanted].server]).append(server)
    if policy.clash == "hash":
        candidate = _with_suffix(wanted, "_" + _short_hash(server, original, size=6))
        if not taken(candidate):
            return candidate
    n = 2
    while taken(candidate := _with_suffix(wanted, f"_{n}")):
        n += 1
    return candidate


def diff(old: Catalog, new: Catalog) -> CatalogDiff:
    """What changed from ``old`` to ``new``, per server, by merged name and fingerprint.

    A tool is *registered* if its server did not have that merged name before,
    *deregistered* if its server no longer has it, and *updated* if the name stayed but the
    fingerprint changed. Servers with nothing to report are left out. Two entries for the
    same listed ``Tool`` object are the same definition: their fingerprints are not
    computed (so a diff after one server re-listed hashes only that server's tools).
    """
    registered: dict[str, list[str]] = {}
    deregistered: dict[str, list[str]] = {}
    updated: dict[str, list[str]] = {}
    empty: tuple[Entry, ...] = ()
    for server in dict.fromkeys([*old.by_server, *new.by_server]):
        before_entries = old.by_server.get(server, empty)
        after_entries = new.by_server.get(server, empty)
        if before_entries is after_entries:
            continue
        before = {e.name: e for e in before_entries}
        after = {e.name: e for e in after_entries}
        if added := sorted(after.keys() - before.keys()):
            registered[server] = added
        if removed := sorted(before.keys() - after.keys()):
            deregistered[server] = removed
        changed = [
            name
            for name, entry in after.items()
            if (was := before.get(name)) is not None
            and was.tool is not entry.tool
            and was.fingerprint != entry.fingerprint
        ]
        if changed:
            updated[server] = sorted(changed)
    return CatalogDiff(registered, deregistered, updated)


# --- schema shape ---------------------------------------------------------------------
# JSON Schema 2020-12's own metaschema, reduced to the keywords that decide validation and
# checked by msgspec in C: a merge can afford it for every tool. Unknown keywords pass.

_SimpleType = Literal["array", "boolean", "integer", "null", "number", "object", "string"]
_Number = int | float
_Count = Annotated[int, msgspec.Meta(ge=0)] | Annotated[float, msgspec.Meta(ge=0)]
_Sub = Union["_Schema", bool]


class _Keywords(
    msgspec.Struct,
    gc=False,
    rename={"ref": "$ref", "defs": "$defs", "not_": "not"},
):
    """A schema's keywords but ``type``, which each kind of schema below declares."""

    properties: dict[str, _Sub] | None = None
    items: _Sub | list[_Sub] | None = None  # an array: drafts before 2020-12
    additionalProperties: _Sub | None = None
    required: list[str] | None = None
    enum: list[Any] | None = None
    anyOf: list[_Sub] | None = None
    oneOf: list[_Sub] | None = None
    allOf: list[_Sub] | None = None
    not_: _Sub | None = None
    ref: str | None = None
    defs: dict[str, _Sub] | None = None
    definitions: dict[str, _Sub] | None = None
    minimum: _Number | None = None
    maximum: _Number | None = None
    minLength: _Count | None = None
    maxLength: _Count | None = None
    minItems: _Count | None = None
    maxItems: _Count | None = None
    title: str | None = None
    description: str | None = None


class _Schema(_Keywords, gc=False):
    """A schema anywhere in a tool's input schema."""

    type: _SimpleType | list[_SimpleType] | None = None


class _InputSchema(_Keywords, kw_only=True, gc=False):
    """A tool's input schema: an object schema at the root (as MCP requires)."""

    type: Literal["object"]


def _schema_problem(schema: object, exc: msgspec.ValidationError) -> str | None:
    """Why ``schema`` cannot be a tool's input schema, given the shape check's error; None
    if its declared ``$schema`` dialect accepts it after all."""
    if type(schema) is not dict:
        return f"its inputSchema is not a JSON object (got {type(schema).__name__})"
    if schema.get("type") != "object":
        return 'its inputSchema does not have "type": "object" at the root'
    if "$schema" in schema:  # another draft may allow what 2020-12 does not
        import jsonschema.validators

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as error:
            return f"its inputSchema is not a valid JSON Schema: {error.message}"
        return None
    return f"its inputSchema is not a valid JSON Schema: {exc}"


def _name_problem(original: object) -> str:
    if type(original) is not str:
        return f"its name is not a string (got {type(original).__name__})"
    if not original:
        return "its name is empty"
    if len(original) > MAX_TOOL_NAME:
        return (
            f"its name is {len(original)} characters long, more than the {MAX_TOOL_NAME} MCP allows"
        )
    if not _TOOL_NAME.fullmatch(original):
        bad = sorted(set(_NOT_NAME.findall(original)))
        return (
            f"its name has characters MCP does not allow in a tool name "
            f"({', '.join(map(repr, bad))}); only A-Z, a-z, 0-9, '_', '.' and '-'"
        )
    return "the server already listed a tool of that name"


# --- limits on a tool's definition ----------------------------------------------------

#: Longest tool name a server may list (MCP's rule: 1 to 128 of ``[A-Za-z0-9_.-]``).
MAX_TOOL_NAME = 128
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_DEFAULT_LIMITS = Limits()

#: The JSON Schema dialects a tool's schema may declare in ``$schema``: 2020-12 (MCP's
#: default) and draft-07, over http or https, with or without the empty fragment.
DIALECTS = ("json-schema.org/draft/2020-12/schema", "json-schema.org/draft-07/schema")
_DIALECTS = frozenset(
    f"{scheme}://{dialect}{fragment}"
    for dialect in DIALECTS
    for scheme in ("http", "https")
    for fragment in ("", "#")
)


def _schema_limits(schema: object, encoded: bytes | None, what: str, max_bytes: int) -> str | None:
    """Why a schema breaks the limits — larger than ``max_bytes`` as compact JSON
    (``encoded``, if known), a ``$schema`` dialect other than 2020-12 or draft-07, an
    external ``$ref`` — or None. Any other fault is left to the shape check."""
    if type(schema) is not dict:
        return None
    if encoded is None:
        try:
            encoded = msgspec.json.encode(schema)
        except (TypeError, ValueError, OverflowError):
            return f"its {what} is not JSON"
    if len(encoded) > max_bytes:
        return (
            f"its {what} is {len(encoded)} bytes, more than the limit of {max_bytes} "
            "(supervisor.limits.maxSchemaBytes)"
        )
    dialect = schema.get("$schema")
    if dialect is not None and (type(dialect) is not str or dialect not in _DIALECTS):
        return (
            f"its {what} declares the JSON Schema dialect {dialect!r}; only 2020-12 and "
            "draft-07 are supported"
        )
    if b'"$ref"' in encoded and (ref := _external_ref(schema)) is not None:
        return (
            f"its {what} refers to {ref!r}, outside the schema; only local references "
            "('#...') are supported"
        )
    return None


def _external_ref(schema: object) -> str | None:
    """The first ``$ref`` in ``schema`` that does not start with ``#``, if any."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return ref
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _cut_description(description: str, limit: int) -> tuple[str, str | None]:
    """``description`` cut to at most ``limit`` UTF-8 bytes, marker included, at a
    character boundary, and a note saying so; as it is (and ``None``) if it fits. A limit
    too small for the marker gets a bare ``…`` (or nothing, under 3 bytes)."""
    encoded = description.encode("utf-8", "replace")
    over = len(encoded) - limit
    if over <= 0:
        return description, None
    bytes_ = "byte" if over == 1 else "bytes"
    marker = f"\n… [description truncated: {over} {bytes_} over the {size_text(limit)} limit]"
    if len(marker.encode()) > limit:
        marker = "…" if limit >= len("…".encode()) else ""
    keep = limit - len(marker.encode())
    cut = encoded[:keep].decode("utf-8", "ignore") + marker
    return cut, f"its description ({len(encoded)} bytes) was cut to the {size_text(limit)} limit"
