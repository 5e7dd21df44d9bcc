"""A rate, as the config writes it: ``"<count>/<period>"`` (``"10/s"``, ``"60/min"``,
``"5/10s"``). Read here, with nothing heavy imported (``check`` reads configs); kept by
:class:`supervisor.tools._limits.TokenBucket`."""

from __future__ import annotations

import math
import re

import attrs

__all__ = ["MAX_COUNT", "Rate", "parse_rate"]

_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]*(?:\.[0-9]+)?)\s*([a-z]+)\s*\Z")
#: The largest count a rate may have (a bucket of more is no limit worth the name).
MAX_COUNT = 1_000_000


@attrs.frozen
class Rate:
    """``count`` calls per ``period`` seconds; ``text`` as the config wrote it."""

    count: int
    period: float
    text: str

    def __str__(self) -> str:
        return self.text


def parse_rate(value: object) -> Rate:
    """The rate ``value`` says (``"60/min"``); :class:`ValueError` saying what is wrong."""
    if not isinstance(value, str):
        raise ValueError('must be a rate such as "10/s" or "60/min" (a string)')
    found = _RATE.match(value.lower())
    unit = None if found is None else _UNITS.get(found[3])
    if found is None or unit is None:
        raise ValueError(
            'must be a rate: a count, "/", and a period of s, min, h or d (say "10/s", '
            '"60/min", "5/10s")'
        )
    count = int(found[1])
    times = float(found[2]) if found[2] else 1.0
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"must allow between 1 and {MAX_COUNT} calls a period")
    if times <= 0 or not math.isfinite(times):
        raise ValueError("must have a period longer than 0")
    return Rate(count, times * unit, value.strip())
