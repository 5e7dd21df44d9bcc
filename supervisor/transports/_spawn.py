"""Starting a local server's process: its command line, environment and limits.

A :class:`~._stdio.StdioTransport` spawns its server through its :class:`Spawner`, with
its three pipes, in a process group of its own and carrying the transport's mark (see
:mod:`._children`). The child gets a minimal platform environment plus the server's
``env`` (:func:`child_environment`), its ``openFiles`` and ``cpuSeconds`` bounds as its
limits (Linux: :mod:`._bounds`), and with a ``sandbox`` runs under bubblewrap
(:mod:`._sandbox`): its command line is then ``bwrap … -- COMMAND ARGS``, and a filtering
proxy (:mod:`._proxy`) serves it when it allows domains. Where no sandbox can be made the
server never runs unconfined: the spawn fails with a :class:`ServerExited` that is not
retryable, saying what is missing.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import trio
from mcp.client.stdio import get_default_environment

from ..errors import ServerExited
from ..log import get_logger, redact
from . import _bounds, _children
from ._errors import translate
from ._programs import command_problem, find_program
from ._proxy import FilteringProxy
from ._sandbox import SandboxLaunch, sandbox_problem

if TYPE_CHECKING:
    from ..config._model import Resources, SandboxConfig

log = get_logger("supervisor.transports")

#: What serves a sandbox's filtering proxy, in the transport's nursery.
ServeProxy = Callable[[], Awaitable[None]]


def child_environment(
    env: Mapping[str, str] | None = None, *, inherit_env: bool = False
) -> dict[str, str]:
    """The environment a :class:`~._stdio.StdioTransport` gives its process: a minimal
    platform environment (``PATH``, ``HOME``, … as the SDK chooses), or all of
    :data:`os.environ` with ``inherit_env``, and then ``env`` over it."""
    base = dict(os.environ) if inherit_env else get_default_environment()
    return base | dict(env or {})


class Spawner:
    """One server's spawn: its process started, in its sandbox if it has one."""

    __slots__ = (
        "_launch",
        "args",
        "command",
        "cwd",
        "env",
        "inherit_env",
        "mark",
        "name",
        "proxy",
        "resources",
        "sandbox",
    )

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        *,
        name: str,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None,
        inherit_env: bool,
        mark: str,
        resources: Resources | None,
        sandbox: SandboxConfig | None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.name = name
        self.env = dict(env)
        self.cwd = cwd
        self.inherit_env = inherit_env
        self.mark = mark
        self.resources = resources
        #: its sandbox, that spawn's files, and its proxy (if any)
        self.sandbox = sandbox
        self._launch: SandboxLaunch | None = None
        self.proxy: FilteringProxy | None = None

    def environment(self) -> dict[str, str]:
        """The child's environment (:func:`child_environment`)."""
        return child_environment(self.env, inherit_env=self.inherit_env)

    async def spawn(self) -> tuple[trio.Process, ServeProxy | None]:
        """The server's process, started, and what serves its sandbox's proxy (if any);
        the failure to start it, translated (:func:`~._errors.translate`)."""
        argv, serve_proxy = [self.command, *self.args], None
        if self.sandbox is not None:
            argv, serve_proxy = await self._sandboxed(self.sandbox)
        try:
            process = await _children.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environment(),
                mark=self.mark,
                cwd=self.cwd,
                rlimits=_bounds.rlimits(self.resources) if _children.LINUX else (),
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL, or text the OS cannot hold
            self.close()
            raise translate(exc, server=self.name, starting=self.command) from exc
        return process, serve_proxy

    async def _sandboxed(self, sandbox: SandboxConfig) -> tuple[list[str], ServeProxy | None]:
        """The command line that runs the server in its sandbox, and what serves its
        proxy (when it has allowed domains: its socket is listening on return). Raises
        :class:`ServerExited` (not retryable) when no sandbox can be made here, or the
        command is not found: the server never runs unconfined."""
        problem = await trio.to_thread.run_sync(sandbox_problem)
        if problem is not None:
            raise ServerExited(
                f"MCP server {self.name!r} asks for a sandbox (sandboxEnabled), which cannot "
                f"be made here: {problem}",
                exit_code=None,
                retryable=False,
            )
        missing = command_problem(self.command, env=self.environment(), cwd=self.cwd)
        if missing is not None:
            raise ServerExited(
                f"cannot start MCP server {self.name!r}: {redact(missing)}",
                exit_code=None,
                retryable=False,
            )
        launch = self._launch = SandboxLaunch(sandbox)
        try:
            program = find_program(self.command, env=self.environment(), cwd=self.cwd)
            argv = launch.argv(self.command, self.args, self.cwd, program=program)
            for path in launch.skipped:
                log.info("sandbox path not found: skipped", server=self.name, path=path)
            if launch.socket_path is None:
                return argv, None
            listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listening.bind(launch.socket_path)
                listening.listen(64)
            except OSError:
                listening.close()
                raise
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(listening))
            self.proxy = FilteringProxy(self.name, sandbox.allowed_domains, sandbox.denied_domains)
            return argv, partial(self.proxy.serve, listener)
        except OSError as exc:
            self.close()
            raise ServerExited(
                f"cannot make the sandbox of MCP server {self.name!r}: {exc}",
                exit_code=None,
            ) from exc

    def close(self) -> None:
        """Remove what the sandbox's spawn made (its files), if anything."""
        if self._launch is not None:
            self._launch.close()
