"""A tool call is one value built at each door and passed down whole; a refusal for want
of approval says how to allow the call as data, which each front end says in its terms."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx2
import pytest
import trio

import supervisor
from supervisor import open_supervisor
from supervisor.errors import ApprovalRequired
from supervisor.gateway import Gateway, serve_http
from supervisor.runtime import SupervisorHandle
from tests.test_gateway import TOKEN, fixture
from tests.test_gateway_fidelity import raw_call

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

PACKAGE = Path(supervisor.__file__).parent

#: A tool call's options besides its name, arguments and timeout.
CALL_OPTIONS = frozenset({"progress", "approve", "spill", "log_level", "rounds", "caller"})


def test_a_call_s_options_are_declared_once() -> None:
    """Below the library's door no function takes a call's options one by one (two or
    more of them): the gate, the server handle, the gateway and the tool search take the
    call as one value (``supervisor.tools._request.ToolCall``). The door is
    ``SupervisorHandle.call``, and a handle's ``call`` that has its very parameters."""
    door = [p for p in inspect.signature(SupervisorHandle.call).parameters if p != "self"]
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
            listed = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            below = where.startswith(("calls/", "server/", "gateway/", "transports/"))
            if not below and node.name == "call" and [p for p in listed if p != "self"] == door:
                continue  # a handle's verb, as the library's users call it
            if len(names & CALL_OPTIONS) >= 2:
                found.append(f"{where}:{node.lineno} {node.name}")
    assert len(door) == 9 and found == []


#: The merged tool name -> how its refusal says to allow it without asking (``None``:
#: only an approval can: it is listed in the server's ``approve``).
ALLOW = {
    "r_echo": None,
    "r_delete_note": (
        "add its exact name 'delete_note' to the server's autoApprove (autoApprove: true "
        "and globs do not cover destructive tools)"
    ),
    "r_add": "add 'add' to the server's autoApprove in the config",
}
ARGUMENTS = {"r_echo": {"text": "x"}, "r_delete_note": {"title": "x"}, "r_add": {"a": 1, "b": 2}}


async def test_a_refusal_for_want_of_approval_says_how_to_allow_it_as_data(
    tmp_path: Path,
) -> None:
    """Without an approval callback each call is refused: the library's error says how
    to allow the call without asking (``allow``), and so do, in their terms, the
    gateway's answer to a client that cannot be asked and the command line."""
    entry = fixture("rich", approve=["echo"])
    config = {"mcpServers": {"r": entry}, "supervisor": {"initTimeout": 60}}
    allowed: dict[str, str | None] = {}
    said: dict[str, str] = {}
    async with (
        open_supervisor(config) as sup,
        trio.open_nursery() as nursery,
        httpx2.AsyncClient(timeout=60) as http,
    ):
        for name in ALLOW:
            with pytest.raises(ApprovalRequired) as refused:
                await sup.call(name, ARGUMENTS[name])
            allowed[name] = refused.value.allow
        served = Gateway(sup)
        await nursery.start(served.run)
        info = await nursery.start(partial(serve_http, served, "127.0.0.1", 0, token=TOKEN))
        for name in ALLOW:
            body, headers = raw_call(name, ARGUMENTS[name])
            answer = (await http.post(info.url, json=body, headers=headers)).json()["result"]
            said[name] = answer["content"][0]["text"]
        nursery.cancel_scope.cancel()
    assert allowed == ALLOW
    gateway_how = {
        name: f"{allow}, or start the gateway with --yes"
        if allow is not None
        else "start the gateway with --yes (it is listed in the server's approve)"
        for name, allow in ALLOW.items()
    }
    for name, text in said.items():
        assert text.endswith(f"the call was not made. To allow it: {gateway_how[name]}"), text

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    for name, allow in ALLOW.items():
        done = await trio.run_process(
            [sys.executable, "-m", "supervisor", "call", "--config", str(path), name]
            + [json.dumps(ARGUMENTS[name])],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        how = allow and f"{allow}, or run with --yes"
        how = how or "run with --yes (it is listed in the server's approve)"
        assert done.returncode == 2
        assert done.stderr.decode().endswith(f"To allow it: {how}\n")
