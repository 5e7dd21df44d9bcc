"""Tasks through the gateway (the ``io.modelcontextprotocol/tasks`` extension).

A 2026-07-28 client that declares the extension on a ``tools/call`` may get a task
handle back, when the backing server makes a task of the call: its ``taskId`` is the
server's, under the name of that server (``"<server>/<id>"``), so that the client's
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` reach the server that made it — from
any session, a reconnected client's or another client's that holds the id, as the
extension wants of a task (it outlives its client's connection). Everything else of
the task (its status, result, error, input requests) passes as the server says it.

Any other client gets the call's result: the supervisor follows the task itself (see
``supervisor.server._tasks``). A task of a server that has restarted since it made it
is likely lost with the process: the server's "unknown task" then says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import ServerRequestError, SupervisorError
from ..server._tasks import EXTENSION_ID, CreatedTask, TaskParams, declared

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from ..runtime import SupervisorHandle

__all__ = ["EXTENSION_ID", "GatewayTasks", "served_task"]

#: Between a backing server's name and its own task id, in a task id the gateway hands out.
SEPARATOR = "/"
#: The error code of a request that needs a capability its client did not declare.
MISSING_CAPABILITY = -32021
_PROTOCOL_META = "io.modelcontextprotocol/"


def served_task(task: CreatedTask | Mapping[str, Any], server: str) -> dict[str, Any]:
    """A backing server's task (a handle, or ``tasks/get``'s answer) as the gateway's
    client sees it: its id under the server's name, the protocol's own ``_meta`` stamps
    (which describe the other hop) dropped."""
    data = (
        task.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(task, CreatedTask)
        else dict(task)
    )
    data["taskId"] = f"{server}{SEPARATOR}{data.get('taskId')}"
    meta = data.get("_meta")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if not str(k).startswith(_PROTOCOL_META)}
        if kept:
            data["_meta"] = kept
        else:
            del data["_meta"]
    return data


#: Task owners a gateway remembers (past that, the oldest half is forgotten).
MAX_OWNERS = 4096


def _nothing(name: str) -> bool:
    return False


class GatewayTasks:
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of the gateway's clients,
    each passed to the backing server of ``sup`` named in its task id, if ``serves`` it."""

    def __init__(
        self,
        sup: SupervisorHandle,
        serves: Callable[[str], bool],
        seen_by: Callable[[ServerRequestContext[Any, Any]], Any] | None = None,
    ) -> None:
        self.sup = sup
        self.serves = serves
        #: the gateway as a request's caller sees it (a team gateway's policy)
        self._seen_by = seen_by
        #: the caller each task was made for, by served task id (this process's)
        self._owners: dict[str, str] = {}

    def made_for(self, task: Mapping[str, Any], caller: str | None) -> None:
        """Remember that the served ``task`` was made for ``caller`` (a team gateway's):
        only they may follow it here."""
        task_id = task.get("taskId") if isinstance(task, Mapping) else None
        if caller is None or not isinstance(task_id, str):
            return
        if len(self._owners) >= MAX_OWNERS:
            for stale in list(self._owners)[: MAX_OWNERS // 2]:
                del self._owners[stale]
        self._owners[task_id] = caller

    def install(self, server: Server[Any]) -> None:
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            server.add_request_handler(method, TaskParams, self._handler(method))

    def _handler(self, method: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> Any:
            return await self.request(ctx, method, params)

        return handle

    async def request(
        self, ctx: ServerRequestContext[Any, Any], method: str, params: TaskParams
    ) -> dict[str, Any]:
        if not declared(ctx.session.client_capabilities):
            required = types.ClientCapabilities(extensions={EXTENSION_ID: {}})
            raise MCPError(
                MISSING_CAPABILITY,
                f"{method} needs the {EXTENSION_ID} extension, which this request did not declare",
                {"requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True)},
            )
        task_id = params.task_id
        name, _, own = task_id.partition(SEPARATOR)
        view = self.sup.servers.get(name)
        serves = self.serves
        owner = self._owners.get(task_id)
        if self._seen_by is not None:
            host = self._seen_by(ctx)
            caller = getattr(host, "caller", None)
            serves = host.serves
            if owner is not None and (caller is None or caller.subject != owner):
                serves = _nothing  # another caller's task: as if there were none
        if not own or view is None or not serves(name):
            raise MCPError(
                types.INVALID_PARAMS,
                f"no task {task_id!r} here: a task id of this gateway names the MCP server "
                "that made it, and this one names none it serves",
            )
        forwarded: dict[str, Any] = {"taskId": own}
        if params.input_responses is not None:
            forwarded["inputResponses"] = params.input_responses
        try:
            answer = await view.task_request(method, forwarded)
        except ServerRequestError as exc:
            if exc.code == types.INVALID_PARAMS and view.task_outlived(own):
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"task {task_id!r} is lost: MCP server {name!r} restarted since it made "
                    "the task, and no longer knows it. Its work may have been done, in part; "
                    "call the tool again only if that is safe",
                ) from None
            raise MCPError(exc.code, str(exc)) from None
        except (SupervisorError, TimeoutError) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
        if method == "tasks/get":
            return served_task(answer, name)
        return {}
