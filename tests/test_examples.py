"""The programs in examples/ run as their docstrings say, against real fixture servers."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
from functools import partial

import trio

from supervisor import ToolError, open_supervisor

ROOT = pathlib.Path(__file__).resolve().parent.parent
AGENT_LOOP = ROOT / "examples" / "agent_loop.py"


def run_agent_loop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(AGENT_LOOP), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def pids_started(output: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"process started, pid (\d+)", output)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_agent_loop_falls_back_on_a_crash_and_uses_the_server_again_after_its_restart() -> None:
    """A crash mid-call is handled by fallback, and calls reach the restarted server."""
    # enough rounds for the crashed server's restart, which takes seconds on a busy machine
    done = run_agent_loop("--rounds", "80", "--interval", "0.1", timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()

    def first(pattern: str, after: int = -1) -> int:
        for i, line in enumerate(lines):
            if i > after and re.search(pattern, line):
                return i
        raise AssertionError(f"no line matching {pattern!r} after line {after}:\n{done.stdout}")

    before = first(r"^round +\d+ \| echo: flaky ok ")
    crashed = first(r"event  flaky: process crashed, exit code 1", before)
    fell_back = first(
        r"^round +\d+ \| echo: flaky CallMayHaveTakenEffect -> fell back to steady: ok ", before
    )
    restarted = first(r"event  flaky: restarted by the supervisor \(restart 1\)", crashed)
    connected = first(r"event  flaky: connected: 3 tools", restarted)
    first(r"event  flaky: back up after [\d.]+ s down", connected)
    # served by the new process, after the call the crash cut off had fallen back (the
    # restart itself is at once: it may be told before or after that fallback)
    assert first(r"^round +\d+ \| echo: flaky ok ", max(connected, fell_back))
    summary = lines[first(r"^summary: 80 rounds")]
    assert "failed: 0" in summary and "fallbacks: 0" not in summary
    assert re.search(r"errors by type: CallMayHaveTakenEffect \d+", done.stdout)
    assert not any(alive(pid) for pid in pids_started(done.stdout))


def test_agent_loop_stops_cleanly_on_ctrl_c() -> None:
    """SIGINT stops the loop: a summary, exit 0, and no server process left behind."""
    process = subprocess.Popen(
        [sys.executable, str(AGENT_LOOP), "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # wait until the loop is running
            seen.append(line)
            if line.startswith("round   2 |"):
                break
        process.send_signal(signal.SIGINT)
        rest, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, errors
    assert "agent  SIGINT: stopping" in rest
    assert re.search(r"^summary: \d+ rounds", rest, re.M)
    assert re.search(r"^servers at the end: steady \w+", rest, re.M)
    pids = pids_started("".join(seen) + rest)
    assert pids and not any(alive(pid) for pid in pids)


def test_agent_loop_rejects_a_task_without_a_config() -> None:
    """--task applies to the user's own servers: without --config it is a usage error."""
    done = run_agent_loop("--task", "echo", "--rounds", "1")
    assert done.returncode == 2
    assert "--task needs --config" in done.stderr


WORKFLOW = ROOT / "examples" / "workflow.py"


def test_workflow_archives_summaries_and_handles_each_error(tmp_path: pathlib.Path) -> None:
    """workflow.py archives a summary of every inbox note (the last one made locally once
    the text server is stopped), handles a tool error, invalid arguments and a refused
    delete, and exits 0 leaving the inbox whole."""
    done = subprocess.run(
        [sys.executable, str(WORKFLOW), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "servers: inbox 4 tools, text 3 tools, archive 4 tools" in out
    for title in ("ideas", "release", "standup"):
        assert f"{title}: summarised by the text server; archive says: added note '{title}'" in out
    assert 'groceries: not archived: inbox said "Error executing tool get_note: no note ' in out
    assert (
        "bad note refused before sending: (root): 'body' is a required property; "
        "title: 7 is not of type 'string'" in out
    )
    assert "approval: refused inbox_delete_note (destructive annotation)" in out
    assert "text server: stopped" in out
    assert "text server unavailable (ServerUnavailable): summarising locally" in out
    assert "retro: summarised locally; archive says: added note 'retro'" in out

    archive = json.loads((tmp_path / "archive.json").read_text())
    assert archive == {
        "ideas": "Cache the parsed schema per tool. Show restart … [13 words]",
        "release": "Version 2.4 ships on Thursday once the changelog … [19 words]",
        "standup": "Alice finished the retry logic for the uploader. … [26 words]",
        "retro": "The outage review went well: alerts fired on … [23 words]",
    }
    inbox = json.loads((tmp_path / "inbox.json").read_text())
    assert set(inbox) == {"ideas", "release", "standup", "retro"}  # nothing was deleted
    assert "archive: 4 notes" in out


SERVERS = ROOT / "examples" / "servers"


async def test_calc_server_computes_and_reports_bad_input_as_tool_errors() -> None:
    """calc.py adds, multiplies, divides and takes square roots (whole results as integers);
    dividing by zero and the root of a negative number are tool errors naming the input."""
    config = {
        "mcpServers": {
            "calc": {
                "command": sys.executable,
                "args": [str(SERVERS / "calc.py")],
                "approve": False,
            }
        }
    }
    with trio.fail_after(30):
        async with open_supervisor(config) as sup:
            assert sorted(await sup.tools()) == [
                "calc_add",
                "calc_divide",
                "calc_multiply",
                "calc_sqrt",
            ]
            answers = [
                (await sup.call(name, arguments)).text
                for name, arguments in [
                    ("calc_add", {"a": 2, "b": 3}),
                    ("calc_add", {"a": 0.5, "b": 0.25}),
                    ("calc_multiply", {"a": 19.5, "b": 4}),
                    ("calc_divide", {"a": 1, "b": 4}),
                    ("calc_sqrt", {"x": 81}),
                ]
            ]
            assert answers == ["5", "0.75", "78", "0.25", "9"]
            for name, arguments, message in [
                ("calc_divide", {"a": 7, "b": 0}, "cannot divide 7 by zero"),
                ("calc_sqrt", {"x": -4}, "square root of a negative number (-4)"),
            ]:
                try:
                    await sup.call(name, arguments)
                except ToolError as exc:
                    assert message in exc.text
                else:
                    raise AssertionError(f"{name}{arguments} did not fail")
            record = sup.status()["calc"]
            assert (record.calls_ok, record.calls_failed, record.restarts) == (5, 0, 0)
            assert record.calls_tool_error == 2  # the tool's errors, not the server's


async def test_flaky_server_serves_over_http_and_fails_every_nth_fetch() -> None:
    """flaky.py --port 0 prints the URL it serves once listening; over Streamable HTTP its
    fetch fails every N-th time (--fail-every) as a tool error, and ping names its pid;
    killed and started again on the same port, it is reached at the same URL."""

    async def start(port: int, nursery: trio.Nursery) -> tuple[trio.Process, str, int]:
        command = [
            sys.executable,
            str(SERVERS / "flaky.py"),
            "--port",
            str(port),
            "--fail-every",
            "2",
        ]
        process: trio.Process = await nursery.start(
            partial(trio.run_process, command, stdout=subprocess.PIPE, check=False)
        )
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some()
            assert chunk, f"flaky.py exited before serving: {line!r}"
            line += chunk
        found = re.fullmatch(
            rb"flaky: serving (http://127\.0\.0\.1:(\d+)/mcp) \(pid (\d+)\)\n", line
        )
        assert found is not None, line
        assert found[3] == str(process.pid).encode()
        return process, found[1].decode(), int(found[2])

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            process, url, port = await start(0, nursery)
            config = {"mcpServers": {"flaky": {"type": "http", "url": url, "autoApprove": True}}}
            async with open_supervisor(config) as sup:
                first = await sup.call("flaky_fetch", {"key": "k"})
                assert re.fullmatch(rf"k = \d+ \(pid {process.pid}, request 1\)", first.text)
                try:
                    await sup.call("flaky_fetch", {"key": "k"})
                except ToolError as exc:
                    assert "upstream timed out fetching 'k' (request 2)" in exc.text
                else:
                    raise AssertionError("the second fetch did not fail")
                third = await sup.call("flaky_fetch", {"key": "k"})
                assert third.text.split(" (")[0] == first.text.split(" (")[0]  # same value
                assert (await sup.call("flaky_ping")).text.startswith(
                    f"pong from pid {process.pid}"
                )
            process.kill()
            await process.wait()
            again, url_again, port_again = await start(port, nursery)
            assert (url_again, port_again) == (url, port) and again.pid != process.pid
            again.kill()
    assert not alive(process.pid) and not alive(again.pid)


def test_the_agent_under_faults_example_passes_its_own_tests() -> None:
    """examples/test_agent_under_faults.py runs under pytest as its docstring says, with
    the plugin that comes with the package."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # one process: four tests
            str(ROOT / "examples" / "test_agent_under_faults.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_call_loop_calls_through_the_gateway_then_without_it() -> None:
    """examples/call_loop.sh 1: one call through the running gateway and one starting
    the server, each answered; the two wall times printed; no process left behind."""
    script = ROOT / "examples" / "call_loop.sh"
    calc = str(ROOT / "examples" / "servers" / "calc.py")
    before = set(_processes_of(calc))
    done = subprocess.run(
        ["sh", str(script), "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["last answer through the gateway: 1", "last answer without it: 1"]
    assert re.fullmatch(r"1 calls through a running gateway: \d+\.\d s", lines[2])
    assert re.fullmatch(r"1 calls, each starting the server: \d+\.\d s", lines[3])
    # the gateway (its config under /tmp/call-loop-…) and every calc server it ran are gone
    assert _processes_of("/tmp/call-loop-") == []
    assert set(_processes_of(calc)) <= before


def _processes_of(needle: str) -> list[int]:
    """The pids whose command line mentions ``needle``."""
    found = []
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found
