"""Elicitation answers: the requested schema's defaults filled in, the answer checked.

A server asks the user for input with ``elicitation/create``; the embedder's
``elicitation_callback`` answers. For a form-mode request that the handler accepts,
:func:`complete_elicitation` fills in each property the answer left out with the ``default``
the requested schema gives it (``requestedSchema.properties.<field>.default``, SEP-1034),
then validates the whole answer against the requested schema with ``jsonschema`` (the
schema's own ``$schema`` dialect, Draft 2020-12 by default; ``format`` checked where
``jsonschema`` can).

An answer that does not fit — a value of the wrong type, an ``enum`` mismatch, a required
field missing with no default — is not sent: :func:`checked_elicitation` answers with a
JSON-RPC error instead, code -32602 (invalid params, what the TypeScript SDK sends for the
same case), whose message is the :class:`~supervisor.errors.ElicitationAnswerInvalid` text
naming the server, each field and what the schema wants, and logs that error as a warning.
With the legacy handshake the server receives that error (an SDK server passes it on as its
answer to the ``tools/call`` that asked, so the embedder's ``call`` raises
:class:`~supervisor.errors.ServerRequestError` with it); on a 2026-07-28 connection the
answer would travel in the retried ``tools/call``, which the SDK then does not send, and
``call`` raises the same error. Answers that decline or cancel, URL-mode requests and the
handler's own errors pass through untouched.

A requested schema that is not valid JSON Schema is refused the same way before the
handler is asked: a form nobody can answer correctly is not shown.

Messages never quote the answer's values (a person typed them), only the field and what
the schema wants.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types

from ..errors import ElicitationAnswerInvalid
from ..log import get_logger
from ..tools._validate import _path

if TYPE_CHECKING:
    import jsonschema.protocols
    from mcp.client.session import ClientRequestContext, ElicitationFnT

log = get_logger("supervisor.server")

#: The JSON-RPC error code an answer refused here is sent with.
REFUSED_CODE = types.INVALID_PARAMS


def complete_elicitation(
    server: str, schema: Mapping[str, object], content: Mapping[str, object] | None
) -> dict[str, object]:
    """``content`` with the schema's defaults filled in for the properties it lacks,
    checked against ``schema``.

    A property present in ``content`` is kept as given, ``None`` included. Raises
    :class:`~supervisor.errors.ElicitationAnswerInvalid` (naming ``server``) listing every
    problem, or — when ``schema`` itself is not valid JSON Schema — that one problem.
    """
    answer = dict(content or {})
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for field, spec in properties.items():
            if field not in answer and isinstance(spec, Mapping) and "default" in spec:
                answer[field] = copy.deepcopy(spec["default"])
    problems = sorted(dict.fromkeys(_problems(_validator(server, schema), answer)))
    if problems:
        raise ElicitationAnswerInvalid(server, problems)
    return answer


def checked_elicitation(handler: ElicitationFnT, server: str) -> ElicitationFnT:
    """``handler`` wrapped for ``server``: defaults filled in and answers checked by
    :func:`complete_elicitation` (see the module docstring for what the server receives)."""

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if not isinstance(params, types.ElicitRequestFormParams):
            return await handler(context, params)
        schema = params.requested_schema
        try:
            _validator(server, schema)
        except ElicitationAnswerInvalid as exc:
            return _refuse(exc)
        result = await handler(context, params)
        if not isinstance(result, types.ElicitResult) or result.action != "accept":
            return result
        try:
            content = complete_elicitation(server, schema, result.content)
        except ElicitationAnswerInvalid as exc:
            return _refuse(exc)
        return result.model_copy(update={"content": content})

    return elicit


def _refuse(error: ElicitationAnswerInvalid) -> types.ErrorData:
    log.warning(
        "elicitation answer refused, not sent",
        server=error.server,
        errors=[f"{field}: {problem}" for field, problem in error.errors],
    )
    return types.ErrorData(code=REFUSED_CODE, message=str(error))


def _validator(server: str, schema: Mapping[str, object]) -> jsonschema.protocols.Validator:
    import jsonschema.validators  # only when a server asks: most sessions never elicit

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)  # pyright: ignore[reportArgumentType]  # any Mapping (stubs: dict)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        problem = f"the server's requestedSchema is not valid JSON Schema (at {where})"
        raise ElicitationAnswerInvalid(server, [("(root)", problem)]) from exc
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _problems(
    validator: jsonschema.protocols.Validator, answer: dict[str, object]
) -> Iterable[tuple[str, str]]:
    """``(field, what the schema wants)`` for each error, without the answer's values."""
    # (the answer is JSON, its values objects: the stubs' JSON type wants them narrower)
    for error in validator.iter_errors(answer):  # pyright: ignore[reportArgumentType]
        field = _path(error.absolute_path)
        wants = error.validator_value
        match error.validator:
            case "required":
                given = error.instance if isinstance(error.instance, Mapping) else {}
                names = cast("list[str]", wants)  # what "required" holds
                missing = [name for name in names if name not in given]
                for name in missing:
                    yield (
                        _path([*error.absolute_path, name]),
                        "required; the schema gives no default",
                    )
            case "type":
                yield field, f"must be of type {_options(wants)}"
            case "enum":
                yield field, f"must be one of {_options(wants)}"
            case "const":
                yield field, f"must be {wants!r}"
            case "format":
                yield field, f"must be a valid {wants!r}"
            case "additionalProperties" if wants is False:
                # the object (JSON) and its schema
                given = cast("Mapping[str, object]", error.instance)
                schema = cast("Mapping[str, Any]", error.schema)
                defined = schema.get("properties", {})
                for name in sorted(set(given) - set(defined)):
                    yield _path([*error.absolute_path, name]), "not a field of the schema"
            case _:
                yield field, f"does not satisfy {error.validator} {wants!r}"


def _options(wants: object) -> str:
    if isinstance(wants, list):
        return ", ".join(repr(w) for w in wants)
    return repr(wants)
