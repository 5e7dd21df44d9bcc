"""``mcp-supervisor chaos --plan P -- COMMAND``: a stdio proxy that any MCP client can be
pointed at, here a plain ``mcp`` SDK client, in front of a server this project did not
write (``mcp-server-time`` from PyPI) and of our fixture servers."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from supervisor.faults._inject._engine import read_faults
from supervisor.testing.servers import count_executions, stdio_params

from .test_cli_signals import children, wait_until_gone

TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]
#: a call's bound: never a hang, however busy the machine
CALL_LIMIT = 60


def write_plan(tmp_path: pathlib.Path, rules: list[object], seed: int = 0) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"seed": seed, "rules": rules}))
    return str(path)


def chaos(plan: str, *command: str, log: pathlib.Path | None = None) -> StdioServerParameters:
    extra = [] if log is None else ["--faults-log", str(log)]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "chaos", "--plan", plan, *extra, "--", *command],
    )


async def now_in_utc(client: Client, timeout: float | None = None) -> str:
    result = await client.call_tool(
        "get_current_time", {"timezone": "UTC"}, read_timeout_seconds=timeout
    )
    return json.loads(result.content[0].text)["timezone"]  # type: ignore[union-attr]


async def test_a_kill_on_the_third_call_lets_exactly_two_succeed(tmp_path: pathlib.Path) -> None:
    plan = write_plan(tmp_path, [{"when": {"method": "tools/call", "nth": 3}, "do": "kill"}])
    log = tmp_path / "faults.json"
    answered, failed = [], []
    with trio.fail_after(CALL_LIMIT):
        async with Client(chaos(plan, *TIME_SERVER, log=log)) as client:
            for _ in range(5):
                try:
                    answered.append(await now_in_utc(client))
                except MCPError as exc:
                    failed.append(str(exc))
    assert answered == ["UTC", "UTC"]
    assert len(failed) == 3 and all("Connection closed" in f for f in failed)
    faults = read_faults(log.read_bytes())
    assert [(f.action, f.method, f.tool, f.rule) for f in faults] == [
        ("kill", "tools/call", "get_current_time", 0)
    ]


async def test_delays_and_drops_give_timeouts_not_hangs(tmp_path: pathlib.Path) -> None:
    plan = write_plan(
        tmp_path,
        [
            {
                "when": {"method": "tools/call", "direction": "to_client"},
                "do": {"delay_ms": 50, "jitter_ms": 50},
            },
            {"when": {"method": "tools/call", "nth": 2}, "do": "drop"},
        ],
    )
    outcomes = []
    with trio.fail_after(CALL_LIMIT):
        async with Client(chaos(plan, *TIME_SERVER)) as client:
            for _ in range(3):
                try:
                    outcomes.append(await now_in_utc(client, timeout=3))
                except MCPError as exc:
                    outcomes.append(f"error: {exc}")
    assert outcomes[0] == "UTC" and outcomes[2] == "UTC"
    assert outcomes[1].startswith("error: ") and "timed out" in outcomes[1]


async def test_an_injected_error_answers_for_a_server_that_never_runs_the_call(
    tmp_path: pathlib.Path,
) -> None:
    counts = tmp_path / "counts"
    plan = write_plan(
        tmp_path,
        [{"when": {"tool": "add"}, "do": {"error": {"code": -32050, "message": "chaos says no"}}}],
    )
    command, args = stdio_params("echo")
    with trio.fail_after(CALL_LIMIT):
        async with Client(chaos(plan, command, *args, "--count-file", str(counts))) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("add", {"a": 1, "b": 2})
            echoed = await client.call_tool("echo", {"text": "hi"})
    assert (refused.value.error.code, refused.value.error.message) == (-32050, "chaos says no")
    assert echoed.content[0].text == "hi"  # type: ignore[union-attr]
    assert count_executions(counts) == {"echo": 1}


async def test_the_report_judges_the_calls_as_the_client_lived_them(
    tmp_path: pathlib.Path,
) -> None:
    plan = write_plan(
        tmp_path,
        [
            {"when": {"method": "tools/call", "nth": 2}, "do": {"error": {"code": -32001}}},
            {"when": {"method": "tools/call", "direction": "to_client", "nth": 2}, "do": "drop"},
        ],
    )
    report = tmp_path / "report"
    command, args = stdio_params("rich")
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "supervisor",
            "chaos",
            "--plan",
            plan,
            "--report",
            str(report),
            "--",
            command,
            *args,
        ],
    )
    with trio.fail_after(CALL_LIMIT):
        async with Client(server) as client:
            await client.call_tool("echo", {"text": "1"})  # ok
            with pytest.raises(MCPError):
                await client.call_tool("echo", {"text": "2"})  # answered by the plan
            with pytest.raises(MCPError, match="timed out"):  # its answer dropped
                await client.call_tool("echo", {"text": "3"}, read_timeout_seconds=1)
            failed = await client.call_tool("fail", {"message": "no"})  # the tool's own error
            assert failed.is_error
    written = json.loads((report / "chaos.json").read_text())
    calls = written["history"]["calls"]
    assert [(c["original"], c["outcome"], c["is_error"]) for c in calls] == [
        ("echo", "ok", False),
        ("echo", "fail", False),
        ("echo", "info", False),
        ("fail", "ok", True),
    ]
    assert calls[1]["sent_at"] is None and calls[2]["sent_at"] is not None
    assert "the client gave up on it" in calls[2]["error"]
    assert calls[2]["ended_at"] <= calls[3]["invoked_at"]  # when it did, not at the end
    assert {c["server"] for c in calls} == {pathlib.Path(command).name}
    assert written["verdict"]["ok"] is True
    assert [f["action"] for f in written["faults"]] == ["error", "drop"]
    assert "timeline" in (report / "chaos.html").read_text()


def server_row(page: str, server: str) -> dict[str, str]:
    """The report page's row of ``server`` in the table of servers: header -> cell."""
    table = re.search(r'<table class="servers">(.*?)</table>', page, re.S)
    assert table is not None
    head = re.findall(r"<th>(.*?)</th>", table.group(1))
    row = re.search(rf'<tr data-server="{re.escape(server)}">(.*?)</tr>', table.group(1))
    assert row is not None, f"no row for {server!r}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    return dict(zip(head, cells, strict=True))


async def test_the_report_ends_each_call_when_the_client_got_its_outcome(
    tmp_path: pathlib.Path,
) -> None:
    """An injected error, and a dropped request the client gave up on (its timeout sends
    notifications/cancelled), each end before the client's next call, not when the
    session ends: both "fail" (the count file says neither ran). The proxy's one server,
    named by its command, owns every fault: in the JSON and in the page."""
    counts = tmp_path / "counts"
    plan = write_plan(
        tmp_path,
        [
            {"when": {"method": "tools/call", "nth": 2}, "do": {"error": {"code": -32001}}},
            {"when": {"method": "tools/call", "nth": 3}, "do": "drop"},
        ],
    )
    report = tmp_path / "report"
    command, args = stdio_params("echo", count_file=counts)
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "chaos", "--plan", plan, "--report", str(report), "--"]
        + [command, *args],
    )
    with trio.fail_after(CALL_LIMIT):
        async with Client(server) as client:
            await client.call_tool("echo", {"text": "1"})
            with pytest.raises(MCPError):
                await client.call_tool("echo", {"text": "2"})  # answered by the plan
            with pytest.raises(MCPError, match="timed out"):  # never reached the server
                await client.call_tool("echo", {"text": "3"}, read_timeout_seconds=1)
            await client.call_tool("echo", {"text": "4"})
            await client.call_tool("echo", {"text": "5"})
    assert count_executions(counts) == {"echo": 3}
    written = json.loads((report / "chaos.json").read_text())
    records = written["history"]["calls"]
    assert [r["outcome"] for r in records] == ["ok", "fail", "fail", "ok", "ok"]
    for record, following in zip(records, records[1:], strict=False):
        assert record["ended_at"] <= following["invoked_at"], record
    assert records[2]["sent_at"] is None
    assert "gave up" in records[2]["error"] and "never reached the server" in records[2]["error"]
    name = pathlib.Path(command).name
    verdict = written["verdict"]
    assert list(verdict["servers"]) == [name]
    tally = verdict["servers"][name]
    assert (tally["calls"], tally["failed"], tally["indefinite"], tally["faults"]) == (5, 2, 0, 2)
    assert not any("named no server" in note for note in verdict["notes"])
    assert {f["server"] for f in written["faults"]} == {name}
    page = (report / "chaos.html").read_text()
    row = server_row(page, name)
    assert (row["calls"], row["failed"], row["indefinite"], row["faults"]) == ("5", "2", "0", "2")
    assert "named no server" not in page and "Faults naming no server" not in page


def faults_of(tmp_path: pathlib.Path, seed: int, name: str) -> list[tuple[object, ...]]:
    """The faults a seeded plan injects into one fixed session with the time server."""
    plan = write_plan(
        tmp_path,
        [
            {"when": {"method": "tools/call", "probability": 0.5}, "do": "duplicate"},
            {
                "when": {"method": "tools/call", "direction": "to_client", "probability": 0.4},
                "do": {"delay_ms": 1, "jitter_ms": 20},
            },
        ],
        seed=seed,
    )
    log = tmp_path / name

    async def session() -> None:
        with trio.fail_after(CALL_LIMIT):
            async with Client(chaos(plan, *TIME_SERVER, log=log)) as client:
                for _ in range(12):
                    await now_in_utc(client)

    trio.run(session)
    # times vary with the machine; which fault, where and with what draw does not
    return [(f.seq, f.rule, f.action, f.id, f.detail) for f in read_faults(log.read_bytes())]


def test_the_same_seed_injects_the_same_faults_and_another_seed_others(
    tmp_path: pathlib.Path,
) -> None:
    first = faults_of(tmp_path, 7, "a.json")
    assert first and faults_of(tmp_path, 7, "b.json") == first
    assert faults_of(tmp_path, 8, "c.json") != first


class TestProcess:
    def test_sigterm_stops_the_server_and_exits_143(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [])
        command, args = stdio_params("echo")
        proxy = subprocess.Popen(  # stdin stays open: the client is still there
            [sys.executable, "-m", "supervisor", "chaos", "--plan", plan, "--", command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proxy.stderr is not None
            ready = proxy.stderr.readline()
            assert b"fixture echo ready" in ready, ready
            server = children(proxy.pid)
            assert len(server) == 1
            proxy.send_signal(signal.SIGTERM)
            assert proxy.wait(timeout=CALL_LIMIT) == 143
            assert b"terminated, stopping the servers" in proxy.stderr.read()
            assert wait_until_gone(server) == set()
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait()

    def test_a_client_that_closes_stdin_ends_server_and_proxy(self, tmp_path: pathlib.Path) -> None:
        """The client goes away: the server's stdin is closed, it exits (0), and so does
        the proxy, with its code."""
        plan = write_plan(tmp_path, [])
        command, args = stdio_params("echo")
        proxy = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "chaos", "--plan", plan, "--", command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proxy.stderr is not None and proxy.stdin is not None
            ready = proxy.stderr.readline()  # the server is serving: it reads its stdin
            assert b"fixture echo ready" in ready, ready
            server = children(proxy.pid)
            proxy.stdin.close()
            assert proxy.wait(timeout=CALL_LIMIT) == 0
            assert proxy.stdout is not None and proxy.stdout.read() == b""
            assert wait_until_gone(server) == set()
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait()

    def test_a_killed_server_ends_the_proxy_as_a_crash(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [{"when": {"method": "initialize"}, "do": "kill"}])
        command, args = stdio_params("echo")
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", "chaos", "--plan", plan, "--", command, *args],
            input=json.dumps(hello).encode() + b"\n",
            capture_output=True,
            timeout=CALL_LIMIT,
        )
        assert done.returncode == 128 + signal.SIGKILL
        assert b"injected kill (rule 0) into initialize id=1 to_server" in done.stderr


class TestUsage:
    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "supervisor", "chaos", *args],
            capture_output=True,
            text=True,
            timeout=CALL_LIMIT,
            env={**os.environ, "NO_COLOR": "1"},
        )

    def test_a_bad_plan_names_the_field(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [{"when": {"nth": 0}, "do": "explode"}])
        done = self.run("--plan", plan, "--", "true")
        assert done.returncode == 2
        assert "rules[0].when.nth: must be at least 1" in done.stderr
        assert 'rules[0].do: unknown action "explode"' in done.stderr

    def test_http_only_actions_are_refused_for_a_stdio_server(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [{"when": {}, "do": {"http_status": 503}}])
        done = self.run("--plan", plan, "--", "true")
        assert done.returncode == 2
        assert "rules[0].do: http_status applies only to HTTP" in done.stderr

    def test_the_command_comes_after_a_double_dash(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [])
        assert "give the server's command after --" in self.run("--plan", plan).stderr
        done = self.run("--plan", plan, "mcp-server-time")
        assert done.returncode == 2 and "put -- before the server's command" in done.stderr

    def test_a_missing_command_exits_127(self, tmp_path: pathlib.Path) -> None:
        plan = write_plan(tmp_path, [])
        done = self.run("--plan", plan, "--", str(tmp_path / "no-such-server"))
        assert done.returncode == 127 and "command not found" in done.stderr

    def test_soak_options_are_checked(self) -> None:
        done = self.run("soak", "--servers", "0")
        assert done.returncode == 2 and "--servers: must be 1 to 64" in done.stderr
        done = self.run("soak", "--duration", "soon")
        assert done.returncode == 2 and "not a number of seconds" in done.stderr
        done = self.run("soak", "--help")
        assert done.returncode == 0 and "--concurrency C" in done.stdout
