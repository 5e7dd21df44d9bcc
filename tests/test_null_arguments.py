"""A ``null`` given for an optional tool parameter whose schema does not take ``null`` is
left out of the call, as the MCP specification has a client do (SEP-2243: a null and an
absent parameter mean the same, and its ``Mcp-Param-*`` header is omitted) — through the
library and through the gateway, whose caller sent it; a ``null`` for a required
parameter, or any other wrong value, is still refused before anything is sent.

The backing server is tests/reference_server.py: its ``arguments`` tool (the shape of the
conformance suite's ``test_custom_headers_null``) answers the arguments it got and the
``Mcp-Param-*`` headers they came with.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from supervisor import open_supervisor
from supervisor.errors import ToolArgumentsInvalid
from supervisor.tools import ApprovalRequest
from supervisor.tools._validate import ArgumentValidator
from tests.reference_server import _TOOLS
from tests.test_gateway import http_client, text
from tests.test_gateway_fidelity import backing, gateway_url

# The reference server still serves logging, deprecated by 2026-07-28 (SEP-2577).
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

#: the reference server's ``arguments`` tool: ``region`` and ``query`` required,
#: ``verbose`` an optional boolean; ``region`` and ``verbose`` mirrored in headers
ARGUMENTS = next(t for t in _TOOLS if t.name == "arguments")
#: what the conformance suite's client is asked to send such a tool
GIVEN = {"region": "us-east1", "verbose": None, "query": "SELECT 1"}
SENT = {"region": "us-east1", "query": "SELECT 1"}


def tool(properties: dict[str, Any], required: list[str] | None = None) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return types.Tool(name="t", input_schema=schema)


def refused(t: types.Tool, arguments: dict[str, object]) -> list[tuple[str, str]]:
    with pytest.raises(ToolArgumentsInvalid) as info:
        ArgumentValidator().prepare(t, arguments)
    return info.value.errors


# -- what is sent -------------------------------------------------------------------------


def test_a_null_for_an_optional_parameter_is_left_out() -> None:
    given = dict(GIVEN)
    assert ArgumentValidator().prepare(ARGUMENTS, given) == SENT
    assert given == GIVEN  # the caller's own arguments are not changed


def test_valid_arguments_are_sent_as_they_are() -> None:
    given = {"region": "us-east1", "verbose": True, "query": "SELECT 1"}
    assert ArgumentValidator().prepare(ARGUMENTS, given) is given


@pytest.mark.parametrize(
    "verbose",
    [
        {"type": ["boolean", "null"]},
        {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        {},  # any value at all
    ],
)
def test_a_null_the_schema_takes_is_sent(verbose: dict[str, Any]) -> None:
    given = {"verbose": None}
    assert ArgumentValidator().prepare(tool({"verbose": verbose}), given) is given


def test_a_null_for_a_required_parameter_is_refused() -> None:
    assert refused(ARGUMENTS, {"region": None, "query": "SELECT 1"}) == [
        ("region", "None is not of type 'string'")
    ]


def test_a_wrong_value_is_refused_with_the_errors_of_what_was_given() -> None:
    """A real type error is refused as ever; beside a null, the error names both, as
    the arguments given are wrong (the same message as when nulls were not left out)."""
    wrong = {"region": "us-east1", "verbose": "yes", "query": "SELECT 1"}
    assert refused(ARGUMENTS, wrong) == [("verbose", "'yes' is not of type 'boolean'")]
    both = {"region": 7, "verbose": None, "query": "SELECT 1"}
    assert refused(ARGUMENTS, both) == [
        ("region", "7 is not of type 'string'"),
        ("verbose", "None is not of type 'boolean'"),
    ]


def test_a_null_inside_a_parameter_is_not_touched() -> None:
    """Only a parameter itself is left out: a null inside an object is the value's own."""
    nested = tool({"options": {"type": "object", "properties": {"verbose": {"type": "boolean"}}}})
    assert refused(nested, {"options": {"verbose": None}}) == [
        ("options.verbose", "None is not of type 'boolean'")
    ]


def test_a_null_is_not_left_out_where_the_rest_would_not_pass() -> None:
    """A schema that refuses the arguments without that key (``minProperties``) refuses
    the null, as ever: what is left must pass too."""
    strict = types.Tool(
        name="t",
        input_schema={
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}},
            "minProperties": 1,
        },
    )
    assert refused(strict, {"verbose": None}) == [("verbose", "None is not of type 'boolean'")]


# -- through the library and the gateway --------------------------------------------------


def answer(said: str) -> dict[str, Any]:
    return json.loads(said)  # type: ignore[no-any-return]


async def test_the_library_leaves_a_null_optional_argument_out() -> None:
    """``handle.call`` with ``verbose: None``: the server gets the other arguments, and
    the ``Mcp-Param-Region`` header but no ``Mcp-Param-Verbose``; the approval asked is
    about what is sent."""
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    async with backing("http") as entry, open_supervisor({"mcpServers": {"ref": entry}}) as sup:
        result = await sup.call("ref_arguments", dict(GIVEN), approve=approve)
    got = answer(result.text)
    assert got["arguments"] == SENT
    assert got["headers"] == {"mcp-param-region": "us-east1"}
    assert [dict(request.arguments) for request in asked] == [SENT]


async def test_the_gateway_leaves_its_caller_s_null_optional_argument_out() -> None:
    """A client of the gateway calls with ``verbose: null`` (sending no header for it, as
    the SDK does): the backing server gets the call without it."""
    async with backing("http") as entry:
        servers = {"ref": {**entry, "autoApprove": ["arguments"]}}
        async with gateway_url(servers, "auto") as url, http_client(url) as client:
            await client.list_tools()  # the headers the client mirrors follow the listing
            result = await client.call_tool("ref_arguments", dict(GIVEN))
    assert not result.is_error, text(result)
    got = answer(text(result))
    assert got["arguments"] == SENT
    assert got["headers"] == {"mcp-param-region": "us-east1"}
