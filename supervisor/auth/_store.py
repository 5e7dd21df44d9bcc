"""Where OAuth credentials live on disk: the auth directory.

Its default store is :class:`LocalStore`: the SQLite file ``tokens.db`` there (``~/.mcp-
supervisor/auth`` unless ``$MCP_SUPERVISOR_AUTH_DIR`` or the config's
``supervisor.authDir`` says otherwise), one row per resource × account and kind. Earlier
versions kept the same as files, which :class:`AuthStore` reads and writes (and
:class:`FileStore` serves as a token store, for an embedder that passes one)::

    tokens/<key>.json    the tokens of one resource × account (access, refresh, expiry)
    clients/<key>.json   the client registration used for them (client id, secret, issuer)
    locks/<key>.lock     held (``flock``) by the one process refreshing those tokens

Tokens and client registrations are kept apart, so removing one (a logout) never loses
the other by accident. The key is the resource's host followed by a hash of the resource
URL and the account name: two accounts on one server never share a row or a file. Every
directory is 0700 and every file 0600, created with those modes (never loosened
afterwards); a file is written atomically — a temporary file in the same directory,
flushed to disk, then renamed over the old one — and a row in one transaction, so a
crash mid-write leaves the old credentials, never half of new ones. A rotated refresh
token is stored before the call that uses it is sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import trio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from .._util._files import FILE_MODE, fsync_dir, private_dir, write_atomic
from ._backends import TABLE, SQLiteStore, TokenStore, _encode
from ._dpop import DpopKey

__all__ = [
    "ENV_AUTH_DIR",
    "AuthStore",
    "Credentials",
    "FileStore",
    "StoredTokens",
    "default_auth_dir",
]

#: The environment variable that moves the auth directory.
ENV_AUTH_DIR = "MCP_SUPERVISOR_AUTH_DIR"


def default_auth_dir() -> Path:
    """``$MCP_SUPERVISOR_AUTH_DIR``, else ``~/.mcp-supervisor/auth``."""
    given = os.environ.get(ENV_AUTH_DIR)
    return Path(given).expanduser() if given else Path.home() / ".mcp-supervisor" / "auth"


def _slug(resource: str) -> str:
    host = urlsplit(resource).hostname or "server"
    return re.sub(r"[^A-Za-z0-9.-]", "_", host)[:40]


def file_key(resource: str, account: str) -> str:
    """The file name (without ``.json``) of ``resource`` × ``account``."""
    digest = hashlib.sha256(f"{resource}\n{account}".encode()).hexdigest()[:20]
    return f"{_slug(resource)}-{digest}"


@attrs.frozen
class StoredTokens:
    """Tokens as stored: what ``auth status`` shows, besides the tokens themselves."""

    token: OAuthToken
    issuer: str | None
    #: unix seconds when the access token expires; ``None``: the server did not say
    expires_at: float | None
    saved_at: float
    server: str | None


class AuthStore:
    """The auth directory: private subdirectories, atomic private files."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_auth_dir()

    def __repr__(self) -> str:
        return f"AuthStore({str(self.root)!r})"

    def _dir(self, kind: str) -> Path:
        """``root/kind``, made if needed; ``root`` and it are kept 0700 (the parents of
        ``root`` are the user's business)."""
        private_dir(self.root)
        return private_dir(self.root / kind)

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{key}.json"

    def read(self, kind: str, key: str) -> dict[str, object] | None:
        """The JSON object stored under ``kind``/``key``, ``None`` when there is none (or
        it is not a JSON object: a damaged file is treated as absent, and replaced by the
        next write)."""
        try:
            data = json.loads(self.path(kind, key).read_bytes())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write(self, kind: str, key: str, data: dict[str, object]) -> None:
        """Store ``data`` under ``kind``/``key`` atomically, mode 0600."""
        data_bytes = json.dumps(data, indent=2, sort_keys=True).encode()
        write_atomic(self._dir(kind) / f"{key}.json", data_bytes, FILE_MODE)

    def delete(self, kind: str, key: str) -> bool:
        """Remove ``kind``/``key``; whether there was one."""
        try:
            self.path(kind, key).unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.root / kind)
        return True

    def mtime(self, kind: str, key: str) -> float | None:
        try:
            return self.path(kind, key).stat().st_mtime_ns / 1e9
        except FileNotFoundError:
            return None

    def entries(self, kind: str) -> Iterator[tuple[str, dict[str, object]]]:
        """Every ``(key, data)`` stored under ``kind``."""
        directory = self.root / kind
        if not directory.is_dir():
            return
        for path in sorted(directory.glob("*.json")):
            data = self.read(kind, path.stem)
            if data is not None:
                yield path.stem, data


class FileStore:
    """The auth directory as a token store (:class:`~._backends.TokenStore`): its files
    read and written as they are (small and local: no thread), its exclusive section a
    lock file per row (``locks/<key>.lock``, ``flock``), so that two processes on this
    machine (``serve`` and a command) do not both refresh one token."""

    def __init__(self, store: AuthStore) -> None:
        self.files = store
        self.location = str(store.root)
        self._held: dict[str, trio.Lock] = {}

    async def read(self, kind: str, key: str) -> dict[str, object] | None:
        return self.files.read(kind, key)

    async def write(self, kind: str, key: str, data: dict[str, object]) -> None:
        self.files.write(kind, key, data)

    async def delete(self, kind: str, key: str) -> bool:
        return self.files.delete(kind, key)

    async def version(self, kind: str, key: str) -> float | None:
        return self.files.mtime(kind, key)

    @contextlib.asynccontextmanager
    async def exclusive(self, kind: str, key: str) -> AsyncIterator[None]:
        lock = self._held.setdefault(key, trio.Lock())
        async with lock:
            path = self.files._dir("locks") / f"{key}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            try:
                while True:  # another process holds it: nothing to wait on but the file
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await trio.sleep(0.05)
                yield
            finally:
                os.close(fd)  # releases the lock

    async def aclose(self) -> None:
        return None


class LocalStore(SQLiteStore):
    """The default token store: the SQLite file ``tokens.db`` in the auth directory
    (``root``; default: :func:`default_auth_dir`), not sealed — the file, mode 0600 (the
    directory 0700 when the store makes it), guards it as the token files did. Its
    exclusive section serialises a refresh across the processes of the machine.

    The first time it is opened it takes in the token files an earlier version kept
    there (``tokens/*.json``, ``clients/*.json``) — once: a row logged out later is not
    brought back — and removes them (the secrets live in one place)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.files = AuthStore(root)
        super().__init__(self.files.root / "tokens.db")

    def _prepare(self) -> None:
        super()._prepare()
        imported: list[Path] = []
        with contextlib.closing(self._connect()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                done = connection.execute(
                    f"SELECT 1 FROM {TABLE} WHERE kind = 'meta' AND key = 'imported'"
                ).fetchone()
                if done is None:
                    now = time.time_ns() / 1e9
                    for kind in ("clients", "tokens"):
                        for key, data in self.files.entries(kind):
                            connection.execute(
                                f"INSERT OR IGNORE INTO {TABLE} VALUES (?, ?, ?, ?)",
                                (kind, key, _encode(None, kind, key, data), now),
                            )
                            imported.append(self.files.path(kind, key))
                    connection.execute(
                        f"INSERT INTO {TABLE} VALUES ('meta', 'imported', ?, ?)", (b"{}", now)
                    )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        for path in imported:  # in the database now: the files' copies go
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


class Credentials:
    """The SDK's ``TokenStorage`` for one resource × account, on a token store: the
    auth directory (an :class:`AuthStore`), or one of :mod:`._backends`.

    What the broker reads at any moment (:meth:`stored`) is the last row loaded
    (:meth:`load`) or written here; the auth directory's is loaded when made.

    ``on_tokens`` sees every token set the SDK stores (the broker registers them with the
    log redactor there, before anything else can print them).

    With ``dpop`` the tokens are DPoP-bound (:mod:`._dpop`): :attr:`dpop_key` is the key
    they are bound to, written in their row (``dpop.key``, a private JWK) with them and
    taken from it when the row is loaded; a new one is made while there is none.
    :attr:`dpop_bound` says whether the stored access token is bound (the authorization
    server answered ``token_type`` ``DPoP``) — it is presented with the ``DPoP`` scheme.
    """

    def __init__(
        self,
        store: AuthStore | TokenStore,
        resource: str,
        account: str = "default",
        *,
        server: str | None = None,
        on_tokens: object = None,
        clock: Callable[[], float] = time.time,
        dpop: bool = False,
    ) -> None:
        self.store: TokenStore = FileStore(store) if isinstance(store, AuthStore) else store
        self.resource = resource
        self.account = account
        self.server = server
        self.key = file_key(resource, account)
        #: the tokens' row as last loaded or written
        self._row = store.read("tokens", self.key) if isinstance(store, AuthStore) else None
        self.issuer: str | None = None
        #: a pre-registered client (from the config): used instead of a stored one
        self.fixed_client: OAuthClientInformationFull | None = None
        self._on_tokens = on_tokens
        #: the clock expiries are computed on (the broker's)
        self.clock = clock
        self.dpop_key: DpopKey | None = DpopKey.generate() if dpop else None
        self.dpop_bound = False
        self._take_dpop()

    # -- the SDK's TokenStorage protocol ------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        await self.load()
        stored = self.stored()
        return None if stored is None else stored.token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        if callable(self._on_tokens):
            self._on_tokens(tokens)
        now = self.clock()
        expires_at = None if tokens.expires_in is None else now + int(tokens.expires_in)
        row: dict[str, object] = {
            "resource": self.resource,
            "account": self.account,
            "server": self.server,
            "issuer": self.issuer,
            "saved_at": now,
            "expires_at": expires_at,
            "token": tokens.model_dump(mode="json", exclude_none=True),
        }
        if self.dpop_key is not None:
            row["dpop"] = {"key": self.dpop_key.to_jwk(), "bound": self.dpop_bound}
        await self.store.write("tokens", self.key, row)
        self._row = row

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        data = await self.store.read("clients", self.key)
        if data is None or not isinstance(data.get("client"), dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(data["client"])
        except ValueError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.issuer:
            self.issuer = str(client_info.issuer)
        await self.store.write(
            "clients",
            self.key,
            {
                "resource": self.resource,
                "account": self.account,
                "server": self.server,
                "issuer": client_info.issuer,
                "client": client_info.model_dump(mode="json", exclude_none=True),
            },
        )

    # -- ours --------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the tokens' row from the store again (another process may have written
        it)."""
        self._row = await self.store.read("tokens", self.key)
        self._take_dpop()

    def _take_dpop(self) -> None:
        """Use the DPoP key of the row loaded, and say whether its token is bound to it
        (a row without one: the key held stays, for the next tokens)."""
        if self.dpop_key is None:
            return
        found = self._row.get("dpop") if self._row is not None else None
        data = found if isinstance(found, dict) else {}
        stored = DpopKey.from_jwk(data.get("key"))  # None for no key (not a dict)
        if stored is not None:
            self.dpop_key = stored
        self.dpop_bound = stored is not None and data.get("bound") is True

    def stored(self) -> StoredTokens | None:
        """The stored tokens with their expiry, ``None`` without (or with damaged) ones:
        the row as last loaded or written."""
        data = self._row
        if data is None or not isinstance(data.get("token"), dict):
            return None
        try:
            token = OAuthToken.model_validate(data["token"])
        except ValueError:
            return None
        expires_at = data.get("expires_at")
        saved_at = data.get("saved_at")
        issuer = data.get("issuer")
        return StoredTokens(
            token=token,
            issuer=issuer if isinstance(issuer, str) else None,
            expires_at=float(expires_at) if isinstance(expires_at, int | float) else None,
            saved_at=float(saved_at) if isinstance(saved_at, int | float) else 0.0,
            server=self.server,
        )

    async def tokens_version(self) -> float | None:
        """What changes with every write of the tokens (another process's login shows
        here)."""
        return await self.store.version("tokens", self.key)

    def exclusive(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held by one holder at a time, across processes sharing the store: around a
        refresh, so that the token is refreshed once."""
        return self.store.exclusive("tokens", self.key)

    @property
    def location(self) -> str:
        """Where the tokens are: the token file, or the store's file or database."""
        if isinstance(self.store, FileStore):
            return str(self.store.files.path("tokens", self.key))
        return self.store.location

    async def forget(self, *, client: bool = False) -> bool:
        """Delete the tokens (and the client registration with ``client``); whether
        there were tokens."""
        had = await self.store.delete("tokens", self.key)
        if client:
            await self.store.delete("clients", self.key)
        self._row = None
        return had
