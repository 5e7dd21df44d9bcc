"""A local server in a sandbox (``sandboxEnabled`` with VS Code's ``sandbox``): the config
read in every format, VS Code's own example accepted as is; with real bubblewrap and a
real server inside (:mod:`supervisor.testing.servers.contained`), what the kernel refuses
— a ``denyRead`` file, a write outside ``allowWrite``, a connection with no network
granted — and what the filtering proxy lets through and refuses; failing closed where no
sandbox can be made; and no process left behind."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from structlog.testing import capture_logs

from supervisor import open_supervisor
from supervisor.config import load_config
from supervisor.config._diff import compare
from supervisor.config._model import SandboxConfig
from supervisor.errors import ConfigError, ToolError
from supervisor.events._catalog import LocalSpawned
from supervisor.faults import CallHistory
from supervisor.testing.servers.contained import contained_server
from supervisor.transports import _sandbox
from supervisor.transports._proxy import FilteringProxy, domain_allowed, domain_matches

from .probes import running, until

BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(
    (BWRAP is None or not sys.platform.startswith("linux"))
    and os.environ.get("MCP_SUPERVISOR_REQUIRE_BWRAP") != "1",
    reason="needs Linux and bubblewrap (apt install bubblewrap); "
    "set MCP_SUPERVISOR_REQUIRE_BWRAP=1 to fail instead",
)
#: Generous: this machine may be busy.
TIMEOUT = 60

#: VS Code's example, from its MCP configuration reference ("Sandbox configuration").
VSCODE_EXAMPLE = """
{
    "servers": {
        "myServer": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@example/mcp-server"],
            "sandboxEnabled": true,
            "sandbox": {
                "filesystem": {
                    "allowWrite": ["${workspaceFolder}"],
                    "denyRead": ["${userHome}/.ssh"]
                },
                "network": {
                    "allowedDomains": ["api.example.com", "*.cdn.example.com"]
                }
            }
        }
    }
}
"""


# -- the config ----------------------------------------------------------------------------


def test_vscode_s_example_config_is_accepted_as_is(tmp_path: Path) -> None:
    """VS Code's own example loads unchanged, with its variables: ``${workspaceFolder}``
    is the folder holding ``.vscode``, ``${userHome}`` the home directory."""
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(VSCODE_EXAMPLE)
    server = load_config(path).servers["myServer"]
    assert server.valid, server.error
    assert server.sandbox == SandboxConfig(
        allow_write=(tmp_path,),
        deny_read=(Path.home() / ".ssh",),
        allowed_domains=("api.example.com", "*.cdn.example.com"),
    )


@pytest.mark.parametrize("section", ["mcpServers", "mcp", "servers"])
def test_the_sandbox_is_read_in_every_format(tmp_path: Path, section: str) -> None:
    """Claude Code's ``mcpServers``, OpenCode's ``mcp`` and VS Code's ``servers`` read
    the same fields; relative paths start at the config's directory; ``~`` is home."""
    entry = {
        "command": ["python3"] if section == "mcp" else "python3",
        "sandboxEnabled": True,
        "sandbox": {
            "filesystem": {"allowWrite": ["out", "~/cache"], "denyWrite": ["out/keep"]},
            "network": {"deniedDomains": ["evil.example.com"]},
        },
    }
    if section == "mcp":
        entry["type"] = "local"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({section: {"s": entry}}))
    sandbox = load_config(path).servers["s"].sandbox
    assert sandbox == SandboxConfig(
        allow_write=(tmp_path / "out", Path.home() / "cache"),
        deny_write=(tmp_path / "out" / "keep",),
        denied_domains=("evil.example.com",),
    )


def test_sandbox_applies_only_when_enabled_as_in_vs_code() -> None:
    """A ``sandbox`` object without ``sandboxEnabled: true`` is checked but not applied
    (VS Code's meaning); an empty sandbox is the strictest: nothing writable, no network."""
    sandbox = {"filesystem": {"allowWrite": ["/srv"]}}
    config = load_config(
        {
            "mcpServers": {
                "off": {"command": "python3", "sandbox": sandbox},
                "no": {"command": "python3", "sandboxEnabled": False, "sandbox": sandbox},
                "bare": {"command": "python3", "sandboxEnabled": True},
            }
        }
    )
    assert config.servers["off"].sandbox is None and config.servers["no"].sandbox is None
    assert config.servers["bare"].sandbox == SandboxConfig()


def test_sandbox_errors_name_their_field() -> None:
    """Each mistake is an error at its path: a remote server, an unknown key (with the
    likely one), a path that is not a string, a domain with a scheme or a wildcard
    elsewhere than in front."""
    with pytest.raises(ConfigError) as caught:
        load_config(
            {
                "mcpServers": {
                    "r": {"url": "https://example.com/mcp", "sandboxEnabled": True},
                    "s": {
                        "command": "python3",
                        "sandboxEnabled": "yes",
                        "sandbox": {
                            "filesystem": {"alowWrite": ["/a"], "denyRead": [3]},
                            "network": {"allowedDomains": ["https://api.example.com", "api.*.com"]},
                            "proxy": {},
                        },
                    },
                }
            }
        )
    found = {error.path: error.message for error in caught.value.errors}
    assert found["mcpServers.r.sandboxEnabled"].startswith("applies to local (stdio) servers")
    assert found["mcpServers.s.sandboxEnabled"] == "must be true or false, not a string"
    assert found["mcpServers.s.sandbox.filesystem.alowWrite"] == (
        'unknown field; did you mean "allowWrite"?'
    )
    assert found["mcpServers.s.sandbox.filesystem.denyRead[0]"] == (
        "must be a string, not a number"
    )
    for i in (0, 1):
        assert 'a leading "*."' in found[f"mcpServers.s.sandbox.network.allowedDomains[{i}]"]
    assert found["mcpServers.s.sandbox.proxy"].startswith("unknown field")


def test_a_sandbox_path_with_a_variable_not_set_makes_its_server_invalid() -> None:
    """A path's ``${VAR}`` is expanded like any template: one not set is the server's
    error, at the path's own field, and the server is not started."""
    config = load_config(
        {
            "mcpServers": {
                "s": {
                    "command": "python3",
                    "sandboxEnabled": True,
                    "sandbox": {"filesystem": {"allowWrite": ["${SANDBOX_TEST_UNSET}/out"]}},
                }
            }
        },
        environ={},
    )
    (error,) = config.servers["s"].errors
    assert error.path == "mcpServers.s.sandbox.filesystem.allowWrite[0]"
    assert error.message == "environment variable SANDBOX_TEST_UNSET is not set"


def test_a_changed_sandbox_replaces_its_server() -> None:
    """The sandbox is set when the process starts: changing it replaces the server."""
    entry: dict[str, object] = {"command": "python3", "sandboxEnabled": True}
    old = load_config({"mcpServers": {"s": entry}})
    new = load_config(
        {"mcpServers": {"s": {**entry, "sandbox": {"network": {"allowedDomains": ["a.io"]}}}}}
    )
    assert compare(old, new).replaced == {"s": ("sandbox",)}


# -- the proxy, alone ----------------------------------------------------------------------


def test_domains_match_exactly_or_by_a_leading_wildcard_and_deny_wins() -> None:
    """``*.example.com`` is its subdomains at any depth, not ``example.com``; names match
    ignoring case and a final dot; a denied match wins over an allowed one."""
    assert domain_matches("api.example.com", "*.example.com")
    assert domain_matches("a.b.Example.COM.", "*.example.com")
    assert not domain_matches("example.com", "*.example.com")
    assert not domain_matches("badexample.com", "*.example.com")
    assert domain_matches("API.example.com", "api.example.com")
    assert not domain_matches("api.example.com.evil.io", "api.example.com")
    assert domain_allowed("api.example.com", ["*.example.com"], [])
    assert not domain_allowed("ads.example.com", ["*.example.com"], ["ads.example.com"])
    assert not domain_allowed("x.ads.example.com", ["*.example.com"], ["*.ads.example.com"])
    assert not domain_allowed("example.org", ["*.example.com"], [])


class _Counting(http.server.BaseHTTPRequestHandler):
    """Answers every GET ``200 hello <path>``, counting them (on its server)."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def web() -> Iterator[http.server.ThreadingHTTPServer]:
    """A real HTTP server on 127.0.0.1 that counts the requests it gets (``requests``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def _ask(path: str, request: bytes) -> bytes:
    """Send ``request`` to the proxy's socket at ``path``; what it answers, to its end."""
    stream = await trio.open_unix_socket(path)
    async with stream:
        await stream.send_all(request)
        answer = b""
        while chunk := await stream.receive_some(65536):
            answer += chunk
            if request.startswith(b"CONNECT") and answer.endswith(b"hello /tunnel"):
                break
    return answer


async def test_the_proxy_tunnels_and_forwards_allowed_hosts_and_refuses_the_rest(
    tmp_path: Path, web: http.server.ThreadingHTTPServer
) -> None:
    """Through a real proxy on a Unix socket: a CONNECT to an allowed name (mapped to
    the web server) tunnels; a plain request to one is forwarded in origin form; a
    denied name, a name allowed only by a wildcard that leads to loopback, and a request
    that is not a proxy's are refused with their status — and only the two allowed ones
    reach the web server."""
    port = web.server_address[1]
    hosts = {"api.example.test": "127.0.0.1", "x.cdn.example.test": "127.0.0.1"}
    proxy = FilteringProxy(
        "s",
        ["api.example.test", "*.cdn.example.test", "ads.example.test"],
        ["ads.example.test"],
        hosts=hosts,
    )
    path = str(tmp_path / "proxy.sock")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(path)
    listening.listen()
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(listening))
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(proxy.serve, listener)
            await _through_the_proxy(path, port)
            nursery.cancel_scope.cancel()
    assert web.requests == ["/tunnel", "/plain?q=1"]  # type: ignore[attr-defined]
    assert (proxy.passed, proxy.refused) == (2, 3)
    refusals = [e for e in logs if e["event"] == "sandbox proxy refused a request"]
    assert [(e["host"], e["status"]) for e in refusals] == [
        ("ads.example.test", 403),
        ("x.cdn.example.test", 403),
        (None, 400),
    ]
    assert all(e["server"] == "s" and e["log_level"] == "warning" for e in refusals)


async def _through_the_proxy(path: str, port: int) -> None:
    """The requests of the test above, each answered as it says."""
    tunnel = await _ask(
        path,
        f"CONNECT api.example.test:{port} HTTP/1.1\r\n\r\n".encode()
        + b"GET /tunnel HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
    plain = await _ask(
        path,
        f"GET http://api.example.test:{port}/plain?q=1 HTTP/1.1\r\n".encode()
        + b"Host: api.example.test\r\nProxy-Authorization: Basic eA==\r\n\r\n",
    )
    assert plain.startswith(b"HTTP/1.0 200") and plain.endswith(b"hello /plain?q=1")
    denied = await _ask(path, f"CONNECT ads.example.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert denied.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"ads.example.test" in denied and b"deniedDomains" in denied
    wildcard = await _ask(path, f"CONNECT x.cdn.example.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert wildcard.startswith(b"HTTP/1.1 403") and b"127.0.0.1" in wildcard
    origin = await _ask(path, b"GET /direct HTTP/1.1\r\nHost: x\r\n\r\n")
    assert origin.startswith(b"HTTP/1.1 400")


async def test_the_proxy_is_bounded(tmp_path: Path, web: http.server.ThreadingHTTPServer) -> None:
    """Past its connections at once a request is refused with 503, and a request head
    larger than its bound with 400: neither reaches the web server."""
    port = web.server_address[1]
    proxy = FilteringProxy("s", ["localhost"], max_connections=1)
    path = str(tmp_path / "proxy.sock")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(path)
    listening.listen()
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(listening))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(proxy.serve, listener)
        held = await trio.open_unix_socket(path)
        async with held:
            await held.send_all(f"CONNECT localhost:{port} HTTP/1.1\r\n\r\n".encode())
            assert (await held.receive_some(65536)).startswith(b"HTTP/1.1 200")
            busy = await _ask(path, f"CONNECT localhost:{port} HTTP/1.1\r\n\r\n".encode())
            assert busy.startswith(b"HTTP/1.1 503") and b"too many connections" in busy
        await until(lambda: proxy._slots.value == 1, TIMEOUT)
        huge = b"GET http://localhost/ HTTP/1.1\r\nX: " + b"x" * 20000 + b"\r\n\r\n"
        big = await _ask(path, huge)
        assert big.startswith(b"HTTP/1.1 400") and b"larger than 16384 bytes" in big, big
        nursery.cancel_scope.cancel()
    assert web.requests == []  # type: ignore[attr-defined]


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


_THROUGH_THE_FORWARDER = r"""
import os, socket, sys, threading
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["HTTPS_PROXY"])
assert os.environ["HTTP_PROXY"] == os.environ["https_proxy"] == os.environ["HTTPS_PROXY"]
links = [socket.create_connection((proxy.hostname, proxy.port)) for _ in range(8)]
sent = [bytes([n]) * (1 << 20) for n in range(8)]
def send(link, data):
    link.sendall(data)
    link.shutdown(socket.SHUT_WR)
for link, data in zip(links, sent):
    threading.Thread(target=send, args=(link, data)).start()
for link, data in zip(links, sent):
    got = bytearray()
    while chunk := link.recv(65536):
        got += chunk
    assert got == data, (len(got), len(data))
print("carried", len(links))
"""


def test_the_forwarder_carries_many_connections_both_ways(tmp_path: Path) -> None:
    """The forwarder the sandbox runs first (here outside one): it sets the proxy
    variables for the program it becomes, and carries connections made to its port to
    the Unix socket it was given — eight at once, a mebibyte each way, each ended when
    its sender is done (the half-close passed on) — in one thread."""
    path = str(tmp_path / "proxy.sock")
    echo = socketserver.ThreadingUnixStreamServer(path, _Echo)
    thread = threading.Thread(target=echo.serve_forever, daemon=True)
    thread.start()
    try:
        command = [sys.executable, "-S", "-I", _sandbox.FORWARDER, path, "--"]
        done = subprocess.run(
            [*command, sys.executable, "-c", _THROUGH_THE_FORWARDER],
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    finally:
        echo.shutdown()
        echo.server_close()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"carried 8\n", b"")


# -- a real server in a real sandbox -------------------------------------------------------


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory outside ``/tmp`` (the sandbox's ``/tmp`` is its own): ``secret.txt``,
    ``keys/id`` (hidden by the sandbox below), ``out/`` (writable there) with
    ``out/locked.txt`` (not)."""
    base = Path(tempfile.mkdtemp(prefix="mcp-sandbox-test-", dir="/var/tmp"))
    try:
        (base / "secret.txt").write_text("the secret")
        (base / "keys").mkdir()
        (base / "keys" / "id").write_text("a key")
        (base / "out").mkdir()
        (base / "out" / "locked.txt").write_text("locked")
        (base / "open.txt").write_text("readable")
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _sandboxed(place: Path, **network: list[str]) -> dict[str, object]:
    return contained_server(
        lazy=False,
        autoApprove=True,
        sandboxEnabled=True,
        sandbox={
            "filesystem": {
                "allowWrite": [str(place / "out")],
                "denyRead": [str(place / "secret.txt"), str(place / "keys")],
                "denyWrite": [str(place / "out" / "locked.txt"), str(place / "out" / "later")],
            },
            "network": network,
        },
    )


async def _error(sup: object, tool: str, arguments: dict[str, object]) -> str:
    with pytest.raises(ToolError) as caught:
        await sup.call(tool, arguments)  # type: ignore[attr-defined]
    return caught.value.text


@needs_bwrap
async def test_the_kernel_refuses_what_the_sandbox_does_not_allow(place: Path) -> None:
    """In the sandbox: a ``denyRead`` file and a file in a ``denyRead`` directory cannot
    be read (EACCES), a write outside ``allowWrite`` or to a ``denyWrite`` path inside it
    fails (EROFS), a write inside ``allowWrite`` lands, other files read as usual, and
    with no network granted a connection to a port listening on this machine's loopback
    is refused — while the same server unsandboxed does each of them."""
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    cfg = {"mcpServers": {"box": _sandboxed(place), "free": contained_server(autoApprove=True)}}
    try:
        async with open_supervisor(cfg) as sup:
            await sup.connect_all(TIMEOUT)
            for path in (place / "secret.txt", place / "keys" / "id"):
                said = await _error(sup, "box_read_file", {"path": str(path)})
                assert "[Errno 13] Permission denied" in said
            said = await _error(sup, "box_write_file", {"path": str(place / "x"), "text": "x"})
            assert "[Errno 30] Read-only file system" in said
            locked = str(place / "out" / "locked.txt")
            said = await _error(sup, "box_write_file", {"path": locked, "text": "x"})
            assert "[Errno 30] Read-only file system" in said
            wrote = await sup.call("box_write_file", {"path": str(place / "out/n"), "text": "hi"})
            assert wrote.text == "wrote 2 bytes"
            # A denyWrite path that did not exist at the start is not covered (documented).
            later = await sup.call("box_write_file", {"path": str(place / "out/later"), "text": ""})
            assert later.text == "wrote 0 bytes"
            assert (await sup.call("box_read_file", {"path": str(place / "open.txt")})).text == (
                "readable"
            )
            said = await _error(sup, "box_connect", {"host": "127.0.0.1", "port": port})
            assert "[Errno 111] Connection refused" in said
            # Its /tmp is its own; no capabilities, no new privileges; its processes only.
            probe = f"/tmp/mcp-sandbox-probe-{os.getpid()}"
            wrote = await sup.call("box_write_file", {"path": probe, "text": "x"})
            assert wrote.text == "wrote 1 bytes" and not await trio.Path(probe).exists()
            status = (await sup.call("box_read_file", {"path": "/proc/self/status"})).text
            assert "\nCapEff:\t0000000000000000\n" in status and "\nNoNewPrivs:\t1\n" in status
            first = await sup.call("box_read_file", {"path": "/proc/1/comm"})
            assert first.text == "bwrap\n"
            # The same calls, unsandboxed: it is the sandbox that refused.
            secret = await sup.call("free_read_file", {"path": str(place / "secret.txt")})
            assert secret.text == "the secret"
            assert (await sup.call("free_connect", {"host": "127.0.0.1", "port": port})).text == (
                "connected"
            )
    finally:
        listening.close()
    assert (place / "out" / "n").read_text() == "hi"
    assert not (place / "x").exists() and (place / "out" / "locked.txt").read_text() == "locked"


@needs_bwrap
async def test_allowed_domains_go_through_the_proxy_and_nothing_else_goes_out(
    place: Path, web: http.server.ThreadingHTTPServer
) -> None:
    """With ``allowedDomains``: ``localhost`` (allowed) is reached through the proxy;
    ``127.0.0.1`` (not allowed) is refused by it with 403 and never reaches the web
    server; a denied name wins over an allowed wildcard; and a direct connection, around
    the proxy, still finds no network."""
    port = web.server_address[1]
    cfg = {
        "mcpServers": {
            "box": _sandboxed(
                place, allowedDomains=["localhost", "*.localhost"], deniedDomains=["ads.localhost"]
            )
        }
    }
    async with open_supervisor(cfg) as sup:
        await sup.connect_all(TIMEOUT)
        got = await sup.call("box_fetch", {"url": f"http://localhost:{port}/allowed"})
        assert got.text == "HTTP 200: hello /allowed"
        for url in (f"http://127.0.0.1:{port}/ip", f"http://ads.localhost:{port}/ads"):
            refused = await sup.call("box_fetch", {"url": url})
            assert refused.text.startswith("HTTP 403: refused to ")
            assert "by the sandbox of MCP server 'box'" in refused.text
        said = await _error(sup, "box_connect", {"host": "127.0.0.1", "port": port})
        assert "[Errno 111] Connection refused" in said
    assert web.requests == ["/allowed"]  # type: ignore[attr-defined]


@pytest.fixture
def in_tmp() -> Iterator[Path]:
    """A server laid out under ``/tmp``, as a checkout there has it: ``venv/bin/python``
    (a link to a link in another directory of ``/tmp``, as a virtual environment made
    from another's Python has, to this Python), ``app/contained.py``, and ``work/`` to
    start in."""
    from supervisor.testing.servers.contained import PATH

    base = Path(tempfile.mkdtemp(prefix="mcp-sandbox-venv-", dir="/tmp"))
    other = Path(tempfile.mkdtemp(prefix="mcp-sandbox-base-", dir="/tmp"))
    try:
        (other / "bin").mkdir()
        (other / "bin" / "python").symlink_to(sys.executable)
        (base / "venv" / "bin").mkdir(parents=True)
        (base / "venv" / "bin" / "python").symlink_to(other / "bin" / "python")
        (base / "app").mkdir()
        shutil.copy(PATH, base / "app" / "contained.py")
        (base / "work").mkdir()
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


@needs_bwrap
async def test_a_server_run_from_tmp_runs_in_its_private_tmp(
    in_tmp: Path, place: Path, web: http.server.ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose program, script and working directory are under ``/tmp`` (a
    virtual environment there, as a checkout in ``/tmp`` has): the sandbox's ``/tmp`` is
    its own, yet what the server runs from is bound back into it, read-only; the rest of
    the machine's ``/tmp`` stays out of sight. With ``allowedDomains``, the forwarder
    runs too when this Python itself is under ``/tmp``."""
    other = Path(tempfile.mkdtemp(prefix="mcp-sandbox-other-", dir="/tmp"))
    (other / "seen.txt").write_text("not for the sandbox")
    monkeypatch.setattr(sys, "executable", str(in_tmp / "venv" / "bin" / "python"))
    entry = {
        "command": str(in_tmp / "venv" / "bin" / "python"),
        "args": ["-S", "-I", str(in_tmp / "app" / "contained.py")],
        "cwd": str(in_tmp / "work"),
        "lazy": False,
        "autoApprove": True,
        "sandboxEnabled": True,
    }
    network = {"network": {"allowedDomains": ["localhost"]}}
    cfg = {"mcpServers": {"box": entry, "net": {**entry, "sandbox": network}}}
    port = web.server_address[1]
    try:
        async with open_supervisor(cfg) as sup:
            await sup.connect_all(TIMEOUT)
            app = str(in_tmp / "app" / "contained.py")
            assert (await sup.call("box_read_file", {"path": app})).text.startswith('"""')
            said = await _error(sup, "box_write_file", {"path": app, "text": "x"})
            assert "[Errno 30] Read-only file system" in said
            said = await _error(sup, "box_read_file", {"path": str(other / "seen.txt")})
            assert "[Errno 2] No such file or directory" in said
            mine = f"/tmp/{in_tmp.name}-mine"
            wrote = await sup.call("box_write_file", {"path": mine, "text": "x"})
            assert wrote.text == "wrote 1 bytes" and not await trio.Path(mine).exists()
            got = await sup.call("net_fetch", {"url": f"http://localhost:{port}/from-tmp"})
            assert got.text == "HTTP 200: hello /from-tmp"
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert (in_tmp / "app" / "contained.py").read_text().startswith('"""')


@needs_bwrap
async def test_a_sandboxed_server_leaves_no_process_behind(place: Path) -> None:
    """Its family — bwrap, the sandbox's first process, the forwarder, the server — is
    found through the pid the supervisor started, and is gone once the supervisor ends."""
    history = CallHistory()
    cfg = {"mcpServers": {"box": _sandboxed(place, allowedDomains=["localhost"])}}
    async with open_supervisor(cfg, history=history) as sup:
        await sup.connect_all(TIMEOUT)
        record = sup.status()["box"]
        family = list(record.family)
        assert family[0] == record.pid and len(family) >= 4, family
        assert os.readlink(f"/proc/{record.pid}/exe").endswith("/bwrap")
    spawned = [e.pid for _, e in history.events if isinstance(e, LocalSpawned)]
    assert spawned == [family[0]]
    await until(lambda: not any(running(pid) for pid in family), TIMEOUT)


# -- failing closed ------------------------------------------------------------------------


def _no_bwrap_path(tmp_path: Path) -> str:
    """A ``PATH`` with what the tests need (this Python) and no ``bwrap``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    if (setpriv := shutil.which("setpriv")) is not None:  # as fast a spawn as elsewhere
        (bin_dir / "setpriv").symlink_to(setpriv)
    return str(bin_dir)


async def test_without_bubblewrap_a_sandboxed_server_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``bwrap`` on PATH: the server is failed at once — never spawned, not retried —
    with an error saying what is missing and how to install it; the others run."""
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    assert "apt install bubblewrap" in (_sandbox.sandbox_problem() or "")
    history = CallHistory()
    cfg = {
        "mcpServers": {
            "box": contained_server(lazy=False, autoApprove=True, sandboxEnabled=True),
            "free": contained_server(lazy=False, autoApprove=True),
        }
    }
    async with open_supervisor(cfg, history=history) as sup:
        await until(lambda: sup.status()["box"].status == "failed", TIMEOUT)
        record = sup.status()["box"]
        assert record.last_error is not None
        assert "asks for a sandbox (sandboxEnabled), which cannot be made here" in (
            record.last_error
        )
        assert "bubblewrap (bwrap) is not installed" in record.last_error
        assert "apt install bubblewrap" in record.last_error
        assert record.restarts == 0
        assert (await sup.call("free_echo", {"text": "hi"})).text == "hi"
    spawned = [e.server for _, e in history.events if isinstance(e, LocalSpawned)]
    assert spawned == ["free"]


def test_a_bwrap_that_cannot_make_a_sandbox_is_reported_with_the_likely_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``bwrap`` that fails (user namespaces refused, as on a kernel that disables
    them) is no sandbox: its own last line and what to look at are said."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    problem = _sandbox.sandbox_problem()
    assert problem is not None
    assert problem.startswith(
        f"bubblewrap ({fake}) cannot make a sandbox here: bwrap: setting up uid map: "
        "Permission denied; unprivileged user namespaces may be disabled"
    )


def test_check_reports_a_sandbox_that_cannot_be_made(tmp_path: Path) -> None:
    """``mcp-supervisor check`` says it before anything runs: exit 2, the field and what
    to install on stderr."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"box": contained_server(sandboxEnabled=True)}}))
    env = {**os.environ, "PATH": _no_bwrap_path(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "mcpServers.box.sandboxEnabled" in done.stderr
    assert "apt install bubblewrap" in done.stderr


def _private_dirs() -> set[Path]:
    """The private directories sandboxes made (``SandboxLaunch``), here."""
    return set(Path(tempfile.gettempdir()).glob("mcp-sandbox-*"))


def _remove(directories: set[Path]) -> None:
    for directory in directories:
        for stand_in in ("hidden-dir", "hidden-file"):  # mode 000
            with contextlib.suppress(OSError):
                (directory / stand_in).chmod(0o700)
        shutil.rmtree(directory, ignore_errors=True)


@needs_bwrap
async def test_what_a_killed_supervisor_left_in_tmp_is_removed_by_the_next(place: Path) -> None:
    """A private directory whose supervisor no longer runs (killed: it could not remove
    it, its ``denyRead`` stand-in mode 000 inside) is removed when the next supervisor of
    this user makes a sandbox; one whose process still runs is left alone."""
    print_pid = [sys.executable, "-c", "import os; print(os.getpid())"]
    gone = await trio.run_process(print_pid, capture_stdout=True)
    base = tempfile.gettempdir()
    left = Path(tempfile.mkdtemp(prefix=f"mcp-sandbox-{int(gone.stdout)}-", dir=base))
    os.close(os.open(left / "hidden-file", os.O_CREAT | os.O_WRONLY, 0))
    alive = await trio.lowlevel.open_process([sys.executable, "-c", "import time; time.sleep(600)"])
    kept = Path(tempfile.mkdtemp(prefix=f"mcp-sandbox-{alive.pid}-", dir=base))
    _sandbox._sweep_once.cache_clear()
    try:
        async with open_supervisor({"mcpServers": {"box": _sandboxed(place)}}) as sup:
            await sup.connect_all(TIMEOUT)
            assert not await trio.Path(left).exists() and await trio.Path(kept).exists()
    finally:
        alive.kill()
        await alive.wait()
        _remove({left, kept})


#: A program holding a supervisor with the sandboxed server ``box`` (its config the file
#: named first): once connected it writes the server's family on stderr, and waits.
HOLDER = """
import json, sys, trio
from supervisor import open_supervisor

async def main():
    async with open_supervisor(sys.argv[1]) as sup:
        await sup.connect_all(60)
        print("family " + json.dumps(list(sup.status()["box"].family)), file=sys.stderr, flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


@needs_bwrap
async def test_a_sandboxed_server_dies_with_a_killed_supervisor(
    tmp_path: Path, place: Path
) -> None:
    """kill -9 of a program using open_supervisor: the sandboxed server's whole family
    (bwrap, the sandbox's first process, the server, the proxy's forwarder) is gone too."""
    config = tmp_path / "mcp.json"
    entry = _sandboxed(place, allowedDomains=["localhost"])
    config.write_text(json.dumps({"mcpServers": {"box": entry}}))
    program = tmp_path / "holder.py"
    program.write_text(HOLDER)
    process = await trio.lowlevel.open_process(
        [sys.executable, str(program), str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    family: list[int] = []
    private = _private_dirs()
    try:
        assert process.stderr is not None
        seen = b""
        with trio.fail_after(TIMEOUT):
            while b"\n" not in seen.partition(b"family ")[2]:
                chunk = await process.stderr.receive_some(65536)
                assert chunk, seen.decode(errors="replace")
                seen += chunk
        family = json.loads(seen.partition(b"family ")[2].partition(b"\n")[0])
        assert len(family) >= 4 and all(running(pid) for pid in family), family
        process.kill()
        await process.wait()
        await until(lambda: not any(running(pid) for pid in family), TIMEOUT)
    finally:
        process.kill()
        for pid in family:
            if running(pid):
                os.kill(pid, 9)
        _remove(_private_dirs() - private)  # what the killed supervisor could not remove
