"""The command line, run as a real subprocess, and the bench functions on tiny inputs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

from supervisor.bench import _inprocess, _registry, _run, _suite
from supervisor.cli import main

TIMEOUT = 60


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Runs `mcp-supervisor ARGS` as a child subreaper (Linux): whatever the demo leaves behind
# becomes this wrapper's child when the demo exits, and is reported (then killed).
SUBREAPER = r"""
import ctypes, json, os, pathlib, signal, subprocess, sys, tempfile
PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
# Output to files, not pipes: a leftover process holding a pipe would keep us waiting.
with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
    demo = subprocess.Popen([sys.executable, "-m", "supervisor", *sys.argv[1:]], stdout=out,
                            stderr=err)
    returncode = demo.wait(timeout=100)
    out.seek(0), err.seek(0)
    stdout, stderr = out.read(), err.read()
left = []
for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        continue
    if int(fields[1]) == os.getpid():
        left.append(f"{stat.parent.name} ({fields[0]}): {cmdline}")
        try:
            os.kill(int(stat.parent.name), signal.SIGKILL)
        except ProcessLookupError:
            pass
json.dump({"returncode": returncode, "stdout": stdout, "stderr": stderr, "left": left},
          sys.stdout)
"""


def run_reaped(*args: str) -> dict[str, object]:
    """Run the CLI under SUBREAPER: its exit code, output and leftover processes."""
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def lines_in_order(out: str, *patterns: str) -> None:
    """Each regular expression matches a line of ``out`` after the previous one's."""
    lines = out.splitlines()
    at = -1
    for pattern in patterns:
        found = next((i for i in range(at + 1, len(lines)) if re.search(pattern, lines[i])), None)
        assert found is not None, f"no line matching {pattern!r} after line {at}:\n{out}"
        at = found


def test_demo_recovers_a_killed_stdio_server_and_a_lost_http_server() -> None:
    """`demo` exits 0 having printed the table, calls across the three example
    servers, the events of calc's restart after kill -9 and of flaky's reconnection after
    its HTTP process was killed and started again, a call made during each outage answered
    after it, the table again and the summary; no process of the demo remains."""
    report = run_reaped("demo")
    out, err = str(report["stdout"]), str(report["stderr"])
    assert report["returncode"] == 0, err
    assert report["left"] == [], report["left"]
    assert "Traceback" not in err
    flaky_pid = re.search(r"flaky\.py, pid (\d+), run by the demo", out)
    assert flaky_pid is not None, out
    lines_in_order(
        out,
        r"^1\. Connect every server",
        r"^MCP Server Status$",
        r"^  calc +🟢 +4 ",
        r"^  flaky +🟢 +2 ",
        r"3 servers configured \| 3 connected \| 10 tools available",
        r"calc_multiply\(a=19\.5, b=4\) -> 78$",
        r"notes_add_note\(title='total', body='19\.5 x 4 = 78'\) -> added note 'total'",
        r"flaky_fetch\(key='exchange-rate'\) -> exchange-rate = \d+ \(pid \d+, request 1\)",
        r"notes_get_note\(title='total'\) -> 19\.5 x 4 = 78$",
        r"calc_divide\(a=1, b=0\) -> ToolError, handled: .*cannot divide 1 by zero",
        r"approval asked for notes_delete_note \(destructive annotation\)",
        r"notes_delete_note\(title='total'\) -> not sent: ApprovalDenied",
        # calc: kill -9, then the local crash story of docs/servers.md
        r"^3\. Crash: kill -9 the calc server \(pid \d+\)",
        r"calc +mcp\.local\.crashed +exit code -9",
        r"calc +mcp\.disconnected +unexpected",
        r"calc_add\(a=2, b=40\) sent$",
        r"calc +mcp\.error +#1, retry in 0\.00 s",  # a first crash is restarted at once
        r"calc +supervisor\.child\.restarted +restart 1",
        r"calc +mcp\.connecting +attempt 2 of 6",  # the try after 1 failure; 1 + 5 retries
        r"calc +mcp\.local\.spawned +pid \d+",
        r"calc +mcp\.connected +4 tools",
        r"calc +mcp\.health\.recovered +back after [\d.]+ s down",
        r"calc_add\(a=2, b=40\), sent during the outage -> 42 \(after [\d.]+ s\)",
        # flaky: its HTTP process killed, a call finds it gone, it comes back on its port
        rf"^4\. Outage: the flaky HTTP server goes away \(kill -9 pid {flaky_pid[1]}\)",
        r"flaky_fetch\(key='exchange-rate'\) sent$",
        r"flaky +mcp\.error +#1, retry in 0\.00 s",  # at once; then 0.5 s, jittered
        r"^  flaky +(🔴|🟡) ",  # the table while it is down
        r"flaky +serving again on port \d+ \(pid \d+\)",
        r"flaky +mcp\.connected +2 tools",
        r"flaky +mcp\.health\.recovered +back after [\d.]+ s down",
        r"flaky_fetch\(key='exchange-rate'\), sent during the outage -> exchange-rate = \d+ "
        r"\(pid \d+, request 1\)",
        r"^5\. Status after the recovery",
        r"^MCP Server Status$",
        r"^  calc +🟢 +4 ",
        r"3 servers configured \| 3 connected \| 10 tools available",
        r"^  calc +connected, .* 1 reconnect",
        r"^  flaky +connected, .* 1 reconnect",
        r"total: 3 servers, 3 connected",
        r"^Demo took [\d.]+ s",
    )
    served_again = re.search(r"serving again on port \d+ \(pid (\d+)\)", out)
    assert served_again is not None and served_again[1] != flaky_pid[1]


def test_demo_with_servers_elsewhere_missing_says_which() -> None:
    """`--servers DIR` without the example servers: exit 1, naming DIR and what it lacks."""
    result = run_cli("demo", "--servers", "/nonexistent/servers")
    assert result.returncode == 1
    assert result.stderr.startswith(
        "mcp-supervisor demo: error: the demo runs the servers notes.py, calc.py, flaky.py, "
        "and /nonexistent/servers lacks notes.py, calc.py, flaky.py; "
    )
    assert result.stdout == ""


def test_demo_with_a_dashboard_keeps_serving_until_ctrl_c() -> None:
    """`demo --dashboard 127.0.0.1:0` serves the dashboard through the script and after it,
    until SIGINT; then it exits 130 and the server processes it started are gone."""
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "demo", "--dashboard", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # blocks until the script is done (bounded below)
            seen.append(line)
            if line.startswith("The dashboard stays at "):
                break
        url = seen[-1].split()[4]
        with urllib.request.urlopen(url + "healthz", timeout=10) as response:
            health = json.load(response)
        process.send_signal(signal.SIGINT)
        rest, errors = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    out = "".join(seen) + rest
    assert process.returncode == 130, errors
    assert health["servers"] == {"notes": "connected", "calc": "connected", "flaky": "connected"}
    assert "calc_add(a=2, b=40), sent during the outage -> 42" in out
    assert "Stopping." in rest
    pids = [int(p) for p in re.findall(r"\bpid (\d+)", out)]
    assert pids and not any(alive(pid) for pid in pids)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_bench_only_measures_the_chosen_keys_as_one_json_document() -> None:
    """`bench --json --quick --only …` prints one JSON object holding the chosen keys, a
    suite's siblings brought along, each a positive number, with meta and targets; the same
    report makes a table naming each key and its target, and nothing else. (Every key's
    function is measured on tiny sizes in test_bench.py; the whole bench is not run here:
    a minute or two of full CPU would starve the tests beside it.)"""
    result = run_cli(
        "bench", "--json", "--quick", "--only", "mailbox_call_ratio", "cli_help_*", timeout=300
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    chosen = {"mailbox_call_ratio", "mailbox_call_us", "cli_help_ms", "cli_help_baseline_ms"}
    assert set(report) == chosen | {"meta", "targets"}
    for key in chosen:
        assert isinstance(report[key], int | float) and report[key] > 0, key
    assert report["targets"] == {
        "mailbox_call_ratio": "<= 1.2",
        "mailbox_call_us": None,
        "cli_help_ms": "<= 200",
        "cli_help_baseline_ms": None,
    }
    assert report["meta"]["quick"] is True
    assert report["meta"]["cpu_count"] >= 1
    assert set(report["meta"]["round_sizes"]) == chosen
    table = _run.format_table(report)
    for m in _registry.MEASUREMENTS:
        assert (m.key in table.split()) is (m.key in chosen), m.key


def test_bench_only_with_an_unknown_key_is_a_usage_error_listing_the_keys() -> None:
    """A pattern that matches no key exits 2 before measuring anything, naming it and
    every key there is."""
    result = run_cli("bench", "--only", "mailbox_*", "nosuch_key")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        "mcp-supervisor bench: --only 'nosuch_key' matches no bench key"
    )
    for m in _registry.MEASUREMENTS:
        assert m.key in result.stderr


def test_select_brings_a_suites_other_keys_along_in_registry_order() -> None:
    """Choosing one key of a suite measures the whole suite; patterns are shell-style."""
    keys = [m.key for m in _run.select(["shutdown_8_ratio", "recovery_s"])]
    assert keys == [
        "startup_8_ratio",
        "shutdown_8_ratio",
        "recovery_s",
        "recovery_ratio",
        "recovery_connect_s",
    ]
    gateway = [m.key for m in _run.select(["gateway_*"])]
    assert "cli_call_warm_ms" in gateway and "gateway_call_ratio" in gateway
    assert [m.key for m in _run.select(["*"])] == [m.key for m in _registry.MEASUREMENTS]


@pytest.mark.parametrize(
    "args", [pytest.param((), id="no-args"), pytest.param(("frobnicate",), id="bad-command")]
)
def test_usage_error_exits_2_with_usage_on_stderr(args: tuple[str, ...]) -> None:
    """A missing or unknown subcommand exits 2 and prints usage to stderr, nothing to stdout."""
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: mcp-supervisor")
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "suggested"),
    [
        (("stauts",), "invalid choice: 'stauts'; did you mean 'status'?"),
        (("evnts", "--config", "x.json"), "invalid choice: 'evnts'; did you mean 'events'?"),
        (("auth", "lgout"), "invalid choice: 'lgout'; did you mean 'logout'?"),
    ],
    ids=["command", "command-with-options", "auth-action"],
)
def test_a_misspelt_command_gets_a_suggestion(args: tuple[str, ...], suggested: str) -> None:
    """A command (or action) that is almost a known one exits 2 naming the one meant."""
    result = run_cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert suggested in result.stderr


@pytest.mark.parametrize(
    ("args", "usage", "error"),
    [
        (("status", "--bogus"), "status", "unrecognized arguments: --bogus"),
        (
            ("status", "--jsn", "--config", "x.json"),
            "status",
            "unrecognized arguments: --jsn (did you mean --json?)",
        ),
        (("-v", "tools", "--bogus", "1"), "tools", "unrecognized arguments: --bogus 1"),
        (("auth", "logout", "--bogus"), "auth logout", "unrecognized arguments: --bogus"),
    ],
    ids=["status", "status-typo", "tools-after-v", "auth-logout"],
)
def test_an_unknown_option_shows_its_command_s_usage(
    args: tuple[str, ...], usage: str, error: str
) -> None:
    """An option the command does not have is that command's error, shown with its own
    usage (not the top-level one), and the closest option it has where one is close."""
    result = run_cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"usage: mcp-supervisor {usage} [-h]")
    assert result.stderr.splitlines()[-1] == f"mcp-supervisor {usage}: error: {error}"


def test_serve_offers_stdio_or_http_and_an_optional_dashboard(tmp_path: pathlib.Path) -> None:
    """`serve`'s usage: --stdio (the default) or --http, the dashboard optional; a token
    file that cannot be read is a usage error naming it, before anything starts."""
    usage = run_cli("serve", "--help").stdout.split("\n\n", 1)[0]
    assert "[--stdio | --http HOST:PORT]" in usage and "[--dashboard HOST:PORT]" in usage
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    missing = tmp_path / "no-token"
    done = run_cli("serve", "--config", str(config), "--http", ":0", "--token-file", str(missing))
    assert done.returncode == 2
    assert done.stderr.startswith(f"mcp-supervisor serve: cannot read --token-file {missing}")
    both = run_cli("serve", "--config", str(config), "--stdio", "--http", ":0")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


@pytest.mark.parametrize(
    "command", ["check", "status", "events", "tools", "call", "serve", "demo", "bench"]
)
def test_every_command_help_ends_with_the_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command's --help ends with the exit codes shared by all: signals and a closed
    stdout included."""
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    epilog = " ".join(capsys.readouterr().out.split("\n\n")[-1].split())
    assert epilog.startswith("Exit status: 0 done, 1 failed, 2 usage or config error.")
    assert "exits 130, 143 or 129" in epilog and "quietly with 141" in epilog


IN_PROCESS = [m for m in _registry.MEASUREMENTS if m.suite is None]


@pytest.mark.parametrize("measurement", IN_PROCESS, ids=lambda m: m.key)
async def test_bench_function_returns_a_positive_figure(
    measurement: _suite.Measurement,
) -> None:
    """Each plain bench function (all in process) measures one tiny round: a positive
    finite figure (the suites' keys are covered, with tiny sizes, in test_bench.py)."""
    value = await measurement.run(2)
    assert 0 < value < float("inf")


async def test_run_bench_reports_only_measured_keys() -> None:
    """run_bench reports the medians of the given measurements plus meta and targets."""
    tiny = [
        _suite.Measurement("mailbox_call_us", _inprocess.mailbox_call_us, None, "µs/call", 10, 10)
    ]
    report = await _run.run_bench(quick=True, measurements=tiny)
    assert set(report) == {"mailbox_call_us", "meta", "targets"}
    assert report["targets"] == {"mailbox_call_us": None}


@pytest.mark.parametrize(
    ("value", "target", "met"),
    [(10, "<= 15", True), (16, "<= 15", False), (2e5, ">= 200000", True), (1, None, None)],
)
def test_meets_target(value: float, target: str | None, met: bool | None) -> None:
    """meets_target compares a figure with a '<= x' or '>= x' target, None without one."""
    assert _run.meets_target(value, target) is met
