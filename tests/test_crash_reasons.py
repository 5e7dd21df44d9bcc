"""A local server's failure says why: a crash's reason names the stderr line that says
what went wrong (not Node's closing ``Node.js v20`` line), ``status --json`` and
``mcp.local.crashed`` keep the tail; a handshake timeout shows what the server wrote and,
for a launcher that downloads its package on a first run (``npx`` …), says so; the
health record lists a running server's process family, and a launcher killed alone
takes its real server with it before the restart (supervisor.transports._diagnosis,
supervisor.transports._stdio)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import sys
import textwrap

import pytest
import trio

from supervisor import open_supervisor
from supervisor.monitor._metrics import status_document
from supervisor.server._health import Health
from supervisor.testing.servers import stdio_params
from supervisor.transports._diagnosis import downloader, error_line

from .probes import running, until

#: Generous: this machine may be busy.
TIMEOUT = 60

NODE_CRASH = """\
notes: connecting to the database
[eval]:1
function connect() { throw new Error('connect ECONNREFUSED 127.0.0.1:5432') } connect()
                     ^

Error: connect ECONNREFUSED 127.0.0.1:5432
    at connect ([eval]:1:21)
    at [eval]:1:72
    at runScriptInThisContext (node:internal/vm:209:10)
    at node:internal/process/execution:118:14
    at [eval]-wrapper:6:24
    at runScript (node:internal/process/execution:101:62)
    at evalScript (node:internal/process/execution:133:3)
    at node:internal/main/eval_string:51:3

Node.js v20.20.2"""

NODE_MODULE_NOT_FOUND = """\
node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/app/dist/index.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at Module._load (node:internal/modules/cjs/loader:1038:27)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2"""

PYTHON_TRACEBACK = """\
Traceback (most recent call last):
  File "/srv/notes/server.py", line 3, in <module>
    import notes_db
ModuleNotFoundError: No module named 'notes_db'"""

PYTHON_OWN_EXCEPTION = """\
Traceback (most recent call last):
  File "/srv/notes/server.py", line 9, in <module>
    raise SettingsMissing("NOTES_FILE")
__main__.SettingsMissing: NOTES_FILE
closing the log"""

NPM_8_NOT_FOUND = """\
npm ERR! code E404
npm ERR! 404 Not Found - GET https://registry.npmjs.org/@acme%2fnotes-mcp - Not found
npm ERR! 404
npm ERR! 404  '@acme/notes-mcp@*' is not in this registry.
npm ERR! 404
npm ERR! 404 Note that you can also install from a
npm ERR! 404 tarball, folder, http url, or git url.

npm ERR! A complete log of this run can be found in:
npm ERR!     /root/.npm/_logs/2026-01-05T10_00_00_000Z-debug-0.log"""

NPM_10_NOT_FOUND = """\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnotes-mcp - Not found
npm error 404
npm error 404  '@acme/notes-mcp@*' is not in this registry.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-debug-0.log"""

NPX_CHILD_FAILED = f"""\
{NODE_CRASH}
npm ERR! code 1
npm ERR! path /home/me
npm ERR! command failed
npm ERR! command sh -c notes-mcp"""

RUST_BUILD = """\
   Compiling notes v0.1.0 (/srv/notes)
error[E0432]: unresolved import `notes_db`
 --> src/main.rs:1:5
  |
1 | use notes_db::Store;
  |     ^^^^^^^^ use of undeclared crate or module `notes_db`

For more information about this error, try `rustc --explain E0432`.
error: could not compile `notes` (bin "notes") due to 1 previous error"""

GO_PANIC = """\
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4553a2]

goroutine 1 [running]:
main.main()
\t/srv/notes/main.go:12 +0x22
exit status 2"""

JAVA = """\
Exception in thread "main" java.lang.IllegalStateException: NOTES_FILE is not set
\tat notes.Main.main(Main.java:7)"""

LOGGED = """\
2026-01-05 10:00:00,000 INFO notes: starting
2026-01-05 10:00:00,010 ERROR notes: cannot open /data/notes.db: permission denied
2026-01-05 10:00:00,011 INFO notes: exiting"""


@pytest.mark.parametrize(
    ("tail", "line"),
    [
        (NODE_CRASH, "Error: connect ECONNREFUSED 127.0.0.1:5432"),
        (NODE_MODULE_NOT_FOUND, "Error: Cannot find module '/app/dist/index.js'"),
        (PYTHON_TRACEBACK, "ModuleNotFoundError: No module named 'notes_db'"),
        (PYTHON_OWN_EXCEPTION, "__main__.SettingsMissing: NOTES_FILE"),
        (
            NPM_8_NOT_FOUND,
            "npm ERR! 404 Not Found - GET https://registry.npmjs.org/@acme%2fnotes-mcp - Not found",
        ),
        (
            NPM_10_NOT_FOUND,
            "npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnotes-mcp"
            " - Not found",
        ),
        (NPX_CHILD_FAILED, "Error: connect ECONNREFUSED 127.0.0.1:5432"),
        (RUST_BUILD, 'error: could not compile `notes` (bin "notes") due to 1 previous error'),
        (GO_PANIC, "panic: runtime error: invalid memory address or nil pointer dereference"),
        (
            JAVA,
            'Exception in thread "main" java.lang.IllegalStateException: NOTES_FILE is not set',
        ),
        (
            LOGGED,
            "2026-01-05 10:00:00,010 ERROR notes: cannot open /data/notes.db: permission denied",
        ),
        ("notes: starting\nNOTES_FILE is not set", "NOTES_FILE is not set"),
        ("notes: starting\n  indented last line ", "  indented last line "),
    ],
    ids=[
        "node",
        "node-module",
        "python",
        "python-own-exception",
        "npm-8",
        "npm-10",
        "npx-child-failed",
        "rust",
        "go",
        "java",
        "logged",
        "no-error-line",
        "no-error-line-kept-as-is",
    ],
)
def test_the_line_that_says_what_went_wrong(tail: str, line: str) -> None:
    """Real-world tails: the last line that looks like an error, npm's first line that
    says something, a traceback's own last line; with none of those, the last line."""
    assert error_line(tail.splitlines()) == line


def test_no_stderr_no_line() -> None:
    assert error_line([]) is None


@pytest.mark.parametrize(
    ("command", "args", "said"),
    [
        ("npx", ["-y", "@acme/notes-mcp"], "npx"),
        ("/usr/local/bin/npx", ["@acme/notes-mcp"], "npx"),
        ("C:\\Program Files\\nodejs\\npx.cmd", ["-y", "@acme/notes-mcp"], "npx"),
        ("uvx", ["mcp-server-sqlite"], "uvx"),
        ("bunx", ["notes-mcp"], "bunx"),
        ("pipx", ["run", "mcp-server-fetch"], "pipx run"),
        ("pnpm", ["dlx", "@acme/notes-mcp"], "pnpm dlx"),
        ("uv", ["tool", "run", "mcp-server-git"], "uv tool run"),
        ("pipx", ["install", "mcp-server-fetch"], None),
        ("npm", ["start"], None),
        ("node", ["server.js"], None),
        ("python3", ["-m", "notes"], None),
    ],
)
def test_launchers_that_download_their_package(
    command: str, args: list[str], said: str | None
) -> None:
    assert downloader(command, args) == said


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")
async def test_a_node_server_s_crash_names_its_error_not_its_version() -> None:
    """A real Node process that throws at start (an uncaught Error, its stack printed by
    Node, then ``Node.js vN``): the reason names the Error line; the health record
    (``status --json``) and ``mcp.local.crashed`` keep the tail, the version last."""
    script = (
        "console.error('notes: connecting to the database');"
        " function connect() { throw new Error('connect ECONNREFUSED 127.0.0.1:5432') }"
        " connect()"
    )
    node = shutil.which("node")
    assert node is not None
    cfg = {
        "mcpServers": {
            "notes": {"command": node, "args": ["-e", script], "lazy": False, "maxRestarts": 0}
        }
    }
    async with open_supervisor(cfg) as sup, sup.subscribe("mcp.local.crashed") as crashes:
        with trio.fail_after(TIMEOUT):
            crash = await crashes.receive()
        await until(lambda: sup.status()["notes"].status == "failed", TIMEOUT)
        record = sup.status()["notes"]
        document = json.loads(json.dumps(status_document(sup.status())))  # as printed
    assert record.last_error is not None
    assert record.last_error.endswith(
        "exited with code 1; error on stderr: 'Error: connect ECONNREFUSED 127.0.0.1:5432'"
    )
    assert "Node.js" not in record.last_error
    assert crash.exit_code == 1
    assert crash.stderr_tail[0] == "notes: connecting to the database"
    assert crash.stderr_tail[-1].startswith("Node.js v")
    assert "Error: connect ECONNREFUSED 127.0.0.1:5432" in crash.stderr_tail
    assert list(record.stderr_tail) == crash.stderr_tail
    (shown,) = document["servers"]  # type: ignore[misc]
    assert shown["stderr_tail"] == crash.stderr_tail and shown["family"] == []


def test_the_tail_goes_with_the_error_it_explains() -> None:
    """The health record's ``stderr_tail`` is kept with ``last_error`` (after a recovery
    too), and goes when another error, with no stderr of its own, takes its place."""
    health = Health()
    health.failed("MCP server 'n' (pid 7) exited with code 1", 1.0, 1.0, stderr_tail=["boom"])
    assert health.stderr_tail == ("boom",)
    health.connected(1, 0.1, 2.0, 2.0)
    assert health.stderr_tail == ("boom",)
    assert health.timed_out("calls in a row timed out", 1, 3.0)
    assert (health.last_error, health.stderr_tail) == ("calls in a row timed out", ())


HANGING = textwrap.dedent(
    """\
    #!/bin/sh
    pkg=@acme/notes-mcp
    said="The following package was not found and will be installed"
    echo "npm warn exec $said: $pkg@1.2.0" >&2
    printf '\\033[33mnpm warn\\033[39m fetch GET https://registry.example/%s?token=%s\\n' \\
      "$pkg" "$NOTES_TOKEN" >&2
    while read -r line; do :; done
    """
)


@pytest.mark.parametrize("program", ["npx", "notes-mcp"])
async def test_a_handshake_timeout_shows_what_the_server_said_and_why_it_may_be_slow(
    tmp_path: pathlib.Path, program: str
) -> None:
    """A server that writes to stderr, then never answers: the timeout's reason shows its
    last stderr lines (escaped, the config's secret redacted) and, when its program is
    ``npx`` (a fake one, first on PATH), that a first run may still be downloading the
    package and what to do."""
    script = tmp_path / program
    script.write_text(HANGING)
    script.chmod(0o755)
    secret = "s3cr3t-notes-token"
    cfg = {
        "mcpServers": {
            "notes": {
                "command": program,
                "args": ["-y", "@acme/notes-mcp"],
                "env": {
                    "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
                    "NOTES_TOKEN": secret,
                },
                "initTimeout": 3,
                "lazy": False,
                "maxRestarts": 0,
            }
        }
    }
    async with open_supervisor(cfg) as sup:
        await until(lambda: sup.status()["notes"].status == "failed", TIMEOUT)
        record = sup.status()["notes"]
    reason = record.last_error or ""
    assert (
        "did not complete the MCP handshake within 3.0 s (initTimeout); last stderr lines: "
        in reason
    )
    assert (
        "'npm warn exec The following package was not found and will be installed: "
        "@acme/notes-mcp@1.2.0', '\\x1b[33mnpm warn\\x1b[39m fetch GET "
        "https://registry.example/@acme/notes-mcp?token=***'"
    ) in reason
    assert secret not in reason and "\x1b" not in reason
    assert secret not in "".join(record.stderr_tail)
    hint = (
        "; npx may still have been fetching the package (a first run downloads it): "
        "raise initTimeout, or install the package first"
    )
    if program == "npx":
        assert reason.endswith(hint)
    else:
        assert "fetching" not in reason and reason.endswith("token=***'")


WRAPPER = "import subprocess, sys\nsys.exit(subprocess.call(sys.argv[1:]))\n"


def reaped(pid: int) -> bool:
    """Whether ``pid`` is gone from ``/proc``: it exited and its parent collected it."""
    return not os.path.exists(f"/proc/{pid}")


def parent(pid: int) -> int:
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_launcher_s_family_is_listed_and_stopped_with_it(tmp_path: pathlib.Path) -> None:
    """A wrapper that runs the real server as its child (as ``npm exec`` does): the
    health record lists both, wrapper first. SIGKILL to the wrapper alone: the orphaned
    real server, which still holds the pipes, answers no further call — the next call is
    answered by the restarted server (its ``count`` starts over) — and it is gone before
    the restart."""
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    command, args = stdio_params("echo")
    cfg = {
        "mcpServers": {
            "notes": {
                "command": sys.executable,
                "args": [str(wrapper), command, *args],
                "lazy": False,
                "approve": False,
            }
        },
        "supervisor": {"backoff": {"local": {"initial": 0.05}}},
    }
    family: tuple[int, ...] = ()
    try:
        async with open_supervisor(cfg) as sup:
            await sup.connect_all(timeout=TIMEOUT)
            record = sup.status()["notes"]
            family = record.family
            assert len(family) == 2 and family[0] == record.pid
            assert parent(family[1]) == record.pid  # the real server, the wrapper's child
            (shown,) = json.loads(json.dumps(status_document(sup.status())))["servers"]
            assert shown["pid"] == record.pid and shown["family"] == list(family)
            assert (await sup.call("notes_echo", {"text": "hi"})).text == "hi"
            assert (await sup.call("notes_count", {})).text == "1"

            async with sup.subscribe("mcp.local.crashed", "mcp.local.spawned") as events:
                os.kill(record.pid, signal.SIGKILL)  # the wrapper alone
                with trio.fail_after(TIMEOUT):
                    while not reaped(record.pid):  # noqa: ASYNC110 - polling /proc, bounded
                        await trio.sleep(0.001)
                # The supervisor has seen the wrapper exit: a call now is not the orphan's.
                answer = await sup.call("notes_count", {})
                with trio.fail_after(TIMEOUT):
                    crashed = await events.receive()
                    assert not running(family[1])  # stopped with it, before the restart
                    spawned = await events.receive()
            assert answer.text == "0"
            assert (crashed.kind, spawned.kind) == ("mcp.local.crashed", "mcp.local.spawned")
            assert spawned.pid not in family
            assert sup.status()["notes"].family[0] == spawned.pid
        assert sup.status()["notes"].family == ()
    finally:
        for pid in family:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_local_server_s_npm_errors_name_the_crash() -> None:
    """A real process whose stderr ends in npm's ``npm ERR!`` lines (a package not found):
    the crash's reason names npm's first line that says something (the tail is read as
    lines, then searched back to that block's start)."""
    script = "import sys; sys.stderr.write(" + repr(NPM_8_NOT_FOUND + "\n") + "); sys.exit(1)"
    cfg = {
        "mcpServers": {
            "notes": {
                "command": sys.executable,
                "args": ["-c", script],
                "lazy": False,
                "maxRestarts": 0,
            }
        }
    }
    async with open_supervisor(cfg) as sup:
        await until(lambda: sup.status()["notes"].status == "failed", TIMEOUT)
        record = sup.status()["notes"]
    assert record.last_error is not None
    assert record.last_error.endswith(
        "exited with code 1; error on stderr: 'npm ERR! 404 Not Found - GET "
        "https://registry.npmjs.org/@acme%2fnotes-mcp - Not found'"
    )
