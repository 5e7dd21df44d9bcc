from __future__ import annotations

import re

import jsonschema
import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import Tool

from supervisor.errors import ToolNameConflict, UnknownServer, UnknownTool
from supervisor.events._catalog import (
    ToolsConflict,
    ToolsDeregistered,
    ToolsRegistered,
    ToolsUpdated,
)
from supervisor.registry import Catalog, Conflict, NamingPolicy, Provenance, merge
from supervisor.registry._bench import (
    _sample_tools,
    listing_ms_32k,
    registry_merge_ms_32k,
    search_ms_32k,
)
from supervisor.registry._merge import Listing, diff

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def tool(name: object, description: str | None = "", schema: object = None) -> Tool:
    return Tool.model_construct(
        name=name, description=description, input_schema=SCHEMA if schema is None else schema
    )


def count_encodes(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record every canonical encoding done for a fingerprint from now on."""
    import supervisor.registry._catalog as registry

    real = registry._ENCODER
    seen: list[object] = []

    class Counting:
        def encode(self, value: object) -> bytes:
            seen.append(value)
            return real.encode(value)

    monkeypatch.setattr(registry, "_ENCODER", Counting())
    return seen


def two_searches(prefix_a: str = "web", prefix_b: str = "docs") -> list:
    return [
        ("web", prefix_a, [tool("search", "Search the web")]),
        ("docs", prefix_b, [tool("search", "Search the docs")]),
    ]


def test_a_catalog_looks_names_up_as_any_mapping_does() -> None:
    """``get`` and ``in``, the catalog's own (a call looks its tool up several times),
    answer as ``Mapping``'s do through ``[]``."""
    catalog = merge(two_searches())
    entry = catalog["web_search"]
    assert catalog.get("web_search") is entry and catalog.get("web_search", None) is entry
    assert catalog.get("nope") is None and catalog.get("nope", entry) is entry
    assert "docs_search" in catalog and "nope" not in catalog and 3 not in catalog
    assert dict(catalog.items()) == {name: catalog[name] for name in catalog}


class TestNames:
    def test_distinct_prefixes_do_not_clash(self) -> None:
        """With the default template, distinct prefixes keep both `search` tools apart."""
        catalog = merge(two_searches())
        assert list(catalog) == ["web_search", "docs_search"]
        assert catalog.conflicts == ()
        entry = catalog["docs_search"]
        assert (entry.server, entry.original_name, entry.source) == ("docs", "search", "mcp")

    def test_empty_prefixes_clash_and_later_server_gets_suffix(self) -> None:
        """With empty prefixes the later server gets `search_2` and a conflict names both."""
        catalog = merge(two_searches("", ""))
        assert catalog["search"].server == "web"
        assert catalog["search_2"].server == "docs"
        assert catalog.conflicts == (Conflict("search", ("web", "docs")),)
        event = catalog.conflicts[0].event()
        assert isinstance(event, ToolsConflict)
        assert (event.name, event.servers) == ("search", ["web", "docs"])

    def test_suffixes_count_up(self) -> None:
        """A third clashing server gets `_3`."""
        servers = [*two_searches("", ""), ("code", "", [tool("search")])]
        catalog = merge(servers)
        assert catalog["search_3"].server == "code"
        assert catalog.conflicts == (Conflict("search", ("web", "docs", "code")),)

    def test_hash_policy_gives_stable_short_suffix(self) -> None:
        """The `hash` policy suffixes a stable hash of server and original name."""
        policy = NamingPolicy(clash="hash")
        first = merge(two_searches("", ""), policy)
        again = merge(two_searches("", ""), policy)
        (other,) = [n for n in first if n != "search"]
        assert re.fullmatch(r"search_[0-9a-f]{6}", other)
        assert list(first) == list(again)
        assert first.conflicts[0].servers == ("web", "docs")

    def test_error_policy_raises(self) -> None:
        """The `error` policy refuses a clash, naming both servers."""
        with pytest.raises(ToolNameConflict) as info:
            merge(two_searches("", ""), NamingPolicy(clash="error"))
        assert info.value.name == "search"
        assert info.value.servers == ["web", "docs"]

    def test_error_policy_refuses_the_later_tool_when_asked(self) -> None:
        """With ``refuse`` (a running supervisor), the later tool is left out instead."""
        kb = [tool("search"), tool("lookup"), tool("find")]
        servers = [*two_searches("", ""), ("kb", "", kb), ("x", "", [tool("kb_find")])]
        policy = NamingPolicy(clash="error")
        catalog = merge(servers, policy, {"lookup", "find"}, refuse=True)
        # a built-in's name: the MCP tool keeps its prefixed name (a warning), unless that
        # is taken too
        assert list(catalog) == ["search", "kb_lookup", "kb_find"]
        assert catalog["search"].server == "web" and catalog.by_server["docs"] == ()
        assert [(c.name, c.servers, c.builtin, c.refused) for c in catalog.conflicts] == [
            ("lookup", ("kb",), True, False),
            ("find", ("kb",), True, False),
            ("search", ("web", "docs", "kb"), False, True),
            ("kb_find", ("kb", "x"), False, True),
        ]
        catalog = merge([("kb", "", kb)], policy, {"lookup", "find", "kb_find"}, refuse=True)
        assert list(catalog) == ["search", "kb_lookup"]
        assert [(c.name, c.builtin, c.refused) for c in catalog.conflicts] == [
            ("lookup", True, False),
            ("find", True, True),
        ]
        event = catalog.conflicts[1].event()
        assert (event.servers, event.builtin, event.refused) == (["<built-in>", "kb"], True, True)

    def test_mcp_style_template(self) -> None:
        """The `mcp__{server}__{tool}` template uses the server name, keeping double underscores."""
        catalog = merge(two_searches("", ""), NamingPolicy(template="mcp__{server}__{tool}"))
        assert list(catalog) == ["mcp__web__search", "mcp__docs__search"]

    def test_odd_names_are_normalised_readably(self) -> None:
        """Dots in a tool's name and odd characters in a prefix become readable valid names;
        a tool name outside MCP's characters is skipped as unsupported, saying why."""
        tools = [tool("read file"), tool("fs.read"), tool("café-menü"), tool("检索"), tool("a-b")]
        catalog = merge([("my server", "my.srv", tools)])
        assert list(catalog) == ["my_srv_fs_read", "my_srv_a-b"]
        assert catalog.unsupported["my server"] == 3
        first = catalog.invalid["my server"][0]
        assert first.startswith("tool 'read file': its name has characters MCP does not allow")
        assert "(' ')" in first

    def test_long_names_stay_valid_readable_and_distinct(self) -> None:
        """Two 100-character names differing only at the end stay distinct and ≤ 64 chars."""
        a, b = "x" * 99 + "a", "x" * 99 + "b"
        catalog = merge([("s", "s", [tool(a), tool(b)])])
        names = list(catalog)
        assert len(set(names)) == 2
        assert all(NAME.match(n) and n.startswith("s_xxxx") for n in names)
        assert catalog.conflicts == ()

    def test_builtin_clash_keeps_prefixed_name(self) -> None:
        """A tool wanting a built-in's name gets the server-prefixed form and a warning conflict."""
        catalog = merge(two_searches("", "docs"), builtins=frozenset({"search"}))
        assert "search" not in catalog
        assert catalog["web_search"].server == "web"
        assert Conflict("search", ("web",), builtin=True) in catalog.conflicts

    def test_builtin_conflict_event_names_the_builtin_first(self) -> None:
        """A built-in clash's event is marked builtin and lists "<built-in>" first."""
        catalog = merge(two_searches("", "docs"), builtins=frozenset({"search"}))
        (conflict,) = catalog.conflicts
        event = conflict.event()
        assert (event.name, event.servers, event.builtin) == ("search", ["<built-in>", "web"], True)
        assert merge(two_searches("", "")).conflicts[0].event().builtin is False

    def test_builtin_clash_with_prefix_uses_suffix(self) -> None:
        """A prefixed name equal to a built-in falls back to the clash policy."""
        catalog = merge(two_searches(), builtins={"web_search"})
        assert catalog["web_search_2"].server == "web"
        assert catalog.conflicts == (Conflict("web_search", ("web",), builtin=True),)


class TestMerge:
    def test_invalid_tools_are_counted_not_fatal(self) -> None:
        """Bad names, bad schemas and duplicates are skipped; the other tools remain."""
        tools = [
            tool("ok"),
            tool(""),
            tool(42),
            tool("noschema", schema=["not", "a", "dict"]),
            tool("array", schema={"type": "array"}),
            tool("ok"),
            tool("fine"),
        ]
        catalog = merge([("s", "s", tools), ("t", "t", [tool("x")])])
        assert list(catalog) == ["s_ok", "s_fine", "t_x"]
        assert dict(catalog.unsupported) == {"s": 5, "t": 0}
        assert [e.name for e in catalog.by_server["s"]] == ["s_ok", "s_fine"]

    def test_a_private_narrowing_keeps_nothing_of_the_other_servers(self) -> None:
        """``only(..., private=True)`` (a team gateway's caller) drops the other servers'
        skipped tools and the conflicts naming them; a plain ``only`` keeps them."""
        servers = [*two_searches("", ""), ("s", "s", [tool("ok"), tool("")])]
        catalog = merge(servers)
        assert catalog.conflicts and catalog.invalid["s"]
        plain = catalog.only(["web"])
        assert plain.conflicts == catalog.conflicts and "s" in plain.invalid
        private = catalog.only(["web"], private=True)
        assert list(private) == ["search"]
        assert private.conflicts == () and dict(private.invalid) == {}
        assert dict(private.unsupported) == {"web": 0}
        both = catalog.only(["web", "docs"], private=True)
        assert both.conflicts == catalog.conflicts

    @pytest.mark.parametrize(
        ("schema", "why"),
        [
            ({"type": "object", "properties": {"x": {"type": "nonsense"}}}, "Invalid enum"),
            ({"type": "object", "properties": {"x": {"type": "string", "minLength": -1}}},
             ">= 0"),
            ({"type": "object", "required": "x"}, "required"),
            ({"type": "object", "properties": {"x": 3}}, "properties"),
            ({"type": "object", "properties": {"x": {"anyOf": [{"type": "nope"}]}}}, "anyOf"),
            ({"type": "object", "properties": {"x": {"items": {"minimum": "1"}}}}, "minimum"),
            ({"type": "object", "description": 42}, "description"),
            ({"properties": {}}, '"type": "object"'),
        ],
        ids=["bad-type", "negative-bound", "required-str", "property-int", "nested-anyof",
             "items-minimum-str", "description-int", "no-type"],
    )
    def test_schemas_that_are_not_json_schema_are_skipped(self, schema: dict, why: str) -> None:
        """An input schema that is not valid JSON Schema skips its tool, with a reason."""
        catalog = merge([("s", "s", [tool("bad", schema=schema), tool("ok")])])
        assert list(catalog) == ["s_ok"]
        assert catalog.unsupported["s"] == 1
        (reason,) = catalog.invalid["s"]
        assert reason.startswith("tool 'bad': its inputSchema") and why in reason
        with pytest.raises(jsonschema.SchemaError):  # the full check agrees
            if schema.get("type") == "object":
                jsonschema.Draft202012Validator.check_schema(schema)
            else:
                raise jsonschema.SchemaError("not an object schema")

    def test_rich_valid_schemas_are_kept(self) -> None:
        """References, combinators, boolean schemas and unknown keywords pass."""
        schema = {
            "type": "object",
            "$defs": {"id": {"type": ["string", "integer"], "minLength": 1}},
            "properties": {
                "a": True,
                "b": {"anyOf": [{"$ref": "#/$defs/id"}, {"type": "null"}]},
                "c": {"type": "array", "items": {"enum": [1, "x", None]}, "maxItems": 3},
                "d": {"not": {"const": 0}, "x-vendor": {"anything": ["goes"]}},
            },
            "additionalProperties": False,
            "required": ["a"],
        }
        jsonschema.Draft202012Validator.check_schema(schema)
        assert list(merge([("s", "s", [tool("ok", schema=schema)])])) == ["s_ok"]

    def test_only_2020_12_and_draft_07_are_supported(self) -> None:
        """A schema declaring draft-07 is checked like any other; one declaring an older
        dialect (draft-04, draft-03) is skipped as unsupported, naming its dialect."""
        draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                  "properties": {"pair": {"type": "array", "items": [{"type": "string"}]}}}
        draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                  "properties": {"n": {"type": "number", "minimum": 0,
                                       "exclusiveMinimum": True}}}
        draft3 = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object",
                  "properties": {"n": {"type": "any", "required": True}}}
        bad7 = {"$schema": "http://json-schema.org/draft-07/schema", "type": "object",
                "properties": {"n": {"type": "nonsense"}}}
        catalog = merge([("s", "s", [tool("seven", schema=draft7), tool("four", schema=draft4),
                                     tool("three", schema=draft3), tool("bad", schema=bad7)])])
        assert list(catalog) == ["s_seven"]
        four, three, bad = catalog.invalid["s"]
        assert four == (
            "tool 'four': its inputSchema declares the JSON Schema dialect "
            "'http://json-schema.org/draft-04/schema#'; only 2020-12 and draft-07 are supported"
        )
        assert "draft-03" in three
        assert bad.startswith("tool 'bad': its inputSchema is not a valid")

    def test_a_listing_is_checked_once_and_merges_like_its_tools(self) -> None:
        """A Listing is the listed sequence (invalid tools included) with its problems;
        merging it gives what merging the plain list gives."""
        tools = [tool("a"), tool(""), tool("a"), tool("b")]
        listing = Listing(tools)
        assert len(listing) == 4 and listing[1].name == "" and list(listing) == tools
        assert listing[1:3] == (tools[1], tools[2])
        assert listing.problems == (
            "tool '': its name is empty",
            "tool 'a': the server already listed a tool of that name",
        )
        from_listing = merge([("s", "s", listing)])
        from_list = merge([("s", "s", tools)])
        assert list(from_listing) == list(from_list) == ["s_a", "s_b"]
        assert from_listing.invalid == from_list.invalid == {"s": listing.problems}
        assert from_listing["s_a"].tool is tools[0]

    def test_fingerprint_is_computed_when_read_never_by_a_merge(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A merge encodes nothing for fingerprints; reading one does, the same each time."""
        encoded = count_encodes(monkeypatch)
        entry = merge([("s", "s", [tool("t", "d")])])["s_t"]
        assert encoded == []
        first = entry.fingerprint
        assert re.fullmatch(r"[0-9a-f]{16}", first) and entry.fingerprint == first
        assert len(encoded) == 2

    def test_fingerprint_tracks_definition(self) -> None:
        """The fingerprint changes with the description and is independent of key order."""
        a = merge([("s", "s", [tool("t", "d", {"type": "object", "properties": {}})])])
        b = merge([("s", "s", [tool("t", "d", {"properties": {}, "type": "object"})])])
        c = merge([("s", "s", [tool("t", "other", {"type": "object", "properties": {}})])])
        assert a["s_t"].fingerprint == b["s_t"].fingerprint != c["s_t"].fingerprint

    def test_resolve_unknown_names_close_match(self) -> None:
        """Resolving a typo raises UnknownTool suggesting the close name."""
        with pytest.raises(UnknownTool, match="web_search"):
            merge(two_searches()).resolve("web_serch")


class TestDescriptionsAndProvenance:
    @pytest.mark.parametrize(
        "description",
        [None, "", "   ", "\n\t"],
        ids=["null", "empty", "spaces", "whitespace"],
    )
    def test_a_tool_without_a_description_gets_the_specs_default(
        self, description: str | None
    ) -> None:
        """A missing, null, empty or blank description becomes "Tool '{name}' from MCP
        server '{serverId}'", with the tool's own name and the server's name."""
        catalog = merge([("web-srv", "w", [tool("fetch.page", description)])])
        (entry,) = catalog.values()
        assert entry.name == "w_fetch_page"
        assert entry.description == "Tool 'fetch.page' from MCP server 'web-srv'"
        assert catalog.list()[0].description == entry.description
        assert catalog.unsupported["web-srv"] == 0

    def test_a_tool_missing_the_description_field_gets_the_default(self) -> None:
        """A tool listed with no description key at all gets the default too."""
        listed = Tool.model_validate({"name": "ping", "inputSchema": {"type": "object"}})
        assert "description" not in listed.model_dump(exclude_unset=True)
        (entry,) = merge([("s", "s", [listed])]).values()
        assert entry.description == "Tool 'ping' from MCP server 's'"

    def test_an_own_description_is_kept_as_listed(self) -> None:
        """A description with text is the tool's own, surrounding whitespace included."""
        (entry,) = merge([("s", "s", [tool("t", "  Does things.\n")])]).values()
        assert entry.description == "  Does things.\n"

    def test_search_does_not_match_the_default_text(self) -> None:
        """Words only the default description has ("tool", "server", the server's name)
        match nothing; the same words in an own description do, and names still match."""
        catalog = merge(
            [
                ("alpha", "a", [tool("ping"), tool("pong", "Ping the alpha server.")]),
                ("beta", "b", [tool("tool_list")]),
            ]
        )
        assert catalog["a_ping"].description == "Tool 'ping' from MCP server 'alpha'"
        assert [s.name for s in catalog.search("alpha server")] == ["a_pong"]
        assert [s.name for s in catalog.search("mcp")] == []
        assert [s.name for s in catalog.search("tool")] == ["b_tool_list"]
        assert [s.name for s in catalog.search("ping")] == ["a_ping", "a_pong"]

    def test_every_entry_has_its_provenance(self) -> None:
        """Provenance is {name, source "mcp", serverId, originalName}: the merged name,
        the server's configured name and the tool's own name, also after a clash."""
        catalog = merge(two_searches(prefix_a="", prefix_b=""))
        assert [e.provenance for e in catalog.values()] == [
            Provenance(name="search", source="mcp", server_id="web", original_name="search"),
            Provenance(name="search_2", source="mcp", server_id="docs", original_name="search"),
        ]
        assert msgspec.to_builtins(catalog["search_2"].provenance) == {
            "name": "search_2",
            "source": "mcp",
            "serverId": "docs",
            "originalName": "search",
        }
        with pytest.raises(AttributeError):
            catalog["search"].provenance.name = "other"  # type: ignore[misc]


class TestDiff:
    def test_registered_deregistered_updated(self) -> None:
        """Diff reports added, removed and changed tools per server, and builds events."""
        old = merge([("s", "s", [tool("a"), tool("b", "old")]), ("t", "t", [tool("x")])])
        new = merge([("s", "s", [tool("b", "new"), tool("c")]), ("t", "t", [tool("x")])])
        changes = diff(old, new)
        registered, deregistered, updated = changes
        assert registered == {"s": ["s_c"]}
        assert deregistered == {"s": ["s_a"]}
        assert updated == {"s": ["s_b"]}
        kinds = [(type(e), e.names) for e in changes.events()]
        assert kinds == [
            (ToolsDeregistered, ["s_a"]),
            (ToolsRegistered, ["s_c"]),
            (ToolsUpdated, ["s_b"]),
        ]

    def test_same_tool_objects_are_not_hashed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Entries of the very same listed Tool are the same definition: no fingerprint is
        computed. Tools listed anew are compared by fingerprint."""
        tools = [tool("a", "x"), tool("b", "y")]
        old = merge([("s", "s", tools)])
        new = merge([("s", "s", list(tools))])
        encoded = count_encodes(monkeypatch)
        assert diff(old, new) == ({}, {}, {})
        assert encoded == []
        relisted = merge([("s", "s", [tool("a", "x"), tool("b", "changed")])])
        assert diff(new, relisted).updated == {"s": ["s_b"]}
        assert len(encoded) == 4  # both tools of the one server, before and after

    def test_server_gone_deregisters_everything(self) -> None:
        """A server missing from the new catalog deregisters all its tools."""
        old = merge([("s", "s", [tool("a"), tool("b")])])
        assert diff(old, merge([])).deregistered == {"s": ["s_a", "s_b"]}


def small_catalog() -> Catalog:
    return merge(
        [
            (
                "gh",
                "gh",
                [
                    tool("search_issues", "Search issues in a repository"),
                    tool("createIssue", "Open a new issue"),
                    tool("get_file", "Read a file from the repository"),
                ],
            ),
            (
                "fs",
                "fs",
                [
                    tool("read_file", "Read a file from disk"),
                    tool("list_dir", "List a directory; shows each file"),
                    tool("search", "Search file contents"),
                ],
            ),
        ]
    )


class TestLazyExposure:
    def test_list_pages_and_filters(self) -> None:
        """List pages through the catalog in order and filters by server."""
        catalog = small_catalog()
        assert [s.name for s in catalog.list(limit=2, offset=2)] == ["gh_get_file", "fs_read_file"]
        assert [s.name for s in catalog.list("fs", limit=1, offset=1)] == ["fs_list_dir"]
        assert catalog.list(offset=10) == []
        with pytest.raises(UnknownServer):
            catalog.list("nope")

    def test_search_ranks_exact_then_name_then_prefix_then_description(self) -> None:
        """Exact name beats name words, which beat prefixes, which beat descriptions."""
        catalog = small_catalog()
        assert [s.name for s in catalog.search("fs_search")][0] == "fs_search"
        assert [s.name for s in catalog.search("read file")] == [
            "fs_read_file",
            "gh_get_file",
            "fs_list_dir",
            "fs_search",
        ]
        assert [s.name for s in catalog.search("issue")] == ["gh_createIssue", "gh_search_issues"]
        assert catalog.search("zebra") == []
        assert [s.name for s in catalog.search("the")] == ["gh_get_file"]

    def test_search_is_deterministic(self) -> None:
        """The same query over equal catalogs gives the same order, ties by name."""
        assert small_catalog().search("file", limit=3) == small_catalog().search("file", limit=3)
        assert [s.name for s in small_catalog().search("search")][:2] == [
            "fs_search",
            "gh_search_issues",
        ]

    def test_load_returns_schemas_and_suggests_close_names(self) -> None:
        """Load returns full entries and, for a typo, names the close match."""
        catalog = small_catalog()
        (entry,) = catalog.load(["fs_read_file"])
        assert entry.input_schema == SCHEMA
        with pytest.raises(UnknownTool, match=r"fs_red_file.*did you mean fs_read_file"):
            catalog.load(["fs_read_file", "fs_red_file"])


_SEARCH_WORDS = ["read", "file", "issue", "create", "get", "fi", "re", "the", "list", "x"]


def _reference_search(catalog: object, query: str, limit: int) -> list[str]:
    """The documented ranking, computed the slow obvious way."""
    from supervisor.registry._catalog import _STOPWORDS, _tokens

    words = list(dict.fromkeys(_tokens(query)))
    words = [w for w in words if w not in _STOPWORDS] or words
    ranked = []
    for entry in catalog.values():  # type: ignore[attr-defined]
        names = set(_tokens(entry.name))
        own = entry.tool.description  # a default description is not searched
        words_of = entry.description.split() if own and own.strip() else []
        described = {t for word in words_of for t in _tokens(word)}
        exact = query.strip().lower() in (entry.name.lower(), entry.original_name.lower())
        named = sum(w in names for w in words)
        prefixed = sum(any(n.startswith(w) and n != w for n in names) for w in words)
        desc = sum(w in described for w in words)
        if exact or named or prefixed or desc:
            ranked.append(((-exact, -named, -prefixed, -desc, entry.name), entry.name))
    return [name for _, name in sorted(ranked)[:limit]]


@settings(max_examples=150, deadline=None)
@given(
    tools=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_SEARCH_WORDS), min_size=1, max_size=3),
            st.lists(st.sampled_from(_SEARCH_WORDS + ["a", "of"]), max_size=4),
        ),
        min_size=1,
        max_size=12,
    ),
    query=st.lists(st.sampled_from(_SEARCH_WORDS + ["s0_read", "a"]), min_size=1, max_size=3),
    limit=st.integers(1, 6),
)
def test_search_ranks_as_documented(
    tools: list[tuple[list[str], list[str]]], query: list[str], limit: int
) -> None:
    """For any small catalog and query, search gives the documented ranking, in order."""
    listed = [
        tool("_".join(words) + f"_{i}", " ".join(desc)) for i, (words, desc) in enumerate(tools)
    ]
    catalog = merge([("s0", "s0", listed)])
    text = " ".join(query)
    got = [s.name for s in catalog.search(text, limit)]
    assert got == _reference_search(catalog, text, limit)


class TestAtScale:
    def test_merge_and_search_32k(self) -> None:
        """32 × 1000 tools merge, all valid, and can be searched (how fast is for
        ``mcp-supervisor bench``: registry_merge_ms_32k, search_ms_32k)."""
        catalog = merge(_sample_tools())
        assert len(catalog) == 32_000
        assert all(n == 0 for n in catalog.unsupported.values())
        assert catalog.search("create issue")

    def test_bench_helpers_return_milliseconds(self) -> None:
        """The bench helpers return positive medians."""
        assert trio.run(registry_merge_ms_32k, 1) > 0
        assert trio.run(listing_ms_32k, 1) > 0
        assert trio.run(search_ms_32k, 3) > 0


# -- the shape check never refuses what the full metaschema check accepts ----------------

_TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
    st.integers(2**63, 2**70), st.sampled_from(["string", "nonsense", "#/$defs/a", ""]),
    st.lists(st.sampled_from(["string", "nope", 1]), max_size=2),
)


def _schemas() -> st.SearchStrategy[object]:
    """Schemas whose keywords mostly have the right type (a quarter of them do not)."""

    def extend(sub: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
        names = st.sampled_from(["a", "b"])
        subs = st.lists(sub, min_size=1, max_size=2)
        number = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False))
        count = st.integers(0, 5)
        good: dict[str, st.SearchStrategy[object]] = {
            "type": st.one_of(st.sampled_from(_TYPES),
                              st.lists(st.sampled_from(_TYPES), min_size=1, max_size=2,
                                       unique=True)),
            "properties": st.dictionaries(names, sub, max_size=2),
            "items": sub,
            "additionalProperties": sub,
            "required": st.lists(names, unique=True, max_size=2),
            "enum": st.lists(_ANY, min_size=1, max_size=2),
            "anyOf": subs, "oneOf": subs, "allOf": subs, "not": sub,
            "$ref": st.just("#/$defs/a"),
            "$defs": st.dictionaries(names, sub, max_size=1),
            "definitions": st.dictionaries(names, sub, max_size=1),
            "minimum": number, "maximum": number,
            "minLength": count, "maxLength": count, "minItems": count, "maxItems": count,
            "title": st.text(max_size=3), "description": st.text(max_size=3),
            "pattern": st.just("^a"), "x-extra": _ANY,
        }
        entry = st.sampled_from(sorted(good)).flatmap(
            lambda k: st.tuples(st.just(k), st.one_of(good[k], good[k], good[k], _ANY))
        )
        return st.lists(entry, max_size=4).map(dict)

    return st.recursive(st.one_of(st.booleans(), st.just({})), extend, max_leaves=10)


@settings(max_examples=500, deadline=None)
@given(_schemas())
def test_no_schema_jsonschema_accepts_is_refused(inner: object) -> None:
    """Whatever the shape check refuses, jsonschema's Draft 2020-12 check refuses too (a
    $ref outside the schema, valid but unsupported, aside)."""
    schema = {"type": "object", "properties": {"p": inner}}
    catalog = merge([("s", "s", [tool("t", schema=schema)])])
    refused = not list(catalog)
    if refused and "outside the schema" not in catalog.invalid["s"][0]:
        with pytest.raises(jsonschema.SchemaError):
            jsonschema.Draft202012Validator.check_schema(schema)
