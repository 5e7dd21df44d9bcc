"""Small files written whole and atomically, and private directories: OAuth tokens, the
trust store, a config being edited, an env file of secrets, the audit log's directory.

A write goes to a temporary file in the same directory, is flushed to disk, then renamed
over the old file (and the directory flushed), so a crash mid-write leaves the old
content, never half of the new. A file that processes read, change and write back (the
trust store) is changed under :func:`locked`, so that two of them at once lose nothing.
These are small synchronous file operations: no thread is worth its cost for a few
kilobytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: a private directory's mode, and a private file's
DIR_MODE = 0o700
FILE_MODE = 0o600
#: the directory beside a config file where ``add --env KEY`` keeps the values it asked
#: for without echo, an env file per server: every value in those files is a secret
SECRETS_DIR = ".mcp-supervisor"


def private_dir(path: Path) -> Path:
    """``path`` made if needed (its parents too) and kept 0700."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            os.chmod(path, DIR_MODE)
    return path


def made_private(path: Path) -> Path:
    """``path`` and those of its parents that are missing made, each 0700 (whatever the
    umask); a directory that was there already keeps its mode — it may be a shared one
    (``/tmp``) or a project's, which is not this process's to narrow."""
    missing = [path, *path.parents]
    for index, folder in enumerate(missing):
        if folder.exists():
            missing = missing[:index]
            break
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode is its maker's
        os.chmod(folder, DIR_MODE)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for changing ``path``: a ``flock`` on ``.NAME.lock`` beside
    it (the file itself is replaced by each write, so it cannot carry the lock). Waits
    for another process holding it; released on leaving, or when the process dies."""
    lock = path.parent / f".{path.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path``'s content with ``data`` atomically. The file gets ``mode``, or
    keeps the one it has (a new file: 0666 less the umask, as ``open`` would make it)."""
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename or unlink in it) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
