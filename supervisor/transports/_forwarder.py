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
import signal
import socket
import sys
import threading

_PR_SET_PDEATHSIG = 1
#: Connections carried at once; more wait in the listening queue.
_MAX_CONNECTIONS = 64
_CHUNK = 65536
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                end.shutdown(how)
            except OSError:
                pass


def _carry(client: socket.socket, path: str, slots: threading.BoundedSemaphore) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            upstream.close()
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        upstream.close()
    finally:
        client.close()
        slots.release()


def _serve(listener: socket.socket, path: str) -> None:
    slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
    while True:
        slots.acquire()
        try:
            client, _ = listener.accept()
        except OSError:
            slots.release()
            continue
        threading.Thread(target=_carry, args=(client, path, slots), daemon=True).start()


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
            _serve(listener, path)
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
