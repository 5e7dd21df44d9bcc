"""The soak: 8 servers of mixed transports under random seeded fault plans with
continuous concurrent calls, through ``mcp-supervisor chaos soak``. It passes only with no
call lost, duplicated or past its deadline, no process left behind, memory and descriptors
bounded, and every server answering once the faults stop. Its JSON and HTML reports are
kept in ``test-artifacts/soak/``.

``MCP_SOAK_DURATION`` (seconds, default 45) and ``MCP_SOAK_SEED`` (default 2026) run it
longer or on another seed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "soak"


def test_the_soak_loses_and_duplicates_nothing() -> None:
    duration = float(os.environ.get("MCP_SOAK_DURATION", "45"))
    seed = os.environ.get("MCP_SOAK_SEED", "2026")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "chaos",
            "soak",
            "--servers",
            "8",
            "--duration",
            str(duration),
            "--seed",
            seed,
            "--report",
            str(ARTIFACTS),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=duration + 240,
    )
    assert done.returncode in (0, 1), done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["ok"], "\n".join(verdict["problems"])
    assert done.returncode == 0
    servers = verdict["servers"]
    assert len(servers) == 8
    assert sum(s["calls"] for s in servers.values()) > 100 * duration / 10
    assert sum(s["faults"] for s in servers.values()) > 0  # the plans did inject
    assert sum(s["restarts"] for s in servers.values()) > 0  # and the tree repaired them
    checked = {"calls", "deadlines", "executions", "restarts", "catalog", "processes", "resources"}
    assert checked <= set(verdict["checked"])
    page = (ARTIFACTS / "soak.html").read_text()
    assert page.count('class="timeline"') == 8 or page.count("data-server=") >= 8
    report = json.loads((ARTIFACTS / "soak.json").read_text())
    assert report["verdict"]["ok"] is True
