"""The pytest plugin: fixture servers and a supervisor over them with a fault plan, and a
checker that fails a test on a lost or duplicated call. The checker's own failures are
shown on inner pytest runs (``pytester``)."""

from __future__ import annotations

import pytest

from supervisor.errors import CallMayHaveTakenEffect
from supervisor.testing.plugin import CallChecker, FixtureServers

pytest_plugins = ["pytester"]

KILL_SECOND_ADD = [{"when": {"tool": "add", "nth": 2}, "do": "kill"}]


async def test_a_crash_loses_nothing(mcp_servers: FixtureServers, mcp_checker: CallChecker) -> None:
    mcp_servers.stdio("calc", faults=KILL_SECOND_ADD)
    await mcp_servers.http("notes")
    config = mcp_servers.config(backoff={"local": {"initial": 0.05, "max": 0.05}})
    async with mcp_servers.supervise(config) as sup:
        assert (await sup.call("calc_add", {"a": 1, "b": 2})).text == "3"
        with pytest.raises(CallMayHaveTakenEffect):
            await sup.call("calc_add", {"a": 2, "b": 2})
        assert (await sup.call("calc_add", {"a": 3, "b": 2})).text == "5"  # restarted
        assert (await sup.call("notes_echo", {"text": "hi"})).text == "hi"
        assert [f.action for f in sup.faults()] == ["kill"]
    verdict = mcp_checker.verdict()
    assert verdict.ok, verdict.problems
    calc = verdict.servers["calc"]
    assert (calc.calls, calc.ok, calc.indefinite, calc.faults) == (3, 2, 1, 1)
    assert verdict.servers["notes"].ok == 1
    # the kill came before the second add reached the server: it never ran; the others once
    executed = mcp_servers.executions()
    killed = [c.call_id for c in sup.history.calls if c.outcome == "info"]
    assert sorted(executed.values()) == [1, 1, 1] and killed[0] not in executed


INNER = """
import pytest

async def test_inner(mcp_servers, mcp_checker):
    mcp_servers.stdio("calc")
    async with mcp_servers.supervise() as sup:
        await sup.call("calc_echo", {"text": "one"})
        {fault}
"""

LOSE_A_REPLY = "sup.history.invoke('calc_echo', server='calc')  # never answered"
EXECUTE_TWICE = (
    "call = sup.history.calls[0]\n"
    "        with open(mcp_servers.count_file('calc'), 'a') as f:\n"
    "            f.write('echo\\t' + call.call_id + '\\n')"
)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (LOSE_A_REPLY, "was lost: no answer and no error by the end of the run"),
        (EXECUTE_TWICE, "was executed 2 times: duplicated"),
    ],
    ids=["lost", "duplicated"],
)
def test_the_checker_fails_a_test_that_lost_or_duplicated_a_call(
    pytester: pytest.Pytester, fault: str, said: str
) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(INNER.replace("{fault}", fault))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)  # pytest-trio tears fixtures down inside the test
    output = result.stdout.str()
    assert "the call checker found problems" in output
    assert said in output
    assert "report: " in output and "report.html" in output


def test_a_test_without_faults_passes_the_checker(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(INNER.replace("{fault}", "pass"))
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
