"""Runs the docs' Python examples for tests/test_docs.py, each as a program of its own.

``python -m tests.docs_runner PARALLEL`` imports what the examples import (trio, the SDK,
the supervisor) once, then reads requests from stdin, one JSON object a line: ``{"id",
"name", "code", "timeout"}``. Each example runs in a fork of this process — its own
process group, stdin from /dev/null, stdout and stderr to files, ``__name__`` set to
``"__main__"``, the exit status a program's — at most PARALLEL at a time. A result goes
to stdout as one JSON line ``{"id", "rc", "stdout", "stderr", "timed_out"}`` when the
example ends (or is killed, with its process group, after its timeout). The runner exits
when stdin closes and the last example has ended.

The imports, a second and a half per interpreter here, are what this saves: run with
``python -c`` each, the docs' examples spent most of their time importing.
"""

from __future__ import annotations

import atexit
import builtins
import collections
import contextlib
import importlib
import json
import linecache
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from typing import BinaryIO

PRELOAD = (
    "trio",
    "httpx2",
    "msgspec",
    "mcp",
    "mcp.server.mcpserver",
    "mcp_types",
    "supervisor",
    "supervisor.runtime",
    "supervisor.actors",
    "supervisor.events",
    "supervisor.config",
    "supervisor.registry",
    "supervisor.gateway",
    "supervisor.dashboard",
    "supervisor.monitor",
    "supervisor.faults",
    "supervisor.testing",
    "supervisor.testing.servers",
    "hypothesis",
)


def _child(request: dict, out: int, err: int, devnull: int) -> None:
    """Run one example in this (forked) process, and exit with its status."""
    os.setpgid(0, 0)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    code, name = request["code"], request["name"]
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    sys.argv = ["-c"]
    status = 0
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def main() -> None:
    parallel = int(sys.argv[1])
    for module in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a stray print here must not garble the results
    devnull = os.open(os.devnull, os.O_RDONLY)
    waiting: collections.deque[dict] = collections.deque()
    running: dict[int, tuple[dict, BinaryIO, BinaryIO, float]] = {}
    buffered = b""
    reading = True
    while reading or waiting or running:
        while waiting and len(running) < parallel:
            request = waiting.popleft()
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, out.fileno(), err.fileno(), devnull)
            running[pid] = (request, out, err, time.monotonic() + request["timeout"])
        ready, _, _ = select.select([0] if reading else [], [], [], 0.02)
        if ready:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                reading = False
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            waiting.extend(json.loads(line) for line in lines if line.strip())
        for pid, (request, out, err, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            timed_out = not done and time.monotonic() > deadline
            if timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                done, status = os.waitpid(pid, 0)
            if not done:
                continue
            del running[pid]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # anything the example left behind
            texts = []
            for file in (out, err):
                file.seek(0)
                texts.append(file.read().decode("utf-8", "replace"))
                file.close()
            answer = {
                "id": request["id"],
                "rc": os.waitstatus_to_exitcode(status),
                "stdout": texts[0],
                "stderr": texts[1],
                "timed_out": timed_out,
            }
            results.write(json.dumps(answer) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
