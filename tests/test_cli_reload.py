"""A running ``serve`` takes its changed config live: the file watch (its debounce, on a
virtual clock), ``mcp-supervisor reload``, ``add`` and ``remove`` telling the running
gateway, the trust rule for a ``./.mcp.json`` found without ``--config``, SIGHUP still
stopping ``serve``, and the reload events reaching the dashboard's feed. The end-to-end
tests run ``serve`` and the CLI as real processes over real fixture servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from supervisor import open_supervisor
from supervisor.cli._reload import Reloader, change_lines, shown_field
from supervisor.cli._watch import POLL_INTERVAL, file_stat, watch_files
from supervisor.dashboard._feed import Hub, feed_message
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import serve_local
from supervisor.gateway._local import GatewayClient, local_socket
from supervisor.testing.servers import stdio_params

from .probes import answer_on_a_terminal
from .test_cli_signals import Cli, on_stderr, wait_until_gone

#: Generous: this machine may be busy, and a CLI process or a fixture server's start
#: takes seconds then.
COMMAND_TIMEOUT = 120
TOKEN = "reload-gateway-token-0123456789"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The CLI's environment: a runtime directory of the test's own (short enough for a
    Unix socket's path) and a state directory (the trust store) of its own."""
    runtime = Path(tempfile.mkdtemp(prefix="mcps-"))
    state = tmp_path / "state"
    environment = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    environment["MCP_SUPERVISOR_STATE_DIR"] = str(state)
    environment.pop("MCP_SUPERVISOR_GATEWAY_TOKEN", None)
    yield environment
    shutil.rmtree(runtime, ignore_errors=True)


def fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "initTimeout": 60, **extra}


def document(servers: dict[str, object]) -> str:
    return json.dumps({"mcpServers": servers}, indent=2)


def save(path: Path, text: str) -> None:
    """Write ``path`` as an editor does: a temporary file renamed over it."""
    temporary = path.with_name(path.name + ".swp")
    temporary.write_text(text)
    os.replace(temporary, path)


def unseen(path: Path, text: str) -> None:
    """Write ``text`` over the longer content of ``path`` in place, padded to its size,
    and give the file its modification time back: a change the file watch cannot see."""
    before = path.stat()
    data = text.encode()
    assert len(data) <= before.st_size
    path.write_bytes(data + b" " * (before.st_size - len(data)))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_stat(path) == (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns)


def mcp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def serving(*args: str, env: dict[str, str]) -> Cli:
    """``mcp-supervisor serve --http 127.0.0.1:0 ARGS`` once it listens (its local socket
    included: it is started before the HTTP listener)."""
    cli = Cli("serve", "--http", "127.0.0.1:0", *args, env=env)
    try:
        cli.wait_until(on_stderr("mcp-supervisor: gateway at "), "gateway")
    except BaseException:
        cli.kill()
        raise
    return cli


def settle(cli: Cli, text: str, count: int = 1) -> None:
    """Read ``serve``'s stderr until ``text`` has been said ``count`` times."""
    cli.wait_until(lambda c: c.err.decode().count(text) >= count, repr(text))


# -- the watch, on a virtual clock -------------------------------------------------------------


async def watching(
    nursery: trio.Nursery, paths: list[Path], calls: list[float], *, files: object = None
) -> float:
    """Watch ``paths`` (or what ``files()`` says), noting the time of each call; the time
    the watch started."""

    async def changed() -> None:
        calls.append(trio.current_time())

    named = files if callable(files) else (lambda: paths)
    await nursery.start(partial(watch_files, named, changed))
    return trio.current_time()


async def test_a_change_is_taken_once_it_has_settled(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """One write: taken at the second poll that sees it (the first only notes it), once;
    a write in two steps, seen half-done by one poll: taken once, when whole."""
    config = tmp_path / "mcp.json"
    config.write_text("{}")
    calls: list[float] = []
    async with trio.open_nursery() as nursery:
        start = await watching(nursery, [config], calls)
        await trio.sleep(POLL_INTERVAL / 2)
        config.write_text('{"mcpServers": {}}')
        await trio.sleep(POLL_INTERVAL)  # one poll has seen it: not yet
        assert calls == []
        await trio.sleep(POLL_INTERVAL)
        assert calls == [pytest.approx(start + 2 * POLL_INTERVAL)]
        await trio.sleep(5 * POLL_INTERVAL)  # as it is now: nothing more
        assert len(calls) == 1

        calls.clear()
        begun = trio.current_time()
        config.write_text('{"mcpServers": {"a": ')  # half written, seen so by a poll
        await trio.sleep(POLL_INTERVAL)
        config.write_text('{"mcpServers": {"a": {"command": "x"}}}')
        await trio.sleep(POLL_INTERVAL)
        assert calls == []  # each poll saw it changed since the one before
        await trio.sleep(POLL_INTERVAL)
        assert calls == [pytest.approx(begun + 2.5 * POLL_INTERVAL)]  # polls: A, B, B
        await trio.sleep(5 * POLL_INTERVAL)
        assert len(calls) == 1
        nursery.cancel_scope.cancel()


async def test_a_config_away_for_a_while_is_waited_for(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The config file gone (an editor between unlinking and renaming, for longer than a
    poll): nothing is taken while it is missing; its return is taken once."""
    config = tmp_path / "mcp.json"
    config.write_text("{}")
    calls: list[float] = []
    async with trio.open_nursery() as nursery:
        start = await watching(nursery, [config], calls)
        await trio.sleep(POLL_INTERVAL / 2)
        config.unlink()
        await trio.sleep(4 * POLL_INTERVAL)  # missing at four polls in a row
        assert calls == []
        save(config, '{"mcpServers": {}}')
        await trio.sleep(2 * POLL_INTERVAL)
        assert calls == [pytest.approx(start + 6 * POLL_INTERVAL)]
        await trio.sleep(5 * POLL_INTERVAL)
        assert len(calls) == 1
        nursery.cancel_scope.cancel()


async def test_the_files_it_pulls_in_are_watched_as_they_come(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A file the config comes to pull in (an ``envFile``) is taken as it is when first
    named; a later change to it is taken like one to the config; one gone for good
    (the config no longer names it, or it is deleted) counts once."""
    config, included = tmp_path / "mcp.json", tmp_path / "tasks.env"
    config.write_text("{}")
    included.write_text("A=1\n")
    named = [config]
    calls: list[float] = []
    async with trio.open_nursery() as nursery:
        await watching(nursery, [], calls, files=lambda: list(named))
        await trio.sleep(POLL_INTERVAL / 2)  # between two polls: no tie with one
        named.append(included)
        await trio.sleep(5 * POLL_INTERVAL)
        assert calls == []
        included.write_text("A=12\n")
        await trio.sleep(2 * POLL_INTERVAL)
        assert len(calls) == 1
        included.unlink()
        await trio.sleep(5 * POLL_INTERVAL)
        assert len(calls) == 2
        nursery.cancel_scope.cancel()


def test_what_changed_is_said_in_the_config_files_words() -> None:
    """One line per kind, fields as the file spells them; ``no change`` for none."""
    change = {
        "added": ["tasks"],
        "removed": ["x"],
        "replaced": {"y": ["command", "args"]},
        "changed": {"z": ["timeout", "init_timeout"]},
        "settings": ["local_backoff", "local_max_attempts", "request_timeout"],
        "needs_restart": ["auth_dir"],
    }
    assert change_lines(change) == [
        "added: tasks",
        "removed: x",
        "replaced: y (command, args)",
        "changed in place: z (timeout, initTimeout)",
        "settings applied: backoff.local, requestTimeout",
        "needs a restart of serve: authDir",
    ]
    assert change_lines({"added": [], "replaced": {}}) == ["no change"]
    assert shown_field("token_store") == "tokenStore"
    assert change_lines({"added": ["\x1b[2Jx"]}) == ["added: \\x1b[2Jx"]


# -- the local socket's route ------------------------------------------------------------------


async def test_reload_is_served_on_the_local_socket_only(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POST /reload`` applies the file on the local socket; over HTTP, a caller with the
    gateway's own token gets 404 (and the file is not applied)."""
    config = tmp_path / "mcp.json"
    config.write_text(document({"one": fixture("echo", lazy=False)}))
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    async with open_supervisor(str(config)) as sup, trio.open_nursery() as nursery:
        gateway = Gateway(sup)
        await nursery.start(gateway.run)
        reloader = Reloader(sup, str(config), chosen=True)
        await nursery.start(partial(serve_local, gateway, str(config), reload=reloader.answer))
        info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        config.write_text(document({"one": fixture("echo", lazy=False), "two": fixture("echo")}))
        remote = GatewayClient(url=info.url, token=TOKEN)
        status, answer = await trio.to_thread.run_sync(remote.post, "/reload", {})
        assert (status, "two" in sup.config.servers) == (404, False), answer
        local = GatewayClient(socket_path=local_socket(config))
        status, answer = await trio.to_thread.run_sync(local.post, "/reload", {})
        assert status == 200 and answer["change"]["added"] == ["two"], answer
        assert answer["servers"]["two"]["status"] == "connected"
        assert "two_echo" in {t["name"] for t in answer["servers"]["two"]["tools"]}
        nursery.cancel_scope.cancel()


# -- end to end: serve, reload, add, remove ----------------------------------------------------


def test_serve_applies_its_file_and_reload_says_what_changed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A running ``serve --config F``: an edit of F is applied by itself (the new server's
    tool is then callable through the gateway; one line on stderr); ``reload`` prints what
    changed (``--json`` too), refuses a broken file with exit 2 and its field-path errors
    (serve goes on, unchanged), and exits 1 once no gateway runs."""
    config = tmp_path / "mcp.json"
    config.write_text(document({"one": fixture("echo", lazy=False)}))
    path = str(config)
    cli = serving("--config", path, env=env)
    try:
        save(config, document({"one": fixture("echo", lazy=False), "two": fixture("echo")}))
        settle(cli, f"{path} reloaded (the file changed): added: two")
        called = mcp("call", "--config", path, "two_echo", '{"text": "hot"}', "--yes", env=env)
        assert (called.returncode, called.stdout) == (0, "hot\n"), called.stderr

        quiet = mcp("reload", "--config", path, env=env)
        assert (quiet.returncode, quiet.stdout) == (0, "no change\n"), quiet.stderr

        # a change the watch does not see (same size, inode and time): reload applies it
        unseen(config, document({"one": fixture("echo", lazy=False, timeout=7)}))
        done = mcp("reload", "--config", path, "--json", env=env)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        assert (said["removed"], said["changed"]) == (["two"], {"one": ["timeout"]})
        assert said["applied"] is True and said["added"] == []
        gone = mcp("call", "--config", path, "two_echo", '{"text": "hot"}', "--yes", env=env)
        assert gone.returncode == 2 and "UnknownTool" in gone.stderr, gone.stderr

        config.write_text('{"mcpServers": {"one": {"command": "x", "tiemout": 3}}}')
        refused = mcp("reload", "--config", path, "--json", env=env)
        assert refused.returncode == 2, refused.stderr
        assert 'mcpServers.one.tiemout: unknown field; did you mean "timeout"?' in refused.stderr
        said = json.loads(refused.stdout)
        assert (said["applied"], said["refused"]) == (False, "config")
        assert said["errors"][0]["path"] == "mcpServers.one.tiemout"
        settle(cli, "not applied (mcp-supervisor reload): mcpServers.one.tiemout")
        still = mcp("call", "--config", path, "one_echo", '{"text": "on"}', "--yes", env=env)
        assert (still.returncode, still.stdout) == (0, "on\n"), still.stderr
        assert cli.process.poll() is None
    finally:
        cli.process.send_signal(signal.SIGTERM)
        code = cli.finish()
        cli.kill()
    assert code == 143 and "Traceback" not in cli.err.decode()
    none = mcp("reload", "--config", path, env=env)
    assert none.returncode == 1 and "no gateway of" in none.stderr
    assert "mcp-supervisor serve --config" in none.stderr


def test_add_and_remove_tell_the_running_gateway(tmp_path: Path, env: dict[str, str]) -> None:
    """The day-one repro: with ``serve`` of a file running, ``add`` a server and the next
    ``call`` of its tool (through the gateway) is answered by it; ``remove`` it and the
    gateway lists its tools no more, and a call of one is an unknown tool."""
    config = tmp_path / "mcp.json"
    config.write_text(document({"one": fixture("echo", lazy=False)}))
    path = str(config)
    command, args = stdio_params("echo")
    cli = serving("--config", path, env=env)
    try:
        added = mcp("add", "tasks", "--config", path, "--", command, *args, env=env)
        assert added.returncode == 0, added.stderr
        lines = added.stdout.splitlines()
        assert lines[0] == f"added tasks in {path} (mcpServers)"
        assert lines[1].startswith("tasks: added to the running gateway, ")
        assert lines[1].endswith(" tools") and any(
            line.split()[0] == "tasks_echo" for line in lines[2:]
        )
        assert "until it restarts" not in added.stdout + added.stderr
        called = mcp("call", "--config", path, "tasks_echo", '{"text": "new"}', "--yes", env=env)
        assert (called.returncode, called.stdout) == (0, "new\n"), called.stderr
        status = mcp("status", "--config", path, "--json", env=env)
        pids = {r["server"]: r["pid"] for r in json.loads(status.stdout)["servers"]}
        assert pids["tasks"] in _children(cli.process.pid)  # the gateway's own

        removed = mcp("remove", "tasks", "--config", path, env=env)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.splitlines() == [
            f"removed tasks from {path} (mcpServers.tasks)",
            "tasks: removed from the running gateway",
        ]
        listed = mcp("tools", "--config", path, "--json", env=env)
        names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
        assert "one_echo" in names and not any(n.startswith("tasks_") for n in names)
        gone = mcp("call", "--config", path, "tasks_echo", '{"text": "x"}', "--yes", env=env)
        assert gone.returncode == 2 and "UnknownTool" in gone.stderr, gone.stderr
        assert wait_until_gone({pids["tasks"]}) == set()
    finally:
        cli.process.send_signal(signal.SIGTERM)
        cli.finish()
        cli.kill()


def _children(pid: int) -> set[int]:
    """Every process below ``pid``."""
    from .test_cli_signals import children

    found, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()):
            found.add(child)
            todo.append(child)
    return found


def test_a_default_file_changed_is_applied_only_once_trusted_again(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` of a ``./.mcp.json`` it found by itself (trusted with --trust-config):
    a change is said and not applied, ``reload`` exits 2 saying how to trust it (on a
    terminal it asks, showing what the file starts), and ``reload --trust-config``
    trusts it and applies it. SIGHUP then stops ``serve``
    (exit 129): it does not reload."""
    config = tmp_path / ".mcp.json"
    config.write_text(document({"one": fixture("echo", lazy=False)}))
    monkeypatch.chdir(tmp_path)
    cli = serving("--trust-config", env=env)
    try:
        save(config, document({"one": fixture("echo", lazy=False), "two": fixture("echo")}))
        settle(cli, ".mcp.json changed (its own content changed) and is not applied")
        refused = mcp("reload", env=env)
        assert refused.returncode == 2, refused.stderr
        assert "pass --trust-config" in refused.stderr and refused.stdout == ""
        listed = mcp("tools", "--json", env=env)
        assert not any(t["name"].startswith("two_") for t in json.loads(listed.stdout)["tools"])
        for name in ("XDG_RUNTIME_DIR", "MCP_SUPERVISOR_STATE_DIR"):
            monkeypatch.setenv(name, env[name])
        code, out, shown = answer_on_a_terminal(["reload"], b"n\n")  # asked, and refused
        assert (code, out) == (2, ""), shown
        assert ".mcp.json has changed since you trusted it: its own content changed." in shown
        assert "  two  stdio  " in shown and "reload: .mcp.json not trusted; nothing was" in shown

        trusted = mcp("reload", "--trust-config", env=env)
        assert (trusted.returncode, trusted.stdout) == (0, "added: two\n"), trusted.stderr
        called = mcp("call", "two_echo", '{"text": "ok"}', "--yes", env=env)
        assert (called.returncode, called.stdout) == (0, "ok\n"), called.stderr

        settle(cli, ".mcp.json reloaded (mcp-supervisor reload): added: two")
        reloads = cli.err.count(b" reloaded (")
        cli.process.send_signal(signal.SIGHUP)
        code = cli.finish()
    finally:
        cli.kill()
    err = cli.err.decode()
    assert code == 129, err
    assert "mcp-supervisor: hung up, stopping the servers" in err
    assert cli.err.count(b" reloaded (") == reloads


# -- the dashboard -------------------------------------------------------------------------------


async def test_reloads_and_refusals_reach_the_dashboards_feed(tmp_path: Path) -> None:
    """The dashboard's hub takes every event: a reload's ``supervisor.config.reloaded``
    and a refusal's ``supervisor.config.rejected`` are in the feed a page gets."""
    config = tmp_path / "mcp.json"
    config.write_text(document({}))
    async with open_supervisor(str(config)) as sup, trio.open_nursery() as nursery:
        hub = Hub()
        await nursery.start(hub.run, sup.subscribe)
        _, page = hub.join()
        reloader = Reloader(sup, str(config), chosen=True)
        config.write_text(document({"two": fixture("echo")}))
        assert (await reloader.apply(trigger="test"))[0] == 200
        config.write_text("{")
        assert (await reloader.apply(trigger="test"))[0] == 422
        wanted = {"supervisor.config.reloaded", "supervisor.config.rejected"}
        events = []
        with trio.fail_after(10):
            while not wanted <= {e.kind for e in events}:
                events += (await page.take(timeout=10))[0]
        frame = json.loads(feed_message("update", sup.status(), events))
        shown = {e["kind"]: e for e in frame["events"] if e["kind"] in wanted}
        assert shown["supervisor.config.reloaded"]["added"] == ["two"]
        assert shown["supervisor.config.rejected"]["errors"]
        nursery.cancel_scope.cancel()


async def test_a_reload_narrows_callers_by_the_new_policy_and_says_auth_needs_a_restart(
    tmp_path: Path,
) -> None:
    """``gateway.policy`` changed in the file: the next request of a caller is narrowed by
    the new rules; ``gateway.auth`` (and the replicas' key) changed: said to need a
    restart of serve, the rest applied."""
    from supervisor.gateway._policy import Policy
    from supervisor.gateway._resource import Caller

    command, args = stdio_params("echo")
    path = tmp_path / "team.json"

    def write(policy: list[object], issuer: str) -> None:
        gateway = {
            "policy": policy,
            "auth": {"issuer": issuer, "resource": "https://gateway.example/mcp"},
        }
        servers = {"echo": {"command": command, "args": args, "approve": False}}
        path.write_text(json.dumps({"mcpServers": servers, "supervisor": {"gateway": gateway}}))

    write([{"subjects": ["ada"]}], "https://one.example")
    alice = Caller(subject="alice")
    with trio.fail_after(COMMAND_TIMEOUT):
        async with open_supervisor(str(path)) as sup, trio.open_nursery() as nursery:
            gateway = Gateway(sup, policy=Policy(sup.config.settings.gateway.policy))  # type: ignore[union-attr]
            await nursery.start(gateway.run)
            assert not gateway.policy.grant(alice).sees("echo")
            reloader = Reloader(sup, str(path), chosen=True, gateway=gateway)
            write([{"subjects": ["ada", "alice"]}], "https://two.example")
            status, answer = await reloader.apply(trigger="a test")
            assert status == 200 and answer["change"]["needs_restart"] == ["gateway.auth"]  # type: ignore[index]
            assert gateway.policy.grant(alice).sees("echo")
            nursery.cancel_scope.cancel()
