"""The supervision rules as pure functions."""

from __future__ import annotations

import random

import pytest

from supervisor.actors import (
    Backoff,
    Crashed,
    Intensity,
    Normal,
    Restart,
    Shutdown,
    Strategy,
    should_restart,
)
from supervisor.actors._rules import RestartWindow, backoff_delay, children_to_restart

# OTP's table, written out by hand: restart type x exit reason -> restarted?
RESTART_TABLE = [
    (Restart.PERMANENT, Normal(), True),
    (Restart.PERMANENT, Shutdown(), True),
    (Restart.PERMANENT, Crashed(ValueError()), True),
    (Restart.TRANSIENT, Normal(), False),
    (Restart.TRANSIENT, Shutdown(), False),
    (Restart.TRANSIENT, Crashed(ValueError()), True),
    (Restart.TEMPORARY, Normal(), False),
    (Restart.TEMPORARY, Shutdown(), False),
    (Restart.TEMPORARY, Crashed(ValueError()), False),
]


@pytest.mark.parametrize(
    ("restart", "reason", "expected"),
    RESTART_TABLE,
    ids=[f"{r.value}-{e.describe().split(':')[0]}" for r, e, _ in RESTART_TABLE],
)
def test_should_restart(restart: Restart, reason: object, expected: bool) -> None:
    """Permanent always restarts, temporary never, transient only after a crash."""
    assert should_restart(restart, reason) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("strategy", "failed", "expected"),
    [
        (Strategy.ONE_FOR_ONE, "b", ["b"]),
        (Strategy.ONE_FOR_ALL, "b", ["a", "b", "c", "d"]),
        (Strategy.REST_FOR_ONE, "b", ["b", "c", "d"]),
        (Strategy.REST_FOR_ONE, "a", ["a", "b", "c", "d"]),
        (Strategy.REST_FOR_ONE, "d", ["d"]),
    ],
    ids=lambda v: getattr(v, "value", str(v)),
)
def test_children_to_restart(strategy: Strategy, failed: str, expected: list[str]) -> None:
    """Each strategy picks its children, in start order."""
    assert children_to_restart(strategy, ["a", "b", "c", "d"], failed) == expected


def test_window_gives_up_on_one_more_than_allowed() -> None:
    """max_restarts restarts within the period are fine; the next one gives up."""
    window = RestartWindow(Intensity(max_restarts=3, within_seconds=10))
    assert [window.record(t) for t in (0, 1, 2)] == [False, False, False]
    assert window.record(3) is True


def test_window_forgets_restarts_outside_the_period() -> None:
    """Restarts older than the period no longer count."""
    window = RestartWindow(Intensity(max_restarts=1, within_seconds=5))
    assert window.record(0) is False
    assert window.record(6) is False  # the one at t=0 is more than a period old: gone
    assert window.record(11) is True  # the one at t=6 is exactly a period old: counts
    assert window.count(100) == 0


def test_window_count_includes_a_restart_exactly_one_period_old() -> None:
    """count() agrees with record(): a restart exactly a period old is still inside."""
    window = RestartWindow(Intensity(max_restarts=5, within_seconds=5))
    window.record(0)
    window.record(3)
    assert window.count(5) == 2
    assert window.count(5.001) == 1
    assert window.count(8) == 1
    assert window.count(8.5) == 0


def test_an_unlimited_window_never_gives_up() -> None:
    """Intensity.unlimited() counts nothing and never gives up."""
    window = RestartWindow(Intensity.unlimited())
    assert not any(window.record(t) for t in range(1000))
    assert Intensity.unlimited().describe() == "no limit"


def test_window_zero_intensity_gives_up_at_once() -> None:
    """With max_restarts=0 the first restart already gives up."""
    assert RestartWindow(Intensity(max_restarts=0, within_seconds=1)).record(0) is True


def test_window_reset() -> None:
    """A reset window starts counting from zero."""
    window = RestartWindow(Intensity(max_restarts=1, within_seconds=100))
    window.record(0)
    window.reset()
    assert window.record(1) is False


def test_backoff_doubles_up_to_the_cap() -> None:
    """The first restart is at once; from the second, delays double from initial and stop
    growing at maximum."""
    b = Backoff(initial=1, maximum=30)
    assert [backoff_delay(b, n) for n in range(1, 9)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(b, 10_000) == 30


def test_backoff_none_is_immediate() -> None:
    """Backoff.none() never waits."""
    assert backoff_delay(Backoff.none(), 5) == 0


def test_backoff_jitter_stays_within_bounds() -> None:
    """Jitter only shortens a delay, by at most its fraction."""
    b = Backoff(initial=4, maximum=60, jitter=0.25)
    rng = random.Random(7)
    delays = [backoff_delay(b, 3, rng) for _ in range(200)]
    assert all(6.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) > 100  # actually random


@pytest.mark.parametrize("bad", [{"initial": -1}, {"multiplier": 0.5}, {"jitter": 1.5}])
def test_backoff_rejects_nonsense(bad: dict[str, float]) -> None:
    """Negative delays, shrinking multipliers and jitter above 1 are refused."""
    with pytest.raises(ValueError):
        Backoff(**bad)


def test_no_delay_before_the_first_attempt() -> None:
    """Attempt 0 (or less) and the first restart wait nothing, whatever the backoff (the
    jitter included); the second waits ``initial``."""
    b = Backoff(initial=1, maximum=30, jitter=0.5)
    assert backoff_delay(b, 0, random.Random(1)) == 0.0
    assert backoff_delay(b, 1, random.Random(1)) == 0.0
    assert backoff_delay(Backoff(initial=1, maximum=30), 2) == 1.0
