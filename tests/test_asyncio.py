"""supervisor.asyncio: the supervisor hosted by an asyncio loop (trio's guest mode) —
asyncio's own loop and uvloop — against real fixture servers: calls, events, a kill -9
survived, an asyncio cancellation that cancels the call at the server, asyncio
callbacks, the runtime's errors at the ``async with``, and no process left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import uvloop

from supervisor.asyncio import open_supervisor
from supervisor.errors import ApprovalDenied, ConfigError
from supervisor.faults import CallHistory
from supervisor.testing.servers import stdio_params
from tests.test_gateway_fidelity import REFERENCE

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

WAIT = 20.0
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run(loop: str, main: Callable[[], Awaitable[Any]]) -> Any:
    """``main()`` to its end on a fresh loop of that kind, as ``asyncio.run`` does."""
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(asyncio.wait_for(main(), WAIT))


def config(**extra: object) -> dict[str, object]:
    command, args = stdio_params("echo")
    servers: dict[str, object] = {
        "echo": {"command": command, "args": args, "approve": False},
        "ref": {
            "command": sys.executable,
            "args": [str(REFERENCE)],
            "autoApprove": ["wait", "cancelled", "chatter"],
            **extra,
        },
    }
    return {"mcpServers": servers}


def gone(pid: int) -> bool:
    """Whether process ``pid`` has exited, every thread of it (a zombie nobody reaped
    yet has): until its last thread has, its pipes stay open."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for thread in threads:
        try:
            stat = (thread / "stat").read_text()
        except OSError:
            # The thread went between the listing and the read (a process being reaped
            # answers ESRCH to a read of a file it still lists).
            continue
        if stat.rpartition(")")[2].split()[0] != "Z":
            return False
    return True


@pytest.mark.parametrize("loop", LOOPS)
def test_an_asyncio_program_calls_survives_a_kill_and_leaves_nothing_behind(loop: str) -> None:
    """Calls from asyncio, the events of a kill -9 of a server as they come (the server
    restarted, its next call answered), and once the block is left no server process."""

    async def main() -> tuple[list[str], list[str], list[int]]:
        answers: list[str] = []
        kinds: list[str] = []
        async with open_supervisor(config()) as sup:
            await sup.connect_all()
            answers.append((await sup.call("echo_echo", {"text": "one"})).text)
            status = await sup.status()
            pids = [record.pid for record in status.values()]
            first = status["echo"].pid

            async with sup.subscribe("mcp.*") as events:
                os.kill(first, signal.SIGKILL)
                async for event in events:
                    kinds.append(event.kind)
                    if event.kind == "mcp.connected":
                        break
            answers.append((await sup.call("echo_echo", {"text": "two"})).text)
            pids.append((await sup.status())["echo"].pid)
        return answers, kinds, pids

    answers, kinds, pids = run(loop, main)
    assert answers == ["one", "two"]
    assert kinds[0] == "mcp.local.crashed" and kinds[-1] == "mcp.connected"
    assert len(set(pids)) == 3 and all(gone(pid) for pid in pids)


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelling_the_asyncio_task_cancels_the_call_at_the_server(loop: str) -> None:
    """The reference server's ``wait`` runs until cancelled: cancelling the asyncio task
    awaiting it gets ``notifications/cancelled`` to the server (its ``cancelled`` says
    so), and the task ends cancelled."""

    history = CallHistory()

    async def main() -> tuple[bool, str]:
        async with open_supervisor(config(), history=history) as sup:
            await sup.connect_all()
            running = asyncio.Event()

            async def progress(done: float, total: float | None, message: str | None) -> None:
                running.set()  # (run by the trio side, in the loop's thread)

            waiting = asyncio.create_task(sup.call("ref_wait", {}, progress=progress))
            await running.wait()  # sent, and running there: it reported progress
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            said = (await sup.call("ref_cancelled", {})).text
        return waiting.cancelled(), said

    assert run(loop, main) == (True, "cancelled")
    assert [c.outcome for c in history.calls if c.tool == "ref_wait"] == ["info"]


@pytest.mark.parametrize("loop", LOOPS)
def test_calls_made_at_once_run_at_once_and_back_to_back(loop: str) -> None:
    """Three calls awaited at once run at the server at once (each of the reference
    server's ``wait`` reports progress when it runs, and runs until cancelled: all three
    report), whether or not a call just answered left trio awake; then calls back to
    back, and at once again, are answered."""

    async def main() -> tuple[list[str], list[str]]:
        async with open_supervisor(config()) as sup:
            await sup.connect_all()
            for attempt in range(2):  # from idle, then right after an answer
                running = asyncio.Semaphore(0)

                async def progress(*_: object, running: asyncio.Semaphore = running) -> None:
                    running.release()

                calls = [
                    asyncio.create_task(sup.call("ref_wait", {}, progress=progress))
                    for _ in range(3)
                ]
                for _ in calls:
                    await running.acquire()  # each runs at the server
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
                if attempt == 0:
                    await sup.call("echo_echo", {"text": "awake"})
            back_to_back = [(await sup.call("echo_echo", {"text": str(i)})).text for i in range(5)]
            together = await asyncio.gather(
                *(sup.call("echo_echo", {"text": str(i)}) for i in range(5))
            )
        return back_to_back, [result.text for result in together]

    back_to_back, together = run(loop, main)
    assert back_to_back == together == ["0", "1", "2", "3", "4"]


def test_asyncio_callbacks_decide_approval_and_answer_elicitation() -> None:
    """``approve`` and ``elicitation_callback`` given as asyncio coroutine functions are
    run on asyncio: a refusal is ``ApprovalDenied`` (nothing sent), an acceptance runs
    the call, and the reference server's question (``confirm``, session-based
    protocol) is answered by the asyncio elicitation callback."""
    asked: list[str] = []

    async def approve(request: Any) -> bool:
        await asyncio.sleep(0)  # an asyncio await, in an asyncio task
        asked.append(request.tool)
        return request.tool == "ref_confirm"

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        await asyncio.sleep(0)
        return types.ElicitResult(action="accept")

    async def main() -> tuple[str, str]:
        async with open_supervisor(
            config(), approve=approve, elicitation_callback=elicit, mode="legacy"
        ) as sup:
            await sup.connect_all()
            try:
                await sup.call("ref_touch", {"uri": "note:///news"})
                refused = "sent"
            except ApprovalDenied:
                refused = "refused"
            confirmed = (await sup.call("ref_confirm", {})).text
        return refused, confirmed

    assert run("asyncio", main) == ("refused", "accept")
    assert asked == ["ref_touch", "ref_confirm"]


def test_the_runtime_s_error_surfaces_at_the_async_with() -> None:
    """A config the runtime refuses raises its ``ConfigError`` at the ``async with``, and
    the loop goes on."""

    async def main() -> str:
        with pytest.raises(ConfigError):
            async with open_supervisor({"mcpServers": {"x": {"command": 5}}}):
                raise AssertionError("not reached")
        return "went on"

    assert run("asyncio", main) == "went on"


def test_the_handle_reads_resources_and_prompts_and_reports() -> None:
    """The rest of the handle, awaited: resources and a read, prompts and a prompt, a
    search of the catalog, the servers' metrics."""

    async def main() -> tuple[Any, ...]:
        command, args = stdio_params("rich")
        rich = {"mcpServers": {"rich": {"command": command, "args": args, "approve": False}}}
        async with open_supervisor(rich) as sup:
            await sup.connect_all()
            resources = [r.uri for r in await sup.resources()]
            read = await sup.read_resource("notes://index")
            prompts = [p.name for p in await sup.prompts()]
            [summarize] = [name for name in prompts if name.endswith("summarize")]
            prompt = await sup.get_prompt(summarize, {"title": "gateway"})
            found = [s.name for s in await sup.search("note", 3)]
            metrics = await sup.metrics()
        return resources, read, prompt, found, metrics

    resources, read, prompt, found, metrics = run("asyncio", main)
    assert "notes://index" in resources
    assert read.contents and read.contents[0].uri == "notes://index"
    assert prompt.messages[0].content.text == "Summarize note gateway"
    assert found and "rich" in metrics


PROGRAM = """
import asyncio, sys
from supervisor.asyncio import open_supervisor

async def main():
    config = {"mcpServers": {"echo": {"command": sys.argv[1], "args": sys.argv[2:]}}}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        print((await sup.status())["echo"].pid, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


def test_ctrl_c_of_an_asyncio_program_stops_its_servers() -> None:
    """Ctrl-C (SIGINT) of an ``asyncio.run`` program in the block: asyncio cancels its
    main task, which leaves the block — the program exits, its server process with it."""
    import subprocess

    command, args = stdio_params("echo")
    program = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert program.stdout is not None
        pid = int(program.stdout.readline())
        program.send_signal(signal.SIGINT)
        program.wait(timeout=WAIT)
    finally:
        program.kill()
    assert gone(pid)


def test_run_call_refuses_to_block_a_running_asyncio_loop() -> None:
    """``supervisor.run_call`` in an asyncio program says to use supervisor.asyncio,
    starting nothing."""
    from supervisor import run_call

    async def main() -> str:
        with pytest.raises(RuntimeError) as refused:
            run_call(config(), "echo_echo", {"text": "x"})
        return str(refused.value)

    assert "supervisor.asyncio" in run("asyncio", main)


def test_a_reader_that_falls_behind_loses_the_oldest_events_and_is_told() -> None:
    """Events wait in the bus's bounded buffer until the asyncio reader takes them: one
    that reads nothing while a restart publishes more than its ``buffer`` gets a
    ``bus.dropped`` event counting what it lost."""

    async def main() -> list[str]:
        kinds: list[str] = []
        async with open_supervisor(config()) as sup:
            await sup.connect_all()
            async with sup.subscribe("mcp.*", buffer=2) as events:
                await sup.restart("echo")  # read nothing meanwhile
                await sup.connect_all()
                async for event in events:
                    kinds.append(event.kind)
                    if event.kind == "bus.dropped":
                        assert event.count >= 1  # type: ignore[attr-defined]
                        break
        return kinds

    assert run("asyncio", main)[-1] == "bus.dropped"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_asyncio_program_reconfigures_its_supervisor(loop: str) -> None:
    """``await sup.reconfigure(config)`` from asyncio: the added server's tool is
    called, the unchanged one kept its process; a bad config raises ConfigError."""
    from supervisor.errors import ConfigError

    command, args = stdio_params("echo")
    one = {"mcpServers": {"a": {"command": command, "args": args, "approve": False}}}
    two = {"mcpServers": {**one["mcpServers"], "b": one["mcpServers"]["a"]}}

    async def main() -> tuple[Any, ...]:
        async with open_supervisor(one) as sup:
            await sup.connect_all()
            before = (await sup.status())["a"].pid
            change = await sup.reconfigure(two)
            text = (await sup.call("b_echo", {"text": "added"})).text
            with pytest.raises(ConfigError):
                await sup.reconfigure({"mcpServers": {"a": {"command": 3}}})
            return change.added, text, before == (await sup.status())["a"].pid

    assert run(loop, main) == (("b",), "added", True)
