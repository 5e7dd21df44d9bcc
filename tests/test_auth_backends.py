"""The token stores a team gateway's replicas share (supervisor.auth._backends): SQLite
for one machine, PostgreSQL for replicas — a real server of the test's own (tests/
postgres.py). Each keeps what it is given, sealed at rest when it has a key (a row read
under another key, or copied to another key's place, does not open), and lets one
holder at a time into a row's exclusive section, across store instances as across
processes: replicas that find a user's token expired together refresh it once."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.auth._backends import PostgresStore, Sealer, SQLiteStore, TokenStore
from tests.postgres import needs_postgres, postgres_server

KEY = b"s" * 32


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "sqlite-sealed", "postgres"])
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
