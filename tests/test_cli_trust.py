"""Trusting the default config file: ./.mcp.json is used only once trusted — asked on a
terminal, or --trust-config — and a trusted content is remembered until it changes.

The commands run in this process (``supervisor.cli.main``) with standard input and error
on a pseudo-terminal where a terminal is needed; the config's one server, if it is ever
started, leaves a marker file and exits, so each test sees whether anything was started.
"""

from __future__ import annotations

import json
import os
import pathlib
import pty
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from supervisor.cli import main

from .probes import answer_on_a_terminal, rest_of_terminal

TIMEOUT = 60


@pytest.fixture
def project(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """A working directory holding a .mcp.json whose server leaves ``started`` behind; the
    state directory in ``tmp_path/state``."""
    home = tmp_path / "project"
    home.mkdir()
    monkeypatch.chdir(home)
    monkeypatch.setenv("MCP_SUPERVISOR_STATE_DIR", str(tmp_path / "state"))
    code = f"open({str(home / 'started')!r}, 'w').close(); raise SystemExit(1)"
    server = {"command": sys.executable, "args": ["-c", code], "maxRestarts": 0}
    (home / ".mcp.json").write_text(json.dumps({"mcpServers": {"marker": server}}, indent=2))
    yield home


class Terminal:
    """Standard input and standard error on a pseudo-terminal, for ``main`` in-process
    (set up in the test's body: pytest sets its own ``sys.stderr`` before each phase)."""

    def __enter__(self) -> Terminal:
        self.controller, terminal = pty.openpty()
        self.stdin = open(terminal, encoding="utf-8", closefd=False)  # noqa: SIM115
        self.stderr = open(terminal, "w", encoding="utf-8")  # noqa: SIM115
        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(sys, "stdin", self.stdin)
        self.patch.setattr(sys, "stderr", self.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        self.patch.undo()
        self.stdin.close()
        self.stderr.close()
        os.close(self.controller)

    def type(self, text: str) -> None:
        os.write(self.controller, text.encode())

    def shown(self) -> str:
        """What the terminal has shown since the last call."""
        self.stderr.flush()
        out = rest_of_terminal(self.controller)
        return out.decode(errors="replace").replace("\r\n", "\n")


def started(project: pathlib.Path) -> bool:
    marker = project / "started"
    found = marker.exists()
    marker.unlink(missing_ok=True)
    return found


def test_yes_on_a_terminal_starts_the_servers_and_is_remembered(
    project: pathlib.Path,
) -> None:
    """On a terminal the untrusted default file's servers and commands are shown and y
    trusts it: the server starts, and its hash is kept in a 0600 file in a 0700
    directory, so the next run (here without a terminal) is not asked."""
    with Terminal() as terminal:
        terminal.type("y\n")
        assert main(["tools"]) == 1  # the marker server fails, after starting
        shown = terminal.shown()
    assert ".mcp.json is not trusted yet. It can start these servers:" in shown
    assert f"marker  stdio   {sys.executable} -c" in shown
    assert "Trust .mcp.json (asked again if it changes)? [y/N]" in shown
    assert started(project)
    state = project.parent / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "trusted-configs.json").stat().st_mode) == 0o600
    stored = json.loads((state / "trusted-configs.json").read_text())["files"]
    assert list(stored) == [str(project / ".mcp.json")]

    assert main(["tools"]) == 1  # headless now: remembered, not refused
    assert started(project)


def test_no_on_a_terminal_starts_nothing(project: pathlib.Path) -> None:
    """Anything but y or yes refuses: exit 2, nothing started, nothing remembered."""
    with Terminal() as terminal:
        terminal.type("\n")
        assert main(["tools"]) == 2
        assert "tools: .mcp.json not trusted; nothing was started" in terminal.shown()
    assert not started(project)
    assert not (project.parent / "state").exists()


def test_without_a_terminal_the_default_file_is_refused_saying_how_to_trust_it(
    project: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Headless, an untrusted ./.mcp.json is not used (exit 2), and the message names
    its commands and both ways to trust it."""
    assert main(["status"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "mcp-supervisor status: .mcp.json is not trusted yet" in err
    assert f"(here marker: {sys.executable} -c" in err
    assert "pass --trust-config to trust it, or --config .mcp.json to choose it" in err
    assert not started(project)


def test_trust_config_trusts_it_without_asking_and_remembers_it(
    project: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--trust-config uses the default file headless, and the trust outlives the run."""
    assert main(["tools", "--trust-config"]) == 1
    assert started(project)
    assert main(["tools"]) == 1
    assert started(project)
    assert "not trusted" not in capsys.readouterr().err


def test_config_option_chooses_and_trusts_a_file(
    project: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--config F is used without a question and without remembering anything."""
    assert main(["tools", "--config", ".mcp.json"]) == 1
    assert started(project)
    assert not (project.parent / "state").exists()


def test_a_changed_file_is_asked_about_again(
    project: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once the trusted file changes it is refused headless and asked about again on a
    terminal, saying that it changed."""
    assert main(["tools", "--trust-config"]) == 1
    assert started(project)
    config = project / ".mcp.json"
    config.write_text(config.read_text() + "\n")
    assert main(["tools"]) == 2
    assert not started(project)
    assert ".mcp.json has changed since it was trusted" in capsys.readouterr().err
    with Terminal() as terminal:
        terminal.type("yes\n")
        assert main(["tools"]) == 1
        assert ".mcp.json has changed since you trusted it: its own content changed." in (
            terminal.shown()
        )
    assert started(project)


def test_no_config_at_all_is_a_usage_error_saying_what_to_do(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --config and without ./.mcp.json: exit 2, naming --config and `add`; no
    ancestor directory's .mcp.json is used."""
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}}')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["tools", "--trust-config"]) == 2
    err = capsys.readouterr().err
    assert "mcp-supervisor tools: no config file: pass --config F, or create .mcp.json" in err
    assert "`mcp-supervisor add NAME -- COMMAND ARGS...` creates it" in err


def test_check_reads_the_default_file_without_asking(
    project: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check starts nothing, so it validates an untrusted ./.mcp.json without trust."""
    assert main(["check"]) == 0
    assert capsys.readouterr().out.startswith(".mcp.json: 1 server")
    assert not started(project)


def test_the_prompt_on_a_real_terminal(project: pathlib.Path) -> None:
    """The installed command asks on its terminal before starting anything, and y starts
    the servers (one process end to end)."""
    before: list[bool] = []  # whether it had started anything when asked
    code, _, shown = answer_on_a_terminal(
        ["tools"], b"y\n", before_answer=lambda: before.append(started(project))
    )
    assert before == [False]  # nothing before the answer
    assert code == 1
    assert "It can start these servers:" in shown
    assert started(project)


def test_processes_trusting_files_at_once_lose_no_entry(tmp_path: pathlib.Path) -> None:
    """Six processes each remember 25 files in one trust store at the same moment: every
    one of the 150 entries is there afterwards (each change is made under a lock)."""
    state = tmp_path / "state"
    code = (
        "import sys; from supervisor.cli._trust import Trusted, TrustStore\n"
        "store = TrustStore(sys.argv[1]); sys.stdin.read()  # go\n"
        "for i in range(25): store.remember(f'{sys.argv[2]}/{i}.json', Trusted(str(i)))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(state), str(tmp_path / f"p{n}")],
            stdin=subprocess.PIPE,
        )
        for n in range(6)
    ]
    for proc in procs:  # all started before any goes
        assert proc.stdin is not None
        proc.stdin.close()
    assert [proc.wait(timeout=TIMEOUT) for proc in procs] == [0] * 6
    files = json.loads((state / "trusted-configs.json").read_text())["files"]
    assert len(files) == 150
    assert files[os.path.realpath(tmp_path / "p3" / "7.json")] == {"sha256": "7", "included": {}}


def supervisor_command(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed command run headless (stdin not a terminal) in the working directory."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def evil_python_path(project: pathlib.Path) -> pathlib.Path:
    """A directory whose ``sitecustomize.py`` leaves ``pwned`` in the project: any Python
    started with it on ``PYTHONPATH`` runs it first."""
    evil = project / "evil"
    evil.mkdir()
    marker = project / "pwned"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return evil


def with_server_field(project: pathlib.Path, **fields: object) -> None:
    """The project's one server with ``fields`` added."""
    config = project / ".mcp.json"
    document = json.loads(config.read_text())
    document["mcpServers"]["marker"].update(fields)
    config.write_text(json.dumps(document, indent=2))


def test_a_changed_env_file_is_asked_about_again_and_what_it_sets_never_runs(
    project: pathlib.Path,
) -> None:
    """The attack: a trusted .mcp.json names envFile .env; .env is then changed to put a
    directory with a sitecustomize.py on PYTHONPATH. The next `tools` refuses (headless),
    naming .env and the remedy, and nothing runs; trusting it again runs it (so the
    refusal is all that stood between)."""
    (project / ".env").write_text("MODE=safe\n")
    with_server_field(project, envFile=".env")
    assert supervisor_command("tools", "--trust-config").returncode == 1
    assert started(project)
    assert supervisor_command("tools").returncode == 1  # trusted: not asked again
    assert started(project)

    (project / ".env").write_text(f"PYTHONPATH={evil_python_path(project)}\n")
    done = supervisor_command("tools")
    assert done.returncode == 2
    err = " ".join(done.stderr.split())
    assert (
        "mcp-supervisor tools: .mcp.json has changed since it was trusted: .env "
        "(mcpServers.marker.envFile) changed, and a config file can start any program"
    ) in err
    assert "pass --trust-config to trust it, or --config .mcp.json to choose it" in err
    assert not started(project)
    assert not (project / "pwned").exists()

    assert supervisor_command("tools", "--trust-config").returncode == 1
    assert (project / "pwned").exists() and started(project)


def test_an_env_file_missing_when_trusted_is_a_change_once_it_appears(
    project: pathlib.Path,
) -> None:
    """An envFile that was missing when the config was trusted is remembered as missing:
    one created afterwards is asked about before anything runs."""
    with_server_field(project, envFile=".env")
    assert supervisor_command("tools", "--trust-config").returncode == 1
    assert not started(project)  # the server is invalid without its env file

    (project / ".env").write_text(f"PYTHONPATH={evil_python_path(project)}\n")
    done = supervisor_command("tools")
    assert done.returncode == 2
    assert ".env (mcpServers.marker.envFile) was missing then and exists now" in done.stderr
    assert not started(project)
    assert not (project / "pwned").exists()


def test_a_changed_fault_plan_file_is_asked_about_again(project: pathlib.Path) -> None:
    """A trusted config's fault plan file changed (to duplicate every tools/call, say) is
    refused headless, naming the plan, before any server starts."""
    plan = project / "plan.json"
    plan.write_text("[]")
    with_server_field(project, faults="plan.json")
    assert supervisor_command("tools", "--trust-config").returncode == 1
    assert started(project)

    plan.write_text(json.dumps([{"when": {"method": "tools/call"}, "do": "duplicate"}]))
    done = supervisor_command("tools")
    assert done.returncode == 2
    err = " ".join(done.stderr.split())
    assert ".mcp.json has changed since it was trusted: plan.json (mcpServers.marker.faults)" in err
    assert not started(project)


def test_the_question_names_the_included_files_and_which_changed(project: pathlib.Path) -> None:
    """On a terminal, the question lists the files the config pulls in, and after a change
    says which one changed; yes trusts the new content."""
    (project / ".env").write_text("MODE=safe\n")
    with_server_field(project, envFile=".env")
    with Terminal() as terminal:
        terminal.type("y\n")
        assert main(["tools"]) == 1
        shown = terminal.shown()
    assert "and pulls in these files, trusted with it (a change to one asks again):" in shown
    assert "  .env  (mcpServers.marker.envFile)" in shown
    assert started(project)

    (project / ".env").write_text("MODE=other\n")
    with Terminal() as terminal:
        terminal.type("y\n")
        assert main(["tools"]) == 1
        shown = terminal.shown()
    assert (
        ".mcp.json has changed since you trusted it: .env (mcpServers.marker.envFile) changed."
    ) in shown
    assert started(project)
    assert main(["tools"]) == 1  # headless: the new content is the trusted one
    assert started(project)
