"""A PostgreSQL server of the test's own: Debian's binaries, a new cluster in a temporary
directory, listening on 127.0.0.1 on a free port, stopped (and its files removed) at the
end. As root the cluster runs as the ``postgres`` user (PostgreSQL refuses root).

Without PostgreSQL installed the tests that need it are skipped, unless
``$MCP_SUPERVISOR_REQUIRE_POSTGRES`` is ``1`` (CI): then they fail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _bin() -> Path | None:
    """The directory of Debian's PostgreSQL binaries (the newest version installed)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


BIN = _bin()
needs_postgres = pytest.mark.skipif(
    BIN is None and os.environ.get("MCP_SUPERVISOR_REQUIRE_POSTGRES") != "1",
    reason="needs PostgreSQL (apt-get install postgresql); "
    "set MCP_SUPERVISOR_REQUIRE_POSTGRES=1 to fail instead",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running PostgreSQL server: its URL (user ``postgres``, no password: trust on
    loopback, a cluster nobody else can reach while it runs)."""
    assert BIN is not None, "PostgreSQL is not installed (apt-get install postgresql)"
    root = Path(tempfile.mkdtemp(prefix="mcps-pg-"))
    data = root / "data"
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        as_postgres = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()

    def run(*command: str) -> None:
        subprocess.run(
            [*as_postgres, *command], check=True, capture_output=True, timeout=120, cwd=root
        )

    try:
        run(str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(str(BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
            "start")  # fmt: skip
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            run(str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
