"""``handle.call()`` end to end over a real fixture server: arguments checked before
sending, results normalised, tool errors raised, and the approval policy enforced."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
import trio

from supervisor import (
    ApprovalDenied,
    ApprovalRequest,
    ApprovalRequired,
    ToolArgumentsInvalid,
    ToolError,
    ToolOutputInvalid,
    open_supervisor,
)
from supervisor.testing.servers import count_executions, stdio_params
from supervisor.tools._results import DEFAULT_PREVIEW_BYTES


def rich(count_file: Path, **fields: object) -> dict[str, object]:
    command, args = stdio_params("rich", count_file=count_file)
    return {"command": command, "args": args, **fields}


async def test_results_are_normalised(tmp_path: Path) -> None:
    """Images keep their data and type, big text spills to a private file, structured
    content is checked against the output schema, and isError raises ToolError."""
    runs = tmp_path / "runs"
    spill = tmp_path / "spill"
    config = {"mcpServers": {"r": rich(runs, approve=False)}}
    async with open_supervisor(config, spill_dir=spill) as sup:
        image = await sup.call("r_image")
        assert image.tool == "r_image"
        assert image.text == "an image"
        (png,) = image.images
        assert png.mime_type == "image/png"
        assert base64.b64decode(png.data).startswith(b"\x89PNG\r\n\x1a\n")
        assert png.size == len(base64.b64decode(png.data))

        (clip,) = (await sup.call("r_audio")).audio
        assert clip.mime_type == "audio/wav" and clip.size > 0

        link_and_note = await sup.call("r_embedded")
        assert [(r.kind, r.uri) for r in link_and_note.resources] == [
            ("embedded", "note://hello"),
            ("link", "notes://index"),
        ]
        assert link_and_note.resources[0].text == "note hello"

        huge = await sup.call("r_big_text", {"kib": 100})
        assert huge.spilled_to is not None and huge.spilled_to.parent == spill
        whole = huge.spilled_to.read_text()
        assert len(whole) == 100 * 1024 and whole.startswith("line ")
        assert stat.S_IMODE(os.stat(huge.spilled_to).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(spill).st_mode) == 0o700
        preview, note = huge.text.rsplit("\n", 1)
        assert len(preview.encode()) <= DEFAULT_PREVIEW_BYTES
        assert whole.startswith(preview)
        assert str(huge.spilled_to) in note and "102400 bytes" in note

        assert (await sup.call("r_structured_ok")).structured == {"count": 3}
        with pytest.raises(ToolOutputInvalid) as bad:
            await sup.call("r_structured_bad")
        assert bad.value.errors == [("count", "'three' is not of type 'integer'")]
        assert bad.value.tool == "r_structured_bad" and bad.value.server == "r"

        with pytest.raises(ToolError) as failed:
            await sup.call("r_fail", {"message": "no such note"})
        assert failed.value.text == "no such note"
        assert failed.value.server == "r" and failed.value.tool == "r_fail"
        assert failed.value.result.is_error
        assert "no such note" in str(failed.value)
    # Every one of those ran on the server exactly once (the output mismatch too).
    assert count_executions(runs) == {
        "image": 1, "audio": 1, "embedded": 1, "big_text": 1,
        "structured_ok": 1, "structured_bad": 1, "fail": 1,
    }  # fmt: skip


async def test_the_default_spill_directory_ends_with_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``spill_dir`` large text goes to a private directory made on the first spill
    and removed when the block ends; a named ``spill_dir`` is kept, files and all."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    config = {"mcpServers": {"r": rich(tmp_path / "runs", approve=False)}}
    async with open_supervisor(config) as sup:
        assert (await sup.call("r_image")).spilled_to is None
        assert list(temp.iterdir()) == []  # nothing spilled yet: no directory
        huge = await sup.call("r_big_text", {"kib": 100})
        assert huge.spilled_to is not None and huge.spilled_to.is_file()
        default = huge.spilled_to.parent
        assert default.parent == temp and default.name.startswith("mcp-supervisor-")
        assert stat.S_IMODE(os.stat(default).st_mode) == 0o700
    assert not default.exists() and list(temp.iterdir()) == []

    named = tmp_path / "named"
    async with open_supervisor(config, spill_dir=named) as sup:
        kept = (await sup.call("r_big_text", {"kib": 100})).spilled_to
    assert kept is not None and kept.parent == named and kept.stat().st_size == 100 * 1024
    assert list(temp.iterdir()) == []


async def test_invalid_arguments_never_reach_the_server(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    async with open_supervisor({"mcpServers": {"r": rich(runs, approve=False)}}) as sup:
        with pytest.raises(ToolArgumentsInvalid) as wrong:
            await sup.call("r_big_text", {"kib": "lots"})
        assert wrong.value.tool == "r_big_text" and wrong.value.server == "r"
        assert wrong.value.errors == [("kib", "'lots' is not of type 'integer'")]
        assert str(wrong.value) == "tool 'r_big_text': kib: 'lots' is not of type 'integer'"
        with pytest.raises(ToolArgumentsInvalid, match="'message' is a required property"):
            await sup.call("r_fail", {})
        assert (await sup.call("r_echo", {"text": "still fine"})).text == "still fine"
    assert count_executions(runs) == {"echo": 1}


async def test_approval_fails_closed_without_a_callback(tmp_path: Path) -> None:
    """Headless: a call needing approval is refused before sending, and says how to allow
    it; autoApprove lets a tool through, but a destructive one only by its exact name
    (``true`` and globs do not cover it)."""
    runs = tmp_path / "runs"
    config = {"mcpServers": {"r": rich(runs, autoApprove=["echo", "delete_*", "w*"])}}
    async with open_supervisor(config) as sup:
        with pytest.raises(ApprovalRequired) as refused:
            await sup.call("r_add", {"a": 1, "b": 2})
        assert refused.value.reason == "not auto-approved"
        assert refused.value.server == "r" and refused.value.tool == "r_add"
        assert "add 'add' to the server's autoApprove" in str(refused.value)
        assert "--yes" in str(refused.value)
        for tool, arguments, reason in [
            ("r_delete_note", {"title": "x"}, "destructive name"),
            ("r_wipe", {}, "destructive annotation"),
        ]:
            with pytest.raises(ApprovalRequired) as refused:
                await sup.call(tool, arguments)
            assert refused.value.reason == reason
            assert "globs do not cover destructive tools" in str(refused.value)
        assert (await sup.call("r_echo", {"text": "auto"})).text == "auto"
    assert count_executions(runs) == {"echo": 1}  # nothing refused ever ran


async def test_the_callback_decides(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.original_name != "wipe"

    config = {"mcpServers": {"r": rich(runs, autoApprove=["echo"])}}
    async with open_supervisor(config, approve=approve) as sup:
        assert (await sup.call("r_add", {"a": 1, "b": 2})).text == "3"
        assert (await sup.call("r_delete_note", {"title": "old"})).text == "ok"
        with pytest.raises(ApprovalDenied) as denied:
            await sup.call("r_wipe")
        assert not isinstance(denied.value, ApprovalRequired)
        assert denied.value.reason == "destructive annotation"
        assert (await sup.call("r_echo", {"text": "no question"})).text == "no question"
    assert [(r.tool, r.original_name, r.reason, dict(r.arguments)) for r in asked] == [
        ("r_add", "add", "not auto-approved", {"a": 1, "b": 2}),
        ("r_delete_note", "delete_note", "destructive name", {"title": "old"}),
        ("r_wipe", "wipe", "destructive annotation", {}),
    ]
    assert count_executions(runs) == {"add": 1, "delete_note": 1, "echo": 1}


async def test_a_trusted_server_still_asks_for_destructive_tools(tmp_path: Path) -> None:
    """``approve: false`` trusts a server's ordinary tools; its read-only annotations
    would grant nothing anyway, and destructive ones still need the callback."""
    runs = tmp_path / "runs"
    async with open_supervisor({"mcpServers": {"r": rich(runs, approve=False)}}) as sup:
        assert (await sup.call("r_add", {"a": 2, "b": 2})).text == "4"
        with pytest.raises(ApprovalRequired):
            await sup.call("r_delete_note", {"title": "x"})
    assert count_executions(runs) == {"add": 1}


async def test_a_lazy_server_is_connected_before_the_approval_decision(tmp_path: Path) -> None:
    """The first call to a never-connected server learns the tool's annotations first:
    a destructive annotation cannot slip through because the tool was not known yet."""
    runs = tmp_path / "runs"
    async with open_supervisor({"mcpServers": {"r": rich(runs, approve=False)}}) as sup:
        assert sup.status()["r"].status == "idle"
        with pytest.raises(ApprovalRequired):
            await sup.call("r_wipe")
        assert sup.status()["r"].status == "connected"
    assert count_executions(runs) == {}


async def test_the_name_template_and_clash_policy_come_from_the_config(tmp_path: Path) -> None:
    command, args = stdio_params("echo")
    echo = {"command": command, "args": args, "approve": False, "prefix": ""}
    config = {
        "supervisor": {"toolNames": {"template": "mcp__{server}__{tool}", "clash": "hash"}},
        "mcpServers": {"files": echo, "web": echo, "plain": {**echo, "prefix": "p"}},
    }
    async with open_supervisor(config) as sup:
        catalog = await sup.tools()
        assert {"mcp__files__echo", "mcp__web__echo", "mcp__plain__add"} <= set(catalog)
        assert (await sup.call("mcp__web__echo", {"text": "w"})).text == "w"
        assert catalog["mcp__web__echo"].server == "web"
    config["supervisor"] = {"toolNames": {"clash": "hash"}}
    async with open_supervisor(config) as sup:
        catalog = await sup.tools()
        (hashed,) = [n for n in catalog if n.startswith("echo_")]
        assert len(hashed) == len("echo_") + 6 and catalog[hashed].server == "web"
        assert catalog["echo"].server == "files" and "p_echo" in catalog


async def test_the_error_clash_policy_refuses_the_later_tool_only(tmp_path: Path) -> None:
    """Under ``clash: error`` a clashing tool of a later server is left out, loudly; every
    other tool of both servers stays on offer."""
    trusted = {"approve": False, "prefix": ""}
    (echo, echo_args), (rich_, rich_args) = stdio_params("echo"), stdio_params("rich")
    config = {
        "supervisor": {"toolNames": {"clash": "error"}},
        "mcpServers": {
            "files": {"command": echo, "args": echo_args, **trusted},
            "web": {"command": rich_, "args": rich_args, **trusted},  # echo, add, count too
        },
    }
    async with open_supervisor(config) as sup, sup.subscribe("tools.conflict") as conflicts:
        catalog = await sup.tools()
        assert catalog["echo"].server == "files" and catalog["image"].server == "web"
        assert not any(n.startswith("echo_") for n in catalog)
        assert (await sup.call("image")).images
        with trio.fail_after(30):
            seen = {}
            async for event in conflicts:
                seen[event.name] = event
                if len(seen) == 3:
                    break
        assert set(seen) == {"echo", "add", "count"}
        assert seen["echo"].servers == ["files", "web"] and seen["echo"].refused
