"""Fault plans: what to inject, when — parsed from JSON or Python, checked field by field.

A plan is a seed and a list of rules, each ``{"when": {...}, "do": ...}``::

    {"seed": 7, "rules": [
        {"when": {"method": "tools/call", "nth": 3}, "do": "kill"},
        {"when": {"method": "tools/call", "direction": "to_client", "probability": 0.2},
         "do": {"delay_ms": 200, "jitter_ms": 100}}
    ]}

A bare list of rules is a plan with seed 0. :func:`load_plan` takes a path, JSON text, a
mapping, a list or a :class:`Plan`, and raises :class:`PlanError` naming each wrong field's
path (``rules[1].when.nth: must be at least 1``) — every problem at once, as a config does.
The language is described in docs/faults.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import attrs

from ..errors import ConfigError, FieldError
from ._fields import (
    _Bad,
    _choice,
    _Errors,
    _fields,
    _fraction,
    _int,
    _join,
    _kind,
    _nonempty,
    _number,
    _object,
    _unknown_field,
)

__all__ = ["ACTIONS", "Action", "Plan", "PlanError", "Rule", "When", "load_plan"]

#: Directions a message travels: from the client to the server, or back.
TO_SERVER = "to_server"
TO_CLIENT = "to_client"
DIRECTIONS = (TO_SERVER, TO_CLIENT)

#: Actions written as a bare string.
SIMPLE_ACTIONS = (
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
)
#: Actions written as an object, by their key (``delay_ms`` goes with ``jitter_ms``).
OBJECT_ACTIONS = ("delay_ms", "error", "http_status", "slow_start_ms", "hang_ms")
#: Every action's name as :class:`Action` and the fault log spell it.
ACTIONS = (*SIMPLE_ACTIONS, "delay", "error", "http_status", "slow_start")

#: Actions after which the message goes no further (later rules are not consulted).
TERMINAL = frozenset(
    {
        "kill",
        "drop",
        "truncate",
        "close_stream",
        "error",
        "http_status",
        "expire_session",
        "exit_on_initialize",
    }
)
#: Actions that only an HTTP injection point can carry out.
HTTP_ONLY = frozenset({"http_status", "expire_session"})
#: Actions taken when a server (or a proxy's upstream) starts, not on a message.
LIFECYCLE = frozenset({"slow_start"})
#: The methods that open an MCP session, in either protocol era.
OPENING_METHODS = ("initialize", "server/discover")


class PlanError(ConfigError):
    """A fault plan could not be loaded; ``errors`` lists each problem with its path."""


@attrs.frozen
class When:
    """Which messages a rule applies to; every condition given must hold.

    ``method`` and ``tool`` are globs (``notifications/*``); ``tool`` matches a
    ``tools/call`` by the tool's name. A rule without ``direction`` matches requests and
    notifications going either way; a *response* (which has no method) is matched only by
    a rule with ``direction: "to_client"`` (or ``to_server`` for the answers to a
    server's own requests), under the method and tool of the request it answers.

    Of the messages that match those, ``after_s`` skips those earlier than that many
    seconds after the start and ``until_s`` those from that many seconds on; then the
    rule fires on the ``nth`` only, or on every ``every``-th, or on each, then only with
    ``probability``; and at most ``times`` times in all.
    """

    method: str | None = None
    tool: str | None = None
    direction: str | None = None
    nth: int | None = None
    every: int | None = None
    after_s: float = 0.0
    until_s: float | None = None
    probability: float = 1.0
    times: int | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for field in attrs.fields(When):
            value = getattr(self, field.name)
            if value != field.default:
                out[field.name] = value
        return out


@attrs.frozen
class Action:
    """What a rule does: ``kind`` is one of :data:`ACTIONS`; the other fields are its
    parameters (``delay_ms``/``jitter_ms`` for ``delay``, ``code``/``message`` for
    ``error``, ``status`` for ``http_status``, ``ms`` for ``slow_start`` and a timed
    ``hang``)."""

    kind: str
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    code: int = -32603
    message: str = "injected fault"
    status: int = 503
    ms: float | None = None

    def to_json(self) -> object:
        if self.kind == "delay":
            out: dict[str, object] = {"delay_ms": self.delay_ms}
            if self.jitter_ms:
                out["jitter_ms"] = self.jitter_ms
            return out
        if self.kind == "error":
            return {"error": {"code": self.code, "message": self.message}}
        if self.kind == "http_status":
            return {"http_status": self.status}
        if self.kind == "slow_start":
            return {"slow_start_ms": self.ms}
        if self.kind == "hang" and self.ms is not None:
            return {"hang_ms": self.ms}
        return self.kind

    @property
    def terminal(self) -> bool:
        """Whether the message goes no further once this action is taken."""
        return self.kind in TERMINAL


@attrs.frozen
class Rule:
    """One rule of a plan: its conditions and its action; ``index`` is its place."""

    when: When
    do: Action
    index: int = 0

    def to_json(self) -> dict[str, object]:
        return {"when": self.when.to_json(), "do": self.do.to_json()}


@attrs.frozen
class Plan:
    """A seed and the rules to apply, in order. ``source`` says where it came from."""

    rules: tuple[Rule, ...] = ()
    seed: int = 0
    source: str | None = None

    def with_seed(self, seed: int) -> Plan:
        """This plan with another seed."""
        return attrs.evolve(self, seed=seed)

    def to_json(self) -> dict[str, object]:
        return {"seed": self.seed, "rules": [rule.to_json() for rule in self.rules]}

    def check_supported(self, where: str, *, http: bool) -> None:
        """Raise :class:`PlanError` for rules that ``where`` (an injection point, e.g.
        ``"a stdio server"``) cannot carry out: HTTP-only actions without HTTP."""
        errors = [
            FieldError(
                f"rules[{rule.index}].do",
                f"{rule.do.kind} applies only to HTTP (chaos --listen, or an HTTP "
                f"server's faults), not to {where}",
            )
            for rule in self.rules
            if rule.do.kind in HTTP_ONLY and not http
        ]
        if errors:
            raise PlanError(errors, path=self.source)


_WHEN_KEYS = (
    "method",
    "tool",
    "direction",
    "nth",
    "every",
    "after_s",
    "until_s",
    "probability",
    "times",
)


class _WhenFields(TypedDict, total=False):
    """:class:`When`'s fields, as a plan gives them."""

    method: str
    tool: str
    direction: str
    nth: int
    every: int
    after_s: float
    until_s: float
    probability: float
    times: int


def _when(errors: _Errors, value: object, path: str) -> When:
    try:
        mapping = _object(value)
    except _Bad as exc:
        errors.add(path, str(exc))
        return When()
    kwargs: _WhenFields = {}
    for key, item, p in _fields(errors, mapping, path):
        try:
            if key in ("method", "tool"):
                kwargs[key] = _nonempty(item)
            elif key == "direction":
                kwargs[key] = _choice(item, DIRECTIONS)
            elif key in ("nth", "every", "times"):
                kwargs[key] = _int(item, minimum=1)
            elif key in ("after_s", "until_s"):
                kwargs[key] = _number(item, inclusive=True)
            elif key == "probability":
                kwargs[key] = _fraction(item)
            else:
                errors.add(p, _unknown_field(key, _WHEN_KEYS))
        except _Bad as exc:
            errors.add(p, str(exc))
    if "nth" in kwargs and "every" in kwargs:
        errors.add(path, 'give "nth" or "every", not both')
    until = kwargs.get("until_s")
    if until is not None and until <= kwargs.get("after_s", 0.0):
        errors.add(_join(path, "until_s"), "must be later than after_s")
    return When(**kwargs)


def _ms(value: object) -> float:
    ms = _number(value, inclusive=True)
    if ms > 3_600_000:
        raise _Bad("is in milliseconds and must be at most an hour (3600000)")
    return ms


#: How an action that takes a value is written, for one given as a bare string.
_WRITTEN_AS = {
    "delay": '{"delay_ms": 100}',
    "delay_ms": '{"delay_ms": 100}',
    "error": '{"error": {"code": -32603, "message": "..."}}',
    "http_status": '{"http_status": 503}',
    "slow_start": '{"slow_start_ms": 1000}',
    "slow_start_ms": '{"slow_start_ms": 1000}',
    "hang_ms": '{"hang_ms": 1000}',
}


def _action(errors: _Errors, value: object, path: str) -> Action | None:
    if isinstance(value, str):
        if value in SIMPLE_ACTIONS:
            return Action(value)
        example = _WRITTEN_AS.get(value)
        if example is not None:
            errors.add(path, f"{value!r} takes a value: write it as an object, e.g. {example}")
            return None
        errors.add(
            path,
            _unknown_field(value, (*SIMPLE_ACTIONS, *OBJECT_ACTIONS)).replace(
                "unknown field", f"unknown action {json.dumps(value)}", 1
            ),
        )
        return None
    try:
        mapping = _object(value, 'an action: a string such as "kill" or an object')
    except _Bad as exc:
        errors.add(path, str(exc))
        return None
    keys = [k for k in mapping if k != "jitter_ms"]
    if len(keys) != 1:
        errors.add(
            path,
            "an action object has exactly one of "
            + ", ".join(json.dumps(k) for k in OBJECT_ACTIONS)
            + (" (with jitter_ms for delay_ms)"),
        )
        return None
    key = keys[0]
    p = _join(path, key)
    if "jitter_ms" in mapping and key != "delay_ms":
        errors.add(_join(path, "jitter_ms"), "goes only with delay_ms")
        return None
    item = mapping[key]
    try:
        if key == "delay_ms":
            jitter = mapping.get("jitter_ms", 0)
            try:
                jitter_ms = _ms(jitter)
            except _Bad as exc:
                errors.add(_join(path, "jitter_ms"), str(exc))
                return None
            return Action("delay", delay_ms=_ms(item), jitter_ms=jitter_ms)
        if key == "slow_start_ms":
            return Action("slow_start", ms=_ms(item))
        if key == "hang_ms":
            return Action("hang", ms=_ms(item))
        if key == "http_status":
            status = _int(item, minimum=200)
            if status > 599:
                raise _Bad("must be an HTTP status, 200 to 599 (a final answer, not 1xx)")
            return Action("http_status", status=status)
        if key == "error":
            error = _object(item, 'an object {"code": N, "message": "..."}')
            code, message = -32603, "injected fault"
            for k, v, q in _fields(errors, error, p):
                try:
                    if k == "code":
                        code = int(_want_int(v))
                    elif k == "message":
                        message = _nonempty(v)
                    else:
                        errors.add(q, _unknown_field(k, ("code", "message")))
                except _Bad as exc:
                    errors.add(q, str(exc))
            return Action("error", code=code, message=message)
        errors.add(
            p, _unknown_field(key, OBJECT_ACTIONS).replace("unknown field", "unknown action", 1)
        )
    except _Bad as exc:
        errors.add(p, str(exc))
    return None


def _want_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"must be a whole number, not {_kind(value)}")
    return value


def _rules(errors: _Errors, value: object, path: str) -> list[Rule]:
    if not isinstance(value, list | tuple):
        errors.add(path, f"must be an array of rules, not {_kind(value)}")
        return []
    rules: list[Rule] = []
    for i, item in enumerate(value):
        p = _join(path, i)
        if isinstance(item, Rule):
            rules.append(attrs.evolve(item, index=i))
            continue
        try:
            mapping = _object(item, 'a rule: {"when": {...}, "do": ...}')
        except _Bad as exc:
            errors.add(p, str(exc))
            continue
        when, do = When(), None
        for key, field, q in _fields(errors, mapping, p):
            if key == "when":
                when = field if isinstance(field, When) else _when(errors, field, q)
            elif key == "do":
                do = field if isinstance(field, Action) else _action(errors, field, q)
            else:
                errors.add(q, _unknown_field(key, ("when", "do")))
        if "do" not in mapping:
            errors.add(p, 'needs "do": what to inject, e.g. "kill" or {"delay_ms": 100}')
        if do is None:
            continue
        _check_rule(errors, when, do, p)
        rules.append(Rule(when=when, do=do, index=i))
    return rules


def _check_rule(errors: _Errors, when: When, do: Action, path: str) -> None:
    """Conditions that make no sense with the action."""
    if do.kind in LIFECYCLE:
        for key in ("method", "tool", "direction"):
            if getattr(when, key) is not None:
                errors.add(
                    _join(_join(path, "when"), key),
                    f"{do.kind} happens when the server starts, before any message: "
                    "match it with nth, every, probability, times or after_s only",
                )


def load_plan(
    source: str | os.PathLike[str] | Mapping[str, object] | Sequence[object] | Plan,
    *,
    seed: int | None = None,
) -> Plan:
    """The :class:`Plan` in ``source``: a path to a JSON file, JSON text (starting with
    ``{`` or ``[``), a mapping, a list of rules, or a plan. ``seed`` replaces the plan's.

    Raises :class:`PlanError` naming every problem's path, or the file when it cannot be
    read or is not JSON.
    """
    label: str | None = None
    if isinstance(source, Plan):
        plan = source
        return plan if seed is None else plan.with_seed(seed)
    document: object = source
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and not source.lstrip().startswith(("{", "["))
    ):
        label = os.fspath(source)
        try:
            text = Path(label).read_text(encoding="utf-8")
        except OSError as exc:
            raise PlanError(
                [FieldError(label, f"cannot read the fault plan: {exc.strerror or exc}")],
                path=label,
            ) from None
        document = _json(text, label)
    elif isinstance(source, str):
        document = _json(source, "plan")
    errors = _Errors()
    plan_seed = 0
    if isinstance(document, Mapping):
        rules_value: object = []
        for key, item, p in _fields(errors, document, ""):
            if key == "seed":
                try:
                    plan_seed = int(_want_int(item))
                except _Bad as exc:
                    errors.add(p, str(exc))
            elif key == "rules":
                rules_value = item
            elif key in ("description", "name", "$schema"):
                pass  # notes for people
            else:
                errors.add(p, _unknown_field(key, ("seed", "rules", "description")))
        if "rules" not in document:
            errors.add("", 'a plan needs "rules": a list of {"when": {...}, "do": ...}')
        rules = _rules(errors, rules_value, "rules")
    elif isinstance(document, list | tuple):
        rules = _rules(errors, document, "rules")
    else:
        errors.add(
            "",
            f"a fault plan is an object {{seed, rules}} or a list of rules, not {_kind(document)}",
        )
        rules = []
    if errors.items:
        raise PlanError(errors.items, path=label)
    return Plan(rules=tuple(rules), seed=plan_seed if seed is None else seed, source=label)


def _json(text: str, label: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise PlanError([FieldError(label, f"not valid JSON: {exc}")], path=label) from None
