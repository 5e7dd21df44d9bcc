"""Structured logging for the supervisor, with secrets scrubbed before output.

Importing this module (or :mod:`supervisor`) configures nothing: structlog, the standard
library's logging and the secret registry are left as they are. Logging is set up
explicitly:

* :func:`configure_logging` sets up :mod:`structlog` for the process: JSON lines when
  the output is not a terminal, a human-readable console format when it is. Output
  always goes to standard error (or a stream you pass) — never to standard output,
  which an MCP stdio transport may own. The ``mcp-supervisor`` command calls it first
  thing (``-v`` for info, ``-vv`` for debug).
* :func:`configure_default_logging` installs the library's default — warnings and above,
  console format, on standard error, secrets redacted — *only if* structlog has not been
  configured yet, by the application or by :func:`configure_logging`.
  :func:`~supervisor.open_supervisor` calls it on entry, so an application that
  configures structlog itself (before or after) keeps its own configuration; add
  :data:`redactor` to your processors, just before the renderer, if you do that.
* Until either happens, the library's own loggers (:func:`get_logger`) still log
  somewhere sane: warnings and above, to standard error, redacted — the same default,
  applied per logger without touching structlog's global configuration. (structlog's
  own default would print every level to standard output, unredacted.)

Secrets:

* :class:`SecretRedactor`, a structlog processor that replaces every registered secret
  with ``***``. The module-level :data:`redactor` is the process-wide one; the processor
  chains above include it.
* Secrets are registered for as long as their owner needs them: :func:`redacting` opens a
  scope (a :class:`RedactionScope`, a context manager) whose secrets are redacted while it
  is open and released when it closes. Registrations are reference-counted, so two
  scopes sharing a secret (two supervisors of one config) do not release each other's.
  :func:`~supervisor.open_supervisor` holds its config's :meth:`~supervisor.config.Config.secrets`
  that way for its block, the CLI for its command. :func:`register_secret` registers a
  secret for the rest of the process (until :meth:`SecretRedactor.discard`).
* Text that does not pass through structlog — a child server's stderr lines, say — can be
  scrubbed with :func:`redact`.

The processor chain, in order::

    merge_contextvars -> add_log_level -> logger name -> TimeStamper(iso, UTC)
      -> StackInfoRenderer -> format_exc_info -> redactor -> renderer

The redactor runs after every processor that produces text (tracebacks are turned
into an ``exception`` string first) and before the renderer, so nothing reaches
the stream unredacted.
"""

from __future__ import annotations

import functools
import json as _json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO, cast, overload

# structlog, and the standard library's logging, are imported where they are used, not
# here: with rich installed structlog costs a command's start-up a few hundred
# milliseconds (logging about 10), and redaction and get_logger() need neither until a
# line is logged or logging is configured.
if TYPE_CHECKING:
    import structlog
    from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "RedactionScope",
    "SecretRedactor",
    "configure_default_logging",
    "configure_logging",
    "get_logger",
    "redact",
    "redacting",
    "redactor",
    "register_secret",
    "reset_logging",
]

#: What every occurrence of a secret is replaced with.
REDACTED = "***"

#: Secrets shorter than this are ignored by :meth:`SecretRedactor.add`.
MIN_SECRET_LENGTH = 4


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

    Secrets are registered two ways: :meth:`add` until :meth:`discard`, and
    :meth:`scope` for as long as a :class:`RedactionScope` is open (reference-counted
    across scopes). A secret is redacted while either holds it. The effective set is
    copy-on-write, and a compiled pattern is only ever used for the exact set it was
    built from, so a secret counts from the moment it is registered.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()  # registrations only; redaction reads a snapshot
        self._added: set[str] = set()
        self._held: Counter[str] = Counter()  # secret -> open scopes holding it
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
        """Register *secret* so that it is redacted from now on, until :meth:`discard`.

        Empty strings and strings shorter than :data:`MIN_SECRET_LENGTH` (4)
        characters are silently ignored: redacting ``"a"`` or ``"on"`` would
        mangle every log line while protecting nothing worth protecting. Note
        the flip side: a genuinely short secret is *not* redacted, and the
        caller gets no error.

        Adding a secret that is already added does nothing. Loggers that
        already exist pick the new secret up on their next log call. For a
        secret with an owner that ends, prefer :meth:`scope`.
        """
        if len(secret) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if secret not in self._added:
                self._added.add(secret)
                self._update()

    def discard(self, secret: str) -> None:
        """Undo :meth:`add`; does nothing if *secret* was not added. An open
        :class:`RedactionScope` holding the same secret keeps it redacted."""
        with self._lock:
            if secret in self._added:
                self._added.discard(secret)
                self._update()

    def clear(self) -> None:
        """Forget every registered secret, added or held by a scope (for tests)."""
        with self._lock:
            self._added.clear()
            self._held.clear()
            self._update()

    def scope(self, secrets: Iterable[str] = ()) -> RedactionScope:
        """A :class:`RedactionScope` of this redactor holding *secrets* once entered."""
        return RedactionScope(self, secrets)

    def _hold(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._held.update(secrets)
            self._update()

    def _release(self, secrets: Iterable[str]) -> None:
        with self._lock:
            for secret in secrets:
                count = self._held.get(secret, 0)
                if count > 1:
                    self._held[secret] = count - 1
                elif count:  # 0 after clear(): nothing to release
                    del self._held[secret]
            self._update()

    def _update(self) -> None:
        current = self._added.union(self._held)
        if current != self._secrets:
            self._secrets = frozenset(current)

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

    @overload
    @staticmethod
    def _scrub_key(pattern: re.Pattern[str], key: str) -> str: ...
    @overload
    @staticmethod
    def _scrub_key(pattern: re.Pattern[str], key: object) -> object: ...
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


class RedactionScope:
    """Secrets redacted for as long as this scope is open: a context manager.

    Entering registers the secrets given to it with its :class:`SecretRedactor`;
    :meth:`add` registers more (at once if the scope is open, on entry if not yet),
    :meth:`release` lets some go early; leaving releases every one of them.
    Registrations are reference-counted, so a secret that another open scope (or
    :meth:`SecretRedactor.add`) also holds stays redacted. Within one scope a secret
    counts once. Short secrets are ignored as by :meth:`SecretRedactor.add`. A scope is
    entered at most once; :meth:`close` is the same as leaving it, and may be called
    more than once.

    Make one with :func:`redacting` (the process-wide :data:`redactor`) or
    :meth:`SecretRedactor.scope`.
    """

    def __init__(self, redactor: SecretRedactor, secrets: Iterable[str] = ()) -> None:
        self._redactor = redactor
        self._held: set[str] = set()
        self._pending: list[str] = []
        self._state = "new"  # -> "open" -> "closed"
        self.add(*secrets)

    def __repr__(self) -> str:
        return f"<RedactionScope {self._state}, {len(self._held) + len(self._pending)} secret(s)>"

    def __len__(self) -> int:
        """How many distinct secrets this scope holds (or will hold once entered)."""
        return len(self._held | set(self._pending))

    def add(self, *secrets: str) -> None:
        """Hold *secrets* too, until the scope closes. Raises :exc:`RuntimeError` once
        it has closed."""
        if self._state == "closed":
            raise RuntimeError("this redaction scope has closed")
        new = [s for s in dict.fromkeys(secrets) if len(s) >= MIN_SECRET_LENGTH]
        if self._state == "new":
            self._pending += new
            return
        new = [s for s in new if s not in self._held]
        if new:
            self._held.update(new)
            self._redactor._hold(new)

    def release(self, *secrets: str) -> None:
        """Stop holding *secrets* (superseded ones, such as a renewed token's
        predecessor): they stay redacted only if something else holds them. Secrets
        this scope does not hold, and a closed scope, are left alone."""
        if self._state == "new":
            gone = set(secrets)
            self._pending = [s for s in self._pending if s not in gone]
            return
        held = [s for s in dict.fromkeys(secrets) if s in self._held]
        if held:
            self._held.difference_update(held)
            self._redactor._release(held)

    def __enter__(self) -> RedactionScope:
        if self._state != "new":
            raise RuntimeError("a redaction scope is entered only once")
        self._state = "open"
        pending, self._pending = self._pending, []
        self.add(*pending)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release every secret this scope holds; it cannot be used again."""
        held, self._held, self._pending = self._held, set(), []
        self._state = "closed"
        if held:
            self._redactor._release(held)


#: The process-wide secret registry; the processor chains of :func:`configure_logging`,
#: :func:`configure_default_logging` and the unconfigured default include it. Register
#: secrets with :func:`redacting` (scoped) or :func:`register_secret` (for good).
redactor = SecretRedactor()


def redacting(secrets: Iterable[str] = ()) -> RedactionScope:
    """A scope of the process-wide :data:`redactor`: *secrets* are redacted from every
    log line and from :func:`redact` while it is open, and released when it closes::

        with redacting(config.secrets()) as scope:
            ...  # scope.add(more) for secrets learnt on the way

    See :class:`RedactionScope`; :func:`~supervisor.open_supervisor` holds its config's
    secrets this way.
    """
    return RedactionScope(redactor, secrets)


def register_secret(value: str) -> None:
    """Register *value* with the process-wide :data:`redactor` for the rest of the process.

    From then on it is replaced by ``***`` in every log line and in the output of
    :func:`redact`. Empty and very short values (fewer than 4 characters) are
    ignored; see :meth:`SecretRedactor.add`. A secret that belongs to something with an
    end (a supervisor, a command) is better held by :func:`redacting`.
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
        level: The minimum level that is emitted: a name the standard library
            knows (``"debug"``, ``"info"``, ``"warning"``, ``"error"``,
            ``"critical"``…; any case; :func:`logging.getLevelNamesMapping`) or
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
    string. Secrets registered with :func:`redacting` or :func:`register_secret` are
    replaced by ``***`` everywhere in the line, including tracebacks.
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
    import logging

    import structlog

    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_supervisor_bridge", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    # a marker the next call finds (by getattr) to replace this handler
    handler._supervisor_bridge = True  # pyright: ignore[reportAttributeAccessIssue]
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


def configure_default_logging() -> bool:
    """Install the library's default unless structlog is configured already.

    The default: warnings and above, console format (colored only on a terminal), on
    whatever ``sys.stderr`` is when a line is written, secrets redacted. Nothing is done
    if structlog has been configured — by the application's own ``structlog.configure``
    or by :func:`configure_logging` — and :func:`configure_logging` still takes effect
    after this (it is not a call of it). The standard library's logging is not touched.
    Returns whether it configured anything.

    :func:`~supervisor.open_supervisor` calls this on entry; the ``mcp-supervisor``
    command calls :func:`configure_logging` instead.
    """
    import structlog

    if structlog.is_configured():
        return False
    _configure("warning", cast(TextIO, _STDERR), json=False)
    return True


def _renderer(stream: TextIO, json: bool | None) -> Processor:
    import structlog

    tty = _isatty(stream)
    if (not tty) if json is None else json:
        # json.dumps escapes every control and non-ASCII character: nothing to obey
        return structlog.processors.JSONRenderer(serializer=_json.dumps, default=_json_default)
    return _PrintableConsole(colors=tty and "NO_COLOR" not in os.environ)


#: the console fields written as they are (the others, if not text, with ``repr()``)
_VERBATIM = frozenset({"event", "exception", "stack"})
#: those of them whose line breaks stay (a traceback, a stack)
_MULTILINE = frozenset({"exception", "stack"})


class _PrintableConsole:
    """structlog's console renderer, given every text value made printable first
    (:func:`~supervisor._util._printable.printable`): a server's stderr line or error message
    in a log line is shown, never obeyed by the terminal. A value with nothing to escape
    is left to the renderer as it is; the colours are its own."""

    def __init__(self, *, colors: bool) -> None:
        import structlog

        self._render = structlog.dev.ConsoleRenderer(colors=colors)

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        from ._util._printable import printable

        for key, value in list(event_dict.items()):
            if not isinstance(value, str):
                continue  # written with repr(), which escapes what a terminal obeys
            shown = printable(value, keep_lines=key in _MULTILINE)
            if shown != value:  # written as it is, not quoted and escaped again
                event_dict[key] = shown if key in _VERBATIM else _Shown(shown)
        return cast(str, self._render(logger, method_name, event_dict))


class _Shown:
    """A text value made printable, which the console renderer writes as it is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _processors(renderer: Processor) -> list[Processor]:
    import structlog

    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        redactor,
        renderer,
    ]


def _configure(level: str | int, stream: TextIO, json: bool | None) -> Processor:
    import structlog

    min_level = _level_number(level)
    renderer = _renderer(stream, json)
    structlog.configure(
        processors=_processors(renderer),
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


_STDERR = _Stderr()


# Bounded: one chain per answer to "is stderr a terminal (and colors allowed)?".
@functools.lru_cache(maxsize=2)
def _default_chain(colors: bool) -> list[Processor]:
    return _processors(_PrintableConsole(colors=colors))


def _default_logger(name: str | None, initial: dict[str, Any]) -> FilteringBoundLogger:
    """A logger of the library's default, built without touching structlog's configuration:
    warnings and above, console format, on the current ``sys.stderr``, redacted."""
    import logging

    import structlog

    colors = _STDERR.isatty() and "NO_COLOR" not in os.environ
    proxy = structlog.wrap_logger(
        _named_print_logger()(cast(TextIO, _STDERR), name),
        processors=_default_chain(colors),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        context_class=dict,
        cache_logger_on_first_use=False,
        **initial,
    )
    return cast("FilteringBoundLogger", proxy.bind())


class _LibraryLogger:
    """What :func:`get_logger` returns: a lazy logger that, on each call, logs through
    structlog's configuration if structlog is configured, else through the library's
    default (:func:`_default_logger`). ``bind``/``new``/``unbind`` stay lazy."""

    __slots__ = ("_args", "_initial")

    def __init__(self, args: tuple[str, ...], initial: dict[str, Any]) -> None:
        self._args = args
        self._initial = initial

    def __repr__(self) -> str:
        name = self._args[0] if self._args else None
        return f"<supervisor logger {name!r} {self._initial!r}>"

    def _target(self) -> FilteringBoundLogger:
        import structlog

        if structlog.is_configured():
            logger: FilteringBoundLogger = structlog.get_logger(*self._args, **self._initial)
            return logger
        return _default_logger(self._args[0] if self._args else None, self._initial)

    def bind(self, **values: Any) -> _LibraryLogger:
        return _LibraryLogger(self._args, {**self._initial, **values})

    def new(self, **values: Any) -> _LibraryLogger:
        return _LibraryLogger(self._args, dict(values))

    def unbind(self, *keys: str) -> _LibraryLogger:
        initial = dict(self._initial)
        for key in keys:
            del initial[key]  # KeyError for a key not bound, as structlog's unbind
        return _LibraryLogger(self._args, initial)

    def try_unbind(self, *keys: str) -> _LibraryLogger:
        return _LibraryLogger(self._args, {k: v for k, v in self._initial.items() if k not in keys})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _BELOW_DEFAULT and "structlog" not in sys.modules:
            # Nobody configured structlog (nobody imported it): the default drops these
            # levels, so they are dropped here without importing it.
            return _drop
        return getattr(self._target(), name)


#: the methods of levels the library's default (warnings and above) drops
_BELOW_DEFAULT = frozenset({"debug", "info"})


def _drop(*args: object, **kwargs: object) -> None:
    """A log call at a level nobody asked for."""


def get_logger(name: str | None = None, **initial: object) -> FilteringBoundLogger:
    """Return a structlog logger with *initial* values bound.

    A *name* (conventionally ``__name__``) appears as the ``logger`` field of
    every line. The logger is lazy: each call logs with the configuration in force
    at that moment, so module-level ``log = get_logger(__name__)`` is fine before
    any configuration. While structlog is unconfigured it logs with the library's
    default (warnings and above, to stderr, redacted) without configuring anything.
    """
    args = () if name is None else (name,)
    return cast("FilteringBoundLogger", _LibraryLogger(args, dict(initial)))


@functools.cache
def _named_print_logger() -> Callable[[TextIO | None, str | None], structlog.PrintLogger]:
    """The class of :class:`structlog.PrintLogger` that remembers the name it was asked
    for (made on first use: subclassing needs structlog imported)."""
    import structlog

    class _NamedPrintLogger(structlog.PrintLogger):
        def __init__(self, file: TextIO | None = None, name: str | None = None) -> None:
            super().__init__(file)
            self.name = name

        def __deepcopy__(self, memodict: dict[str, object]) -> _NamedPrintLogger:
            new = cast(_NamedPrintLogger, super().__deepcopy__(memodict))
            new.name = self.name
            return new

    return _NamedPrintLogger


class _NamedPrintLoggerFactory:
    """Build a named print logger (:func:`_named_print_logger`) writing to *stream* for
    ``get_logger(name)``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, name: str | None = None, *_: object) -> structlog.PrintLogger:
        return _named_print_logger()(self._stream, name)


def _add_logger_name(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Add the name given to :func:`get_logger` as ``logger``, unless already bound."""
    name = getattr(logger, "name", None)
    if name is not None:
        event_dict.setdefault("logger", name)
    return event_dict


def _level_number(level: str | int) -> int:
    import logging

    levels = logging.getLevelNamesMapping()  # a fresh copy, custom levels included
    if isinstance(level, str):
        number = levels.get(level.upper())
    elif isinstance(level, int) and not isinstance(level, bool) and level in levels.values():
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
    """Undo :func:`configure_logging` and :func:`configure_default_logging` (for tests):
    structlog's configuration, our standard library handler and the once-flag. The
    library's loggers fall back to their unconfigured default (stderr, warnings)."""
    import logging

    import structlog

    global _configured
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_supervisor_bridge", False):
            root.removeHandler(handler)
    _configured = False
