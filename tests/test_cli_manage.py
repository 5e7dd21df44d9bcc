"""add, remove and list: the user's config file edited in its own format, nothing else in
it changed; secrets asked for without echo and kept out of the config; the new server
started once and its tools shown."""

from __future__ import annotations

import json
import pathlib
import stat
import subprocess
import sys

import pytest

from supervisor.cli import main
from supervisor.cli._trust import Trusted, TrustStore, digest, trusted_now
from supervisor.config import load_config

CLAUDE = """{
    "preferences": {"theme": "dark"},
    "mcpServers": {
        "notes": {
            "command": "notes-server",
            "args": ["--db", "notes.db"]
        }
    },
    "zz": 1
}
"""
CLAUDE_ADDED = (
    '"notes.db"]\n        }',
    ',\n        "new": {\n            "command": "run-it",\n            "args": [\n'
    '                "--flag"\n            ],\n            "env": {\n                '
    '"MODE": "fast"\n            }\n        }',
)

OPENCODE = """{
\t"$schema": "https://opencode.ai/config.json",
\t// the servers
\t"mcp": {
\t\t"notes": {"type": "local", "command": ["notes-server"]}, // keep this comment
\t\t/* and this one */
\t\t"web": {"type": "remote", "url": "https://example.com/mcp"},
\t},
\t"model": "anthropic/claude",
}
"""
OPENCODE_ADDED = (
    '"https://example.com/mcp"},',
    '\n\t\t"new": {\n\t\t\t"type": "local",\n\t\t\t"command": [\n\t\t\t\t"run-it",'
    '\n\t\t\t\t"--flag"\n\t\t\t],\n\t\t\t"environment": {\n\t\t\t\t"MODE": "fast"'
    "\n\t\t\t}\n\t\t},",
)

VSCODE = (
    '{\r\n  "inputs": [],\r\n  "servers": {\r\n    "notes": {"type": "stdio", "command": '
    '"notes-server"}\r\n  }\r\n}\r\n'
)
VSCODE_ADDED = (
    '"notes-server"}',
    ',\r\n    "new": {\r\n      "type": "stdio",\r\n      "command": "run-it",\r\n'
    '      "args": [\r\n        "--flag"\r\n      ],\r\n      "env": {\r\n        '
    '"MODE": "fast"\r\n      }\r\n    }',
)


@pytest.fixture(autouse=True)
def state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setenv("MCP_SUPERVISOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "state"


@pytest.mark.parametrize(
    ("original", "added"),  # added: (what the entry follows, the text added after it)
    [
        pytest.param(CLAUDE, CLAUDE_ADDED, id="mcpServers-4-spaces"),
        pytest.param(OPENCODE, OPENCODE_ADDED, id="opencode-mcp-tabs-jsonc"),
        pytest.param(VSCODE, VSCODE_ADDED, id="vscode-servers-crlf"),
    ],
)
def test_add_then_remove_changes_only_the_entry(
    tmp_path: pathlib.Path,
    original: str,
    added: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """add writes the entry in the section's own format, in the file's indentation and
    line endings, after the last entry, every other key, comment and the file's mode as
    they were; remove gives back the original file byte for byte."""
    path = tmp_path / "client.json"
    path.write_bytes(original.encode())
    path.chmod(0o640)
    add = ["add", "new", "--config", str(path), "--env", "MODE=fast", "--no-connect"]
    assert main([*add, "--", "run-it", "--flag"]) == 0
    anchor, inserted = added
    assert path.read_bytes().decode() == original.replace(anchor, anchor + inserted)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    server = load_config(path).servers["new"]
    assert (server.command, server.args, server.env) == ("run-it", ("--flag",), {"MODE": "fast"})

    assert main(["remove", "new", "--config", str(path)]) == 0
    assert path.read_bytes().decode() == original
    out = capsys.readouterr().out
    assert "running gateway" not in out  # none runs: nothing more to say


def test_add_creates_the_default_file_and_lists_it(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --config, add creates ./.mcp.json (trusted: it holds what was typed); list
    shows name, type, command or URL and flags without starting anything, as a table or
    one JSON document."""
    assert main(["add", "local", "--no-connect", "--", "server-cmd", "--token", "s3cret"]) == 0
    assert main(["add", "web", "--url", "wss://example.com/ws", "--no-connect"]) == 0
    assert main(["add", "old", "--url", "https://h.example/sse", "--transport", "sse",
                 "--no-connect"]) == 0  # fmt: skip
    config = json.loads((tmp_path / ".mcp.json").read_text())
    assert config["mcpServers"]["web"] == {"type": "ws", "url": "wss://example.com/ws"}
    assert config["mcpServers"]["old"] == {"type": "sse", "url": "https://h.example/sse"}
    assert trusted_now(".mcp.json") is not None
    capsys.readouterr()

    assert main(["list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "local  stdio   server-cmd --token ***  (lazy)",
        "web    ws      wss://example.com/ws  (lazy)",
        "old    sse     https://h.example/sse  (lazy)",
    ]
    assert main(["list", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["path"] == ".mcp.json"
    assert document["servers"][1] == {
        "name": "web", "type": "ws", "target": "wss://example.com/ws",
        "disabled": False, "lazy": True,
    }  # fmt: skip


def test_editing_keeps_a_trusted_file_trusted_and_an_untrusted_one_not(
    tmp_path: pathlib.Path,
) -> None:
    """add and remove carry a trusted file's trust over to its new content; they never
    make an untrusted file trusted."""
    path = tmp_path / ".mcp.json"
    path.write_text(CLAUDE)
    assert main(["add", "a", "--no-connect", "--", "x"]) == 0
    assert TrustStore().get(path) is None
    TrustStore().remember(path, Trusted(digest(path) or ""))
    assert main(["remove", "a"]) == 0
    assert trusted_now(path) is not None


def test_a_secret_is_asked_without_echo_and_kept_in_a_private_env_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--env KEY asks with getpass (no echo) on a terminal and writes the value to
    .mcp-supervisor/NAME.env (0600, directory 0700, ignored by git) which the entry names
    as its envFile; the config never holds it; remove deletes that file."""
    secret = 'pa"ss\\n w#rd'
    asked = []

    def getpass(prompt: str, stream: object = None) -> str:
        asked.append((prompt, stream))
        return secret

    monkeypatch.setattr("getpass.getpass", getpass)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    assert main(["add", "gh", "--env", "TOKEN", "--env", "MODE=1", "--no-connect",
                 "--", "gh-server"]) == 0  # fmt: skip
    assert asked == [("TOKEN for gh (not echoed): ", sys.stderr)]
    text = (tmp_path / ".mcp.json").read_text()
    assert secret not in text and "pa" not in text
    entry = json.loads(text)["mcpServers"]["gh"]
    assert entry == {"command": "gh-server", "env": {"MODE": "1"},
                     "envFile": ".mcp-supervisor/gh.env"}  # fmt: skip
    env_dir = tmp_path / ".mcp-supervisor"
    assert stat.S_IMODE(env_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((env_dir / "gh.env").stat().st_mode) == 0o600
    assert (env_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert load_config(tmp_path / ".mcp.json").servers["gh"].env == {
        "TOKEN": secret, "MODE": "1"
    }  # fmt: skip
    out, err = capsys.readouterr()
    assert "TOKEN kept in .mcp-supervisor/gh.env (0600), not in the config" in out
    assert "pa" not in out + err
    trusted = trusted_now(tmp_path / ".mcp.json")  # created here: it and its env file
    assert trusted is not None and str(env_dir / "gh.env") in trusted.files

    assert main(["remove", "gh"]) == 0
    assert not (env_dir / "gh.env").exists()
    assert "deleted its env file .mcp-supervisor/gh.env" in capsys.readouterr().out
    assert trusted_now(tmp_path / ".mcp.json") is not None


def test_secrets_are_never_written_through_a_linked_env_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cloned repository's .mcp-supervisor may be a symbolic link to a directory of the
    user's: add --env KEY refuses it (exit 1) without chmodding or writing there, and
    remove deletes nothing through it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    (elsewhere / "gh.env").write_text("the user's own\n")
    (tmp_path / ".mcp-supervisor").symlink_to(elsewhere)
    entry = {"command": "gh-server", "envFile": ".mcp-supervisor/gh.env"}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"gh": entry}}))
    monkeypatch.setattr("getpass.getpass", lambda prompt, stream=None: "s3cret-value")
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    add = ["add", "new", "--env", "TOKEN", "--no-connect", "--", "new-server"]
    assert main(add) == 1
    assert "it is a symbolic link: secrets are written only to a real directory" in (
        capsys.readouterr().err
    )
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755
    assert sorted(p.name for p in elsewhere.iterdir()) == ["gh.env"]

    assert main(["remove", "gh"]) == 0
    assert (elsewhere / "gh.env").read_text() == "the user's own\n"
    assert "its env file .mcp-supervisor/gh.env is left as it is" in capsys.readouterr().out


def test_a_secret_without_a_terminal_is_an_error_and_nothing_is_written(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Headless, --env KEY without a value exits 2 saying to give KEY=VALUE or use an env
    file; no file is created."""
    assert main(["add", "gh", "--env", "TOKEN", "--", "gh-server"]) == 2
    assert "give --env TOKEN=VALUE, or set it in .mcp-supervisor/gh.env" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / ".mcp.json").exists()


def test_add_refuses_what_the_config_would_refuse(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name already configured (without --force), a bad URL and a bad name exit 2 with
    the field path, the file untouched; --force replaces the entry in place."""
    path = tmp_path / ".mcp.json"
    path.write_text(CLAUDE)
    assert main(["add", "notes", "--no-connect", "--", "x"]) == 2
    assert main(["add", "w", "--url", "ftp://h/mcp", "--no-connect"]) == 2
    assert main(["add", "bad name", "--no-connect", "--", "x"]) == 2
    err = capsys.readouterr().err
    assert "mcpServers.notes: a server of this name is already configured" in err
    assert "give --force to replace it" in err
    assert "mcpServers.w.url: URL must start with http:// or https://" in err
    assert "invalid server name 'bad name'" in err
    assert path.read_text() == CLAUDE
    assert main(["add", "notes", "--force", "--no-connect", "--", "x"]) == 0
    assert path.read_text() == CLAUDE.replace(
        '{\n            "command": "notes-server",\n            "args": ["--db", "notes.db"]'
        "\n        }",
        '{\n            "command": "x"\n        }',
    )


def test_add_connects_once_and_prints_the_tools(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After adding, the new server alone is started once and its tools printed: name
    and the first line of the description."""
    fixture = [sys.executable, "-m", "supervisor.testing.servers", "echo"]
    # a generous handshake bound: a loaded machine can take more than the 10 s default
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}, "supervisor": {"initTimeout": 60}}')
    assert main(["add", "echo", "--config", ".mcp.json", "--", *fixture]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["added echo in .mcp.json (mcpServers)", "echo: connected, 3 tools"]
    assert "  echo_echo   Return `text` unchanged." in out


def test_a_server_that_does_not_start_is_said_with_the_fix_and_stays_added(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new server that fails to start: exit 1, its error, and how to fix or remove the
    entry, which stays in the file."""
    code = "raise SystemExit(3)"
    assert main(["add", "broken", "--", sys.executable, "-c", code]) == 1
    err = capsys.readouterr().err
    assert "mcp-supervisor add: broken did not start:" in err and "code 3" in err
    assert "broken stays in .mcp.json" in err and "`mcp-supervisor remove broken`" in err
    assert "broken" in json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]


def test_remove_of_an_unknown_name_says_which_there_are(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """remove NAME that is not configured exits 2 naming the configured servers."""
    (tmp_path / ".mcp.json").write_text(CLAUDE)
    assert main(["remove", "nope"]) == 2
    assert '.mcp.json: no server named "nope" (configured: notes)' in capsys.readouterr().err
    assert (tmp_path / ".mcp.json").read_text() == CLAUDE


@pytest.mark.parametrize(
    "audit",
    [
        pytest.param("victim.txt", id="an-existing-file"),
        pytest.param("made/by/the/file/audit.log", id="a-new-directory"),
    ],
)
def test_add_applies_nothing_of_an_untrusted_files_settings(
    tmp_path: pathlib.Path, audit: str
) -> None:
    """The attack: a cloned .mcp.json, never trusted, whose supervisor section points the
    audit log at a file of the user's (or a directory to make) and the auth directory
    elsewhere. A real `mcp-supervisor add` edits the file and starts the new server — with
    the default settings: nothing is created, opened for writing or chmodded where the file
    says, and it says why its settings were passed over."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file, without a final newline")
    victim.chmod(0o644)
    settings = {"audit": {"path": audit}, "authDir": "tokens-here"}
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {}, "supervisor": settings}))
    fixture = [sys.executable, "-m", "supervisor.testing.servers", "echo"]
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "add", "echo", "--", *fixture],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "added echo in .mcp.json (mcpServers)",
        "echo: connected, 3 tools",
    ]
    assert "echo" in json.loads(config.read_text())["mcpServers"]
    assert (
        "mcp-supervisor add: .mcp.json is not trusted, so its supervisor section is not "
        "applied here: echo is started with the default settings"
    ) in " ".join(done.stderr.split())
    assert victim.read_text() == "the user's own file, without a final newline"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not (tmp_path / "made").exists()
    assert not (tmp_path / "tokens-here").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mcp.json", "victim.txt"]
