"""Where a team gateway's OAuth credentials can live: token stores shared by processes.

A :class:`TokenStore` keeps JSON objects by ``kind`` (``tokens``, ``clients``) and ``key``
(one resource × account, :func:`~._store.file_key`), like the auth directory, and adds
what replicas need: :meth:`TokenStore.exclusive`, held around a refresh so that one
replica refreshes a user's tokens and the others take the result (a refresh token used
twice is revoked by many authorization servers), and a ``version`` that changes with
each write (another process's login or refresh shows there). Both stores here also
:meth:`~_Rows.claim` a row: taken by one caller of all the replicas', for a while (a
login link's ticket, good once).

- :class:`SQLiteStore` — one machine: a SQLite file, ``tokenStore.url`` ``sqlite:PATH``,
  or by default the auth directory's ``tokens.db`` (:class:`~._store.LocalStore`). The
  file is this user's and 0600 (made so; an existing one narrowed, one of another user's
  refused), and so are SQLite's files beside it; a directory it makes is 0700, one that
  was there keeps its mode (``/tmp``, a project's);
- :class:`PostgresStore` — replicas: a PostgreSQL database, through psycopg 3's
  synchronous API in ``trio.to_thread`` (no maintained trio-native driver exists); its
  exclusive section is a session advisory lock. Its URL is shown (``location``, a
  driver's error) with any password in it masked.

Both run every database call in ``trio.to_thread`` (a database driver blocks). With a
:class:`Sealer` every value is encrypted at rest (AES-256-GCM under a key from a file or
an environment variable, bound to its kind and key, so a row copied under another key
does not open); :class:`PostgresStore` requires one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import trio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._util._files import FILE_MODE, made_private
from ..config._secrets import database_url_secret_values, masked_database_url

__all__ = ["PostgresStore", "Sealer", "SQLiteStore", "TokenStore"]

#: How long an exclusive section may be held before others may take it over (a holder
#: that died without releasing it), and how often a waiter looks again (SQLite).
LEASE = 60.0
POLL = 0.05
#: The table both stores use.
TABLE = "mcp_supervisor_credentials"
#: Seconds a SQLite statement waits for a lock another connection holds, and how a
#: worker thread waits before asking again where SQLite does not wait itself.
_BUSY_SECONDS = 30.0
_pause = time.sleep
#: The files SQLite keeps beside a database (write-ahead log, its index, rollback journal).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


class TokenStore(Protocol):
    """What the token broker needs of a store (see the module doc)."""

    #: where it is, for ``auth status`` (never with a password)
    location: str

    async def read(self, kind: str, key: str) -> dict[str, Any] | None:
        """The object stored under ``kind``/``key``, ``None`` when there is none (or
        it cannot be read: damaged, or sealed under another key)."""
        ...

    async def write(self, kind: str, key: str, data: dict[str, Any]) -> None:
        """Store ``data`` under ``kind``/``key``, replacing what was there."""
        ...

    async def delete(self, kind: str, key: str) -> bool:
        """Remove ``kind``/``key``; whether there was one."""
        ...

    async def version(self, kind: str, key: str) -> float | None:
        """A value that changes with every write of ``kind``/``key`` (``None``: none)."""
        ...

    def exclusive(self, kind: str, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held by one task of one process at a time, for ``kind``/``key``."""
        ...

    async def aclose(self) -> None:
        """Let go of what the store holds open."""
        ...


class Sealer:
    """AES-256-GCM under a key derived (HKDF-SHA256) from ``secret``: each value sealed
    with a fresh nonce, its kind and key as associated data."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the token store's key needs at least 32 bytes")
        derived = HKDF(SHA256(), 32, salt=None, info=b"mcp-supervisor/token-store/v1")
        self._aead = AESGCM(derived.derive(secret))

    def seal(self, kind: str, key: str, data: bytes) -> bytes:
        nonce = os.urandom(12)
        return b"v1" + nonce + self._aead.encrypt(nonce, data, f"{kind}/{key}".encode())

    def open(self, kind: str, key: str, blob: bytes) -> bytes | None:
        """The sealed value, ``None`` when it was not sealed by this key for this row."""
        if not blob.startswith(b"v1") or len(blob) < 2 + 12 + 16:
            return None
        try:
            return self._aead.decrypt(blob[2:14], blob[14:], f"{kind}/{key}".encode())
        except InvalidTag:
            return None


def _encode(sealer: Sealer | None, kind: str, key: str, data: dict[str, Any]) -> bytes:
    raw = json.dumps(data, sort_keys=True).encode()
    return raw if sealer is None else sealer.seal(kind, key, raw)


def _decode(sealer: Sealer | None, kind: str, key: str, blob: bytes) -> dict[str, Any] | None:
    raw = blob if sealer is None else sealer.open(kind, key, blob)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class _Rows:
    """The row operations both stores share: each statement runs on a connection of its
    own in a thread (:meth:`_run`), with the driver's parameter style (``mark``)."""

    #: the driver's parameter placeholder
    mark = "?"
    _sealer: Sealer | None
    _ready: bool
    _preparing: trio.Lock

    def _connect(self) -> Any:  # noqa: ANN401 - the driver's connection
        raise NotImplementedError

    def _prepare(self) -> None:
        """Make what the store needs (its tables), once, before its first statement."""
        raise NotImplementedError

    async def _run(self, work: Any, *args: Any) -> Any:  # noqa: ANN401 - what work returns
        """``work(connection, *args)`` in a thread, on a connection closed after it."""
        if not self._ready:
            async with self._preparing:
                if not self._ready:
                    await trio.to_thread.run_sync(self._prepare)
                    self._ready = True

        def run() -> Any:  # noqa: ANN401
            with contextlib.closing(self._connect()) as connection:
                return work(connection, *args)

        return await trio.to_thread.run_sync(run)

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self.mark)

    async def _one(self, statement: str, *params: object) -> tuple[Any, ...] | None:
        def one(connection: Any) -> tuple[Any, ...] | None:  # noqa: ANN401 - the driver's
            row = connection.execute(self._sql(statement), params).fetchone()
            return None if row is None else tuple(row)

        found: tuple[Any, ...] | None = await self._run(one)
        return found

    async def read(self, kind: str, key: str) -> dict[str, Any] | None:
        row = await self._one(f"SELECT data FROM {TABLE} WHERE kind = ? AND key = ?", kind, key)
        return None if row is None else _decode(self._sealer, kind, key, bytes(row[0]))

    async def write(self, kind: str, key: str, data: dict[str, Any]) -> None:
        blob = _encode(self._sealer, kind, key, data)
        statement = self._sql(
            f"INSERT INTO {TABLE} (kind, key, data, version) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (kind, key) DO UPDATE SET data = excluded.data, "
            "version = excluded.version"
        )
        params = (kind, key, blob, time.time_ns() / 1e9)
        await self._run(lambda connection: connection.execute(statement, params))

    async def delete(self, kind: str, key: str) -> bool:
        statement = self._sql(f"DELETE FROM {TABLE} WHERE kind = ? AND key = ?")

        def delete(connection: Any) -> bool:  # noqa: ANN401 - the driver's
            return bool(connection.execute(statement, (kind, key)).rowcount > 0)

        return bool(await self._run(delete))

    async def version(self, kind: str, key: str) -> float | None:
        row = await self._one(f"SELECT version FROM {TABLE} WHERE kind = ? AND key = ?", kind, key)
        return None if row is None else float(row[0])

    async def claim(self, kind: str, key: str, until: float) -> bool:
        """Take ``kind``/``key`` until ``until`` (unix seconds): ``True`` for the one
        caller — of this process or any other on the store — that takes it first, ``False``
        while it is taken. One statement (an insert that does nothing on a row there), so
        two at once cannot both take it. Such a row's ``version`` is its end: the rows of
        ``kind`` past theirs are removed here (a row past its end is free again)."""
        purge = self._sql(f"DELETE FROM {TABLE} WHERE kind = ? AND version < ?")
        take = self._sql(
            f"INSERT INTO {TABLE} (kind, key, data, version) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (kind, key) DO NOTHING"
        )
        blob = _encode(self._sealer, kind, key, {"until": until})

        def claim(connection: Any) -> bool:  # noqa: ANN401 - the driver's
            connection.execute(purge, (kind, time.time()))
            return bool(connection.execute(take, (kind, key, blob, until)).rowcount == 1)

        return bool(await self._run(claim))


def _write_ahead(connection: sqlite3.Connection) -> None:
    """Put the database in WAL mode (once per file: it stays so). Changing the mode takes
    the whole file, and SQLite answers "database is locked" at once, without waiting, to
    a connection asking while another holds it — another process (a replica) or store
    preparing the same file at the same moment: asked again until it is done, for as
    long as a busy statement would wait."""
    deadline = time.monotonic() + _BUSY_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            _pause(0.05)  # in a worker thread (trio.to_thread), as every statement is
        else:
            return


class SQLiteStore(_Rows):
    """A SQLite file at ``path`` (this user's, 0600; a directory it makes 0700, one that
    was there left as it is); values sealed with ``sealer`` when given. Its exclusive
    section is a row of a lock table, taken by one process at a time (looked at again
    every :data:`POLL` s, taken over after :data:`LEASE` s from a holder that died)."""

    def __init__(self, path: str | os.PathLike[str], sealer: Sealer | None = None) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self._sealer = sealer
        self._ready = False
        self._preparing = trio.Lock()
        #: this process's holders of each exclusive section (they queue here, not by polling)
        self._held: dict[str, trio.Lock] = {}

    def _prepare(self) -> None:
        """The file (:func:`_private_file`) and the tables."""
        _private_file(self.path)
        with contextlib.closing(self._connect()) as connection:
            _write_ahead(connection)
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (kind TEXT, key TEXT, data BLOB, "
                "version REAL, PRIMARY KEY (kind, key))"
            )
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE}_locks (name TEXT PRIMARY KEY, "
                "holder TEXT, until REAL)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=_BUSY_SECONDS, isolation_level=None)

    @contextlib.asynccontextmanager
    async def exclusive(self, kind: str, key: str) -> AsyncIterator[None]:
        name, holder = f"{kind}/{key}", f"{os.getpid()}:{id(trio.lowlevel.current_task())}"

        def take(connection: sqlite3.Connection) -> bool:
            now = time.time()
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute(
                    f"SELECT until FROM {TABLE}_locks WHERE name = ?", (name,)
                ).fetchone()
                if row is not None and row[0] > now:
                    return False
                connection.execute(
                    f"INSERT OR REPLACE INTO {TABLE}_locks VALUES (?, ?, ?)",
                    (name, holder, now + LEASE),
                )
                return True
            finally:
                connection.execute("COMMIT")

        def release(connection: sqlite3.Connection) -> None:
            connection.execute(
                f"DELETE FROM {TABLE}_locks WHERE name = ? AND holder = ?", (name, holder)
            )

        async with _local(self._held, name):
            while not await self._run(take):  # noqa: ASYNC110 - another process holds it
                await trio.sleep(POLL)
            try:
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await self._run(release)

    async def aclose(self) -> None:
        return None


class PostgresStore(_Rows):
    """A PostgreSQL database at ``url`` (a libpq connection string or URI), its values
    sealed with ``sealer`` (required: the database is shared, and read by its own
    administrators). One connection per operation, in a thread; the exclusive section is
    a session advisory lock on a connection of its own, held while it runs."""

    mark = "%s"

    def __init__(self, url: str, sealer: Sealer) -> None:
        import psycopg  # the optional dependency, imported where it is used

        self._psycopg = psycopg
        self._url = url
        self._sealer = sealer
        self.location = masked_database_url(url)
        self._ready = False
        self._preparing = trio.Lock()
        #: this process's holders of each exclusive section (they queue here, not by polling)
        self._held: dict[str, trio.Lock] = {}

    def _connect(self) -> Any:  # noqa: ANN401 - a psycopg connection
        try:
            return self._psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        except self._psycopg.Error as exc:  # it may quote the URL, or a part of it
            said = shown = str(exc)
            for secret in database_url_secret_values(self._url):
                shown = shown.replace(secret, "***")
            if shown == said:
                raise
            raise type(exc)(shown) from None

    def _prepare(self) -> None:
        with self._connect() as connection:
            # replicas starting together: one creates the table, the others wait for it
            connection.execute("SELECT pg_advisory_lock(0)")
            try:
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} (kind TEXT NOT NULL, "
                    "key TEXT NOT NULL, data BYTEA NOT NULL, "
                    "version DOUBLE PRECISION NOT NULL, PRIMARY KEY (kind, key))"
                )
            finally:
                connection.execute("SELECT pg_advisory_unlock(0)")

    @contextlib.asynccontextmanager
    async def exclusive(self, kind: str, key: str) -> AsyncIterator[None]:
        lock = int.from_bytes(hashlib.sha256(f"{TABLE}/{kind}/{key}".encode()).digest()[:8], "big")
        lock -= 1 << 63  # a signed bigint
        await self.version(kind, key)  # the table made, the database reachable
        async with _local(self._held, f"{kind}/{key}"):
            connection = await trio.to_thread.run_sync(self._connect)
            try:
                # another replica holds it: nothing to wait on but the database
                while not await trio.to_thread.run_sync(_try_lock, connection, lock):  # noqa: ASYNC110
                    await trio.sleep(POLL)
                try:
                    yield
                finally:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(
                            lambda: connection.execute("SELECT pg_advisory_unlock(%s)", (lock,))
                        )
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(connection.close)

    async def aclose(self) -> None:
        return None


@contextlib.asynccontextmanager
async def _local(locks: dict[str, trio.Lock], name: str) -> AsyncIterator[None]:
    """This process's lock of ``name`` (made when first needed, dropped when free)."""
    lock = locks.setdefault(name, trio.Lock())
    try:
        async with lock:
            yield
    finally:
        if not lock.locked() and not lock.statistics().tasks_waiting:
            locks.pop(name, None)


def _try_lock(connection: Any, lock: int) -> bool:  # noqa: ANN401 - a psycopg connection
    row = connection.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
    return bool(row[0])


def _private_file(path: Path) -> None:
    """A SQLite database's file made if missing, in directories made 0700 if missing (one
    that was there keeps its mode); it and SQLite's files beside it
    (:data:`SQLITE_SIDE_FILES`, which SQLite makes with the database's mode) this user's
    own and 0600: a wider mode (a file copied in, an earlier version's) is narrowed, one of
    another user's is refused with :class:`PermissionError` (they could read or replace
    the credentials), as is what is no file (opened ``O_NONBLOCK``: a FIFO planted there
    is refused, not waited on)."""
    made_private(path.parent)
    files = [(path, os.O_CREAT), *((Path(f"{path}{end}"), 0) for end in SQLITE_SIDE_FILES)]
    for file, create in files:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | create
        try:
            fd = os.open(file, flags, FILE_MODE)  # the umask may narrow it: set below
        except FileNotFoundError:
            if create:
                raise
            continue
        except PermissionError as exc:
            raise PermissionError(
                f"the token store {file} cannot be opened by this user ({exc.strerror}): "
                "it must be a file of the user's own, in a directory they can write"
            ) from None
        try:
            info = os.fstat(fd)
            problem = None
            if not stat.S_ISREG(info.st_mode):
                problem = "is not a file"
            elif info.st_uid != os.geteuid():
                problem = f"belongs to another user (uid {info.st_uid})"
            if problem is not None:
                raise PermissionError(
                    f"the token store {file} {problem}: credentials are kept only in a "
                    "file of this user's own — remove it (as its owner), or name another file"
                )
            if stat.S_IMODE(info.st_mode) != FILE_MODE:
                os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)
