"""An agent loop tested under faults with mcp-supervisor's pytest plugin.

Run it::

    pytest examples/test_agent_under_faults.py

The plugin (installed with mcp-supervisor; it needs pytest-trio) gives each test the
fixtures ``mcp_servers`` — fixture MCP servers, each behind an optional fault plan, and a
supervisor over them that records every tool call — and ``mcp_checker``, which fails the
test at its end if a call was lost (no answer and no error), executed twice, or answered
after its deadline, or if a server process was left behind.

The agent under test, :func:`run_agent`, works through a list of jobs by calling the
``echo`` tool of its preferred server and falls back to another server when the preferred
one fails — but only because ``echo`` is annotated read-only and idempotent: a call whose
connection died may already have run, and running it again must be harmless.
"""

from __future__ import annotations

import pytest

from supervisor import CallMayHaveTakenEffect, ServerUnavailable, ToolCallTimeout

#: the faults the primary server suffers: a crash on its 3rd call, its 6th answer lost
#: (the answer to the 7th call: the 3rd got none), and a crash again on its 9th call
PLAN = {
    "seed": 1,
    "rules": [
        {"when": {"method": "tools/call", "nth": 3}, "do": "kill"},
        {"when": {"method": "tools/call", "direction": "to_client", "nth": 6}, "do": "drop"},
        {"when": {"method": "tools/call", "nth": 9}, "do": "kill"},
    ],
}


async def run_agent(sup, jobs: list[str], servers: list[str]) -> dict[str, str]:  # noqa: ANN001
    """Do each job (echo its text) on the first of ``servers`` that answers; return who
    did what."""
    done: dict[str, str] = {}
    for job in jobs:
        for server in servers:
            try:
                result = await sup.call(f"{server}_echo", {"text": job}, timeout=5)
            except (ServerUnavailable, CallMayHaveTakenEffect, ToolCallTimeout):
                continue  # echo is idempotent: trying the next server is safe
            assert result.text == job
            done[job] = server
            break
        else:
            raise RuntimeError(f"no server could do {job!r}")
    return done


async def test_the_agent_finishes_every_job_through_crashes_and_lost_answers(
    mcp_servers, mcp_checker
) -> None:  # noqa: ANN001
    mcp_servers.stdio("primary", faults=PLAN)
    mcp_servers.stdio("backup")
    config = mcp_servers.config(backoff={"local": {"initial": 0.05, "max": 0.1}})
    jobs = [f"job-{i}" for i in range(12)]
    async with mcp_servers.supervise(config) as sup:
        await sup.connect_all()  # both up before the first job, as a long-running agent is
        done = await run_agent(sup, jobs, ["primary", "backup"])
        injected = [fault.action for fault in sup.faults()]
    assert set(done) == set(jobs)
    assert injected == ["kill", "drop", "kill"]
    # the three jobs a fault caught were done by the backup (others may be too, if the
    # primary was still restarting when they came)
    by_backup = {job for job, server in done.items() if server == "backup"}
    assert {"job-2", "job-6", "job-8"} <= by_backup
    # mcp_checker now checks, at the end of the test, that nothing was lost or duplicated


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_delays_and_errors_never_stop_the_agent(
    mcp_servers, mcp_checker, seed: int
) -> None:  # noqa: ANN001
    plan = {
        "seed": seed,
        "rules": [
            {
                "when": {"method": "tools/call", "direction": "to_client", "probability": 0.3},
                "do": {"delay_ms": 50, "jitter_ms": 200},
            },
            {
                "when": {"method": "tools/call", "probability": 0.2},
                "do": {"error": {"code": -32603, "message": "injected"}},
            },
        ],
    }
    mcp_servers.stdio("primary", faults=plan)
    mcp_servers.stdio("backup")
    async with mcp_servers.supervise() as sup:
        await sup.connect_all()
        done = await run_agent_tolerating_errors(sup, [f"job-{i}" for i in range(10)])
    assert len(done) == 10


async def run_agent_tolerating_errors(sup, jobs: list[str]) -> dict[str, str]:  # noqa: ANN001
    """:func:`run_agent`, also moving on when a server answers with an MCP error."""
    from supervisor import ServerRequestError

    done: dict[str, str] = {}
    for job in jobs:
        for server in ("primary", "backup"):
            try:
                await sup.call(f"{server}_echo", {"text": job}, timeout=5)
            except (ServerUnavailable, CallMayHaveTakenEffect, ToolCallTimeout, ServerRequestError):
                continue
            done[job] = server
            break
    return done
