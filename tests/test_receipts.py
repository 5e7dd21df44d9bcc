"""A request's receipt: whether it reached the server, and whether its answer came back.

Sending a request again elsewhere is safe only if it never reached the server *and never
will*: giving it up (``withdraw``) and handing it over (``deliver``) exclude each other,
so a writer that gets to a withdrawn request late drops it. And a "Connection closed"
after an answer that never reached the SDK is the connection's end, not the server's
own error answer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mcp_types as types
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


def test_a_pending_sigkill_is_read_from_either_mask(tmp_path: Path) -> None:
    """``_dying`` reads SIGKILL pending for the thread (``SigPnd``) or the whole process
    (``ShdPnd``) from a ``/proc/PID/status`` as the kernel writes it, and from one whose
    masks it cannot read as one (they are then read one by one, as ever): ``False``
    where a mask it needs is missing or not a number."""
    from supervisor.transports._intake import _dying

    kill, usr1 = f"{1 << 8:016x}", f"{1 << 9:016x}"  # SIGKILL is 9, SIGUSR1 10
    zero = "0" * 16

    def status(*lines: str) -> bool:
        path = tmp_path / "status"
        path.write_text("Name:\tx\nSigQ:\t0/1\n" + "".join(f"{line}\n" for line in lines))
        fd = os.open(path, os.O_RDONLY)
        try:
            return _dying(fd)
        finally:
            os.close(fd)

    assert status(f"SigPnd:\t{kill}", f"ShdPnd:\t{zero}", "SigBlk:\t0")
    assert status(f"SigPnd:\t{zero}", f"ShdPnd:\t{kill}", "SigBlk:\t0")
    assert not status(f"SigPnd:\t{usr1}", f"ShdPnd:\t{zero}", "SigBlk:\t0")
    assert not status(f"SigPnd:\t{zero}", f"ShdPnd:\t{zero}")
    # not one after the other: read one by one
    assert status(f"ShdPnd:\t{kill}", "SigBlk:\t0", f"SigPnd:\t{zero}")
    assert status(f"SigPnd:\t{kill}", "SigBlk:\t0", "ShdPnd:\tnonsense")
    assert not status(f"SigPnd:\t{zero}", "ShdPnd:\tnonsense")
    assert not status(f"ShdPnd:\t{kill}")  # no SigPnd: cannot be told
    assert not status()
