"""Whether a local server's program can be found, looked up as its process will look it
up — without loading the transports and the MCP SDK, so that ``mcp-supervisor check``
starts fast.

The child's ``PATH`` is its own ``env`` PATH when it sets one, else this process's: both
the SDK's minimal environment and an inherited one pass ``PATH`` through
(:func:`supervisor.transports._spawn.child_environment`, which tests hold to the same answer).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

__all__ = ["command_problem", "exec_path", "find_program"]


def command_problem(
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> str | None:
    """Why a :class:`~supervisor.transports._stdio.StdioTransport` with these settings could not
    start ``command``, or ``None`` when it finds a program to run.

    The program is looked up as the process will be: a bare name on the ``PATH`` its
    environment will have (the server's own ``env`` PATH when it sets one), a path with a
    ``/`` relative to ``cwd`` (default: the current directory). The message quotes the
    command and says what to do. A program found may still fail once it runs.
    """
    if os.sep in command or (os.altsep and os.altsep in command):
        program = os.path.join(os.fspath(cwd or os.getcwd()), command)
        if not os.path.exists(program):
            return f'"{command}" does not exist; install it there, or correct the path'
        if os.path.isdir(program):
            return f'"{command}" is a directory, not a program'
        if not os.access(program, os.X_OK):
            return (
                f'"{command}" is not executable; make it so (chmod +x), or give its '
                'interpreter as the command (e.g. "python3") and the script in "args"'
            )
        return None
    search = os.pathsep.join(exec_path(env))
    if shutil.which(command, path=search) is not None:
        return None
    where = "the PATH set in its env" if "PATH" in (env or {}) else "PATH"
    return f'"{command}" is not on {where}; install it, or give its full path'


def exec_path(env: Mapping[str, str] | None = None) -> list[str]:
    """The directories a local server with ``env`` looks its program up in: those of its
    own ``PATH`` when ``env`` sets one, else this process's."""
    if env is not None and "PATH" in env:
        return os.get_exec_path({"PATH": env["PATH"]})
    return os.get_exec_path()


def find_program(
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> str | None:
    """The file a local server with these settings runs as its program, found as
    :func:`command_problem` looks it up; ``None`` when there is none."""
    if os.sep in command or (os.altsep and os.altsep in command):
        program = os.path.join(os.fspath(cwd or os.getcwd()), command)
        return program if os.path.exists(program) else None
    return shutil.which(command, path=os.pathsep.join(exec_path(env)))
