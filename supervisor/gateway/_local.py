"""Finding and talking to a running gateway: what lets ``mcp-supervisor call`` cost a round
trip instead of a start-up.

Every ``serve`` also listens on a Unix socket of its own, named after its config file's
real path, in a private directory (``$XDG_RUNTIME_DIR/mcp-supervisor``, else
``$MCP_SUPERVISOR_STATE_DIR/run``, else ``~/.mcp-supervisor/run``; 0700, the socket 0600:
only its user can connect, which is the socket's authentication). ``status``, ``tools``,
``call``, ``events``, ``resources``, ``read``, ``prompts`` and ``prompt`` look for the
socket of the config they were given and, when a gateway answers there, ask it;
``--connect URL`` names a gateway over HTTP instead (with its token from
``$MCP_SUPERVISOR_GATEWAY_TOKEN``). ``reload`` (and ``add`` and ``remove``) ask the
gateway on that socket to apply its config file now (``POST /reload``, a route only the
socket serves).

This module is the standard library only (and the error tree's root, from
``supervisor.actors``' errors module, the standard library only too), so that a command
using a running gateway loads neither the MCP SDK nor trio: the client speaks the
stateless 2026-07-28 protocol (one POST per request, HTTP/1.1 written by hand over the
Unix socket or TCP; ``ssl`` for ``https``, ``http.client`` only for the event stream) and
the gateway's own routes. It tells a request that could not be sent
(:class:`GatewayUnreachable`) from one sent without an answer (:class:`GatewayNoAnswer`),
and never sends one twice.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import select
import signal
import socket
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..actors._errors import SupervisorError

__all__ = [
    "GatewayClient",
    "GatewayError",
    "GatewayNoAnswer",
    "GatewayRefused",
    "GatewayRequestError",
    "GatewayUnreachable",
    "PROTOCOL_VERSION",
    "bind_local",
    "local_socket",
    "runtime_dir",
    "signals_wake",
]

#: The protocol version the client speaks (stateless: no handshake, no session).
PROTOCOL_VERSION = "2026-07-28"
#: Seconds a client waits to connect to a local gateway before going on without it.
CONNECT_TIMEOUT = 2.0
#: Seconds a client waits to connect to a gateway named by its URL.
TCP_CONNECT_TIMEOUT = 10.0
_CLIENT_INFO = {"name": "mcp-supervisor-cli", "version": "1"}


#: The key of a call's approval among a gateway's ``input_required`` input requests.
APPROVAL_KEY = "mcp-supervisor/approval"
#: The methods whose request names what it is about in an ``Mcp-Name`` header, and the
#: parameter it repeats (the 2026-07-28 protocol's; the SDK's ``NAME_BEARING_METHODS``).
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class GatewayError(SupervisorError):
    """The gateway could not be asked (gone, refused, or its answer made no sense)."""


def runtime_dir() -> Path:
    """Where the gateways' sockets are: the user's runtime directory when there is one."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "mcp-supervisor"
    state = os.environ.get("MCP_SUPERVISOR_STATE_DIR")
    return (Path(state) if state else Path.home() / ".mcp-supervisor") / "run"


def local_socket(config_path: str | os.PathLike[str]) -> Path:
    """The socket of the gateway serving the config file at ``config_path``."""
    real = os.path.realpath(config_path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return runtime_dir() / f"gateway-{digest}.sock"


def bind_local(path: Path) -> socket.socket | None:
    """A listening Unix socket at ``path`` (0600, in a 0700 directory), or ``None`` when
    another gateway is already listening there. A socket file nobody listens on (left by
    a gateway that was killed) is replaced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if path.exists():
        if _answers(path):
            return None
        path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        umask = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(umask)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    return sock


def _answers(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(CONNECT_TIMEOUT)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _unix_connection(path: str, timeout: float | None) -> Any:
    """An ``http.client`` connection over the Unix socket at ``path`` (for streams)."""
    import http.client

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = _connect_unix(path, timeout)

    return UnixConnection("localhost", timeout=timeout)


def _connect_unix(path: str, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(min(timeout or CONNECT_TIMEOUT, CONNECT_TIMEOUT))
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    sock.settimeout(timeout)
    return sock


#: The read end of the socket the signal module writes a byte to when a signal comes in,
#: while a command waits for a gateway's answer (:func:`signals_wake`); else ``None``.
_wake: socket.socket | None = None


@contextmanager
def signals_wake() -> Iterator[None]:
    """While the block runs, a signal that comes in ends the wait for an answer wherever
    it lands. A signal is handled in Python only when the main thread runs Python again;
    one that lands just before a blocking ``recv`` (or in another thread) would otherwise
    leave the command waiting for an answer that may never come, its handler unrun. With
    ``signal.set_wakeup_fd`` each signal also writes a byte that wakes the wait, which
    then runs the handler. Main thread only (as :func:`signal.signal`)."""
    global _wake
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    before = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _wake = reader
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
        _wake = None
        reader.close()
        writer.close()


class _Deadline:
    """What is left of ``timeout`` seconds from now (``None``: no limit), for each of a
    socket's operations in turn: one bound for a whole exchange, however it is cut up."""

    def __init__(self, timeout: float | None) -> None:
        import time

        self._clock = time.monotonic
        self.timeout = timeout
        self._end = None if timeout is None else self._clock() + timeout

    def apply(self, sock: socket.socket) -> None:
        if self._end is None:
            sock.settimeout(None)
            return
        left = self._end - self._clock()
        if left <= 0:
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        sock.settimeout(left)

    def wait_readable(self, sock: socket.socket) -> None:
        """Return once ``sock`` has something to read (or ``TimeoutError`` once the
        time is up), handling each signal that comes in meanwhile (:func:`signals_wake`):
        its handler may end the wait by raising."""
        self.apply(sock)
        if _wake is None:
            return  # ``recv`` waits, within the socket's timeout
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        poll.register(_wake, select.POLLIN)
        while True:
            timeout = sock.gettimeout()
            ready = {fd for fd, _ in poll.poll(None if timeout is None else timeout * 1000)}
            if sock.fileno() in ready:
                return
            if not ready:
                raise TimeoutError(f"no answer within {self.timeout:g} s")
            try:  # a signal came in: its handler has run by now, and did not end the wait
                while _wake.recv(4096):
                    pass
            except BlockingIOError:
                pass
            self.apply(sock)


def _exchange_on(
    sock: socket.socket, request: bytes, deadline: _Deadline
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 exchange on the connected ``sock``: the status, the headers
    (lower-case names) and the body, all within ``deadline``. Written by hand rather than
    with ``http.client``, whose import (the ``email`` package) would be most of a warm
    ``call``'s own cost."""
    deadline.apply(sock)
    sock.sendall(request)
    data = bytearray()
    while (end := data.find(b"\r\n\r\n")) < 0:
        deadline.wait_readable(sock)
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the connection closed before the answer came")
        data += chunk
    head, body = bytes(data[:end]).decode("latin-1"), bytearray(data[end + 4 :])
    status_line, *lines = head.split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise OSError(f"not an HTTP answer: {status_line[:80]!r}")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    chunked = headers.get("transfer-encoding", "").lower() == "chunked"
    length = None if chunked else headers.get("content-length")
    while not _complete(body, chunked, length):
        deadline.wait_readable(sock)
        chunk = sock.recv(65536)
        if not chunk:
            if chunked or length is not None:  # cut short: not the whole answer
                raise ConnectionError("the connection closed in the middle of the answer")
            break  # an answer that ends where the connection does
        body += chunk
    if chunked:
        body = _unchunked(bytes(body))
    elif length is not None:
        body = body[: int(length)]
    return int(parts[1]), headers, bytes(body)


def _complete(body: bytearray, chunked: bool, length: str | None) -> bool:
    """Whether ``body`` is all of the answer (else read on, until the server closes)."""
    if chunked:  # the last chunk: a zero size line, then an empty one
        return bytes(body) == b"0\r\n\r\n" or body.endswith(b"\r\n0\r\n\r\n")
    return length is not None and len(body) >= int(length)


def _unchunked(data: bytes) -> bytearray:
    out = bytearray()
    at = 0
    while True:
        end = data.index(b"\r\n", at)
        size = int(data[at:end].split(b";", 1)[0], 16)
        if size == 0:
            return out
        out += data[end + 2 : end + 2 + size]
        at = end + 2 + size + 2


class GatewayClient:
    """A running gateway, asked over its Unix socket (``socket_path``) or over HTTP
    (``url`` and ``token``). Each request is one stateless exchange on a connection of
    its own.

    ``timeout`` bounds each exchange once connected: sending the request and reading the
    whole answer (``None``: no bound). A request that cannot be sent because the gateway
    cannot be reached raises :class:`GatewayUnreachable` (nothing was sent); once the
    connection is made, a missing or broken answer raises :class:`GatewayNoAnswer` (the
    request may have been acted on). Nothing is ever sent twice.
    """

    def __init__(
        self,
        *,
        socket_path: str | os.PathLike[str] | None = None,
        url: str | None = None,
        token: str | None = None,
        timeout: float | None = None,
    ) -> None:
        if (socket_path is None) == (url is None):
            raise ValueError("give a socket path or a URL")
        self.socket_path = None if socket_path is None else os.fspath(socket_path)
        self.url = url
        self.token = token
        self.timeout = timeout
        self._ids = iter(range(1, 1 << 62))
        self.where = self.socket_path if url is None else url

    @classmethod
    def find(cls, config_path: str, *, timeout: float | None = None) -> GatewayClient | None:
        """The gateway serving ``config_path`` on this machine, if one is listening."""
        path = local_socket(config_path)
        try:
            mode = path.stat().st_mode
        except OSError:
            return None
        if not stat.S_ISSOCK(mode) or not _answers(path):
            return None
        return cls(socket_path=path, timeout=timeout)

    def _connection(self) -> Any:
        """An ``http.client`` connection to the gateway (for :meth:`stream`)."""
        import http.client

        if self.socket_path is not None:
            return _unix_connection(self.socket_path, self.timeout)
        assert self.url is not None
        parts = urlsplit(self.url)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.netloc, timeout=self.timeout)
        return http.client.HTTPConnection(parts.netloc, timeout=self.timeout)

    def _connect(self) -> socket.socket:
        """A connected socket to the gateway; :class:`GatewayUnreachable` when there is
        none to be had (nothing has been sent then)."""
        try:
            if self.socket_path is not None:
                return _connect_unix(self.socket_path, self.timeout)
            assert self.url is not None
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http:// or https:// URL: {self.url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            sock = socket.create_connection((parts.hostname, port), timeout=TCP_CONNECT_TIMEOUT)
            if parts.scheme == "https":
                import ssl

                with _closing_on_error(sock):
                    context = ssl.create_default_context()
                    sock = context.wrap_socket(sock, server_hostname=parts.hostname)
            return sock
        except (OSError, ValueError) as exc:
            raise GatewayUnreachable(f"cannot reach the gateway at {self.where}: {exc}") from exc

    def _path(self, route: str) -> str:
        if self.url is None:
            return route
        base = urlsplit(self.url).path
        return base if route == "/mcp" else base.rsplit("/", 1)[0] + route

    def _headers(self) -> dict[str, str]:
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send one MCP request (with ``meta`` in its ``_meta``, beside the protocol's
        own keys, and ``capabilities`` as the client's): its result, or
        :class:`GatewayRequestError` for an error answer; :class:`GatewayUnreachable`
        when it could not be sent, :class:`GatewayNoAnswer` when it was sent and no
        answer came."""
        request_id = next(self._ids)
        body = dict(params or {})
        body["_meta"] = {
            **(meta or {}),
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientInfo": _CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        }
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}
        headers = {
            **self._headers(),
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
        }
        named = _NAME_BEARING.get(method)
        if named is not None and isinstance(body.get(named), str):
            headers["Mcp-Name"] = _header_value(body[named])
        status, content_type, data = self._exchange(
            "POST", self._path("/mcp"), json.dumps(message).encode(), headers
        )
        try:
            answers = list(_messages(content_type, data))
        except ValueError:
            answers = []
        if status != 200 and not any(a.get("id") == request_id for a in answers):
            said = f"the gateway at {self.where} answered HTTP {status}: {_said(data)}"
            # A refusal (a wrong token, a session it does not know) came before the
            # request was acted on; a server error may have come after.
            raise (GatewayRefused if 400 <= status < 500 else GatewayNoAnswer)(said)
        for answer in answers:  # an error answer may come with a 4xx status
            if answer.get("id") != request_id:
                continue  # a notification about the request (progress, say)
            if "error" in answer:
                error = answer["error"]
                raise GatewayRequestError(
                    error.get("code", 0), error.get("message", ""), error.get("data")
                )
            return answer.get("result", {})
        raise GatewayNoAnswer(f"the gateway at {self.where} sent no answer to {method}")

    def get(self, route: str) -> Any:
        """``GET`` one of the gateway's own JSON routes (``/status``, ``/healthz``)."""
        status, _, data = self._exchange("GET", self._path(route), None, self._headers())
        if status != 200:
            said = f"the gateway at {self.where} answered HTTP {status}: {_said(data)}"
            raise GatewayRefused(said) if 400 <= status < 500 else GatewayNoAnswer(said)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise GatewayNoAnswer(f"the gateway at {self.where} sent no JSON: {exc}") from exc

    def post(self, route: str, document: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """``POST`` ``document`` (as JSON) to one of the gateway's own routes
        (``/reload``): the answer's HTTP status and its JSON, whatever the status (a
        refusal says why in it). :class:`GatewayUnreachable` when it could not be sent,
        :class:`GatewayNoAnswer` when no whole JSON answer came."""
        headers = {**self._headers(), "Content-Type": "application/json"}
        body = json.dumps(dict(document or {})).encode()
        status, _, data = self._exchange("POST", self._path(route), body, headers)
        try:
            return status, json.loads(data)
        except ValueError as exc:
            said = f"the gateway at {self.where} answered HTTP {status} without JSON"
            raise GatewayNoAnswer(f"{said}: {exc}") from exc

    def stream(self, route: str, *, duration: float | None = None) -> Iterator[bytes]:
        """``GET`` a route that streams lines (``/events``), line by line, for
        ``duration`` seconds (``None``: until the gateway ends it)."""
        import http.client
        import time

        deadline = None if duration is None else time.monotonic() + duration
        connection = self._connection()
        try:
            connection.request("GET", self._path(route), headers=self._headers())
            response = connection.getresponse()
            if response.status != 200:
                data = response.read()
                raise GatewayError(
                    f"the gateway at {self.where} answered HTTP {response.status}: {_said(data)}"
                )
            while True:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0 or connection.sock is None:
                        return
                    connection.sock.settimeout(left)
                try:
                    line = response.readline()
                except TimeoutError:
                    return
                if not line:
                    return
                yield line
        except (OSError, http.client.HTTPException) as exc:
            raise GatewayError(f"the gateway at {self.where} went away: {exc}") from exc
        finally:
            connection.close()

    def _exchange(
        self, verb: str, path: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, str, bytes]:
        """One exchange: connected (or :class:`GatewayUnreachable`), then the request
        sent and its answer read within :attr:`timeout` (or :class:`GatewayNoAnswer`)."""
        host = "localhost" if self.url is None else urlsplit(self.url).netloc
        lines = [f"{verb} {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        sock = self._connect()
        with sock:
            try:
                status, got, data = _exchange_on(sock, request, _Deadline(self.timeout))
            except TimeoutError as exc:
                within = "" if self.timeout is None else f" within {self.timeout:g} s"
                raise GatewayNoAnswer(
                    f"the gateway at {self.where} did not answer{within}", timed_out=True
                ) from exc
            except (OSError, ValueError) as exc:
                raise GatewayNoAnswer(f"the gateway at {self.where} did not answer: {exc}") from exc
        return status, got.get("content-type", ""), data


@contextmanager
def _closing_on_error(sock: socket.socket) -> Iterator[None]:
    try:
        yield
    except BaseException:
        sock.close()
        raise


class GatewayUnreachable(GatewayError):
    """The gateway could not be reached (no socket, connection refused, no route): the
    request was not sent."""


class GatewayRefused(GatewayError):
    """The gateway refused the request before acting on it (an HTTP 4xx: a wrong token,
    an origin it does not take)."""


class GatewayNoAnswer(GatewayError):
    """The request was sent (or sending it had begun) and no whole answer came: the
    connection closed, the answer made no sense, or none came within the timeout
    (``timed_out``). The gateway may have acted on it."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class GatewayRequestError(GatewayError):
    """The gateway answered a request with a JSON-RPC error: its ``code``, ``message``
    and ``data`` (``None`` when it gave none)."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def kind(self) -> str | None:
        """The supervisor's name for the error (``data["type"]``: ``UnknownResource``,
        ``ServerRequestError`` …), when the gateway gave one."""
        kind = self.data.get("type") if isinstance(self.data, dict) else None
        return kind if isinstance(kind, str) else None


def _messages(content_type: str, data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of a response: one JSON body, or an SSE stream's events."""
    if content_type.startswith("text/event-stream"):
        for event in data.split(b"\n\n"):
            payload = b"\n".join(
                line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")
            )
            if payload:
                yield json.loads(payload)
        return
    answer = json.loads(data)
    yield from answer if isinstance(answer, list) else [answer]


def _header_value(value: str) -> str:
    """``value`` as an HTTP header carries it: as it is when it is printable ASCII without
    spaces at its ends, else in the protocol's ``=?base64?…?=`` wrapping (a URI or a name
    with other characters — a line break cannot end the header early)."""
    import base64

    plain = all(" " <= c <= "~" for c in value) and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _said(data: bytes) -> str:
    try:
        document = json.loads(data)
    except ValueError:
        return data[:200].decode("utf-8", "replace").strip() or "(nothing)"
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict):
            return str(error.get("message", error))
        if error is not None:
            return str(error)
    return json.dumps(document)[:200]
