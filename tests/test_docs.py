"""The README and docs/ say what is true: every example runs, and what a page says it
prints is what it prints.

How a page states what an example prints, and how each is checked:

- a ```python block followed by "prints" (or "prints (…)") and a ```text block: the
  block is the program's standard output, line by line;
- a ```python block followed by "prints `a`, `b` and `c`": those are its lines;
- a ```text block of ``$ mcp-supervisor …`` lines, each followed by what it prints (or a
  ```sh block of one such command right before a ```text block, its output): every
  command runs, in order, as ``python -m supervisor …`` in a fresh directory that
  ``SESSIONS`` sets up to match the page (the config the page describes, a ``python3``
  that is this interpreter); its standard output and error together are compared;
- any other ```text (or unmarked) block is in ``BLOCKS``, which says how it is checked —
  as lines of an example's output, by a check of its own — or why it is not (a diagram);
- a ```json block is a config, a part of one (a server's entry, the ``supervisor``
  section) or a fault plan, and loads as written with the real loader — or
  ``NOT_CONFIGS`` says what else it is (a meta-tool's answer, a command's output).

Parts of an output that differ from run to run (pids, ports, times, jitter, paths) are
written on the page as a representative run printed them, and matched by the patterns
``VOLATILE`` lists for that example, never by making the page vaguer. A page that gains
an output nothing checks, a ``BLOCKS`` or ``SESSIONS`` entry whose block is gone, or a
volatile pattern that no longer matches anything on its page, fails
``test_every_stated_output_is_checked``.

The examples run in forks of one process that has imported what they import
(tests/docs_runner.py), several at once, and the command sessions beside them: the file
takes about as long as its slowest few examples.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import attrs
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE_TIMEOUT = 90
COMMAND_TIMEOUT = 90

# -- reading the pages ---------------------------------------------------------------------


@attrs.frozen
class Block:
    """One fenced block of a page, with the prose on either side of it."""

    page: str
    line: int  # of its opening fence
    lang: str
    text: str
    before: str  # the prose since the previous block
    after: str  # the prose up to the next block


def read_blocks(page: str, text: str) -> list[Block]:
    fences = list(re.finditer(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", text, re.S | re.M))
    found = []
    for i, fence in enumerate(fences):
        start = fences[i - 1].end() if i else 0
        end = fences[i + 1].start() if i + 1 < len(fences) else len(text)
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, fence.start()) + 1,
                lang=fence.group(1),
                text=fence.group(2).rstrip("\n"),
                before=text[start : fence.start()],
                after=text[fence.end() : end],
            )
        )
    return found


@attrs.frozen
class Example:
    """A ```python block: a whole program, and what the page says it prints (or None)."""

    id: str  # page#n, n counting the page's python blocks from 1
    code: str
    stated: str | None
    output_block: Block | None  # the ```text block that states it, if one does


@attrs.frozen
class Session:
    """Shell commands on a page, each with the output the page shows under it."""

    id: str  # page:line
    page: str
    block: Block
    commands: tuple[tuple[str, str], ...]  # (command line, its output)


def _inline_output(prose: str) -> str | None:
    """``prints `a`, `b` and `c`.`` → the lines a, b, c (up to the sentence's end)."""
    said = re.match(r"\s*prints ((?:[^`.]|`[^`]*`)*)", prose)
    if said is None:
        return None
    spans = re.findall(r"`([^`]*)`", said.group(1))
    return "\n".join(spans) if spans else None


def read_page(page: str, text: str) -> tuple[list[Example], list[Session], list[Block]]:
    """The page's examples, its command sessions, and its other ```text blocks."""
    blocks = read_blocks(page, text)
    examples, sessions, others = [], [], []
    claimed: set[int] = set()  # blocks that are an example's output or a session's
    for i, block in enumerate(blocks):
        following = blocks[i + 1] if i + 1 < len(blocks) else None
        if block.lang == "python":
            stated, output_block = None, None
            if (
                following is not None
                and following.lang == "text"
                and re.fullmatch(r"\s*prints(?: \([^)]*\))?\s*", block.after)
            ):
                stated, output_block = following.text, following
                claimed.add(i + 1)
            else:
                stated = _inline_output(block.after)
            examples.append(
                Example(f"{page}#{len(examples) + 1}", block.text, stated, output_block)
            )
        elif block.lang == "text" and block.text.startswith("$ "):
            commands, lines = [], block.text.splitlines()
            for line in lines:
                if line.startswith("$ "):
                    commands.append([line[2:], []])
                else:
                    commands[-1][1].append(line)
            sessions.append(
                Session(
                    f"{page}:{block.line}",
                    page,
                    block,
                    tuple((command, "\n".join(out)) for command, out in commands),
                )
            )
            claimed.add(i)
        elif (
            block.lang == "sh"
            and re.fullmatch(r"mcp-supervisor [^\n]+", block.text)
            and following is not None
            and following.lang == "text"
            and not block.after.strip()
        ):
            sessions.append(
                Session(f"{page}:{block.line}", page, block, ((block.text, following.text),))
            )
            claimed.add(i + 1)
    for i, block in enumerate(blocks):
        if i not in claimed and block.lang in ("text", ""):
            others.append(block)
    return examples, sessions, others


def _all_pages() -> tuple[list[Example], list[Session], list[Block]]:
    examples, sessions, others = [], [], []
    for path in PAGES:
        found = read_page(path.name, path.read_text())
        examples += found[0]
        sessions += found[1]
        others += found[2]
    return examples, sessions, others


EXAMPLES, SESSIONS_FOUND, OTHER_BLOCKS = _all_pages()

# -- comparing what was printed with what the page says -------------------------------------

#: A volatile part of an output: a regex over the page's text, and the regex of what a run
#: may print in its place (a single string: the same for both).
Volatile = str | tuple[str, str]


def line_patterns(expected: str, volatile: Sequence[Volatile]) -> list[re.Pattern[str]]:
    """A pattern per line of ``expected``: the line itself, but for its volatile parts.

    Raises AssertionError naming any volatile pattern that matches nothing in
    ``expected`` (the page changed: the table is stale)."""
    pairs = [(v, v) if isinstance(v, str) else v for v in volatile]
    used: set[int] = set()
    patterns = []
    for line in expected.splitlines():
        line = line.rstrip()
        spots = []
        for n, (on_page, _) in enumerate(pairs):
            for found in re.finditer(on_page, line):
                spots.append((found.start(), found.end(), n))
        pieces, at = [], 0
        for start, end, n in sorted(spots):
            if start < at:
                continue  # overlaps a spot already taken
            pieces += [re.escape(line[at:start]), f"(?:{pairs[n][1]})"]
            used.add(n)
            at = end
        pieces.append(re.escape(line[at:]))
        patterns.append(re.compile("".join(pieces)))
    stale = [pairs[n][0] for n in range(len(pairs)) if n not in used]
    assert not stale, f"volatile patterns that match nothing on the page: {stale}"
    return patterns


def mismatch(
    expected: str, actual: str, volatile: Sequence[Volatile] = (), *, in_order: bool = False
) -> str | None:
    """Why ``actual`` is not what ``expected`` says (None when it is).

    Line by line, each line matching its pattern; with ``in_order``, the page's lines
    (but for ``...``, which marks lines left out) need only appear in ``actual`` in that
    order, with anything between them."""
    patterns = line_patterns(expected, volatile)
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]
    page = [line.rstrip() for line in expected.splitlines()]
    if in_order:
        at = 0
        for shown, pattern in zip(page, patterns, strict=True):
            if shown == "...":
                continue
            while at < len(got) and not pattern.fullmatch(got[at]):
                at += 1
            if at == len(got):
                return f"the page's line {shown!r} is not in what it printed (in order)"
            at += 1
        return None
    for n, (shown, pattern) in enumerate(zip(page, patterns, strict=True), 1):
        if n > len(got):
            return f"it printed {len(got)} lines; the page shows more, from line {n}: {shown!r}"
        if not pattern.fullmatch(got[n - 1]):
            return f"line {n}: the page says\n  {shown!r}\nit printed\n  {got[n - 1]!r}"
    if len(got) > len(page):
        return f"it printed {len(got) - len(page)} lines more: {got[len(page)]!r} …"
    return None


def assert_prints(
    what: str,
    expected: str,
    actual: str,
    volatile: Sequence[Volatile] = (),
    *,
    in_order: bool = False,
) -> None:
    why = mismatch(expected, actual, volatile, in_order=in_order)
    assert why is None, (
        f"{what} does not print what the page says: {why}\n\n"
        f"--- the page ---\n{expected}\n--- printed ---\n{actual}"
    )


# -- what differs from run to run, by example ---------------------------------------------

VOLATILE: dict[str, tuple[Volatile, ...]] = {
    "config.md#1": ((r", \.\.\.,", r", .+,"), (r", \.\.\.\)", r", .+\)")),  # fields left out
    "monitoring.md#1": (
        r"just now|\d+s ago",
        r"\d+\.\ds",  # the session's and the server's times
        r"\d+\.\d ms",  # latencies
        r"python3?(?= -m)",  # the interpreter's name, as sys.executable has it
    ),
    "monitoring.md#2": (r"127\.0\.0\.1:\d+",),  # the free port it got
    # each restart's delay is drawn from 0.8 to 1 times its nominal value (jitter)
    "servers.md#2": (r"retry in 0\.\d{3}", r"pid[ =]\d+"),
    "supervision.md#5": (r"ts=\d+\.\d+",),
}

# -- the shell sessions: what each needs around it ------------------------------------------


@attrs.frozen
class Setup:
    """What a session's directory holds before its first command."""

    files: Callable[[], dict[str, str]] = dict  # path → content
    examples: bool = False  # examples/ of this checkout, as a checkout has it
    programs: tuple[str, ...] = ()  # stand-ins on PATH (they only need to exist)
    volatile: tuple[Volatile, ...] = ()


def _page_json(page: str, containing: str) -> str:
    """The ```json block of ``page`` that contains ``containing``: the config it shows."""
    (found,) = [
        b.text
        for b in read_blocks(page, (ROOT / "docs" / page).read_text())
        if b.lang == "json" and containing in b.text
    ]
    return found + "\n"


RICH = {"command": "python3", "args": ["-m", "supervisor.testing.servers", "rich"]}
#: By page and first command line.
SESSIONS: dict[tuple[str, str], Setup] = {
    ("config.md", "mcp-supervisor check --config .mcp.json"): Setup(
        files=lambda: {
            ".mcp.json": json.dumps(
                {
                    "mcpServers": {
                        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
                        "fs": {
                            "command": "npx",
                            "args": [
                                "-y",
                                "@modelcontextprotocol/server-filesystem",
                                "/home/me/project",
                            ],
                        },
                    }
                }
            )
        },
        programs=("npx",),
    ),
    ("cli.md", "mcp-supervisor read --config mcp.json notes://index"): Setup(
        files=lambda: {"mcp.json": json.dumps({"mcpServers": {"rich": RICH}})}
    ),
    ("cli.md", "mcp-supervisor add notes -- python -m supervisor.testing.servers echo"): Setup(),
    ("tools.md", "mcp-supervisor tools --config mcp.json"): Setup(
        files=lambda: {"mcp.json": _page_json("tools.md", "examples/servers/text.py")},
        examples=True,
    ),
    ("tools.md", "mcp-supervisor call --config mcp.json notes_add_note "): Setup(
        files=lambda: {"mcp.json": _page_json("tools.md", "examples/servers/text.py")},
        examples=True,
    ),
}


def _setup_of(session: Session) -> Setup:
    first = session.commands[0][0]
    found = [
        s for (page, line), s in SESSIONS.items() if page == session.page and first.startswith(line)
    ]
    assert len(found) == 1, f"{session.id}: no SESSIONS entry for {first!r}"
    return found[0]


def _environment(directory: pathlib.Path) -> dict[str, str]:
    """A command's environment: this checkout, and nothing of the user's — no variable
    of theirs, and on PATH only ``python``, ``python3`` and the setup's stand-ins."""
    env = {key: os.environ[key] for key in ("TMPDIR", "SYSTEMROOT") if key in os.environ}
    env.update(
        PATH=str(directory / ".bin"),
        LANG="C.UTF-8",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as written
        PYTHONIOENCODING="utf-8",
        HOME=str(directory / ".home"),
        XDG_RUNTIME_DIR=str(directory / ".run"),  # no gateway of another test is found
        MCP_SUPERVISOR_STATE_DIR=str(directory / ".state"),
    )
    return env


def _prepare(directory: pathlib.Path, setup: Setup) -> dict[str, str]:
    bin_dir = directory / ".bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):  # this interpreter, importing this checkout
        root, python = shlex.quote(str(ROOT)), shlex.quote(sys.executable)
        (bin_dir / name).write_text(f'#!/bin/sh\nPYTHONPATH={root} exec {python} "$@"\n')
    for name in setup.programs:
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    for name in (".home", ".run", ".state"):
        (directory / name).mkdir(mode=0o700)
    for name, content in setup.files().items():
        (directory / name).write_text(content)
    if setup.examples:
        (directory / "examples").symlink_to(ROOT / "examples")
    return _environment(directory)


def _shell(command: str) -> str:
    """``command`` with each ``mcp-supervisor`` run as ``python -m supervisor``."""
    program = f"{shlex.quote(sys.executable)} -m supervisor"
    return re.sub(r"(^|\|\s*)mcp-supervisor\b", rf"\g<1>{program}", command)


def run_commands(
    commands: Sequence[str], setup: Setup, directory: pathlib.Path | None = None
) -> list[str]:
    """Each command's output (stdout and stderr together), run one after the other in one
    directory set up by ``setup``."""
    with tempfile.TemporaryDirectory(prefix="docs-session-") as tmp:
        where = pathlib.Path(tmp) if directory is None else directory
        env = _prepare(where, setup)
        outputs = []
        for command in commands:
            done = subprocess.run(
                ["/bin/sh", "-c", _shell(command)],
                cwd=where,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=COMMAND_TIMEOUT,
            )
            outputs.append(done.stdout.decode())
        return outputs


# -- the other text blocks ----------------------------------------------------------------


@attrs.frozen
class Exempt:
    """Not an output: nothing to compare (the reason is said here)."""

    why: str


@attrs.frozen
class OutputOf:
    """Lines of that example's output, in order (each by pattern)."""

    example: str
    volatile: tuple[Volatile, ...] = ()


@attrs.frozen
class Check:
    """What ``run()`` returns, compared with the block (by pattern; with ``in_order``,
    the block's lines in that order, ``...`` for lines left out)."""

    run: Callable[[], str]
    volatile: tuple[Volatile, ...] = ()
    in_order: bool = False
    why: str = ""


def _demo() -> str:
    with tempfile.TemporaryDirectory(prefix="docs-demo-") as tmp:
        directory = pathlib.Path(tmp)
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", "demo"],
            cwd=directory,
            env=_prepare(directory, Setup()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=COMMAND_TIMEOUT,
        )
    assert done.returncode == 0, done.stdout.decode()
    return done.stdout.decode()


def _check_errors() -> str:
    """``check`` of a config with the three problems the page shows."""
    config = {
        "mcpServers": {
            "github": {
                "type": "http",
                "url": "https://api.githubcopilot.com/mcp/",
                "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
            },
            "jira": {"command": "python3", "env": {"JIRA_TOKEN": "${JIRA_TOKEN}"}},
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]},
        }
    }
    setup = Setup(files=lambda: {".mcp.json": json.dumps(config)})
    (output,) = run_commands(["mcp-supervisor check --config .mcp.json"], setup)
    return output


def _dashboard_beyond_loopback() -> str:
    """``serve --dashboard 0.0.0.0:8080`` without a token: refused before anything starts."""
    config = {"mcpServers": {"notes": {"command": "notes-mcp"}}}
    setup = Setup(files=lambda: {".mcp.json": json.dumps(config)})
    (output,) = run_commands(
        ["mcp-supervisor serve --config .mcp.json --dashboard 0.0.0.0:8080"], setup
    )
    return output


def _unset_variable() -> str:
    from supervisor.config import load_config

    config = {
        "mcpServers": {"github": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}
    }
    return str(load_config(config, environ={}).servers["github"].error)


def _config_errors() -> str:
    """``load_config`` of a mapping with the five problems the page shows."""
    from supervisor.config import load_config
    from supervisor.errors import ConfigError

    config = {
        "mcpServers": {
            "github": {"url": "https://api.githubcopilot.com/mcp/", "heders": {}},
            "a": {"command": "a-mcp", "url": "https://a.example.com/mcp"},
            "b": {"command": "b-mcp", "timeout": 0},
            "c": {"url": "https://user:secret@c.example.com/mcp"},
        },
        "servers": {"github": {"url": "https://api.githubcopilot.com/mcp/"}},
    }
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    return str(caught.value)


def _no_injector() -> str:
    """``open_supervisor`` of the page's ``calc`` server with its plan, and no injector."""
    import trio

    from supervisor import open_supervisor
    from supervisor.errors import ConfigError

    plan = {"seed": 7, "rules": [{"when": {"method": "tools/call", "nth": 3}, "do": "kill"}]}
    config = {"mcpServers": {"calc": {"command": "python", "args": ["calc.py"], "faults": plan}}}

    async def main() -> None:
        async with open_supervisor(config):
            pass

    with pytest.raises(ConfigError) as caught:
        trio.run(main)
    return str(caught.value)


def _metrics(**figures: object) -> object:
    """A ``notes`` server's metrics: connected an hour, no call yet, but for ``figures``."""
    from supervisor.server import ServerMetrics

    values: dict[str, object] = {
        "server": "notes",
        "status": "connected",
        "uptime_s": 3600.0,
        "downtime_s": 0.0,
        "reconnects": 0,
        "reconnect_avg_s": None,
        "restarts": 0,
        "calls_ok": 0,
        "calls_failed": 0,
        "success_rate": None,
        "latency_p50_ms": None,
        "latency_p99_ms": None,
        "latency_count": 0,
        "latency_sum_s": 0.0,
        "latency_buckets": (),
        "tool_count": 3,
    }
    return ServerMetrics(**{**values, **figures})


def _prometheus_excerpt() -> str:
    """The exposition of a server that answered three calls, as the page's does."""
    from supervisor.monitor import prometheus_text

    metrics = _metrics(calls_ok=3, success_rate=1.0, latency_count=3, latency_sum_s=0.003)
    return prometheus_text({"notes": metrics})


def _session_summary() -> str:
    """The summary of the session the page describes: one server, 12.4 s, one reconnect,
    20 calls ok, 2 tool errors, 1 failed."""
    from supervisor.monitor import SessionSummary, summary_text

    notes = _metrics(
        uptime_s=10.1,
        downtime_s=1.2,
        reconnects=1,
        reconnect_avg_s=1.2,
        restarts=1,
        calls_ok=20,
        calls_tool_error=2,
        calls_failed=1,
        success_rate=22 / 23,
        latency_p50_ms=0.9,
        latency_p99_ms=3.0,
        latency_count=23,
        latency_sum_s=0.03,
    )
    summary = SessionSummary(
        duration_s=12.4,
        servers={"notes": notes},
        connected=1,
        calls_ok=20,
        calls_failed=1,
        calls_tool_error=2,
        reconnects=1,
        restarts=1,
    )
    return summary_text(summary)


#: By page and a text that only that block of the page contains.
BLOCKS: dict[tuple[str, str], Exempt | OutputOf | Check] = {
    ("README.md", "mcp-supervisor demo: three example MCP servers"): Check(
        _demo,
        volatile=(
            (r"/src/mcp-supervisor", r"/\S+"),  # the checkout
            r"127\.0\.0\.1:\d+",
            r"pid \d+",
            r"port \d+",
            r"\d+\.\d\d s",  # times since the crash, handshakes, jittered delays
            r"just now|\d+s ago",
            r"\(\d+\.\d+s\)|\d+\.\d+s",  # the summary's durations
            r"\d+\.\d+ ms",
            r"\d+ restarts",  # the flaky server may need a second restart to be back
            r"python3?(?= /)",  # the interpreter's name, as sys.executable has it
        ),
        in_order=True,
        why="the demo's own run, abridged (…): its lines, in order",
    ),
    ("auth.md", "github: logged in (account default)"): Exempt(
        "a login to GitHub's server; tests/test_cli_auth.py checks `auth login` prints it"
    ),
    ("auth.md", "🔑 needs login: mcp-supervisor auth login github"): Exempt(
        "a row of the status table, for GitHub's server; tests/test_cli_auth.py checks it"
    ),
    ("auth.md", "SQLite: per resource × account"): Exempt("the token store's layout"),
    ("config.md", "mcpServers.jira.env.JIRA_TOKEN"): Check(_check_errors),
    ("config.md", "mcpServers.github.env.GITHUB_TOKEN"): Check(_unset_variable),
    ("config.md", "mcpServers.b.timeout"): Check(_config_errors),
    ("faults.md", "mcpServers.calc.faults: a fault plan needs a fault injector"): Check(
        _no_injector
    ),
    ("faults.md", "mcp-supervisor chaos: injected kill (rule 0)"): Exempt(
        "a proxied mcp-server-time (not installed here); tests/test_chaos.py checks the line"
    ),
    ("monitoring.md", "MCP Server Status"): Exempt(
        "remote servers and states no local run shows at once; tests/test_monitor.py "
        "checks the table's rows"
    ),
    ("monitoring.md", "# HELP mcp_supervisor_server_calls_total"): Check(
        _prometheus_excerpt, in_order=True, why="lines of the exposition of three calls"
    ),
    ("monitoring.md", "Session summary (12.4s)"): Check(_session_summary),
    ("monitoring.md", "mcp-supervisor: dashboard login (to restart and stop servers)"): Exempt(
        "a serve that runs until stopped; tests/test_dashboard.py::"
        "test_serve_dashboard_acts_only_with_its_login_until_interrupted checks both lines"
    ),
    ("monitoring.md", "mcp-supervisor serve: the dashboard would listen on 0.0.0.0"): Check(
        _dashboard_beyond_loopback
    ),
    ("servers.md", "first call            handshake done"): Exempt("a diagram"),
    ("servers.md", "server actor fails ──► tree"): Exempt("a diagram"),
    ("servers.md", "MCP server 'jira' is unavailable after 3 attempts; last error"): OutputOf(
        "servers.md#2", volatile=(r"pid[ =]\d+",)
    ),
    ("supervision.md", "root = open_tree(tree"): Exempt("a diagram"),
    ("supervision.md", "child exits ──► should_restart?"): Exempt("a diagram"),
    ("supervision.md", "toolkit                     imports the core"): Exempt(
        "the package's folders; tests/test_layers.py holds it to them"
    ),
}


def _entry_of(block: Block) -> Exempt | OutputOf | Check:
    found = [
        entry
        for (page, marker), entry in BLOCKS.items()
        if page == block.page and marker in block.text
    ]
    assert len(found) == 1, f"{block.page}:{block.line}: no BLOCKS entry for this block"
    return found[0]


CHECKED = [b for b in OTHER_BLOCKS if isinstance(_entry_of(b), Check)]
QUOTED = [b for b in OTHER_BLOCKS if isinstance(_entry_of(b), OutputOf)]

# -- running it all, several at a time --------------------------------------------------------


class ExampleRunner:
    """tests/docs_runner.py: examples run in forks of one process that imported their
    imports already, ``parallel`` at a time."""

    def __init__(self, parallel: int) -> None:
        self._futures: dict[str, Future[dict]] = {}
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.docs_runner", str(parallel)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            result = json.loads(line)
            with self._lock:
                self._futures.pop(result["id"]).set_result(result)
        with self._lock:  # the runner died: nothing more will come
            for future in self._futures.values():
                future.set_exception(RuntimeError("tests/docs_runner.py exited"))

    def submit(self, example: Example) -> Future[dict]:
        future: Future[dict] = Future()
        with self._lock:
            self._futures[example.id] = future
        assert self._process.stdin is not None
        request = {"id": example.id, "name": example.id, "code": example.code}
        self._process.stdin.write(json.dumps({**request, "timeout": EXAMPLE_TIMEOUT}) + "\n")
        self._process.stdin.flush()
        return future

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=EXAMPLE_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _selected(items: Sequence[pytest.Item], module: object) -> tuple[set[str], set[str], set[str]]:
    """The examples, sessions and checked blocks the selected tests of this file need."""
    examples, sessions, checks = set(), set(), set()
    for item in items:
        if getattr(item, "module", None) is not module or not hasattr(item, "callspec"):
            continue
        param = next(iter(item.callspec.params.values()))
        if isinstance(param, Example):
            examples.add(param.id)
        elif isinstance(param, Session):
            sessions.add(param.id)
        elif isinstance(param, Block):
            entry = _entry_of(param)
            if isinstance(entry, OutputOf):
                examples.add(entry.example)
            else:
                checks.add(f"{param.page}:{param.line}")
    return examples, sessions, checks


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Future]]:
    """Every run the selected tests need, started at once: the slow shell sessions and the
    demo in two threads, the examples two at a time in the runner."""
    examples, sessions, checks = _selected(request.session.items, request.module)
    futures: dict[str, Future] = {}
    pool = ThreadPoolExecutor(2)
    runner = ExampleRunner(parallel=2) if examples else None
    try:
        for block in CHECKED:  # the demo first: the longest
            if f"{block.page}:{block.line}" in checks:
                futures[f"{block.page}:{block.line}"] = pool.submit(_entry_of(block).run)
        for session in SESSIONS_FOUND:
            if session.id in sessions:
                commands = [command for command, _ in session.commands]
                futures[session.id] = pool.submit(run_commands, commands, _setup_of(session))
        for example in EXAMPLES:
            if example.id in examples and runner is not None:
                futures[example.id] = runner.submit(example)
        yield futures
    finally:
        if runner is not None:
            runner.close()
        pool.shutdown(cancel_futures=True)


def _result(runs: dict[str, Future], key: str) -> object:
    return runs[key].result(timeout=EXAMPLE_TIMEOUT * 4)


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_prints_what_the_page_says(example: Example, runs: dict[str, Future]) -> None:
    """The example exits 0, and prints what the page says it prints; one that does not
    say prints something."""
    result = _result(runs, example.id)
    assert not result["timed_out"], f"{example.id} still ran after {EXAMPLE_TIMEOUT} s"
    assert result["rc"] == 0, f"{example.id} exited {result['rc']}:\n{result['stderr']}"
    if example.stated is None:
        assert result["stdout"].strip()
        return
    assert_prints(example.id, example.stated, result["stdout"], VOLATILE.get(example.id, ()))


@pytest.mark.parametrize("session", SESSIONS_FOUND, ids=lambda s: s.id)
def test_commands_print_what_the_page_says(session: Session, runs: dict[str, Future]) -> None:
    """Each command of the session prints what the page shows under it."""
    outputs = _result(runs, session.id)
    volatile = _setup_of(session).volatile
    for (command, expected), actual in zip(session.commands, outputs, strict=True):
        assert_prints(f"$ {command}", expected, actual, volatile)


@pytest.mark.parametrize("block", CHECKED, ids=lambda b: f"{b.page}:{b.line}")
def test_shown_output_is_what_its_check_prints(block: Block, runs: dict[str, Future]) -> None:
    """A block that shows an output outside an example is what its check prints."""
    entry = _entry_of(block)
    assert isinstance(entry, Check)
    actual = _result(runs, f"{block.page}:{block.line}")
    what = f"{block.page}:{block.line} ({entry.why or entry.run.__name__})"
    assert_prints(what, block.text, actual, entry.volatile, in_order=entry.in_order)


@pytest.mark.parametrize("block", QUOTED, ids=lambda b: f"{b.page}:{b.line}")
def test_quoted_output_is_in_its_examples_output(block: Block, runs: dict[str, Future]) -> None:
    """A block that quotes an example's output is in that output, line by line in order."""
    entry = _entry_of(block)
    assert isinstance(entry, OutputOf)
    result = _result(runs, entry.example)
    assert result["rc"] == 0, result["stderr"]
    what = f"{block.page}:{block.line} (lines of {entry.example})"
    assert_prints(what, block.text, result["stdout"], entry.volatile, in_order=True)


def _print_comments(code: str) -> list[str]:
    """The comments at the end of ``print(…)`` lines: what an example says it prints, when
    it does not say so below."""
    return re.findall(r"^\s*print\(.*\)\s*#\s*(.*)$", code, re.M)


def test_every_stated_output_is_checked() -> None:
    """Every output a page shows is compared with a run (or the test says why not), and
    every table entry here still belongs to a block of its page."""
    problems = []
    for example in EXAMPLES:
        if example.stated is None and _print_comments(example.code):
            problems.append(
                f"{example.id} says what it prints in comments only: give it a "
                "'prints' and a ```text block of its output"
            )
    for block in OTHER_BLOCKS:
        try:
            _entry_of(block)
        except AssertionError as exc:
            problems.append(f"{exc}: say in BLOCKS how it is checked, or why it is not")
    for session in SESSIONS_FOUND:
        try:
            _setup_of(session)
        except AssertionError as exc:
            problems.append(str(exc))
    for page, marker in BLOCKS:
        if not any(b.page == page and marker in b.text for b in OTHER_BLOCKS):
            problems.append(f"BLOCKS entry for a block that is gone: {page}: {marker!r}")
    for page, line in SESSIONS:
        if not any(s.page == page and s.commands[0][0].startswith(line) for s in SESSIONS_FOUND):
            problems.append(f"SESSIONS entry for a session that is gone: {page}: {line!r}")
    by_id = {example.id: example for example in EXAMPLES}
    for key, volatile in VOLATILE.items():
        if key not in by_id or by_id[key].stated is None:
            problems.append(f"VOLATILE entry for {key}, which states no output")
            continue
        try:
            line_patterns(by_id[key].stated, volatile)
        except AssertionError as exc:
            problems.append(f"{key}: {exc}")
    assert problems == []


def test_the_harness_reads_each_way_a_page_states_output() -> None:
    """Inline 'prints `…`', a 'prints' ```text block, a $ session and a ```sh command with
    its output are each found; another ```text block is left for BLOCKS."""
    page = (
        "```python\nprint('a, b')\nprint(2)\n```\n\nprints `a, b` and `2`. Then `x`.\n\n"
        "```python\nprint(1)\n```\n\nprints (with the port it got)\n\n```text\n1\n```\n\n"
        "```python\nprint(3)  # 3\n```\n\nIt is done.\n\n"
        "```text\n$ mcp-supervisor list\nnotes  stdio\n$ mcp-supervisor remove notes\n"
        "removed notes\n```\n\n"
        "```sh\nmcp-supervisor check --config F\n```\n\n```text\nF: 1 server\n```\n\n"
        "```text\n  a diagram\n```\n"
    )
    examples, sessions, others = read_page("p.md", page)
    assert [(e.id, e.stated) for e in examples] == [
        ("p.md#1", "a, b\n2"),
        ("p.md#2", "1"),
        ("p.md#3", None),
    ]
    assert _print_comments(examples[2].code) == ["3"]
    assert [s.commands for s in sessions] == [
        (("mcp-supervisor list", "notes  stdio"), ("mcp-supervisor remove notes", "removed notes")),
        (("mcp-supervisor check --config F", "F: 1 server"),),
    ]
    assert [b.text for b in others] == ["  a diagram"]


def test_the_comparison_matches_volatile_parts_by_pattern_only() -> None:
    """A volatile part matches its pattern, the rest must be exact; in order, lines may
    come between; a pattern that matches nothing on the page is an error."""
    page = "mcp.error 1 retry in 0.087\npid 4242 ready"
    volatile = (r"retry in \d\.\d{3}", r"pid \d+")
    assert mismatch(page, "mcp.error 1 retry in 0.093\npid 17 ready\n", volatile) is None
    assert "line 1" in mismatch(page, "mcp.error 2 retry in 0.093\npid 17 ready", volatile)
    assert "line 1" in mismatch(page, "mcp.error 1 retry in 0.1\npid 17 ready", volatile)
    assert "more" in mismatch(page, "mcp.error 1 retry in 0.093", volatile)
    assert "lines more" in mismatch("a", "a\nb")
    assert mismatch("a\n...\nc", "a\nb\nc\nd", in_order=True) is None
    assert "'c'" in mismatch("a\n...\nc", "c\na", in_order=True)
    with pytest.raises(AssertionError, match="match nothing on the page"):
        mismatch(page, page, (r"port \d+",))


# -- the commands and options the pages mention exist ------------------------------------

#: Words that mark a sentence as about what is planned, not what is there.
_PLANNED = ("still to come", "not yet", "planned", "will ")


def _parsers() -> dict[str, set[str]]:
    """Each subcommand of the CLI and the option strings it takes."""
    import argparse

    from supervisor.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    from supervisor.cli._chaos import _soak_parser

    found = {
        name: {o for action in sub._actions for o in action.option_strings}
        for name, sub in commands.choices.items()
    }
    found["chaos soak"] = {o for action in _soak_parser()._actions for o in action.option_strings}
    for name, sub in commands.choices.items():  # commands with actions: `auth login`
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, parser in action.choices.items():
                    found[f"{name} {verb}"] = {o for a in parser._actions for o in a.option_strings}
    return found


def _mentions(text: str) -> list[tuple[str, str]]:
    """``(sentence, command line)`` for every ``mcp-supervisor …`` in inline code or a
    code block, and every inline code span that starts with a subcommand's name."""
    found = []
    for language, block in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if language not in ("", "sh", "bash", "text", "console"):
            continue
        for line in block.splitlines():
            line = line.lstrip("$ ").strip()
            if line.startswith("mcp-supervisor ") and not line.startswith("mcp-supervisor: "):
                found.append((line, line))
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", re.sub(r"```.*?```", "", text, flags=re.S)):
        for span in re.findall(r"`([^`\n]+)`", sentence):
            found.append((sentence, span))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_mention_only_commands_and_options_the_cli_has(page: pathlib.Path) -> None:
    """A command line in the README or docs/ names an existing subcommand and only its
    options (what is planned is said so, and then skipped)."""
    assert _wrong_mentions(page.read_text()) == []


def test_the_mention_check_finds_what_does_not_exist() -> None:
    """Unknown commands and options are found in code blocks and inline code; a sentence
    saying it is planned is skipped."""
    page = (
        "Run `mcp-supervisor frobnicate --config F`, or `status --shiny`.\n\n"
        "```sh\nmcp-supervisor tools --config F --colour\n```\n\n"
        "Still to come: `serve --stdio`. And `status --json` works.\n\n"
        '```json\n{"a": 1}\n```\n\nProse between blocks.\n\n'
        "```sh\nmcp-supervisor chaos soak --servers 2 --shiny\n"
        "mcp-supervisor chaos --plan p.json -- server --its-own-option\n```\n"
    )
    assert _wrong_mentions(page) == [
        "tools has no option --colour ('mcp-supervisor tools --config F --colour')",
        "chaos soak has no option --shiny ('mcp-supervisor chaos soak --servers 2 --shiny')",
        "unknown command in 'mcp-supervisor frobnicate --config F'",
        "status has no option --shiny ('status --shiny')",
    ]


def _wrong_mentions(text: str) -> list[str]:
    parsers = _parsers()
    wrong = []
    for sentence, span in _mentions(text):
        if any(word in sentence.lower() for word in _PLANNED):
            continue
        words = span.split()
        if words and words[0] == "mcp-supervisor":
            words = words[1:]
            if not words or words[0].startswith("-") or words[0].isupper():
                continue  # the program itself, its own --help / -v, or a placeholder
            if words[0].rstrip(":") not in parsers:
                wrong.append(f"unknown command in {span!r}")
                continue
        elif not words or words[0] not in parsers or len(words) == 1:
            continue  # prose that happens to be a command's name ("status")
        command, rest = words[0].rstrip(":"), words[1:]
        if rest and f"{command} {rest[0]}" in parsers:  # `chaos soak`, `auth login`
            command, rest = f"{command} {rest[0]}", rest[1:]
        for word in rest:
            option = word.split("=", 1)[0].strip("[]|,.;)(")
            if option == "--":
                break  # what follows is the server's own command line
            if option.startswith("--") and option not in parsers[command]:
                wrong.append(f"{command} has no option {option} ({span!r})")
    return wrong


# -- config examples ----------------------------------------------------------------------

#: ```json blocks that are not a config, by page and a text only that block contains: what
#: each is instead. Every other ```json block is loaded by ``test_a_config_example_loads``.
NOT_CONFIGS: dict[tuple[str, str], str] = {
    ("gateway.md", '{"type": "ServerUnavailable"'): "a failed call's _meta, as data",
    ("gateway.md", '{"name": "list"'): "a tool_search meta-tool call's params",
    ("gateway.md", '"lastError": "MCP server'): "the list meta-tool's answer",
    ("gateway.md", '{"name": "search"'): "a tool_search meta-tool call's params",
    ("gateway.md", '"name": "github_list_issues", "server"'): "the search meta-tool's answer",
    ("gateway.md", '{"name": "load"'): "a tool_search meta-tool call's params",
    ("gateway.md", '"unknown": ['): "the load meta-tool's answer",
    ("gateway.md", '{"name": "call"'): "a tool_search meta-tool call's params",
    ("tools.md", '"search": "count words"'): "the output of tools --json",
}
#: The top-level keys of a config's server sections, and of its own section.
_SERVER_SECTIONS = {"mcpServers", "mcp", "servers"}


def _json_blocks() -> list[Block]:
    return [
        block
        for path in PAGES
        for block in read_blocks(path.name, path.read_text())
        if block.lang in ("json", "jsonc")
    ]


def _not_config(block: Block) -> list[str]:
    return [
        why
        for (page, marker), why in NOT_CONFIGS.items()
        if page == block.page and marker in block.text
    ]


JSON_BLOCKS = _json_blocks()
CONFIG_BLOCKS = [block for block in JSON_BLOCKS if not _not_config(block)]


def config_shown(text: str) -> tuple[str, object]:
    """What a ```json block shows, to load as it is: ``("plan", …)`` for a fault plan, else
    ``("config", mapping)`` — a whole config; a ``supervisor`` section alone (with no
    servers); one server's entry (``{"url": …}``), or entries by name (``"crm": {…}``, as a
    page shows a part of ``mcpServers``), under ``mcpServers``."""
    try:
        shown = json.loads(text)
    except ValueError:
        return "config", {"mcpServers": json.loads("{" + text + "}")}
    if isinstance(shown, dict) and "rules" in shown:
        return "plan", shown
    assert isinstance(shown, dict), "neither a config, nor a part of one, nor a fault plan"
    if _SERVER_SECTIONS & shown.keys():
        return "config", shown
    if "supervisor" in shown:
        return "config", {"mcpServers": {}, **shown}
    assert {"command", "url"} & shown.keys(), "neither a config, nor a part of one"
    return "config", {"mcpServers": {"example": shown}}


@pytest.mark.parametrize(  # by its text: the runs fixture takes a Block for a BLOCKS entry
    "text", [b.text for b in CONFIG_BLOCKS], ids=[f"{b.page}:{b.line}" for b in CONFIG_BLOCKS]
)
def test_a_config_example_loads(text: str, tmp_path: pathlib.Path) -> None:
    """A config a page shows (whole, or the part it is about) loads as it is written with
    the real loader — every variable it names set (``${NAME}``, ``"clientSecretEnv":
    "NAME"``), the ``.env`` file it names there —
    and no server of it is invalid; a fault plan loads as a plan. Blocks that are no
    config say what they are in ``NOT_CONFIGS``."""
    from supervisor.config import load_config
    from supervisor.faults import load_plan

    kind, shown = config_shown(text)
    if kind == "plan":
        load_plan(shown)  # type: ignore[arg-type]
        return
    names = re.findall(r"\{(?:env:)?([A-Za-z_]\w*)(?::-[^}]*)?\}", text)
    names += re.findall(r'"\w+Env":\s*"([A-Za-z_]\w*)"', text)  # clientSecretEnv, keyEnv...
    environ = {name: f"value-of-{name}" for name in names}
    (tmp_path / ".env").write_text("")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(shown))
    config = load_config(path, environ=environ)
    invalid = {name: server.errors for name, server in config.servers.items() if server.errors}
    assert invalid == {}


def test_every_json_block_is_a_config_or_says_what_it_is() -> None:
    """Each ```json block is read as a config (or a part of one, or a plan), or exactly one
    ``NOT_CONFIGS`` entry says what else it is; every entry still matches a block."""
    problems = []
    for block in JSON_BLOCKS:
        if len(_not_config(block)) > 1:
            problems.append(f"{block.page}:{block.line}: more than one NOT_CONFIGS entry")
    for block in CONFIG_BLOCKS:
        try:
            config_shown(block.text)
        except (AssertionError, ValueError) as exc:
            problems.append(f"{block.page}:{block.line}: {exc}: add it to NOT_CONFIGS")
    for page, marker in NOT_CONFIGS:
        if not any(b.page == page and marker in b.text for b in JSON_BLOCKS):
            problems.append(f"NOT_CONFIGS entry for a block that is gone: {page}: {marker!r}")
    assert problems == []
    assert len(CONFIG_BLOCKS) >= 20  # the pages' configs were found
