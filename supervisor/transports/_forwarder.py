"""Inside a sandbox with allowed domains: the way to the supervisor's proxy.

Run by path, standard library only (``python -S -I _forwarder.py SOCKET -- COMMAND
ARGS…``), as the sandbox's first process (:mod:`._sandbox`): it listens on a free port of
the sandbox's own loopback, sets ``HTTP_PROXY`` and ``HTTPS_PROXY`` (and their lower-case
spellings) to it, forks a child that carries each connection made there to the proxy's
Unix socket ``SOCKET`` (bound into the sandbox), and becomes the server (``exec``): the
server keeps the pid, the pipes and the environment it would have had. The child holds
none of the server's standard streams, and the kernel kills it when the server exits
(``PR_SET_PDEATHSIG``). The sandbox has no network of its own: what the proxy refuses
goes nowhere.
"""

from __future__ import annotations

import ctypes
import os
import selectors
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1
#: Connections carried at once; more wait in the listening queue.
_MAX_CONNECTIONS = 64
_CHUNK = 65536
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class _Way:
    """One direction of a carried connection: what was read from ``source`` and not
    yet written to ``sink`` (one chunk at most: a slow reader slows its writer)."""

    def __init__(self, source: socket.socket, sink: socket.socket) -> None:
        self.source = source
        self.sink = sink
        self.pending = b""
        self.ended = False  # the source said all it will say
        self.shut = False  # and the sink was told so (its write side shut)


class _Link:
    """A connection made to the forwarder's port and its own connection to the proxy,
    carried both ways in one thread: each socket is watched for what its two ways need
    of it now (to read while its way has nothing pending, to write while the other has)."""

    def __init__(self, forwarder: _Forwarder, client: socket.socket, upstream: socket.socket):
        self.forwarder = forwarder
        self.ways = (_Way(client, upstream), _Way(upstream, client))
        self.sockets = (client, upstream)
        for sock in self.sockets:
            sock.setblocking(False)
        self._watch()

    def ready(self, sock: socket.socket, events: int) -> None:
        try:
            for way in self.ways:
                if way.source is sock and events & _READ:
                    data = sock.recv(_CHUNK)
                    way.pending, way.ended = data, not data
                if way.sink is sock and events & _WRITE and way.pending:
                    way.pending = way.pending[sock.send(way.pending) :]
                if way.ended and not way.pending and not way.shut:
                    way.shut = True
                    way.sink.shutdown(socket.SHUT_WR)
        except OSError:
            self.close()
            return
        if all(way.shut for way in self.ways):
            self.close()
        else:
            self._watch()

    def _watch(self) -> None:
        for sock in self.sockets:
            events = 0
            for way in self.ways:
                if way.source is sock and not (way.pending or way.ended):
                    events |= _READ
                if way.sink is sock and way.pending:
                    events |= _WRITE
            self.forwarder.watch(sock, events, self)

    def close(self) -> None:
        for sock in self.sockets:
            self.forwarder.watch(sock, 0, self)
            sock.close()
        self.forwarder.closed()


class _Forwarder:
    """Accepts connections on ``listener`` and carries each to the proxy's Unix socket
    at ``path``, all in one thread (a selector), :data:`_MAX_CONNECTIONS` at a time."""

    def __init__(self, listener: socket.socket, path: str) -> None:
        self.listener = listener
        self.path = path
        self.selector = selectors.DefaultSelector()
        self.links = 0
        listener.setblocking(False)
        self.watch(listener, _READ, None)

    def watch(self, sock: socket.socket, events: int, link: _Link | None) -> None:
        """Watch ``sock`` for ``events`` now (none: not at all)."""
        try:
            key = self.selector.get_key(sock)
        except KeyError:
            if events:
                self.selector.register(sock, events, link)
            return
        if not events:
            self.selector.unregister(sock)
        elif key.events != events:
            self.selector.modify(sock, events, link)

    def closed(self) -> None:
        self.links -= 1
        self.watch(self.listener, _READ, None)

    def serve(self) -> None:
        while True:
            for key, events in self.selector.select():
                if key.data is None:
                    self._accept()
                else:
                    link = key.data
                    sock = key.fileobj
                    assert isinstance(link, _Link) and isinstance(sock, socket.socket)
                    if sock.fileno() != -1:  # not closed by this round's other socket
                        link.ready(sock, events)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.path)
        except OSError:
            upstream.close()
            client.close()
            return
        self.links += 1
        if self.links >= _MAX_CONNECTIONS:
            self.watch(self.listener, 0, None)
        _Link(self, client, upstream)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: _forwarder.py SOCKET -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    path, command = argv[0], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(_MAX_CONNECTIONS)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    env.update(dict.fromkeys(_PROXY_VARIABLES, proxy))
    parent = os.getpid()
    if os.fork() == 0:  # the forwarder: it dies with the server
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _Forwarder(listener, path).serve()
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"cannot run {command[0]!r} in the sandbox: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
