from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections import namedtuple
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from supervisor import log
from supervisor.log import SecretRedactor, configure_logging, get_logger

SECRET = "s3cr3t-TOKEN-value"


class FakeTTY(io.StringIO):
    """A StringIO that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class HidesInStr:
    def __str__(self) -> str:
        return "HidesInStr"

    def __repr__(self) -> str:
        return f"HidesInStr(token={SECRET!r})"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    def reset() -> None:
        log.reset_logging()
        structlog.reset_defaults()  # tests start from structlog's own defaults
        structlog.contextvars.clear_contextvars()
        log.redactor.clear()

    reset()
    yield
    reset()
    log.reset_logging()  # leave the library's default for the tests that follow


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines(stream)]


class TestConfigureLogging:
    def test_json_lines_when_stream_is_not_a_tty(self) -> None:
        """A non-terminal stream gets one JSON object per line with event, level, timestamp."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        logger = get_logger()
        logger.info("first", n=1)
        logger.warning("second")

        records = json_lines(out)
        assert [r["event"] for r in records] == ["first", "second"]
        assert [r["level"] for r in records] == ["info", "warning"]
        assert records[0]["n"] == 1
        for record in records:
            timestamp = record["timestamp"]
            assert isinstance(timestamp, str) and timestamp.endswith("Z")

    def test_console_renderer_when_json_false(self) -> None:
        """json=False renders the console format, without colors on a non-terminal."""
        out = io.StringIO()
        configure_logging(stream=out, json=False, force=True)
        get_logger().info("hello console", key="value")

        (line,) = lines(out)
        assert "hello console" in line and "key=value" in line
        assert "\x1b[" not in line
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)

    def test_console_with_colors_on_a_tty(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A terminal gets the colored console format by default."""
        monkeypatch.delenv("NO_COLOR", raising=False)
        out = FakeTTY()
        configure_logging(stream=out, force=True)
        get_logger().info("hello tty")

        assert "hello tty" in out.getvalue()
        assert "\x1b[" in out.getvalue()

    def test_console_shows_a_servers_escapes_never_obeys_them(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """On a terminal, text a server sent (a stderr line, an error, a traceback's
        message) is written with visible escapes — through our loggers, the standard
        library's (the SDK's) and the unconfigured default — and the only escape
        sequences left are the renderer's own colours; a traceback keeps its lines."""
        monkeypatch.delenv("NO_COLOR", raising=False)
        bad = "\x1b]0;T\x07\x1b]52;c;QQ==\x07\x1b[2J\x9b1m\u202eZ"
        shown = "\\x1b]0;T\\x07\\x1b]52;c;QQ==\\x07\\x1b[2J\\x9b1m\\u202eZ"

        def obeyed(text: str) -> list[str]:
            return re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)

        def uncoloured(text: str) -> str:
            return re.sub("\x1b\\[[0-9;]*m", "", text)  # the renderer's own colours

        out = FakeTTY()
        configure_logging(stream=out, force=True)
        try:
            raise ValueError("boom " + bad)
        except ValueError:
            get_logger("t").exception("server said " + bad, line="stderr " + bad)
        logging.getLogger("mcp.client").warning("sdk: %s", bad)
        assert "\x1b[" in out.getvalue()  # coloured: a terminal
        text = uncoloured(out.getvalue())
        assert obeyed(text) == [], text
        for said in ("server said " + shown, "stderr " + shown, "ValueError: boom " + shown):
            assert said in text
        assert "sdk: " + shown in text
        assert "Traceback (most recent call last):\n" in text

        log.reset_logging()
        structlog.reset_defaults()
        get_logger("t").warning("default " + bad, line=bad)
        err = capsys.readouterr().err
        assert obeyed(err) == [] and "default " + shown in err, err

    def test_no_color_env_disables_colors(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """NO_COLOR turns colors off even on a terminal."""
        monkeypatch.setenv("NO_COLOR", "1")
        out = FakeTTY()
        configure_logging(stream=out, force=True)
        get_logger().info("hello tty")

        assert "\x1b[" not in out.getvalue()

    def test_json_true_on_a_tty(self) -> None:
        """json=True renders JSON lines even on a terminal."""
        out = FakeTTY()
        configure_logging(stream=out, json=True, force=True)
        get_logger().info("forced json")

        assert json_lines(out)[0]["event"] == "forced json"

    def test_default_stream_is_stderr(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without a stream, log lines go to stderr and never to stdout."""
        configure_logging(force=True)
        get_logger().info("to stderr")

        captured = capsys.readouterr()
        assert captured.out == ""
        assert json.loads(captured.err)["event"] == "to stderr"

    def test_second_call_is_a_no_op(self) -> None:
        """A second configure_logging call without force changes nothing."""
        first, second = io.StringIO(), io.StringIO()
        configure_logging(stream=first)
        configure_logging(stream=second, level="error")
        get_logger().info("where")

        assert json_lines(first)[0]["event"] == "where"
        assert second.getvalue() == ""

    def test_force_reconfigures(self) -> None:
        """force=True replaces an earlier configuration."""
        first, second = io.StringIO(), io.StringIO()
        configure_logging(stream=first)
        configure_logging(stream=second, force=True)
        get_logger().info("where")

        assert first.getvalue() == ""
        assert json_lines(second)[0]["event"] == "where"

    @pytest.mark.parametrize("level", ["warning", "WARNING", "warn", logging.WARNING], ids=repr)
    def test_level_filters_lower_levels(self, level: str | int) -> None:
        """Events below the configured level are dropped; names and logging constants work."""
        out = io.StringIO()
        configure_logging(stream=out, level=level, force=True)
        logger = get_logger()
        logger.info("dropped")
        logger.warning("kept")

        assert [r["event"] for r in json_lines(out)] == ["kept"]

    @pytest.mark.parametrize("level", ["loud", 25, True], ids=repr)
    def test_unknown_level_raises_and_configures_nothing(self, level: str | int) -> None:
        """An unknown level raises ValueError and leaves logging unconfigured."""
        with pytest.raises(ValueError, match="unknown log level"):
            configure_logging(stream=io.StringIO(), level=level)
        assert not log._configured

    def test_get_logger_binds_name_and_initial_values(self) -> None:
        """get_logger binds its name as `logger` plus any initial values."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        get_logger("supervisor.tree", server="github").info("started")

        (record,) = json_lines(out)
        assert record["logger"] == "supervisor.tree"
        assert record["server"] == "github"

    def test_logger_made_before_configuring_uses_the_configuration(self) -> None:
        """A module-level logger created before configure_logging logs with its settings."""
        early = get_logger("supervisor.early")
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        early.info("late")

        (record,) = json_lines(out)
        assert record["logger"] == "supervisor.early"

    def test_unnamed_logger_has_no_logger_field(self) -> None:
        """get_logger() without a name adds no logger field."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        get_logger().info("anonymous")

        assert "logger" not in json_lines(out)[0]

    def test_contextvars_are_merged(self) -> None:
        """Values bound with structlog.contextvars appear in every line."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        structlog.contextvars.bind_contextvars(request_id="r-1")
        get_logger().info("with context")

        assert json_lines(out)[0]["request_id"] == "r-1"


def _message(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info(f"connecting with {SECRET}")


def _interpolated(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info("connecting with %s", SECRET)


def _keyword(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info("connecting", authorization=f"Bearer {SECRET}")


def _bound(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.bind(token=SECRET).info("connecting")


def _contextvar(logger: structlog.typing.FilteringBoundLogger) -> None:
    structlog.contextvars.bind_contextvars(token=SECRET)
    logger.info("connecting")


def _nested(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info(
        "connecting",
        config={"headers": {"Authorization": f"Bearer {SECRET}"}, "args": ["--key", SECRET]},
        pair=("token", SECRET),
    )


def _exception(logger: structlog.typing.FilteringBoundLogger) -> None:
    try:
        raise RuntimeError("connect failed with s3cr3t-TOKEN-value")  # secret in source too
    except RuntimeError:
        logger.exception("connect failed")


def _stack(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info("where am I", stack_info=True)  # s3cr3t-TOKEN-value, shown in the stack


def _exception_value(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.error("connect failed", error=RuntimeError(f"bad token {SECRET}"))


def _object_str(logger: structlog.typing.FilteringBoundLogger) -> None:
    class URL:
        def __str__(self) -> str:
            return f"https://user:{SECRET}@example.com/"

        def __repr__(self) -> str:
            return f"URL({str(self)!r})"

    logger.info("connecting", url=URL())


def _object_repr(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info("connecting", thing=HidesInStr())


def _secret_as_key(logger: structlog.typing.FilteringBoundLogger) -> None:
    logger.info("connecting", tokens={SECRET: "github"})


LEAKS: list[Callable[[structlog.typing.FilteringBoundLogger], None]] = [
    _message,
    _interpolated,
    _keyword,
    _bound,
    _contextvar,
    _nested,
    _exception,
    _stack,
    _exception_value,
    _object_str,
    _object_repr,
    _secret_as_key,
]


class TestRedactionInOutput:
    @pytest.mark.parametrize("use_json", [True, False], ids=["json", "console"])
    @pytest.mark.parametrize("emit", LEAKS, ids=lambda f: f.__name__.lstrip("_"))
    def test_registered_secret_never_appears(
        self, emit: Callable[[structlog.typing.FilteringBoundLogger], None], use_json: bool
    ) -> None:
        """A registered secret is replaced by *** wherever it occurs in a log line."""
        out = io.StringIO()
        configure_logging(stream=out, json=use_json, force=True)
        log.register_secret(SECRET)
        emit(get_logger())

        output = out.getvalue()
        assert output
        assert SECRET not in output
        assert "***" in output

    def test_traceback_is_kept_but_redacted(self) -> None:
        """log.exception still renders the traceback, with the secret redacted."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        log.register_secret(SECRET)
        _exception(get_logger())

        (record,) = json_lines(out)
        exception = record["exception"]
        assert isinstance(exception, str)
        assert "Traceback (most recent call last)" in exception
        assert "RuntimeError: connect failed with ***" in exception

    def test_secret_registered_after_first_log_is_redacted(self) -> None:
        """A secret registered after a logger was first used is still redacted."""
        out = io.StringIO()
        configure_logging(stream=out, force=True)
        logger = get_logger()
        logger.info("before")
        log.register_secret(SECRET)
        logger.info(SECRET)

        assert [r["event"] for r in json_lines(out)] == ["before", "***"]

    def test_module_redact_uses_the_registry(self) -> None:
        """redact() scrubs plain text with the process-wide registry."""
        assert log.redact(f"stderr: {SECRET}") == f"stderr: {SECRET}"
        log.register_secret(SECRET)
        assert log.redact(f"stderr: {SECRET}") == "stderr: ***"


class TestSecretRedactor:
    def test_every_occurrence_is_replaced(self) -> None:
        """redact replaces every occurrence of every secret."""
        redactor = SecretRedactor(["alpha-key", "beta-key"])
        assert redactor.redact("alpha-key beta-key alpha-key") == "*** *** ***"

    @pytest.mark.parametrize("order", ["short-first", "long-first"])
    def test_overlapping_secrets_are_fully_redacted(self, order: str) -> None:
        """With overlapping secrets the longest match wins, whatever the registration order."""
        secrets = ["abcd", "abcdef"] if order == "short-first" else ["abcdef", "abcd"]
        redactor = SecretRedactor(secrets)
        assert redactor.redact("xabcdefx abcd") == "x***x ***"

    def test_regex_metacharacters_match_literally(self) -> None:
        """Secrets are matched as literal text, not as regular expressions."""
        redactor = SecretRedactor(["p@ss.w*rd(1)"])
        assert redactor.redact("pw=p@ss.w*rd(1) other=p@ssXwrd1") == "pw=*** other=p@ssXwrd1"

    @pytest.mark.parametrize("secret", ["", "a", "ab", "abc"], ids=repr)
    def test_short_strings_are_ignored(self, secret: str) -> None:
        """Secrets shorter than four characters are not registered."""
        redactor = SecretRedactor()
        redactor.add(secret)
        assert len(redactor) == 0
        assert redactor.redact("a cab abc") == "a cab abc"

    def test_four_characters_is_enough(self) -> None:
        """A four-character secret is registered."""
        redactor = SecretRedactor(["abcd"])
        assert redactor.redact("abcd") == "***"

    def test_discard_stops_redaction(self) -> None:
        """A discarded secret is no longer redacted; discarding an unknown one is a no-op."""
        redactor = SecretRedactor(["alpha-key", "beta-key"])
        assert redactor.redact("alpha-key") == "***"
        redactor.discard("alpha-key")
        redactor.discard("never-added")
        assert redactor.redact("alpha-key beta-key") == "alpha-key ***"

    def test_added_secret_is_used_after_compiling(self) -> None:
        """Adding a secret after the pattern was compiled takes effect immediately."""
        redactor = SecretRedactor(["alpha-key"])
        assert redactor.redact("beta-key") == "beta-key"
        redactor.add("beta-key")
        assert redactor.redact("beta-key") == "***"

    def test_no_secrets_returns_event_dict_unchanged(self) -> None:
        """With no secrets registered, the processor returns the very same event dict."""
        nested = {"k": ["v"]}
        event_dict = {"event": "hello", "nested": nested}
        result = SecretRedactor()(None, "info", event_dict)
        assert result is event_dict
        assert result == {"event": "hello", "nested": {"k": ["v"]}}
        assert result["nested"] is nested

    def test_clean_values_keep_their_identity(self) -> None:
        """Values that hold no secret are passed through as the same objects."""
        obj, nested = object(), {"a": [1, ("x", 2.5)]}
        event_dict = {"event": "hello", "obj": obj, "nested": nested}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert event_dict["obj"] is obj
        assert event_dict["nested"] is nested

    def test_nested_containers_are_copied_not_mutated(self) -> None:
        """Nested containers are redacted in a copy; the caller's objects stay intact."""
        Pair = namedtuple("Pair", "name value")
        inner = {"token": SECRET, "list": [SECRET, 1], "set": {SECRET}}
        event_dict = {
            "event": "x",
            "inner": inner,
            "tuple": (SECRET, "clean"),
            "pair": Pair("token", SECRET),
            "frozen": frozenset([SECRET]),
        }
        SecretRedactor([SECRET])(None, "info", event_dict)

        assert event_dict["inner"] == {"token": "***", "list": ["***", 1], "set": {"***"}}
        assert event_dict["tuple"] == ("***", "clean")
        assert event_dict["pair"] == Pair("token", "***")
        assert type(event_dict["pair"]) is Pair
        assert event_dict["frozen"] == frozenset(["***"])
        assert inner == {"token": SECRET, "list": [SECRET, 1], "set": {SECRET}}

    def test_keys_are_redacted(self) -> None:
        """A secret used as a key, top-level or nested, is redacted too."""
        event_dict = {"event": "x", f"k-{SECRET}": 1, "nested": {SECRET: 2}}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert event_dict == {"event": "x", "k-***": 1, "nested": {"***": 2}}

    def test_object_str_is_redacted(self) -> None:
        """An object whose str() holds a secret is replaced by its redacted str()."""
        event_dict = {"event": "x", "error": ValueError(f"bad {SECRET}")}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert event_dict["error"] == "bad ***"

    def test_object_repr_is_redacted(self) -> None:
        """An object whose repr() alone holds a secret is replaced by its redacted repr()."""
        event_dict = {"event": "x", "thing": HidesInStr()}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert event_dict["thing"] == "HidesInStr(token='***')"

    def test_unprintable_object_is_replaced(self) -> None:
        """An object that cannot be rendered to text is replaced by a placeholder, not raised."""
        event_dict = {"event": "x", "thing": Unprintable()}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert event_dict["thing"] == "<unprintable Unprintable>"

    def test_self_referential_container_terminates(self) -> None:
        """A container that contains itself is redacted without infinite recursion."""
        loop: list[object] = [SECRET]
        loop.append(loop)
        event_dict = {"event": "x", "loop": loop}
        SecretRedactor([SECRET])(None, "info", event_dict)
        assert SECRET not in repr(event_dict)

    def test_repr_does_not_reveal_secrets(self) -> None:
        """The redactor's repr never shows the registered secrets."""
        redactor = SecretRedactor([SECRET])
        assert SECRET not in repr(redactor)
        assert SECRET in redactor


def test_default_before_configuration_is_stderr_and_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Unconfigured, the library logs warnings to stderr (never stdout), secrets redacted,
    without configuring structlog."""
    assert not structlog.is_configured()
    log.register_secret("s3cr3t-value")
    logger = log.get_logger("supervisor.test")
    logger.info("not shown")
    logger.warning("child exited", reason="token s3cr3t-value refused")
    out, err = capsys.readouterr()
    assert out == ""
    assert "child exited" in err and "token *** refused" in err
    assert "not shown" not in err and "s3cr3t-value" not in err
    assert not structlog.is_configured()


def test_configure_logging_replaces_the_default() -> None:
    """The default (open_supervisor's) does not use up configure_logging's one call."""
    assert log.configure_default_logging()
    assert structlog.is_configured()
    stream = io.StringIO()
    log.configure_logging(stream=stream, level="info")
    log.get_logger("x").info("hello")
    assert json.loads(stream.getvalue())["event"] == "hello"


def test_standard_library_records_are_redacted_too() -> None:
    """Records of stdlib loggers (the SDK's, httpx's) go out on our stream, redacted."""
    import logging

    stream = io.StringIO()
    configure_logging(stream=stream, json=True, force=True, level="info")
    try:
        log.register_secret("stdlib-secret-value")
        logging.getLogger("mcp.client.test").error("token %s refused", "stdlib-secret-value")
        line = json.loads(stream.getvalue().splitlines()[-1])
        assert line["event"] == "token *** refused"
        assert line["level"] == "error" and line["logger"] == "mcp.client.test"
    finally:
        log.reset_logging()


def test_the_default_is_not_installed_over_the_applications_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """configure_default_logging leaves an application's own structlog configuration alone."""
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
    )
    assert not log.configure_default_logging()
    log.get_logger("supervisor.test").info("through the application's chain")
    assert json.loads(out.getvalue())["event"] == "through the application's chain"
    assert capsys.readouterr().err == ""


def test_default_bound_logger_stays_lazy() -> None:
    """A logger bound while unconfigured still follows a later configuration."""
    bound = log.get_logger("supervisor.test", a=1).bind(b=2).unbind("a")
    stream = io.StringIO()
    configure_logging(stream=stream, force=True)
    bound.info("hello")
    (record,) = json_lines(stream)
    assert (record["b"], record["logger"], "a" in record) == (2, "supervisor.test", False)


def test_custom_standard_library_level_names_are_known() -> None:
    """Levels come from the standard library's table, so a registered name works."""
    logging.addLevelName(25, "NOTICE")
    try:
        assert log._level_number("notice") == 25
        assert log._level_number(25) == 25
    finally:
        del logging._nameToLevel["NOTICE"], logging._levelToName[25]


class TestRedactionScopes:
    def test_scope_redacts_while_open_only(self) -> None:
        """redacting() registers its secrets on entry and releases them on exit."""
        scope = log.redacting([SECRET])
        assert SECRET not in log.redactor  # not entered yet
        with scope:
            assert log.redact(SECRET) == "***"
        assert log.redact(SECRET) == SECRET
        assert len(log.redactor) == 0

    def test_scopes_sharing_a_secret_are_reference_counted(self) -> None:
        """Two supervisors of one config: the first to end does not unregister the other's."""
        first = log.redacting([SECRET, "only-first"])
        second = log.redacting([SECRET, SECRET])  # counts once within a scope
        first.__enter__()
        second.__enter__()
        first.close()  # not nested: the first one ends first
        assert SECRET in log.redactor and "only-first" not in log.redactor
        assert log.redact(SECRET) == "***"
        second.close()
        second.close()  # closing again releases nothing more
        assert SECRET not in log.redactor and len(log.redactor) == 0

    def test_add_while_open_and_added_secrets_survive_scopes(self) -> None:
        """scope.add() holds more secrets; a register_secret() one outlives every scope."""
        log.register_secret("registered-for-good")
        with log.redacting() as scope:
            scope.add("learnt-later", "learnt-later", "no")  # duplicates count once
            scope.add("registered-for-good")
            assert "learnt-later" in log.redactor and len(scope) == 2
        assert "learnt-later" not in log.redactor
        assert "registered-for-good" in log.redactor
        with pytest.raises(RuntimeError):
            scope.add("too-late")
        with pytest.raises(RuntimeError):
            scope.__enter__()

    def test_discard_keeps_what_a_scope_holds(self) -> None:
        """discard() undoes add() only; clear() forgets everything, and scopes exit quietly."""
        with log.redacting([SECRET]):
            log.register_secret(SECRET)
            log.redactor.discard(SECRET)
            assert SECRET in log.redactor
            log.redactor.clear()
            assert SECRET not in log.redactor
        assert len(log.redactor) == 0

    def test_release_lets_a_superseded_secret_go_unless_another_scope_holds_it(
        self,
    ) -> None:
        """release() stops holding some secrets early: one held by another scope stays
        redacted, one not held is ignored, and a pending one is never registered."""
        with log.redacting([SECRET]) as other, log.redacting() as scope:
            scope.add("old-token", SECRET, "new-token")
            scope.release("old-token", SECRET, "never-held")
            assert log.redact("old-token new-token") == "old-token ***"
            assert SECRET in log.redactor and len(scope) == 1
            other.close()
            assert SECRET not in log.redactor
        assert len(log.redactor) == 0
        pending = log.redacting(["kept", "dropped"])
        pending.release("dropped")
        with pending:
            assert "kept" in log.redactor and "dropped" not in log.redactor
        pending.release("kept")  # closed: nothing to do

    def test_scope_repr_hides_secrets(self) -> None:
        with log.redacting([SECRET]) as scope:
            assert SECRET not in repr(scope)


IMPORT_CHECK = r"""
import glob, logging, os, sys, tempfile
before = set(glob.glob(os.path.join(tempfile.gettempdir(), "*")))
import structlog
import supervisor
import supervisor.cli, supervisor.dashboard, supervisor.tools
from supervisor import *  # the lazy façade's names: every module they come from
from supervisor import log
assert not structlog.is_configured(), "structlog was configured at import"
assert len(log.redactor) == 0, "secrets were registered at import"
assert not any(getattr(h, "_supervisor_bridge", False) for h in logging.getLogger().handlers)
assert supervisor._util._previews._process_spill is None
after = set(glob.glob(os.path.join(tempfile.gettempdir(), "*")))
assert after == before, f"import created {sorted(after - before)}"
print("ok")
"""


def test_importing_supervisor_has_no_side_effects(tmp_path: Path) -> None:
    """In a fresh interpreter, importing configures no logging, registers no secret and
    creates no temporary directory."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert list(tmp_path.iterdir()) == []
