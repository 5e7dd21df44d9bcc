"""The fault engine: which rules fire on which message, decided from the seed alone.

One :class:`FaultEngine` serves one connection's worth of messages (a proxy's lifetime,
or a supervised server across its restarts). Each message is shown to :meth:`FaultEngine.decide`
with its direction; the engine answers with the actions to take, in rule order, and
records each as an :class:`Injected` in the engine's ``log``.

Determinism: every rule draws its random numbers (``probability``, ``jitter_ms``) from its
own generator, seeded from the plan's seed and the rule's place, and only when its other
conditions hold. So the same plan, seed and sequence of messages give the same faults in
the same order, every run, and one rule's draws do not shift when another rule changes.
Times are seconds since the engine started, on the trio clock: under a ``MockClock`` the
log is the same byte for byte.
"""

from __future__ import annotations

import fnmatch
import json
import random
from collections.abc import Callable, Iterable, Mapping

import msgspec

from ...config._plan import (
    LIFECYCLE,
    OPENING_METHODS,
    TO_CLIENT,
    TO_SERVER,
    Action,
    Plan,
    Rule,
    When,
)
from ...transports._faults import FaultLink, Injected

__all__ = ["FaultEngine", "Injected", "Message", "faults_json", "read_faults"]


class Message:
    """A JSON-RPC message as the engine sees it: its method (a response's is its
    request's), id, tool, whether it is a response, and the decoded object (``None``
    when the bytes are not a JSON object)."""

    __slots__ = ("body", "id", "is_response", "method", "tool")

    def __init__(
        self,
        body: dict[str, object] | None,
        *,
        method: str | None,
        id: int | str | None,
        tool: str | None,
        is_response: bool,
    ) -> None:
        self.body = body
        self.method = method
        self.id = id
        self.tool = tool
        self.is_response = is_response

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None and not self.is_response


def _decode(raw: bytes | str | Mapping[str, object]) -> dict[str, object] | None:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


class _RuleState:
    __slots__ = ("fired", "matched", "rng", "rule")

    def __init__(self, rule: Rule, seed: int) -> None:
        self.rule = rule
        self.matched = 0
        self.fired = 0
        # str seeds hash the same in every process (random uses SHA-512 for them)
        self.rng = random.Random(f"{seed}:{rule.index}")


class FaultEngine:
    """Applies a :class:`~supervisor.config._plan.Plan` to a stream of messages.

    ``server`` names the server in the records; ``clock`` gives the time (default: the
    trio clock, read when the engine is first used). ``on_inject``, if given, is called
    with each :class:`Injected` as it is recorded (the supervisor logs and publishes it).
    """

    def __init__(
        self,
        plan: Plan,
        *,
        server: str | None = None,
        clock: Callable[[], float] | None = None,
        on_inject: Callable[[Injected], None] | None = None,
    ) -> None:
        self.plan = plan
        self.server = server
        self.log: list[Injected] = []
        self.on_inject = on_inject
        #: the link of the connection this engine serves now, if any (see Link.inject)
        self.link: FaultLink | None = None
        self._clock = clock
        self._start: float | None = None
        self._rules = [_RuleState(rule, plan.seed) for rule in plan.rules]
        # id -> (method, tool) of requests in flight, per direction they travelled
        self._pending: dict[str, dict[int | str, tuple[str, str | None]]] = {
            TO_SERVER: {},
            TO_CLIENT: {},
        }

    def _now(self) -> float:
        if self._clock is None:
            import trio

            self._clock = trio.current_time
        now = self._clock()
        if self._start is None:
            self._start = now
        return now - self._start

    def start(self) -> None:
        """Start the engine's clock now (else: at the first message)."""
        self._now()

    # -- classification ------------------------------------------------------------

    def classify(self, direction: str, raw: bytes | str | Mapping[str, object]) -> Message:
        """Decode ``raw`` and say what it is, remembering requests so that their answers
        (going the other way) are known by the request's method and tool."""
        body = _decode(raw)
        if body is None:
            return Message(None, method=None, id=None, tool=None, is_response=False)
        method = body.get("method")
        raw_id = body.get("id")
        msg_id = raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
        if isinstance(method, str):
            tool = None
            if method == "tools/call":
                params = body.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                tool = name if isinstance(name, str) else None
            if msg_id is not None:
                self._pending[direction][msg_id] = (method, tool)
            return Message(body, method=method, id=msg_id, tool=tool, is_response=False)
        other = TO_CLIENT if direction == TO_SERVER else TO_SERVER
        request = self._pending[other].pop(msg_id, None) if msg_id is not None else None
        method, tool = request if request is not None else (None, None)
        return Message(body, method=method, id=msg_id, tool=tool, is_response=True)

    # -- decisions ------------------------------------------------------------------

    def decide(self, direction: str, message: Message) -> list[Action]:
        """The actions to take on ``message`` travelling ``direction``, recorded.

        Rules are consulted in order; every rule whose conditions match counts the
        message; those that fire contribute their action, until one whose action ends the
        message's way (``drop``, ``kill``, ``error``, ...); the rules after that one still
        count the message (for ``nth`` and ``every``) but do not fire."""
        now = self._now()
        actions: list[Action] = []
        ended = False
        for state in self._rules:
            rule = state.rule
            if rule.do.kind in LIFECYCLE or not _matches(rule, direction, message):
                continue
            if ended:  # counted, so that nth means the nth message whatever others did
                if _in_window(rule.when, now):
                    state.matched += 1
                continue
            action = self._fire(state, now)
            if action is None:
                continue
            actions.append(action)
            self._record(now, rule, action, direction, message)
            ended = action.terminal
        return actions

    def decide_start(self) -> list[Action]:
        """The start-up actions (``slow_start``) for a server starting now, recorded."""
        now = self._now()
        actions: list[Action] = []
        for state in self._rules:
            if state.rule.do.kind not in LIFECYCLE:
                continue
            action = self._fire(state, now)
            if action is not None:
                actions.append(action)
                self._record(now, state.rule, action, None, None)
        return actions

    def _fire(self, state: _RuleState, now: float) -> Action | None:
        when = state.rule.when
        if not _in_window(when, now):
            return None
        state.matched += 1
        if when.nth is not None and state.matched != when.nth:
            return None
        if when.every is not None and state.matched % when.every:
            return None
        if when.times is not None and state.fired >= when.times:
            return None
        if when.probability < 1.0 and state.rng.random() >= when.probability:
            return None
        state.fired += 1
        action = state.rule.do
        if action.kind == "delay" and action.jitter_ms:
            drawn = action.delay_ms + state.rng.uniform(0.0, action.jitter_ms)
            action = Action("delay", delay_ms=round(drawn, 3))
        return action

    def _record(
        self,
        now: float,
        rule: Rule,
        action: Action,
        direction: str | None,
        message: Message | None,
    ) -> None:
        record = Injected(
            seq=len(self.log) + 1,
            t=round(now, 6),
            rule=rule.index,
            action=action.kind,
            direction=direction,
            method=None if message is None else message.method,
            id=None if message is None else message.id,
            tool=None if message is None else message.tool,
            server=self.server,
            detail=_detail(action),
        )
        self.log.append(record)
        if self.on_inject is not None:
            self.on_inject(record)

    def note(self, action: str, detail: str) -> Injected:
        """Record a fault done from outside the plan (a test's ``kill``, say)."""
        record = Injected(
            seq=len(self.log) + 1,
            t=round(self._now(), 6),
            rule=-1,
            action=action,
            server=self.server,
            detail=detail,
        )
        self.log.append(record)
        if self.on_inject is not None:
            self.on_inject(record)
        return record


def _in_window(when: When, now: float) -> bool:
    return now >= when.after_s and (when.until_s is None or now < when.until_s)


def _matches(rule: Rule, direction: str, message: Message) -> bool:
    when = rule.when
    if message.is_response:
        if when.direction != direction:
            return False
    elif when.direction is not None and when.direction != direction:
        return False
    if rule.do.kind == "exit_on_initialize":
        if direction != TO_SERVER or message.method not in OPENING_METHODS:
            return False
    if when.method is not None:
        if message.method is None or not fnmatch.fnmatchcase(message.method, when.method):
            return False
    if when.tool is not None:
        if message.tool is None or not fnmatch.fnmatchcase(message.tool, when.tool):
            return False
    return True


def _detail(action: Action) -> str:
    if action.kind == "delay":
        return f"delay {action.delay_ms:g} ms"
    if action.kind == "error":
        return f"error {action.code}: {action.message}"
    if action.kind == "http_status":
        return f"HTTP {action.status}"
    if action.kind == "slow_start":
        return f"start delayed {action.ms:g} ms"
    if action.kind == "hang" and action.ms is not None:
        return f"hang {action.ms:g} ms"
    return action.kind


def faults_json(log: Iterable[Injected]) -> bytes:
    """The fault log as a JSON array (one object per fault, fields in a fixed order)."""
    return msgspec.json.encode(list(log))


def read_faults(data: bytes | str) -> list[Injected]:
    """A fault log written by :func:`faults_json`."""
    return msgspec.json.decode(data, type=list[Injected])
