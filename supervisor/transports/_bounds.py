"""Resource bounds on a local server's process family (a server's ``resources`` config),
and what its family uses (its RSS and CPU time, for ``status`` and ``/metrics``).

Linux only, without root and without Python code between fork and exec:

- ``openFiles`` and ``cpuSeconds`` are the kernel's ``RLIMIT_NOFILE`` and ``RLIMIT_CPU``
  (soft and hard alike, never above this process's own hard limit, which a process
  without privilege cannot raise). They bind each process of the family, which inherits
  them: ``cpuSeconds`` is CPU time per process (killed by ``SIGKILL`` at it). Where
  util-linux's ``prlimit`` and ``setpriv`` are installed the server is spawned through
  them (``setpriv --pdeathsig KILL -- prlimit --nofile=N:N -- COMMAND…``): the limits
  are in place before the server's first instruction. Elsewhere they are set on the
  spawned pid (``prlimit(2)``) as soon as the spawn returns — the server may already have
  run a little by then, and a process it forked in that moment keeps the old limits until
  the watchdog below finds it and sets them on it too.
- ``memory`` is a watchdog on the family's resident memory (RSS: the sum over the server
  and its descendants, whatever session they moved to), sampled every
  :data:`SAMPLE_S` seconds; ``processes`` is the same watchdog counting the family. Over
  either bound the whole family is killed (``SIGKILL``) and the server fails with
  :class:`~supervisor.errors.BoundExceeded`: it is restarted under its restart policy.
  An address-space limit (``RLIMIT_AS``) is not used: many runtimes reserve far more
  address space than they touch. A family may grow past its bound for up to one sample.

A cgroup v2 of the family (``memory.max``, ``pids.max``, where one is delegated to the
user) is not made yet: the watchdog is the bound everywhere.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ..config._model import Resources

__all__ = [
    "SAMPLE_S",
    "Usage",
    "format_bytes",
    "prlimit_words",
    "rlimits",
    "set_rlimits",
    "usage",
]

#: Seconds between two samples of a bounded server's family.
SAMPLE_S = 0.25


def format_bytes(size: int) -> str:
    """``size`` for people, in MiB (GiB from 10 GiB): ``"612 MiB"``."""
    if size >= 10 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"


def rlimits(resources: Resources | None) -> list[tuple[int, int]]:
    """The ``(RLIMIT_x, value)`` pairs ``resources`` sets, each at most this process's own
    hard limit (empty off Linux)."""
    if resources is None or not hasattr(resource, "prlimit"):
        return []
    wanted = [
        (resource.RLIMIT_NOFILE, resources.open_files),
        (resource.RLIMIT_CPU, resources.cpu_seconds),
    ]
    found = []
    for which, value in wanted:
        if value is None:
            continue
        hard = resource.getrlimit(which)[1]
        found.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return found


_PRLIMIT_OPTIONS = {"RLIMIT_NOFILE": "--nofile", "RLIMIT_CPU": "--cpu"}


def prlimit_words(limits: Sequence[tuple[int, int]]) -> list[str] | None:
    """util-linux's ``prlimit`` with ``limits`` set, as words that go before ``--`` and the
    command; ``None`` when it is not installed."""
    found = _prlimit()
    if found is None:
        return None
    names = {getattr(resource, name): option for name, option in _PRLIMIT_OPTIONS.items()}
    return [found, *(f"{names[which]}={value}:{value}" for which, value in limits)]


@cache
def _prlimit() -> str | None:
    return shutil.which("prlimit")


def set_rlimits(pids: Iterable[int], limits: Sequence[tuple[int, int]]) -> None:
    """Set ``limits`` on each process of ``pids`` (those gone, or not ours, are passed)."""
    for pid in pids:
        for which, value in limits:
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(pid, which, (value, value))


@attrs.frozen
class Usage:
    """What a family uses: ``rss`` bytes resident, ``cpu`` seconds of CPU time (user and
    system, of its live processes and of the children they reaped), ``processes`` live."""

    rss: int
    cpu: float
    processes: int


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def usage(pids: Iterable[int]) -> Usage:
    """The sum over ``pids`` (a family, :func:`~._children.descendants`) of what each
    uses, read from ``/proc/PID/stat``; a process gone meanwhile counts nothing."""
    rss = ticks = count = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                text = file.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if fields[0] == b"Z":
            continue
        count += 1
        ticks += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
        rss += int(fields[21]) * _PAGE
    return Usage(rss=rss, cpu=ticks / _TICKS, processes=count)
