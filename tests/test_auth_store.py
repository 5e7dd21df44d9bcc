"""The OAuth token store: private modes whatever the umask, atomic writes, one file per
resource × account, damaged files treated as absent."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from supervisor.auth._store import AuthStore, Credentials, default_auth_dir

RESOURCE = "https://mcp.example.com/mcp"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_private_modes_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = AuthStore(tmp_path / "auth")
        creds = Credentials(store, RESOURCE)
        await creds.set_tokens(OAuthToken(access_token="a" * 20, expires_in=60))
        await creds.set_client_info(
            OAuthClientInformationFull(client_id="c", redirect_uris=None)  # type: ignore[arg-type]
        )
    finally:
        os.umask(old)
    assert mode(tmp_path / "auth") == 0o700
    for kind in ("tokens", "clients"):
        assert mode(tmp_path / "auth" / kind) == 0o700
        (path,) = (tmp_path / "auth" / kind).iterdir()
        assert mode(path) == 0o600


async def test_a_loose_directory_is_tightened(tmp_path: Path) -> None:
    root = tmp_path / "auth"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    await Credentials(AuthStore(root), RESOURCE).set_tokens(OAuthToken(access_token="t" * 20))
    assert mode(root) == 0o700


async def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = AuthStore(tmp_path)
    creds = Credentials(store, RESOURCE)
    await creds.set_tokens(OAuthToken(access_token="old-token-value", refresh_token="r1-value"))

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        await creds.set_tokens(OAuthToken(access_token="new-token-value", refresh_token="r2"))
    monkeypatch.undo()
    stored = await creds.get_tokens()
    assert stored is not None and stored.access_token == "old-token-value"
    assert [p.name for p in (tmp_path / "tokens").iterdir()] == [f"{creds.key}.json"]


async def test_accounts_and_resources_are_stored_apart(tmp_path: Path) -> None:
    store = AuthStore(tmp_path)
    work = Credentials(store, RESOURCE, "work")
    home = Credentials(store, RESOURCE, "home")
    other = Credentials(store, "https://other.example.com/mcp", "work")
    assert len({work.key, home.key, other.key}) == 3
    await work.set_tokens(OAuthToken(access_token="work-token-value"))
    await home.set_tokens(OAuthToken(access_token="home-token-value"))
    assert (await work.get_tokens()).access_token == "work-token-value"  # type: ignore[union-attr]
    assert (await home.get_tokens()).access_token == "home-token-value"  # type: ignore[union-attr]
    assert await other.get_tokens() is None
    assert work.key.startswith("mcp.example.com-")


async def test_expiry_is_stored_absolute_and_a_damaged_file_is_absent(tmp_path: Path) -> None:
    creds = Credentials(AuthStore(tmp_path), RESOURCE, clock=lambda: 1000.0)
    await creds.set_tokens(OAuthToken(access_token="x" * 20, expires_in=3600, scope="a b"))
    stored = creds.stored()
    assert stored is not None and stored.expires_at == 4600.0 and stored.saved_at == 1000.0
    path = tmp_path / "tokens" / f"{creds.key}.json"
    assert json.loads(path.read_text())["resource"] == RESOURCE
    path.write_text("{not json")
    # read again (get_tokens loads the row): the damaged file is as good as none
    assert await creds.get_tokens() is None and creds.stored() is None


def test_the_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SUPERVISOR_AUTH_DIR", "/somewhere/else")
    assert default_auth_dir() == Path("/somewhere/else")
    monkeypatch.delenv("MCP_SUPERVISOR_AUTH_DIR")
    assert default_auth_dir() == Path.home() / ".mcp-supervisor" / "auth"
