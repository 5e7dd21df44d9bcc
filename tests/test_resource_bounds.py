"""A local server's ``resources``: its memory and process bounds watched over its whole
process family (over one, the family is killed and the server restarted, with
``mcp.local.memory_exceeded`` and a status that says so), its open-file and CPU limits
set on the server and on what it forks, what the family uses in ``status --json`` and
``/metrics``, and the config's checks — with real servers (a script around the stdlib
``tiny`` server that leaks, forks, or does nothing more), on Linux."""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import textwrap

import pytest

from supervisor import open_supervisor
from supervisor.config import load_config
from supervisor.config._diff import compare
from supervisor.config._model import Resources
from supervisor.errors import BoundExceeded, ConfigError
from supervisor.events._catalog import Event, LocalCrashed, LocalMemoryExceeded, LocalSpawned
from supervisor.faults import CallHistory
from supervisor.faults._checker import leftover_processes, spawned_pids
from supervisor.monitor import prometheus_text
from supervisor.monitor._metrics import status_document
from supervisor.testing.servers import tiny
from supervisor.transports import _bounds

from .probes import until
from .test_sandbox import needs_bwrap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

#: Generous: this machine may be busy.
TIMEOUT = 60

#: The server: ``leak`` allocates 4 MiB (touched: resident) every 10 ms from its start,
#: on its first start only (a marker file says it started once); ``fork`` forks one
#: child that sleeps (its pid written to a file); ``forks`` forks 6 such children, on its
#: first start only. Then it runs ``tiny``. It writes its own open-file limits first.
BOUNDED = textwrap.dedent(
    """
    import os, resource, runpy, sys, threading, time

    mode, state, tiny = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(state + ".nofile", "w") as file:  # its limit at its first instruction
        file.write("%d %d" % resource.getrlimit(resource.RLIMIT_NOFILE))
    first = not os.path.exists(state + ".started")
    open(state + ".started", "a").close()

    def sleeper():
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            while True:
                time.sleep(1)

    if mode == "leak" and first:
        def leak():
            held = []
            while True:
                held.append(b"x" * (4 << 20))
                time.sleep(0.01)
        threading.Thread(target=leak, daemon=True).start()
    elif mode == "fork":
        child = os.fork()
        if child == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            while True:
                time.sleep(1)
        with open(state + ".child", "w") as file:
            file.write(str(child))
    elif mode == "forks" and first:
        for _ in range(6):
            sleeper()
    sys.argv = [tiny]
    runpy.run_path(tiny, run_name="__main__")
    """
)


def bounded(tmp_path: pathlib.Path, mode: str, resources: dict[str, object]) -> dict[str, object]:
    """A config entry for the script in ``mode``, with ``resources``."""
    script = tmp_path / "bounded.py"
    script.write_text(BOUNDED)
    state = tmp_path / f"state-{mode}"
    return {
        "command": sys.executable,
        "args": ["-S", "-I", str(script), mode, str(state), tiny.PATH],
        "lazy": False,
        "approve": False,
        "resources": resources,
    }


def spawned(events: list[Event]) -> list[tuple[str, int]]:
    """``(server, pid)`` of each ``mcp.local.spawned`` among ``events``."""
    return [(e.server, e.pid) for e in events if isinstance(e, LocalSpawned)]


def limits_of(pid: int) -> dict[str, tuple[str, str]]:
    """``/proc/PID/limits``: each limit's soft and hard value, by name."""
    found = {}
    lines = pathlib.Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    for line in lines:
        parts = re.split(r"\s{2,}", line.strip())
        found[parts[0]] = (parts[1], parts[2])
    return found


FAST_RESTARTS = {"backoff": {"local": {"initial": 0.05, "max": 0.1}}}


async def test_a_leaking_server_is_restarted_at_its_memory_bound(tmp_path: pathlib.Path) -> None:
    """A server whose RSS grows past ``resources.memory`` is killed with its family and
    restarted: ``mcp.local.memory_exceeded`` {rss over the limit, the limit}, then
    ``mcp.local.crashed`` (-9); its status says why; a server beside it is untouched;
    no process is left once the supervisor ends."""
    limit = 48 << 20
    history = CallHistory()
    cfg = {
        "mcpServers": {
            "leaky": bounded(tmp_path, "leak", {"memory": "48M"}),
            "calm": {**tiny.tiny_server(name="calm"), "approve": False},
        },
        "supervisor": FAST_RESTARTS,
    }
    async with open_supervisor(cfg, history=history) as sup:
        # (not connect_all: the first start may be killed before its handshake is done)
        await until(
            lambda: (
                sup.status()["leaky"].restarts == 1 and sup.status()["leaky"].status == "connected"
            ),
            TIMEOUT,
        )
        seen = [event for _, event in history.events]
        kinds = [(getattr(e, "server", None), e.kind) for e in seen]
        exceeded = [e for e in seen if isinstance(e, LocalMemoryExceeded)]
        assert len(exceeded) == 1 and exceeded[0].server == "leaky"
        assert exceeded[0].limit == limit and exceeded[0].rss > limit
        at = kinds.index(("leaky", "mcp.local.memory_exceeded"))
        crashed = [e for e in seen[at:] if isinstance(e, LocalCrashed)]
        assert crashed[0].server == "leaky" and crashed[0].exit_code == -9
        assert ("leaky", "mcp.connected") in kinds[at:]  # restarted, and it stays up
        record = sup.status()["leaky"]
        assert record.restarts == 1 and record.status == "connected"
        assert record.last_error is not None
        assert re.search(r"was killed: memory \d+ MiB over its bound 48 MiB", record.last_error)
        assert (await sup.call("leaky_echo", {"text": "hi"})).text == "hi"
        other = sup.status()["calm"]
        assert other.restarts == 0 and other.last_error is None
        assert [pid for server, pid in spawned(seen) if server == "calm"] == [other.pid]
        assert (await sup.call("calm_echo", {"text": "hi"})).text == "hi"
    left = leftover_processes(spawned_pids(history.events))
    assert not left, f"processes left behind: {left}"


@needs_bwrap
async def test_bounds_hold_for_a_sandboxed_server_too(tmp_path: pathlib.Path) -> None:
    """``resources`` and ``sandboxEnabled`` together: the limits are set on the sandbox
    and everything in it before the server runs, and its family — bwrap, the sandbox's
    first process, the server — is watched as one: the leak inside is caught, the family
    killed, the server restarted in a new sandbox, and nothing is left."""
    history = CallHistory()
    entry = bounded(tmp_path, "leak", {"memory": "48M", "openFiles": 100})
    entry["sandboxEnabled"] = True
    entry["sandbox"] = {"filesystem": {"allowWrite": [str(tmp_path)]}}  # its state files
    cfg = {"mcpServers": {"boxed": entry}, "supervisor": FAST_RESTARTS}
    async with open_supervisor(cfg, history=history) as sup:
        await until(
            lambda: (
                sup.status()["boxed"].restarts == 1 and sup.status()["boxed"].status == "connected"
            ),
            TIMEOUT,
        )
        seen = [event for _, event in history.events]
        exceeded = [e for e in seen if isinstance(e, LocalMemoryExceeded)]
        assert len(exceeded) == 1 and exceeded[0].rss > exceeded[0].limit == 48 << 20
        record = sup.status()["boxed"]
        assert record.pid is not None and len(record.family) >= 2  # bwrap and what it runs
        assert os.path.basename(os.readlink(f"/proc/{record.pid}/exe")) == "bwrap"
        assert all(limits_of(pid)["Max open files"] == ("100", "100") for pid in record.family)
        assert (tmp_path / "state-leak.nofile").read_text() == "100 100"
        assert (await sup.call("boxed_echo", {"text": "hi"})).text == "hi"
    left = leftover_processes(spawned_pids(history.events))
    assert not left, f"processes left behind: {left}"


async def test_a_family_over_its_process_bound_is_restarted(tmp_path: pathlib.Path) -> None:
    """``resources.processes`` counts the whole family: a server that forks six
    children past a bound of 4 is killed with them, and restarted."""
    history = CallHistory()
    cfg = {
        "mcpServers": {"forky": bounded(tmp_path, "forks", {"processes": 4})},
        "supervisor": FAST_RESTARTS,
    }
    async with open_supervisor(cfg, history=history) as sup:
        await until(
            lambda: (
                sup.status()["forky"].restarts == 1 and sup.status()["forky"].status == "connected"
            ),
            TIMEOUT,
        )
        record = sup.status()["forky"]
        assert record.last_error is not None
        found = re.search(
            r"was killed: (\d+) processes over its bound 4 \(resources", record.last_error
        )
        assert found is not None and int(found.group(1)) > 4
        assert len(record.family) == 1  # the second start forks nothing
    left = leftover_processes(spawned_pids(history.events))
    assert not left, f"processes left behind: {left}"


@pytest.mark.parametrize("wrapper", ["prlimit", "after_spawn"])
async def test_open_files_and_cpu_limits_bind_the_server_and_what_it_forks(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, wrapper: str
) -> None:
    """``openFiles`` and ``cpuSeconds`` are the soft and hard limits of the server and of
    the child it forks: set before it runs (through util-linux's ``prlimit``), or, where
    that is missing, on its pid once spawned and on the family the watchdog finds."""
    if wrapper == "prlimit" and _bounds._prlimit() is None:
        pytest.skip("util-linux's prlimit is not installed")
    if wrapper == "prlimit":  # the limits come from the wrapper alone
        monkeypatch.setattr(_bounds, "set_rlimits", lambda pids, limits: None)
    else:
        monkeypatch.setattr(_bounds, "_prlimit", lambda: None)
    history = CallHistory()
    entry = bounded(tmp_path, "fork", {"openFiles": 100, "cpuSeconds": 3600})
    child_file = tmp_path / "state-fork.child"
    async with open_supervisor({"mcpServers": {"f": entry}}, history=history) as sup:
        await sup.connect_all(timeout=TIMEOUT)
        record = sup.status()["f"]
        assert record.pid is not None
        child = int(child_file.read_text())
        await until(lambda: limits_of(child)["Max open files"] == ("100", "100"), TIMEOUT)
        for pid in (record.pid, child):
            limits = limits_of(pid)
            assert limits["Max open files"] == ("100", "100")
            assert limits["Max cpu time"] == ("3600", "3600")
        assert child in sup.status()["f"].family
        if wrapper == "prlimit":  # set before it ran: no moment without them
            assert (tmp_path / "state-fork.nofile").read_text() == "100 100"
        # The server runs itself, not the wrapper: its pid is the interpreter's.
        program = os.readlink(f"/proc/{record.pid}/exe")
        assert os.path.basename(program).startswith("python")
    left = leftover_processes([*spawned_pids(history.events), child])
    assert not left, f"processes left behind: {left}"


async def test_status_and_metrics_report_the_family_s_rss_and_cpu(
    tmp_path: pathlib.Path,
) -> None:
    """``status --json`` has each running local server family's ``rss_bytes`` and
    ``cpu_seconds``; ``/metrics`` has them as ``_resident_memory_bytes`` and
    ``_cpu_seconds_total``. A server not running has none."""
    cfg = {
        "mcpServers": {
            "f": bounded(tmp_path, "fork", {}),
            "off": {**tiny.tiny_server(name="off"), "disabled": True},
        }
    }
    async with open_supervisor(cfg) as sup:
        await sup.connect_all(timeout=TIMEOUT)
        record = sup.status()["f"]
        assert len(record.family) == 2
        assert record.rss_bytes is not None and 2 << 20 < record.rss_bytes < 1 << 30
        assert record.cpu_seconds is not None and 0 <= record.cpu_seconds < 60
        assert sup.status()["off"].rss_bytes is None
        document = json.loads(json.dumps(status_document(sup.status(), sup.metrics())))
        shown = {s["server"]: s for s in document["servers"]}
        assert shown["f"]["rss_bytes"] > 2 << 20 and shown["f"]["cpu_seconds"] >= 0
        assert shown["off"]["rss_bytes"] is None and shown["off"]["cpu_seconds"] is None
        assert document["metrics"]["f"]["rss_bytes"] > 2 << 20
        text = prometheus_text(sup.metrics())
        rss = re.search(r'^\w+_resident_memory_bytes\{server="f"\} (\S+)$', text, re.M)
        cpu = re.search(r'^\w+_cpu_seconds_total\{server="f"\} (\S+)$', text, re.M)
        assert rss is not None and 2 << 20 < float(rss.group(1)) < 1 << 30
        assert cpu is not None and float(cpu.group(1)) >= 0
        assert 'server="off"' not in text.split("resident_memory_bytes", 1)[1].split("# HELP")[0]


# -- the config ------------------------------------------------------------------------------


def test_resources_are_read_with_sizes_in_units() -> None:
    """``memory`` takes bytes or a size with a 1024-based unit; the others whole numbers."""
    config = load_config(
        {
            "mcpServers": {
                "a": {
                    "command": "x",
                    "resources": {
                        "memory": "512M",
                        "processes": 64,
                        "openFiles": 1024,
                        "cpuSeconds": 3600,
                    },
                },
                "b": {"command": "x", "resources": {"memory": "1.5GiB"}},
                "c": {"command": "x", "resources": {"memory": 1000000}},
                "d": {"command": "x"},
            }
        },
        environ={},
    )
    servers = config.servers
    assert servers["a"].resources == Resources(
        memory=512 << 20, processes=64, open_files=1024, cpu_seconds=3600
    )
    assert servers["b"].resources == Resources(memory=3 << 29)
    assert servers["c"].resources == Resources(memory=1000000)
    assert servers["d"].resources is None


def test_resources_errors_name_their_field() -> None:
    """Each bad field is reported at its path; ``resources`` on a remote server is refused."""
    with pytest.raises(ConfigError) as info:
        load_config(
            {
                "mcpServers": {
                    "a": {
                        "command": "x",
                        "resources": {
                            "memory": "lots",
                            "processes": 0,
                            "openFile": 10,
                            "cpuSeconds": 1.5,
                        },
                    },
                    "b": {"command": "x", "resources": {"memory": "0M"}},
                    "c": {"command": "x", "resources": 512},
                    "r": {"url": "https://example.com/mcp", "resources": {"memory": "1G"}},
                }
            },
            environ={},
        )
    assert str(info.value).splitlines() == [
        'mcpServers.a.resources.memory: must be a number of bytes or a size such as "512M" or "2G"',
        "mcpServers.a.resources.processes: must be at least 1",
        'mcpServers.a.resources.openFile: unknown field; did you mean "openFiles"?',
        "mcpServers.a.resources.cpuSeconds: must be a whole number, not a number",
        "mcpServers.b.resources.memory: must be more than 0 bytes",
        "mcpServers.c.resources: must be an object, not a number",
        "mcpServers.r.resources: applies to local (stdio) servers only",
    ]


def test_changed_resources_replace_the_server() -> None:
    """New bounds are set when a process starts: a change replaces the server."""
    old = load_config({"mcpServers": {"a": {"command": "x"}}}, environ={})
    new = load_config(
        {"mcpServers": {"a": {"command": "x", "resources": {"memory": "1G"}}}}, environ={}
    )
    assert compare(old, new).replaced == {"a": ("resources",)}


def test_bound_exceeded_is_a_server_exit() -> None:
    """The error says which bound, what was used and the bound; it is a ServerExited."""
    error = BoundExceeded("m", resource="memory", used=5, limit=4, exit_code=-9)
    assert (error.resource, error.used, error.limit, error.exit_code) == ("memory", 5, 4, -9)
    assert _bounds.format_bytes(612 << 20) == "612 MiB"
