"""Tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28): a server may
answer a ``tools/call`` with a task handle (``resultType: "task"``) instead of a result,
and its client follows the task (``tasks/get``, ``tasks/update``, ``tasks/cancel``).

Every connection declares the extension to a 2026-07-28 server (:data:`CLIENT`). A task
a server makes of a call is then, for the one who called:

* followed here to its end when the caller wants a result (the library, the command
  line, a gateway client that did not declare tasks): ``tasks/get`` at the server's
  ``pollIntervalMs``, its input requests answered by this connection's elicitation,
  sampling and roots callbacks (``tasks/update``), the call's deadline bounding it all —
  a call given up on (deadline, cancellation) asks the server to cancel the task;
* handed back as it is to a caller that takes a task itself (a gateway's 2026-07-28
  client that declared the extension), who follows it through the gateway.

Nothing is sent twice: a task is followed, never made again. A task that cannot be
followed to its end (the connection dies, the server no longer knows it) may have taken
effect, and says so.

This is the client half: a connection's view of the task its server made. Serving such a
task on to a gateway's caller — its id named after the server, the caller's tasks
requests routed back to it — is the gateway's, ``supervisor.gateway._tasks``, which
uses this half's models and request params.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import mcp_types as types
import trio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

from .._sdk import parse_call_results_with
from ..errors import TaskFailed
from ..log import get_logger
from ..tools._request import CreatedTask
from ..transports._receipts import connection_closed, delivery

if TYPE_CHECKING:
    from mcp import Client

    from ._link import Link

__all__ = [
    "CLIENT",
    "COMPLETED",
    "EXTENSION_ID",
    "FAILED",
    "POLL_DEFAULT",
    "TERMINAL",
    "CancelTask",
    "CreatedTask",
    "GetTask",
    "TaskParams",
    "TaskState",
    "UpdateTask",
    "declared",
]

#: The extension's identifier, in capabilities.
EXTENSION_ID = "io.modelcontextprotocol/tasks"
#: A task's statuses: the one with a result, the one with an error.
COMPLETED, FAILED = "completed", "failed"
#: The statuses a task ends in.
TERMINAL = frozenset({COMPLETED, FAILED, "cancelled"})
#: Seconds between polls of a task whose server suggests no interval.
POLL_DEFAULT = 1.0
#: The shortest and longest poll interval honoured, whatever the server suggests.
POLL_MIN, POLL_MAX = 0.05, 30.0
#: Seconds a ``tasks/cancel`` of a task given up on may take (it is a courtesy).
CANCEL_WAIT = 2.0

log = get_logger("supervisor.server")


class TaskState(types.Result):
    """A task as ``tasks/get`` says it is: its status and, by status, its ``result``,
    ``error`` or ``inputRequests`` (kept as JSON)."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    """The params of ``tasks/get`` and ``tasks/cancel`` (and, with ``inputResponses``,
    of ``tasks/update``)."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    input_responses: dict[str, Any] | None = None


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param: ClassVar[str | None] = "taskId"  # Mcp-Name, for load balancers


class UpdateTask(types.Request[TaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param: ClassVar[str | None] = "taskId"


#: The three methods, by name.
REQUESTS: Mapping[str, type[GetTask | UpdateTask | CancelTask]] = {
    "tasks/get": GetTask,
    "tasks/update": UpdateTask,
    "tasks/cancel": CancelTask,
}


class _TaskCreated(Exception):
    """The server answered the call with a task (``task``): raised out of the SDK
    client's call, so that whoever made the call decides — follow it, or hand it back."""

    def __init__(self, task: CreatedTask) -> None:
        super().__init__(f"task {task.task_id!r} created")
        self.task = task


async def _created(task: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    raise _TaskCreated(task)


class _Tasks(ClientExtension):
    identifier = EXTENSION_ID

    def claims(self) -> tuple[ResultClaim[Any], ...]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_created),)


#: The client side of the extension, for every connection.
CLIENT = _Tasks()


class _TaskOrResult:
    """Parses a ``tools/call`` answer as the SDK's claim-aware adapter does — a task
    handle (``resultType: "task"``) as :class:`CreatedTask`, anything else as the core
    result types — but without its discriminated union, which costs every call half as
    much again as the plain one (about 20 µs on an echo result): the tag is looked at
    first. The SDK's session takes any object with ``model_validate`` here."""

    @staticmethod
    def model_validate(raw: Any, *, by_name: bool | None = None) -> Any:
        if isinstance(raw, dict) and raw.get("resultType") == "task":
            return CreatedTask.model_validate(raw, by_name=by_name)
        return _CORE.validate_python(raw, by_name=by_name)


def parse_cheaply(client: Client) -> None:
    """Have ``client``'s session parse ``tools/call`` answers with :class:`_TaskOrResult`
    when the tasks claim is active (a 2026-07-28 connection) — the session's own adapter
    is set at its handshake, and is the SDK's private attribute
    (:func:`supervisor._sdk.parse_call_results_with`): left alone if absent."""
    parse_call_results_with(client.session, _TaskOrResult)


def declared(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a client's (per-request) capabilities declare the tasks extension."""
    return capabilities is not None and EXTENSION_ID in (capabilities.extensions or {})


def interval(task: CreatedTask | TaskState) -> float:
    """Seconds until the next poll of ``task``: its server's suggestion, within bounds."""
    if task.poll_interval_ms is None:
        return POLL_DEFAULT
    return min(max(task.poll_interval_ms / 1000, POLL_MIN), POLL_MAX)


async def request(client: Client, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Send the tasks request ``method`` with ``params`` (its ``taskId`` as the server
    named it) on ``client``; its result, as JSON."""
    model = REQUESTS[method](params=TaskParams.model_validate(dict(params)))
    # the SDK bounds its result type by BaseModel, but validates through any TypeAdapter
    return await client.session.send_request(model, _RAW)  # pyright: ignore[reportArgumentType]


_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_CORE: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)


def params(task_id: str, input_responses: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The params of a tasks request about ``task_id`` (as the server named it), with
    ``input_responses`` (``tasks/update``)."""
    made: dict[str, Any] = {"taskId": task_id}
    if input_responses is not None:
        made["inputResponses"] = input_responses
    return made


async def get(client: Client, task_id: str) -> TaskState:
    return TaskState.model_validate(await request(client, "tasks/get", params(task_id)))


async def cancel(client: Client, task_id: str) -> None:
    """Ask the server to cancel a task given up on — a courtesy: shielded, bounded, and
    whatever the server says (or does not) is only logged by the caller."""
    with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_WAIT):
        await request(client, "tasks/cancel", params(task_id))


_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


async def answers(client: Client, asked: Mapping[str, Any]) -> dict[str, Any]:
    """Answers to a task's input requests (``asked``, by key), by ``client``'s
    callbacks — as the SDK answers a round of input requests, or a server's request on
    the session-based protocol."""
    session = client.session
    answered: dict[str, Any] = {}
    for key, raw in asked.items():
        asked_for = _INPUT_REQUEST.validate_python(raw, by_name=False)
        params = asked_for.params
        ctx = ClientRequestContext(
            session=session, request_id=key, meta=params.meta if params is not None else None
        )
        answer = await session.dispatch_input_request(ctx, asked_for)
        if isinstance(answer, types.ErrorData):
            raise _InputRefused(answer.message)
        answered[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answered


class _InputRefused(Exception):
    """A task asked for input that the connection's callbacks would not give (none is
    set, or it declined with an error): the message says why."""


async def follow(
    link: Link, client: Client, server: str, tool: str, task: CreatedTask
) -> types.CallToolResult:
    """Follow the task the server ``server`` made of a call of ``tool`` to its end, on
    ``client`` (the live client of ``link``): its result, or
    :class:`~supervisor.errors.TaskFailed`. Its input requests are answered by this
    connection's callbacks; given up on (the call's deadline, a cancellation), the server
    is asked to cancel it. Nothing is sent again."""
    task_id = task.task_id
    log.info("following a task", server=server, tool=tool, task=task_id)

    def failed(why: str, code: int | None = None) -> TaskFailed:
        return TaskFailed(
            f"MCP server {server!r} made a task of tool {tool!r} ({task_id!r}) "
            f"and {why}: it may have taken effect and was not retried",
            server=server,
            tool=tool,
            task_id=task_id,
            code=code,
        )

    state: CreatedTask | TaskState = task
    answered: set[str] = set()
    receipt = link.receipt()  # the polls' own: the call's was answered (the task)
    token = delivery.set(receipt)
    try:
        while state.status not in TERMINAL:
            asked = {
                key: raw
                for key, raw in (getattr(state, "input_requests", None) or {}).items()
                if key not in answered
            }
            if asked:
                try:
                    given = await answers(client, asked)
                except _InputRefused as exc:
                    await cancel(client, task_id)
                    raise failed(
                        f"asked for input that could not be given ({exc}); the task was cancelled"
                    ) from None
                await request(client, "tasks/update", params(task_id, given))
                answered.update(asked)
            else:
                await trio.sleep(interval(state))
            state = await get(client, task_id)
    except MCPError as exc:
        if connection_closed(exc, receipt):
            link.lost.set()  # the connection is dead: this incarnation ends
            raise failed("the connection died while it ran") from exc
        if exc.code == types.INVALID_PARAMS:  # the spec's answer for a task it does not know
            raise failed(f"the server no longer knows the task: {exc.message}") from exc
        raise failed(f"following it failed: {exc.message} (MCP error {exc.code})") from exc
    except trio.Cancelled:
        if not link.dead():
            try:
                await cancel(client, task_id)  # given up on: a courtesy, bounded
            except Exception as exc:  # noqa: BLE001 — it is only asked
                log.info("task cancel refused", server=server, error=str(exc))
        raise
    finally:
        delivery.reset(token)
    # (a task made already ended is still its CreatedTask, read with extra="allow":
    # its result or error is an extra field, if the server sent one)
    if state.status == COMPLETED and state.result is not None:  # pyright: ignore[reportAttributeAccessIssue]
        # (the same: a CreatedTask's extra field)
        result = types.CallToolResult.model_validate(state.result, by_name=False)  # pyright: ignore[reportAttributeAccessIssue]
        if not result.is_error:
            await client.session.validate_tool_result(tool, result)
        return result
    if state.status == FAILED:
        error = state.error or {}  # pyright: ignore[reportAttributeAccessIssue]  # (as above)
        code = error.get("code") if isinstance(error.get("code"), int) else None
        said = error.get("message", state.status_message)
        raise failed(f"the task failed: {said} (MCP error {code})", code)
    said = f": {state.status_message}" if state.status_message else ""
    raise failed(f"the task ended {state.status}{said}")
