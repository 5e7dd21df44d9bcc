"""Tool conversion (argument validation, result normalisation) and the approval policy."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import attrs
import mcp_types as types
import pytest

from supervisor import tools
from supervisor._util import _previews
from supervisor.errors import (
    ApprovalDenied,
    ApprovalRequired,
    SupervisorError,
    ToolArgumentsInvalid,
    ToolError,
    ToolOutputInvalid,
    ToolSchemaInvalid,
)
from supervisor.tools import ApprovalRequest, _approval, _params, _validate
from supervisor.tools._approval import (
    approval_reason,
    check_approval,
    is_destructive_name,
    needs_approval,
)
from supervisor.tools._results import SpillDirectory, normalize_result
from supervisor.tools._validate import ArgumentValidator, fingerprint, validate_arguments

ISSUE_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "labels": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "meta": {
            "type": "object",
            "properties": {"owner": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        },
    },
    "required": ["title"],
    "additionalProperties": False,
}


def tool(name: str = "github_create_issue", schema: dict | None = None, **kw: object) -> types.Tool:
    return types.Tool(name=name, input_schema=ISSUE_SCHEMA if schema is None else schema, **kw)


def invalid(t: types.Tool, arguments: dict) -> ToolArgumentsInvalid:
    with pytest.raises(ToolArgumentsInvalid) as info:
        ArgumentValidator().validate(t, arguments)
    return info.value


# -- argument validation ----------------------------------------------------------------


class TestValidation:
    def test_valid_arguments_pass(self) -> None:
        """Arguments matching the schema raise nothing."""
        validate_arguments(tool(), {"title": "bug", "labels": [{"name": "p1"}]})

    def test_wrong_type_names_the_field(self) -> None:
        """A wrong type is reported at its field, in the documented message format."""
        error = invalid(tool(), {"title": 42})
        assert error.errors == [("title", "42 is not of type 'string'")]
        assert str(error) == "tool 'github_create_issue': title: 42 is not of type 'string'"
        assert error.tool == "github_create_issue"
        assert isinstance(error, SupervisorError)

    def test_missing_required_is_at_the_root(self) -> None:
        """A missing required property is reported at ``(root)``."""
        error = invalid(tool(), {})
        assert error.errors == [("(root)", "'title' is a required property")]

    def test_nested_object_and_array_index_paths(self) -> None:
        """Errors inside nested objects and arrays get dotted and bracketed paths."""
        error = invalid(
            tool(),
            {"title": "x", "labels": [{"name": "ok"}, {"name": 7}], "meta": {"owner": {"id": "a"}}},
        )
        assert [path for path, _ in error.errors] == ["labels[1].name", "meta.owner.id"]

    def test_several_errors_one_per_line(self) -> None:
        """Several errors make a header line naming the tool, then one line per error."""
        error = invalid(tool(), {"labels": [{}], "extra": 1})
        lines = str(error).splitlines()
        assert lines[0] == "tool 'github_create_issue': 3 invalid arguments"
        assert len(lines) == 4
        assert any(line.strip().startswith("labels[0]: 'name'") for line in lines)

    def test_odd_keys_are_quoted(self) -> None:
        """Property names that are not identifiers are bracketed and quoted."""
        schema = {"type": "object", "properties": {"a b": {"type": "string"}}}
        assert invalid(tool(schema=schema), {"a b": 1}).errors[0][0] == "['a b']"

    def test_default_dialect_is_2020_12(self) -> None:
        """Without ``$schema`` a 2020-12 keyword (``prefixItems``) is enforced."""
        schema = {
            "type": "object",
            "properties": {"pair": {"type": "array", "prefixItems": [{"type": "integer"}]}},
        }
        assert invalid(tool(schema=schema), {"pair": ["x"]}).errors[0][0] == "pair[0]"

    def test_declared_draft_07_is_honoured(self) -> None:
        """A draft-07 ``$schema`` uses draft-07 semantics (array-form ``items``)."""
        schema = {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"pair": {"type": "array", "items": [{"type": "integer"}]}},
        }
        assert invalid(tool(schema=schema), {"pair": ["x"]}).errors[0][0] == "pair[0]"
        # under 2020-12 the same schema is invalid (items must be a schema, not an array)
        with pytest.raises(ToolSchemaInvalid):
            ArgumentValidator().check_schema(
                tool(schema={k: schema[k] for k in schema if k[0] != "$"})
            )

    def test_compiled_once_per_fingerprint(self) -> None:
        """A tool's validator is compiled once however often it is used."""
        validator = ArgumentValidator()
        for _ in range(5):
            validator.validate(tool(), {"title": "x"})
        validator.validate(tool(name="other"), {"title": "x"})
        stats = validator.statistics()
        assert (stats.compilations, stats.hits, stats.size) == (2, 4, 2)

    def test_cache_is_bounded_lru(self) -> None:
        """Beyond ``maxsize`` the least recently used validator is evicted."""
        validator = ArgumentValidator(maxsize=2)
        for name in ("a", "b", "a", "c", "a"):
            validator.validate(tool(name=name), {"title": "x"})
        stats = validator.statistics()
        assert (stats.size, stats.compilations, stats.hits) == (2, 3, 2)
        validator.validate(tool(name="b"), {"title": "x"})  # was evicted
        assert validator.statistics().compilations == 4

    def test_module_function_compiles_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``validate_arguments`` uses the shared cache: one compile for repeated calls."""
        compiled: list[str] = []
        real = _validate._compile
        monkeypatch.setattr(_validate, "_default_validator", ArgumentValidator())
        monkeypatch.setattr(_validate, "_compile", lambda *a: compiled.append(a[0]) or real(*a))
        for _ in range(3):
            validate_arguments(tool(), {"title": "x"})
        assert compiled == ["github_create_issue"]

    def test_invalid_schema(self) -> None:
        """A schema that is not valid raises ``ToolSchemaInvalid`` naming the tool and spot."""
        with pytest.raises(ToolSchemaInvalid) as info:
            validate_arguments(tool(name="bad", schema={"type": "strnig"}), {})
        assert info.value.tool == "bad"
        assert "tool 'bad': its inputSchema is not a valid JSON Schema" in str(info.value)
        assert "type" in str(info.value)

    def test_unresolvable_ref_is_a_schema_error(self) -> None:
        """A ``$ref`` that cannot be resolved is the schema's fault, not the arguments'."""
        schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
        with pytest.raises(ToolSchemaInvalid, match=r"\$ref"):
            validate_arguments(tool(name="refs", schema=schema), {"a": 1})

    def test_fingerprint_is_stable_and_order_independent(self) -> None:
        """Equal name and schema give equal fingerprints whatever the key order."""
        reordered = dict(reversed(list(ISSUE_SCHEMA.items())))
        assert fingerprint(tool()) == fingerprint(tool(schema=reordered))
        assert fingerprint(tool()) == fingerprint(tool(description="ignored"))
        assert len(fingerprint(tool())) == 64

    def test_fingerprint_differs_on_name_or_schema(self) -> None:
        """A different name or schema gives a different fingerprint."""
        other_schema = {**ISSUE_SCHEMA, "required": []}
        prints = {
            fingerprint(tool()),
            fingerprint(tool(name="x")),
            fingerprint(tool(schema=other_schema)),
        }
        assert len(prints) == 3


# -- result normalisation ---------------------------------------------------------------


def text(s: str) -> types.TextContent:
    return types.TextContent(type="text", text=s)


def result(*content: object, **kw: object) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), **kw)


class TestResults:
    def test_text_blocks_joined(self) -> None:
        """Text blocks are joined with newlines, in order."""
        out = normalize_result(result(text("a"), text("b\nc")), tool="t")
        assert (out.text, out.is_error, out.spilled_to) == ("a\nb\nc", False, None)

    def test_image_and_audio_sizes(self) -> None:
        """Images and audio keep data and MIME type, with their decoded size."""
        png, wav = b"\x89PNG" + bytes(97), bytes(1000)
        out = normalize_result(
            result(
                types.ImageContent(
                    type="image", data=base64.b64encode(png).decode(), mime_type="image/png"
                ),
                types.AudioContent(
                    type="audio", data=base64.b64encode(wav).decode(), mime_type="audio/wav"
                ),
            ),
            tool="t",
        )
        assert out.images == (tools.MediaContent(base64.b64encode(png).decode(), "image/png", 101),)
        assert (out.audio[0].mime_type, out.audio[0].size) == ("audio/wav", 1000)
        assert out.text == ""

    def test_embedded_resources_and_links(self) -> None:
        """Embedded text and blob resources and resource links keep URI, MIME type and size."""
        out = normalize_result(
            result(
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="file:///a.txt", mime_type="text/plain", text="héllo"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="file:///b.bin", blob=base64.b64encode(b"12345").decode()
                    ),
                ),
                types.ResourceLink(
                    type="resource_link", name="c", uri="https://x.test/c", mime_type="text/csv"
                ),
            ),
            tool="t",
        )
        a, b, c = out.resources
        assert (a.kind, a.uri, a.mime_type, a.text, a.size) == (
            "embedded",
            "file:///a.txt",
            "text/plain",
            "héllo",
            6,
        )
        assert (b.kind, b.uri, b.text, b.size) == ("embedded", "file:///b.bin", None, 5)
        assert (c.kind, c.uri, c.mime_type, c.name) == ("link", "https://x.test/c", "text/csv", "c")

    def test_structured_content_valid(self) -> None:
        """``structuredContent`` matching the tool's ``outputSchema`` is kept."""
        t = tool(output_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
        out = normalize_result(result(text("{}"), structured_content={"n": 3}), tool=t)
        assert out.structured == {"n": 3}

    def test_structured_content_invalid(self) -> None:
        """``structuredContent`` not matching the ``outputSchema`` raises, naming the path."""
        schema = {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
        }
        with pytest.raises(ToolOutputInvalid) as info:
            normalize_result(
                result(structured_content={"items": [1, "two"]}), tool="t", output_schema=schema
            )
        assert info.value.errors == [("items[1]", "'two' is not of type 'integer'")]
        assert str(info.value).startswith("tool 't': items[1]:")

    def test_structured_content_missing(self) -> None:
        """A tool declaring an ``outputSchema`` must return ``structuredContent``."""
        with pytest.raises(ToolOutputInvalid, match="no structuredContent"):
            normalize_result(result(text("x")), tool="t", output_schema={"type": "object"})

    def test_error_result(self) -> None:
        """``isError`` is kept, skips output validation, and raises ``ToolError`` on request."""
        out = normalize_result(
            result(text("no such repo"), is_error=True), tool="t", output_schema={"type": "object"}
        )
        assert out.is_error
        with pytest.raises(ToolError, match="tool 't' reported an error: no such repo") as info:
            out.raise_for_error(server="github")
        assert (info.value.text, info.value.server) == ("no such repo", "github")
        normalize_result(result(text("fine")), tool="t").raise_for_error()  # no error

    def test_large_text_spills_to_private_file(self, tmp_path: Path) -> None:
        """Large text is written whole to a 0600 file in a 0700 dir; the preview says where."""
        spill = tmp_path / "spill"
        body = "x" * 100 + "y" * 200
        out = normalize_result(
            result(text(body)), tool="github/big", preview_bytes=100, spill_dir=spill
        )
        assert out.spilled_to is not None and out.spilled_to.parent == spill
        assert out.spilled_to.read_text() == body
        assert stat.S_IMODE(os.stat(out.spilled_to).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(spill).st_mode) == 0o700
        preview, note = out.text.split("\n")
        assert preview == "x" * 100
        assert f"the full output is at {out.spilled_to}" in note
        assert "300 bytes" in note

    def test_default_spill_dir_is_per_process_and_private(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """Without ``spill_dir`` one private ``mcp-supervisor-`` temp dir is made and reused
        (and removed at exit)."""
        monkeypatch.setattr(_previews, "_process_spill", None)
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
        first = normalize_result(result(text("a" * 50)), tool="t", preview_bytes=10).spilled_to
        second = normalize_result(result(text("b" * 50)), tool="t", preview_bytes=10).spilled_to
        assert first is not None and second is not None and first != second
        assert first.parent == second.parent and first.parent.parent == tmp_path
        assert first.parent.name.startswith("mcp-supervisor-")
        assert stat.S_IMODE(os.stat(first.parent).st_mode) == 0o700
        process_spill = _previews._process_spill
        assert process_spill is not None and process_spill.path == first.parent
        process_spill.close()  # what the atexit hook does
        assert not first.parent.exists()

    def test_a_session_spill_directory_is_lazy_and_removed_on_close(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """A default ``SpillDirectory`` is made on the first spill and removed by close()."""
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
        with SpillDirectory() as spill:
            assert not spill.named and spill.path is None
            small = normalize_result(result(text("tiny")), tool="t", spill_dir=spill)
            assert small.spilled_to is None and list(tmp_path.iterdir()) == []  # not made
            out = normalize_result(
                result(text("a" * 50)), tool="t", preview_bytes=10, spill_dir=spill
            )
            assert out.spilled_to is not None and out.spilled_to.parent == spill.path
            assert spill.path.parent == tmp_path and os.fspath(spill) == str(spill.path)
            assert stat.S_IMODE(os.stat(spill.path).st_mode) == 0o700
        assert spill.path is None and list(tmp_path.iterdir()) == []
        with pytest.raises(RuntimeError, match="closed"):
            normalize_result(result(text("a" * 50)), tool="t", preview_bytes=10, spill_dir=spill)

    def test_a_named_spill_directory_is_never_removed(self, tmp_path: Path) -> None:
        """``SpillDirectory(path)`` creates the directory if need be and keeps it."""
        named = tmp_path / "kept" / "spill"
        with SpillDirectory(named) as spill:
            assert spill.named and spill.path == named and not named.exists()
            out = normalize_result(
                result(text("a" * 50)), tool="t", preview_bytes=10, spill_dir=spill
            )
            assert out.spilled_to is not None and out.spilled_to.parent == named
        assert out.spilled_to.read_text() == "a" * 50

    def test_a_spill_directory_keeps_its_newest_files_within_its_bounds(
        self, tmp_path: Path
    ) -> None:
        """Of the files it spilled, a ``SpillDirectory`` keeps at most ``max_files``, and
        at most ``max_bytes`` together, removing the oldest first (never the newest);
        files it did not write are left alone."""
        stranger = tmp_path / "theirs.txt"
        stranger.write_text("not ours")
        with SpillDirectory(tmp_path, max_files=3, max_bytes=250) as spill:
            paths = [
                normalize_result(
                    result(text(str(i) * 100)), tool="t", preview_bytes=10, spill_dir=spill
                ).spilled_to
                for i in range(5)
            ]
            assert [p.exists() for p in paths] == [False, False, False, True, True]  # 250 B
            assert spill.files == paths[3:]
            big = normalize_result(
                result(text("x" * 400)), tool="t", preview_bytes=10, spill_dir=spill
            )
            assert spill.files == [big.spilled_to] and big.spilled_to.exists()
        assert stranger.read_text() == "not ours"

    def test_spill_false_keeps_everything_in_memory(self, tmp_path: Path) -> None:
        """``spill=False``: the whole text, every image inline, the whole structured
        content — and no file written."""
        image = types.ImageContent(
            type="image", data=base64.b64encode(b"p" * 10).decode(), mime_type="image/png"
        )
        raw = types.CallToolResult(
            content=[text("a" * 50_000), *[image] * 6], structured_content={"k": "v" * 20_000}
        )
        with SpillDirectory(tmp_path / "spill") as spill:
            out = normalize_result(raw, tool="t", spill_dir=spill, spill=False)
        assert out.text == "a" * 50_000 and out.spilled_to is None and len(out.images) == 6
        assert out.structured_preview == json.dumps({"k": "v" * 20_000}, separators=(",", ":"))
        assert not (tmp_path / "spill").exists()

    def test_preview_cut_at_utf8_boundary(self, tmp_path: Path) -> None:
        """The preview never splits a multi-byte character."""
        body = "é" * 10 + "€" * 10  # 2-byte then 3-byte characters
        for limit in range(1, 45):
            out = normalize_result(
                result(text(body)), tool="t", preview_bytes=limit, spill_dir=tmp_path
            )
            preview = out.text.split("\n")[0] if out.spilled_to else out.text
            assert body.startswith(preview)
            assert limit - 2 <= len(preview.encode()) <= limit
        assert out.spilled_to is not None and out.spilled_to.read_text() == body  # 50 > 44
        out = normalize_result(result(text(body)), tool="t", preview_bytes=22, spill_dir=tmp_path)
        assert out.text.split("\n")[0] == "é" * 10  # 20 bytes: the euro sign would not fit

    def test_text_at_the_limit_is_not_spilled(self, tmp_path: Path) -> None:
        """Text of exactly ``preview_bytes`` stays inline."""
        out = normalize_result(
            result(text("€" * 4)), tool="t", preview_bytes=12, spill_dir=tmp_path
        )
        assert (out.text, out.spilled_to) == ("€" * 4, None)
        assert list(tmp_path.iterdir()) == []


# -- approval ---------------------------------------------------------------------------


@attrs.frozen
class Policy:
    approve: bool | tuple[str, ...] | None = None
    auto_approve: bool | tuple[str, ...] | None = None


def annotated(name: str, **hints: bool) -> types.Tool:
    return types.Tool(
        name=f"srv_{name}",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(**hints),
    )


class TestApprovalPolicy:
    def test_default_asks(self) -> None:
        """With no policy every tool needs approval."""
        assert approval_reason(Policy(), tool(name="srv_search"), "search") == "not auto-approved"

    @pytest.mark.parametrize(
        ("auto", "name", "expected"),
        [
            (("search",), "search", False),
            (("get_*",), "get_issue", False),
            (("get_*",), "list_issues", True),
            (("srv_*",), "anything", False),  # merged names match too
            (True, "anything", False),
            (False, "anything", True),
            (("Search",), "search", True),  # globs are case-sensitive
        ],
    )
    def test_auto_approve_globs(
        self, auto: bool | tuple[str, ...], name: str, expected: bool
    ) -> None:
        """``autoApprove`` names and globs skip approval for matching tools only."""
        t = types.Tool(name=f"srv_{name}", input_schema={"type": "object"})
        assert needs_approval(Policy(auto_approve=auto), t, name) is expected

    def test_approve_list_wins_over_auto_approve(self) -> None:
        """A tool listed in ``approve`` asks even if ``autoApprove`` matches it."""
        policy = Policy(approve=("write_*",), auto_approve=True)
        assert (
            approval_reason(policy, tool(name="srv_write_file"), "write_file")
            == "listed in approve"
        )
        assert approval_reason(policy, tool(name="srv_read_file"), "read_file") is None

    def test_approve_false_means_no_approval(self) -> None:
        """``approve: false`` turns the default ask off, but not for destructive tools."""
        policy = Policy(approve=False)
        assert not needs_approval(policy, tool(name="srv_search"), "search")
        assert needs_approval(policy, tool(name="srv_delete_repo"), "delete_repo")

    @pytest.mark.parametrize(
        "name",
        ["delete_file", "deleteFile", "HTTPDelete", "files.remove", "drop-table", "DestroyVM",
         "deploy", "purge_cache", "truncateLog", "kill_process", "rm", "repo_deletes", "WIPE"],
    )  # fmt: skip
    def test_destructive_names_always_ask(self, name: str) -> None:
        """Destructive words in a name ask even when every tool is auto-approved."""
        t = types.Tool(name=f"srv_{name}", input_schema={"type": "object"})
        assert is_destructive_name(name)
        assert (
            approval_reason(Policy(auto_approve=True, approve=False), t, name) == "destructive name"
        )

    @pytest.mark.parametrize(
        "name", ["undeleted_count", "dropdown_options", "get_deployment", "search", "format_date"]
    )
    def test_harmless_names(self, name: str) -> None:
        """Destructive words must be whole words: substrings do not count."""
        assert not is_destructive_name(name)

    @pytest.mark.parametrize(
        ("auto", "asks"),
        [
            (True, True),  # true does not cover a destructive tool
            (("upd*",), True),  # nor does a glob
            (("srv_*",), True),
            (("update",), False),  # its exact name does: the user reviewed that one
            (("srv_update",), False),  # its merged name too
        ],
    )
    def test_destructive_annotation_asks_unless_named_exactly(
        self, auto: bool | tuple[str, ...], asks: bool
    ) -> None:
        """``destructiveHint: true`` asks under ``autoApprove: true`` or a glob; the
        tool's exact name in ``autoApprove`` lets it go ahead."""
        t = annotated("update", destructive_hint=True)
        reason = approval_reason(Policy(auto_approve=auto), t, "update")
        assert reason == ("destructive annotation" if asks else None)

    def test_a_destructive_name_named_exactly_goes_ahead_unless_in_approve(self) -> None:
        """``delete_file`` in ``autoApprove`` by name goes ahead; listed in ``approve``
        as well, it asks (approve wins)."""
        t = types.Tool(name="srv_delete_file", input_schema={"type": "object"})
        assert approval_reason(Policy(auto_approve=("delete_file",)), t, "delete_file") is None
        both = Policy(approve=("delete_*",), auto_approve=("delete_file",))
        assert approval_reason(both, t, "delete_file") == "listed in approve"

    def test_read_only_hint_never_grants(self) -> None:
        """``readOnlyHint`` and friends do not exempt a tool from approval."""
        t = annotated("search", read_only_hint=True, idempotent_hint=True, destructive_hint=False)
        assert approval_reason(Policy(), t, "search") == "not auto-approved"


def request(
    reason: _approval.ApprovalReason = "not auto-approved", name: str = "search"
) -> ApprovalRequest:
    return ApprovalRequest(
        server="github",
        tool=f"github_{name}",
        original_name=name,
        arguments={"q": "x"},
        reason=reason,
    )


class TestCheckApproval:
    async def test_not_needed_skips_the_callback(self) -> None:
        """A call that needs no approval never reaches the callback."""

        async def callback(req: ApprovalRequest) -> bool:
            raise AssertionError("called")

        await check_approval(False, callback, request())
        await check_approval(False, None, request())

    async def test_headless_fails_closed(self) -> None:
        """Without a callback a call needing approval fails, saying how to grant it."""
        with pytest.raises(ApprovalRequired) as info:
            await check_approval(True, None, request())
        message = str(info.value)
        assert (
            "tool 'github_search' (server 'github') needs approval (not auto-approved)" in message
        )
        assert "approval callback" in message and "autoApprove" in message and "--yes" in message
        assert isinstance(info.value, ApprovalDenied)
        assert (info.value.server, info.value.tool) == ("github", "github_search")

    async def test_headless_destructive_suggests_its_exact_name(self) -> None:
        """For destructive tools the message says only the exact name in autoApprove
        helps (true and globs do not)."""
        with pytest.raises(ApprovalRequired) as info:
            await check_approval(True, None, request("destructive name", "delete_repo"))
        assert str(info.value).endswith(
            "needs approval (destructive name) and there is no approval callback; "
            "the call was not made. To allow it: pass an approval callback, add its exact "
            "name 'delete_repo' to the server's autoApprove (autoApprove: true and globs do "
            "not cover destructive tools), or run the CLI with --yes"
        ), str(info.value)

    async def test_headless_says_what_to_do_in_the_command_lines_words(self) -> None:
        """The error's cli_message gives the command line's remedy (--yes, the config),
        never an approval callback, for both kinds of reason."""
        with pytest.raises(ApprovalRequired) as info:
            await check_approval(True, None, request())
        assert info.value.cli_message == (
            "tool 'github_search' (server 'github') needs approval (not auto-approved) and "
            "no terminal to ask on; the call was not made. To allow it: add 'search' to "
            "the server's autoApprove in the config, or run with --yes"
        )
        with pytest.raises(ApprovalRequired) as info:
            await check_approval(True, None, request("destructive name", "delete_repo"))
        assert info.value.cli_message.endswith(
            "no terminal to ask on; the call was not made. To allow it: add its exact name "
            "'delete_repo' to the server's autoApprove (autoApprove: true and globs do not "
            "cover destructive tools), or run with --yes"
        )

    async def test_callback_grants(self) -> None:
        """A callback returning ``True`` lets the call go ahead, having seen the request."""
        seen: list[ApprovalRequest] = []

        async def callback(req: ApprovalRequest) -> bool:
            seen.append(req)
            return True

        await check_approval(True, callback, request())
        assert seen == [request()]
        assert seen[0].arguments == {"q": "x"}

    @pytest.mark.parametrize("answer", [False, None, 1, "yes"])
    async def test_callback_denies(self, answer: object) -> None:
        """Any answer but ``True`` denies the call."""

        async def callback(req: ApprovalRequest) -> object:
            return answer

        with pytest.raises(ApprovalDenied, match="refused") as info:
            await check_approval(True, callback, request())  # type: ignore[arg-type]
        assert not isinstance(info.value, ApprovalRequired)

    def test_request_is_frozen(self) -> None:
        """An approval request cannot be changed, nor can its arguments."""
        req = request()
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            req.tool = "x"  # type: ignore[misc]
        with pytest.raises(TypeError):
            req.arguments["q"] = "y"  # type: ignore[index]


class TestParameters:
    """An inputSchema summarised for people: name, short type, required; never an error."""

    @pytest.mark.parametrize(
        ("schema", "expected"),
        [
            ({"type": "string"}, "string"),
            ({"type": ["string", "null"]}, "string|null"),
            ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "integer|null"),
            ({"oneOf": [{"type": "integer"}, {"type": "integer", "minimum": 3}]}, "integer"),
            ({"type": "array", "items": {"type": "string"}}, "array<string>"),
            ({"type": "array"}, "array"),
            ({"enum": ["asc", "desc"]}, '"asc"|"desc"'),
            ({"enum": [1, 2, 3, 4, 5]}, "enum"),
            ({"const": 3}, "3"),
            ({"$ref": "#/$defs/Point"}, "Point"),
            ({"allOf": [{"$ref": "#/$defs/Point"}]}, "Point"),
            ({"properties": {"x": {}}}, "object"),
            ({}, "any"),
            (True, "any"),
            ({"type": "array", "items": {"type": "array", "items": {"type": "array", "items": {
                "type": "array", "items": {"type": "string"}}}}}, "array<array<array<array<…>>>>"),
        ],
        ids=[
            "plain", "type-list", "optional", "one-of-dedup", "array", "bare-array", "enum",
            "long-enum", "const", "ref", "all-of", "object", "unsaid", "true", "deep",
        ],
    )  # fmt: skip
    def test_short_types(self, schema: object, expected: str) -> None:
        """Each schema shape reads as the short type the tools table shows."""
        assert tools._params.type_of(schema) == expected

    def test_parameters_in_schema_order_with_required_marked(self) -> None:
        """Properties in order, required ones marked; description kept; a schema without
        properties (or with junk in `required`) has none, or unrequired ones."""
        params = tools.parameters(
            {
                "properties": {"title": {"type": "string", "description": "T"}, "n": {}},
                "required": ["title", 3],
            }
        )
        assert params == [
            _params.Parameter("title", "string", True, "T"),
            _params.Parameter("n", "any", False, None),
        ]
        assert _params.signature(params) == "title*: string, n: any"
        assert tools.parameters({"type": "object"}) == []
        assert _params.signature([]) == "(no parameters)"
        assert tools.parameters({"properties": {"a": {}}, "required": "a"})[0].required is False
