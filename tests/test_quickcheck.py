"""The quick accept agrees with jsonschema: it never accepts what Draft 2020-12 rejects,
and it accepts every plain JSON value that Draft 2020-12 accepts."""

from __future__ import annotations

import jsonschema
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.errors import ToolArgumentsInvalid
from supervisor.tools._quickcheck import quick_check
from supervisor.tools._validate import ArgumentValidator, output_accepted

TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
NAMES = st.sampled_from(["a", "b", "c", "title", "n"])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 1.0, -3.0, 2.5])
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)

#: the values where JSON types disagree with Python's: bools, integral floats, containers
tricky = st.sampled_from([1.0, 0.0, -2.0, 0.5, True, False, 0, 1, "1", "", None, [], {}])
values = tricky | json_values

property_schemas = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(TYPES)
        | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        "title": st.text(max_size=5),
        "default": json_values,
    },
)

schemas = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(NAMES, property_schemas, max_size=4),
        "required": st.lists(NAMES, max_size=3),
        "additionalProperties": st.booleans(),
        "title": st.text(max_size=5),
    },
)


@settings(max_examples=500, deadline=None)
@given(schemas, st.data())
def test_quick_check_agrees_with_jsonschema(schema: dict, data: st.DataObject) -> None:
    check = quick_check(schema)
    assert check is not None  # every schema drawn here is in the quick subset
    named = {*schema.get("properties", {}), *schema.get("required", []), "extra"}
    instance = data.draw(
        st.fixed_dictionaries({}, optional={name: values for name in sorted(named)}) | values
    )
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert check(instance) == valid


@pytest.mark.parametrize(
    ("declared", "value", "valid"),
    [
        ("integer", 2.0, True),
        ("integer", 2.5, False),
        ("integer", True, False),
        ("number", False, False),
        ("number", 3, True),
        (["string", "null"], None, True),
        ("object", [], False),
        ("array", {}, False),
    ],
)
def test_json_types_follow_draft_2020_12(declared: object, value: object, valid: bool) -> None:
    schema = {"type": "object", "properties": {"a": {"type": declared}}}
    check = quick_check(schema)
    assert check is not None
    assert check({"a": value}) is valid
    assert jsonschema.Draft202012Validator(schema).is_valid({"a": value}) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": True}},
        {"type": ["object", "null"]},
    ],
)
def test_anything_else_is_left_to_jsonschema(schema: dict) -> None:
    assert quick_check(schema) is None


def test_errors_still_come_from_jsonschema() -> None:
    """A call the quick check turns down gets jsonschema's full list of errors."""
    tool = types.Tool(
        name="t",
        input_schema={
            "type": "object",
            "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["title"],
            "additionalProperties": False,
        },
    )
    validator = ArgumentValidator()
    validator.validate(tool, {"title": "x", "n": 2.0})  # 2.0 is an integer in 2020-12
    with pytest.raises(ToolArgumentsInvalid) as wrong:
        validator.validate(tool, {"n": True, "extra": 1})
    assert wrong.value.errors == [
        ("(root)", "'title' is a required property"),
        ("(root)", "Additional properties are not allowed ('extra' was unexpected)"),
        ("n", "True is not of type 'integer'"),
    ]


@settings(max_examples=300, deadline=None)
@given(schemas | property_schemas, st.data())
def test_an_output_is_accepted_only_where_the_sdk_s_check_passes(
    schema: dict, data: st.DataObject
) -> None:
    """``output_accepted`` (what spares a forwarded result the SDK client's own
    ``outputSchema`` check) accepts only what that check passes — the schema valid under
    its metaschema (a ``required`` with a name twice is not) and the instance valid under
    it, by the validator the SDK picks — and, for a valid schema of the quick subset,
    everything it passes."""
    named = {*schema.get("properties", {}), *schema.get("required", []), "extra"}
    instance = data.draw(
        st.fixed_dictionaries({}, optional={name: values for name in sorted(named)}) | values
    )
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        passes = False
        sound = False
    else:
        passes = cls(schema).is_valid(instance)
        sound = quick_check(schema) is not None
    accepted = output_accepted(schema, instance)
    assert not accepted or passes
    if sound:
        assert accepted == passes


def test_a_broken_output_schema_is_left_to_the_sdk_each_time() -> None:
    """A schema the quick subset would take but that breaks its metaschema is never
    accepted, however often asked (the verdict is kept per schema object)."""
    broken = {"type": "object", "title": 5, "properties": {"n": {"type": "integer"}}}
    sound = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for _ in range(2):
        assert not output_accepted(broken, {"n": 1})
        assert output_accepted(sound, {"n": 1}) and not output_accepted(sound, {"n": "1"})
    assert not output_accepted(dict(sound), None)
