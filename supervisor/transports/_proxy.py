"""The filtering proxy of a sandboxed server with allowed domains (:mod:`._sandbox`).

A server in a sandbox has no network of its own; when its ``sandbox.network`` allows
domains, its ``HTTP_PROXY`` and ``HTTPS_PROXY`` lead (through the forwarder inside, then
a Unix socket) to a :class:`FilteringProxy`, run by its transport in the supervisor's
nursery. The proxy reads one request head: ``CONNECT host:port`` (HTTPS, or any TCP
tunnel) or a plain HTTP request with an absolute URL (``GET http://host/path``). The
host must match ``allowedDomains`` (a name exactly, or ``*.example.com`` for any of its
subdomains, never ``example.com`` itself) and no ``deniedDomains`` (deny wins); a name
allowed only by a wildcard that resolves to a loopback, link-local or unspecified
address is refused too (a name someone else's DNS controls does not reach this
machine's own services). Then it connects, answers ``200`` to a CONNECT, or passes the
plain request on (in origin form, ``Connection: close``, without ``Proxy-*`` headers),
and carries bytes both ways until either side closes. Anything else is answered with
an error status (``403`` refused, ``400`` not a proxy request, ``502`` the connection
failed, ``503`` too many connections) and closed; each refusal is logged with the host
(escaped), and counted.

Bounded: :data:`MAX_CONNECTIONS` at once, a request head of :data:`MAX_HEAD_BYTES`
read within :data:`HEAD_TIMEOUT_S`, a connection made within :data:`CONNECT_TIMEOUT_S`,
and a tunnel idle for :data:`IDLE_TIMEOUT_S` closed.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from contextlib import suppress

import trio

from .._util._printable import printable
from ..log import get_logger

__all__ = ["FilteringProxy", "domain_allowed", "domain_matches"]

log = get_logger("supervisor.transports")

MAX_CONNECTIONS = 64
MAX_HEAD_BYTES = 16384
HEAD_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 300.0
_CHUNK = 65536
_ACCEPT_RETRY_S = 0.1
_LINGER_S = 1.0
_HOST = re.compile(r"[A-Za-z0-9_.:-]{1,253}\Z")
_DROPPED_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


def domain_matches(host: str, pattern: str) -> bool:
    """Whether ``host`` is ``pattern`` (ignoring case and a final dot), or, for a pattern
    ``*.example.com``, one of its subdomains (``api.example.com``, ``a.b.example.com``;
    not ``example.com``)."""
    host, pattern = host.lower().rstrip("."), pattern.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def domain_allowed(host: str, allowed: Sequence[str], denied: Sequence[str]) -> bool:
    """Whether ``host`` matches one of ``allowed`` and none of ``denied`` (deny wins)."""
    if any(domain_matches(host, pattern) for pattern in denied):
        return False
    return any(domain_matches(host, pattern) for pattern in allowed)


class _ProxyRefused(Exception):
    def __init__(self, status: int, reason: str, host: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.host = host


_PHRASES = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}


class FilteringProxy:
    """The proxy of one sandboxed server ``server`` (see the module's docstring):
    :meth:`serve` it on a listener. ``hosts`` maps names to addresses in place of the
    resolver (tests). ``refused`` and ``passed`` count the requests refused and let
    through."""

    def __init__(
        self,
        server: str,
        allowed: Sequence[str],
        denied: Sequence[str] = (),
        *,
        hosts: Mapping[str, str] | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.server = server
        self.allowed = tuple(allowed)
        self.denied = tuple(denied)
        self.hosts = dict(hosts or {})
        self._slots = trio.Semaphore(max_connections)
        self.refused = 0
        self.passed = 0

    async def serve(self, listener: trio.abc.Listener[trio.abc.Stream]) -> None:
        """Accept and handle connections on ``listener`` until cancelled."""
        async with listener, trio.open_nursery() as nursery:
            while True:
                try:
                    stream = await listener.accept()
                except OSError:  # out of file descriptors, say: the server waits a moment
                    await trio.sleep(_ACCEPT_RETRY_S)
                    continue
                nursery.start_soon(self._handle, stream)

    async def _handle(self, client: trio.abc.Stream) -> None:
        async with client:
            if self._slots.value == 0:
                await self._refuse(client, _ProxyRefused(503, "too many connections at once"))
                return
            async with self._slots:
                try:
                    upstream, rest = await self._open(client)
                except _ProxyRefused as refusal:
                    await self._refuse(client, refusal)
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return
                self.passed += 1
                async with upstream:
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        if rest:
                            await upstream.send_all(rest)
                        await self._carry(client, upstream)

    async def _open(self, client: trio.abc.Stream) -> tuple[trio.abc.Stream, bytes]:
        """Read the request head, decide, connect: the upstream stream and what to send
        it first (the rewritten request, for plain HTTP)."""
        head, body = await self._head(client)
        lines = head.split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ")
        except ValueError:
            raise _ProxyRefused(400, "not an HTTP request") from None
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            rest = b""
        else:
            try:
                url = urllib.parse.urlsplit(target)
                host, port_text = url.hostname or "", str(url.port or 80)
            except ValueError:
                raise _ProxyRefused(400, "no valid host and port in the request") from None
            if url.scheme != "http" or not host:
                raise _ProxyRefused(
                    400, "not a proxy request (an absolute http:// URL, or CONNECT)"
                )
            path = url.path or "/"
            if url.query:
                path += "?" + url.query
            kept = [
                line
                for line in lines[1:]
                if line and line.split(b":", 1)[0].strip().lower() not in _DROPPED_HEADERS
            ]
            request = f"{method} {path} {version}".encode("latin-1")
            rest = b"\r\n".join([request, *kept, b"Connection: close", b"", b""]) + body
            body = b""
        host = host.strip("[]")
        if not _HOST.match(host) or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise _ProxyRefused(400, "no valid host and port in the request")
        if any(domain_matches(host, pattern) for pattern in self.denied):
            raise _ProxyRefused(403, "in the sandbox's network.deniedDomains", host)
        if not domain_allowed(host, self.allowed, self.denied):
            raise _ProxyRefused(403, "not in the sandbox's network.allowedDomains", host)
        upstream = await self._connect(host, int(port_text))
        if method == "CONNECT":
            try:
                await client.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            except BaseException:
                await upstream.aclose()
                raise
            rest = body  # what the client sent after its CONNECT: the tunnel's first bytes
        return upstream, rest

    async def _head(self, client: trio.abc.Stream) -> tuple[bytes, bytes]:
        buffer = bytearray()
        end = -1  # (set by the loop's first test, which nothing can cut short)
        with trio.move_on_after(HEAD_TIMEOUT_S) as waited:
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise _ProxyRefused(400, f"request head larger than {MAX_HEAD_BYTES} bytes")
                chunk = await client.receive_some(_CHUNK)
                if not chunk:
                    raise _ProxyRefused(400, "the request ended before its head did")
                buffer += chunk
        if waited.cancelled_caught:
            raise _ProxyRefused(400, f"no request head within {HEAD_TIMEOUT_S:g} s")
        if end > MAX_HEAD_BYTES:
            raise _ProxyRefused(400, f"request head larger than {MAX_HEAD_BYTES} bytes")
        return bytes(buffer[:end]), bytes(buffer[end + 4 :])

    async def _connect(self, host: str, port: int) -> trio.SocketStream:
        """A connection to ``host`` (its address in :attr:`hosts`, else resolved). A name
        allowed only by a wildcard must not lead to this machine's own addresses: the
        address connected to is checked (the one resolution that counts)."""
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                upstream = await trio.open_tcp_stream(self.hosts.get(host, host), port)
        except (OSError, trio.TooSlowError) as exc:
            raise _ProxyRefused(502, f"cannot connect: {exc or type(exc).__name__}", host) from None
        exact = any(domain_matches(host, p) for p in self.allowed if not p.startswith("*."))
        try:
            peer = ipaddress.ip_address(upstream.socket.getpeername()[0])
        except (OSError, ValueError):
            peer = None
        if not exact and peer is not None:
            if peer.is_loopback or peer.is_link_local or peer.is_unspecified:
                await upstream.aclose()
                raise _ProxyRefused(403, f"allowed by a wildcard, but it is at {peer}", host)
        return upstream

    async def _carry(self, client: trio.abc.Stream, upstream: trio.abc.Stream) -> None:
        """Bytes both ways until both are done; a way idle for :data:`IDLE_TIMEOUT_S`
        ends the tunnel."""
        async with trio.open_nursery() as nursery:

            async def pump(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    data = b""  # (read below unless the wait was cut short)
                    while True:
                        with trio.move_on_after(IDLE_TIMEOUT_S) as idle:
                            data = await source.receive_some(_CHUNK)
                        if idle.cancelled_caught:
                            nursery.cancel_scope.cancel()
                            return
                        if not data:
                            break
                        await sink.send_all(data)
                    if isinstance(sink, trio.abc.HalfCloseableStream):
                        await sink.send_eof()

            nursery.start_soon(pump, client, upstream)
            nursery.start_soon(pump, upstream, client)

    async def _refuse(self, client: trio.abc.Stream, refusal: _ProxyRefused) -> None:
        self.refused += 1
        log.warning(
            "sandbox proxy refused a request",
            server=self.server,
            host=printable(refusal.host) if refusal.host is not None else None,
            status=refusal.status,
            reason=printable(refusal.reason),
        )
        what = f" to {refusal.host}" if refusal.host is not None else ""
        body = (
            f"refused{what} by the sandbox of MCP server {self.server!r}: {refusal.reason}\n"
        ).encode("utf-8", "replace")
        phrase = _PHRASES.get(refusal.status, "Error")
        head = (
            f"HTTP/1.1 {refusal.status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await client.send_all(head + body)
            # A lingering close: what the client is still sending is read (a little, for a
            # moment), so that closing with it unread does not reset the answer away.
            if isinstance(client, trio.abc.HalfCloseableStream):
                await client.send_eof()
            with trio.move_on_after(_LINGER_S):
                drained = 0
                while drained < MAX_HEAD_BYTES * 4 and (chunk := await client.receive_some()):
                    drained += len(chunk)
