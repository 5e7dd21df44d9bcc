"""The merged tool catalog: naming, merging, diffing and lazy exposure (pure, no I/O).

:func:`merge` turns each server's ``tools/list`` result, in config order, into one
:class:`Catalog` whose names are unique and accepted by model APIs
(``^[A-Za-z0-9_-]{1,64}$``). :func:`diff` compares two catalogs for the
``tools.registered|deregistered|updated`` events; :attr:`Catalog.conflicts` feeds
``tools.conflict``. :meth:`Catalog.list`, :meth:`Catalog.search` and :meth:`Catalog.load`
expose a large catalog a little at a time.

Naming, in order:

1. Each part (``{prefix}``, ``{server}``, ``{tool}``) is normalised on its own: accents are
   dropped (``café`` → ``cafe``), every run of other characters becomes one ``_``, and ``_``
   is stripped from the ends of a part that needed it. A part left empty becomes ``t`` plus
   a short hash. With an empty prefix, ``{prefix}`` disappears with the separator next to it
   (``{prefix}_{tool}`` → ``{tool}``).
2. A name longer than 64 characters keeps a readable head and ends in ``_`` plus 8 hex
   digits hashed from the server and original name, so distinct long names stay distinct.
3. A name equal to a built-in (registered by the embedder) never replaces it. The MCP tool
   keeps a *prefixed* name: if its prefix was empty it is named as if the prefix were the
   server's name (``search`` → ``web_search``); otherwise, or if that is taken too, the clash
   policy applies. Either way a :class:`Conflict` with ``builtin=True`` is recorded (the
   caller publishes it as a warning).
4. A name already taken by an earlier tool (earlier server in config order, or earlier in
   the same server's list) follows :attr:`NamingPolicy.clash`: ``"suffix"`` appends ``_2``,
   ``_3`` …; ``"hash"`` appends ``_`` plus 6 hex digits hashed from the server and original
   name (stable across restarts and reorderings); ``"error"`` raises
   :class:`~supervisor.errors.ToolNameConflict`. A :class:`Conflict` naming every server
   involved is recorded for ``suffix`` and ``hash``.

Invalid tools — a name that is not a non-empty string, a description that is not a string,
an input schema that is not an object with ``"type": "object"`` or is not valid JSON Schema,
or an original name the server already listed — are skipped, counted in
:attr:`Catalog.unsupported` and explained in :attr:`Catalog.invalid`; the server's other
tools are unaffected.

Schemas are checked for the shape JSON Schema 2020-12 gives the keywords that decide
validation (``type``, ``properties``, ``items``, ``additionalProperties``, ``required``,
``enum``, ``anyOf``/``oneOf``/``allOf``/``not``, ``$ref``, ``$defs``/``definitions``,
numeric and length bounds, ``title``/``description``), recursively, in C (msgspec), about a
microsecond a tool. A schema failing that check which declares another ``$schema`` dialect
gets the full metaschema check of its draft before it is rejected. Subtler faults (an
invalid ``pattern`` regex, say) pass here and are reported as
:class:`~supervisor.errors.ToolSchemaInvalid` when the tool is called.

Costs: every tool is checked once per list a server sends — a :class:`Listing` is one
checked list, and :func:`merge` checks any other sequence it is given — so merging again
when some server changed only names. A merge hashes nothing: :attr:`Entry.fingerprint` is
computed when read, and :func:`diff` compares the listed ``Tool`` objects first (a server
whose list was not fetched again keeps the very same objects), so only tools that were
listed anew are hashed.
"""

from __future__ import annotations

import bisect
import difflib
import gc
import hashlib
import heapq
import itertools
import re
import statistics
import time
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple, Union, overload

import attrs
import msgspec
from mcp_types import Tool

from .errors import ToolNameConflict, UnknownServer, UnknownTool
from .events import ToolsConflict, ToolsDeregistered, ToolsRegistered, ToolsUpdated

__all__ = [
    "BUILTIN",
    "Catalog",
    "CatalogDiff",
    "Conflict",
    "Entry",
    "Listing",
    "NamingPolicy",
    "ServerTools",
    "Summary",
    "diff",
    "listing_ms_32k",
    "merge",
    "registry_merge_ms_32k",
    "search_ms_32k",
]

MAX_NAME = 64
_VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_INVALID_RUN = re.compile(r"[^A-Za-z0-9_-]+")
# camelCase / PascalCase / ACRONYMWord / digits, after splitting on non-alphanumerics
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from in is it of on or that the this to with".split()
)
_ENCODER = msgspec.json.Encoder(order="sorted")

#: How a built-in tool is named among the servers of a conflict (and its event).
BUILTIN = "<built-in>"

ServerTools = tuple[str, str, Sequence[Tool]]
"""One server's input to :func:`merge`: ``(server name, prefix, tools as listed)``; the
tools may be a :class:`Listing`."""


@attrs.frozen
class NamingPolicy:
    """How merged names are formed and how clashes are settled (see the module docstring).

    ``template`` may use ``{prefix}``, ``{server}`` and ``{tool}``; the usual ones are
    ``"{prefix}_{tool}"`` (the default) and ``"mcp__{server}__{tool}"``.
    """

    template: str = "{prefix}_{tool}"
    clash: Literal["suffix", "hash", "error"] = "suffix"

    def __attrs_post_init__(self) -> None:
        if "{tool}" not in self.template:
            raise ValueError(f"name template {self.template!r} must contain {{tool}}")
        if self.clash not in ("suffix", "hash", "error"):
            raise ValueError(f"clash policy must be suffix, hash or error, not {self.clash!r}")

    def affixes(self, server: str, prefix: str) -> tuple[str, str]:
        """The normalised text before and after ``{tool}`` for this server and prefix."""
        template = self.template
        if not prefix:
            for gone in ("{prefix}_", "_{prefix}", "{prefix}-", "-{prefix}", "{prefix}"):
                template = template.replace(gone, "")
        template = template.replace("{prefix}", _part(prefix, server, prefix))
        template = template.replace("{server}", _part(server, server, server))
        head, _, tail = template.partition("{tool}")
        return head, tail


class Entry(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One tool in the merged catalog, with its provenance.

    ``tool`` is the object the server listed; ``description`` and ``input_schema`` are its
    own (the description ``""`` when it had none). ``fingerprint`` is a stable hash (16 hex
    digits) of the server, original name, description and input schema in canonical JSON:
    it changes exactly when the definition the model sees changes. It is computed when read
    (about a microsecond), never by a merge, and not stored: entries stay small, immutable
    and untracked by the cycle collector, so merging 32k of them stays cheap.
    """

    name: str
    server: str
    original_name: str
    description: str
    input_schema: dict[str, object]
    tool: Tool
    source: str = "mcp"

    @property
    def fingerprint(self) -> str:
        """Stable hash of server, original name, description and input schema."""
        blob = _ENCODER.encode((self.server, self.original_name, self.description,
                                self.input_schema))
        return hashlib.blake2b(blob, digest_size=8).hexdigest()


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """A catalog entry without its schema: ``description`` is the first line, ≤ 120 chars."""

    name: str
    server: str
    description: str


@attrs.frozen
class Conflict:
    """Several tools wanted ``name``; ``servers`` lists their servers in config order.

    ``builtin`` is true when the name belongs to an embedder's built-in tool (then
    ``servers`` lists only the MCP servers that wanted it). ``refused`` is true when the
    ``error`` clash policy left the tools of every server but the first out (see
    :func:`merge`'s ``refuse``).
    """

    name: str
    servers: tuple[str, ...]
    builtin: bool = False
    refused: bool = False

    def event(self) -> ToolsConflict:
        """The ``tools.conflict`` event for this conflict; for a built-in, ``servers``
        starts with ``"<built-in>"`` and ``builtin`` is set."""
        servers = [BUILTIN, *self.servers] if self.builtin else list(self.servers)
        return ToolsConflict(
            name=self.name, servers=servers, builtin=self.builtin, refused=self.refused
        )


class CatalogDiff(NamedTuple):
    """What changed between two catalogs: merged names by server, sorted."""

    registered: dict[str, list[str]]
    deregistered: dict[str, list[str]]
    updated: dict[str, list[str]]

    def events(self) -> list[ToolsRegistered | ToolsDeregistered | ToolsUpdated]:
        """The ``tools.*`` events to publish: deregistered, then registered, then updated."""
        out: list[ToolsRegistered | ToolsDeregistered | ToolsUpdated] = []
        out += [ToolsDeregistered(server=s, names=n) for s, n in self.deregistered.items()]
        out += [ToolsRegistered(server=s, names=n) for s, n in self.registered.items()]
        out += [ToolsUpdated(server=s, names=n) for s, n in self.updated.items()]
        return out


# --- naming ---------------------------------------------------------------------------


def _short_hash(*parts: str, size: int = 8) -> str:
    data = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()[:size]


def _part(text: str, server: str, original: str) -> str:
    """``text`` as a valid name part: readable, never empty."""
    if _VALID.fullmatch(text):
        return text
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = _INVALID_RUN.sub("_", ascii_text).strip("_")
    return cleaned or "t" + _short_hash(server, original)


def _fit(name: str, server: str, original: str) -> str:
    if len(name) <= MAX_NAME:
        return name
    return name[: MAX_NAME - 9].rstrip("_-") + "_" + _short_hash(server, original)


def _with_suffix(base: str, suffix: str) -> str:
    return base[: MAX_NAME - len(suffix)] + suffix


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


# --- the catalog ----------------------------------------------------------------------


class Catalog(Mapping[str, Entry]):
    """An immutable merged catalog: a mapping from merged name to :class:`Entry`.

    Iteration follows config order, then each server's listing order. Build one with
    :func:`merge`. ``by_server`` maps every merged server (including one whose tools were
    all invalid) to its entries; ``unsupported`` counts the tools skipped per server and
    ``invalid`` says why, one line per skipped tool (servers with none are left out);
    ``conflicts`` lists the clashes settled while naming.
    """

    def __init__(
        self,
        entries: dict[str, Entry],
        by_server: dict[str, tuple[Entry, ...]],
        unsupported: dict[str, int],
        conflicts: Sequence[Conflict],
        invalid: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._entries = entries
        self.by_server: Mapping[str, tuple[Entry, ...]] = MappingProxyType(by_server)
        self.unsupported: Mapping[str, int] = MappingProxyType(unsupported)
        self.invalid: Mapping[str, tuple[str, ...]] = MappingProxyType(invalid or {})
        self.conflicts: tuple[Conflict, ...] = tuple(conflicts)
        self._index_cache: _SearchIndex | None = None

    def only(self, servers: Collection[str]) -> Catalog:
        """The same names, keeping only the entries of ``servers`` (say, those up now)."""
        return Catalog(
            {n: e for n, e in self._entries.items() if e.server in servers},
            {s: es for s, es in self.by_server.items() if s in servers},
            dict(self.unsupported),
            self.conflicts,
            dict(self.invalid),
        )

    @property
    def _index(self) -> _SearchIndex:
        # Built on first use and kept: the catalog never changes.
        if self._index_cache is None:
            self._index_cache = _SearchIndex(list(self._entries.values()))
        return self._index_cache

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<Catalog {len(self)} tools from {len(self.by_server)} servers>"

    def resolve(self, name: str) -> Entry:
        """The entry called ``name``; :class:`~supervisor.errors.UnknownTool` (naming close
        matches) if there is none."""
        try:
            return self._entries[name]
        except KeyError:
            raise self._unknown([name]) from None

    def list(self, server: str | None = None, limit: int = 50, offset: int = 0) -> list[Summary]:
        """Up to ``limit`` summaries starting at ``offset``, in catalog order.

        With ``server``, only that server's tools; an unknown server raises
        :class:`~supervisor.errors.UnknownServer`.
        """
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        if server is None:
            chosen: Iterable[Entry] = self._entries.values()
        elif server in self.by_server:
            chosen = self.by_server[server]
        else:
            known = ", ".join(self.by_server) or "none"
            raise UnknownServer(f"no server named {server!r} (servers: {known})")
        return [_summary(e) for e in itertools.islice(chosen, offset, offset + limit)]

    def search(self, query: str, limit: int = 10) -> list[Summary]:
        """The ``limit`` best matches for ``query``, best first; deterministic.

        The first search builds a token index, once per catalog; later searches look words
        up in it. The query is split like names (on non-alphanumerics and camelCase,
        lower-cased; common English words are ignored unless nothing else is left). Entries
        rank by, in order: the whole query equals the name (or original name); how many
        query words are words of the name; how many are prefixes of words of the name; how
        many are words of the description. Ties go to the alphabetically first name.
        Entries matching nothing are left out.
        """
        return [_summary(e) for e in self._index.search(query, limit)]

    def load(self, names: Iterable[str]) -> list[Entry]:
        """The full entries (with input schemas) for ``names``, in the order given.

        If any name is unknown, raises :class:`~supervisor.errors.UnknownTool` listing
        every unknown name with its close matches, and returns nothing.
        """
        names = list(names)
        missing = [n for n in names if n not in self._entries]
        if missing:
            raise self._unknown(missing)
        return [self._entries[n] for n in names]

    def _unknown(self, names: Sequence[str]) -> UnknownTool:
        parts = []
        for name in names:
            close = difflib.get_close_matches(name, self._entries, n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            parts.append(f"{name!r}{hint}")
        noun = "tool" if len(names) == 1 else "tools"
        return UnknownTool(f"no {noun} named {'; '.join(parts)}")


def _summary(entry: Entry) -> Summary:
    line = entry.description.strip().split("\n", 1)[0]
    if len(line) > 120:
        line = line[:119].rstrip() + "…"
    return Summary(name=entry.name, server=entry.server, description=line)


class _SearchIndex:
    """Token postings over names and descriptions, built once per catalog."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.lower_names: dict[str, int] = {}
        name_postings: dict[str, list[int]] = {}
        desc_postings: dict[str, list[int]] = {}
        memo: dict[str, list[str]] = {}
        for i, entry in enumerate(entries):
            self.lower_names.setdefault(entry.name.lower(), i)
            self.lower_names.setdefault(entry.original_name.lower(), i)
            for token in set(_tokens(entry.name)):
                name_postings.setdefault(token, []).append(i)
            words = set(entry.description.split())
            seen: set[str] = set()
            for word in words:
                toks = memo.get(word)
                if toks is None:
                    toks = memo[word] = _tokens(word)
                seen.update(toks)
            for token in seen:
                desc_postings.setdefault(token, []).append(i)
        self.name_postings = name_postings
        self.desc_postings = desc_postings
        self.name_tokens = sorted(name_postings)

    def search(self, query: str, limit: int) -> list[Entry]:
        words = list(dict.fromkeys(_tokens(query)))
        if limit <= 0 or not query.strip():
            return []
        words = [w for w in words if w not in _STOPWORDS] or words
        exact = self.lower_names.get(query.strip().lower())
        name_hits: Counter[int] = Counter()
        prefix_hits: Counter[int] = Counter()
        desc_hits: Counter[int] = Counter()
        for word in words:
            name_hits.update(self.name_postings.get(word, ()))
            desc_hits.update(self.desc_postings.get(word, ()))
            found: set[int] = set()
            start = bisect.bisect_right(self.name_tokens, word)
            for token in self.name_tokens[start:]:
                if not token.startswith(word):
                    break
                found.update(self.name_postings[token])
            prefix_hits.update(found)
        entries = self.entries
        named = name_hits.keys() | prefix_hits.keys()
        if exact is not None:
            named.add(exact)

        def key(i: int) -> tuple[int, int, int, int, str]:
            return (
                -(i == exact),
                -name_hits[i],
                -prefix_hits[i],
                -desc_hits[i],
                entries[i].name,
            )

        best = heapq.nsmallest(limit, named, key=key)
        if len(best) < limit:
            # Entries matching only by description: rank by hit count, then name.
            rest = [(-n, entries[i].name, i) for i, n in desc_hits.items() if i not in named]
            best += [i for _, _, i in heapq.nsmallest(limit - len(best), rest)]
        return [entries[i] for i in best]


# --- merge and diff -------------------------------------------------------------------


class Listing(Sequence[Tool]):
    """One server's tools as it listed them, each checked once (see the module docstring).

    A sequence of every listed tool, invalid ones included; ``problems`` explains each
    invalid tool in one line. :func:`merge` takes a listing as it is and checks any other
    sequence first, so a caller that merges again whenever *some* server changes (the live
    catalog) builds one listing per tool list it receives and checks each tool once. The
    tools must not change afterwards.
    """

    __slots__ = ("_rows", "_tools", "problems")

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = tuple(tools)
        # (tool, name, description, schema, whether the name is a plain ASCII identifier)
        rows: list[tuple[Tool, str, str, dict[str, object], bool]] = []
        problems: list[str] = []
        seen: set[str] = set()
        check = msgspec.convert
        shape = _InputSchema
        for tool in self._tools:
            original = tool.name
            schema = tool.input_schema
            description = tool.description
            try:
                check(schema, shape)  # a dict, "type": "object", shaped like JSON Schema
                problem = None
            except msgspec.ValidationError as exc:
                problem = _schema_problem(schema, exc)
            if problem is None:
                if type(original) is not str or not original or original in seen:
                    problem = _name_problem(original)
                elif description is not None and type(description) is not str:
                    problem = "its description is not a string"
            if problem is not None:
                problems.append(f"tool {original!r}: {problem}")
                continue
            seen.add(original)
            plain = original.isascii() and original.isidentifier()
            rows.append((tool, original, description or "", schema, plain))
        self._rows = rows
        self.problems: tuple[str, ...] = tuple(problems)

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
                        name, server, prefix, original, policy, entries, builtins, clashes,
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
                description=description,
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


class _Schema(
    msgspec.Struct,
    gc=False,
    rename={"ref": "$ref", "defs": "$defs", "not_": "not"},
):
    type: _SimpleType | list[_SimpleType] | None = None
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


class _InputSchema(_Schema, kw_only=True, gc=False):
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
        import jsonschema

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
    return "the server already listed a tool of that name"


# --- benchmark helpers ----------------------------------------------------------------
# Called by the bench (DESIGN §9: registry_merge_ms_32k, search_ms_32k); not public API.

_VERBS = ("get", "list", "create", "update", "delete", "search", "read", "write")
_NOUNS = ("issue", "file", "page", "user", "repo", "commit", "ticket", "record")


def _sample_tools(servers: int = 32, per_server: int = 1000) -> list[ServerTools]:
    """``servers`` × ``per_server`` realistic tools with small schemas."""
    out: list[ServerTools] = []
    for s in range(servers):
        tools = []
        for t in range(per_server):
            verb, noun = _VERBS[t % 8], _NOUNS[(t // 8) % 8]
            tools.append(
                Tool(
                    name=f"{verb}_{noun}_{t}",
                    description=f"{verb.title()} a {noun} by id in workspace {t} of "
                    f"service {s}; returns the {noun} as JSON.",
                    inputSchema={
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": f"the {noun} id"},
                            "limit": {"type": "integer", "minimum": 1},
                        },
                        "required": ["id"],
                    },
                )
            )
        out.append((f"server{s}", f"server{s}", tools))
    return out


async def registry_merge_ms_32k(n: int) -> float:
    """Median milliseconds to :func:`merge` 32 servers × 1000 tools, over ``n`` rounds.

    Each round merges fresh :class:`Listing` objects — what the live catalog holds, each
    server's list checked once when it arrived — built before the clock starts; nothing
    from an earlier round is reused. (:func:`listing_ms_32k` times the checking.)
    """
    servers = _sample_tools()
    times = []
    for _ in range(max(n, 1)):
        listed = [(server, prefix, Listing(tools)) for server, prefix, tools in servers]
        start = time.perf_counter()
        catalog = merge(listed)
        times.append((time.perf_counter() - start) * 1000)
        del catalog, listed  # freeing them is not part of the merge
    return statistics.median(times)


async def listing_ms_32k(n: int) -> float:
    """Median milliseconds to check 32 × 1000 listed tools into :class:`Listing` objects
    (done once per tool list received, not per merge), over ``n`` rounds."""
    servers = _sample_tools()
    times = []
    for _ in range(max(n, 1)):
        start = time.perf_counter()
        listed = [Listing(tools) for _, _, tools in servers]
        times.append((time.perf_counter() - start) * 1000)
        del listed
    return statistics.median(times)


async def search_ms_32k(n: int) -> float:
    """Median milliseconds for one :meth:`Catalog.search` over 32 × 1000 tools."""
    catalog = merge(_sample_tools())
    queries = ("create issue", "readFile", "ticket", "commit json", "delete user 42")
    times = []
    for i in range(max(n, 1)):
        query = queries[i % len(queries)]
        start = time.perf_counter()
        catalog.search(query)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
