"""A local server in a sandbox: VS Code's ``sandboxEnabled`` and ``sandbox``, made with
bubblewrap (``bwrap``) on Linux — without root, a daemon or a container image.

A sandboxed server runs as ``bwrap OPTIONS -- COMMAND ARGS`` (:meth:`SandboxLaunch.argv`):

- the whole filesystem bound read-only (``--ro-bind / /``), a private ``/tmp``, ``/dev``
  and ``/proc``; what the server runs from in ``/tmp`` bound back read-only (the top
  directory in ``/tmp`` of its program, of each argument that is an absolute path, of
  its working directory and of the forwarder's Python: a server in a virtual
  environment under ``/tmp`` still runs); each ``allowWrite`` path bound writable, then
  each ``denyWrite`` path read-only again (it wins inside an ``allowWrite`` directory),
  then each ``denyRead`` path covered by an empty stand-in that nobody may read or list
  (mode ``000``): reading it fails with ``EACCES``. Paths are resolved (symbolic links
  followed) when the server starts; one that does not exist then is skipped (nothing
  there to hide or to write).
- its own PID, IPC and network namespaces: no network at all (only a loopback of its
  own), unless ``allowedDomains`` names some. Then a proxy this process runs
  (:mod:`._proxy`) is its one way out: the proxy listens on a Unix socket bound into the
  sandbox, and a small forwarder started inside (:mod:`._forwarder`, this Python, standard
  library only) listens on the sandbox's loopback and sets ``HTTP_PROXY`` and
  ``HTTPS_PROXY`` to it before it runs the server. CONNECT and plain HTTP requests to
  the domains allowed (``deniedDomains`` winning) go through; anything else is refused.
- no capabilities (``--cap-drop ALL``, even for root: one could remount ``/``) and no
  new privileges; it dies with the process that started it (``--die-with-parent``), and
  when its first process exits the kernel ends every other one in its PID namespace. Its
  processes stay in the process group and below the pid the supervisor started, so the
  group's shutdown and :mod:`._children`'s family reach them as they reach any server's.

Where no sandbox can be made — not Linux, ``bwrap`` not installed, or user namespaces
refused — :func:`sandbox_problem` says what is missing and how to install it, and a
server that asks for a sandbox does not start (it never runs unconfined). This module
imports nothing heavy: ``mcp-supervisor check`` asks it too.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config._model import SandboxConfig

__all__ = ["INSTALL", "SandboxLaunch", "sandbox_problem"]

#: How to install bubblewrap, for the errors that say it is missing.
INSTALL = "install bubblewrap (Debian, Ubuntu: apt install bubblewrap; Fedora: dnf install it)"
#: Where the proxy's Unix socket is inside the sandbox (its ``/dev`` is private).
INSIDE_SOCKET = "/dev/mcp-supervisor-proxy.sock"
#: The forwarder run inside the sandbox, by path (it imports no package of ours).
FORWARDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_forwarder.py")
_LINUX = sys.platform.startswith("linux")
_PROBE_TIMEOUT_S = 10.0


def sandbox_problem() -> str | None:
    """Why no sandbox can be made here, or ``None`` when one can: not Linux, no ``bwrap``
    on this process's ``PATH``, or one that cannot make a sandbox (its error, and the
    likely cause: user namespaces disabled). A sandbox is tried once per ``bwrap`` found
    (a few milliseconds), then the answer is remembered."""
    if not _LINUX:
        return (
            f"a sandbox needs Linux and bubblewrap; this is {sys.platform}: remove "
            '"sandboxEnabled", or run the server on Linux'
        )
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed, or not on PATH: {INSTALL}"
    return _probe(bwrap)


@cache
def _probe(bwrap: str) -> str | None:
    """Whether ``bwrap`` makes a sandbox as :class:`SandboxLaunch` asks for one."""
    true = shutil.which("true") or "/bin/true"
    command = [bwrap, *_BASE, "--", true]
    try:
        done = subprocess.run(command, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap ({bwrap}) could not be run: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    why = said[-1] if said else f"exit code {done.returncode}"
    return (
        f"bubblewrap ({bwrap}) cannot make a sandbox here: {why}; unprivileged user "
        "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu "
        "also kernel.apparmor_restrict_unprivileged_userns=0)"
    )


#: What every sandbox has, before the paths of its config.
_BASE = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--tmpfs", "/tmp",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--die-with-parent",
    "--cap-drop", "ALL",
)  # fmt: skip


def _tmp_roots(paths: Sequence[str], cwd: str) -> list[str]:
    """The top directories (or files) in ``/tmp`` that ``paths`` are in, as given and with
    symbolic links followed (relative ones from ``cwd``), each once: what the sandbox's
    private ``/tmp`` must show of the machine's for the server to run."""
    roots: list[str] = []
    for path in paths:
        for each in _links(os.path.normpath(os.path.join(cwd, path))):
            parts = Path(each).parts
            if len(parts) < 3 or parts[:2] != ("/", "tmp"):
                continue
            root = os.path.join("/tmp", parts[2])
            if root not in roots and os.path.lexists(root):
                roots.append(root)
    return roots


def _links(path: str) -> list[str]:
    """``path``, each path its chain of symbolic links leads through (a link to a link
    in ``/tmp`` must be there too for the first to lead anywhere), and where it ends."""
    seen = [path]
    for _ in range(40):  # the kernel's own bound on a chain
        try:
            target = os.readlink(path)
        except OSError:
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
        seen.append(path)
    seen.append(os.path.realpath(path))
    return seen


class SandboxLaunch:
    """One sandboxed spawn of a server: its ``bwrap`` command line (:meth:`argv`) and the
    private directory that holds what it binds in (the stand-ins of ``denyRead`` paths,
    the proxy's socket at :attr:`socket_path`), removed by :meth:`close`."""

    def __init__(self, sandbox: SandboxConfig) -> None:
        self.sandbox = sandbox
        self._dir: str | None = None
        #: the proxy's socket outside the sandbox, when ``allowedDomains`` names some
        self.socket_path: str | None = None
        #: paths of the config skipped at this start: they did not exist
        self.skipped: list[str] = []

    @property
    def proxied(self) -> bool:
        """Whether the server gets the network through the proxy (``allowedDomains``)."""
        return bool(self.sandbox.allowed_domains)

    def _private(self) -> str:
        if self._dir is None:
            _sweep_once()
            self._dir = tempfile.mkdtemp(prefix=f"{_PRIVATE}{os.getpid()}-")
        return self._dir

    def _stand_in(self, directory: bool) -> str:
        """An empty directory or file nobody may read (mode 000), to cover a path."""
        path = os.path.join(self._private(), "hidden-dir" if directory else "hidden-file")
        if not os.path.lexists(path):
            if directory:
                os.mkdir(path, 0)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0))
            os.chmod(path, 0)
        return path

    def argv(
        self,
        command: str,
        args: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        *,
        program: str | None = None,
    ) -> list[str]:
        """The command line that runs ``command`` with ``args`` in this sandbox (see the
        module's docstring); ``cwd`` is where it starts (else where bwrap starts);
        ``program`` is the file ``command`` names, found as the server's ``PATH`` finds
        it (else looked up on this process's)."""
        bwrap = shutil.which("bwrap")
        assert bwrap is not None, "sandbox_problem() said it is there"
        words = [bwrap, *_BASE]
        here = os.fspath(cwd) if cwd is not None else os.getcwd()
        used = [program or shutil.which(command) or command, here]
        used += [arg for arg in args if os.path.isabs(arg)]
        if self.proxied:
            used += [sys.executable, FORWARDER]
        for root in _tmp_roots(used, here):
            words += ["--ro-bind", root, root]
        for option, paths in (
            ("--bind", self.sandbox.allow_write),
            ("--ro-bind", self.sandbox.deny_write),
        ):
            for path in self._existing(paths):
                words += [option, path, path]
        for path in self._existing(self.sandbox.deny_read):
            words += ["--ro-bind", self._stand_in(os.path.isdir(path)), path]
        if self.proxied:
            self.socket_path = os.path.join(self._private(), "proxy.sock")
            words += ["--bind", self.socket_path, INSIDE_SOCKET]
        if cwd is not None:
            words += ["--chdir", os.fspath(cwd)]
        words.append("--")
        if self.proxied:
            words += [sys.executable, "-S", "-I", FORWARDER, INSIDE_SOCKET, "--"]
        return [*words, command, *args]

    def _existing(self, paths: Sequence[Path]) -> list[str]:
        """``paths`` resolved, those that exist (the others are noted in :attr:`skipped`)."""
        found = []
        for path in paths:
            real = os.path.realpath(path)
            try:
                os.stat(real)
            except OSError:
                self.skipped.append(os.fspath(path))
                continue
            found.append(real)
        return found

    def close(self) -> None:
        """Remove the private directory (once; later calls do nothing)."""
        directory, self._dir = self._dir, None
        if directory is not None:
            _remove(directory)


#: The start of a private directory's name, in the temporary directory: then the pid of
#: the process that made it, ``-``, and ``mkdtemp``'s random part.
_PRIVATE = "mcp-sandbox-"


def _remove(directory: str) -> None:
    for name in ("hidden-dir", "hidden-file"):  # mode 000: made removable first
        path = os.path.join(directory, name)
        if os.path.lexists(path) and not os.path.islink(path):
            os.chmod(path, stat.S_IRWXU)
    shutil.rmtree(directory, ignore_errors=True)


@cache
def _sweep_once() -> None:
    """Remove, once per process, the private directories that processes of this user
    which no longer run left behind (killed before they could: ``kill -9``). A directory
    whose process runs is left alone, so is one another user owns."""
    base = tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        pid = name[len(_PRIVATE) :].partition("-")[0]
        if not name.startswith(_PRIVATE) or not pid.isdigit() or int(pid) == os.getpid():
            continue
        path = os.path.join(base, name)
        try:
            info = os.lstat(path)
            if info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(path)  # its process is gone
        except OSError:
            continue  # gone already, or a process of another user runs under that pid
