"""A reference MCP server with the server-side features the gateway passes on, to compare
what a client sees of it directly and through the gateway.

Built on the SDK's low-level ``Server`` (the high-level one declares no logging):

* logging — ``logging/setLevel`` is honoured on session-based connections (a
  2026-07-28 request opts in by its ``_meta``, which the SDK applies); the tool
  ``chatter`` logs ``debug``, ``info`` and ``warning`` messages while it runs, under the
  logger ``chat``; ``announce_later`` answers at once and a moment later logs one
  ``notice`` unsolicited, on the connection's standalone channel;
* cancellation — ``wait`` reports progress once (so a client knows it runs), then
  waits until it is cancelled (``notifications/cancelled``, or on 2026-07-28 over HTTP
  its response stream closed); ``cancelled`` answers ``"cancelled"`` once a ``wait``
  has been (within ten seconds, else ``"not cancelled"``);
* cancellation of its own requests — ``ask_briefly`` asks its client a question
  (elicitation, session-based protocol) and gives up on it after :data:`ASK_FOR`
  seconds: the SDK then cancels the request at the client (``notifications/cancelled``);
* input asked for — ``confirm`` asks its client to confirm: an elicitation request on
  the session-based protocol, an ``input_required`` round on 2026-07-28 (``requestState``
  :data:`CONFIRM_STATE`), and answers the action (``accept``; on 2026-07-28 ``accept
  after round-1``, the state as it came back); so do the prompt ``confirm_prompt`` (one
  message, the answer) and the resource :data:`SECRET` (one text, the answer) — the
  other ``note:///…`` read as ``a note on TOPIC``;
* sampling — ``sample`` asks its client's model for a haiku (``sampling/createMessage``
  on the session-based protocol, an ``input_required`` round on 2026-07-28) and
  answers what it wrote;
* progress — ``count`` reports progress 1, 2 and 3 of 3 (``step N``) to a client that
  sent a progress token, then answers ``counted``;
* resource subscriptions — ``note:///news`` is listed, and any ``note:///…`` may be
  subscribed to: ``resources/subscribe`` on the session-based protocol (the update goes
  to each connection that subscribed), a ``subscriptions/listen`` stream naming it on
  2026-07-28; the tool ``touch`` announces that its ``uri`` changed;
* headers — ``touch``'s ``uri`` travels in ``Mcp-Param-Uri`` (2026-07-28 over HTTP);
  after ``rename_header``, in ``Mcp-Param-Where``, and the server says nothing of it
  (a stale schema at its clients, which it refuses with ``-32020``); ``arguments``
  answers, as JSON, the arguments it got and the ``Mcp-Param-*`` headers they came with
  (over HTTP): its ``region`` and optional ``verbose`` are mirrored, as in the
  conformance suite's ``http-custom-headers`` scenario;
* a capability required — ``needs_sampling`` refuses a 2026-07-28 request that did not
  declare sampling (``-32021``, ``requiredCapabilities`` naming it), as the suite's
  ``server-stateless`` scenario asks;
* capabilities — ``capabilities`` (and a read of ``note:///capabilities``) answers, as
  JSON, the client capabilities its request came with (on 2026-07-28 each request
  declares them; on the session-based protocol, those of the handshake);
* caching — its tool list may be cached a minute by anyone, its prompts half a
  minute privately (``ttlMs``, ``cacheScope`` on 2026-07-28);
* completions — of the prompt ``greet``'s argument ``name`` and of the resource
  template ``note:///{topic}``'s ``topic``, each by prefix, the context's ``style``
  echoed into the answer (``"formal:Ada"``) when given;
* tasks (``io.modelcontextprotocol/tasks``, 2026-07-28) — ``job`` is made a task when
  the request declares the extension (else it runs at once): ``working`` a moment, then,
  with ``ask``, ``input_required`` (a form asking a name) until ``tasks/update`` answers
  it, then ``completed`` (``"job N done for NAME"``; N counts the jobs run, so a job run
  twice shows); ``fail`` ends it ``failed``; ``tasks/cancel`` ends it ``cancelled``.
  ``tasks/get`` of an id it does not know is ``-32602``, as the extension says;
  ``job_status`` answers the status of the task ``id`` (for a client that did not take
  the task itself).

MCP Apps (``io.modelcontextprotocol/ui``) are the high-level server's extension:
:func:`build_apps` is a second reference server with one tool, ``clock``, bound to the
UI resource ``ui://clock/app.html``, whose HTML names the server's ``title``.

Run as a script it serves over stdio (``python tests/reference_server.py``; ``…
mute-subscriptions`` for one that never acknowledges a resource subscription on
2026-07-28; ``… apps TITLE`` for the Apps one); tests wanting HTTP serve :func:`build` (or
:func:`build_apps`) with :func:`supervisor.testing.servers.start_http`.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.apps import Apps
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# Logging is deprecated by 2026-07-28 (SEP-2577): still served here, to be passed on.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

NAMES = ("Ada", "Alan", "Grace", "Greta")
#: the ``requestState`` of ``confirm``'s first round (2026-07-28), echoed in its answer
CONFIRM_STATE = "round-1"
#: that of ``sample``'s
SAMPLE_STATE = "haiku-1"
#: the resource that asks its reader to confirm, as ``confirm`` does (a ``note:///…``)
SECRET = "note:///secret"
#: The resource whose read answers the client capabilities the read came with.
CAPABILITIES = "note:///capabilities"
#: seconds ``ask_briefly`` waits for its question's answer
ASK_FOR = 0.5
#: how long its lists may be cached (2026-07-28's ``ttlMs``): tools by anyone, prompts
#: privately
TOOLS_TTL_MS, PROMPTS_TTL_MS = 60_000, 30_000
TOPICS = ("garden", "gateway", "grammar", "music")
#: the tasks extension's identifier, and how often (ms) its tasks may be polled
TASKS, POLL_MS = "io.modelcontextprotocol/tasks", 20
#: seconds a ``job`` task works before it asks, or ends
JOB_WORKS = 0.1
#: the levels ``chatter`` logs at, in order
CHATTER_LEVELS: tuple[types.LoggingLevel, ...] = ("debug", "info", "warning")
_RANK = {level: rank for rank, level in enumerate(("debug", "info", "notice", "warning"))}

_READ_ONLY = types.ToolAnnotations(read_only_hint=True)
_CONFIRM_PROMPT = types.Prompt(
    name="confirm_prompt", description="Ask the client to confirm; a prompt of what it said."
)
_TOOLS = [
    types.Tool(
        name="chatter",
        description="Log a debug, an info and a warning message, then answer.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="wait",
        description="Report progress once, then wait until cancelled.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="cancelled",
        description="Whether a wait was cancelled (waits up to ten seconds for one).",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="ask_briefly",
        description="Ask the client something; give up on the question after a moment.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="confirm",
        description="Ask the client to confirm; answer what it said.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="touch",
        description="Announce that the resource uri changed.",
        # its uri travels in the Mcp-Param-Uri header too (2026-07-28 HTTP)
        input_schema={
            "type": "object",
            "properties": {"uri": {"type": "string", "x-mcp-header": "Uri"}},
        },
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="sample",
        description="Ask the client's model for a haiku; answer what it wrote.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="count",
        description="Report progress 1, 2 and 3 of 3, then answer.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="rename_header",
        description="Have touch's uri travel in Mcp-Param-Where from now on (unannounced).",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="job",
        description="A job, made a task for a client that takes one.",
        input_schema={
            "type": "object",
            "properties": {"ask": {"type": "boolean"}, "fail": {"type": "boolean"}},
        },
    ),
    types.Tool(
        name="job_status",
        description='The status of the task of that id ("unknown" for none).',
        input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="arguments",
        description="Answer the arguments it got and the Mcp-Param headers they came with.",
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
                "query": {"type": "string"},
            },
            "required": ["region", "query"],
        },
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="announce_later",
        description="Answer at once; log one notice unsolicited a moment later.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="needs_sampling",
        description="Refuse a 2026-07-28 request that did not declare sampling (-32021).",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="capabilities",
        description="Answer the client capabilities this request came with, as JSON.",
        input_schema={"type": "object", "properties": {}},
        annotations=_READ_ONLY,
    ),
]


class _MuteOnResources(ListenHandler):
    """A listen handler that never acknowledges a stream naming resources (one for list
    changes only is served as usual): a server that takes subscriptions and hangs."""

    async def __call__(self, ctx: Any, params: Any) -> Any:
        if params.notifications.resource_subscriptions:
            await anyio.sleep_forever()
        return await super().__call__(ctx, params)


def build(*, mute_subscriptions: bool = False) -> Server[Any]:
    """A fresh reference server (one per test: it remembers the level set);
    ``mute_subscriptions``: it never acknowledges a listen stream naming resources."""
    state: dict[str, Any] = {"level": None, "touch_header": "Uri"}
    cancelled = anyio.Event()
    bus = InMemorySubscriptionBus()
    #: the connections subscribed to each URI (session-based protocol)
    subscribers: dict[str, list[Any]] = {}
    #: the tasks made (by id), the events their answers set, and the jobs made and run
    tasks: dict[str, dict[str, Any]] = {}
    answers: dict[str, anyio.Event] = {}
    jobs = {"made": 0, "run": 0}

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as background:
            yield {"background": background}
            background.cancel_scope.cancel()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if state["touch_header"] == "Uri":
            return types.ListToolsResult(tools=_TOOLS)
        touch = {"uri": {"type": "string", "x-mcp-header": state["touch_header"]}}
        tools = [
            t.model_copy(update={"input_schema": {"type": "object", "properties": touch}})
            if t.name == "touch"
            else t
            for t in _TOOLS
        ]
        return types.ListToolsResult(tools=tools)

    def wanted(level: types.LoggingLevel) -> bool:
        asked = state["level"]
        return asked is None or _RANK[level] >= _RANK[asked]

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "job":
            return await job(ctx, params)  # type: ignore[no-any-return]
        if params.name == "sample":
            message = types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text="A haiku, please.")
            )
            if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                said = await ctx.session.create_message(  # type: ignore[call-overload]
                    [message], max_tokens=50, related_request_id=ctx.request_id
                )
                wrote = getattr(said.content, "text", "")
            elif params.input_responses is None:  # the first round: ask
                ask = types.CreateMessageRequest(
                    params=types.CreateMessageRequestParams(messages=[message], max_tokens=50)
                )
                return types.InputRequiredResult(  # type: ignore[return-value]
                    input_requests={"haiku": ask}, request_state=SAMPLE_STATE
                )
            else:
                said = params.input_responses["haiku"]
                wrote = getattr(getattr(said, "content", None), "text", "")
            return types.CallToolResult(content=[types.TextContent(type="text", text=wrote)])
        if params.name == "count":
            token = (params.meta or {}).get("progress_token")
            for n in (1, 2, 3):
                if token is not None:
                    await ctx.session.send_progress_notification(
                        token, n, 3, f"step {n}", related_request_id=ctx.request_id
                    )
            return types.CallToolResult(content=[types.TextContent(type="text", text="counted")])
        if params.name == "rename_header":
            state["touch_header"] = "Where"
            return types.CallToolResult(content=[types.TextContent(type="text", text="renamed")])
        if params.name == "job_status":
            task = tasks.get(str((params.arguments or {}).get("id")))
            status = "unknown" if task is None else task["status"]
            return types.CallToolResult(content=[types.TextContent(type="text", text=status)])
        if params.name == "chatter":
            for n, level in enumerate(CHATTER_LEVELS, 1):
                if wanted(level):
                    await ctx.session.send_log_message(
                        level, f"message {n} at {level}", "chat", related_request_id=ctx.request_id
                    )
            return types.CallToolResult(content=[types.TextContent(type="text", text="chattered")])
        if params.name == "wait":
            token = (params.meta or {}).get("progress_token")
            if token is not None:
                await ctx.session.send_progress_notification(
                    token, 1, None, "waiting", related_request_id=ctx.request_id
                )
            try:
                await anyio.sleep_forever()
            finally:  # cancelled: the only way out
                cancelled.set()
        if params.name == "cancelled":
            with anyio.move_on_after(10):
                await cancelled.wait()
            answer = "cancelled" if cancelled.is_set() else "not cancelled"
            return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])
        if params.name == "ask_briefly":
            answer = "gave up"
            with anyio.move_on_after(ASK_FOR):  # then the request is cancelled at the client
                await ctx.session.elicit_form(
                    "Anything?", {"type": "object", "properties": {}}, ctx.request_id
                )
                answer = "answered"
            return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])
        if params.name == "confirm":
            answer = await confirmed(ctx, params)
            if isinstance(answer, types.InputRequiredResult):
                return answer  # type: ignore[return-value]
            return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])
        if params.name == "touch":
            uri = str((params.arguments or {}).get("uri"))
            for connection in subscribers.get(uri, ()):
                await connection.send_resource_updated(uri)
            await bus.publish(ResourceUpdated(uri=uri))
            return types.CallToolResult(content=[types.TextContent(type="text", text="touched")])
        if params.name == "arguments":
            headers = getattr(ctx.request, "headers", None) or {}
            mirrored = {
                k.lower(): v for k, v in headers.items() if k.lower().startswith("mcp-param-")
            }
            said = json.dumps({"arguments": params.arguments, "headers": mirrored}, sort_keys=True)
            return types.CallToolResult(content=[types.TextContent(type="text", text=said)])
        if params.name == "needs_sampling":
            declared = ctx.session.client_capabilities
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and (
                declared is None or declared.sampling is None
            ):
                required = {"requiredCapabilities": {"sampling": {}}}
                raise MCPError(
                    types.MISSING_REQUIRED_CLIENT_CAPABILITY, "this tool needs sampling", required
                )
            return types.CallToolResult(content=[types.TextContent(type="text", text="sampled")])
        if params.name == "capabilities":
            declared = ctx.session.client_capabilities
            said = "{}" if declared is None else declared.model_dump_json(exclude_none=True)
            return types.CallToolResult(content=[types.TextContent(type="text", text=said)])
        if params.name == "announce_later":
            session = ctx.session

            async def announce() -> None:
                await anyio.sleep(0.2)
                await session.send_log_message("notice", "announced", "news")

            ctx.lifespan_context["background"].start_soon(announce)
            return types.CallToolResult(content=[types.TextContent(type="text", text="soon")])
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"no tool {params.name}")], is_error=True
        )

    async def confirmed(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        """Ask the request's client to confirm (``params``: a tool call's, a prompt's or a
        resource read's): what it said — or, on 2026-07-28, the first round's
        ``input_required`` result."""
        form = {"type": "object", "properties": {}}
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            said = await ctx.session.elicit_form("Confirm?", form, ctx.request_id)  # type: ignore[arg-type]
            return said.action
        if params.input_responses is None:  # the first round: ask
            ask = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message="Confirm?", requested_schema=form)  # type: ignore[arg-type]
            )
            return types.InputRequiredResult(
                input_requests={"confirm": ask}, request_state=CONFIRM_STATE
            )
        # asked again with the answer, and the state it was given
        said = params.input_responses["confirm"]
        return f"{getattr(said, 'action', None)} after {params.request_state}"

    async def job(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        capabilities = ctx.session.client_capabilities
        wants_task = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and TASKS in (
            (capabilities.extensions or {}) if capabilities is not None else {}
        )
        if not wants_task:
            jobs["run"] += 1
            text = f"job {jobs['run']} done for nobody"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        jobs["made"] += 1
        task_id = f"job-{jobs['made']}"
        task: dict[str, Any] = {
            "taskId": task_id,
            "status": "working",
            "createdAt": "2026-12-04T00:00:00Z",
            "lastUpdatedAt": "2026-12-04T00:00:00Z",
            "ttlMs": 60_000,
            "pollIntervalMs": POLL_MS,
        }
        tasks[task_id] = task
        answered = anyio.Event()
        answers[task_id] = answered

        async def work() -> None:
            await anyio.sleep(JOB_WORKS)
            name = "nobody"
            if arguments.get("ask") and task["status"] == "working":
                ask = types.ElicitRequest(
                    params=types.ElicitRequestFormParams(  # type: ignore[arg-type]
                        message="Your name?",
                        requested_schema={
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                        },
                    )
                )
                task["status"] = "input_required"
                task["inputRequests"] = {
                    "name-1": ask.model_dump(by_alias=True, mode="json", exclude_none=True)
                }
                await answered.wait()
                if task["status"] != "input_required":
                    return  # cancelled meanwhile
                task.pop("inputRequests")
                task["status"] = "working"
                said = task.pop("answer")
                name = str((said.get("content") or {}).get("name", "nobody"))
            if task["status"] != "working":
                return
            if arguments.get("fail"):
                task["status"] = "failed"
                task["error"] = {"code": types.INTERNAL_ERROR, "message": "the job broke"}
                return
            jobs["run"] += 1
            text = f"job {jobs['run']} done for {name}"
            task["status"] = "completed"
            task["result"] = {"content": [{"type": "text", "text": text}], "isError": False}

        ctx.lifespan_context["background"].start_soon(work)
        return {"resultType": "task", **task}

    def known(params: Any) -> dict[str, Any]:
        task = tasks.get(params.task_id)
        if task is None:
            said = f"Failed to retrieve task: no task {params.task_id}"
            raise MCPError(types.INVALID_PARAMS, said)
        return task

    async def get_task(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return dict(known(params))

    async def update_task(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        task = known(params)
        said = (params.input_responses or {}).get("name-1")
        if task["status"] == "input_required" and said is not None:
            task["answer"] = said
            answers[params.task_id].set()
        return {}

    async def cancel_task(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        task = known(params)
        if task["status"] not in ("completed", "failed", "cancelled"):
            task["status"] = "cancelled"
            task.pop("inputRequests", None)
            answers[params.task_id].set()
        return {}

    async def set_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        state["level"] = params.level
        return types.EmptyResult()

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        argument = types.PromptArgument(name="name", required=True)
        greet = types.Prompt(name="greet", arguments=[argument])
        return types.ListPromptsResult(prompts=[greet, _CONFIRM_PROMPT])

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        if params.name == _CONFIRM_PROMPT.name:
            said = await confirmed(ctx, params)
            if isinstance(said, types.InputRequiredResult):
                return said
            return _said("prompt", said)  # type: ignore[return-value]
        name = (params.arguments or {}).get("name", "you")
        content = types.TextContent(type="text", text=f"Hello, {name}!")
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=content)])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        if uri == SECRET:
            said = await confirmed(ctx, params)
            if isinstance(said, types.InputRequiredResult):
                return said
            return _said("resource", said)  # type: ignore[return-value]
        if not uri.startswith("note:///"):
            raise MCPError(types.INVALID_PARAMS, f"no resource {uri}")
        if uri == CAPABILITIES:  # what the client declared, as the ``capabilities`` tool
            declared = ctx.session.client_capabilities
            said = "{}" if declared is None else declared.model_dump_json(exclude_none=True)
            contents = types.TextResourceContents(uri=uri, text=said)
            return types.ReadResourceResult(contents=[contents])
        topic = uri.removeprefix("note:///")
        contents = types.TextResourceContents(uri=uri, text=f"a note on {topic}")
        return types.ReadResourceResult(contents=[contents])

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(name="note", uri_template="note:///{topic}")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        news = types.Resource(name="news", uri="note:///news")
        return types.ListResourcesResult(resources=[news])

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        connection = ctx.session._connection  # the client's standalone channel
        subscribers.setdefault(str(params.uri), []).append(connection)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        connection = ctx.session._connection
        subscribed = subscribers.get(str(params.uri), [])
        if connection in subscribed:
            subscribed.remove(connection)
        return types.EmptyResult()

    async def complete(
        ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        if isinstance(params.ref, types.PromptReference) and params.ref.name == "greet":
            pool = NAMES
        elif isinstance(params.ref, types.ResourceTemplateReference):
            pool = TOPICS if params.ref.uri == "note:///{topic}" else ()
        else:
            pool = ()
        found = [v for v in pool if v.lower().startswith(params.argument.value.lower())]
        style = (params.context.arguments or {}).get("style") if params.context else None
        if style:
            found = [f"{style}:{v}" for v in found]
        return types.CompleteResult(completion=types.Completion(values=found, total=len(found)))

    server = Server(
        "reference",
        version="1.0",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_set_logging_level=set_level,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_read_resource=read_resource,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_completion=complete,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=(_MuteOnResources if mute_subscriptions else ListenHandler)(bus),
        cache_hints={
            "tools/list": CacheHint(ttl_ms=TOOLS_TTL_MS, scope="public"),
            "prompts/list": CacheHint(ttl_ms=PROMPTS_TTL_MS, scope="private"),
        },
    )
    server.extensions[TASKS] = {}
    server.add_request_handler("tasks/get", _TaskParams, get_task)
    server.add_request_handler("tasks/update", _TaskParams, update_task)
    server.add_request_handler("tasks/cancel", _TaskParams, cancel_task)
    return server


def _said(kind: str, said: str) -> types.GetPromptResult | types.ReadResourceResult:
    """What ``confirm_prompt`` (``kind`` ``"prompt"``) or :data:`SECRET` (``"resource"``)
    answers once its client said ``said``."""
    if kind == "prompt":
        content = types.TextContent(type="text", text=said)
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=content)])
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=SECRET, text=said)])


class _TaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


#: The UI resource of :func:`build_apps`' tool.
APP_URI = "ui://clock/app.html"


def build_apps(title: str) -> MCPServer:
    """A reference MCP Apps server: the tool ``clock`` bound to :data:`APP_URI`, an
    HTML page naming ``title``."""
    apps = Apps()

    @apps.tool(resource_uri=APP_URI, description="What time it is, with a UI.", name="clock")
    def clock() -> str:
        return "noon"

    apps.add_html_resource(APP_URI, f"<html><body>clock of {title}</body></html>")
    return MCPServer(f"apps-{title}", extensions=[apps])


async def _main(mute_subscriptions: bool = False) -> None:
    from mcp.server.stdio import stdio_server

    server = build(mute_subscriptions=mute_subscriptions)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    sys.path.remove(sys.path[0])  # this folder: its test modules are not the SDK's
    if sys.argv[1:2] == ["apps"]:
        build_apps(sys.argv[2]).run()
    else:
        anyio.run(_main, sys.argv[1:2] == ["mute-subscriptions"])
