"""Elicitation answers: the requested schema's defaults filled in before sending, and an
answer that does not fit the schema refused, not sent — in-process, against a real
in-memory server."""

from __future__ import annotations

import json
import logging

import mcp_types as types
import pytest
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from structlog.testing import capture_logs

from supervisor import open_supervisor
from supervisor.errors import ElicitationAnswerInvalid, ServerRequestError
from supervisor.server import complete_elicitation

#: A form with a default for every kind of field, and one required field without any.
SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "greeting": {"type": "string", "default": "hello"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": "number", "default": 0.5},
        "loud": {"type": "boolean", "default": False},
        "size": {"type": "string", "enum": ["s", "m", "l"], "default": "m"},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "default": ["a"],
        },
    },
    "required": ["name", "greeting"],
}
NO_SERVERS: dict[str, object] = {"mcpServers": {}}
DEFAULTS = {"greeting": "hello", "count": 3, "ratio": 0.5, "loud": False, "size": "m"}


def asking_app() -> MCPServer:
    """A server whose tool ``ask`` elicits :data:`SCHEMA` — mid-call with the legacy
    handshake, as an ``InputRequiredResult`` with 2026-07-28 — and answers with exactly
    what it received (the raw ``ElicitResult``, not re-validated on its side)."""
    app = MCPServer("asks")

    @app.tool()
    async def ask(ctx: Context) -> str | types.InputRequiredResult:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            result = await ctx.session.elicit_form("Your order?", SCHEMA, ctx.request_id)
        elif ctx.input_responses:
            result = ctx.input_responses["order"]
        else:
            form = types.ElicitRequestFormParams(message="Your order?", requested_schema=SCHEMA)
            return types.InputRequiredResult(
                input_requests={"order": types.ElicitRequest(params=form)}
            )
        return json.dumps({"action": result.action, "content": result.content}, sort_keys=True)

    return app


class TestCompleteAnswer:
    def test_missing_fields_get_the_schemas_defaults_given_ones_are_kept(self) -> None:
        """Each absent property with a default gets it; a given value is never replaced."""
        answer = complete_elicitation("s", SCHEMA, {"name": "bob", "count": 7, "tags": []})
        assert answer == {**DEFAULTS, "name": "bob", "count": 7, "tags": []}

    def test_a_default_is_a_copy(self) -> None:
        """A filled-in list is the answer's own: changing it leaves the schema alone."""
        answer = complete_elicitation("s", SCHEMA, {"name": "bob"})
        answer["tags"].append("b")  # type: ignore[attr-defined]
        assert SCHEMA["properties"]["tags"]["default"] == ["a"]  # type: ignore[index]

    @pytest.mark.parametrize(
        ("content", "errors"),
        [
            pytest.param({}, [("name", "required; the schema gives no default")], id="required"),
            pytest.param(
                {"name": "bob", "count": "seven"},
                [("count", "must be of type 'integer'")],
                id="type",
            ),
            pytest.param(
                {"name": "bob", "size": "xl"}, [("size", "must be one of 's', 'm', 'l'")], id="enum"
            ),
            pytest.param(
                {"name": "bob", "tags": ["a", "zzz"]},
                [("tags[1]", "must be one of 'a', 'b', 'c'")],
                id="array-item",
            ),
            pytest.param(
                {"name": 5, "loud": "yes"},
                [("loud", "must be of type 'boolean'"), ("name", "must be of type 'string'")],
                id="two",
            ),
        ],
    )
    def test_an_answer_that_does_not_fit_is_refused_naming_each_field(
        self, content: dict[str, object], errors: list[tuple[str, str]]
    ) -> None:
        """Wrong type, enum mismatch, a required field without default: refused with the
        server, each field and what the schema wants — never the value given."""
        with pytest.raises(ElicitationAnswerInvalid) as caught:
            complete_elicitation("shop", SCHEMA, content)
        assert (caught.value.server, caught.value.errors) == ("shop", errors)
        assert str(caught.value).startswith("MCP server 'shop': elicitation answer refused")
        for value in ("seven", "xl", "zzz", "yes"):
            assert value not in str(caught.value)

    def test_an_invalid_requested_schema_is_refused(self) -> None:
        """A requestedSchema that is not JSON Schema cannot check an answer: refused."""
        with pytest.raises(ElicitationAnswerInvalid, match="not valid JSON Schema"):
            complete_elicitation("s", {"type": "object", "properties": {"x": {"type": 3}}}, {})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_server_receives_the_schemas_defaults(mode: str) -> None:
    """A handler that accepts with only the required fields without defaults: the server
    receives the answer with every default filled in (both protocol eras)."""
    asked: list[types.ElicitRequestParams] = []

    async def handler(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "bob"})

    apps = {"shop": asking_app()}
    async with open_supervisor(
        NO_SERVERS, apps=apps, elicitation_callback=handler, mode=mode
    ) as sup:
        received = json.loads((await sup.call("shop_ask")).text)
    assert received == {"action": "accept", "content": {**DEFAULTS, "name": "bob", "tags": ["a"]}}
    assert [p.requested_schema for p in asked] == [SCHEMA]  # the handler saw the schema as is


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_answer_that_does_not_fit_is_not_sent(mode: str) -> None:
    """An accepted answer with a wrong type is refused, its content never sent: the call
    fails with the refusal naming the server, field and problem (error -32602: the
    legacy server was answered with it and passed it on; with 2026-07-28 the retried
    call that would carry the answer is not sent), a warning says the same, and a
    decline still goes through untouched."""
    answers = [
        types.ElicitResult(action="accept", content={"name": "bob", "count": "seven"}),
        types.ElicitResult(action="decline"),
    ]

    async def handler(context: object, params: object) -> types.ElicitResult:
        return answers.pop(0)

    apps = {"shop": asking_app()}
    before = structlog.get_config()  # warnings captured whatever ran before configured
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    try:
        with capture_logs() as logs:
            async with open_supervisor(
                NO_SERVERS, apps=apps, elicitation_callback=handler, mode=mode
            ) as sup:
                with pytest.raises(ServerRequestError) as caught:
                    await sup.call("shop_ask")
                declined = json.loads((await sup.call("shop_ask")).text)
    finally:
        structlog.configure(**before)
    said = "MCP server 'shop': elicitation answer refused: count: must be of type 'integer'"
    assert said in str(caught.value)
    assert "seven" not in str(caught.value)
    assert caught.value.code == -32602
    (warning,) = [e for e in logs if e["event"] == "elicitation answer refused, not sent"]
    assert (warning["server"], warning["errors"]) == ("shop", ["count: must be of type 'integer'"])
    assert declined == {"action": "decline", "content": None}
