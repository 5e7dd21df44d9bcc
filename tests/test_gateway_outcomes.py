"""How the gateway answers each way a call can end — a result, a tool's own error, an
input round, a task, and each kind of failure — byte for byte as a 2026-07-28 client
gets it over HTTP, against real backing servers (the fixture servers and
tests/reference_server.py)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import pytest
import trio

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._relay import Relay
from tests.test_gateway import TOKEN, fixture
from tests.test_gateway_fidelity import AUTO_APPROVED, REFERENCE, raw_call

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICITATION = {"elicitation": {"form": {}}}

#: case -> (tool, arguments, the client's capabilities, the request's ``_meta``)
CASES: dict[str, tuple[str, dict[str, object], dict[str, object], dict[str, object]]] = {
    "result": ("rich_echo", {"text": "hi"}, {}, {}),
    "tool error": ("rich_fail", {"message": "it broke"}, {}, {}),
    "round": ("ref_confirm", {}, ELICITATION, {}),
    "round not declared": ("ref_confirm", {}, {}, {}),
    "task": ("ref_job", {"ask": False}, TASKS, {}),
    "unknown tool": ("rich_nothing", {}, {}, {}),
    "invalid arguments": ("rich_echo", {"text": 42}, {}, {}),
    "approval required": ("asks_echo", {"text": "x"}, {}, {}),
    "timeout": ("slow_sleep", {"seconds": 30}, {}, {"mcp-supervisor/timeout": 0.5}),
    "rate limited": ("limited_echo", {"text": "again"}, {}, {}),
    "unavailable": ("broken_echo", {"text": "x"}, {}, {}),
}

#: What the gateway answered each case with before its calls were values and outcomes.
EXPECTED: dict[str, Any] = {
    "approval required": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "effect": "not executed",
                    "server": "asks",
                    "type": "ApprovalRequired",
                },
            },
            "content": [
                {
                    "text": "tool 'asks_echo' (server 'asks') "
                    "needs approval (not "
                    "auto-approved) and the gateway's "
                    "client cannot be asked (it "
                    "declared no elicitation on the "
                    "session-based protocol); the "
                    "call was not made. To allow it: "
                    "add 'echo' to the server's "
                    "autoApprove in the config, or "
                    "start the gateway with --yes",
                    "type": "text",
                }
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "invalid arguments": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "effect": "not executed",
                    "errors": [{"message": "42 is not of type 'string'", "path": "text"}],
                    "server": "rich",
                    "type": "ToolArgumentsInvalid",
                },
            },
            "content": [
                {"text": "tool 'rich_echo': text: 42 is not of type 'string'", "type": "text"}
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "rate limited": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "by": "server",
                    "effect": "not executed",
                    "limit": "1/min",
                    "retryAfter": "S",
                    "server": "limited",
                    "type": "RateLimited",
                },
            },
            "content": [
                {
                    "text": "tool 'limited_echo' was not called: "
                    "over MCP server 'limited''s rateLimit "
                    "(1/min); nothing was sent. Try again "
                    "in S s",
                    "type": "text",
                }
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "result": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/server": "rich",
            },
            "content": [{"text": "hi", "type": "text"}],
            "isError": False,
            "resultType": "complete",
            "structuredContent": {"result": "hi"},
        },
    },
    "round": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "mcp-supervisor", "version": "0.1.0"}
            },
            "inputRequests": {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "Confirm?",
                        "mode": "form",
                        "requestedSchema": {"properties": {}, "type": "object"},
                    },
                }
            },
            "requestState": "(sealed)",
            "resultType": "input_required",
        },
    },
    "round not declared": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "effect": "may have taken effect",
                    "server": None,
                    "type": "SupervisorError",
                },
            },
            "content": [
                {
                    "text": "MCP server 'ref' needs input "
                    "this client did not declare "
                    "(elicitation) to complete the "
                    "call; it was not completed",
                    "type": "text",
                }
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "task": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "mcp-supervisor", "version": "0.1.0"}
            },
            "createdAt": "2026-12-04T00:00:00Z",
            "lastUpdatedAt": "2026-12-04T00:00:00Z",
            "pollIntervalMs": 20,
            "resultType": "task",
            "status": "working",
            "taskId": "ref/job-1",
            "ttlMs": 60000,
        },
    },
    "timeout": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "effect": "may have taken effect",
                    "server": "slow",
                    "type": "ToolCallTimeout",
                },
            },
            "content": [
                {
                    "text": "MCP server 'slow' did not answer tool "
                    "'sleep' within 0.5 s: it may have taken "
                    "effect (it may still be running there) and "
                    "was not retried",
                    "type": "text",
                }
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "tool error": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/server": "rich",
            },
            "content": [{"text": "it broke", "type": "text"}],
            "isError": True,
            "resultType": "complete",
        },
    },
    "unavailable": {
        "id": 1,
        "jsonrpc": "2.0",
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcp-supervisor",
                    "version": "0.1.0",
                },
                "mcp-supervisor/error": {
                    "effect": "not executed",
                    "server": "broken",
                    "type": "ServerUnavailable",
                },
            },
            "content": [
                {
                    "text": "MCP server 'broken' (pid N) exited "
                    "with code 3. It was tried once and is "
                    "not retried "
                    "(open_supervisor(retries=False))",
                    "type": "text",
                }
            ],
            "isError": True,
            "resultType": "complete",
        },
    },
    "unknown tool": {
        "error": {
            "code": -32602,
            "message": "no tool named 'rich_nothing' (did you mean "
            "rich_add_note, rich_image, rich_count?)",
        },
        "id": 1,
        "jsonrpc": "2.0",
    },
}


@asynccontextmanager
async def gateway() -> AsyncIterator[str]:
    """A gateway over HTTP in front of the reference server and fixture servers, every
    one connected (but ``broken``, which cannot start); yields its URL."""
    ref = {"command": sys.executable, "args": [str(REFERENCE)], "autoApprove": AUTO_APPROVED}
    config = {
        "mcpServers": {
            "ref": ref,
            "rich": fixture("rich", autoApprove=True),
            "slow": fixture("slow", autoApprove=True),
            "asks": fixture("echo"),  # nothing auto-approved
            "limited": fixture("echo", autoApprove=True, rateLimit="1/min"),
            "broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]},
        }
    }
    relay = Relay()
    async with (
        open_supervisor(config, retries=False, **relay.client_options()) as sup,  # type: ignore[arg-type]
        trio.open_nursery() as nursery,
    ):
        served = Gateway(sup, relay=relay)
        await nursery.start(served.run)
        await sup.tools()
        info = await nursery.start(partial(serve_http, served, "127.0.0.1", 0, token=TOKEN))
        yield info.url
        nursery.cancel_scope.cancel()


def _stable(answer: Any) -> Any:
    """``answer`` with what differs between runs left out: a sealed ``requestState``, a
    process id, the seconds until a rate limit lets a call through."""
    result = answer.get("result")
    if isinstance(result, dict) and isinstance(result.get("requestState"), str):
        answer = {**answer, "result": {**result, "requestState": "(sealed)"}}
    text = re.sub(r"\(pid \d+\)", "(pid N)", json.dumps(answer))
    text = re.sub(r'"retryAfter": [0-9.]+', '"retryAfter": "S"', text)  # seconds left
    text = re.sub(r"Try again in [0-9.]+", "Try again in S", text)
    return json.loads(text)


async def test_the_gateway_answers_each_outcome_as_it_did() -> None:
    """Each case's JSON-RPC answer is what :data:`EXPECTED` holds."""
    answers: dict[str, Any] = {}
    with trio.fail_after(120):
        async with gateway() as url, httpx2.AsyncClient(timeout=60) as http:
            body, headers = raw_call("limited_echo", {"text": "first"})
            await http.post(url, json=body, headers=headers)  # takes the minute's one call
            for case, (tool, arguments, capabilities, meta) in CASES.items():
                body, headers = raw_call(tool, arguments, capabilities=capabilities, meta=meta)
                answer = (await http.post(url, json=body, headers=headers)).json()
                answers[case] = _stable(answer)
    assert answers == EXPECTED
