"""The tools and call commands of the CLI, run as real processes against fixture servers
(and, where one run is enough, in this process)."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import pty
import subprocess
import sys

import pytest

from supervisor.testing.servers import count_executions, stdio_params

from .probes import answer_on_a_terminal, rest_of_terminal

TIMEOUT = 60
ENTRY_KEYS = {
    "name", "server", "original_name", "description", "input_schema",
    "annotations", "approval", "parameters", "provenance",
}  # fmt: skip
#: A stdio server whose tool ``ping`` has no description (no docstring: listed as "").
UNDESCRIBED = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("bare")


@app.tool()
def ping() -> str:
    return "pong"


app.run()
"""


def write_config(tmp_path: pathlib.Path, servers: dict[str, object]) -> str:
    path = tmp_path / "mcp.json"
    # A generous handshake bound: on a loaded machine (CI, two test workers) a fixture's
    # interpreter start can take more than the 10 s default; these tests are not about it.
    path.write_text(json.dumps({"mcpServers": servers, "supervisor": {"initTimeout": 60}}))
    return str(path)


def fixture(kind: str, *, count_file: pathlib.Path | None = None, **extra: object) -> dict:
    command, args = stdio_params(kind, count_file=count_file)  # type: ignore[arg-type]
    return {"command": command, "args": args, **extra}


def marker(path: pathlib.Path) -> dict[str, object]:
    """A server whose process, if it is ever started, creates ``path`` and exits."""
    code = f"open({str(path)!r}, 'w').close(); raise SystemExit(1)"
    return {"command": sys.executable, "args": ["-c", code], "maxRestarts": 0}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


# -- tools --------------------------------------------------------------------------------


def test_tools_json_is_the_merged_catalog_in_config_order(tmp_path: pathlib.Path) -> None:
    """tools --json connects every server, lazy ones included: one document whose 'tools'
    entries have exactly the documented keys, in config order (prefix "" gives bare names);
    a server that cannot start is named in 'servers' and on stderr, and the exit is 0."""
    config = write_config(
        tmp_path,
        {
            "alpha": fixture("echo"),
            "broken": fixture("exit-on-start", maxRestarts=0),
            "beta": fixture("echo", prefix=""),
        },
    )
    done = run("tools", "--config", config, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    tools = document["tools"]
    assert [t["name"] for t in tools] == [
        "alpha_echo", "alpha_add", "alpha_count", "echo", "add", "count"
    ]  # fmt: skip
    assert all(set(t) == ENTRY_KEYS for t in tools)
    add = tools[1]
    assert (add["server"], add["original_name"]) == ("alpha", "add")
    assert add["description"] == "Return a + b."
    assert set(add["input_schema"]["properties"]) == {"a", "b"}
    assert tools[3]["server"] == "beta" and tools[3]["original_name"] == "echo"
    assert tools[0]["provenance"] == {
        "name": "alpha_echo", "source": "mcp", "serverId": "alpha", "originalName": "echo"
    }  # fmt: skip
    servers = {s["name"]: s for s in document["servers"]}
    assert servers["alpha"]["status"] == "connected" and servers["alpha"]["tool_count"] == 3
    assert servers["alpha"]["unsupported"] == 0 and servers["alpha"]["skipped"] == []
    assert servers["broken"]["status"] == "failed"
    assert "exited with code 1" in servers["broken"]["error"]
    assert "server 'broken' is failed" in done.stderr


def test_tools_search_lists_only_the_matches(tmp_path: pathlib.Path) -> None:
    """tools --search Q --json lists the search's matches, best first, in the same shape."""
    config = write_config(tmp_path, {"alpha": fixture("echo")})
    done = run("tools", "--config", config, "--json", "--search", "add numbers")
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == ["alpha_add"]
    assert set(tools[0]) == ENTRY_KEYS and tools[0]["input_schema"]["required"] == ["a", "b"]


def test_tools_table_and_footer(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tools prints a table of name, server and description, and a footer counting tools
    and servers and naming the ones not connected (whose errors go to stderr). Piped, its
    lines are whole, however narrow ``$COLUMNS`` says the terminal is."""
    monkeypatch.setenv("COLUMNS", "30")
    config = write_config(
        tmp_path, {"alpha": fixture("echo"), "broken": fixture("exit-on-start", maxRestarts=0)}
    )
    done = run("tools", "--config", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["name", "server", "approval", "hints", "description"]
    assert lines[1].split()[:4] == ["alpha_echo", "alpha", "ask", "r-i-"]
    assert lines[2] == "    text*: string"  # each tool's parameters under it
    assert lines[3].split() == ["alpha_add", "alpha", "ask", "----", "Return", "a", "+", "b."]
    assert lines[4] == "    a*: integer, b*: integer"
    assert lines[6] == "    (no parameters)"  # count()
    for column in ("server", "approval", "hints", "description"):  # fixed-width columns
        assert lines[3][lines[0].index(column) - 2 : lines[0].index(column)] == "  "
        assert lines[3][lines[0].index(column)] != " "
    assert lines[-1] == "3 tools from 1 server; not connected: broken (see stderr)"
    assert "server 'broken' is failed: " in done.stderr


def test_tools_show_annotations_approval_and_parameters(tmp_path: pathlib.Path) -> None:
    """tools says of each tool what its annotations are, whether a call would ask for
    approval (and why, in --json: as `call` decides), and its parameters; a disabled
    server is not started, and not reported as not connected."""
    started = tmp_path / "started"
    config = write_config(
        tmp_path,
        {
            "r": fixture("rich", autoApprove=["echo", "delete_note", "w*"]),
            "off": {**marker(started), "disabled": True},
        },
    )
    done = run("tools", "--config", config, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    tools = {t["name"]: t for t in document["tools"]}
    echo, add, wipe = tools["r_echo"], tools["r_add"], tools["r_wipe"]
    assert echo["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    assert wipe["annotations"] == {"readOnlyHint": False, "destructiveHint": True}
    assert add["annotations"] == {}
    assert echo["approval"] is None and add["approval"] == "not auto-approved"
    assert tools["r_delete_note"]["approval"] is None  # named exactly: reviewed
    assert wipe["approval"] == "destructive annotation"  # a glob does not cover it
    assert add["parameters"] == [
        {"name": "a", "type": "integer", "required": True, "description": None},
        {"name": "b", "type": "integer", "required": True, "description": None},
    ]
    assert wipe["parameters"] == []
    assert [s["name"] for s in document["servers"]] == ["r"]
    assert not started.exists()

    done = run("tools", "--config", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    wipe_row = next(i for i, line in enumerate(lines) if line.startswith("r_wipe "))
    assert lines[wipe_row].split()[:5] == ["r_wipe", "r", "ask", "(d)", "-d--"]
    delete_row = next(i for i, line in enumerate(lines) if line.startswith("r_delete_note "))
    assert lines[delete_row].split()[:4] == ["r_delete_note", "r", "auto", "----"]
    assert lines[delete_row + 1] == "    title*: string"
    echo_row = next(line for line in lines if line.startswith("r_echo "))
    assert echo_row.split()[:4] == ["r_echo", "r", "auto", "r-i-"]
    add_row = next(line for line in lines if line.startswith("r_add "))
    assert add_row.split()[:4] == ["r_add", "r", "ask", "----"]
    # what "destructive" means, under the table: the way to let such a tool go ahead
    assert lines[-2] == (
        "ask (d): destructive, asks even when autoApprove is true or a glob; "
        "name it exactly in autoApprove to let it go ahead"
    )
    assert lines[-1] == "13 tools from 1 server"
    assert "off" not in done.stderr


def test_a_tool_without_a_description_is_described_by_default(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tools --json and the table describe a tool listed without a description as "Tool
    '{name}' from MCP server '{serverId}'", and --json gives its provenance."""
    from supervisor import log
    from supervisor.cli import main

    script = tmp_path / "bare.py"
    script.write_text(UNDESCRIBED)
    config = write_config(tmp_path, {"bare": {"command": sys.executable, "args": [str(script)]}})
    try:
        assert main(["tools", "--config", config, "--json"]) == 0
        json_out = capsys.readouterr().out
        assert main(["tools", "--config", config]) == 0
        table_out = capsys.readouterr().out
    finally:
        log.reset_logging()  # the command configured logging for this whole process
    (ping,) = json.loads(json_out)["tools"]
    assert ping["description"] == "Tool 'ping' from MCP server 'bare'"
    assert ping["provenance"] == {
        "name": "bare_ping", "source": "mcp", "serverId": "bare", "originalName": "ping"
    }  # fmt: skip
    row = table_out.splitlines()[1]
    assert row.split()[:2] == ["bare_ping", "bare"]
    assert row.endswith("  Tool 'ping' from MCP server 'bare'")


def test_tools_exits_1_when_no_server_connects(tmp_path: pathlib.Path) -> None:
    """With every server failed there is no catalog: exit 1, still with a footer."""
    config = write_config(tmp_path, {"broken": fixture("exit-on-start", maxRestarts=0)})
    done = run("tools", "--config", config)
    assert done.returncode == 1
    footer = done.stdout.splitlines()[-1]
    assert footer == "0 tools from 0 servers; not connected: broken (see stderr)"


@pytest.mark.parametrize("command", [("tools",), ("call", "x_echo")], ids=["tools", "call"])
def test_a_config_error_exits_2(tmp_path: pathlib.Path, command: tuple[str, ...]) -> None:
    """A config that does not load is exit 2 with the field path on stderr."""
    config = write_config(tmp_path, {"x": {"command": "true", "heders": {}}})
    done = run(*command, "--config", config)
    assert done.returncode == 2
    assert "mcpServers.x.heders: unknown field" in done.stderr
    assert done.stdout == ""


# -- call ---------------------------------------------------------------------------------


@pytest.fixture
def rich(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path, pathlib.Path]:
    """A config with the ``rich`` fixture (``r``; echo, image and fail auto-approved,
    counting executions) and a server that leaves a marker file if it is ever started."""
    counts, started = tmp_path / "counts", tmp_path / "other-started"
    config = write_config(
        tmp_path,
        {
            "r": fixture("rich", count_file=counts, autoApprove=["echo", "image", "fail"]),
            "other": marker(started),
        },
    )
    return config, counts, started


def test_call_prints_the_text_and_starts_only_the_tools_server(rich) -> None:
    """call prints the result's text and exits 0; the other server is never started."""
    config, counts, started = rich
    done = run("call", "--config", config, "r_echo", '{"text": "hello"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    assert count_executions(counts) == {"echo": 1}
    assert not started.exists()


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(("r_echo", "--json", '{"text": "hi"}', "--config"), id="between"),
        pytest.param(("r_echo", '{"text": "hi"}', "--json", "--config"), id="after"),
    ],
)
def test_call_takes_options_anywhere(rich, order: tuple[str, ...]) -> None:
    """Options may come between or after TOOL and ARGS_JSON: `call TOOL --json ARGS
    --config F` is the call with the options first."""
    config, counts, _ = rich
    done = run("call", *order, config)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "hi"
    assert count_executions(counts) == {"echo": 1}


def test_call_keeps_the_file_a_large_result_spilled_to(
    rich, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file named by a spilled result is still there when the command has exited."""
    config, _, _ = rich
    monkeypatch.setenv("TMPDIR", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    done = run("call", "--config", config, "r_big_text", '{"kib": 100}', "--yes", "--json")
    assert done.returncode == 0, done.stderr
    spilled = pathlib.Path(json.loads(done.stdout)["spilled_to"])
    assert spilled.parent.parent == tmp_path / "temp"
    assert spilled.stat().st_size == 100 * 1024


def test_call_json_and_human_output_of_an_image(rich) -> None:
    """--json is one document with the text, the image (type, size, data) and no error;
    the human output is the text, then a line for the image."""
    config, _, _ = rich
    done = run("call", "--config", config, "r_image", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {k: document[k] for k in ("tool", "server", "text", "is_error", "spilled_to")} == {
        "tool": "r_image", "server": "r", "text": "an image", "is_error": False,
        "spilled_to": None,
    }  # fmt: skip
    (image,) = document["images"]
    assert image["mime_type"] == "image/png"
    assert image["size"] == len(base64.b64decode(image["data"])) > 0
    assert document["audio"] == [] and document["resources"] == []
    assert document["structured"] is None

    done = run("call", "--config", config, "r_image")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"an image\n[image: image/png, {image['size']} bytes]\n"


def test_call_with_invalid_arguments_exits_2_naming_the_field(rich) -> None:
    """Arguments that do not fit the schema: exit 2, the field named, nothing executed."""
    config, counts, _ = rich
    done = run("call", "--config", config, "r_echo", '{"text": 42}')
    assert done.returncode == 2
    assert "text: 42 is not of type 'string'" in done.stderr
    assert done.stdout == ""
    assert count_executions(counts) == {}


def test_call_of_a_failing_tool_exits_1_with_its_text(rich) -> None:
    """A tool that reports isError: exit 1, its text on stderr; --json still prints the
    result document, with is_error true."""
    config, _, _ = rich
    done = run("call", "--config", config, "r_fail", '{"message": "disk full"}', "--json")
    assert done.returncode == 1
    assert "disk full" in done.stderr
    document = json.loads(done.stdout)
    assert document["is_error"] is True and document["text"] == "disk full"


def test_call_needing_approval_fails_closed_without_yes(rich) -> None:
    """Headless without --yes, a tool needing approval is refused before it is sent (exit 2,
    the message says how to allow it, in the command line's terms); with --yes (arguments
    from stdin) it runs."""
    config, counts, _ = rich
    done = run("call", "--config", config, "r_delete_note", '{"title": "x"}')
    assert done.returncode == 2
    assert done.stderr == (
        "mcp-supervisor call: ApprovalRequired: tool 'r_delete_note' (server 'r') needs "
        "approval (destructive name) and no terminal to ask on; the call was not made. To "
        "allow it: add its exact name 'delete_note' to the server's autoApprove "
        "(autoApprove: true and globs do not cover destructive tools), or run with --yes\n"
    )
    assert count_executions(counts) == {}

    done = run("call", "--config", config, "r_delete_note", "-", "--yes", stdin='{"title": "x"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert count_executions(counts) == {"delete_note": 1}


def test_call_to_a_server_that_gave_up_says_what_to_do_on_the_command_line(
    tmp_path: pathlib.Path,
) -> None:
    """A server that failed its one attempt: exit 1 with ServerUnavailable, whose advice
    is the command line's (a long-running supervisor would retry), not Python's."""
    config = write_config(tmp_path, {"x": fixture("exit-on-start", maxRestarts=0)})
    done = run("call", "--config", config, "x_echo", "--json")
    assert done.returncode == 1
    said = (
        "It was tried once and is not retried by a one-shot command; a long-running "
        "supervisor (`mcp-supervisor serve`, `status --watch`) would retry it"
    )
    assert "mcp-supervisor call: ServerUnavailable: MCP server 'x' (pid " in done.stderr
    assert "exited with code 1" in done.stderr
    assert said in done.stderr and "handle." not in done.stderr and "retries=" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "ServerUnavailable" and error["message"].endswith(said)


def test_call_of_an_unknown_tool_exits_2_with_close_matches(rich) -> None:
    """An unknown tool: exit 2 naming close matches; only the prefix's server started."""
    config, _, started = rich
    done = run("call", "--config", config, "r_ech", '{"text": "x"}')
    assert done.returncode == 2
    assert "no tool named 'r_ech' (did you mean r_echo" in done.stderr
    assert not started.exists()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        pytest.param('{"text": ', "ARGS_JSON is not valid JSON", id="not-json"),
        pytest.param('["hello"]', "the arguments must be a JSON object", id="not-an-object"),
    ],
)
def test_call_with_bad_args_json_exits_2_before_starting_anything(
    tmp_path: pathlib.Path, arguments: str, said: str
) -> None:
    """ARGS_JSON that is not a JSON object: exit 2 with a clear message, no server started."""
    started = tmp_path / "started"
    config = write_config(tmp_path, {"x": marker(started)})
    done = run("call", "--config", config, "x_echo", arguments)
    assert done.returncode == 2
    assert said in done.stderr
    assert not started.exists()


def ask_on_a_terminal(config: str, answer: bytes) -> tuple[int, str, str]:
    """Run call with stdin and stderr on a pseudo-terminal; answer the prompt once it shows.
    Returns the exit code, stdout and what the terminal showed."""
    args = ["call", "--config", config, "r_delete_note", '{"title": "x"}']
    return answer_on_a_terminal(args, answer)


def test_call_asks_on_a_terminal(rich) -> None:
    """With a terminal on stdin and stderr, call asks; y runs the tool, n exits 1 unsent."""
    config, counts, _ = rich
    code, out, shown = ask_on_a_terminal(config, b"n\n")
    assert "Call r_delete_note on r (destructive name)? [y/N]" in shown
    assert code == 1 and out == ""
    assert "not approved; r_delete_note was not called" in shown
    assert count_executions(counts) == {}

    code, out, shown = ask_on_a_terminal(config, b"y\n")
    assert code == 0, shown
    assert out == "ok\n"
    assert count_executions(counts) == {"delete_note": 1}


def test_call_timeout_bounds_the_call(tmp_path: pathlib.Path) -> None:
    """call --timeout S: the call, waiting for its server included, gives up after S —
    with ToolCallTimeout, or on a loaded machine while the server is still starting;
    either way naming S. A bad value is a usage error."""
    config = write_config(tmp_path, {"slow": fixture("slow", approve=False)})
    done = run("call", "--config", config, "slow_sleep", '{"seconds": 60}', "--timeout", "2")
    assert done.returncode == 1, done.stderr
    assert "ToolCallTimeout" in done.stderr or "did not list its tools" in done.stderr
    assert "within 2.0 s" in done.stderr
    bad = run("call", "--config", config, "slow_sleep", "--timeout", "soon")
    assert bad.returncode == 2 and "'soon' is not a number of seconds" in bad.stderr


def test_call_draws_the_servers_progress_on_a_terminal(tmp_path: pathlib.Path) -> None:
    """With stderr on a terminal, a long call's MCP progress is drawn as a bar in place,
    and erased before the result; stdout has only the result."""
    config = write_config(tmp_path, {"slow": fixture("slow", approve=False, initTimeout=120)})
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "call", "--config", config, "slow_sleep",
         '{"seconds": 0.6, "steps": 3}'],
        stdin=subprocess.DEVNULL, stderr=terminal, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(terminal)
    shown = b""
    try:
        out, _ = process.communicate(timeout=TIMEOUT)
        shown += rest_of_terminal(controller)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    assert process.returncode == 0 and out == "slept 0.6\n"
    text = shown.decode(errors="replace")
    for k, filled in ((1, 7), (2, 13), (3, 20)):
        assert f"[{'#' * filled}{'-' * (20 - filled)}] {k}/3 step {k}" in text, text
    assert text.endswith("\r\x1b[K")  # erased


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"properties": {"title": {"type": "string"}}, "required": ["title"]},
        {"properties": {"tags": {"type": "array", "items": {"type": "string"}}, "n": {}}},
    ],
)
def test_the_renderers_signature_is_the_librarys(schema: dict[str, object]) -> None:
    """``tools`` prints a tool's parameters from its document as
    :func:`supervisor.tools.signature` writes them (the renderer cannot import it: a
    call through a gateway loads no MCP SDK)."""
    import attrs

    from supervisor.cli._render import signature as rendered
    from supervisor.tools import parameters
    from supervisor.tools._params import signature

    params = parameters(schema)
    assert rendered([attrs.asdict(p) for p in params]) == signature(params)
