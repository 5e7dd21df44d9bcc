"""The programs in examples/ run as their docstrings say, against real fixture servers."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

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
    done = run_agent_loop("--rounds", "30", "--interval", "0.1")
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
    first(r"^round +\d+ \| echo: flaky ok ", connected)  # served by the new process
    assert fell_back < restarted
    summary = lines[first(r"^summary: 30 rounds")]
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
