"""The demo's servers: where the example servers are, the config, the flaky HTTP process.

The demo runs the example MCP servers shipped in this package (:mod:`supervisor.demo.servers`),
or those of another directory, each with this interpreter: ``notes.py`` and ``calc.py``
over stdio, started by the supervisor, and ``flaky.py`` over Streamable HTTP, started by
the demo itself (it plays a remote service, which the supervisor only reaches by URL).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import attrs
import trio

from .servers import DIRECTORY as SHIPPED

#: The example servers the demo needs.
SCRIPTS = ("notes.py", "calc.py", "flaky.py")
#: How long the flaky server may take to start listening.
STARTUP_TIMEOUT = 20.0

_SERVING = re.compile(r"flaky: serving (http://\S+) \(pid (\d+)\)")


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""


def find_servers(directory: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the demo's servers: ``directory`` if given, else the one
    shipped in this package (:data:`supervisor.demo.servers.DIRECTORY`).

    Raises:
        DemoError: ``directory`` does not hold every script of :data:`SCRIPTS`.
    """
    if directory is None:
        return SHIPPED
    candidate = Path(directory)
    missing = [script for script in SCRIPTS if not (candidate / script).is_file()]
    if missing:
        raise DemoError(
            f"the demo runs the servers {', '.join(SCRIPTS)}, and {candidate} lacks "
            f"{', '.join(missing)}; name a directory that holds them all with --servers DIR, "
            "or leave --servers out to run the ones shipped with mcp-supervisor"
        )
    return candidate.resolve()


def write_config(directory: Path, servers: Path, flaky_url: str) -> Path:
    """Write the demo's config to ``directory/mcp.json`` and return its path.

    Short backoffs make recovery quick; the tree's intensity is raised so that a few
    failed reconnections in a row do not give up on the whole tree. The approval policy:
    reading and adding notes is auto-approved (deleting one still asks: it is annotated
    destructive), the calculator needs no approval at all, and the flaky server's tools
    (read-only lookups) are all auto-approved.
    """
    python = sys.executable
    config = {
        "mcpServers": {
            "notes": {
                "command": python,
                "args": [str(servers / "notes.py")],
                "env": {"NOTES_FILE": str(directory / "notes.json")},
                "lazy": False,
                "autoApprove": ["add_note", "get_note", "list_notes"],
                "description": "titled notes in a JSON file (stdio)",
            },
            "calc": {
                "command": python,
                "args": [str(servers / "calc.py")],
                "lazy": False,
                "approve": False,
                "description": "a calculator (stdio)",
            },
            "flaky": {
                "type": "http",
                "url": flaky_url,
                "lazy": False,
                "autoApprove": True,
                "description": "a remote service that goes away now and then",
            },
        },
        "supervisor": {
            "intensity": {"maxRestarts": 20, "withinSeconds": 10},
            "backoff": {
                "local": {"initial": 0.2, "max": 1},
                "remote": {"initial": 0.5, "max": 1, "maxAttempts": 20},
            },
            "requestTimeout": 20,
        },
    }
    path = directory / "mcp.json"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


@attrs.frozen
class FlakyProcess:
    """A running ``flaky.py``, started by :func:`run_flaky`."""

    script: Path
    url: str
    port: int
    pid: int
    _process: trio.Process

    async def kill(self) -> None:
        """``kill -9`` its process group; return once it has exited."""
        _kill_group(self._process)
        await self._process.wait()


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: pgid == pid
    except ProcessLookupError:
        pass


async def _deliver_cancel(process: trio.Process) -> None:
    _kill_group(process)


async def run_flaky(script: Path, port: int, *, task_status: trio.TaskStatus[FlakyProcess]) -> None:
    """Run ``flaky.py --port PORT`` (0: any free port) in its own process group until it
    exits or this task is cancelled, which kills the group. Started with
    ``nursery.start``, it returns once the server listens.

    Raises:
        DemoError: It exited, or said nothing, before listening.
    """
    command = [sys.executable, str(script), "--port", str(port)]
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                command,
                stdout=subprocess.PIPE,
                check=False,
                start_new_session=True,
                deliver_cancel=_deliver_cancel,
            )
        )
        assert process.stdout is not None
        line = await _first_line(process.stdout, STARTUP_TIMEOUT)
        match = _SERVING.match(line)
        if match is None:
            _kill_group(process)
            raise DemoError(
                f"{script} did not start serving on port {port} (it said {line!r}; "
                "its error, if any, is above)"
            )
        url = match.group(1)
        bound = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        task_status.started(FlakyProcess(script, url, bound, int(match.group(2)), process))


async def _first_line(stream: trio.abc.ReceiveStream, timeout: float) -> str:
    """The first line ``stream`` sends ('' if it ends first), within ``timeout`` s."""
    data = b""
    with trio.move_on_after(timeout):
        while b"\n" not in data:
            chunk = await stream.receive_some()
            if not chunk:
                break
            data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")
