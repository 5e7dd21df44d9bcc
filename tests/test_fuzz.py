"""Fuzzing with hypothesis: what a config file or a server's stdout holds never crashes us.

Two properties:

- **the config loader**: any JSON value, any object shaped like a config (server sections,
  a ``supervisor`` section, fields of random types) and any text in a file either loads
  or raises :class:`~supervisor.errors.ConfigError` naming each field's path — never
  another exception; ``mcp-supervisor check`` on a broken file exits 2 with the errors;
- **a stdio server's output**: whatever bytes a server writes (garbage before or after
  the handshake, invalid UTF-8, JSON that is not a JSON-RPC message, answers to unknown
  ids, lines over ``maxMessageBytes``, NUL bytes, a last line without its newline), the
  tree survives: that server ends connected or failed with a clear ``last_error``, the
  other servers still answer, and the supervisor's block exits leaving no process.

The misbehaving server is ``tests/byte_server.py``, a stdlib-only script told by a JSON
file what to write and when.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import mcp_types as types
import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from supervisor import cli
from supervisor.config import Config, ConfigError, load_config
from supervisor.config._secrets import command_line, masked_url
from supervisor.errors import SupervisorError
from supervisor.runtime import SupervisorHandle, open_supervisor
from supervisor.testing.servers import stdio_params

# -- the config loader ---------------------------------------------------------------------

#: What ``${VAR}`` references expand from: one variable set, one empty, one a broken URL.
ENVIRON = {"SET": "value", "EMPTY": "", "URL": "http://[::1"}

#: Strings the loader gives meaning to, well- and ill-formed.
TRICKY = (
    "",
    " ",
    "stdio",
    "local",
    "http",
    "streamable-http",
    "sse",
    "ws",
    "remote",
    "python3",
    "./server",
    "--token=abc",
    "permanent",
    "transient",
    "temporary",
    "escalate",
    "mark-unavailable",
    "one_for_one",
    "rest_for_one",
    "suffix",
    "error",
    "authorization_code",
    "client_credentials",
    "client_secret_post",
    "read write",
    "http://localhost:8080/mcp",
    "https://example.com/mcp?token=secret",
    "ws://127.0.0.1:1/ws",
    "http://127.0.0.1:33418/callback",
    "http://[::1",
    "http://a\uff03b/",
    "http://user:pw@host/",
    "http://host:99999/",
    "http://",
    "ftp://x",
    "${SET}",
    "${UNSET}",
    "${UNSET:-http://[x}",
    "${URL}",
    "${",
    "$${SET}",
    "${input:key}",
    "${env:SET}",
    "{env:SET}",
    "{file:x}",
    "${PROJECT_ROOT}",
    "${1BAD}",
    "a\x00b",
    "\ud800",
    "{tool}",
    "{prefix}_{tool}",
    "{x}{tool}",
    "{tool",
)
SERVER_KEYS = (
    "type", "command", "args", "env", "environment", "envFile", "cwd", "inheritEnv", "url",
    "headers", "auth", "oauth", "prefix", "description", "disabled", "enabled", "lazy",
    "timeout", "timeoutMs", "initTimeout", "restartOnCrash", "maxRestarts", "reconnect",
    "pingInterval", "degradedAfter", "restart", "giveUp", "shutdownTimeout", "approve",
    "autoApprove", "faults", "headersHelper", "transport", "comand",
)  # fmt: skip
AUTH_KEYS = (
    "grant", "clientId", "CLIENT_ID", "client_id", "clientSecret", "scopes", "scope",
    "redirectUri", "callbackPort", "tokenEndpointAuthMethod", "authServerMetadataUrl",
    "clientName", "secret", "assertionFile", "assertionEnv",
)  # fmt: skip
WHEN_KEYS = ("method", "tool", "nth", "every", "times", "probability", "direction", "after_s")
ACTIONS = (
    "kill", "hang", "drop", "duplicate", "reorder", "truncate", "garbage_line", "close_stream",
    "exit_on_initialize", "expire_session", "list_changed", "slow_start", "http_status", "x",
)  # fmt: skip
DO_KEYS = ("delay_ms", "jitter_ms", "hang_ms", "slow_start_ms", "error", "http_status", "x")
BACKOFF_KEYS = ("initial", "max", "multiplier", "jitter", "stableAfter", "maxAttempts", "min")
LIMIT_KEYS = ("maxConfigBytes", "maxToolsPerServer", "maxCatalogBytes", "maxMessageBytes", "x")

numbers = st.one_of(
    st.integers(),
    st.floats(),
    st.sampled_from([0, -1, 1, 0.5, 1.5, 3601, 65536, 2**63, 10**400, -(10**400), 1e308]),
)
scalars = st.one_of(
    st.none(), st.booleans(), numbers, st.text(max_size=12), st.sampled_from(TRICKY)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.sampled_from(TRICKY), inner, max_size=4)
    ),
    max_leaves=10,
)


def keyed(keys: tuple[str, ...], values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Objects with some of ``keys`` (or other short names) set to ``values``."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), values, max_size=5)


backoffs = keyed(BACKOFF_KEYS, numbers | scalars)
strings = st.lists(st.sampled_from(TRICKY) | scalars, max_size=4)
string_maps = st.dictionaries(
    st.sampled_from(["PATH", "API_TOKEN", "Authorization", "a=b", "", "bad header", "X"])
    | st.text(max_size=6),
    st.sampled_from(TRICKY) | scalars,
    max_size=3,
)
rules = st.fixed_dictionaries(
    {},
    optional={
        "when": keyed(WHEN_KEYS, scalars) | json_values,
        "do": st.sampled_from(ACTIONS) | keyed(DO_KEYS, numbers | scalars) | json_values,
        "description": scalars,
    },
)
fault_plans = st.one_of(
    st.lists(rules, max_size=3),
    st.fixed_dictionaries({}, optional={"seed": numbers | scalars, "rules": st.lists(rules)}),
)
field_values = st.one_of(
    scalars,
    fault_plans,
    strings,
    string_maps,
    keyed(AUTH_KEYS, scalars | strings),
    backoffs,
    st.fixed_dictionaries({}, optional={"startup": numbers, "request": numbers}),
    json_values,
)
#: Entries that get past "needs command or url", so the deeper checks run too.
BASES = (
    {},
    {"command": "python3"},
    {"command": ["python3", "-m", "x"], "type": "local"},
    {"url": "http://localhost/mcp"},
    {"url": "ws://localhost/ws"},
    {"type": "remote", "url": "${URL}"},
)
servers = st.builds(
    lambda base, fields: {**base, **fields},
    st.sampled_from(BASES),
    st.dictionaries(st.sampled_from(SERVER_KEYS) | st.text(max_size=8), field_values, max_size=5),
)
names = st.sampled_from(["a", "github", "x.y", "-bad", "", "n" * 70]) | st.text(max_size=8)
sections = st.dictionaries(names, servers | json_values, max_size=3)
supervisor_sections = st.fixed_dictionaries(
    {},
    optional={
        "strategy": scalars,
        "intensity": keyed(("maxRestarts", "withinSeconds"), numbers | scalars) | json_values,
        "backoff": st.fixed_dictionaries(
            {}, optional={"local": backoffs | json_values, "remote": backoffs | json_values}
        )
        | json_values,
        "limits": keyed(LIMIT_KEYS, numbers | scalars) | json_values,
        "requestTimeout": numbers | scalars,
        "initTimeout": numbers | scalars,
        "pingInterval": numbers | scalars,
        "pingTimeout": numbers | scalars,
        "toolNames": keyed(("template", "clash"), scalars) | json_values,
        "strategi": scalars,
    },
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "mcpServers": sections | json_values,
        "mcp": sections
        | st.fixed_dictionaries({"servers": sections}, optional={"inputs": json_values}),
        "servers": sections | json_values,
        "supervisor": supervisor_sections | json_values,
        "inputs": json_values,
        "preferences": json_values,
        "mcpServer": json_values,
    },
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for config files; relative ``cwd`` and ``envFile`` paths resolve in it."""
    return tmp_path_factory.mktemp("fuzz-config")


def loads_or_says_why(source: object, folder: Path) -> Config | None:
    """Load ``source``: a :class:`Config`, or ``None`` after a :class:`ConfigError` whose
    every error names a field path and says what is wrong. Anything else propagates."""
    try:
        config = load_config(source, environ=ENVIRON, project_root=folder)  # type: ignore[arg-type]
    except ConfigError as exc:
        assert exc.errors
        for error in exc.errors:
            assert error.path.strip() and error.message.strip()
        assert str(exc).splitlines() == [f"{e.path}: {e.message}" for e in exc.errors]
        return None
    # What is shown of a config works on whatever loaded: repr, secrets, the check's lines.
    repr(config)
    config.secrets()
    for server in config.servers.values():
        assert all(e.path.startswith(server.path) for e in server.errors)
        shown = masked_url(server.url) if server.url else command_line(server)
        assert isinstance(shown, str)
    return config


def write(folder: Path, data: str | bytes) -> Path:
    path = folder / "config.json"
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


@settings(max_examples=200, deadline=None)
@given(value=json_values)
@example(value=10**5000)  # more digits than int() takes: was a bare ValueError
@example(value=[[[]]])
def test_any_json_value_loads_or_raises_config_error(value: object, folder: Path) -> None:
    """Any JSON value, as a file and (an object) as a mapping: a config or a ConfigError."""
    if isinstance(value, dict):
        loads_or_says_why(value, folder)
    try:
        text = json.dumps(value)
    except ValueError:  # more digits than int -> str takes: written by hand
        text = "1" * 5000
    loads_or_says_why(write(folder, text), folder)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents)
@example(document={"mcpServers": {"a": {"command": "x", "timeout": 10**400}}})  # was OverflowError
@example(document={"supervisor": {"backoff": {"local": {"initial": 10**400}}}, "mcpServers": {}})
@example(document={"mcpServers": {"a": {"url": "http://[::1"}}})  # urlsplit's ValueError
@example(document={"mcpServers": {"a": {"url": "http://a\uff03b/"}}})  # NFKC: same
@example(document={"mcpServers": {"a": {"url": "http://x", "auth": {"redirectUri": "http://[x"}}}})
@example(document={"mcpServers": {"a": {"url": "${UNSET:-http://[x}?token=1"}}})  # repr() raised
@example(document={"mcpServers": {"\r": {}}, "mcp": {"\r": {}}})  # a name broke the one-a-line
def test_config_shaped_objects_load_or_raise_config_error(document: dict, folder: Path) -> None:
    """An object shaped like a config, fields of every type: a config or a ConfigError,
    read as a mapping and as a file (where NaN and Infinity are JSON too)."""
    loads_or_says_why(document, folder)
    loads_or_says_why(write(folder, json.dumps(document)), folder)


#: JSONC-ish fragments a file may be cut, spliced or ended with.
FRAGMENTS = ("//", "/*", "*/", ",", '"', "\\", "{", "}", "[", "]", ":", "\n", "\ufeff", "\x00")


@st.composite
def texts(draw: st.DrawFn) -> str | bytes:
    """A config file's contents: a document's JSON cut and spliced with JSONC fragments,
    any text, or any bytes."""
    kind = draw(st.sampled_from(["spliced", "text", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "text":
        return draw(st.text(max_size=200))
    text = json.dumps(draw(documents), indent=draw(st.sampled_from([None, 1])))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.sampled_from(FRAGMENTS)) + text[at + cut :]
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=texts())
@example(data="[" * 100_000)  # nested too deeply for the parser: was a RecursionError
@example(data='{"mcpServers": {}, /* open')
@example(data='{"mcpServers": {"a": {"command": "x",},},}  // trailing commas')
def test_any_file_loads_or_raises_config_error(data: str | bytes, folder: Path) -> None:
    """Any file's contents: a config or a ConfigError."""
    loads_or_says_why(write(folder, data), folder)


@pytest.mark.parametrize(
    "text",
    ['"\\' * 100_000, "\\" + '"\\' * 100_000, "/* " * 60_000, '{"a": 1, "b' * 20_000],
    ids=["escaped-quotes", "backslash-first", "open-comments", "open-strings"],
)
def test_an_unterminated_string_or_comment_is_found_in_linear_time(text: str, folder: Path) -> None:
    """JSONC comments were blanked by a scan restarting at each quote or ``/*`` of an
    unterminated string or comment: minutes for a file near the 256 KiB limit. Now a
    fraction of a second, and the error says where the JSON broke."""
    began = time.monotonic()
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        load_config(write(folder, text))
    assert time.monotonic() - began < 10  # it was minutes


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.one_of(texts(), documents.map(json.dumps)))
@example(data='{"mcpServers": {"a": {"url": "${UNSET:-http://[x}"}}}')  # was exit 1, ValueError
@example(data='{"mcpServers": {"a": {"url": "http://[::1"}}}')
def test_check_exits_2_with_the_errors_of_a_broken_file(
    data: str | bytes,
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``mcp-supervisor check`` (in-process) on a generated file: a broken one exits 2 and
    lists every error on stderr; none ever fails (1) or shows a traceback."""
    monkeypatch.setattr(cli, "configure_cli_logging", lambda args: None)  # leave the tests' own
    path = write(folder, data)
    try:
        load_config(path)
        broken: list[str] = []
    except ConfigError as exc:
        broken = [str(e) for e in exc.errors]
    capsys.readouterr()
    code = cli.main(["check", "--config", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 2), err
    if broken:
        assert code == 2
        assert err.splitlines()[: len(broken)] == broken


# -- a stdio server's output -----------------------------------------------------------------

BYTE_SERVER = Path(__file__).with_name("byte_server.py")
#: ``supervisor.limits.maxMessageBytes`` of these tests: small, so huge lines are cheap.
LIMIT = 8192
#: An answer the byte server writes after its payload (when it goes on serving).
NEXT_LINE = b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n'
#: A change notice: the supervisor lists the tools again.
LIST_CHANGED = b'{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}\n'


def byte_server(script: Path, **fields: object) -> dict[str, object]:
    """A config entry running ``byte_server.py`` on ``script``: connected at once,
    restarted once (at once), then failed."""
    return {
        "command": sys.executable,
        "args": [str(BYTE_SERVER), str(script)],
        "lazy": False,
        "maxRestarts": 1,
        "initTimeout": 60,  # a loaded machine may take seconds to start Python
        "timeout": 30,
        "autoApprove": True,
        **fields,
    }


def supervised(servers: dict[str, object]) -> dict[str, object]:
    """A config: ``servers``, an ``echo`` fixture server, immediate restarts, ``LIMIT``."""
    command, args = stdio_params("echo")
    echo = {"command": command, "args": args, "autoApprove": True, "initTimeout": 120}
    return {
        "mcpServers": {**servers, "echo": echo},
        "supervisor": {
            "backoff": {"local": {"initial": 0, "max": 0}},
            "limits": {"maxMessageBytes": LIMIT},
        },
    }


def script(path: Path, payload: bytes, when: str, then: str = "serve") -> Path:
    """Write the byte server's instructions: write ``payload`` at ``when``, then ``then``."""
    path.write_text(json.dumps({"payload": payload.hex(), "when": when, "then": then}))
    return path


def alive(pid: int) -> bool:
    """Whether the process group ``pid`` leads still has a member."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def settled(sup: SupervisorHandle, name: str, timeout: float = 60) -> str:
    """Wait until server ``name`` has settled: ``"connected"`` once a tool call was
    answered (so whatever it wrote before the answer was read), or ``"failed"``. Any
    error of a call is a :class:`SupervisorError` (a retry or the failure follows). The
    state is looked at again after each event, not on a timer."""
    async with sup.subscribe("*") as events:
        with trio.fail_after(timeout):
            while True:
                status = sup.status()[name].status
                if status == "failed":
                    return status
                if status == "connected":
                    try:
                        result = await sup.call(f"{name}_noop", timeout=30)
                    except SupervisorError:
                        pass
                    else:
                        assert result.text == "ok"
                        return status
                await events.receive()  # something happened: look again


async def echo_answers(sup: SupervisorHandle, text: str) -> None:
    """The well-behaved echo server answers a tool call."""
    assert (await sup.call("echo_echo", {"text": text})).text == text


def violates(line: bytes) -> bool:
    """Whether the transport takes this stdout line for a protocol violation."""
    if not line.strip() or len(line) > LIMIT:
        return False  # blank lines are skipped; long ones dropped, the connection kept
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return True
    return False


def expected(payload: bytes, then: str) -> tuple[str, tuple[str, ...]]:
    """The state a byte server settles in and the reasons its ``last_error`` may give."""
    data = payload + NEXT_LINE if then == "serve" else payload  # a last line, glued or not
    if any(violates(line) for line in data.split(b"\n")):
        garbage = ("is not a JSON-RPC message",)
        # Exiting after the garbage: which of the two is noticed first is a race.
        return "failed", garbage + (("exited with code 0",) if then == "exit" else ())
    if then == "eof":
        return "failed", ("closed its stdout but is still running",)
    if then == "exit":
        return "failed", ("exited with code 0",)
    return "connected", ()


json_rpc_ids = st.integers(10**6, 10**9) | st.text(min_size=1, max_size=8).map("fuzz-{}".format)
json_rpc = st.one_of(
    st.builds(
        lambda i, result: {"jsonrpc": "2.0", "id": i, "result": result},
        json_rpc_ids,
        json_values,
    ),
    st.builds(
        lambda i, code, message: {
            "jsonrpc": "2.0",
            "id": i,
            "error": {"code": code, "message": message},
        },
        json_rpc_ids,
        st.integers(-33000, 0),
        st.text(max_size=20),
    ),
    st.builds(
        lambda method, params: {"jsonrpc": "2.0", "method": method, "params": params},
        st.sampled_from(
            [
                "notifications/message",
                "notifications/progress",
                "notifications/tools/list_changed",
                "notifications/cancelled",
                "notifications/unknown",
            ]
        ),
        st.dictionaries(st.sampled_from(["level", "data", "progress", "requestId"]), json_values),
    ),
    st.builds(  # a request to the client, which answers it (an error, most likely)
        lambda i, method, params: {"jsonrpc": "2.0", "id": i, "method": method, "params": params},
        json_rpc_ids,
        st.sampled_from(["ping", "roots/list", "sampling/createMessage", "elicitation/create"]),
        st.dictionaries(st.sampled_from(["messages", "message", "maxTokens"]), json_values),
    ),
)
lines = st.one_of(
    st.binary(max_size=300),  # anything: invalid UTF-8, NUL bytes, newlines
    st.text(max_size=100).map(str.encode),
    json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3).map(
        lambda v: json.dumps(v).encode()
    ),
    json_rpc.map(lambda m: json.dumps(m).encode()),
    st.integers(0, 32).map(lambda n: b"\x00" * n),
    st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\r", b" \t", b"\x0c"]),
    # a line over maxMessageBytes, ended: unended, it would swallow the answer after it
    # (test_each_kind_of_bad_output_gets_its_clear_reason has one unended before EOF)
    st.sampled_from([b"x", b"\xff", b'{"jsonrpc": "2.0", "id": 123456789, "result": "']).map(
        lambda head: head + b"y" * (LIMIT + 10) + b"\n"
    ),
)


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """A few lines of anything, each ended by a newline, but maybe the last."""
    parts = draw(st.lists(lines, min_size=1, max_size=3))
    ended = draw(st.sampled_from([True, True, False]))  # unended: glued to the next line
    return b"\n".join(parts) + (b"\n" if ended else b"")


async def test_random_output_never_crashes_the_tree(tmp_path: Path) -> None:
    """Hypothesis drives one supervisor: for each example the byte server is given new
    bytes and restarted; it settles connected (the bytes were harmless) or failed with
    the reason expected, the echo server answers, and no process outlives the block."""
    instructions = script(tmp_path / "script.json", b"", "start")
    config = supervised({"fuzz": byte_server(instructions)})
    pids: list[int] = []
    ran: list[bytes] = []  # each example's payload

    async def one(payload: bytes, when: str, then: str, n: int) -> None:
        script(instructions, payload, when, then)
        await sup.restart("fuzz")
        state, reasons = expected(payload, then)
        assert await settled(sup, "fuzz") == state
        record = sup.status()["fuzz"]
        if state == "failed":
            assert record.last_error and any(r in record.last_error for r in reasons), (
                record.last_error
            )
        await echo_answers(sup, f"still here {n}")

    @settings(
        max_examples=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        payloads(),
        st.sampled_from(["start", "handshake", "connected"]),
        st.sampled_from(["serve", "serve", "serve", "exit", "eof"]),
    )
    @example(b"garbage\n", "start", "serve")
    @example(b"\xff\xfe\x00\n", "connected", "serve")
    @example(b"no newline", "connected", "eof")  # was: connected, every call timing out
    @example(b"", "handshake", "eof")  # was: the handshake timing out, or connected for ever
    @example(LIST_CHANGED, "connected", "eof")  # was: "unknown error", the reason lost
    @example(b"\x0b", "handshake", "serve")  # was: the listing's page "not read as JSON
    # to be measured (NaN or Infinity, say)": not JSON at all, it is not a JSON-RPC message
    def examples(payload: bytes, when: str, then: str) -> None:
        ran.append(payload)
        trio.from_thread.run(one, payload, when, then, len(ran))

    async with (
        open_supervisor(config) as sup,
        sup.subscribe("mcp.local.spawned") as spawned,
        trio.open_nursery() as nursery,
    ):

        async def collect() -> None:
            async for event in spawned:
                pids.append(event.pid)  # type: ignore[attr-defined]

        nursery.start_soon(collect)
        await trio.to_thread.run_sync(examples)
        nursery.cancel_scope.cancel()
    assert len(pids) > len(ran)  # a byte server per example at least, and the echo
    assert not [pid for pid in pids if alive(pid)]


#: (name, payload, when, then, the state it ends in, what its last_error says)
CASES = [
    ("before", b"garbage before the handshake\n", "start", "serve", "failed", "not a JSON-RPC"),
    ("after", b"garbage after the handshake\n", "handshake", "serve", "failed", "not a JSON-RPC"),
    ("instead", b"garbage instead of an answer\n", "instead", "serve", "failed", "not a JSON-RPC"),
    ("later", b"garbage once connected\n", "connected", "serve", "failed", "not a JSON-RPC"),
    ("utf8", b"\xff\xfe\xfd invalid UTF-8\n", "connected", "serve", "failed",
     "message: '\ufffd\ufffd\ufffd invalid"),
    ("array", b"[1, 2, 3]\n", "handshake", "serve", "failed", "'[1, 2, 3]'"),
    ("string", b'"a string"\n', "start", "serve", "failed", "not a JSON-RPC"),
    ("object", b'{"not": "json-rpc"}\n', "connected", "serve", "failed", "not a JSON-RPC"),
    ("nul", b"\x00\x00\x00\n", "connected", "serve", "failed", r"\x00\x00"),
    ("unknown-id", b'{"jsonrpc": "2.0", "id": 987654321, "result": {}}\n', "connected",
     "serve", "connected", ""),
    ("huge", b"x" * (LIMIT * 4) + b"\n", "start", "serve", "connected", ""),
    ("huge-answer", b'{"jsonrpc": "2.0", "id": 7654321, "result": "' + b"x" * LIMIT + b'"}\n',
     "connected", "serve", "connected", ""),
    ("unended", b"a last line without its newline", "connected", "eof", "failed",
     "not a JSON-RPC message: 'a last line without its newline'"),
    ("unended-huge", b"x" * (LIMIT * 2), "handshake", "eof", "failed",
     "closed its stdout but is still running"),
    ("closed", b"", "connected", "eof", "failed", "closed its stdout but is still running"),
    ("exits", b"", "connected", "exit", "failed", "exited with code 0"),
]  # fmt: skip


async def test_each_kind_of_bad_output_gets_its_clear_reason(tmp_path: Path) -> None:
    """One supervisor, one byte server per kind of bad output, all at once: each ends as
    expected (its last_error saying what was wrong), the echo server answers meanwhile,
    and no process outlives the block."""
    servers = {
        name: byte_server(script(tmp_path / f"{name}.json", payload, when, then))
        for name, payload, when, then, _, _ in CASES
    }
    async with open_supervisor(supervised(servers)) as sup:
        async with trio.open_nursery() as nursery:
            for name in servers:
                nursery.start_soon(settled, sup, name)
            await echo_answers(sup, "meanwhile")
        status = sup.status()
        for name, _, _, _, state, reason in CASES:
            record = status[name]
            assert (record.status, record.restarts) == (state, 1 if state == "failed" else 0)
            if state == "failed":
                assert reason in (record.last_error or ""), (name, record.last_error)
        await echo_answers(sup, "still here")
        pids = [r.pid for r in status.values() if r.pid is not None]
    assert pids and not [pid for pid in pids if alive(pid)]


async def test_a_connection_lost_during_a_relist_keeps_its_reason(tmp_path: Path) -> None:
    """A change notice, then the connection dies with the relist it asked for in flight
    (and no call): the relist's "Connection closed" ended the incarnation first, and the
    server was failed for "unknown error". Now the transport's reason is the server's."""
    instructions = script(tmp_path / "relist.json", LIST_CHANGED, "connected", "eof")
    async with open_supervisor(supervised({"relist": byte_server(instructions)})) as sup:
        async with sup.subscribe("*") as events:  # no call: only the events are awaited
            with trio.fail_after(60):
                while sup.status()["relist"].status != "failed":
                    await events.receive()
        record = sup.status()["relist"]
        assert record.restarts == 1
        assert "closed its stdout but is still running" in (record.last_error or "")


async def test_a_command_no_process_can_be_given_fails_at_once_saying_so() -> None:
    """A NUL character in an argument (or text the file system encoding cannot hold) was
    a bare ValueError from the spawn, retried as if it could pass: now the server is
    failed at once, with a reason naming what cannot be given to a process."""
    config = supervised(
        {
            "nul": {"command": sys.executable, "args": ["a\x00b"], "lazy": False},
            "surrogate": {"command": sys.executable, "args": ["\ud800"], "lazy": False},
        }
    )
    async with open_supervisor(config) as sup:
        for name in ("nul", "surrogate"):
            await settled(sup, name)
            record = sup.status()[name]
            assert (record.status, record.restarts, record.retryable) == ("failed", 0, False)
            assert "cannot be given to a process" in (record.last_error or "")
        await echo_answers(sup, "unaffected")


async def test_a_url_malformed_once_expanded_is_reported_not_raised() -> None:
    """A URL that only turns malformed once ``${...}`` is expanded makes that server
    invalid; its status shows it (its target cut by hand) where a ValueError was raised."""
    config = supervised({"bad": {"url": "http://[${UNSET_FUZZ_VARIABLE:-x}/mcp?key=1"}})
    async with open_supervisor(config) as sup:
        record = sup.status()["bad"]
        assert record.status == "failed" and record.target == "http://[x/mcp"
        assert "URL is malformed" in (record.last_error or "")
