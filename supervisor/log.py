"""Structured logging for the supervisor, with secrets scrubbed before output.

Two things live here:

* :func:`configure_logging` sets up :mod:`structlog` once per process: JSON lines
  when the output is not a terminal, a human-readable console format when it is.
  Output always goes to standard error (or a stream you pass) — never to standard
  output, which an MCP stdio transport may own.
* :class:`SecretRedactor`, a structlog processor that replaces every registered
  secret with ``***``. The module-level :data:`redactor` is the one process-wide
  registry; :func:`configure_logging` wires it into the processor chain, and code
  that learns a secret (header values, environment values, tokens from MCP server
  configs) registers it with :func:`register_secret`. Text that does not pass
  through structlog — a child server's stderr lines, say — can be scrubbed with
  :func:`redact`.

The processor chain, in order::

    merge_contextvars -> add_log_level -> logger name -> TimeStamper(iso, UTC)
      -> StackInfoRenderer -> format_exc_info -> redactor -> renderer

The redactor runs after every processor that produces text (tracebacks are turned
into an ``exception`` string first) and before the renderer, so nothing reaches
the stream unredacted.
"""

from __future__ import annotations

import json as _json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import TextIO, cast

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SecretRedactor",
    "configure_logging",
    "get_logger",
    "redact",
    "redactor",
    "register_secret",
    "reset_logging",
]

#: What every occurrence of a secret is replaced with.
REDACTED = "***"

#: Secrets shorter than this are ignored by :meth:`SecretRedactor.add`.
MIN_SECRET_LENGTH = 4

_LEVELS: dict[str, int] = {
    "critical": 50,
    "error": 40,
    "warning": 30,
    "warn": 30,
    "info": 20,
    "debug": 10,
    "notset": 0,
}


class SecretRedactor:
    """A structlog processor that replaces registered secrets with ``***``.

    Call it as a processor — ``redactor(logger, method_name, event_dict)`` — or
    scrub plain text with :meth:`redact`.

    Redaction covers, recursively:

    * ``str`` values and ``str`` keys;
    * the contents of ``dict``, ``list``, ``tuple``, ``set`` and ``frozenset``
      values (a scrubbed copy replaces the container; the caller's object is
      never mutated);
    * any other value (an exception, a URL object, a number …) whose ``str()``
      or ``repr()`` contains a secret: it is replaced by that text, redacted.
      Values that contain no secret are passed through unchanged, so the
      renderer still sees the original object.

    Overlapping secrets are redacted fully: longer secrets are matched first, so
    with ``"abcd"`` and ``"abcdef"`` registered, ``"abcdef"`` becomes ``***`` and
    not ``***ef``. Two keys that redact to the same text collide, and the later
    one wins — losing a log field is preferred to leaking a secret.

    If no secret is registered the event dict is returned untouched (the very
    same object), so an idle redactor costs one truth test per log call.

    A value whose ``str()`` and ``repr()`` both raise is replaced by
    ``<unprintable TypeName>``: a processor that raised would make the log call
    itself raise.

    The registry is a copy-on-write set, and a compiled pattern is only ever used
    for the exact set it was built from, so a secret counts from the moment
    :meth:`add` returns.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: frozenset[str] = frozenset()
        # The pattern together with the set it was compiled from; rebuilt lazily
        # on first use after the set changes.
        self._compiled: tuple[frozenset[str], re.Pattern[str]] | None = None
        for secret in secrets:
            self.add(secret)

    def __repr__(self) -> str:
        # Never show the secrets themselves.
        return f"<SecretRedactor with {len(self._secrets)} secret(s)>"

    def __len__(self) -> int:
        """The number of registered secrets."""
        return len(self._secrets)

    def __contains__(self, secret: object) -> bool:
        return secret in self._secrets

    def add(self, secret: str) -> None:
        """Register *secret* so that it is redacted from now on.

        Empty strings and strings shorter than :data:`MIN_SECRET_LENGTH` (4)
        characters are silently ignored: redacting ``"a"`` or ``"on"`` would
        mangle every log line while protecting nothing worth protecting. Note
        the flip side: a genuinely short secret is *not* redacted, and the
        caller gets no error.

        Adding a secret that is already registered does nothing. Loggers that
        already exist pick the new secret up on their next log call.
        """
        if len(secret) < MIN_SECRET_LENGTH:
            return
        if secret not in self._secrets:
            self._secrets = self._secrets | {secret}

    def discard(self, secret: str) -> None:
        """Stop redacting *secret*; does nothing if it is not registered."""
        if secret in self._secrets:
            self._secrets = self._secrets - {secret}

    def clear(self) -> None:
        """Forget every registered secret."""
        self._secrets = frozenset()

    def redact(self, text: str) -> str:
        """Return *text* with every occurrence of every secret replaced by ``***``.

        Returns *text* itself when no secret occurs in it.
        """
        pattern = self._pattern()
        if pattern is None:
            return text
        new, count = pattern.subn(REDACTED, text)
        return new if count else text

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Scrub *event_dict* in place and return it (see the class docstring)."""
        pattern = self._pattern()
        if pattern is None:
            return event_dict
        for key, value in list(event_dict.items()):
            new_key = self._scrub_key(pattern, key)
            new_value = self._scrub(pattern, value, set())
            if new_key is not key:
                del event_dict[key]
                event_dict[new_key] = new_value
            elif new_value is not value:
                event_dict[key] = new_value
        return event_dict

    def _pattern(self) -> re.Pattern[str] | None:
        secrets = self._secrets
        if not secrets:
            return None
        compiled = self._compiled
        if compiled is None or compiled[0] is not secrets:
            # Longest first: the regex alternation takes the first branch that
            # matches, so a secret must come before any of its prefixes.
            ordered = sorted(secrets, key=len, reverse=True)
            compiled = (secrets, re.compile("|".join(map(re.escape, ordered))))
            self._compiled = compiled
        return compiled[1]

    @staticmethod
    def _scrub_key(pattern: re.Pattern[str], key: object) -> object:
        if isinstance(key, str):
            new, count = pattern.subn(REDACTED, key)
            return new if count else key
        return key

    def _scrub(self, pattern: re.Pattern[str], value: object, active: set[int]) -> object:
        """Return *value* if it holds no secret, else a redacted replacement."""
        if isinstance(value, str):
            new, count = pattern.subn(REDACTED, value)
            return new if count else value
        if not isinstance(value, dict | list | tuple | set | frozenset):
            return _scrub_text(pattern, value)
        if id(value) in active:
            # A container that contains itself: describe it as text.
            return _scrub_text(pattern, value)
        active.add(id(value))
        try:
            if isinstance(value, dict):
                changed = False
                items: list[tuple[object, object]] = []
                for k, v in value.items():
                    nk, nv = self._scrub_key(pattern, k), self._scrub(pattern, v, active)
                    changed = changed or nk is not k or nv is not v
                    items.append((nk, nv))
                return dict(items) if changed else value
            elements = [self._scrub(pattern, v, active) for v in value]
        finally:
            active.discard(id(value))
        if all(new is old for new, old in zip(elements, value, strict=True)):
            return value
        if isinstance(value, list):
            return elements
        if isinstance(value, set):
            return set(elements)
        if isinstance(value, frozenset):
            return frozenset(elements)
        make = getattr(type(value), "_make", None)  # a namedtuple keeps its type
        return make(elements) if make is not None else tuple(elements)


def _scrub_text(pattern: re.Pattern[str], value: object) -> object:
    """Return *value*, or its redacted ``str()``/``repr()`` if either holds a secret.

    A value that can be rendered neither way cannot be checked, so it is
    replaced by ``<unprintable TypeName>``.
    """
    printable = False
    for render in (str, repr):
        try:
            text = render(value)
        except Exception:
            continue
        printable = True
        new, count = pattern.subn(REDACTED, text)
        if count:
            return new
    return value if printable else f"<unprintable {type(value).__name__}>"


#: The process-wide secret registry; :func:`configure_logging` puts it in the
#: processor chain. Register secrets with :func:`register_secret`.
redactor = SecretRedactor()


def register_secret(value: str) -> None:
    """Register *value* with the process-wide :data:`redactor`.

    From then on it is replaced by ``***`` in every log line and in the output of
    :func:`redact`. Empty and very short values (fewer than 4 characters) are
    ignored; see :meth:`SecretRedactor.add`.
    """
    redactor.add(value)


def redact(text: str) -> str:
    """Return *text* with every secret known to the process-wide :data:`redactor`
    replaced by ``***``.

    Use this for text that does not go through structlog, such as lines read
    from a child server's stderr before they are stored or re-emitted.
    """
    return redactor.redact(text)


_configured = False


def configure_logging(
    *,
    level: str | int = "info",
    stream: TextIO | None = None,
    json: bool | None = None,
    force: bool = False,
) -> None:
    """Configure structlog for the whole process.

    Only the first call has an effect; later calls return immediately unless
    *force* is true (for tests, and for a CLI that reconfigures). Every logger,
    module-level ones included, follows the configuration in force when it logs.

    Args:
        level: The minimum level that is emitted: a name (``"debug"``,
            ``"info"``, ``"warning"``, ``"error"``, ``"critical"``; any case) or
            the matching :mod:`logging` constant. Anything else raises
            :exc:`ValueError` and leaves the configuration unchanged.
        stream: Where log lines are written; :data:`sys.stderr` (looked up at
            call time) if omitted. Diagnostics never go to standard output.
        json: ``True`` for one JSON object per line, ``False`` for the console
            format, ``None`` (the default) to choose JSON unless *stream* is a
            terminal. The console format uses colors only on a terminal, and
            not when the ``NO_COLOR`` environment variable is set.
        force: Reconfigure even if this function has run before.

    Every line carries ``event``, ``level`` and an ISO-8601 UTC ``timestamp``,
    plus any bound or context-variable values. Exceptions logged with
    ``log.exception(...)`` or ``exc_info=`` are rendered to an ``exception``
    string. Secrets registered with :func:`register_secret` are replaced by
    ``***`` everywhere in the line, including tracebacks.
    """
    global _configured
    if _configured and not force:
        return
    renderer = _configure(level, sys.stderr if stream is None else stream, json)
    _bridge_stdlib(level, sys.stderr if stream is None else stream, renderer)
    _configured = True


def _bridge_stdlib(level: str | int, stream: TextIO, renderer: Processor) -> None:
    """Send the standard library's log records (the SDK's, httpx's) through the same
    renderer and the redactor, on the same stream, replacing our earlier handler."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_supervisor_bridge", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    handler._supervisor_bridge = True  # type: ignore[attr-defined]
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                redactor,
                renderer,
            ],
        )
    )
    root.addHandler(handler)
    root.setLevel(_level_number(level))


def _configure(level: str | int, stream: TextIO, json: bool | None) -> Processor:
    min_level = _level_number(level)
    tty = _isatty(stream)
    use_json = (not tty) if json is None else json

    renderer: Processor
    if use_json:
        renderer = structlog.processors.JSONRenderer(serializer=_json.dumps, default=_json_default)
    else:
        colors = tty and "NO_COLOR" not in os.environ
        renderer = structlog.dev.ConsoleRenderer(colors=colors)

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redactor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min_level),
        logger_factory=_NamedPrintLoggerFactory(stream),
        # Not cached: a reconfiguration (the CLI's, a test's) reaches every logger,
        # including module-level ones that logged before it; logging is off the hot path.
        cache_logger_on_first_use=False,
    )
    return renderer


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (test runners swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return _isatty(sys.stderr)


def _install_default() -> None:
    """Until someone configures structlog, log warnings to stderr, secrets redacted.

    structlog's own default prints every level to standard output, which is where a
    CLI's ``--json`` document and a stdio MCP server's protocol go, and it does not
    redact. This default is replaced by :func:`configure_logging` (which still works
    once after it) or by the application's own ``structlog.configure`` — add
    :data:`redactor` to your processors, just before the renderer, if you do that.
    """
    if not structlog.is_configured():
        _configure("warning", cast(TextIO, _Stderr()), json=False)


def get_logger(name: str | None = None, **initial: object) -> FilteringBoundLogger:
    """Return a structlog logger with *initial* values bound.

    A *name* (conventionally ``__name__``) appears as the ``logger`` field of
    every line once :func:`configure_logging` has run. The logger is lazy: it
    picks up the configuration in force when it first logs, so module-level
    ``log = get_logger(__name__)`` is fine before :func:`configure_logging`.
    """
    args = () if name is None else (name,)
    logger: FilteringBoundLogger = structlog.get_logger(*args, **initial)
    return logger


class _NamedPrintLogger(structlog.PrintLogger):
    """A :class:`structlog.PrintLogger` that remembers the name it was asked for."""

    def __init__(self, file: TextIO | None = None, name: str | None = None) -> None:
        super().__init__(file)
        self.name = name

    def __deepcopy__(self, memodict: dict[str, object]) -> _NamedPrintLogger:
        new = cast(_NamedPrintLogger, super().__deepcopy__(memodict))
        new.name = self.name
        return new


class _NamedPrintLoggerFactory:
    """Build a :class:`_NamedPrintLogger` writing to *stream* for ``get_logger(name)``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, name: str | None = None, *_: object) -> _NamedPrintLogger:
        return _NamedPrintLogger(self._stream, name)


def _add_logger_name(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Add the name given to :func:`get_logger` as ``logger``, unless already bound."""
    name = getattr(logger, "name", None)
    if name is not None:
        event_dict.setdefault("logger", name)
    return event_dict


def _level_number(level: str | int) -> int:
    if isinstance(level, str):
        number = _LEVELS.get(level.lower())
    elif isinstance(level, int) and not isinstance(level, bool) and level in _LEVELS.values():
        number = level
    else:
        number = None
    if number is None:
        raise ValueError(
            f"unknown log level {level!r}; use one of "
            "'debug', 'info', 'warning', 'error', 'critical' or a logging constant"
        )
    return number


def _isatty(stream: TextIO) -> bool:
    isatty: Callable[[], bool] | None = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (OSError, ValueError):  # ValueError: the stream is closed
        return False


def _json_default(obj: object) -> str:
    # repr(), as the console renderer uses: the redactor has already checked
    # it. (structlog's default would also honour ``__structlog__``, whose output
    # the redactor never saw; msgspec/orjson would encode dataclass and attrs
    # fields directly, including ones hidden from repr() — hence stdlib json.)
    return repr(obj)


def reset_logging() -> None:
    """Undo :func:`configure_logging` (for tests): structlog's configuration, our standard
    library handler and the once-flag; the library's stderr default is put back."""
    global _configured
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_supervisor_bridge", False):
            root.removeHandler(handler)
    _configured = False
    _install_default()


_install_default()
