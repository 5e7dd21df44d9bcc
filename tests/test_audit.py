"""The audit log (``supervisor.audit``): one line per tool call whatever its outcome, no
argument text unless asked for, redacted when asked for, 0600, rotated by size, failing
closed; and approval questions asked one at a time."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mcp_types as types
import pytest
import trio
import trio.testing

from supervisor import ApprovalRequest, open_supervisor
from supervisor.config import ConfigError, load_config
from supervisor.errors import (
    ApprovalDenied,
    ApprovalRequired,
    AuditLogError,
    CallMayHaveTakenEffect,
    ServerUnavailable,
    ToolArgumentsInvalid,
    ToolError,
    UnknownTool,
)
from supervisor.faults import CallHistory, Injector
from supervisor.log import redacting
from supervisor.testing.servers import count_executions, make_server, stdio_params
from supervisor.tools import Decider
from supervisor.tools._approval import approval_reason, policy_verdict
from supervisor.tools._audit import AuditLog

#: Text passed as arguments; it must never reach the file unless arguments are included.
MARK = "argument-text-b7e1"


def audit_config(path: Path, **fields: object) -> dict[str, object]:
    return {"mcpServers": {}, "supervisor": {"audit": {"path": str(path), **fields}}}


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def refuse_wipe(request: ApprovalRequest) -> bool:
    return request.original_name != "wipe"


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


async def test_a_line_for_each_call_whatever_its_outcome(tmp_path: Path) -> None:
    """Approved, refused, not-required, tool-error, invalid-arguments and unknown-tool
    calls each write one line naming the decision, its decider and the outcome — and no
    text of the arguments or the results."""
    path = tmp_path / "audit.jsonl"
    apps = {"r": make_server("rich")}
    async with open_supervisor(audit_config(path), apps=apps, approve=refuse_wipe) as sup:
        assert (await sup.call("r_echo", {"text": MARK})).text == MARK
        assert (await sup.call("r_delete_note", {"title": MARK})).text == "ok"
        with pytest.raises(ApprovalDenied):
            await sup.call("r_wipe")
        with pytest.raises(ToolError):
            await sup.call("r_fail", {"message": MARK})
        with pytest.raises(ToolArgumentsInvalid):
            await sup.call("r_echo", {"text": 12345678})
        with pytest.raises(UnknownTool):
            await sup.call("r_nope", {"text": MARK})
    text = path.read_text()
    assert MARK not in text and "12345678" not in text
    echo, delete, wipe, fail, invalid, unknown = lines(path)
    assert (echo["server"], echo["tool"], echo["original_tool"]) == ("r", "r_echo", "echo")
    assert echo["approval"] == {"decision": "not required", "by": "autoApprove", "reason": None}
    assert echo["outcome"] == "ok" and "error" not in echo and "arguments" not in echo
    assert delete["approval"] == {
        "decision": "approved",
        "by": "callback",
        "reason": "destructive name",
    }
    assert delete["outcome"] == "ok"
    assert wipe["approval"] == {
        "decision": "refused",
        "by": "callback",
        "reason": "destructive annotation",
    }
    assert wipe["outcome"] == "refused" and wipe["error"]["type"] == "ApprovalDenied"  # type: ignore[index]
    assert fail["outcome"] == "tool_error" and fail["error"]["type"] == "ToolError"  # type: ignore[index]
    assert invalid["outcome"] == "invalid_arguments" and invalid["approval"] is None
    assert invalid["error"]["message"] == "tool 'r_echo': invalid arguments at text"  # type: ignore[index]
    assert unknown["outcome"] == "unknown_tool" and unknown["server"] is None
    ids = [line["call_id"] for line in lines(path)]
    assert len(set(ids)) == 6
    for line in lines(path):
        assert str(line["ts"]).endswith("Z") and float(line["duration_ms"]) >= 0  # type: ignore[arg-type]


async def test_headless_refusal_is_the_policys(tmp_path: Path) -> None:
    """Without a callback a call needing approval is refused by the policy (``no
    callback``), and logged so."""
    path = tmp_path / "audit.jsonl"
    async with open_supervisor(audit_config(path), apps={"r": make_server("rich")}) as sup:
        with pytest.raises(ApprovalRequired):
            await sup.call("r_wipe")
    (line,) = lines(path)
    assert line["approval"] == {
        "decision": "refused",
        "by": "no callback",
        "reason": "destructive annotation",
    }
    assert line["outcome"] == "refused" and line["error"]["type"] == "ApprovalRequired"  # type: ignore[index]


def test_the_policy_names_the_rule_that_lets_a_call_go_ahead() -> None:
    """The verdict is autoApprove or ``approve: false`` when no approval is needed, the
    reason otherwise; approval_reason says the same."""
    config = load_config(
        {
            "mcpServers": {
                "off": {"command": "unused", "approve": False},
                "auto": {"command": "unused", "autoApprove": ["echo"]},
                "ask": {"command": "unused"},
            }
        }
    )
    echo = types.Tool(name="echo", input_schema={"type": "object"})
    verdicts = {name: policy_verdict(s, echo, "echo") for name, s in config.servers.items()}
    assert verdicts == {
        "off": Decider.APPROVE_FALSE,
        "auto": Decider.AUTO_APPROVE,
        "ask": "not auto-approved",
    }
    assert [approval_reason(s, echo, "echo") for s in config.servers.values()] == [
        None,
        None,
        "not auto-approved",
    ]


async def test_indefinite_and_unavailable_calls_and_the_history_id(tmp_path: Path) -> None:
    """A call whose connection dies is indefinite; a call to a stopped server failed;
    each line carries the call history's id, the one sent to the server."""
    path = tmp_path / "audit.jsonl"
    history = CallHistory(prefix="h")
    kill = [{"when": {"method": "tools/call", "nth": 2}, "do": "kill"}]
    async with open_supervisor(
        audit_config(path),
        apps={"e": make_server("echo")},
        faults={"e": kill},
        injector=Injector(),
        history=history,
    ) as sup:
        await sup.call("e_echo", {"text": "1"})
        with pytest.raises(CallMayHaveTakenEffect):
            await sup.call("e_echo", {"text": "2"})
        await sup.stop("e")
        with pytest.raises(ServerUnavailable):
            await sup.call("e_echo", {"text": "3"})
    ok, lost, down = lines(path)
    assert [ok["outcome"], lost["outcome"], down["outcome"]] == ["ok", "indefinite", "failed"]
    assert lost["error"]["type"] == "CallMayHaveTakenEffect"  # type: ignore[index]
    assert down["error"]["type"] == "ServerUnavailable"  # type: ignore[index]
    assert [line["call_id"] for line in (ok, lost, down)] == [c.call_id for c in history]


async def test_arguments_and_results_included_are_redacted(tmp_path: Path) -> None:
    """includeArguments writes arguments and results with every known secret, and the
    value of every secret-looking argument name, as ***."""
    path = tmp_path / "audit.jsonl"
    secret = "sk-live-0123456789"
    config = audit_config(path, includeArguments=True)
    with redacting([secret]):
        async with open_supervisor(config, apps={"e": make_server("echo")}) as sup:
            await sup.call("e_echo", {"text": f"key {secret} {MARK}"})
            with pytest.raises(ToolArgumentsInvalid):
                await sup.call("e_echo", {"text": 5, "apiKey": "hunter2-hunter2"})
    text = path.read_text()
    assert secret not in text and "hunter2" not in text
    echo, invalid = lines(path)
    assert echo["arguments"] == {"text": f"key *** {MARK}"}
    assert echo["result"] == {
        "text": f"key *** {MARK}",
        "structured": {"result": f"key *** {MARK}"},
    }
    assert invalid["arguments"] == {"text": 5, "apiKey": "***"}
    assert "result" not in invalid


async def test_the_file_is_0600_and_its_directory_0700_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """A new log is created 0600 in a new 0700 directory under a permissive umask; an
    existing file that was wider is narrowed to 0600."""
    path = tmp_path / "new" / "dir" / "audit.jsonl"
    with umask(0):
        with AuditLog(path):
            pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    wide = tmp_path / "wide.jsonl"
    wide.write_text("")
    wide.chmod(0o644)
    with AuditLog(wide):
        pass
    assert stat.S_IMODE(wide.stat().st_mode) == 0o600


async def test_rotation_at_the_size_boundary(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A line that would take the file past maxBytes starts a new one (path.1 … path.N,
    the oldest dropped); a file exactly at maxBytes is not rotated early."""
    path = tmp_path / "audit.jsonl"

    def write(log: AuditLog) -> None:
        log.end(log.begin("t_x", None), None)

    with AuditLog(path, backups=2, prefix="p") as log:
        write(log)  # every line the same length: ids p-1 … p-9, no time passes
        size = path.stat().st_size
        log.max_bytes = 2 * size
        write(log)
        assert path.stat().st_size == 2 * size and log.statistics().rotations == 0
        write(log)
        assert log.statistics().rotations == 1
        for _ in range(4):
            write(log)  # 7 lines: p-7 | p-5 p-6 | p-3 p-4 (p-1 p-2 dropped)
    files = [tmp_path / name for name in os.listdir(tmp_path)]
    ids = {p.name: [line["call_id"] for line in lines(p)] for p in files}
    assert ids == {
        "audit.jsonl": ["p-7"],
        "audit.jsonl.1": ["p-5", "p-6"],
        "audit.jsonl.2": ["p-3", "p-4"],
    }
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in files)


def test_config_errors_name_the_field() -> None:
    """Each wrong ``supervisor.audit`` field is reported by its path."""
    bad = {"includeArguments": "yes", "maxBytes": -1, "backups": 0, "rotate": True}
    with pytest.raises(ConfigError) as caught:
        load_config({"mcpServers": {}, "supervisor": {"audit": bad}})
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("supervisor.audit.includeArguments", "must be true or false, not a string"),
        ("supervisor.audit.maxBytes", "must be at least 0"),
        ("supervisor.audit.backups", "must be at least 1"),
        ("supervisor.audit.rotate", "unknown field"),
        ("supervisor.audit.path", "is required: the file the audit log is written to"),
    ]
    with pytest.raises(ConfigError, match=r"supervisor\.audit: must be an object"):
        load_config({"mcpServers": {}, "supervisor": {"audit": "audit.jsonl"}})


async def test_a_relative_path_is_the_configs_directorys(tmp_path: Path) -> None:
    """``path`` is relative to the config file's directory, not the current one."""
    config = tmp_path / "project" / "mcp.json"
    config.parent.mkdir()
    config.write_text(json.dumps(audit_config(Path("logs/audit.jsonl"))))
    async with open_supervisor(config, apps={"e": make_server("echo")}) as sup:
        await sup.call("e_echo", {"text": "hi"})
    assert [line["outcome"] for line in lines(tmp_path / "project/logs/audit.jsonl")] == ["ok"]


async def test_a_log_that_cannot_be_opened_stops_the_supervisor(tmp_path: Path) -> None:
    """A path that is a directory fails open_supervisor before anything starts, naming
    the path and what to do."""
    started = False
    with pytest.raises(AuditLogError, match="cannot be opened .*fix supervisor.audit.path"):
        async with open_supervisor(audit_config(tmp_path), apps={"e": make_server("echo")}):
            started = True
    assert not started


async def test_a_full_disk_refuses_calls_until_the_log_is_writable(tmp_path: Path) -> None:
    """A call whose line cannot be written returns its result; later calls are refused
    before they are sent until the log can be written, and then the lines kept back
    are written first, in order."""
    path = tmp_path / "audit.jsonl"
    path.symlink_to("/dev/full")  # every write: ENOSPC
    counts = tmp_path / "counts"
    apps = {"e": make_server("echo", count_file=counts)}
    async with open_supervisor(audit_config(path), apps=apps) as sup:
        assert (await sup.call("e_echo", {"text": "1"})).text == "1"
        with pytest.raises(AuditLogError, match="refused until it can"):
            await sup.call("e_echo", {"text": "2"})
        assert count_executions(counts) == {"echo": 1}  # the second was never sent
        path.unlink()  # room again: the file is reopened, a regular one
        assert (await sup.call("e_echo", {"text": "3"})).text == "3"
        assert sup.audit is not None and not sup.audit.statistics().failing
    first, refused, third = lines(path)
    assert first["outcome"] == "ok" and third["outcome"] == "ok"
    assert refused["outcome"] == "failed" and refused["error"]["type"] == "AuditLogError"  # type: ignore[index]


def test_cli_yes_is_named_as_the_decider(tmp_path: Path) -> None:
    """``mcp-supervisor call --yes`` writes ``cli --yes`` as who approved."""
    path = tmp_path / "audit.jsonl"
    command, args = stdio_params("rich")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"r": {"command": command, "args": args, "initTimeout": 60}},
                "supervisor": {"audit": {"path": "audit.jsonl"}},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "call", "--config", str(config), "--yes"]
        + ["r_delete_note", '{"title": "x"}'],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (line,) = lines(path)
    assert line["approval"] == {
        "decision": "approved",
        "by": "cli --yes",
        "reason": "destructive name",
    }


# -- one approval at a time --------------------------------------------------------------


async def test_approvals_are_asked_one_at_a_time(tmp_path: Path) -> None:
    """Two calls needing approval are asked one after the other, in order; a call that
    needs none completes while the first question is open."""
    seen: list[str] = []
    answer = {"wipe": trio.Event(), "delete_note": trio.Event()}

    async def ask(request: ApprovalRequest) -> bool:
        seen.append(f"enter {request.original_name}")
        await answer[request.original_name].wait()
        seen.append(f"exit {request.original_name}")
        return True

    async with open_supervisor(
        {"mcpServers": {}}, apps={"r": make_server("rich")}, approve=ask
    ) as sup:
        await sup.tools()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.call, "r_wipe")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(sup.call, "r_delete_note", {"title": "x"})
            await trio.testing.wait_all_tasks_blocked()
            assert seen == ["enter wipe"]  # the second waits its turn
            assert (await sup.call("r_echo", {"text": "meanwhile"})).text == "meanwhile"
            answer["delete_note"].set()  # answering out of turn changes nothing
            await trio.testing.wait_all_tasks_blocked()
            assert seen == ["enter wipe"]
            answer["wipe"].set()
    assert seen == ["enter wipe", "exit wipe", "enter delete_note", "exit delete_note"]


async def test_a_call_cancelled_while_waiting_its_turn_blocks_nobody(tmp_path: Path) -> None:
    """A call cancelled while queued for approval leaves the queue (its line says
    cancelled); the next call is asked once the first is answered."""
    path = tmp_path / "audit.jsonl"
    seen: list[str] = []
    release = trio.Event()

    async def ask(request: ApprovalRequest) -> bool:
        seen.append(request.original_name)
        if request.original_name == "wipe":
            await release.wait()
        return True

    apps = {"r": make_server("rich")}
    async with open_supervisor(audit_config(path), apps=apps, approve=ask) as sup:
        await sup.tools()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.call, "r_wipe")
            await trio.testing.wait_all_tasks_blocked()
            queued = trio.CancelScope()

            async def call_queued() -> None:
                with queued:
                    await sup.call("r_delete_note", {"title": "cancelled"})

            nursery.start_soon(call_queued)
            await trio.testing.wait_all_tasks_blocked()
            queued.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert queued.cancelled_caught
            release.set()
        with trio.fail_after(30):  # a lock left held would hang here
            await sup.call("r_delete_note", {"title": "after"})
    assert seen == ["wipe", "delete_note"]
    outcomes = [(line["tool"], line["outcome"]) for line in lines(path)]
    assert outcomes == [
        ("r_delete_note", "cancelled"),
        ("r_wipe", "ok"),
        ("r_delete_note", "ok"),
    ]
