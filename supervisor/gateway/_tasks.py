"""Tasks through the gateway (the ``io.modelcontextprotocol/tasks`` extension): serving a
backing server's task on to the gateway's caller, as the gateway serves every other verb.

This is the serving half. The client half — a connection's view of the task a server
made of a call: declaring the extension, reading the handle, following the task to its
end, sending ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` — is
``supervisor.server._tasks``; this module names a server's task to the caller and routes
the caller's tasks requests back to that server, through its handle, which sends them with
the client half.

A 2026-07-28 client that declares the extension on a ``tools/call`` may get a task
handle back, when the backing server makes a task of the call: its ``taskId`` is the
server's, under the name of that server (``"<server>/<id>"``), so that the client's
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` reach the server that made it — from
any session, a reconnected client's or another client's that holds the id, as the
extension wants of a task (it outlives its client's connection). Everything else of
the task (its status, result, error, input requests) passes as the server says it.

Any other client gets the call's result: the supervisor follows the task itself (the
client half). A task of a server that has restarted since it made it is likely lost with
the process: the server's "unknown task" then says so.
"""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import ServerRequestError, SupervisorError
from ..server._tasks import EXTENSION_ID, CreatedTask, TaskParams, declared
from ..server._tasks import params as task_params

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from ..runtime import SupervisorHandle

__all__ = ["EXTENSION_ID", "GatewayTasks", "served_task"]

#: Between a backing server's name and its own task id, in a task id the gateway hands out.
SEPARATOR = "/"
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


#: What separates a task id served to a team gateway's caller from its seal.
OWNER = "~"


class GatewayTasks:
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of the gateway's clients,
    each passed to the backing server of ``sup`` named in its task id, if ``serves`` it."""

    def __init__(
        self,
        sup: SupervisorHandle,
        serves: Callable[[str], bool],
        seen_by: Callable[[ServerRequestContext[Any, Any]], Any] | None = None,
        key: bytes | None = None,
    ) -> None:
        self.sup = sup
        self.serves = serves
        #: the gateway as a request's caller sees it (a team gateway's policy)
        self._seen_by = seen_by
        #: what a task id made for a caller is sealed with (replicas share it)
        self._key = hmac.new(key or os.urandom(32), b"mcp-supervisor/task-owner", "sha256")

    def served(
        self, task: CreatedTask | Mapping[str, Any], server: str, caller: str | None
    ) -> dict[str, Any]:
        """:func:`served_task`, its id sealed to ``caller`` (a team gateway's): only a
        request of that caller, to any replica with the same key, names it."""
        data = served_task(task, server)
        if caller is not None:
            data["taskId"] = f"{data['taskId']}{OWNER}{self._seal(data['taskId'], caller)}"
        return data

    def _seal(self, task_id: str, caller: str) -> str:
        mac = self._key.copy()
        mac.update(f"{len(caller)}:{caller}{task_id}".encode())
        return base64.urlsafe_b64encode(mac.digest()[:16]).decode().rstrip("=")

    def _unsealed(self, task_id: str, caller: str | None) -> str | None:
        """The served id ``task_id`` without its seal, if ``caller`` may follow it (a
        request with no caller: ids as served to such requests, unsealed)."""
        if caller is None:
            return task_id
        served, mark, seal = task_id.rpartition(OWNER)
        if not mark or not hmac.compare_digest(seal, self._seal(served, caller)):
            return None
        return served

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
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{method} needs the {EXTENSION_ID} extension, which this request did not declare",
                {"requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True)},
            )
        task_id = params.task_id
        serves, caller = self.serves, None
        if self._seen_by is not None:
            host = self._seen_by(ctx)
            serves = host.serves
            caller = getattr(getattr(host, "caller", None), "subject", None)
        unsealed = self._unsealed(task_id, caller)  # another caller's: as if there were none
        name, _, own = (unsealed or "").partition(SEPARATOR)
        view = self.sup.servers.get(name)
        departed = self.sup.departed(name) if own and serves(name) else None
        if departed is not None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"task {task_id!r} is lost: {departed}. Its work may have been done, in "
                "part; call the tool again only if that is safe",
            )
        if not own or view is None or not serves(name):
            raise MCPError(
                types.INVALID_PARAMS,
                f"no task {task_id!r} here: a task id of this gateway names the MCP server "
                "that made it, and this one names none it serves",
            )
        forwarded = task_params(own, params.input_responses)
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
            return {**served_task(answer, name), "taskId": task_id}
        return {}
