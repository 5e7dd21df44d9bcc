"""The merged catalog: entries with provenance, conflicts, diffs, and lazy exposure
(list, search, load)."""

from __future__ import annotations

import bisect
import difflib
import hashlib
import heapq
import itertools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple, TypeVar, overload

import attrs
import msgspec
from mcp_types import Tool

from ..errors import UnknownServer, UnknownTool
from ..events._catalog import ToolsConflict, ToolsDeregistered, ToolsRegistered, ToolsUpdated

_T = TypeVar("_T")

# camelCase / PascalCase / ACRONYMWord / digits, after splitting on non-alphanumerics
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from in is it of on or that the this to with".split()
)
_ENCODER = msgspec.json.Encoder(order="sorted")

#: How a built-in tool is named among the servers of a conflict (and its event).
BUILTIN = "<built-in>"


def default_description(name: str, server: str) -> str:
    """The description given to a tool ``name`` of ``server`` that was listed without one
    (missing, null, empty or only whitespace): ``Tool '{name}' from MCP server
    '{server}'``, the remote-server specification's words. ``name`` is the tool's own name
    as the server listed it."""
    return f"Tool '{name}' from MCP server '{server}'"


class Provenance(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where a catalog entry comes from.

    ``name`` is the merged name, ``source`` is ``"mcp"``, ``server_id`` the configured
    server's name and ``original_name`` the tool's name as that server listed it.
    ``msgspec.to_builtins`` gives the JSON form ``tools --json`` prints:
    ``{"name", "source", "serverId", "originalName"}``.
    """

    name: str
    source: str
    server_id: str
    original_name: str


class Entry(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One tool in the merged catalog, with its provenance.

    ``tool`` is the object the server listed; ``input_schema`` is its own, and so is
    ``description`` unless it listed none (missing, null, empty or only whitespace): then
    it is :func:`default_description`'s ``Tool '{name}' from MCP server '{server}'``.
    ``fingerprint`` is a stable hash (16 hex digits) of the server, original name,
    description and input schema in canonical JSON: it changes exactly when the definition
    the model sees changes. It and ``provenance`` (:class:`Provenance`) are computed when
    read (about a microsecond), never by a merge, and not stored: entries stay small,
    immutable and untracked by the cycle collector, so merging 32k of them stays cheap.
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
        blob = _ENCODER.encode(
            (self.server, self.original_name, self.description, self.input_schema)
        )
        return hashlib.blake2b(blob, digest_size=8).hexdigest()

    @property
    def provenance(self) -> Provenance:
        """Where this entry comes from: merged name, source, server and original name."""
        return Provenance(
            name=self.name,
            source=self.source,
            server_id=self.server,
            original_name=self.original_name,
        )


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
    :func:`~supervisor.registry.merge`'s ``refuse``).
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


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


# --- the catalog ----------------------------------------------------------------------


class Catalog(Mapping[str, Entry]):
    """An immutable merged catalog: a mapping from merged name to :class:`Entry`.

    Iteration follows config order, then each server's listing order. Build one with
    :func:`~supervisor.registry.merge`. ``by_server`` maps every merged server (including
    one whose tools were all invalid) to its entries; ``unsupported`` counts the tools
    skipped per server and ``invalid`` says why, one line per skipped tool (servers with
    none are left out); ``conflicts`` lists the clashes settled while naming.
    """

    by_server: Mapping[str, tuple[Entry, ...]]
    unsupported: Mapping[str, int]
    invalid: Mapping[str, tuple[str, ...]]
    conflicts: tuple[Conflict, ...]

    def __init__(
        self,
        entries: dict[str, Entry],
        by_server: dict[str, tuple[Entry, ...]],
        unsupported: dict[str, int],
        conflicts: Sequence[Conflict],
        invalid: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._entries = entries
        self.by_server = MappingProxyType(by_server)
        self.unsupported = MappingProxyType(unsupported)
        self.invalid = MappingProxyType(invalid or {})
        self.conflicts = tuple(conflicts)
        self._index_cache: _SearchIndex | None = None

    def only(
        self,
        servers: Collection[str],
        where: Callable[[Entry], bool] | None = None,
        *,
        private: bool = False,
    ) -> Catalog:
        """The same names, keeping only the entries of ``servers`` (say, those up now)
        and, with ``where``, only those it accepts (say, the names a gateway serves).
        ``private``: nothing of other servers is kept either — their skipped tools, and
        the conflicts that name one (for a caller who may not know of them)."""
        if where is None:
            entries = {n: e for n, e in self._entries.items() if e.server in servers}
            by_server = {s: es for s, es in self.by_server.items() if s in servers}
        else:
            entries = {n: e for n, e in self._entries.items() if e.server in servers and where(e)}
            by_server = {
                s: tuple(e for e in es if where(e))
                for s, es in self.by_server.items()
                if s in servers
            }
        if private:
            return Catalog(
                entries,
                by_server,
                {s: n for s, n in self.unsupported.items() if s in servers},
                [c for c in self.conflicts if set(c.servers) <= set(servers)],
                {s: why for s, why in self.invalid.items() if s in servers},
            )
        return Catalog(
            entries,
            by_server,
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

    # the dict's own, not Mapping's (a lookup through __getitem__ and a KeyError): a
    # call looks its tool up several times on its way
    @overload
    def get(self, key: str, /) -> Entry | None: ...
    @overload
    def get(self, key: str, /, default: Entry | _T) -> Entry | _T: ...
    def get(self, key: str, /, default: object = None) -> object:
        return self._entries.get(key, default)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

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
            raise self.unknown([name]) from None

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
        Entries matching nothing are left out. A description given by default (the tool
        listed none, see :class:`Entry`) is not searched: its words — "tool", "server",
        the server's name — would match every such tool alike, and say nothing its name
        and server do not.
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
            raise self.unknown(missing)
        return [self._entries[n] for n in names]

    def unknown(self, names: Sequence[str]) -> UnknownTool:
        """The error for ``names`` not in the catalog, naming close matches."""
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
    """Token postings over names and descriptions, built once per catalog.

    A search ranks candidates by one integer each (the tuple of the ranking rules packed
    into an int, ties broken by the entry's position in name order), tier by tier of name
    hits, so a query that matches thousands of names by one word does not pay a Python
    comparison per candidate.
    """

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
            own = entry.tool.description  # None or blank: the description is a default
            words = set(entry.description.split()) if own and not own.isspace() else ()
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
        # by_name[r] is the entry r-th in name order; rank[i] is entry i's place in it.
        self.by_name = sorted(range(len(entries)), key=lambda i: entries[i].name)
        self.rank = [0] * len(entries)
        for r, i in enumerate(self.by_name):
            self.rank[i] = r

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
        best: list[int] = [] if exact is None else [exact]

        # Tiers, best first: each count of name hits, then prefix-only matches, then
        # description-only matches. Within a tier: more prefix hits, more description hits,
        # then name order; each packed into one int, smaller is better.
        def tiers() -> Iterator[list[int]]:
            for hits in sorted(set(name_hits.values()), reverse=True):
                yield [i for i, n in name_hits.items() if n == hits]
            yield [i for i in prefix_hits if i not in name_hits]
            yield [i for i in desc_hits if i not in name_hits and i not in prefix_hits]

        base = len(words) + 1
        size = len(self.entries)
        rank, prefix, desc = self.rank, prefix_hits.get, desc_hits.get
        for tier in tiers():
            wanted = limit - len(best)
            if wanted <= 0:
                break
            keys = [
                ((base - prefix(i, 0)) * base + base - desc(i, 0)) * size + rank[i]
                for i in tier
                if i != exact
            ]
            best += [self.by_name[key % size] for key in heapq.nsmallest(wanted, keys)]
        return [self.entries[i] for i in best[:limit]]
