"""A request's receipt: whether it reached the server, and whether its answer came back.

Sending a request again elsewhere is safe only if it never reached the server *and never
will*: giving it up (``withdraw``) and handing it over (``deliver``) exclude each other,
so a writer that gets to a withdrawn request late drops it. And a "Connection closed"
after an answer that never reached the SDK is the connection's end, not the server's
own error answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
import trio
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from trio.testing import wait_all_tasks_blocked

from supervisor.transports._forward import FIRST_ID
from supervisor.transports._receipts import Receipt, connection_closed, delivery
from supervisor.transports._stdio import StdioTransport

WAIT = 30.0


def test_a_withdrawn_request_is_never_delivered() -> None:
    """Withdrawn while queued, a request cannot be delivered after; delivered, it can no
    longer be withdrawn; a transport that cannot tell (``None``) never withdraws."""
    queued = Receipt()
    queued.delivered = False
    assert queued.withdraw()
    assert not queued.deliver()
    assert queued.delivered is False

    sent = Receipt()
    sent.delivered = False
    assert sent.deliver()
    assert not sent.withdraw()

    untracked = Receipt()
    assert not untracked.withdraw()


def _closed() -> MCPError:
    return MCPError(types.CONNECTION_CLOSED, "Connection closed")


def test_connection_closed_after_an_answer_that_did_not_arrive_is_the_connection_s() -> None:
    """No answer, or an answer that was a result (or another error) yet the request says
    "Connection closed": the connection ended. The server's own -32000 answer is its own."""
    unanswered = Receipt()
    assert connection_closed(_closed(), unanswered)

    result_lost = Receipt()
    result_lost.answered = True  # the answer was a result, lost on the way in
    assert connection_closed(_closed(), result_lost)

    own = Receipt()
    own.answered, own.answer_code = True, types.CONNECTION_CLOSED
    assert not connection_closed(_closed(), own)
    assert not connection_closed(MCPError(types.INTERNAL_ERROR, "boom"), unanswered)


def _request(request_id: int, text: str) -> SessionMessage:
    params = {"name": "echo", "arguments": {"text": text}}
    return SessionMessage(
        types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call", params=params)
    )


async def test_a_request_withdrawn_while_the_writer_was_busy_is_not_written(
    tmp_path: Path,
) -> None:
    """A real child that reads its stdin only when told: a request bigger than the pipe
    keeps the writer busy, the next request waits its turn and is withdrawn; once the
    child reads, the big request and a later one reach it, the withdrawn one never."""
    go, out = tmp_path / "go", tmp_path / "out"
    os.mkfifo(go)  # the child's open blocks until the test opens the other end
    child = (
        "import sys\n"
        f"open({str(go)!r}).close()\n"
        f"with open({str(out)!r}, 'w') as out:\n"
        "    for line in sys.stdin:\n"
        "        out.write(line[:60] + '\\n'); out.flush()\n"
    )
    transport = StdioTransport(sys.executable, ["-c", child], grace=10.0, kill_after=1.0)
    big, withdrawn, later = Receipt(), Receipt(), Receipt()

    async def send(receipt: Receipt, message: SessionMessage) -> None:
        delivery.set(receipt)
        await write.send(message)

    with trio.fail_after(WAIT):
        async with transport as (_, write), trio.open_nursery() as nursery:
            nursery.start_soon(send, big, _request(1, "x" * 1_000_000))
            await wait_all_tasks_blocked()
            assert big.delivered is True  # in the pipe, which is full
            nursery.start_soon(send, withdrawn, _request(2, "never"))
            await wait_all_tasks_blocked()
            assert withdrawn.delivered is False  # waiting for the writer
            assert withdrawn.withdraw()
            os.close(os.open(go, os.O_WRONLY))  # go: the child is waiting on the other end
            await send(later, _request(3, "later"))  # taken once the big one is written
            await write.aclose()  # the child reads to the end, then exits
    written = out.read_text()
    assert '"id":1' in written and '"id":3' in written
    assert '"id":2' not in written
    assert withdrawn.delivered is False and later.delivered is True


async def test_a_message_is_written_in_its_senders_task_and_overtakes_none() -> None:
    """While the writer waits for its next message, a message goes into the pipe in its
    sender's task: delivered before its sender goes on, no hop to the writer's task. One
    handed to the writer but not yet written is overtaken by nothing: a forwarded
    request made right after it waits its turn (a real child echoes what it reads)."""
    child = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()\n"
    transport = StdioTransport(sys.executable, ["-c", child], grace=10.0, kill_after=1.0)
    now = Receipt()
    with trio.fail_after(WAIT):
        async with transport as (read, write):
            await wait_all_tasks_blocked()  # the writer waits for its first message
            token = delivery.set(now)
            try:
                await write.send(_request(1, "now"))
            finally:
                delivery.reset(token)
            assert now.delivered is True  # in the pipe as its sender goes on
            await wait_all_tasks_blocked()
            # Longer than the pipe takes in one write: handed to the writer, not written
            # yet when its sender goes on, and the forwarded request comes right after.
            await write.send(_request(2, "x" * 5000))
            echoed: list[object] = []
            async with trio.open_nursery() as nursery:

                async def echoes() -> None:
                    while len(echoed) < 3:
                        item = await read.receive()
                        assert isinstance(item, SessionMessage)
                        echoed.append(getattr(item.message, "id", None))
                    nursery.cancel_scope.cancel()

                nursery.start_soon(echoes)
                await transport.forwarding.request("tools/call", b'{"name":"echo"}')
            await write.aclose()  # as a session ends: the writer is done
    assert echoed == [1, 2, FIRST_ID]


def test_a_process_s_state_is_read_from_its_proc_stat(tmp_path: Path) -> None:
    """``process_state`` reads a ``/proc/PID/stat`` as the kernel writes it: the state
    after the command's name (which may hold parentheses and spaces), the flags (the 9th
    field) and the pending mask (the 31st), decimal: a process with SIGKILL pending or
    marked ``PF_SIGNALED`` is being killed (a zombie main thread too, while the others
    exit), any other zombie or dead one has exited, and what cannot be read is taken as
    running."""
    from supervisor.transports._intake import DYING, GONE, LIVE, process_state

    def stat(name: str, state: str, pending: int | str, flags: int = 4194304) -> int:
        # fields 4-30 as a real one has them, then the signal masks: pending, blocked...
        middle = f"1 1 1 0 -1 {flags} 99 0 1 0 0 0 0 0 20 0 1 0 7404015 3133440 402"
        middle += " 18446744073709551615 9433804777 9433804779 1407284550 0 0"
        path = tmp_path / "stat"
        path.write_text(f"4242 ({name}) {state} {middle} {pending} 0 0 0 17 1 0 0 0 0 0\n")
        fd = os.open(path, os.O_RDONLY)
        try:
            return process_state(fd)
        finally:
            os.close(fd)

    kill, usr1 = 1 << 8, 1 << 9  # SIGKILL is 9, SIGUSR1 10
    assert stat("echo", "S", 0) == LIVE
    assert stat("echo", "S", kill) == DYING
    assert stat("echo", "R", kill | usr1) == DYING
    assert stat("echo", "S", usr1) == LIVE
    assert stat("echo", "R", 0, flags=0x400 | 0x4 | 4194304) == DYING  # acting on it
    assert stat("echo", "R", 0, flags=0x4 | 4194304) == LIVE  # exiting, not killed
    assert stat("a) R 1 (b", "S", kill) == DYING  # the last ')' ends the name
    assert stat("sp ace", "D", 0) == LIVE
    assert stat("echo", "Z", 0) == GONE
    assert stat("echo", "X", 0) == GONE
    assert stat("echo", "Z", 0, flags=0x400 | 0x4 | 4194304) == DYING
    assert stat("echo", "S", "nonsense") == LIVE
    assert stat("echo", "Z", "nonsense") == LIVE
    (tmp_path / "stat").write_text("4242 (echo) S 1 2\n")  # cut short: cannot be told
    fd = os.open(tmp_path / "stat", os.O_RDONLY)
    try:
        assert process_state(fd) == LIVE
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_sigkill_sent_to_a_process_is_read_from_its_proc_stat_before_it_acts(
    tmp_path: Path,
) -> None:
    """The kernel fact ``process_state`` relies on: a SIGKILL sent to a process is in
    its main thread's own pending mask — the one ``/proc/PID/stat`` shows — at once,
    before the process runs again, whichever of its threads it woke. The process (three
    threads) is held off its CPU by a real-time busy loop on that CPU while it is killed
    and read; its stat reads GONE once it was reaped."""
    from supervisor.transports._intake import DYING, GONE, LIVE, process_state, stat_fd

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs a second CPU to hold the process off")
    cpu, done = cpus[-1], tmp_path / "done"
    victim_code = (  # three threads, blocked until it is killed
        "import os, sys, threading\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "for _ in range(2): threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.buffer.read()\n"
    )
    hog_code = (  # on that CPU, before anything else, for a second at most
        "import os, sys, time\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "try:\n"
        "    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
        "except OSError:\n"
        "    print('refused', flush=True); sys.exit()\n"
        "print('holding', flush=True)\n"
        "end = time.monotonic() + 1.0\n"
        "while time.monotonic() < end and not os.path.exists(sys.argv[1]): pass\n"
    )
    victim = subprocess.Popen(
        [sys.executable, "-c", victim_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    hog = None
    os.sched_setaffinity(0, set(cpus) - {cpu})  # this test's own thread: never held off
    try:
        assert victim.stdout is not None and victim.stdout.readline() == b"ready\n"
        for thread in os.listdir(f"/proc/{victim.pid}/task"):
            os.sched_setaffinity(int(thread), {cpu})
        fd = stat_fd(victim.pid)
        assert fd is not None
        try:
            assert process_state(fd) == LIVE
            hog = subprocess.Popen(
                [sys.executable, "-c", hog_code, str(done)], stdout=subprocess.PIPE
            )
            assert hog.stdout is not None
            said = hog.stdout.readline()
            if said == b"refused\n":
                pytest.skip("may not run a real-time loop here (CAP_SYS_NICE)")
            assert said == b"holding\n"
            try:
                victim.send_signal(signal.SIGKILL)
                held = process_state(fd)
            finally:
                done.touch()
                hog.wait(timeout=10)
            assert held == DYING
            assert victim.wait(timeout=10) == -signal.SIGKILL
            assert process_state(fd) == GONE  # reaped: the read fails
        finally:
            os.close(fd)
    finally:
        os.sched_setaffinity(0, cpus)
        victim.kill()
        victim.wait()
        if hog is not None:
            hog.kill()
            hog.wait()
