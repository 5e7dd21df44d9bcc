"""``mcp-supervisor auth login|logout|status`` as real processes against a real
OAuth-protected server on 127.0.0.1; the browser is ``$BROWSER``, a script that follows
the redirect (tests/oauth_browser.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import trio

from supervisor.testing.servers import open_oauth_server

from . import oauth_browser
from .test_auth import rows

SCOPES = ["read", "write", "offline_access"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(tmp_path: Path, url: str, *more: tuple[str, str]) -> str:
    path = tmp_path / "mcp.json"
    port = free_port()
    servers = {
        name: {"type": "http", "url": where, "auth": {"callbackPort": port}}
        for name, where in (("remote", url), *more)
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MCP_SUPERVISOR_NO_BROWSER", None)
    env |= {
        "MCP_SUPERVISOR_AUTH_DIR": str(tmp_path / "auth"),
        "BROWSER": oauth_browser.command(),
        oauth_browser.LOG_ENV: str(tmp_path / "browser.log"),
        **extra,
    }
    return env


async def cli(env: dict[str, str], *args: str) -> Any:
    return await trio.run_process(
        [sys.executable, "-m", "supervisor", *args],
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=b"",
    )


async def start_login(env: dict[str, str], config: str) -> Any:
    """``auth login remote`` as a process with pipes for its standard streams."""
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor", "auth", "login", "remote", "--config", config],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def opened(tmp_path: Path) -> int:
    log = tmp_path / "browser.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_login_status_logout(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx, open_oauth_server() as fx2:
        config = write_config(tmp_path, fx.url, ("second", fx2.url))
        env = environment(tmp_path)
        # Before: the one-shot status says how to log in; nothing is stored.
        before = await cli(env, "status", "--config", config)
        assert before.returncode == 1
        assert "🔑 needs login: mcp-supervisor auth login remote" in before.stdout.decode()
        # Without a name: every OAuth server, through the one callback listener.
        done = await cli(env, "auth", "login", "--config", config)
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 0, err
        assert err.count("Open this URL to authorize: http://127.0.0.1") == 2
        assert "remote: logged in (account default)" in out
        assert "second: logged in (account default)" in out
        assert f"issuer   {fx.issuer}" in out and "tools    3: ask_name, echo, whoami" in out
        assert opened(tmp_path) == 2
        # Stored: 0700 directory, 0600 files; status shows it without the token.
        auth_dir = tmp_path / "auth"
        assert stat.S_IMODE(auth_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE((auth_dir / "tokens.db").stat().st_mode) == 0o600
        tokens = {row["server"]: row["token"]["access_token"] for row in rows(auth_dir).values()}
        status = await cli(env, "auth", "status", "remote", "--config", config, "--json")
        assert status.returncode == 0, status.stderr
        (doc,) = json.loads(status.stdout)
        assert doc["logged_in"] and doc["issuer"] == fx.issuer and doc["refreshable"]
        assert "read" in doc["scopes"] and doc["expires_at"] > 0
        assert tokens["remote"] not in status.stdout.decode()
        # The other commands use the stored tokens: no browser.
        tools = await cli(env, "tools", "--config", config)
        assert tools.returncode == 0, tools.stderr
        assert "remote_whoami" in tools.stdout.decode() and "second_echo" in tools.stdout.decode()
        assert all(t not in tools.stdout.decode() + tools.stderr.decode() for t in tokens.values())
        assert opened(tmp_path) == 2
        out = await cli(env, "auth", "logout", "remote", "--config", config)
        assert out.returncode == 0 and "remote: logged out" in out.stdout.decode()
        assert "a supervisor already running keeps its connection" in out.stderr.decode()
        assert len(rows(auth_dir, "clients")) == 2  # registrations are kept
        out = await cli(env, "auth", "logout", "second", "--forget-client", "--config", config)
        assert out.returncode == 0, out.stderr
        assert "second: its client registration forgotten" in out.stdout.decode()
        assert len(rows(auth_dir, "clients")) == 1
        after = await cli(env, "auth", "status", "--config", config)
        assert after.returncode == 1
        assert "remote: not logged in" in after.stdout.decode()
        assert "second: not logged in" in after.stdout.decode()


async def test_logout_of_a_server_never_logged_in_says_nothing_was_stored(
    tmp_path: Path,
) -> None:
    """``auth logout X`` with no tokens stored for X: it says so, exits 0, and says
    nothing of a running supervisor's connection (there is no token it could hold)."""
    config = write_config(tmp_path, f"http://127.0.0.1:{free_port()}/mcp")
    out = await cli(environment(tmp_path), "auth", "logout", "remote", "--config", config)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode() == "remote: nothing to log out: no tokens were stored for it\n"
    assert out.stderr.decode() == ""


async def test_headless_login_takes_the_pasted_url(tmp_path: Path) -> None:
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        config = write_config(tmp_path, fx.url)
        env = environment(tmp_path, MCP_SUPERVISOR_NO_BROWSER="1")
        process = await start_login(env, config)
        try:
            with trio.fail_after(30):
                url = await _authorize_url(process.stderr)
                async with httpx2.AsyncClient() as http:
                    answer = await http.get(url)  # the user's browser, elsewhere
                redirected = answer.headers["location"]
                await process.stdin.send_all(redirected.encode() + b"\n")
                code = await process.wait()
            out = await process.stdout.receive_some(65536)
            assert code == 0
            assert b"remote: logged in" in out
            assert opened(tmp_path) == 0  # no browser was run
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _authorize_url(stderr: Any) -> str:
    buffer = b""
    marker = b"Open this URL to authorize: "
    while b"\n" not in buffer.partition(marker)[2]:
        chunk = await stderr.receive_some(4096)
        assert chunk, buffer
        buffer += chunk
    return buffer.partition(marker)[2].split(b"\n", 1)[0].decode().strip()


async def test_sigterm_during_a_login_stops_it_and_leaves_the_browser(tmp_path: Path) -> None:
    """A login waiting for the browser stops on SIGTERM (143) at once; the browser it
    opened is the user's and stays open (as Python's webbrowser leaves it)."""
    async with open_oauth_server(scopes_supported=SCOPES) as fx:
        config = write_config(tmp_path, fx.url)
        fifo = tmp_path / "browser.fifo"
        os.mkfifo(fifo)
        browser = tmp_path / "browser.sh"
        browser.write_text(f"#!/bin/sh\necho $$ > {fifo}\nexec sleep 60\n")
        browser.chmod(0o755)
        env = environment(tmp_path, BROWSER=f"{browser} %s")
        # Read end first, and a writer of our own so that it never reads as ended.
        reader = trio.lowlevel.FdStream(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        keep_open = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        process = await start_login(env, config)
        try:
            with trio.fail_after(30):
                pid = int(await reader.receive_some(64))  # the browser is running
                process.send_signal(signal.SIGTERM)
                code = await process.wait()
            assert code == 143
            assert not _gone(pid)  # the user's browser window stays
            os.kill(pid, signal.SIGKILL)
        finally:
            os.close(keep_open)
            await reader.aclose()
            if process.returncode is None:
                process.kill()
                await process.wait()


def _gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            return stat_file.read().split()[2] == "Z"
    except OSError:
        return True


async def test_a_password_in_the_token_stores_url_is_refused_and_never_printed(
    tmp_path: Path,
) -> None:
    """``auth status --json`` with a PostgreSQL token store whose URL's query holds a
    password (``password=``, or the client key's ``sslpassword=``): a config error (exit
    2) saying where the password goes instead, quoting nothing of it."""
    env = environment(tmp_path, STORE_KEY="k" * 40)
    for parameter, instead in (("password", "$PGPASSWORD"), ("sslpassword", "pg_service.conf")):
        url = f"postgresql://mcp@127.0.0.1:9/mcp?sslmode=disable&{parameter}=hunter2-secret"
        config = tmp_path / "mcp.json"
        store = {"url": url, "keyEnv": "STORE_KEY"}
        config.write_text(json.dumps({"mcpServers": {}, "supervisor": {"tokenStore": store}}))
        done = await cli(env, "auth", "status", "--config", str(config), "--json")
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 2, (out, err)
        assert f"supervisor.tokenStore.url: has a password in it ({parameter}=" in err
        assert instead in err and out == ""
        assert "hunter2" not in out + err
