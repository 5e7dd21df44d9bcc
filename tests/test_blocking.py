"""The supervisor from synchronous code and from a notebook: the blocking
``supervisor.Supervisor`` (a private asyncio loop hosting the trio runtime, run while a
method runs) and ``supervisor.asyncio.start_supervisor`` in a real Jupyter kernel (its
loop hosting the runtime from cell to cell) — calls, a kill -9 survived, Ctrl-C, and no
process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor import Supervisor
from supervisor.asyncio import open_supervisor, start_supervisor
from supervisor.testing.servers import stdio_params
from tests.test_asyncio import gone
from tests.test_gateway_fidelity import REFERENCE

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

WAIT = 30.0


def config() -> dict[str, object]:
    command, args = stdio_params("echo")
    return {"mcpServers": {"notes": {"command": command, "args": args, "approve": False}}}


def wait_until_gone(pid: int) -> None:
    deadline = time.monotonic() + WAIT
    while not gone(pid):
        assert time.monotonic() < deadline, f"pid {pid} still running"
        time.sleep(0.01)


def test_a_blocking_supervisor_calls_survives_a_kill_between_calls_and_stops() -> None:
    """``with Supervisor(config) as sup``: calls block until answered; a server killed
    between two calls (the supervisor waiting, not running) is seen and restarted by the
    next, which is answered; the block's end leaves no process."""
    with Supervisor(config()) as sup:
        first = sup.call("notes_echo", {"text": "one"}).text
        killed = sup.status()["notes"].pid
        os.kill(killed, signal.SIGKILL)
        wait_until_gone(killed)  # dead before the next call: it cannot have run
        second = sup.call("notes_echo", {"text": "two"}).text
        restarted = sup.status()["notes"].pid
        names = [entry.name for entry in sup.tools().values()]
    assert (first, second) == ("one", "two")
    assert restarted not in (None, killed) and gone(restarted)
    assert "notes_echo" in names


def test_a_blocking_supervisor_refuses_a_thread_with_a_running_asyncio_loop() -> None:
    """In an asyncio program (or a notebook) it refuses before starting anything, naming
    what to use there."""

    async def main() -> str:
        with pytest.raises(RuntimeError) as refused:
            Supervisor(config()).start()
        return str(refused.value)

    said = asyncio.run(main())
    assert "start_supervisor" in said and "open_supervisor" in said


def test_a_blocking_supervisor_started_and_closed_without_a_block() -> None:
    """``start()`` and ``close()`` for a REPL; a second ``close`` does nothing; a method
    of one not started says so."""
    sup = Supervisor(config())
    with pytest.raises(RuntimeError, match="not started"):
        sup.call("notes_echo", {"text": "x"})
    sup.start()
    try:
        assert sup.call("notes_echo", {"text": "repl"}).text == "repl"
        pid = sup.status()["notes"].pid
    finally:
        sup.close()
    sup.close()
    assert gone(pid)


PROGRAM = """
import sys
from supervisor import Supervisor

config = {"mcpServers": {"ref": {"command": sys.executable, "args": [sys.argv[1]],
                                 "autoApprove": ["wait"]}}}

async def running(done, total, message):
    print("running", flush=True)

with Supervisor(config) as sup:
    sup.connect_all()
    print(sup.status()["ref"].pid, flush=True)
    try:
        sup.call("ref_wait", {}, progress=running)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise
"""


def test_ctrl_c_during_a_blocking_call_cancels_it_and_stops_the_servers() -> None:
    """Ctrl-C (SIGINT) while a blocking call runs: the call is cancelled,
    ``KeyboardInterrupt`` leaves the block, which stops the server; the program exits."""
    program = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(REFERENCE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert program.stdout is not None
        pid = int(program.stdout.readline())
        assert program.stdout.readline() == "running\n"  # the call runs at the server
        program.send_signal(signal.SIGINT)
        rest, err = program.communicate(timeout=WAIT)
    finally:
        program.kill()
    assert rest == "interrupted\n"
    assert program.returncode != 0 and "KeyboardInterrupt" in err
    assert gone(pid)


# -- start_supervisor ------------------------------------------------------------------


def test_start_supervisor_lives_across_tasks_until_aclose() -> None:
    """Started in one task, used from others (as a notebook's cells are), ended by
    ``aclose`` from yet another; a second ``aclose`` does nothing, and a handle of an
    ``async with`` cannot be closed that way."""

    async def main() -> tuple[str, int]:
        sup = await asyncio.create_task(start_supervisor(config()))
        said = await asyncio.create_task(sup.call("notes_echo", {"text": "cell"}))
        pid = (await sup.status())["notes"].pid
        await asyncio.create_task(sup.aclose())
        await sup.aclose()
        async with open_supervisor(config()) as other:
            with pytest.raises(RuntimeError, match="async with"):
                await other.aclose()
        return said.text, pid

    said, pid = asyncio.run(main())
    assert said == "cell" and gone(pid)


# -- a real Jupyter kernel -------------------------------------------------------------


class Kernel:
    """A Jupyter kernel (ipykernel, started by jupyter_client) running cells."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", startup_timeout=60)

    def run(self, code: str) -> str:
        """Run ``code`` as a cell: what it printed and its value's repr; a cell that
        raised fails the test with its error."""
        msg_id = self.client.execute(code)
        out: list[str] = []
        while True:
            msg = self.client.get_iopub_msg(timeout=WAIT)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                out.append(content["text"])
            elif kind == "execute_result":
                out.append(content["data"]["text/plain"] + "\n")
            elif kind == "error":
                pytest.fail(f"the cell raised {content['ename']}: {content['evalue']}\n{code}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    pytest.importorskip("ipykernel")
    pytest.importorskip("jupyter_client")
    started = Kernel()
    try:
        yield started
    finally:
        started.close()


def notebook_cells(config_path: Path) -> list[str]:
    """The cells of docs/asyncio.md's "In a notebook", over the config at ``config_path``."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "asyncio.md").read_text()
    section = page.split("\n## In a notebook\n", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"```py\n(.*?)```", section, re.S)
    assert len(cells) == 3 and '"mcp.json"' in cells[0]
    return [cell.replace('"mcp.json"', repr(str(config_path))) for cell in cells]


def test_a_notebook_keeps_the_supervisor_from_cell_to_cell(kernel: Kernel, tmp_path: Path) -> None:
    """The cells of docs/asyncio.md in a Jupyter kernel: ``await start_supervisor(…)`` in
    one cell, a call from the next; then a kill -9 from a cell, the server restarted
    while no cell runs (the kernel's loop hosts the runtime), the next cell's call
    answered; ``await sup.aclose()`` stops it, and no process is left."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config()))
    start, call, close = notebook_cells(path)
    assert kernel.run(start) == ""
    assert kernel.run(call) == "'from a cell'\n"
    first = int(
        kernel.run("import os, signal\npid = (await sup.status())['notes'].pid\nprint(pid)")
    )
    kernel.run("os.kill(pid, signal.SIGKILL)")
    wait_until_gone(first)
    # the restart happens between cells: wait for it here, not in the kernel
    deadline = time.monotonic() + WAIT
    while (now := kernel.run("print(sup.trio_handle.status()['notes'].pid)")).strip() in (
        "None",
        str(first),
    ):
        assert time.monotonic() < deadline, now
        time.sleep(0.05)
    restarted = int(now)
    assert kernel.run("(await sup.call('notes_echo', {'text': 'again'})).text") == "'again'\n"
    assert kernel.run(close) == ""
    assert gone(restarted)


def test_a_blocking_supervisor_reconfigures() -> None:
    """``sup.reconfigure(config)`` from plain code: a removed server's tools are gone,
    its process stopped; what stayed is answered as before."""
    command, args = stdio_params("echo")
    entry = {"command": command, "args": args, "approve": False}
    with Supervisor({"mcpServers": {"notes": entry, "extra": entry}}) as sup:
        sup.connect_all()
        extra = sup.status()["extra"].pid
        change = sup.reconfigure({"mcpServers": {"notes": entry}})
        assert change.removed == ("extra",)
        assert extra is not None and gone(extra)
        assert "extra_echo" not in [e.name for e in sup.tools().values()]
        assert sup.call("notes_echo", {"text": "kept"}).text == "kept"
