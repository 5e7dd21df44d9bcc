"""The server commands of the CLI, run as real processes: status and events."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from supervisor.testing.servers import stdio_params


def write_config(tmp_path: pathlib.Path, servers: dict[str, object]) -> str:
    path = tmp_path / "mcp.json"
    # A generous handshake bound: on a loaded machine (CI, two test workers) a fixture's
    # interpreter start can take more than the 10 s default; these tests are not about it.
    path.write_text(json.dumps({"mcpServers": servers, "supervisor": {"initTimeout": 60}}))
    return str(path)


def fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, **extra}


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args], capture_output=True, text=True,
        timeout=timeout,
    )


def test_status_json_reports_every_server(tmp_path: pathlib.Path) -> None:
    """status --json connects every server: one JSON document; exit 1 if one failed."""
    config = write_config(
        tmp_path,
        {"echo": fixture("echo"), "broken": fixture("exit-on-start", maxRestarts=0)},
    )
    done = run("status", "--config", config, "--json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    by_name = {s["server"]: s for s in document["servers"]}
    assert by_name["echo"]["status"] == "connected" and by_name["echo"]["tool_count"] == 3
    assert by_name["broken"]["status"] == "failed"
    assert "exited with code 1" in by_name["broken"]["last_error"]


def test_status_table_when_all_are_connected(tmp_path: pathlib.Path) -> None:
    """status prints a table on stdout and exits 0 when every server is connected."""
    config = write_config(tmp_path, {"alpha": fixture("echo"), "beta": fixture("echo")})
    done = run("status", "--config", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "MCP Server Status"  # the table of docs/monitoring.md
    rows = lines[4:8:2]  # each row is followed by the server's second line
    assert [line.split()[:2] for line in rows] == [["alpha", "🟢"], ["beta", "🟢"]]
    assert lines[-1] == "  2 servers configured | 2 connected | 6 tools available"


def test_events_prints_json_lines(tmp_path: pathlib.Path) -> None:
    """events --filter 'mcp.*' --duration S prints one JSON event per line, then exits 0."""
    config = write_config(tmp_path, {"echo": fixture("echo")})
    # long enough for a loaded machine to start Python and the server
    done = run("events", "--config", config, "--filter", "mcp.*", "--duration", "12")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[:3] == ["mcp.connecting", "mcp.local.spawned", "mcp.connected"]
    assert all(k.startswith("mcp.") for k in kinds)
    assert all("ts" in e and e["server"] == "echo" for e in events)


def test_server_commands_reject_a_broken_config(tmp_path: pathlib.Path) -> None:
    """A config error is exit 2 with the field path on stderr, for status and events."""
    config = write_config(tmp_path, {"x": {"command": "true", "heders": {}}})
    for command in ("status", "events"):
        done = run(command, "--config", config)
        assert done.returncode == 2
        assert "mcpServers.x.heders: unknown field" in done.stderr


def test_status_with_a_dashboard_serves_until_ctrl_c(tmp_path: pathlib.Path) -> None:
    """`status --dashboard 127.0.0.1:0` prints where the page is, serves it while the table
    stays live, and ends cleanly on SIGINT (exit 130), leaving no server process."""
    import signal
    import threading
    import time
    import urllib.error
    import urllib.request

    config = write_config(tmp_path, {"one": fixture("echo")})
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "status", "--config", config,
         "--dashboard", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # the first line says where the page is
        assert line.startswith("mcp-supervisor: dashboard at http://127.0.0.1:"), line
        url = line.split()[-1]
        deadline = time.monotonic() + 30
        while True:  # until the echo server is connected: 503 while it connects
            try:
                with urllib.request.urlopen(url + "healthz", timeout=10) as response:
                    health = json.load(response)
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503 and time.monotonic() < deadline
                time.sleep(0.05)
        assert health == {"status": "ok", "servers": {"one": "connected"}}
        watchdog = threading.Timer(30, process.kill)  # bounds the blocking reads below
        watchdog.start()
        assert process.stdout is not None
        for line in process.stdout:  # the table is redrawn once it has connected
            if "1 server configured | 1 connected" in line:
                break
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        watchdog.cancel()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
