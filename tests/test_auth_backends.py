"""The token stores a team gateway's replicas share (supervisor.auth._backends): SQLite
for one machine, PostgreSQL for replicas — a real server of the test's own (tests/
postgres.py). Each keeps what it is given, sealed at rest when it has a key (a row read
under another key, or copied to another key's place, does not open), and lets one
holder at a time into a row's exclusive section, across store instances as across
processes: replicas that find a user's token expired together refresh it once."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.auth._backends import TABLE, PostgresStore, Sealer, SQLiteStore, TokenStore
from supervisor.auth._store import AuthStore, FileStore, LocalStore
from tests.postgres import needs_postgres, postgres_server

KEY = b"s" * 32


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["files", "sqlite", "sqlite-sealed", "postgres"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TokenStore, TokenStore]]:
    """Two instances of one store (two processes', or two replicas'), fresh each test."""
    kind = request.param
    if kind == "postgres":
        if needs_postgres.args[0]:  # skipped where PostgreSQL is not installed
            pytest.skip(needs_postgres.kwargs["reason"])
        url = request.getfixturevalue("postgres_url")
        first, second = PostgresStore(url, Sealer(KEY)), PostgresStore(url, Sealer(KEY))
        prefix = os.urandom(4).hex()  # tests share the server: each its own keys
        yield _Prefixed(first, prefix), _Prefixed(second, prefix)  # type: ignore[misc]
        return
    if kind == "files":  # the auth directory: two processes' views of it
        yield FileStore(AuthStore(tmp_path)), FileStore(AuthStore(tmp_path))
        return
    sealer = Sealer(KEY) if kind == "sqlite-sealed" else None
    path = tmp_path / "auth" / "tokens.db"
    yield SQLiteStore(path, sealer), SQLiteStore(path, sealer)


class _Prefixed:
    """A store whose keys all start with ``prefix``: tests sharing one database apart."""

    def __init__(self, store: Any, prefix: str) -> None:
        self.store, self.prefix, self.location = store, prefix, store.location

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        return lambda kind, key, *args: method(kind, f"{self.prefix}-{key}", *args)

    async def aclose(self) -> None:
        await self.store.aclose()


async def test_a_store_keeps_what_it_is_given_for_every_instance(
    stores: tuple[TokenStore, TokenStore],
) -> None:
    first, second = stores
    assert await first.read("tokens", "a") is None
    assert await first.version("tokens", "a") is None
    await first.write("tokens", "a", {"access_token": "one", "n": 1})
    assert await second.read("tokens", "a") == {"access_token": "one", "n": 1}
    before = await second.version("tokens", "a")
    assert before is not None
    await second.write("tokens", "a", {"access_token": "two"})
    assert await first.read("tokens", "a") == {"access_token": "two"}
    assert await first.version("tokens", "a") != before  # another's write shows
    assert await first.read("clients", "a") is None  # kinds apart
    assert await second.delete("tokens", "a") is True
    assert await first.delete("tokens", "a") is False
    assert await first.read("tokens", "a") is None


async def test_replicas_that_find_a_token_expired_together_refresh_it_once(
    stores: tuple[TokenStore, TokenStore],
) -> None:
    """Each replica, in the row's exclusive section: read the tokens; if they are the
    expired ones it saw, refresh (counted) and write; else take the new ones."""
    first, second = stores
    await first.write("tokens", "user", {"access_token": "expired", "generation": 0})
    refreshes = 0
    holders = 0

    async def replica(store: TokenStore, seen: str) -> str:
        nonlocal refreshes, holders
        async with store.exclusive("tokens", "user"):
            holders += 1
            assert holders == 1  # one at a time
            current = await store.read("tokens", "user")
            assert current is not None
            if current["access_token"] == seen:
                refreshes += 1
                await trio.sleep(0.05)  # the authorization server answering
                current = {"access_token": f"fresh-{refreshes}", "generation": refreshes}
                await store.write("tokens", "user", current)
            holders -= 1
            return str(current["access_token"])

    got: list[str] = []
    async with trio.open_nursery() as nursery:
        for store in (first, second, first, second):

            async def one(store: TokenStore = store) -> None:
                got.append(await replica(store, "expired"))

            nursery.start_soon(one)
    assert refreshes == 1 and got == ["fresh-1"] * 4


async def test_an_exclusive_section_left_by_cancellation_is_free_again(
    stores: tuple[TokenStore, TokenStore],
) -> None:
    first, second = stores
    with trio.move_on_after(0.2):
        async with first.exclusive("tokens", "k"):
            await trio.sleep_forever()
    with trio.fail_after(10):
        async with second.exclusive("tokens", "k"):
            pass


async def test_sealed_values_are_not_readable_at_rest_nor_under_another_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "auth" / "tokens.db"
    store = SQLiteStore(path, Sealer(KEY))
    await store.write("tokens", "a", {"access_token": "secret-access-token"})
    assert b"secret-access-token" not in path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert await SQLiteStore(path, Sealer(b"o" * 32)).read("tokens", "a") is None
    assert await SQLiteStore(path).read("tokens", "a") is None  # unsealed reader
    sealer = Sealer(KEY)
    blob = sealer.seal("tokens", "a", b'{"x": 1}')
    assert sealer.open("tokens", "a", blob) == b'{"x": 1}'
    assert sealer.open("tokens", "b", blob) is None  # another row's place
    assert sealer.open("clients", "a", blob) is None
    with pytest.raises(ValueError, match="at least 32 bytes"):
        Sealer(b"short")


@needs_postgres
async def test_postgres_values_are_sealed_in_the_database(postgres_url: str) -> None:
    import psycopg

    store = PostgresStore(postgres_url, Sealer(KEY))
    key = os.urandom(4).hex()
    await store.write("tokens", key, {"access_token": "secret-access-token"})
    with psycopg.connect(postgres_url) as connection:
        (data,) = connection.execute(
            "SELECT data FROM mcp_supervisor_credentials WHERE key = %s", (key,)
        ).fetchone()
    assert b"secret-access-token" not in bytes(data)
    assert await PostgresStore(postgres_url, Sealer(b"o" * 32)).read("tokens", key) is None
    assert "postgres@127.0.0.1" in store.location
    secret = PostgresStore("postgresql://u:hunter2@db.example/x", Sealer(KEY))
    assert "hunter2" not in secret.location and ":***@" in secret.location


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
async def test_two_supervisors_sharing_a_store_log_in_once_and_refresh_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two supervisors (two replicas, or two processes of one machine) of one
    OAuth-protected server, their credentials in one store (``supervisor.tokenStore``:
    PostgreSQL, or a SQLite file): the second connects with the first's login, no
    browser; when the server's tokens expire, both calls at once lead to one refresh, and
    both are answered. Nothing lands in the auth directory, and the database holds no
    token in clear."""
    from supervisor import open_supervisor
    from supervisor.testing.servers import open_oauth_server
    from tests.test_auth import Browser, connected, entry, whoami

    if kind == "postgres":
        if needs_postgres.args[0]:
            pytest.skip(needs_postgres.kwargs["reason"])
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite:///{tmp_path / 'shared' / 'tokens.db'}"
    monkeypatch.setenv("MCPS_STORE_KEY", "k" * 40)
    async with open_oauth_server() as fx:
        store = {"url": url, "keyEnv": "MCPS_STORE_KEY"}
        config = {"mcpServers": {"remote": entry(fx.url)}, "supervisor": {"tokenStore": store}}
        browser = Browser()
        async with open_supervisor(
            config, auth_dir=tmp_path / "a", oauth_redirect_handler=browser
        ) as first:
            await connected(first)
            async with open_supervisor(config, auth_dir=tmp_path / "b") as second:
                await connected(second)  # the first's login, from the store
                assert len(browser.opened) == 1 and fx.provider.authorizations == 1
                fx.provider.expire_access_tokens()
                answers: list[Any] = []
                async with trio.open_nursery() as nursery:
                    for sup in (first, second):

                        async def ask(sup: Any = sup) -> None:
                            answers.append(await whoami(sup))

                        nursery.start_soon(ask)
                assert [a["subject"] for a in answers] == ["test-user", "test-user"]
                assert fx.provider.refreshes == 1
    assert not (tmp_path / "a" / "tokens").exists() and not (tmp_path / "b" / "tokens").exists()
    if kind == "sqlite":
        files = b"".join(f.read_bytes() for f in (tmp_path / "shared").iterdir())  # -wal too
        assert b"mcp_supervisor_credentials" in files and b"access_token" not in files
        return
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT data FROM mcp_supervisor_credentials").fetchall()
    assert rows and not any(b"access_token" in bytes(row[0]) for row in rows)


def test_a_token_store_config_is_checked_and_its_key_read_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.config import load_config
    from supervisor.errors import ConfigError
    from supervisor.runtime import token_store

    def config(**store: Any) -> dict[str, Any]:
        return {"mcpServers": {}, "supervisor": {"tokenStore": store}}

    with pytest.raises(ConfigError) as refused:
        load_config(config(url="postgresql://mcp:hunter2@db/mcp", keyEnv="K"))
    assert "supervisor.tokenStore.url: has a password in it" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ConfigError, match='needs exactly one of "keyFile" and "keyEnv"'):
        load_config(config(url="postgresql://mcp@db/mcp"))
    with pytest.raises(ConfigError, match="must be a postgresql:// URL"):
        load_config(config(url="mysql://db/mcp", keyEnv="K"))
    loaded = load_config(config(url="postgresql://mcp@db/mcp", keyEnv="K"))
    for value, said in (
        (None, "environment variable K is not set"),
        ("short", "at least 32 bytes"),
        ("REPLACE WITH A KEY OF 32 BYTES OR MORE", "one word"),
    ):
        if value is None:
            monkeypatch.delenv("K", raising=False)
        else:
            monkeypatch.setenv("K", value)
        with pytest.raises(ConfigError, match=said):
            token_store(None, loaded)
    monkeypatch.setenv("K", "k" * 32)
    store = token_store(None, loaded)
    assert isinstance(store, PostgresStore) and store.location == "postgresql://mcp@db/mcp"
    default = token_store(tmp_path, load_config({"mcpServers": {}}))
    assert isinstance(default, LocalStore) and default.path == tmp_path / "tokens.db"
    monkeypatch.delenv("K")
    local = load_config(config(url="sqlite:tokens/shared.db"))  # no key: not sealed
    store = token_store(None, local)
    assert isinstance(store, SQLiteStore) and store.path == Path("tokens/shared.db")
    with pytest.raises(ConfigError, match='needs at most one of "keyFile" and "keyEnv"'):
        load_config(config(url="sqlite:x.db", keyEnv="K", keyFile="f"))
    with pytest.raises(ConfigError, match="names no file"):
        load_config(config(url="sqlite:"))


async def test_the_default_store_takes_in_the_token_files_of_an_earlier_version_once(
    tmp_path: Path,
) -> None:
    """The auth directory's token files (what earlier versions kept) are in the default
    store (``tokens.db`` there) from its first opening, and gone from the directory; a
    row logged out later is not brought back by a file put there again."""
    from supervisor.auth._store import Credentials

    files = AuthStore(tmp_path)
    files.write("tokens", "crm", {"token": {"access_token": "old-access"}, "account": "default"})
    files.write("clients", "crm", {"client": {"client_id": "registered-before"}})
    store = LocalStore(tmp_path)
    assert (await store.read("tokens", "crm") or {})["token"] == {"access_token": "old-access"}
    assert (await store.read("clients", "crm") or {})["client"]["client_id"] == "registered-before"
    assert not list((tmp_path / "tokens").glob("*.json"))
    assert not list((tmp_path / "clients").glob("*.json"))
    assert await store.delete("tokens", "crm")  # logged out
    files.write("tokens", "crm", {"token": {"access_token": "stale"}})
    again = LocalStore(tmp_path)
    assert await again.read("tokens", "crm") is None
    # and the brokers read it as they read the files: a login of an earlier version
    # is used without a browser
    credentials = Credentials(again, "https://crm.example/mcp")
    await again.write("tokens", credentials.key, {"token": {"access_token": "a"}})
    await credentials.load()
    stored = credentials.stored()
    assert stored is not None and stored.token.access_token == "a"
    assert credentials.location == str(tmp_path / "tokens.db")


async def test_a_store_opening_a_sqlite_file_another_is_writing_waits_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas starting together on one SQLite file: each puts it in WAL mode as it opens
    it, which SQLite refuses at once ("database is locked", no busy wait) while another
    connection writes to it — the store asks again until it can, and opens it."""
    import threading

    from supervisor.auth import _backends

    path = tmp_path / "shared.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other (x)")
    other.execute("BEGIN IMMEDIATE")  # another replica, mid-write (not in WAL mode yet)
    other.execute("INSERT INTO other VALUES (1)")
    refused = threading.Event()

    def pause(seconds: float) -> None:
        refused.set()  # the store was refused, and waits to ask again
        threading.Event().wait(seconds)

    monkeypatch.setattr(_backends, "_pause", pause)
    store = SQLiteStore(path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.write, "tokens", "k", {"n": 1})
        with trio.fail_after(30):
            await trio.to_thread.run_sync(refused.wait, abandon_on_cancel=True)
        other.execute("COMMIT")
    assert await store.read("tokens", "k") == {"n": 1}
    other.close()
    await store.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "sqlite-sealed", "postgres"])
async def test_a_claim_is_taken_once_of_all_the_instances_until_it_ends(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """What a login link's ticket needs of a store replicas share: of many claims of one
    row at once, by two instances (two replicas), one takes it; it stays taken until its
    end, and a row past its end is taken anew (and removed by the next claim)."""
    import time

    if kind == "postgres":
        if needs_postgres.args[0]:
            pytest.skip(needs_postgres.kwargs["reason"])
        url = request.getfixturevalue("postgres_url")
        stores: list[Any] = [PostgresStore(url, Sealer(KEY)), PostgresStore(url, Sealer(KEY))]
    else:
        sealer = Sealer(KEY) if kind == "sqlite-sealed" else None
        path = tmp_path / "tokens.db"
        stores = [SQLiteStore(path, sealer), SQLiteStore(path, sealer)]
    first, second = stores
    key = os.urandom(4).hex()  # tests share the PostgreSQL server
    later = time.time() + 600
    taken: list[bool] = []
    async with trio.open_nursery() as nursery:
        for store in stores * 8:

            async def claim(store: Any = store) -> None:
                taken.append(await store.claim("tickets", key, later))

            nursery.start_soon(claim)
    assert sorted(taken) == [False] * 15 + [True]
    assert not await first.claim("tickets", key, later + 600)  # still taken
    assert await first.claim("tickets", f"{key}-ended", time.time() - 1)  # its end is past
    assert await second.claim("tickets", f"{key}-ended", later)  # free again: taken anew
    assert await first.claim("tickets", f"{key}-2", time.time() - 1)
    assert await second.claim("tickets", f"{key}-3", later)  # and the ended row removed
    assert await first.version("tickets", f"{key}-2") is None


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_sqlite_store_narrows_its_files_and_no_directory_it_did_not_make(
    tmp_path: Path,
) -> None:
    """``sqlite:///tmp/tokens.db``, and a ``sqlite:`` file beside a project's config: the
    directory keeps its mode (1777, 0755), whatever the umask; the file and SQLite's
    files beside it are 0600; directories the store makes are 0700; an existing
    database (and write-ahead log) of mode 0644 is narrowed to 0600."""
    shared = tmp_path / "tmp"
    project = tmp_path / "project"
    for folder, mode in ((shared, 0o1777), (project, 0o755)):
        folder.mkdir()
        folder.chmod(mode)
    old = os.umask(0)
    try:
        store = SQLiteStore(shared / "tokens.db")
        await store.write("tokens", "a", {"access_token": "x"})
        deeper = SQLiteStore(project / "auth" / "deeper" / "tokens.db")
        await deeper.write("tokens", "a", {"access_token": "x"})
        # while a connection is open, SQLite's files beside the database are there too
        with contextlib.closing(sqlite3.connect(shared / "tokens.db")) as connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(f"INSERT INTO {TABLE} VALUES ('k', 'k', x'00', 0)")
            beside = {p.name: _mode(p) for p in shared.iterdir()}
            connection.execute("ROLLBACK")
    finally:
        os.umask(old)
    assert _mode(shared) == 0o1777 and _mode(project) == 0o755
    assert beside == {"tokens.db": 0o600, "tokens.db-wal": 0o600, "tokens.db-shm": 0o600}
    assert _mode(project / "auth") == _mode(project / "auth" / "deeper") == 0o700
    assert _mode(project / "auth" / "deeper" / "tokens.db") == 0o600
    # made by someone else, or by an earlier version, 0644: narrowed when opened
    # a database made by SQLite under the umask 022 (0644, and so its write-ahead log
    # and index), in use by another process: the three narrowed when the store opens it
    wide = project / "wide.db"
    old = os.umask(0o022)
    try:
        with contextlib.closing(sqlite3.connect(wide)) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE t (x)")
    finally:
        os.umask(old)
    with contextlib.closing(sqlite3.connect(wide)) as connection:
        connection.execute("SELECT * FROM t")  # open: its log and index are there
        files = [project / f"wide.db{end}" for end in ("", "-wal", "-shm")]
        assert [_mode(path) for path in files] == [0o644] * 3
        assert await SQLiteStore(wide).read("tokens", "a") is None
        assert [_mode(path) for path in files] == [0o600] * 3
    assert _mode(project) == 0o755


async def test_a_sqlite_store_of_another_user_or_no_file_is_refused(tmp_path: Path) -> None:
    """A database, or a file SQLite keeps beside it, that belongs to another user (they
    could read or replace the credentials) is refused, saying what to do, and left as it
    is; so is what is no file (a FIFO planted there: refused, not waited on)."""
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo, 0o600)
    with trio.fail_after(10), pytest.raises(PermissionError, match="fifo.db is not a file"):
        await SQLiteStore(fifo).read("tokens", "a")
    if os.geteuid() != 0:
        pytest.skip("only root can make a file another user's")
    theirs = tmp_path / "theirs.db"
    theirs.write_bytes(b"")
    theirs.chmod(0o644)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(PermissionError) as refused:
        await SQLiteStore(theirs).write("tokens", "a", {"access_token": "x"})
    said = str(refused.value)
    assert f"{theirs} belongs to another user (uid 65534)" in said
    assert "remove it (as its owner), or name another file" in said
    assert _mode(theirs) == 0o644 and theirs.read_bytes() == b""
    mine = tmp_path / "mine.db"
    mine.write_bytes(b"")
    wal = tmp_path / "mine.db-wal"
    wal.write_bytes(b"")
    os.chown(wal, 65534, 65534)
    with pytest.raises(PermissionError, match="mine.db-wal belongs to another user"):
        await SQLiteStore(mine).read("tokens", "a")


def test_a_sqlite_store_beside_the_config_leaves_its_directory(tmp_path: Path) -> None:
    """``"url": "sqlite:shared.db"``: the file beside the config, the config's directory
    (0755) as it was."""
    from supervisor.config import load_config
    from supervisor.runtime import token_store

    tmp_path.chmod(0o755)
    config = tmp_path / "mcp.json"
    config.write_text(
        '{"mcpServers": {}, "supervisor": {"tokenStore": {"url": "sqlite:shared.db"}}}'
    )
    store = token_store(None, load_config(config))
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "shared.db"
    trio.run(store.read, "tokens", "a")
    assert _mode(tmp_path) == 0o755 and _mode(tmp_path / "shared.db") == 0o600


#: URLs of a PostgreSQL store with a password in them, each in another place libpq reads
#: one from (the user-info, the query, percent-escaped, a connection string)
SECRET_URLS = [
    "postgresql://mcp:hunter2-secret@db.example/mcp",
    "postgresql://mcp:h@db.example/mcp",  # however short
    "postgresql://mcp@db.example/mcp?sslmode=require&password=hunter2-secret",
    "postgresql://mcp@db.example/mcp?sslpassword=hunter2-secret",
    "postgresql://mcp@db.example/mcp?%70assword=hunter2-secret",
    "host=db.example user=mcp password='hunter2-secret' dbname=mcp",
]


def test_a_password_in_a_database_url_is_refused_wherever_libpq_would_read_it() -> None:
    """The config refuses a password in the token store's URL — in its query
    (``password=``, ``sslpassword=``, percent-escaped or not) as in its user-info —
    saying where to give it instead and quoting nothing; ``passfile`` (a file's name) is
    taken."""
    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    def refused(url: str) -> str:
        store = {"url": url, "keyEnv": "K"}
        with pytest.raises(ConfigError) as raised:
            load_config({"mcpServers": {}, "supervisor": {"tokenStore": store}})
        said = str(raised.value)
        assert "hunter2" not in said and "h@" not in said, said
        return said

    for url in SECRET_URLS[:3] + SECRET_URLS[4:5]:
        assert "supervisor.tokenStore.url: has a password in it" in refused(url)
        assert "$PGPASSWORD or ~/.pgpass" in refused(url)
    said = refused(SECRET_URLS[3])
    assert "has a password in it (sslpassword=" in said and "~/.pg_service.conf" in said
    url = "postgresql://mcp@db.example/mcp?passfile=/etc/mcp/pgpass&sslmode=verify-full"
    loaded = load_config(
        {"mcpServers": {}, "supervisor": {"tokenStore": {"url": url, "keyEnv": "K"}}}
    )
    assert loaded.settings.token_store is not None and loaded.settings.token_store.url == url


async def test_a_password_that_got_into_a_database_url_is_never_shown() -> None:
    """An embedder's store, whose URL the config did not check: its ``location`` (what
    ``auth status`` shows), the config struct's ``repr`` and the driver's error quoting
    the URL, or a part of it, show ``***`` where its password was."""
    import traceback

    import msgspec
    import psycopg

    from supervisor.config._model import TokenStoreSettings

    for url in SECRET_URLS:
        location = PostgresStore(url, Sealer(KEY)).location
        assert "hunter2" not in location and ":h@" not in location, location
        assert "***" in location and "db.example" in location, location
        shown = repr(msgspec.convert({"url": url}, TokenStoreSettings))
        assert "hunter2" not in shown and ":h@" not in shown and "***" in shown, shown
    for url in (
        "postgresql://mcp@[::1/mcp?password=hunter2-secret",  # psycopg quotes it whole
        "postgresql://mcp@db.example/mcp?password=hunter2-%ZZ",  # and a bad escape in it
    ):
        with pytest.raises(psycopg.ProgrammingError) as raised:
            await PostgresStore(url, Sealer(KEY)).read("tokens", "a")
        said = "".join(traceback.format_exception(raised.value))
        assert "hunter2" not in said and "***" in str(raised.value), said


@needs_postgres
async def test_auth_status_names_a_database_without_its_password(postgres_url: str) -> None:
    """``auth status --json``'s document of a server whose tokens are in a PostgreSQL
    store reached with a password in its URL (the test's server trusts any): the store
    is named, its password ``***``."""
    from supervisor.auth._service import AuthService
    from supervisor.cli._auth import _document
    from supervisor.config import load_config
    from tests.test_auth import entry

    url = postgres_url + "?password=hunter2-secret"
    config = load_config({"mcpServers": {"remote": entry("http://127.0.0.1:9/mcp")}})
    service = AuthService(
        list(config.servers.values()),
        store=PostgresStore(url, Sealer(KEY)),
        publish=lambda event: None,
        remember=lambda secret: None,
    )
    await service.load()
    printed = json.dumps([_document("remote", service.brokers["remote"].info())])
    assert "hunter2" not in printed
    assert postgres_url.removeprefix("postgresql://") + "?password=***" in printed
