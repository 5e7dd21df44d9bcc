"""The command line, run as a real subprocess, and the bench functions on tiny inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from supervisor import bench

TIMEOUT = 60


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_demo_shows_a_restart_and_a_give_up() -> None:
    """`demo` exits 0 after printing a real restart event, a give-up event and a fast failure."""
    result = run_cli("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "supervisor.child.restarted: supervisor='root', child='worker'" in out
    assert "strategy='rest_for_one'" in out
    assert "supervisor.child.gave_up: supervisor='root', child='worker', restarts=2" in out
    assert "answered by incarnation 2" in out
    assert "ActorUnavailable: actor 'worker' is unavailable after 2 restart attempts" in out
    assert "Traceback" not in result.stderr


def test_bench_json_quick_is_one_document_of_positive_figures() -> None:
    """`bench --json --quick` prints one JSON object with every key, a positive number each;
    the same report makes a table naming each key and its target."""
    result = run_cli("bench", "--json", "--quick")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    keys = {m.key for m in bench.MEASUREMENTS}
    assert keys <= set(report)
    for key in keys:
        assert isinstance(report[key], int | float) and report[key] > 0, key
    assert report["targets"]["mailbox_call_us"] == "<= 15"
    assert report["targets"]["bus_events_per_s"] == ">= 200000"
    assert report["meta"]["quick"] is True
    assert report["meta"]["cpu_count"] >= 1
    table = bench.format_table(report)
    for m in bench.MEASUREMENTS:
        assert m.key in table


@pytest.mark.parametrize(
    "args", [pytest.param((), id="no-args"), pytest.param(("frobnicate",), id="bad-command")]
)
def test_usage_error_exits_2_with_usage_on_stderr(args: tuple[str, ...]) -> None:
    """A missing or unknown subcommand exits 2 and prints usage to stderr, nothing to stdout."""
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: mcp-supervisor")
    assert result.stdout == ""


IN_PROCESS = [
    m for m in bench.MEASUREMENTS if m.key.startswith(("mailbox", "bus", "registry", "search"))
]


@pytest.mark.parametrize("measurement", IN_PROCESS, ids=lambda m: m.key)
async def test_bench_function_returns_a_positive_figure(
    measurement: bench.Measurement,
) -> None:
    """Each in-process bench function measures one tiny round: a positive finite figure
    (the server keys are covered, with tiny sizes, in test_bench.py)."""
    value = await measurement.run(20)
    assert 0 < value < float("inf")


async def test_run_bench_reports_only_measured_keys() -> None:
    """run_bench reports the medians of the given measurements plus meta and targets."""
    tiny = [bench.Measurement("mailbox_call_us", bench.mailbox_call_us, "<= 15", "µs/call", 10, 10)]
    report = await bench.run_bench(quick=True, measurements=tiny)
    assert set(report) == {"mailbox_call_us", "meta", "targets"}
    assert report["targets"] == {"mailbox_call_us": "<= 15"}


@pytest.mark.parametrize(
    ("value", "target", "met"),
    [(10, "<= 15", True), (16, "<= 15", False), (2e5, ">= 200000", True), (1, None, None)],
)
def test_meets_target(value: float, target: str | None, met: bool | None) -> None:
    """meets_target compares a figure with a '<= x' or '>= x' target, None without one."""
    assert bench.meets_target(value, target) is met
