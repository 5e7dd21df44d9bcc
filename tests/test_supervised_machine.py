"""The ready-made state machine over a supervisor: kills, hangs, restarts and spurious
notifications in any order lose and duplicate no call, and the servers come back. A
deliberately broken supervisor is caught at the step that broke it (shrinking itself is
shown in test_machine.py, where examples are cheap)."""

from __future__ import annotations

import pytest

from supervisor.testing import Step, SupervisorMachine


class Two(SupervisorMachine):
    """Two echo servers under every sequence of faults hypothesis draws (a few: each
    example starts real server processes)."""

    call_timeout = 1.0


test_two_servers_under_any_faults = Two.as_test(max_examples=3, max_steps=6)


def test_a_chosen_sequence_replays() -> None:
    Two.run(
        [
            Step("call", {"index": 0, "text": "a"}),
            Step("hang", {"index": 0}),
            Step("call", {"index": 0, "text": "b"}),  # times out: the server is stopped
            Step("kill", {"index": 1}),
            Step("list_changed", {"index": 0}),
            Step("restart", {"index": 0}),
            Step("call", {"index": 1, "text": "c"}),
        ]
    )


class Forgetful(SupervisorMachine):
    """A broken supervisor: calls to a server that was restarted are never answered."""

    servers = {"a": "echo"}

    async def call(self, index: int, text: str) -> None:
        if getattr(self, "restarted", False):
            self.history.invoke("a_echo", server="a")  # the call the bug loses
            return
        await super().call(index, text)

    async def restart(self, index: int) -> None:
        await super().restart(index)
        self.restarted = True


Forgetful.call._machine_rule = SupervisorMachine.call._machine_rule  # type: ignore[attr-defined]
Forgetful.restart._machine_rule = SupervisorMachine.restart._machine_rule  # type: ignore[attr-defined]


def test_a_lost_call_fails_the_machine_at_its_step() -> None:
    with pytest.raises(AssertionError, match="calls without an outcome") as failed:
        Forgetful.run(
            [
                Step("call", {"index": 0, "text": "a"}),
                Step("restart", {"index": 0}),
                Step("call", {"index": 0, "text": "b"}),
            ]
        )
    assert "at step 3 of 3: call(0, 'b')" in "\n".join(failed.value.__notes__)
