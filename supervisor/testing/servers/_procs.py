"""Run fixture servers as subprocesses: stdio command lines and spawned HTTP servers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from ...transports._children import open_process
from ._names import GarbageMode, HttpTransport, ServerKind

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

LISTENING_PREFIX = "LISTENING "
"""HTTP fixtures write ``LISTENING <url>`` as one line on stderr and on stdout once bound."""

_MODULE = "supervisor.testing.servers"


class FixtureStartError(RuntimeError):
    """A spawned fixture server exited, or stayed silent, before announcing its URL."""


def _cli_args(
    kind: ServerKind,
    *,
    transport: Literal["stdio"] | HttpTransport = "stdio",
    host: str | None = None,
    port: int | None = None,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    stderr_line: str | None = None,
    garbage: GarbageMode | None = None,
    exit_code: int | None = None,
) -> list[str]:
    args = ["-m", _MODULE, kind]
    if transport != "stdio":
        args += ["--transport", transport]
    if host is not None:
        args += ["--host", host]
    if port is not None:
        args += ["--port", str(port)]
    if crash_after is not None:
        args += ["--crash-after", str(crash_after)]
    if count_file is not None:
        args += ["--count-file", os.fspath(count_file)]
    if stderr_line is not None:
        args += ["--stderr-line", stderr_line]
    if garbage is not None:
        args += ["--garbage", garbage]
    if exit_code is not None:
        args += ["--exit-code", str(exit_code)]
    return args


def stdio_params(
    kind: ServerKind,
    *,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    stderr_line: str | None = None,
    garbage: GarbageMode | None = None,
    exit_code: int | None = None,
) -> tuple[str, list[str]]:
    """Return ``(command, args)`` that run fixture `kind` over stdio with this interpreter.

    The command is ``sys.executable``; the args are ``-m supervisor.testing.servers KIND``
    and the options as CLI flags, ready for a config's ``command``/``args``. The package
    must be importable by that interpreter (it is once mcp-supervisor is installed).
    """
    args = _cli_args(
        kind,
        crash_after=crash_after,
        count_file=count_file,
        stderr_line=stderr_line,
        garbage=garbage,
        exit_code=exit_code,
    )
    return sys.executable, args


def stdio_server_parameters(
    kind: ServerKind,
    *,
    env: Mapping[str, str] | None = None,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    stderr_line: str | None = None,
    garbage: GarbageMode | None = None,
    exit_code: int | None = None,
) -> StdioServerParameters:
    """``stdio_params`` as the SDK's ``StdioServerParameters``, for ``mcp.Client``."""
    from mcp.client.stdio import StdioServerParameters

    command, args = stdio_params(
        kind,
        crash_after=crash_after,
        count_file=count_file,
        stderr_line=stderr_line,
        garbage=garbage,
        exit_code=exit_code,
    )
    return StdioServerParameters(command=command, args=args, env=dict(env) if env else None)


@attrs.frozen
class HttpFixture:
    """A fixture server running in a subprocess, as yielded by ``open_http_fixture``."""

    url: str
    """The endpoint: ``http://HOST:PORT/mcp`` (Streamable HTTP) or ``.../sse`` (SSE)."""
    process: trio.Process
    """The server process; it leads its own process group."""
    stderr_path: Path
    """File receiving the server's stderr (removed when the fixture exits)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_text(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL the server's process group now (idempotent)."""
        _killpg(self.process)


def _killpg(process: trio.Process) -> None:
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@asynccontextmanager
async def open_http_fixture(
    kind: ServerKind,
    transport: HttpTransport = "http",
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    start_timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    stderr_line: str | None = None,
    garbage: GarbageMode | None = None,
    exit_code: int | None = None,
) -> AsyncIterator[HttpFixture]:
    """Run fixture `kind` over HTTP in a subprocess; yield it once it is listening.

    The process gets this process's environment plus `env`, its own process group, and a
    temporary file for stderr (``HttpFixture.stderr_text()``). It is ready when it writes
    ``LISTENING <url>``, which HTTP fixtures write to stdout as well as stderr so that
    waiting for it needs no stderr reader. On exit the whole process group is killed
    (SIGKILL) and reaped, and the stderr file removed.

    Raises:
        FixtureStartError: The process exited before listening (the message has its exit
            code and stderr), or did not listen within `start_timeout` seconds.
    """
    argv = [
        sys.executable,
        *_cli_args(
            kind,
            transport=transport,
            host=host,
            port=port,
            crash_after=crash_after,
            count_file=count_file,
            stderr_line=stderr_line,
            garbage=garbage,
            exit_code=exit_code,
        ),
    ]
    fd, name = tempfile.mkstemp(prefix=f"mcp-fixture-{kind}-", suffix=".stderr")
    stderr_path = Path(name)
    try:
        try:
            process = await open_process(  # dies with this process, on Linux
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=fd,
                env={**os.environ, **(env or {})},
            )
        finally:
            os.close(fd)
        try:
            try:
                url = await _read_announcement(process, start_timeout)
            except trio.TooSlowError:
                raise FixtureStartError(
                    f"fixture {kind!r} ({transport}) did not listen within {start_timeout} s; "
                    "stderr:\n" + await _read_text(stderr_path)
                ) from None
            if url is None:
                with trio.move_on_after(start_timeout):
                    await process.wait()
                raise FixtureStartError(
                    f"fixture {kind!r} ({transport}) exited with code {process.returncode} "
                    "before listening; stderr:\n" + await _read_text(stderr_path)
                )
            yield HttpFixture(url=url, process=process, stderr_path=stderr_path)
        finally:
            _killpg(process)
            with trio.CancelScope(shield=True):
                await process.wait()
                if process.stdout is not None:
                    await process.stdout.aclose()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stderr_path)


async def _read_text(path: Path) -> str:
    return await trio.Path(path).read_text(encoding="utf-8", errors="replace")


async def _read_announcement(process: trio.Process, timeout: float) -> str | None:
    """Read the first stdout line: the URL if it is a ``LISTENING`` line, else None (also on EOF).

    Raises:
        trio.TooSlowError: No complete line within `timeout` seconds.
    """
    assert process.stdout is not None
    data = b""
    with trio.fail_after(timeout):
        while b"\n" not in data:
            chunk = await process.stdout.receive_some()
            if not chunk:
                return None
            data += chunk
    text = data.partition(b"\n")[0].decode("utf-8", "replace")
    if not text.startswith(LISTENING_PREFIX):
        return None
    return text.removeprefix(LISTENING_PREFIX).strip()


@asynccontextmanager
async def spawn_http(
    kind: ServerKind,
    transport: HttpTransport = "http",
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    start_timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
    crash_after: int | None = None,
    count_file: str | os.PathLike[str] | None = None,
    stderr_line: str | None = None,
    garbage: GarbageMode | None = None,
    exit_code: int | None = None,
) -> AsyncIterator[str]:
    """``open_http_fixture``, yielding just the URL: spawn, await ``LISTENING``, kill on exit."""
    async with open_http_fixture(
        kind,
        transport,
        host=host,
        port=port,
        start_timeout=start_timeout,
        env=env,
        crash_after=crash_after,
        count_file=count_file,
        stderr_line=stderr_line,
        garbage=garbage,
        exit_code=exit_code,
    ) as fixture:
        yield fixture.url
