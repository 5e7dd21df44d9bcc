"""Running the registry: interleaved rounds, medians, the JSON-ready report with its
meta and targets, and the human-readable table."""

from __future__ import annotations

import fnmatch
import gc
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack

import trio

from ._registry import MEASUREMENTS
from ._suite import QUICK_ROUNDS, ROUNDS, Measurement, Suite, Target


def select(patterns: Sequence[str]) -> list[Measurement]:
    """The measurements whose key matches one of ``patterns`` (shell-style: ``gateway_*``),
    in registry order. A key measured in a suite brings the suite's other keys along, since
    one round measures them all (and a target may be computed from a sibling).

    Raises :class:`LookupError` naming each pattern that matches no key.
    """
    unmatched = [
        p for p in patterns if not any(fnmatch.fnmatchcase(m.key, p) for m in MEASUREMENTS)
    ]
    if unmatched:
        raise LookupError(
            f"{', '.join(map(repr, unmatched))} "
            f"{'matches' if len(unmatched) == 1 else 'match'} no bench key; the keys are: "
            + ", ".join(m.key for m in MEASUREMENTS)
        )
    chosen = {m.key for m in MEASUREMENTS if any(fnmatch.fnmatchcase(m.key, p) for p in patterns)}
    suites = {m.suite for m in MEASUREMENTS if m.key in chosen and m.suite is not None}
    return [
        m for m in MEASUREMENTS if m.key in chosen or (m.suite is not None and m.suite in suites)
    ]


def _due(i: int, rounds: int, total: int) -> bool:
    """Whether something timed ``rounds`` times in ``total`` rounds runs in round ``i``
    (spread evenly; every round when ``rounds == total``)."""
    return (i * rounds) // total != ((i + 1) * rounds) // total


async def run_bench(
    quick: bool = False, measurements: Sequence[Measurement] = MEASUREMENTS
) -> dict[str, object]:
    """Measure every key and return the JSON-ready report.

    The report holds each key's median round, plus ``"meta"`` (interpreter, trio,
    platform, CPUs, ``quick``, rounds and round sizes, each key's rounds and notes) and
    ``"targets"`` (each key's target, ``None`` where there is none; computed
    from the medians where the target is a formula).

    Measurements run interleaved: in each round every plain measurement runs once and
    every suite due in that round runs one round of all its keys. Suites are opened
    (their servers started and connected) before the first round and closed after the
    last, whatever happens.
    """
    rounds = QUICK_ROUNDS if quick else ROUNDS
    sizes = {m.key: m.quick_size if quick else m.size for m in measurements}
    figures: dict[str, list[float]] = {m.key: [] for m in measurements}
    # Participants in order of first appearance: a plain measurement, or a suite and
    # those of its members being measured.
    groups: dict[Suite, list[Measurement]] = {}
    order: list[Measurement | Suite] = []
    for m in measurements:
        if m.suite is None:
            order.append(m)
        else:
            if m.suite not in groups:
                order.append(m.suite)
            groups.setdefault(m.suite, []).append(m)
    counts = {
        m.key: rounds if m.suite is None else (m.suite.quick_rounds if quick else m.suite.rounds)
        for m in measurements
    }
    total = max([rounds, *counts.values()])

    for m in measurements:  # warm-up round, not reported (suites warm up as they open)
        if m.suite is None:
            await m.run(max(1, sizes[m.key] // 10))
    async with AsyncExitStack() as stack:
        opened = {suite: await stack.enter_async_context(suite.open()) for suite in groups}
        for i in range(total):
            for item in order:
                if isinstance(item, Suite):
                    members = groups[item]
                    if not _due(i, counts[members[0].key], total):
                        continue
                    gc.collect()
                    got = await opened[item]({m.key: sizes[m.key] for m in members})
                    for m in members:
                        figures[m.key].append(got[m.key])
                elif _due(i, rounds, total):
                    gc.collect()
                    figures[item.key].append(await item.run(sizes[item.key]))

    report: dict[str, object] = {}
    medians: dict[str, float] = {}
    for m in measurements:
        medians[m.key] = statistics.median(figures[m.key])
        report[m.key] = round(medians[m.key], m.digits or None)
    report["meta"] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "trio": trio.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "quick": quick,
        "rounds": rounds,
        "round_sizes": sizes,
        "rounds_by_key": counts,
        "notes": {m.key: m.note for m in measurements if m.note},
    }
    report["targets"] = {m.key: _target(m.target, medians) for m in measurements}
    return report


def _target(target: Target, medians: Mapping[str, float]) -> str | None:
    return target(medians) if callable(target) else target


def meets_target(value: float, target: str | None) -> bool | None:
    """Whether ``value`` satisfies a target such as ``"<= 15"``; ``None`` without one."""
    if target is None:
        return None
    op, _, number = target.partition(" ")
    bound = float(number)
    if op == "<=":
        return value <= bound
    if op == ">=":
        return value >= bound
    raise ValueError(f"unknown target {target!r}")


def format_table(
    report: dict[str, object], measurements: Sequence[Measurement] = MEASUREMENTS
) -> str:
    """The report as a human-readable table (one line per key, then the setting)."""
    targets = report.get("targets")
    rows = [("key", "median", "unit", "target", "")]
    for m in measurements:
        if m.key not in report:
            continue
        value = report[m.key]
        assert isinstance(value, int | float)
        target = targets.get(m.key) if isinstance(targets, dict) else None
        if target is None and isinstance(m.target, str):
            target = m.target
        met = meets_target(value, target)
        verdict = "" if met is None else ("ok" if met else "MISSED")
        shown = f"{value:,.{m.digits}f}"
        rows.append((m.key, shown, m.unit, target or "-", verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        f"{k:<{widths[0]}}  {v:>{widths[1]}}  {u:<{widths[2]}}  {t:<{widths[3]}}  {ok}".rstrip()
        for k, v, u, t, ok in rows
    ]
    meta = report.get("meta")
    if isinstance(meta, dict):
        lines.append("")
        lines.append(
            f"median of {meta['rounds']} interleaved rounds{' (--quick)' if meta['quick'] else ''}"
            f"; Python {meta['python']}, trio {meta['trio']}, {meta['cpu_count']} CPUs, "
            f"{meta['platform']}"
        )
        by_key = meta.get("rounds_by_key")
        if isinstance(by_key, dict):
            fewer = {k: r for k, r in by_key.items() if r != meta["rounds"]}
            if fewer:
                lines.append(
                    "fewer rounds (process starts are costly): "
                    + ", ".join(f"{k} {r}" for k, r in fewer.items())
                )
    return "\n".join(lines)
