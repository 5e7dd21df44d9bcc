"""A local server's stderr tail is its own words: the echo of our ``server/discover`` probe
(an mcp 1.x server's pydantic errors) is told apart and left out of crash reasons and
``mcp.local.crashed``'s ``stderr_tail``; what the server itself wrote stays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from supervisor import open_supervisor
from supervisor.transports._stderr import StderrTail

from .probes import until

HERE = Path(__file__).resolve().parent
SERVER = HERE / "mcp1_server.py"
ECHO = (HERE / "mcp1_discover_stderr.txt").read_text().splitlines()
#: The environment variable naming a Python that has mcp 1.x (``pip install 'mcp<2'``).
MCP1_PYTHON = "MCP_SUPERVISOR_MCP1_PYTHON"


def feed(tail: StderrTail, lines: list[str]) -> None:
    """Hand ``lines`` to ``tail`` as its reader does: read, then split."""
    for line in lines:
        size = len(line.encode()) + 1
        tail.received(size)
        tail.add(line, size)


def size(lines: list[str]) -> int:
    return sum(len(line.encode()) + 1 for line in lines)


def test_the_tail_is_a_sequence_of_its_lines() -> None:
    """Whoever reads a tail may slice it, reverse it, search it, as any sequence of
    strings (a slice of the deque underneath raised ``TypeError``)."""
    tail = StderrTail(3)
    feed(tail, ["one", "two", "three", "four"])  # the oldest falls out
    assert isinstance(tail, Sequence)
    assert tail[-2:] == ["three", "four"]
    assert tail[0] == "two"
    assert list(reversed(tail)) == ["four", "three", "two"]
    assert "three" in tail and "one" not in tail
    assert tail.index("four") == 2


class TestStderrTail:
    """Which lines are the probe's echo, from their positions and words."""

    def test_the_echo_of_a_refused_probe_is_left_out(self) -> None:
        """An mcp 1.x echo between the probe and its error answer: none of it stays;
        lines before the probe and after the answer do."""
        tail = StderrTail(200)
        feed(tail, ["starting"])
        tail.probe_sent(0)
        feed(tail, ECHO)
        tail.probe_answered(True, 0)
        feed(tail, ["serving"])
        assert list(tail) == ["starting", "serving"]

    def test_echo_still_in_the_pipe_at_the_answer_is_left_out(self) -> None:
        """The answer is read before the echo's bytes (two pipes, read as they come):
        the bytes waiting in stderr's pipe then are the window's end all the same."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        tail.probe_answered(True, size(ECHO))
        feed(tail, ECHO[:10])
        assert len(tail) == 10  # not yet settled: the rest is still to come
        feed(tail, [*ECHO[10:], "after the answer"])
        assert list(tail) == ["after the answer"]

    def test_own_words_in_the_window_before_the_echo_stay(self) -> None:
        """A warning written while the server started (the probe already in its stdin)
        is the server's own: only the record naming the method goes."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        feed(tail, ["warning: CALC_PRECISION is not set", "using 2", *ECHO])
        tail.probe_answered(True, 0)
        assert list(tail) == ["warning: CALC_PRECISION is not set", "using 2"]

    def test_the_echo_is_headed_by_its_record_line(self) -> None:
        """The heading line before the first naming the method goes with it (at most
        two lines back); an earlier line that merely says 'validation' stays."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        feed(
            tail,
            [
                "config validation passed",
                "ready",
                "Failed to validate request: 2 validation errors for ClientRequest",
                "PingRequest.method",
                "  Input should be 'ping' [input_value='server/discover']",
            ],
        )
        tail.probe_answered(True, 0)
        assert list(tail) == ["config validation passed", "ready"]

    def test_a_window_that_never_names_the_method_keeps_everything(self) -> None:
        """A server that refuses the probe silently and prints a banner meanwhile (as a
        TypeScript one does): the banner is its own."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        feed(tail, ["Secure MCP Filesystem Server running on stdio"])
        tail.probe_answered(True, 0)
        assert list(tail) == ["Secure MCP Filesystem Server running on stdio"]

    @pytest.mark.parametrize("answer", ["result", "none"])
    def test_nothing_goes_unless_the_probe_is_refused(self, answer: str) -> None:
        """A probe answered with a result, or never answered (a server dying at start:
        its traceback names what it was reading), leaves every line."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        lines = ["Traceback: while reading server/discover", "ValueError: boom"]
        feed(tail, lines)
        if answer == "result":
            tail.probe_answered(False, 0)
        assert list(tail) == lines

    def test_lines_before_the_probe_are_never_the_echo(self) -> None:
        """Lines written before the probe was sent (counted with what was in the pipe
        then) stay, whatever they say."""
        tail = StderrTail(200)
        tail.probe_sent(size(["listening for server/discover"]))
        feed(tail, ["listening for server/discover", *ECHO])
        tail.probe_answered(True, 0)
        assert list(tail) == ["listening for server/discover"]

    def test_only_the_first_probe_counts(self) -> None:
        """A later probe (a ping) is never an echo window."""
        tail = StderrTail(200)
        tail.probe_sent(0)
        tail.probe_answered(False, 0)
        tail.probe_sent(0)
        feed(tail, ECHO[:3])
        tail.probe_answered(True, 0)
        assert list(tail) == ECHO[:3]


def config(command: str, *args: str) -> dict[str, object]:
    return {
        "mcpServers": {
            "calc": {"command": command, "args": list(args), "lazy": False, "maxRestarts": 0}
        }
    }


async def killed(cfg: dict[str, object]) -> tuple[list[str], str]:
    """Connect, kill -9 the server: its crash event's ``stderr_tail`` and its reason."""
    async with open_supervisor(cfg) as sup, sup.subscribe("mcp.local.crashed") as crashes:
        await sup.connect_all(timeout=60)
        os.kill(sup.status()["calc"].pid, signal.SIGKILL)
        crash = await crashes.receive()
        await until(lambda: sup.status()["calc"].status == "failed", 30)
        return crash.stderr_tail, sup.status()["calc"].last_error


async def test_an_mcp1_server_killed_is_reported_in_its_own_words() -> None:
    """kill -9 of a server that met the probe as mcp 1.x does: the reason's last stderr
    line is the server's own last line, and the crash's tail has no pydantic echo — but
    the warning it wrote while starting, inside the probe's window, is there."""
    warn = "calc: warning: CALC_PRECISION is not set; using 2"
    said = "calc: listed 1 tool"
    tail, reason = await killed(
        config(sys.executable, str(SERVER), "--warn", warn, "--say-at-list", said)
    )
    assert tail == [warn, said]
    assert reason.endswith(f"was killed by signal 9; last stderr line: {said!r}")


async def test_an_mcp1_server_that_says_nothing_after_the_echo_has_no_last_line() -> None:
    """Nothing of its own on stderr: the reason names the signal and no probe noise."""
    tail, reason = await killed(config(sys.executable, str(SERVER)))
    assert tail == []
    assert reason.endswith("was killed by signal 9") and "pydantic" not in reason


def mcp1_python() -> str:
    """The interpreter named by ``$MCP_SUPERVISOR_MCP1_PYTHON`` (one with ``mcp<2``);
    else the test is skipped."""
    named = os.environ.get(MCP1_PYTHON)
    if not named:
        pytest.skip(f"set ${MCP1_PYTHON} to the python of an environment with 'mcp<2'")
    version = subprocess.run(
        [named, "-c", "import mcp, importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version.startswith("1."), f"${MCP1_PYTHON} has mcp {version}, not 1.x"
    return named


@pytest.mark.parametrize("kind", ["lowlevel", "fastmcp"])
async def test_a_real_mcp1_server_killed_is_reported_in_its_own_words(
    kind: str, tmp_path: Path
) -> None:
    """The same against real mcp 1.x servers (a low-level ``Server``; a ``FastMCP``
    one, which logs each request it processes): no pydantic line in the tail or the
    reason; the start-up warning and FastMCP's own lines stay."""
    python = mcp1_python()
    warn = "calc: warning: CALC_PRECISION is not set; using 2"
    script = tmp_path / "server.py"
    body = {
        "lowlevel": """
            import anyio
            import mcp.types as types
            from mcp.server.lowlevel import Server
            from mcp.server.stdio import stdio_server

            app = Server("calc")

            @app.list_tools()
            async def list_tools():
                return [types.Tool(name="add", inputSchema={"type": "object"})]

            async def main():
                async with stdio_server() as (read, write):
                    await app.run(read, write, app.create_initialization_options())

            anyio.run(main)
        """,
        "fastmcp": """
            from mcp.server.fastmcp import FastMCP

            app = FastMCP("calc")

            @app.tool()
            def add(a: int, b: int) -> int:
                return a + b

            app.run()
        """,
    }[kind]
    script.write_text(
        f"import sys\nprint({warn!r}, file=sys.stderr, flush=True)\n" + textwrap.dedent(body)
    )
    tail, reason = await killed(config(python, str(script)))
    assert tail[0] == warn
    assert not any("pydantic" in line or "server/discover" in line for line in tail)
    assert "pydantic" not in reason and "server/discover" not in reason
    if kind == "lowlevel":
        assert tail == [warn] and reason.endswith(f"last stderr line: {warn!r}")
    else:  # FastMCP logs each request it processes, in the order it gets to them
        assert tail[1:] and all(line.startswith("Processing request of type ") for line in tail[1:])
        assert reason.endswith(f"last stderr line: {tail[-1]!r}")
