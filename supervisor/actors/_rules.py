"""The supervision rules as small pure functions, each tested on its own."""

from __future__ import annotations

import collections
import contextvars
import random
from collections.abc import Sequence

from ._spec import Backoff, Crashed, ExitReason, Intensity, Restart, Strategy


def should_restart(restart: Restart, reason: ExitReason) -> bool:
    """Whether a child of this restart type is restarted after exiting for this reason.

    OTP: permanent always, temporary never, transient only after an abnormal exit.
    """
    if restart is Restart.PERMANENT:
        return True
    if restart is Restart.TRANSIENT:
        return isinstance(reason, Crashed)
    return False


def children_to_restart(strategy: Strategy, children: Sequence[str], failed: str) -> list[str]:
    """The children (in start order) that restart when ``failed`` has to.

    ``children`` is every live child in start order, ``failed`` included.
    """
    if strategy is Strategy.ONE_FOR_ONE:
        return [failed]
    if strategy is Strategy.ONE_FOR_ALL:
        return list(children)
    return list(children[children.index(failed) :])


class RestartWindow:
    """Counts restarts within a sliding period, as OTP counts them.

    ``record(now)`` adds one restart and says whether that made more than
    ``max_restarts`` within the last ``within_seconds`` — the moment to give up. As in
    OTP's ``add_restart``, a restart exactly ``within_seconds`` old still counts.
    """

    def __init__(self, intensity: Intensity) -> None:
        self.intensity = intensity
        self._times: collections.deque[float] = collections.deque()

    def record(self, now: float) -> bool:
        if not self.intensity.limited:
            return False
        times = self._times
        times.append(now)
        horizon = now - self.intensity.within_seconds
        while times and times[0] < horizon:
            times.popleft()
        return len(times) > self.intensity.max_restarts

    def count(self, now: float) -> int:
        """Restarts still inside the period at ``now``."""
        horizon = now - self.intensity.within_seconds
        return sum(1 for t in self._times if t >= horizon)

    def reset(self) -> None:
        self._times.clear()

    def adopt(self, other: RestartWindow) -> None:
        """Count the restarts ``other`` counted (a new limit for the same child)."""
        self._times = collections.deque(other._times)


def backoff_delay(backoff: Backoff, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before consecutive restart number ``attempt`` (1-based).

    The first restart (after a stable run, or the very first exit) is at once, as OTP
    restarts; the second waits ``initial``, each later one ``multiplier`` times longer.
    """
    if attempt < 2 or backoff.initial == 0:
        return 0.0
    # Cap the exponent so a long crash loop never overflows a float.
    delay = min(backoff.initial * backoff.multiplier ** min(attempt - 2, 64), backoff.maximum)
    if backoff.jitter and rng is not None:
        delay *= 1.0 - backoff.jitter * rng.random()
    return delay


#: The generator a supervisor draws its backoff jitter from when it has no ``rng`` of its
#: own (nor its parent's): ``None`` (the default) is a fresh, unseeded one per tree. A
#: seeded generator set here for a run makes its delays repeatable — what
#: :func:`supervisor.testing.run_deterministic` does.
jitter_rng: contextvars.ContextVar[random.Random | None] = contextvars.ContextVar(
    "supervisor_jitter_rng", default=None
)
