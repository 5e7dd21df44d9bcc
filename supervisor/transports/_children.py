"""The processes a supervisor starts, and what they leave behind.

A server runs in its own session and process group, and is stopped through the group
(:mod:`supervisor.transports`). On Linux the kernel gives three more guarantees, used here:

- :func:`open_process` starts a child that dies with the supervisor: it has
  ``PR_SET_PDEATHSIG`` = ``SIGKILL``, so a supervisor killed with ``SIGKILL`` (which runs
  no clean-up) takes its servers with it, even those that ignore their stdin closing.
  The kernel sends that signal when the *thread* that forked the child exits, so the child
  is forked from the calling thread (the one running trio), never from a worker thread
  that would exit when idle. Where util-linux's ``setpriv`` is installed (it is on most
  distributions) the child execs ``setpriv --pdeathsig KILL -- COMMAND…``, which sets the
  signal and execs the command: the spawn stays a ``vfork()``, a fraction of a
  millisecond for the calling thread. Elsewhere, and for a command that is not found (so
  that its error is the one :class:`subprocess.Popen` raises), the signal is set by a
  ``preexec_fn`` (Python code between fork and exec), which also makes a child whose
  parent died before it set the signal exit at once; that spawn is a full ``fork()``, a
  few milliseconds for which the calling thread waits.
- :func:`subreaper` makes the process a child subreaper (``PR_SET_CHILD_SUBREAPER``)
  while a supervisor is open: a process orphaned anywhere below it (a server's child whose
  parent exited, a daemon's second fork) is re-parented to this process instead of to
  init, so it is still found at stop.
- :func:`family` and :func:`end_family` find and end what a server left outside its
  process group: its descendants, whatever session they moved to (``setsid()``), and this
  process's adopted children that carry the server's spawn mark
  (:data:`SPAWN_MARK` in their environment, which children inherit); killed by pidfd (no
  pid reuse can redirect a signal), and reaped when they are this process's children.
  Only processes of that family are ever signalled or reaped: a child of the embedding
  program is never touched, and no process this module did not find as a server's is
  waited for (that would steal its exit status from its owner). They run at a stop, and
  when a server exits on its own (what it started may live on: ``npm exec``'s real server).
- :func:`descendants` lists a running server's processes (its health record's
  ``family``), from their own ``/proc`` entries.

Elsewhere :func:`open_process` is trio's, and the rest do nothing: a server that ignores
its stdin closing outlives a supervisor killed with ``SIGKILL``, and a process that left
the server's session outlives a normal stop (docs/servers.md).
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from functools import cache
from typing import TYPE_CHECKING

import attrs
import trio

from . import _bounds

if TYPE_CHECKING:
    from _ctypes import CFuncPtr

#: True where the kernel gives the guarantees above.
LINUX = sys.platform.startswith("linux")
#: The environment variable each server started by :func:`open_process` gets: this
#: process's pid and the spawn's number, inherited by what the server starts.
SPAWN_MARK = "MCP_SUPERVISOR_SPAWN"

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_POLL_S = 0.01
_spawns = itertools.count(1)
_subreaper_users = 0
_subreaper_was_set = False


@cache
def _prctl() -> CFuncPtr:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.restype = ctypes.c_int
    return prctl


def spawn_mark() -> str:
    """A new spawn's mark: this process's pid and a number no other spawn here has."""
    return f"{os.getpid()}.{next(_spawns)}"


async def open_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    mark: str | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    cwd: str | os.PathLike[str] | None = None,
    rlimits: Sequence[tuple[int, int]] = (),
) -> trio.Process:
    """Start ``command`` in a new session, as :func:`trio.lowlevel.open_process` does, with
    ``env``; on Linux it also gets :data:`SPAWN_MARK` = ``mark`` (when given) and dies
    with this process (see the module's docstring). ``stdin``, ``stdout`` and ``stderr`` are
    ``subprocess.PIPE`` (a trio stream on the :class:`trio.Process`), ``DEVNULL`` or
    ``None``. ``rlimits``, ``(RLIMIT_x, value)`` pairs (Linux), are set as its soft and
    hard limits: by util-linux's ``prlimit`` before the command runs where it and
    ``setpriv`` are installed, else on its pid as soon as it is started
    (:mod:`._bounds`). Raises ``OSError`` or ``ValueError`` as :class:`subprocess.Popen`
    does."""
    if not LINUX:
        return await trio.lowlevel.open_process(
            list(command),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    environment = dict(env) if mark is None else {**env, SPAWN_MARK: mark}
    await trio.lowlevel.checkpoint()
    # No await from here on: a cancellation after the fork would leak the child.
    prctl = _prctl()  # loaded before the fork: the child only calls it
    parent = os.getpid()

    def die_with_parent() -> None:  # runs in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)

    with ExitStack() as child_ends, ExitStack() as ours_on_failure:
        ends: list[int | None] = []
        streams: list[trio.lowlevel.FdStream | None] = []
        for which, wanted in enumerate((stdin, stdout, stderr)):
            if wanted != subprocess.PIPE:
                ends.append(wanted)
                streams.append(None)
                continue
            read, write = os.pipe()
            child, mine = (read, write) if which == 0 else (write, read)
            child_ends.callback(os.close, child)
            stream = trio.lowlevel.FdStream(mine)
            ours_on_failure.callback(stream.close)
            ends.append(child)
            streams.append(stream)
        wrapper = _setpriv()
        fast = wrapper is not None and _found(command[0], environment, cwd)
        limiter = _bounds.prlimit_words(rlimits) if fast and rlimits else None
        if limiter is not None:
            command = [*limiter, "--", *command]
        # Forked from this thread on purpose: the death signal follows the forking thread.
        popen = subprocess.Popen(  # noqa: ASYNC220
            [wrapper, "--pdeathsig", "KILL", "--", *command] if fast else list(command),
            stdin=ends[0],
            stdout=ends[1],
            stderr=ends[2],
            env=environment,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=None if fast else die_with_parent,
        )
        ours_on_failure.pop_all()
    if rlimits and limiter is None:
        _bounds.set_rlimits([popen.pid], rlimits)  # it may have run a little already
    # trio builds its Process from a Popen only inside open_process, which forks from a
    # worker thread; this is that same construction, from this thread.
    return trio.Process._create(popen, streams[0], streams[1], streams[2])


@cache
def _setpriv() -> str | None:
    """util-linux's ``setpriv``, when it is installed and can set the death signal."""
    found = shutil.which("setpriv")
    if found is None:
        return None
    try:
        usage = subprocess.run(
            [found, "--help"], capture_output=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return found if b"--pdeathsig" in usage else None


def _found(program: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> bool:
    """``program`` names an executable file, looked up as the child's ``execvp`` will."""
    if os.sep in program:
        path = os.path.join(os.fspath(cwd or os.getcwd()), program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    search = os.pathsep.join(os.get_exec_path(dict(env)))
    return shutil.which(program, path=search) is not None


@contextmanager
def subreaper() -> Iterator[None]:
    """Make this process a child subreaper for the block (on Linux; elsewhere nothing).
    Nested and concurrent blocks share it; the setting is put back when the last ends
    (left as it was if the process had set it itself)."""
    global _subreaper_users, _subreaper_was_set
    if not LINUX:
        yield
        return
    if _subreaper_users == 0:
        value = ctypes.c_int(0)
        _prctl()(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
        _subreaper_was_set = bool(value.value)
        if not _subreaper_was_set:
            _prctl()(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _subreaper_users += 1
    try:
        yield
    finally:
        _subreaper_users -= 1
        if _subreaper_users == 0 and not _subreaper_was_set:
            _prctl()(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@attrs.frozen
class _Stat:
    pid: int
    state: str
    ppid: int
    pgrp: int
    start: int  # clock ticks after boot: with the pid, names one process for good


def _stat(pid: int) -> _Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2 :].split()
    return _Stat(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19]))


def _processes() -> list[_Stat]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            found.append(stat)
    return found


#: Reads of an empty environment before it counts as one: a process in the middle of an
#: ``exec`` shows none for a moment (its new memory is in place, its environment not yet).
_EMPTY_ENVIRON_READS = 100
#: Seconds a process may then stay in the middle of an ``exec`` — its command line empty
#: too — before its environment counts as empty: on a busy machine an ``exec`` may be
#: held up a while (its environment read again and again, the processor given up in
#: between).
_MID_EXEC_WAIT = 0.2


def _marked(pid: int, mark: str) -> bool:
    deadline = None
    for read in itertools.count():
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            return False
        if environ:
            return f"\0{SPAWN_MARK}={mark}\0".encode() in b"\0" + environ
        if read >= _EMPTY_ENVIRON_READS:  # mid-exec, or truly empty
            if deadline is None:
                if not _mid_exec(pid):
                    return False  # its command line is in place: so is its environment
                deadline = time.monotonic() + _MID_EXEC_WAIT
            elif time.monotonic() >= deadline:
                return False
        os.sched_yield()
    return False


def _mid_exec(pid: int) -> bool:
    """Whether ``pid``, whose environment reads empty, is in the middle of an ``exec``:
    its command line is not in place yet either (the kernel sets both at once)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return not file.read(1)
    except OSError:
        return False


@attrs.define
class Member:
    """One process of a server's family, held by a pidfd."""

    pid: int
    pidfd: int

    def signal(self, sig: signal.Signals) -> None:
        with suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, sig)

    def exited(self) -> bool:
        """It has exited (a zombie counts): its pidfd polls readable."""
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return bool(readable)

    def close(self) -> None:
        """Close its pidfd (once; later calls do nothing)."""
        if self.pidfd >= 0:
            with suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = -1


def family(process: trio.Process, mark: str | None) -> list[Member]:
    """The live processes of the server ``process`` other than itself: its descendants
    (while it has not been reaped: after that its pid may be another's), and this
    process's children marked ``mark`` and their descendants. Empty off Linux. Reads the
    ``task/*/children`` files of this process and of the family only (a few dozen small
    reads, not one per process on the machine); where the kernel has none, one scan of
    ``/proc``."""
    if not LINUX:
        return []
    me = os.getpid()
    # Read before looking: nothing reaps it meanwhile (no await here), so while this says
    # it runs, its pid is its own.
    leader = process.pid if process.returncode is None else None
    scanned: dict[int, list[_Stat]] | None = None
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):
        scanned = {}
        for stat in _processes():
            scanned.setdefault(stat.ppid, []).append(stat)

    def children(pid: int) -> list[_Stat]:
        if scanned is not None:
            return scanned.get(pid, [])
        return [stat for child in _child_pids(pid) if (stat := _stat(child)) is not None]

    found = {}
    if mark is not None:
        for stat in children(me):
            if stat.pid != leader and stat.state != "Z" and _marked(stat.pid, mark):
                found[stat.pid] = stat
    todo = [*found] if leader is None else [leader, *found]
    while todo:
        for stat in children(todo.pop()):
            if stat.pid not in found and stat.pid != leader:
                found[stat.pid] = stat
                todo.append(stat.pid)
    members = []
    for stat in found.values():
        try:
            pidfd = os.pidfd_open(stat.pid)
        except OSError:
            continue  # gone already
        again = _stat(stat.pid)
        if again is None or again.start != stat.start:  # exited, its pid reused
            os.close(pidfd)
            continue
        members.append(Member(stat.pid, pidfd))
    return members


def descendants(pid: int) -> list[int]:
    """The live process ``pid`` and its live descendants (zombies left out), each parent
    before its children: ``[]`` when ``pid`` is not live, ``[pid]`` off Linux. Reads only
    the family's own ``/proc`` entries (each process's ``task/*/children``), so it is cheap
    enough for every health record; where the kernel has no such files, one scan of
    ``/proc``."""
    if not LINUX:
        return [pid]
    leader = _stat(pid)
    if leader is None or leader.state == "Z":
        return []
    scanned: dict[int, list[int]] | None = None
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        scanned = {}
        for stat in _processes():
            scanned.setdefault(stat.ppid, []).append(stat.pid)
    found: dict[int, None] = {}  # (ordered)
    todo = collections.deque([pid])
    while todo:
        member = todo.popleft()
        stat = _stat(member)
        if stat is None or stat.state == "Z" or member in found:
            continue
        found[member] = None
        todo.extend(_child_pids(member) if scanned is None else scanned.get(member, []))
    return list(found)


def _child_pids(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for thread in threads:
        with suppress(OSError, ValueError):
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as file:
                children.extend(int(child) for child in file.read().split())
    return children


def _reap(members: Sequence[Member], leader: int, *, group: bool) -> None:
    """Reap the members that exited as this process's children; with ``group``, also the
    zombies this process adopted from the server's process group (they would keep the
    group alive)."""
    me = os.getpid()
    for member in members:
        stat = _stat(member.pid)
        if member.exited() and stat is not None and stat.ppid == me and stat.state == "Z":
            with suppress(ChildProcessError):
                os.waitpid(member.pid, os.WNOHANG)
    if group:
        for stat in _processes():
            if stat.ppid == me and stat.pgrp == leader and stat.pid != leader and stat.state == "Z":
                with suppress(ChildProcessError):
                    os.waitpid(stat.pid, os.WNOHANG)


async def end_family(process: trio.Process, members: Sequence[Member], timeout: float) -> None:
    """Stop the server ``process``'s group and ``members`` (:func:`family`): ``SIGTERM``
    to all, up to ``timeout`` seconds for each to exit, then ``SIGKILL`` to those left and
    up to ``timeout`` more; what exits as this process's child is reaped. Every wait is
    bounded; the members' pidfds stay open (:meth:`Member.close`)."""
    leader = process.pid
    _signal_all(leader, members, signal.SIGTERM)
    if not await _wait_gone(process, members, timeout):
        _signal_all(leader, members, signal.SIGKILL)
        await _wait_gone(process, members, timeout)


def _signal_all(leader: int, members: Sequence[Member], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, sig)
    for member in members:
        member.signal(sig)


async def _wait_gone(process: trio.Process, members: Sequence[Member], timeout: float) -> bool:
    with trio.move_on_after(timeout):
        while True:
            leader_gone = process.returncode is not None  # reading it reaps the leader
            _reap(members, process.pid, group=leader_gone and _group_alive(process.pid))
            if not _group_alive(process.pid) and all(m.exited() for m in members):
                _reap(members, process.pid, group=False)  # those adopted as they exited
                return True
            await trio.sleep(_POLL_S)
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
