"""No server process outlives its supervisor (supervisor._children), on Linux: a server that
ignores SIGTERM and its stdin closing dies with a supervisor killed with SIGKILL, and what a
server started in a session of its own (``setsid()``) is stopped with it. Each test runs a
hostile stdio server (a script written here, around the stdlib ``tiny`` server), writes
down the pids it makes, and checks ``/proc``."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import trio

from supervisor import open_supervisor
from supervisor.testing.servers import tiny
from supervisor.transports import _children
from supervisor.transports._children import (
    SPAWN_MARK,
    family,
    open_process,
    spawn_mark,
    subreaper,
)

from .probes import running

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

#: Generous: this machine may be busy.
READY_TIMEOUT = 120
GONE_TIMEOUT = 20

HOSTILE = textwrap.dedent(
    """
    import os, runpy, signal, sys, time

    pids, mode, tiny = sys.argv[1], sys.argv[2], sys.argv[3]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # and its children inherit that

    def record(word):
        with open(pids, "a") as file:
            file.write(f"{word} {os.getpid()}\\n")

    def loop():
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        record("grandchild")
        while True:
            time.sleep(1)

    if mode in ("setsid", "daemon"):
        if os.fork() == 0:
            if mode == "daemon" and os.fork() != 0:
                os._exit(0)  # the daemon's second fork: its grandchild is orphaned
            os.setsid()
            loop()
        if mode == "daemon":
            os.wait()
    record("server")
    sys.argv = [tiny]
    try:
        runpy.run_path(tiny, run_name="__main__")
    except SystemExit:
        pass
    while True:  # its stdin has ended: it stays all the same
        time.sleep(1)
    """
)


def hostile(tmp_path: pathlib.Path, mode: str) -> tuple[dict[str, object], pathlib.Path]:
    """A config entry for the hostile server in ``mode`` (``stubborn``: it ignores
    SIGTERM and its stdin ending; ``setsid``: that, and it starts a process in a session
    of its own first; ``daemon``: as ``setsid``, through a second fork whose parent exits
    at once), and the file it writes its pids to."""
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    pids = tmp_path / f"pids-{mode}"
    entry = {
        "command": sys.executable,
        "args": ["-S", "-I", str(script), str(pids), mode, tiny.PATH],
        "lazy": False,
    }
    return entry, pids


def recorded(pids: pathlib.Path) -> dict[str, int]:
    try:
        lines = pids.read_text().splitlines()
    except FileNotFoundError:
        return {}
    return {word: int(pid) for word, pid in (line.split() for line in lines)}


def environ(pid: int) -> bytes:
    """``pid``'s environment as ``/proc`` has it, each entry after a NUL."""
    return b"\0" + pathlib.Path(f"/proc/{pid}/environ").read_bytes()


async def wait_for_pids(pids: pathlib.Path, *words: str) -> dict[str, int]:
    with trio.fail_after(READY_TIMEOUT):
        while not all(word in (found := recorded(pids)) for word in words):  # noqa: ASYNC110 - a file another process writes
            await trio.sleep(0.05)
    return found


async def wait_gone(pids: dict[str, int]) -> dict[str, int]:
    """Those of ``pids`` still running after :data:`GONE_TIMEOUT` seconds."""
    with trio.move_on_after(GONE_TIMEOUT):
        while any(running(pid) for pid in pids.values()):  # noqa: ASYNC110 - polling /proc, bounded
            await trio.sleep(0.05)
    return {word: pid for word, pid in pids.items() if running(pid)}


def kill_left(pids: dict[str, int]) -> None:
    """Clean up after a failed test: the processes it made, by pid, if still running."""
    for pid in pids.values():
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def write_config(tmp_path: pathlib.Path, servers: dict[str, object]) -> pathlib.Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "supervisor": {"initTimeout": 60}}))
    return path


async def wait_for_line(process: trio.Process, text: bytes) -> None:
    """Read ``process``'s stderr until ``text`` shows."""
    assert process.stderr is not None
    seen = b""
    with trio.fail_after(READY_TIMEOUT):
        while text not in seen:
            chunk = await process.stderr.receive_some(65536)
            assert chunk, f"ended before {text!r}:\n{seen.decode(errors='replace')}"
            seen += chunk


PROGRAM = textwrap.dedent(
    """
    import sys, trio
    from supervisor import open_supervisor

    async def main():
        async with open_supervisor(sys.argv[1]) as sup:
            await sup.connect_all()
            print("connected", file=sys.stderr, flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


def supervisor_command(tmp_path: pathlib.Path, how: str, config: pathlib.Path) -> list[str]:
    if how == "serve":
        return [sys.executable, "-m", "supervisor", "serve", "--config", str(config),
                "--http", "127.0.0.1:0", "-v"]  # fmt: skip
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    return [sys.executable, str(program), str(config)]


READY = {"serve": b'"event": "connected"', "program": b"connected"}


@pytest.mark.parametrize("how", ["serve", "program"])
async def test_a_server_that_ignores_eof_dies_with_a_killed_supervisor(
    tmp_path: pathlib.Path, how: str
) -> None:
    """kill -9 of `serve`, or of a program using open_supervisor: its server, which
    ignores SIGTERM and its stdin ending, is gone too."""
    entry, pids = hostile(tmp_path, "stubborn")
    config = write_config(tmp_path, {"stubborn": entry})
    found: dict[str, int] = {}
    process = await trio.lowlevel.open_process(
        supervisor_command(tmp_path, how, config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await wait_for_line(process, READY[how])
        found = await wait_for_pids(pids, "server")
        process.kill()
        await process.wait()
        assert await wait_gone(found) == {}
    finally:
        process.kill()
        kill_left(found)


@pytest.mark.parametrize("mode", ["setsid", "daemon"])
async def test_what_a_server_started_in_its_own_session_stops_with_it(
    tmp_path: pathlib.Path, mode: str
) -> None:
    """Leaving open_supervisor stops a server's process that called setsid() (out of the
    server's process group), whether its parent is the server or it was orphaned."""
    entry, pids = hostile(tmp_path, mode)
    found: dict[str, int] = {}
    try:
        async with open_supervisor({"mcpServers": {"h": entry}}) as sup:
            await sup.connect_all()
            found = await wait_for_pids(pids, "server", "grandchild")
            assert running(found["grandchild"])
            assert f"\0MCP_SUPERVISOR_SPAWN={os.getpid()}.".encode() in environ(found["server"])
        assert await wait_gone(found) == {}
    finally:
        kill_left(found)


async def test_serve_stopped_by_sigterm_leaves_no_setsid_grandchild(
    tmp_path: pathlib.Path,
) -> None:
    """SIGTERM to `serve`: the server's process in a session of its own is gone too."""
    entry, pids = hostile(tmp_path, "setsid")
    config = write_config(tmp_path, {"h": entry})
    found: dict[str, int] = {}
    process = await trio.lowlevel.open_process(
        supervisor_command(tmp_path, "serve", config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await wait_for_line(process, READY["serve"])
        found = await wait_for_pids(pids, "server", "grandchild")
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(READY_TIMEOUT):
            assert process.stderr is not None
            while await process.stderr.receive_some(65536):
                pass
            assert await process.wait() == 128 + signal.SIGTERM
        assert await wait_gone(found) == {}
    finally:
        process.kill()
        kill_left(found)


async def test_a_server_s_family_is_its_marked_processes_not_the_program_s_own() -> None:
    """A process the embedding program started itself, in a session of its own, is not
    found as a server's (so it is never signalled or reaped at a server's stop); a child
    of this process that carries the server's spawn mark (as an orphan adopted from the
    server does) is."""
    mine = subprocess.Popen(["sleep", "600"], start_new_session=True)  # noqa: ASYNC220
    mark = spawn_mark()
    env = {"PATH": os.environ["PATH"]}
    with subreaper():
        server = await open_process(["sleep", "600"], env=env, mark=mark)
        adopted = await open_process(["sleep", "600"], env=env, mark=mark)
        try:
            members = family(server, mark)
            assert {m.pid for m in members} == {adopted.pid}
            for member in members:
                member.close()
        finally:
            for process in (server, adopted):
                process.kill()
                await process.wait()
            mine.kill()
            mine.wait()


async def test_a_marked_child_held_up_mid_exec_is_found_once_its_environment_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A marked child whose ``exec`` is held up (on a busy machine its environment reads
    empty for a while) is found once its environment is in place, not taken for
    unmarked; a child whose environment is truly empty (its command line in place) is not
    waited for. The hold-up is the child's own: its environment stays empty until it is
    let go — when it is first taken for mid-exec — and it becomes the marked process."""
    mark = spawn_mark()
    env = {"PATH": os.environ["PATH"]}
    sleep = shutil.which("sleep")
    later = (
        "import os, sys\n"
        "sys.stdin.buffer.read(1)  # (held up until let go)\n"
        f"os.execve({sleep!r}, ['sleep', '600'], {{{SPAWN_MARK!r}: {mark!r}}})\n"
    )
    mid_exec = _children._mid_exec
    monkeypatch.setattr(_children, "_MID_EXEC_WAIT", 30.0)  # (a hang guard only)
    with subreaper():
        server = await open_process(["sleep", "600"], env=env, mark=mark)
        empty = subprocess.Popen(["sleep", "600"], env={}, start_new_session=True)  # noqa: ASYNC220
        held = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-I", "-c", later],
            env={},
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        assert held.stdin is not None
        let_go = held.stdin

        def held_up(pid: int) -> bool:
            if pid != held.pid:
                return mid_exec(pid)
            let_go.write(b"x")  # (taken for mid-exec: now it goes on to its exec)
            let_go.flush()
            return True

        monkeypatch.setattr(_children, "_mid_exec", held_up)
        try:
            assert not mid_exec(empty.pid)
            members = family(server, mark)
            assert {m.pid for m in members} == {held.pid}
            for member in members:
                member.close()
        finally:
            server.kill()
            await server.wait()
            for child in (empty, held):
                child.kill()
                child.wait()
            let_go.close()


async def test_a_spawned_process_has_the_parent_death_signal(tmp_path: pathlib.Path) -> None:
    """open_process's child has PR_SET_PDEATHSIG = SIGKILL (field 'pdeath' is not in
    /proc; the child reads it with prctl(PR_GET_PDEATHSIG) and prints it)."""
    script = tmp_path / "get.py"
    script.write_text(
        "import ctypes\n"
        "v = ctypes.c_int()\n"
        "ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0)\n"
        "print(v.value)\n"
    )
    process = await open_process(
        [sys.executable, "-S", "-I", str(script)], env={}, stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    out = b""
    with trio.fail_after(READY_TIMEOUT):
        while chunk := await process.stdout.receive_some(1024):
            out += chunk
        assert await process.wait() == 0
    assert int(out) == signal.SIGKILL


async def test_a_spawn_through_setpriv_runs_the_command_itself_with_its_argv() -> None:
    """Where setpriv sets the death signal, the child is the command after one more exec:
    its argv is the command's own (argv[0] as given), and setpriv is gone from it."""
    process = await open_process(
        ["sh", "-c", 'echo "$0"; cat /proc/$$/cmdline'],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    out = b""
    with trio.fail_after(READY_TIMEOUT):
        while chunk := await process.stdout.receive_some(1024):
            out += chunk
        assert await process.wait() == 0
    first, cmdline = out.split(b"\n", 1)
    assert first == b"sh"
    assert cmdline.split(b"\0")[:2] == [b"sh", b"-c"]


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (["no-such-program-here"], FileNotFoundError),
        (["./not-there"], FileNotFoundError),
        ([os.devnull], PermissionError),
    ],
)
async def test_a_program_that_cannot_start_raises_what_popen_raises(
    command: list[str], error: type[OSError], tmp_path: pathlib.Path
) -> None:
    """A missing or non-executable program is never handed to setpriv (which would start
    and then fail): the spawn raises as subprocess.Popen does, and nothing is left."""
    with pytest.raises(error):
        await open_process(command, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
