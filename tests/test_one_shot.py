"""Fast, clear answers about broken servers: errors that retrying cannot heal are not
retried, one-shot commands make one attempt per server, and the reason is kept."""

from __future__ import annotations

import contextlib
import json
import pathlib
import subprocess
import sys
from functools import partial

import pytest
import trio
import trio.testing

from supervisor.actors import (
    Actor,
    Backoff,
    GaveUp,
    GiveUp,
    Intensity,
    SupervisorGaveUp,
    actor_spec,
    open_tree,
)
from supervisor.actors._mailbox import AddressState
from supervisor.errors import (
    HTTPStatusError,
    ServerExited,
    ServerUnavailable,
    ToolCallTimeout,
    TransportError,
)
from supervisor.monitor import status_table
from supervisor.runtime import open_supervisor
from supervisor.testing.servers import serve_http, stdio_params

# -- the tree: an error that says retrying cannot help ------------------------------------


class Hopeless(Exception):
    retryable = False


class FailsToStart(Actor):
    """Starts, then its connection fails as a missing executable would."""

    starts = 0

    async def init(self) -> None:
        FailsToStart.starts += 1
        self.nursery.start_soon(self._connect)

    async def _connect(self) -> None:
        raise Hopeless("the executable is gone")


@pytest.mark.parametrize("give_up", [GiveUp.MARK_UNAVAILABLE, GiveUp.ESCALATE])
async def test_the_tree_gives_up_at_once_on_a_permanent_error(
    give_up: GiveUp, autojump_clock: trio.testing.MockClock
) -> None:
    """A child whose error has ``retryable = False`` is not restarted: no restart is
    counted, no backoff waited; it is given up on as its give_up says."""
    FailsToStart.starts = 0
    decisions: list[object] = []
    spec = actor_spec(
        "c",
        FailsToStart,
        give_up=give_up,
        intensity=Intensity(max_restarts=5, within_seconds=60),
        backoff=Backoff(initial=10),
    )

    async def run() -> None:
        async with open_tree([spec], notify=decisions.append, intensity=Intensity.unlimited()):
            await trio.sleep(100)  # ten backoffs' worth
            assert spec.address.state is AddressState.UNAVAILABLE

    if give_up is GiveUp.ESCALATE:
        with pytest.raises(SupervisorGaveUp, match="cannot be restarted"):
            await run()
    else:
        await run()
    assert FailsToStart.starts == 1
    (decision,) = decisions
    assert isinstance(decision, GaveUp)
    assert decision.permanent and decision.restarts == 0
    assert decision.escalated is (give_up is GiveUp.ESCALATE)
    assert "the executable is gone" in decision.reason


def test_which_transport_errors_are_permanent() -> None:
    """Missing executables and 401/403/404 are permanent; a crash, a refused connection
    or a 503 may heal."""
    assert ServerExited("x", exit_code=None, retryable=False).retryable is False
    assert ServerExited("x", exit_code=1).retryable is True
    assert TransportError("x").retryable is True
    for status, retryable in ((401, False), (403, False), (404, False), (503, True), (500, True)):
        error = HTTPStatusError("x", url="http://127.0.0.1/mcp", status_code=status)
        assert error.retryable is retryable, status


# -- the supervisor: failed at once, with the reason ----------------------------------------

SLOW = {"local": {"initial": 30, "max": 30}, "remote": {"initial": 30, "max": 30}}


async def test_a_missing_executable_is_failed_at_once_not_retried() -> None:
    """In a long-running supervisor too: ENOENT goes straight to failed, retryable false,
    and a call says why at once (a retry would have waited 30 s of backoff)."""
    config = {
        "mcpServers": {"ghost": {"command": "no-such-command-xyz", "lazy": False}},
        "supervisor": {"backoff": SLOW},
    }
    async with open_supervisor(config) as sup:
        with trio.fail_after(20):  # far below the 30 s backoff a retry would wait
            await sup.connect_all()
            with pytest.raises(ServerUnavailable, match="No such file or directory"):
                await sup.call("ghost_anything")
        record = sup.status()["ghost"]
        assert record.status == "failed" and record.retryable is False
        assert record.restarts == 0 and record.next_retry_at is None


async def _http_status(status: int, scope: dict, receive: object, send: object) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()  # type: ignore[operator]
            kind = message["type"].replace("lifespan.", "")
            await send({"type": f"lifespan.{kind}.complete"})  # type: ignore[operator]
            if kind == "shutdown":
                return
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": status, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


@pytest.mark.parametrize(("status", "failed_at_once"), [(404, True), (401, True), (503, False)])
async def test_an_endpoint_that_answers_404_or_401_is_failed_at_once(
    status: int, failed_at_once: bool
) -> None:
    """An HTTP endpoint answering 404 or 401 is failed at its first attempt; a 503 is
    retried (here: after the 30 s backoff, so it is still waiting)."""
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_http, partial(_http_status, status)))
        config = {
            "mcpServers": {"web": {"type": "http", "url": url, "lazy": False}},
            "supervisor": {"backoff": SLOW},
        }
        async with open_supervisor(config) as sup:
            with trio.fail_after(20):
                await sup.connect_all(timeout=10)
            record = sup.status()["web"]
            assert f"HTTP {status}" in (record.last_error or "")
            assert record.retryable is (not failed_at_once)
            assert record.status == ("failed" if failed_at_once else "disconnected")
        nursery.cancel_scope.cancel()


async def test_one_attempt_each_without_retries() -> None:
    """retries=False: a server that exits at once is failed after its one attempt, with
    its reason; calls to it fail fast naming it; the others work."""
    command, args = stdio_params("echo")
    config = {
        "mcpServers": {
            "quits": {"command": "sh", "args": ["-c", "echo 'cannot open /data' >&2; exit 1"]},
            "echo": {"command": command, "args": args, "initTimeout": 120},
        },
        "supervisor": {"backoff": SLOW},
    }
    async with open_supervisor(config, retries=False) as sup:
        with trio.fail_after(25):
            await sup.connect_all()
            with pytest.raises(ServerUnavailable) as info:
                await sup.call("quits_anything")
        assert "exited with code 1" in str(info.value) and "cannot open /data" in str(info.value)
        assert "tried once and is not retried" in str(info.value)
        status = sup.status()
        assert status["quits"].status == "failed" and status["quits"].restarts == 0
        assert status["quits"].retryable is True and status["quits"].max_attempts == 0
        assert status["echo"].status == "connected"


async def test_a_fast_exit_always_carries_its_last_stderr_line() -> None:
    """20 servers that write a line to stderr and exit at once: every error has the line
    (the exit is reported once stderr has been read to its end)."""
    servers = {
        f"s{i}": {"command": "sh", "args": ["-c", f"echo 'reason number {i}' >&2; exit 2"]}
        for i in range(20)
    }
    async with open_supervisor({"mcpServers": servers}, retries=False) as sup:
        await sup.connect_all()
        for i in range(20):
            error = sup.status()[f"s{i}"].last_error or ""
            assert "exited with code 2" in error and f"'reason number {i}'" in error, error


# -- the status table: the whole reason, on a line of its own ------------------------------


async def test_the_table_shows_the_whole_reason_under_the_row() -> None:
    """The Details cell has the gist; the line under it the whole reason (the stderr line
    that says why), wrapped to the width."""
    why = "Error: /srv/data does not exist or is not a directory, give an existing one"
    servers = {"fs": {"command": "sh", "args": ["-c", f"echo '{why}' >&2; exit 1"]}}
    async with open_supervisor({"mcpServers": servers}, retries=False) as sup:
        await sup.connect_all()
        records = sup.status()
    table = status_table(records, width=80)
    lines = table.splitlines()
    (row,) = [i for i, line in enumerate(lines) if line.startswith("  fs ")]
    assert "tried once: exited with code 1" in lines[row]
    # Under the row: its details line, then the reason, from the line marked ↳ on.
    (start,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("↳")]
    assert start > row
    continuation = " ".join(line.strip(" ↳") for line in lines[start : start + 2])
    assert why in continuation
    assert all(len(line) <= 80 for line in lines)


# -- the CLI: one attempt, the reason, exit 1 ---------------------------------------------


def _run(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    # The deadline is far below the 30 s of backoff a second attempt would wait for.
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=25,
        cwd=cwd,
    )


def _config(tmp_path: pathlib.Path, servers: dict[str, object]) -> str:
    path = tmp_path / "mcp.json"
    supervisor = {"backoff": SLOW, "initTimeout": 60}  # generous: these are not about it
    path.write_text(json.dumps({"mcpServers": servers, "supervisor": supervisor}))
    return str(path)


BROKEN = {
    "ghost": {"command": "no-such-command-xyz"},
    "quits": {"command": "sh", "args": ["-c", "echo 'need /data' >&2; exit 1"]},
    "far": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
}


def test_status_reports_each_first_attempt_and_exits(tmp_path: pathlib.Path) -> None:
    """status: every server's first attempt with its reason, a note that a long-running
    supervisor would retry, exit 1 — and no log lines repeating it."""
    done = _run("status", "--config", _config(tmp_path, BROKEN), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "not retried: could not be started" in done.stdout
    assert "'need /data'" in done.stdout and "connection refused" in done.stdout
    assert done.stderr.splitlines() == [
        "mcp-supervisor status: tried once, as every one-shot command does; a long-running "
        "supervisor (`mcp-supervisor serve`, `status --watch`) retries a failed server "
        "with backoff"
    ]
    document = json.loads(
        _run("status", "--json", "--config", _config(tmp_path, BROKEN), cwd=tmp_path).stdout
    )
    by_name = {s["server"]: s for s in document["servers"]}
    assert by_name["ghost"]["retryable"] is False
    assert "need /data" in by_name["quits"]["last_error"]


def test_call_to_a_missing_command_is_one_line_and_exit_1(tmp_path: pathlib.Path) -> None:
    """call: a missing executable is answered at once, in one line of stderr."""
    done = _run("call", "ghost_x", "{}", "--config", _config(tmp_path, BROKEN), cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("mcp-supervisor call: ServerUnavailable: MCP server 'ghost' could")
    assert "No such file or directory" in line and "no-such-command-xyz" in line
    assert line.endswith("Retrying cannot help: fix the cause first")


# -- a hung server is degraded, probed, restarted --------------------------------------------


def _fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {
        "command": command,
        "args": args,
        "lazy": False,
        "initTimeout": 120,
        "approve": False,
        **extra,
    }


async def test_a_stopped_server_is_degraded_after_three_timeouts_then_restarted() -> None:
    """SIGSTOP: every call times out while the connection looks fine. After 3 in a row the
    server is degraded (with the reason), probed at once, and — two probes unanswered —
    restarted; a call then works on the new process."""
    import os
    import signal

    config = {
        "mcpServers": {"echo": _fixture("echo", pingInterval=0)},
        "supervisor": {"pingTimeout": 1, "backoff": {"local": {"initial": 0.1}}},
    }
    seen: list[str] = []
    async with open_supervisor(config) as sup, sup.subscribe("mcp.*") as events:
        await sup.connect_all()
        pid = sup.status()["echo"].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            for n in range(3):
                with pytest.raises(ToolCallTimeout):
                    await sup.call("echo_echo", {"text": "hi"}, timeout=0.5)
                status = sup.status()["echo"].status
                assert status == ("connected" if n < 2 else "degraded"), (n, status)
            record = sup.status()["echo"]
            assert "3 calls in a row timed out" in (record.last_error or "")
            assert "🟡" in status_table(sup.status())
            with trio.fail_after(60):
                async for event in events:
                    seen.append(event.kind)
                    if event.kind == "mcp.connected" and "mcp.local.crashed" in seen:
                        break
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)  # if it is still there
        assert seen.count("mcp.health.stale") == 1  # degraded (by the calls) ...
        assert seen.index("mcp.health.down") < seen.index("mcp.local.crashed")  # two probes
        assert sup.status()["echo"].pid != pid and sup.status()["echo"].status == "connected"
        result = await sup.call("echo_echo", {"text": "back"})
        assert result.text == "back"


async def test_a_slow_tool_degrades_and_the_next_answer_recovers() -> None:
    """Calls that time out on a server that still answers its probe: degraded, not
    restarted; the next answered call makes it connected again (mcp.health.recovered)."""
    config = {"mcpServers": {"slow": _fixture("slow", degradedAfter=2, pingInterval=0)}}
    async with open_supervisor(config) as sup, sup.subscribe("mcp.health.*") as events:
        await sup.connect_all()
        for _ in range(2):
            with pytest.raises(ToolCallTimeout):
                await sup.call("slow_sleep", {"seconds": 30}, timeout=0.2)
        assert sup.status()["slow"].status == "degraded"
        result = await sup.call("slow_sleep", {"seconds": 0})
        assert result.text == "slept 0.0"
        record = sup.status()["slow"]
        assert record.status == "connected" and record.restarts == 0
        with trio.fail_after(10):
            kinds = [(await events.receive()).kind for _ in range(2)]
        assert kinds == ["mcp.health.stale", "mcp.health.recovered"]


# -- one answer too big is that call's error, not a crash ------------------------------------


def test_the_id_of_a_skipped_line_is_read_from_either_end() -> None:
    """The request a too-big line answered is found at its start or its end."""
    from supervisor.transports._oversize import Skipped

    body = b'"' + b"x" * 20000 + b'"'
    at_start = Skipped(b'{"jsonrpc":"2.0","id":7,"result":{"text":' + body[:5000])
    at_start.add(body[5000:] + b"}}")
    assert at_start.response_id() == 7 and at_start.size > 20000
    at_end = Skipped(b'{"result":{"text":' + body + b'},"id":"req-9","jsonrpc":"2.0"}')
    assert at_end.response_id() == "req-9"
    notification = Skipped(b'{"method":"notifications/message","params":' + body + b"}")
    assert notification.response_id() is None


async def test_a_result_over_the_limit_fails_that_call_and_keeps_the_connection() -> None:
    """A tool's answer over maxMessageBytes: that call raises ResultTooLarge naming the
    limit and how to raise it; the same process answers the next call; no restart."""
    from supervisor.errors import ResultTooLarge

    config = {
        "mcpServers": {"rich": _fixture("rich")},
        "supervisor": {"limits": {"maxMessageBytes": 100_000}},
    }
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        pid = sup.status()["rich"].pid
        with pytest.raises(ResultTooLarge) as info:
            await sup.call("rich_big_text", {"kib": 400}, timeout=60)
        assert info.value.limit == 100_000 and info.value.size > 400 * 1024
        assert "maxMessageBytes (100000)" in str(info.value)
        assert "supervisor.limits.maxMessageBytes" in str(info.value)
        small = await sup.call("rich_big_text", {"kib": 1}, timeout=60)
        assert len(small.text) >= 1024
        record = sup.status()["rich"]
        assert record.status == "connected" and record.pid == pid and record.restarts == 0
        assert record.error_count == 0


async def test_a_calls_progress_notifications_reach_its_progress_callback() -> None:
    """call(progress=...) hears the server's MCP progress notifications for that call."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, total, message))

    config = {"mcpServers": {"slow": _fixture("slow")}}
    async with open_supervisor(config) as sup:
        result = await sup.call(
            "slow_sleep", {"seconds": 0.3, "steps": 3}, timeout=60, progress=progress
        )
        assert result.text == "slept 0.3"
        view = await sup.server("slow").call_tool(
            "sleep", {"seconds": 0, "steps": 1}, progress=progress
        )
        assert view.text == "slept 0.0"
    assert heard == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3"), (1, 1, "step 1")]
