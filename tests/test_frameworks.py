"""Each agent framework's own loop, with its real package, over tools served from an
asyncio supervisor (supervisor.frameworks), against real fixture servers.

The model is scripted (:class:`Script`), the same seven turns for each framework, each
turn seeing the tools the framework offered it and what the last call answered:

1. both servers' tools are offered: call ``echo_echo`` — answered;
2. call ``echo_add`` with an argument of the wrong type — refused by the gate, not made;
3. call ``ref_wait`` — the server is killed (SIGKILL) once the call runs there: the
   model is told the call may have taken effect;
4. wait for ``ref`` to be back (restarted, its tools registered), call ``echo_echo``;
5. ``ref``'s tools are offered again: call one — answered;
6. stop ``echo`` and, its tools withdrawn (``tools.deregistered``), call ``echo_echo``
   anyway (the tool list of the turn still had it) — told the server is unavailable and
   the call was not made;
7. ``echo``'s tools are no longer offered: answer ``done``.

The loop carries on through all of it, every call goes through the supervisor's gate
(the call history records each as ok, failed or indefinite), and leaving the block
leaves no server process. The frameworks are the ``.[interop]`` extra; without them a
test is skipped, unless ``$MCP_SUPERVISOR_REQUIRE_INTEROP`` is set (see ``tests/extras.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from supervisor.asyncio import AsyncSupervisor, open_supervisor
from supervisor.events import Event
from supervisor.faults import CallHistory
from supervisor.testing.servers import stdio_params
from tests.test_asyncio import gone
from tests.test_gateway_fidelity import REFERENCE

from .extras import require

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60.0
#: What the model reads of each kind of failure.
MAY_HAVE_RUN = "may have taken effect"
CHECK = "Check its effect before calling it again."
NOT_MADE = "The call was not made"
FIX = "correct the arguments and call it again"


def config() -> dict[str, object]:
    command, args = stdio_params("echo")
    return {
        "mcpServers": {
            "echo": {"command": command, "args": args, "approve": False},
            "ref": {"command": sys.executable, "args": [str(REFERENCE)], "approve": False},
        }
    }


class Events:
    """The supervisor's ``mcp.connected`` and ``tools.*`` events as they come, and a wait
    for one."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self.changed = asyncio.Condition()

    async def follow(self, sup: AsyncSupervisor, subscribed: asyncio.Event) -> None:
        async with sup.subscribe("mcp.connected", "tools.*") as events:
            subscribed.set()
            async for event in events:
                async with self.changed:
                    self.seen.append(event)
                    self.changed.notify_all()

    async def wait(self, after: int, match: Callable[[Event], bool]) -> None:
        """Until an event past the first ``after`` matches."""
        async with self.changed:
            await self.changed.wait_for(lambda: any(map(match, self.seen[after:])))


class Script:
    """The scripted model: :meth:`next` is one turn, given the tool names the framework
    offered and what the last call answered; it returns a call ``(name, arguments)``
    or the final answer. What each turn saw is kept for the test to check."""

    def __init__(self, sup: AsyncSupervisor, events: Events) -> None:
        self.sup = sup
        self.events = events
        self.offered: list[list[str]] = []
        self.answers: list[str | None] = []
        self.ref_pid: int | None = None
        self.killed = False

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        """The ``progress`` call option: ``ref_wait`` reports progress once running —
        then the server is killed, once."""
        if self.ref_pid is not None and not self.killed:
            self.killed = True
            os.kill(self.ref_pid, signal.SIGKILL)

    async def next(self, offered: list[str], answer: str | None) -> tuple[str, dict] | str:
        self.offered.append(sorted(offered))
        self.answers.append(answer)
        turn = len(self.offered)
        if turn == 1:
            return "echo_echo", {"text": "one"}
        if turn == 2:
            return "echo_add", {"a": "one", "b": 2}
        if turn == 3:
            self.ref_pid = (await self.sup.status())["ref"].pid
            self.mark = len(self.events.seen)
            return "ref_wait", {}
        if turn == 4:
            # ref restarted and listed its tools again (offered from the next turn on)
            await self.events.wait(
                self.mark, lambda e: e.kind == "tools.registered" and "ref_chatter" in e.names
            )
            return "echo_echo", {"text": "two"}
        if turn == 5:
            return "ref_chatter", {}
        if turn == 6:
            mark = len(self.events.seen)
            await self.sup.stop("echo")
            await self.events.wait(
                mark, lambda e: e.kind == "tools.deregistered" and "echo_echo" in e.names
            )
            return "echo_echo", {"text": "three"}
        return "done"


async def scenario(
    agent_loop: Callable[[AsyncSupervisor, Script], Awaitable[str]],
) -> tuple[Script, str, CallHistory, list[int]]:
    """Run ``agent_loop`` (the framework's) with the script over a fresh supervisor;
    its final answer, the calls the gate saw and the servers' pids."""
    history = CallHistory()
    events = Events()
    async with open_supervisor(config(), history=history) as sup:
        await sup.connect_all()
        pids = [record.pid for record in (await sup.status()).values()]
        subscribed = asyncio.Event()
        follower = asyncio.create_task(events.follow(sup, subscribed))
        await subscribed.wait()
        script = Script(sup, events)
        final = await agent_loop(sup, script)
        pids.append((await sup.status())["ref"].pid)
        follower.cancel()
    return script, final, history, pids


def check(script: Script, final: str, history: CallHistory, pids: list[int]) -> None:
    echo = {"echo_add", "echo_echo"}
    offered = [set(names) for names in script.offered]
    assert len(offered) == 7 and final == "done"
    assert echo <= offered[0] and "ref_wait" in offered[0]
    answers = script.answers
    assert answers[1] == "one"
    assert NOT_MADE in answers[2] and FIX in answers[2]
    assert "a: 'one' is not of type 'integer'" in answers[2]
    assert MAY_HAVE_RUN in answers[3] and CHECK in answers[3] and script.killed
    assert answers[4] == "two" and "ref_chatter" in offered[4]
    assert answers[5] is not None and NOT_MADE not in answers[5]
    assert NOT_MADE in answers[6] and "'echo'" in answers[6]
    assert not echo & offered[6] and "ref_chatter" in offered[6]
    outcomes = [(c.tool, c.outcome) for c in history.calls]
    assert outcomes == [
        ("echo_echo", "ok"),
        ("echo_add", "fail"),
        ("ref_wait", "info"),
        ("echo_echo", "ok"),
        ("ref_chatter", "ok"),
        ("echo_echo", "fail"),
    ]
    assert len(set(pids)) == 3 and all(gone(pid) for pid in pids)


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), WAIT))


#: A turn of a scripted model: the tools offered and the last answer → a call or the end.
Turn = Callable[[list[str], "str | None"], Awaitable["tuple[str, dict] | str"]]


# -- LangChain ---------------------------------------------------------------------------


def langchain_model(turn: Turn) -> Any:
    """A LangChain chat model whose replies are ``turn``'s, given the names of the tools
    bound to it and the last ``ToolMessage``'s text."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedChat(BaseChatModel):
        bound: list[str] = []

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.model_copy(update={"bound": [tool.name for tool in tools]})

        def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
            raise NotImplementedError("asynchronous only")

        async def _agenerate(self, messages: Any, stop: Any = None, **kw: Any) -> ChatResult:
            last = messages[-1]
            answer = str(last.content) if isinstance(last, ToolMessage) else None
            step = await turn(self.bound, answer)
            if isinstance(step, str):
                message = AIMessage(content=step)
            else:
                name, arguments = step
                call = {"name": name, "args": arguments, "id": f"call-{len(messages)}"}
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    return ScriptedChat()


def test_a_langchain_loop_carries_on_through_a_kill_and_a_stopped_server() -> None:
    """LangChain's tool calling (``langchain-core``): a chat model bound to the toolkit's
    tools each turn, each tool call run by its ``StructuredTool`` into a
    ``ToolMessage``; the failures are ``ToolMessage``\\ s with ``status="error"``."""
    require("langchain_core", "langchain")
    from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

    from supervisor.frameworks.langchain import SupervisorToolkit

    statuses: list[str] = []

    async def agent_loop(sup: AsyncSupervisor, script: Script) -> str:
        toolkit = SupervisorToolkit(sup, call_options={"progress": script.progress})
        model = langchain_model(script.next)
        messages: list[BaseMessage] = [HumanMessage("go")]
        known: dict[str, Any] = {}
        while True:
            tools = toolkit.get_tools()
            known.update({tool.name: tool for tool in tools})  # as bound once, earlier
            reply = await model.bind_tools(tools).ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                return str(reply.content)
            for call in reply.tool_calls:
                said = await known[call["name"]].ainvoke({**call, "type": "tool_call"})
                assert isinstance(said, ToolMessage)
                statuses.append(said.status)
                messages.append(said)

    check(*run(lambda: scenario(agent_loop)))
    assert statuses == ["success", "error", "error", "success", "success", "error"]


# -- OpenAI Agents SDK -------------------------------------------------------------------


def openai_model(turn: Turn) -> Any:
    """An Agents SDK ``Model`` whose responses are ``turn``'s, given the names of the
    tools of the request and the last function call output's text."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class ScriptedModel(Model):
        calls = 0

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            *args: Any,
            **kwargs: Any,
        ) -> ModelResponse:
            answer = None
            last = input[-1] if isinstance(input, list) else None
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                answer = _openai_text(last["output"])
            step = await turn([tool.name for tool in tools], answer)
            if isinstance(step, str):
                text = ResponseOutputText(type="output_text", text=step, annotations=[])
                item: Any = ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                name, arguments = step
                self.calls += 1
                item = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"call-{self.calls}",
                    call_id=f"call-{self.calls}",
                    name=name,
                    arguments=json.dumps(arguments),
                )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return ScriptedModel()


def _openai_text(output: Any) -> str:
    """The text of a function call output: a string, a text item or a list of them."""
    if isinstance(output, str):
        return output
    items = output if isinstance(output, list) else [output]
    return "\n".join(str(item.get("text", "")) for item in items if isinstance(item, dict))


def test_an_openai_agents_run_carries_on_through_a_kill_and_a_stopped_server() -> None:
    """The Agents SDK's ``Runner`` with the supervisor as the agent's one MCP server
    (``SupervisedMCPServer``) and a scripted ``Model``: the SDK lists the tools each
    turn and calls them through it; failures come back as error results it passes on."""
    require("agents", "openai-agents")
    from agents import Agent, RunConfig, Runner

    from supervisor.frameworks.openai_agents import SupervisedMCPServer

    async def agent_loop(sup: AsyncSupervisor, script: Script) -> str:
        server = SupervisedMCPServer(sup, call_options={"progress": script.progress})
        agent = Agent(name="scripted", model=openai_model(script.next), mcp_servers=[server])
        result = await Runner.run(
            agent, "go", max_turns=10, run_config=RunConfig(tracing_disabled=True)
        )
        return str(result.final_output)

    check(*run(lambda: scenario(agent_loop)))


# -- PydanticAI --------------------------------------------------------------------------


def pydantic_ai_model(turn: Turn, outcomes: list[str] | None = None) -> Any:
    """A PydanticAI ``FunctionModel`` whose responses are ``turn``'s, given the names of
    the function tools of the request and the last tool return's text (its outcome
    appended to ``outcomes``)."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    calls = 0

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        answer = None
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, (ToolReturnPart, RetryPromptPart)):
                    if outcomes is not None:
                        outcomes.append(getattr(part, "outcome", "retry prompt"))
                    answer = part.model_response_str()
        step = await turn([tool.name for tool in info.function_tools], answer)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        name, arguments = step
        calls += 1
        return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"call-{calls}")])

    return FunctionModel(model)


def test_a_pydantic_ai_run_carries_on_through_a_kill_and_a_stopped_server() -> None:
    """PydanticAI's ``Agent.run`` with ``SupervisorToolset`` and a ``FunctionModel``
    running the script: refused arguments come back as a retried tool return (the
    model asked to correct them), the other failures as failed ones."""
    require("pydantic_ai", "pydantic-ai")
    from pydantic_ai import Agent

    from supervisor.frameworks.pydantic_ai import SupervisorToolset

    outcomes: list[str] = []

    async def agent_loop(sup: AsyncSupervisor, script: Script) -> str:
        toolset = SupervisorToolset(sup, call_options={"progress": script.progress})
        agent = Agent(pydantic_ai_model(script.next, outcomes), toolsets=[toolset])
        return (await agent.run("go")).output

    check(*run(lambda: scenario(agent_loop)))
    assert outcomes == ["success", "retried", "failed", "success", "success", "failed"]


# -- the docs' snippets ------------------------------------------------------------------

#: Per framework: its module, its extra, its section of docs/frameworks.md, what stands in
#: for the user's model there (→ the scripted one), and the scripted model's maker.
SNIPPETS = {
    "langchain": (
        "langchain_core",
        "LangChain",
        {
            "from langchain_openai import ChatOpenAI  # your model\n": "",
            'model = ChatOpenAI(model="gpt-5.1")  # your model': "model = __model__",
        },
        langchain_model,
    ),
    "openai-agents": (
        "agents",
        "OpenAI Agents SDK",
        {'model = "gpt-5.1"  # your model': "model = __model__"},
        openai_model,
    ),
    "pydantic-ai": (
        "pydantic_ai",
        "PydanticAI",
        {'model = "openai:gpt-5.1"  # your model': "model = __model__"},
        pydantic_ai_model,
    ),
}


def snippet(heading: str) -> str:
    """The ```py block of docs/frameworks.md's section ``heading``."""
    page = (ROOT / "docs" / "frameworks.md").read_text()
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```py\n(.*?)```", section, re.S)
    return code


def children() -> set[int]:
    """This process's child processes."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.add(int(stat.parent.name))
    return found


@pytest.mark.parametrize("extra", SNIPPETS)
def test_the_docs_snippet_runs_as_written(
    extra: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each framework's snippet of docs/frameworks.md, run as written over a config of the
    echo server as ``notes``, with a scripted model in place of the user's (the lines
    marked ``# your model``): the model has ``notes_echo`` echo 'hello' and says what it
    answered; the snippet prints it, and leaves no process behind."""
    module, heading, model_lines, maker = SNIPPETS[extra]
    require(module, extra)
    code = snippet(heading)
    for line, scripted in model_lines.items():
        assert line in code, f"docs/frameworks.md's {heading} snippet has no {line!r}"
        code = code.replace(line, scripted)
    assert "# your model" not in code and '"mcp.json"' in code
    command, args = stdio_params("echo")
    notes = {"command": command, "args": args, "approve": False}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"notes": notes}}))
    code = code.replace('"mcp.json"', repr(str(path)))
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no trace export attempted

    async def echo_hello(offered: list[str], answer: str | None) -> tuple[str, dict] | str:
        if answer is None:
            assert "notes_echo" in offered
            return "notes_echo", {"text": "hello"}
        return f"The notes server said: {answer}"

    before = children()
    exec(
        compile(code, f"docs/frameworks.md ({heading})", "exec"),
        {  # noqa: S102
            "__name__": "__main__",
            "__model__": maker(echo_hello),
        },
    )
    assert "The notes server said: hello" in capsys.readouterr().out.splitlines()
    assert children() <= before


# -- what every framework shares ---------------------------------------------------------


def test_some_servers_only_and_a_tool_of_another_is_not_called() -> None:
    """``servers=[…]`` offers those servers' tools only; a call of another's tool (by a
    model that made its name up) is not made, and says so."""
    from supervisor.frameworks._toolbox import Toolbox

    async def main() -> tuple[set[str], str, str, list[str]]:
        history = CallHistory()
        async with open_supervisor(config(), history=history) as sup:
            toolbox = Toolbox(sup, servers=["echo"])
            await toolbox.settle()
            offered = {entry.name for entry in toolbox.entries()}
            other = await toolbox.call("ref_chatter", {})
            own = await toolbox.call("echo_echo", {"text": "mine"})
        return offered, other.text, own.text, [c.tool for c in history.calls]

    offered, other, own, called = run(main)
    assert offered == {"echo_add", "echo_count", "echo_echo"}
    assert other == "tool 'ref_chatter' is not one of this agent's tools\nThe call was not made."
    assert own == "mine" and called == ["echo_echo"]


def test_a_trio_supervisor_s_handle_is_refused_with_the_reason() -> None:
    """The frameworks run on asyncio: given the trio handle, the adapters say to use
    ``supervisor.asyncio``'s."""
    import trio

    from supervisor import open_supervisor as open_trio
    from supervisor.frameworks._toolbox import Toolbox

    async def main() -> str:
        async with open_trio({"mcpServers": {}}) as sup:
            with pytest.raises(TypeError) as refused:
                Toolbox(sup)  # type: ignore[arg-type]
        return str(refused.value)

    assert "supervisor.asyncio.open_supervisor" in trio.run(main)
