"""Tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28) through the
supervisor and its gateway, against tests/reference_server.py, whose ``job`` is made a
task for a request that declares the extension.

* A 2026-07-28 client of the gateway that declares tasks gets the task and follows it
  (``tasks/get``, ``tasks/update``) as it would the server's directly — its id under the
  server's name; it outlives the client's connection; a restarted server's task answers
  a clear error.
* Any other caller gets the call's result: the supervisor follows the task, answers its
  input requests with the connection's callbacks, and asks the server to cancel a task
  whose call was given up on. Nothing runs twice.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.errors import TaskFailed, ToolCallTimeout
from supervisor.faults import CallHistory
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._relay import Relay
from supervisor.server import _tasks as tasks
from tests.test_gateway import TOKEN, http_client, text
from tests.test_gateway_fidelity import (
    AUTO_APPROVED,
    REFERENCE,
    WAIT,
    backing,
    direct_client,
    gateway_client,
    killed_and_back,
)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ADA = {"action": "accept", "content": {"name": "Ada"}}


async def follow(client: Client, task_id: str, answer: dict[str, Any] | None = None) -> Any:
    """Poll the task ``task_id`` through ``client`` to its end, answering its input
    request ``name-1`` with ``answer``; its last state."""
    with trio.fail_after(WAIT):
        while True:
            state = await tasks.get(client, task_id)
            if state.status in tasks.TERMINAL:
                return state
            if state.status == "input_required":
                assert answer is not None, state
                assert state.input_requests is not None
                assert state.input_requests["name-1"]["method"] == "elicitation/create"
                update = {"taskId": task_id, "inputResponses": {"name-1": answer}}
                acknowledged = await tasks.request(client, "tasks/update", update)
                assert acknowledged["resultType"] == "complete"
            await trio.sleep(tasks.interval(state))


async def made(client: Client, tool: str, arguments: dict[str, Any]) -> tasks.CreatedTask:
    created = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(created, tasks.CreatedTask), created
    return created


def result_text(state: Any) -> str:
    return str(state.result["content"][0]["text"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("ask", [False, True])
async def test_a_client_that_takes_tasks_follows_one_through_the_gateway_as_directly(
    transport: str, ask: bool
) -> None:
    """Directly and through the gateway alike, a client that declares tasks gets one for
    ``job`` (``working``), follows it (answering its question when it asks one), and
    finds the job's result in it — the gateway's id names the server."""
    answer = ADA if ask else None
    async with backing(transport) as entry:
        async with direct_client(entry, "auto", extensions=[tasks.CLIENT]) as c:
            created = await made(c, "job", {"ask": ask})
            direct = (created.task_id, created.status, created.poll_interval_ms)
            direct_end = await follow(c, created.task_id, answer)
        async with gateway_client(entry, "auto", "auto", extensions=[tasks.CLIENT]) as c:
            created = await made(c, "ref_job", {"ask": ask})
            through = (created.task_id, created.status, created.poll_interval_ms)
            through_end = await follow(c, created.task_id, answer)
    n = 1 if transport == "stdio" else 2  # one server process each, or one for both
    assert direct == ("job-1", "working", 20)
    assert through == (f"ref/job-{n}", "working", 20)
    who = "Ada" if ask else "nobody"
    assert direct_end.status == through_end.status == "completed"
    assert result_text(direct_end) == f"job 1 done for {who}"
    assert result_text(through_end) == f"job {n} done for {who}"


@asynccontextmanager
async def gateway(history: CallHistory | None = None, **entry: Any) -> AsyncIterator[Any]:
    """A gateway over HTTP in front of the reference server (``ref``, over stdio); yields
    the supervisor and the gateway's URL."""
    relay = Relay()
    ref = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    config = {"mcpServers": {"ref": {**ref, **entry}}}
    async with (
        open_supervisor(config, history=history, **relay.client_options()) as sup,  # type: ignore[arg-type]
        trio.open_nursery() as nursery,
    ):
        served = Gateway(sup, relay=relay)
        await nursery.start(served.run)
        await sup.tools()
        info = await nursery.start(partial(serve_http, served, "127.0.0.1", 0, token=TOKEN))
        yield sup, info.url
        nursery.cancel_scope.cancel()


async def test_a_task_outlives_its_client_s_connection() -> None:
    """A task made for one client connection is followed to its end from another (the
    task id is all it takes): the gateway keeps nothing of it per connection."""
    async with gateway() as (_, url):
        async with http_client(url, extensions=[tasks.CLIENT]) as first:
            created = await made(first, "ref_job", {"ask": True})
        async with http_client(url, extensions=[tasks.CLIENT]) as second:
            end = await follow(second, created.task_id, ADA)
    assert result_text(end) == "job 1 done for Ada"


async def test_a_task_of_a_restarted_server_answers_that_it_is_lost() -> None:
    """The reference server keeps its tasks in memory: killed (-9) and restarted, it no
    longer knows one it made, and the gateway's answer says why, and that the work may
    have been done — rather than the bare "unknown task"."""
    async with gateway() as (sup, url):
        async with http_client(url, extensions=[tasks.CLIENT]) as client:
            created = await made(client, "ref_job", {"ask": True})
            await killed_and_back(sup, "ref")
            with pytest.raises(MCPError) as lost:
                await tasks.get(client, created.task_id)
    assert lost.value.code == types.INVALID_PARAMS
    message = lost.value.error.message
    assert "'ref/job-1' is lost" in message and "restarted since it made the task" in message
    assert "may have been done" in message


async def test_a_task_of_a_server_removed_by_a_reload_answers_why_it_is_lost() -> None:
    """A reconfiguration that removes the server that made a task: the task's requests
    are answered saying so (and that the work may have been done)."""
    async with gateway() as (sup, url):
        async with http_client(url, extensions=[tasks.CLIENT]) as client:
            created = await made(client, "ref_job", {"ask": True})
            await sup.reconfigure({"mcpServers": {}})
            with pytest.raises(MCPError) as lost:
                await tasks.get(client, created.task_id)
    assert lost.value.code == types.INVALID_PARAMS
    message = lost.value.error.message
    assert "'ref/job-1' is lost" in message and "removed from the configuration" in message
    assert "may have been done" in message


async def test_task_requests_need_the_extension_and_a_served_server() -> None:
    """``tasks/get`` from a request that did not declare the extension is refused with
    the protocol's missing-capability error (-32021, naming it); an id that names no
    served server is an invalid-params error."""
    async with gateway() as (_, url):
        async with http_client(url) as plain:
            with pytest.raises(MCPError) as undeclared:
                await tasks.get(plain, "ref/job-1")
        async with http_client(url, extensions=[tasks.CLIENT]) as client:
            with pytest.raises(MCPError) as nowhere:
                await tasks.get(client, "elsewhere/job-1")
    assert undeclared.value.code == -32021
    assert tasks.EXTENSION_ID in str(undeclared.value.error.data)
    assert nowhere.value.code == types.INVALID_PARAMS
    assert "names none it serves" in nowhere.value.error.message


async def test_the_gateway_declares_tasks_when_its_server_does() -> None:
    """The reference server declares the tasks extension: so does the gateway in front
    of it, to a 2026-07-28 client."""
    async with gateway() as (_, url), http_client(url) as client:
        capabilities = client.server_capabilities
    assert capabilities is not None
    assert tasks.EXTENSION_ID in (capabilities.extensions or {})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_takes_no_tasks_gets_the_result_its_question_asked_of_it(
    mode: str,
) -> None:
    """A client that did not declare tasks gets ``job``'s result: the gateway followed
    the task, and the question the task asked went to that client (elicitation, on the
    session-based protocol) — the job ran once."""
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with backing("stdio") as entry:
        async with gateway_client(entry, "auto", mode, elicitation_callback=elicit) as c:
            if mode == "legacy":
                result = await c.call_tool("ref_job", {"ask": True})
                assert text(result) == "job 1 done for Grace"
                assert asked == ["Your name?"]
            else:  # a 2026-07-28 client cannot be asked mid-call: nobody answers
                result = await c.call_tool("ref_job", {})
                assert text(result) == "job 1 done for nobody"


async def _grace(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Grace"})


async def test_the_library_follows_a_task_and_answers_its_question() -> None:
    """``sup.call`` of a tool its server makes a task of returns the task's result: the
    supervisor polled it and answered its question with the elicitation callback. The
    history has one call of each, each run once (the job counter)."""
    history = CallHistory()
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, history=history, elicitation_callback=_grace) as sup:
        await sup.tools()
        with trio.fail_after(WAIT):
            plain = await sup.call("ref_job", {}, approve=_yes)
            asked = await sup.call("ref_job", {"ask": True}, approve=_yes)
    assert (plain.text, asked.text) == ("job 1 done for nobody", "job 2 done for Grace")
    assert [(c.tool, c.outcome) for c in history.calls] == [("ref_job", "ok")] * 2


async def test_a_failed_task_may_have_taken_effect() -> None:
    """A task that ends ``failed`` is :class:`TaskFailed` — a kind of
    ``CallMayHaveTakenEffect``: recorded as indefinite, its message the server's error."""
    history = CallHistory()
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, history=history) as sup:
        await sup.tools()
        with trio.fail_after(WAIT), pytest.raises(TaskFailed) as failed:
            await sup.call("ref_job", {"fail": True}, approve=_yes)
    assert failed.value.task_id == "job-1" and failed.value.code == types.INTERNAL_ERROR
    assert "the job broke" in str(failed.value) and "may have taken effect" in str(failed.value)
    assert [c.outcome for c in history.calls] == ["info"]


async def test_a_task_nobody_can_answer_is_cancelled() -> None:
    """A task asking a question of a supervisor with no elicitation callback is cancelled
    at the server, and the call fails saying why."""
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config) as sup:
        await sup.tools()
        with trio.fail_after(WAIT):
            with pytest.raises(TaskFailed) as failed:
                await sup.call("ref_job", {"ask": True}, approve=_yes)
            status = await sup.call("ref_job_status", {"id": "job-1"}, approve=_yes)
    assert "asked for input that could not be given" in str(failed.value)
    assert status.text == "cancelled"


async def test_a_task_whose_call_times_out_is_cancelled_at_the_server() -> None:
    """A call given up on (its timeout) while its task waits for an answer is a
    ``ToolCallTimeout`` (it may have taken effect), and the server is asked to cancel
    the task — nothing is sent again."""

    async def never(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await trio.sleep_forever()
        raise AssertionError

    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, elicitation_callback=never) as sup:
        await sup.tools()
        with trio.fail_after(WAIT):
            with pytest.raises(ToolCallTimeout):
                await sup.call("ref_job", {"ask": True}, timeout=1.0, approve=_yes)
            status = await sup.call("ref_job_status", {"id": "job-1"}, approve=_yes)
            again = await sup.call("ref_job", {}, approve=_yes)
    assert status.text == "cancelled"
    assert again.text == "job 1 done for nobody"  # the first job never ran


async def test_a_session_based_server_runs_the_job_at_once() -> None:
    """Tasks are of 2026-07-28: over the session-based protocol the server runs the job
    in the call, and the caller sees no difference."""
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config, mode="legacy") as sup:
        await sup.tools()
        with trio.fail_after(WAIT):
            result = await sup.call("ref_job", {}, approve=_yes)
    assert result.text == "job 1 done for nobody"


def test_a_task_is_polled_as_often_as_its_server_says_within_bounds() -> None:
    """``pollIntervalMs`` is honoured between 0.05 s and 30 s; one second without it."""

    def every(ms: int | None) -> float:
        return tasks.interval(tasks.CreatedTask(task_id="t", status="working", poll_interval_ms=ms))

    assert [every(ms) for ms in (None, 1, 250, 90_000)] == [1.0, 0.05, 0.25, 30.0]


async def _yes(request: Any) -> bool:
    return True


async def test_a_2026_connection_parses_call_answers_without_the_sdk_s_union() -> None:
    """The session of a 2026-07-28 connection parses ``tools/call`` answers with the
    supervisor's tag-first parser (the SDK's claim-aware union costs every call): were
    the SDK's private attribute to move, this says so rather than a slower bench."""
    config = {"mcpServers": {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}}
    async with open_supervisor(config) as sup:
        await sup.tools()
        client = sup._servers["ref"].current.client  # type: ignore[attr-defined]
        assert client.session._call_tool_adapter is tasks._TaskOrResult
        with trio.fail_after(WAIT):
            result = await sup.call("ref_job", {}, approve=_yes)
    assert result.text == "job 1 done for nobody"  # a task, parsed and followed
