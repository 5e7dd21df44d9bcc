"""The fault plan language: every wrong field named by its path, every action's JSON form
read back as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.config._plan import ACTIONS, Plan, PlanError
from supervisor.faults import load_plan

KILL = {"when": {"method": "tools/call"}, "do": "kill"}


def problems(source: object) -> list[tuple[str, str]]:
    """(path, message) of each problem ``load_plan`` finds in ``source``."""
    with pytest.raises(PlanError) as caught:
        load_plan(source)  # type: ignore[arg-type]
    return [(e.path, e.message) for e in caught.value.errors]


def rule(when: object = None, do: object = "kill") -> dict[str, object]:
    return {"rules": [{"when": {} if when is None else when, "do": do}]}


@pytest.mark.parametrize(
    ("plan", "path", "message"),
    [
        # the plan
        ({"seed": 1.5, "rules": []}, "seed", "must be a whole number, not a number"),
        ({"seed": True, "rules": []}, "seed", "must be a whole number, not a boolean"),
        ({"rules": {}}, "rules", "must be an array of rules, not an object"),
        ({"rules": [], "sede": 1}, "sede", 'did you mean "seed"?'),
        ({"seed": 1}, "", 'a plan needs "rules"'),
        ("[1", "plan", "not valid JSON"),
        (7, "", "a fault plan is an object {seed, rules} or a list of rules, not a number"),
        # a rule
        ({"rules": ["kill"]}, "rules[0]", 'must be a rule: {"when": {...}, "do": ...}'),
        ({"rules": [{"when": {}}]}, "rules[0]", 'needs "do"'),
        ({"rules": [{"do": "kill", "wen": {}}]}, "rules[0].wen", 'did you mean "when"?'),
        # when
        (rule(when=[]), "rules[0].when", "must be an object, not an array"),
        (rule(when={"method": ""}), "rules[0].when.method", "must not be empty"),
        (rule(when={"method": 3}), "rules[0].when.method", "must be a string, not a number"),
        (rule(when={"tool": " "}), "rules[0].when.tool", "must not be empty"),
        (rule(when={"direction": "up"}), "rules[0].when.direction", '"to_server", "to_client"'),
        (rule(when={"nth": 0}), "rules[0].when.nth", "must be at least 1"),
        (rule(when={"every": 0}), "rules[0].when.every", "must be at least 1"),
        (rule(when={"times": 0}), "rules[0].when.times", "must be at least 1"),
        (rule(when={"nth": 2.5}), "rules[0].when.nth", "must be a whole number"),
        (rule(when={"after_s": -1}), "rules[0].when.after_s", "must be at least 0"),
        (rule(when={"probability": 1.5}), "rules[0].when.probability", "between 0 and 1"),
        (rule(when={"nth": 1, "every": 2}), "rules[0].when", 'give "nth" or "every", not both'),
        (rule(when={"methd": "x"}), "rules[0].when.methd", 'did you mean "method"?'),
        # do
        (rule(do="explode"), "rules[0].do", 'unknown action "explode"'),
        (rule(do="delay_ms"), "rules[0].do", '{"delay_ms": 100}'),
        (rule(do="error"), "rules[0].do", "takes a value"),
        (rule(do=7), "rules[0].do", 'must be an action: a string such as "kill" or an object'),
        (rule(do={}), "rules[0].do", "an action object has exactly one of"),
        (rule(do={"delay_ms": 1, "hang_ms": 1}), "rules[0].do", "exactly one of"),
        (rule(do={"hang_ms": 1, "jitter_ms": 1}), "rules[0].do.jitter_ms", "only with delay_ms"),
        (rule(do={"delay_ms": -1}), "rules[0].do.delay_ms", "must be at least 0"),
        (rule(do={"delay_ms": 4e6}), "rules[0].do.delay_ms", "at most an hour"),
        (rule(do={"delay_ms": 1, "jitter_ms": "x"}), "rules[0].do.jitter_ms", "must be a number"),
        (rule(do={"slow_start_ms": -5}), "rules[0].do.slow_start_ms", "must be at least 0"),
        (rule(do={"hang_ms": True}), "rules[0].do.hang_ms", "must be a number, not a boolean"),
        (rule(do={"http_status": 101}), "rules[0].do.http_status", "must be at least 200"),
        (rule(do={"http_status": 600}), "rules[0].do.http_status", "200 to 599"),
        (rule(do={"error": "boom"}), "rules[0].do.error", 'must be an object {"code": N'),
        (rule(do={"error": {"code": "x"}}), "rules[0].do.error.code", "must be a whole number"),
        (rule(do={"error": {"message": ""}}), "rules[0].do.error.message", "must not be empty"),
        (rule(do={"error": {"cod": 1}}), "rules[0].do.error.cod", 'did you mean "code"?'),
        (rule(do={"explode_ms": 1}), "rules[0].do.explode_ms", "unknown action"),
        (
            rule(when={"method": "initialize"}, do={"slow_start_ms": 10}),
            "rules[0].when.method",
            "happens when the server starts",
        ),
    ],
)
def test_each_wrong_field_is_named_by_its_path(plan: object, path: str, message: str) -> None:
    found = problems(plan)
    assert len(found) == 1, found
    assert found[0][0] == path
    assert message in found[0][1]


def test_every_problem_is_reported_at_once() -> None:
    plan = {
        "seed": "x",
        "rules": [{"when": {"nth": 0}, "do": "kill"}, KILL, {"when": {"every": 0}, "do": "?"}],
    }
    assert [path for path, _ in problems(plan)] == [
        "seed",
        "rules[0].when.nth",
        "rules[2].when.every",
        "rules[2].do",
    ]


def test_a_plan_file_is_named_in_its_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert problems(missing) == [(str(missing), problems(missing)[0][1])]
    assert "cannot read the fault plan" in problems(missing)[0][1]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    [(path, message)] = problems(str(broken))
    assert problems(json.dumps({"rules": [{"when": {"nth": 0}, "do": "kill"}]})) == [
        ("rules[0].when.nth", "must be at least 1")
    ]  # JSON text
    assert path == str(broken) and message.startswith("not valid JSON")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"when": {"nth": 0}, "do": "kill"}]))
    with pytest.raises(PlanError) as caught:
        load_plan(wrong)
    assert caught.value.path == str(wrong)
    assert [e.path for e in caught.value.errors] == ["rules[0].when.nth"]


#: Every action in its JSON form, as written in a plan.
ACTION_FORMS: list[object] = [
    "kill",
    "hang",
    "drop",
    "duplicate",
    "reorder",
    "garbage_line",
    "truncate",
    "close_stream",
    "expire_session",
    "exit_on_initialize",
    "list_changed",
    {"delay_ms": 250.0},
    {"delay_ms": 250.0, "jitter_ms": 100.0},
    {"error": {"code": -32000, "message": "injected"}},
    {"http_status": 503},
    {"slow_start_ms": 1500.0},
    {"hang_ms": 400.0},
]


def test_the_forms_cover_every_action() -> None:
    kinds = {load_plan([{"do": form}]).rules[0].do.kind for form in ACTION_FORMS}
    assert kinds == set(ACTIONS)


@pytest.mark.parametrize("form", ACTION_FORMS, ids=lambda f: json.dumps(f))
def test_each_actions_json_form_round_trips(form: object) -> None:
    """``to_json`` writes the action as it was written, and reads back the same plan."""
    when = {} if isinstance(form, dict) and "slow_start_ms" in form else {"method": "tools/*"}
    plan = load_plan({"seed": 9, "rules": [{"when": when, "do": form}]})
    written = plan.to_json()
    assert written == {"seed": 9, "rules": [{"when": when, "do": form}]}
    again = load_plan(json.loads(json.dumps(written)))
    assert again == plan
    assert again.to_json() == written


def test_conditions_round_trip_too() -> None:
    when = {
        "method": "tools/call",
        "tool": "add*",
        "direction": "to_client",
        "every": 2,
        "after_s": 1.5,
        "probability": 0.25,
        "times": 3,
    }
    plan = load_plan({"seed": 3, "rules": [{"when": when, "do": "drop"}, KILL]})
    assert plan.to_json() == {"seed": 3, "rules": [{"when": when, "do": "drop"}, KILL]}
    assert load_plan(plan.to_json()) == plan
    assert isinstance(load_plan(plan), Plan) and load_plan(plan, seed=4).seed == 4
