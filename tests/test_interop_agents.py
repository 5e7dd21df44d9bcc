"""Agents written on asyncio use the gateway through their framework's own MCP client.

Each test starts a real ``serve --http`` (with a token, over the bundled echo server as
``notes``), runs the framework's snippet of docs/gateway.md against it as written, checks
what the framework makes of a call the gateway refuses, then stops the gateway and checks
that no server process is left. The OpenAI Agents SDK and PydanticAI run in this process
(``pip install -e '.[interop]'``) and are skipped where they are not installed. LangChain's
MCP adapters require ``mcp<2`` and so cannot be installed beside mcp-supervisor: their test
runs them in the interpreter named by ``$MCP_SUPERVISOR_LANGCHAIN_PYTHON`` (one of an
environment of their own), and is skipped when that is not set and this interpreter cannot
import them.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from supervisor.testing.servers import stdio_params

from .extras import require

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "interop-gateway-token-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
#: The address the snippets name; each test puts its gateway's own in its place.
DOCS_URL = "http://127.0.0.1:8000/mcp"
#: Generous: this machine may be busy, and starting a gateway and a server takes seconds.
READY_TIMEOUT = 120
EXIT_TIMEOUT = 60
#: What the gateway says of a call of ``notes_add``: it is not in ``autoApprove``.
REFUSED = (
    "tool 'notes_add' (server 'notes') needs approval (not auto-approved) and the gateway's "
    "client cannot be asked (it declared no elicitation on the session-based protocol); "
    "the call was not made. To allow it: add 'add' to the server's autoApprove in the "
    "config, or start the gateway with --yes"
)
LANGCHAIN_PYTHON = "MCP_SUPERVISOR_LANGCHAIN_PYTHON"
#: ``notes_add``'s arguments: valid, so what refuses the call is the approval policy.
ADD = {"a": 1, "b": 2}


def section() -> str:
    """docs/gateway.md's "From an asyncio agent"."""
    page = (ROOT / "docs" / "gateway.md").read_text()
    return page.split("## From an asyncio agent\n", 1)[1].split("\n## ", 1)[0]


def snippet(imports: str) -> str:
    """The section's ```py block that has ``imports``."""
    blocks = re.findall(r"```py\n(.*?)```", section(), re.S)
    (code,) = [block for block in blocks if imports in block]
    assert DOCS_URL in code
    return code


def docs_config() -> dict[str, Any]:
    """The section's config, run by this interpreter (the fixture server must import)."""
    (block,) = re.findall(r"```json\n(.*?)```", section(), re.S)
    config = json.loads(block)
    notes = config["mcpServers"]["notes"]
    assert [notes["command"], *notes["args"]] == ["python3", *stdio_params("echo")[1]]
    notes.update(command=sys.executable, initTimeout=60)  # a busy machine starts slowly
    return config


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def still_running(pidfds: dict[int, int], timeout: float) -> set[int]:
    """Those pids (of ``{pidfd: pid}``) whose process has not exited within ``timeout``
    seconds: a pidfd turns readable when its process exits, child of ours or not."""
    deadline = time.monotonic() + timeout
    left = dict(pidfds)
    try:
        while left and (wait := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(left), [], [], wait)
            for fd in ready:
                del left[fd]
        return set(left.values())
    finally:
        for fd in pidfds:
            os.close(fd)


class Gateway:
    """A ``serve --http`` process, and what it said on stderr."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.err = b""

    def url(self) -> str:
        """The URL the gateway prints once it serves (read from stderr as it comes)."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while (found := re.search(rb"mcp-supervisor: gateway at (\S+)\n", self.err)) is None:
            wait = deadline - time.monotonic()
            assert wait > 0, f"no URL from the gateway:\n{self.err.decode()}"
            if select.select([self.process.stderr], [], [], wait)[0]:
                chunk = os.read(self.process.stderr.fileno(), 65536)
                assert chunk, f"the gateway ended:\n{self.err.decode()}"
                self.err += chunk
        return found.group(1).decode()


@contextmanager
def running_gateway(tmp_path: Path) -> Iterator[Gateway]:
    """``mcp-supervisor serve --http 127.0.0.1:0`` with the token in its environment, over
    the docs' config (the echo fixture server as ``notes``), started at once (a test
    imports its framework meanwhile). On leaving, SIGTERM: the gateway exits 143 and its
    server process is gone."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(docs_config()))
    runtime = tempfile.mkdtemp(prefix="mcps-")  # the local socket's; short enough for one
    env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN, "XDG_RUNTIME_DIR": runtime}
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
        + ["--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    gateway = Gateway(process)
    try:
        yield gateway
        servers = children(process.pid)
        assert len(servers) == 1, servers  # the notes server, started for the calls
        pidfds = {os.pidfd_open(pid): pid for pid in servers}
        process.send_signal(signal.SIGTERM)
        err = gateway.err + process.communicate(timeout=EXIT_TIMEOUT)[1]
        assert process.returncode == 143, err.decode()
        assert still_running(pidfds, EXIT_TIMEOUT) == set()
        assert b"Traceback" not in err, err.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
        shutil.rmtree(runtime, ignore_errors=True)


def run_snippet_here(imports: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the docs' snippet in this process (it calls ``asyncio.run`` itself)."""
    monkeypatch.setenv("MCP_SUPERVISOR_GATEWAY_TOKEN", TOKEN)
    code = snippet(imports).replace(DOCS_URL, url)
    exec(compile(code, f"docs/gateway.md ({imports})", "exec"), {"__name__": "__main__"})


def assert_printed_the_tools_and_hello(out: str) -> None:
    listed, said = out.splitlines()
    assert {"notes_echo", "notes_add", "notes_count"} <= set(ast.literal_eval(listed))
    assert said == "hello"


def test_the_openai_agents_sdk_lists_and_calls_through_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Agents SDK's ``MCPServerStreamableHttp`` with the token header lists the merged
    tools and calls one, as the docs' snippet shows; a call the gateway refuses comes back
    as a result with ``is_error`` and the gateway's reason, text and data."""
    require("agents", "interop")  # before starting anything: imported while the gateway runs

    async def main(url: str) -> tuple[list[Any], Any]:
        gateway = agents_mcp.MCPServerStreamableHttp(
            params={"url": url, "headers": HEADERS}, client_session_timeout_seconds=30
        )
        async with gateway:
            return await gateway.list_tools(), await gateway.call_tool("notes_add", ADD)

    with running_gateway(tmp_path) as served:
        agents_mcp = pytest.importorskip("agents.mcp")
        url = served.url()
        run_snippet_here("from agents.mcp import", url, monkeypatch)
        tools, refused = asyncio.run(main(url))
    assert_printed_the_tools_and_hello(capsys.readouterr().out)
    (echo,) = [tool for tool in tools if tool.name == "notes_echo"]
    assert echo.input_schema["required"] == ["text"]  # as the server listed it
    assert refused.is_error and refused.content[0].text == REFUSED
    error = refused.meta["mcp-supervisor/error"]
    assert error == {"type": "ApprovalRequired", "server": "notes", "effect": "not executed"}


def test_pydantic_ai_lists_and_calls_through_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PydanticAI's ``MCPToolset`` with the token header lists the merged tools and calls
    one, as the docs' snippet shows; a call the gateway refuses raises ``ModelRetry`` with
    the gateway's reason, which PydanticAI hands back to the model."""
    require("pydantic_ai", "interop")

    async def main(url: str) -> list[Any]:
        from pydantic_ai.exceptions import ModelRetry

        async with pydantic_ai_mcp.MCPToolset(url, headers=HEADERS) as gateway:
            with pytest.raises(ModelRetry) as refused:
                await gateway.direct_call_tool("notes_add", ADD)
            assert str(refused.value) == REFUSED
            return await gateway.list_tools()

    with running_gateway(tmp_path) as served:
        pydantic_ai_mcp = pytest.importorskip("pydantic_ai.mcp", exc_type=ImportError)
        url = served.url()
        run_snippet_here("from pydantic_ai.mcp import", url, monkeypatch)
        tools = asyncio.run(main(url))
    assert_printed_the_tools_and_hello(capsys.readouterr().out)
    (echo,) = [tool for tool in tools if tool.name == "notes_echo"]
    assert echo.input_schema["required"] == ["text"]  # as the server listed it


#: Run by LangChain's interpreter after the docs' snippet: a tool call that the gateway
#: refuses, made as an agent makes it.
LANGCHAIN_REFUSED = """
import sys


async def refused():
    headers = {"Authorization": "Bearer " + os.environ["MCP_SUPERVISOR_GATEWAY_TOKEN"]}
    connection = {"transport": "streamable_http", "url": sys.argv[1], "headers": headers}
    tools = {tool.name: tool for tool in await MultiServerMCPClient({"gw": connection}).get_tools()}
    call = {"type": "tool_call", "id": "1", "name": "notes_add", "args": {"a": 1, "b": 2}}
    message = await tools["notes_add"].ainvoke(call)
    print(message.status, message.content[0]["text"])


asyncio.run(refused())
"""


def langchain_python() -> str:
    """The interpreter named by ``$MCP_SUPERVISOR_LANGCHAIN_PYTHON``, else this one if it
    has LangChain's MCP adapters; else the test is skipped."""
    if named := os.environ.get(LANGCHAIN_PYTHON):
        return named
    if importlib.util.find_spec("langchain_mcp_adapters") is None:
        pytest.skip(
            "langchain-mcp-adapters is not installed here (it requires mcp<2): set "
            f"${LANGCHAIN_PYTHON} to the python of an environment that has it"
        )
    return sys.executable


def test_langchain_lists_and_calls_through_the_gateway(tmp_path: Path) -> None:
    """LangChain's ``MultiServerMCPClient`` (in an environment of its own, which needs
    neither mcp-supervisor nor trio) with the token header lists the merged tools and
    calls one, as the docs' snippet shows; a tool call the gateway refuses answers an
    error ``ToolMessage`` with its reason."""
    python = langchain_python()
    env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    env.pop("PYTHONPATH", None)  # nothing of this checkout in the agent's environment
    code = snippet("from langchain_mcp_adapters.client import")
    with running_gateway(tmp_path) as served:
        url = served.url()
        done = subprocess.run(
            [python, "-c", code.replace(DOCS_URL, url) + LANGCHAIN_REFUSED, url],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    listed, said, refused = done.stdout.splitlines()
    assert_printed_the_tools_and_hello(f"{listed}\n{said}\n")
    assert refused == f"error {REFUSED}"
