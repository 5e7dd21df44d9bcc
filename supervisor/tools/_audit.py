"""The audit log: one JSON line per tool call through the gate, in a file of mode 0600.

Configured by the config's ``supervisor.audit`` section (docs/tools.md, "Audit log"); off
without it. :func:`~supervisor.open_supervisor` opens an :class:`AuditLog` for its block
and closes it when the block ends; the gate (:mod:`supervisor.calls._gate`) writes a line for
every call it is asked to make — also for a call refused before it is sent (an unknown
tool, invalid arguments, approval refused, the server unavailable)::

    {"ts": "2026-01-05T10:00:00.123Z", "call_id": "3f9a1c-1", "server": "notes",
     "tool": "notes_delete_note", "original_tool": "delete_note",
     "approval": {"decision": "approved", "by": "callback", "reason": "destructive name"},
     "outcome": "ok", "duration_ms": 12.5}

``outcome`` is one of :data:`AuditOutcome`; a line whose outcome is not ``ok`` has an
``error`` (``{"type", "message"}``). A call made for a team gateway's caller has a
``caller`` after ``call_id``: the subject of the caller's access token. Arguments and
results are written only with ``includeArguments``, and then redacted like log lines:
every secret the supervisor knows (:data:`supervisor.log.redactor`) is ``***``, and so is
the value of every argument whose name looks secret (``token``, ``apiKey``,
``password`` …). Without it no text of the arguments or the result reaches the file,
error messages included (an invalid argument is named by its path only, a tool's error
text is left out).

Writing is synchronous (``os.write`` of one whole line on an ``O_APPEND`` descriptor; no
thread). A regular file is rotated by size like :class:`logging.handlers.RotatingFileHandler`
(``path`` → ``path.1`` → … ``path.N``); anything else (a FIFO, ``/dev/stdout``) is written
to and never rotated. One process should write a given file: each tracks its own size.

It fails closed: a log that cannot be opened stops the supervisor from starting
(:class:`~supervisor.errors.AuditLogError`), and once a line could not be written (a full
disk) the next calls are refused before they are sent, with that error, until the log
can be written again — each refused call first tries to reopen the file and write the
lines kept back. The line of the call whose write failed is kept back too: that call
itself was made and its result is returned, since failing it would invite a retry of
something that already took effect.
"""

from __future__ import annotations

import datetime
import errno
import itertools
import os
import secrets
import stat
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeAlias

import attrs
import msgspec
import trio

from ..config._model import DEFAULT_AUDIT_BACKUPS, DEFAULT_AUDIT_MAX_BYTES, AuditSettings
from ..config._secrets import _secretish
from ..errors import (
    ApprovalDenied,
    AuditLogError,
    RateLimited,
    ToolArgumentsInvalid,
    ToolError,
    ToolOutputInvalid,
    UnknownTool,
)
from ..log import REDACTED, get_logger, redactor
from ._approval import ApprovalDecision
from ._observer import Call, CallWatch
from ._outcome import classify
from ._results import ToolResult

__all__ = [
    "DEFAULT_AUDIT_BACKUPS",
    "DEFAULT_AUDIT_MAX_BYTES",
    "AuditCall",
    "AuditLog",
    "AuditOutcome",
    "AuditStatistics",
    "audit_outcome",
]

log = get_logger("supervisor.audit")

#: Lines kept back while the log cannot be written; older ones are dropped (and counted).
MAX_PENDING_LINES = 1000

AuditOutcome: TypeAlias = Literal[
    "ok",
    "tool_error",
    "invalid_output",
    "indefinite",
    "failed",
    "refused",
    "rate_limited",
    "invalid_arguments",
    "unknown_tool",
    "cancelled",
]
"""How a call ended, in the audit log's words.

``ok`` a result; ``tool_error`` the tool ran and reported failure (``isError``);
``invalid_output`` it ran but its answer was unusable (structured content against its
schema, too large, or not of the protocol's shape); ``indefinite`` it may have run (the
connection died during the call, it timed out, or the caller cancelled after it was
sent); ``failed`` it was not run
(the server unavailable, an MCP error answer, the audit log itself unwritable);
``refused`` approval was refused or could not be asked for; ``rate_limited`` over a
rate limit (the server's ``rateLimit``, or a team gateway's per caller), not sent;
``invalid_arguments`` and ``unknown_tool`` refused before anything else; ``cancelled``
the caller cancelled before it was sent.
"""


def audit_outcome(exc: BaseException | None, *, sent: bool) -> AuditOutcome:
    """The outcome of a call that raised ``exc`` (``None``: it returned a result) —
    ``sent``: after it was handed to its server. Built on
    :func:`~supervisor.tools._outcome.classify` (answered / not executed / indefinite)."""
    if exc is None:
        return "ok"
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ApprovalDenied):
        return "refused"
    if isinstance(exc, RateLimited):
        return "rate_limited"
    if isinstance(exc, ToolArgumentsInvalid):
        return "invalid_arguments"
    if isinstance(exc, UnknownTool):
        return "unknown_tool"
    if isinstance(exc, trio.Cancelled) and not sent:
        return "cancelled"
    outcome, is_error = classify(exc, sent=sent)
    if is_error:
        return "tool_error"
    labels: dict[str, AuditOutcome] = {
        "ok": "invalid_output",
        "info": "indefinite",
        "fail": "failed",
    }
    return labels[outcome]


@attrs.define
class AuditCall:
    """One call being audited: the gate fills it in as the call goes on."""

    call_id: str
    #: the merged name it was called by
    tool: str
    #: unix time of the invocation
    ts: float
    #: trio time of the invocation
    started: float
    #: the arguments (kept only with ``includeArguments``)
    arguments: Mapping[str, object] | None = None
    server: str | None = None
    original: str | None = None
    #: the approval decision, once taken
    approval: ApprovalDecision | None = None
    #: handed to its server
    sent: bool = False
    #: who it was made for (the team gateway's caller), if anyone in particular
    caller: str | None = None


@attrs.frozen
class AuditStatistics:
    """What an :class:`AuditLog` did so far."""

    #: lines written to the file
    written: int
    #: lines kept back because the log could not be written
    pending: int
    #: lines dropped because too many were kept back
    dropped: int
    #: rotations of the file
    rotations: int
    #: whether calls are being refused (the last write failed)
    failing: bool


class AuditLog:
    """The audit log in ``path``: open it (a context manager, or :meth:`open` and
    :meth:`close`), then :meth:`begin` a call, :meth:`check` before sending it and
    :meth:`end` it once; see the module docstring.

    ``max_bytes`` is the size at which a regular file is rotated (0: never), ``backups``
    how many rotated files are kept; ``include_arguments`` writes arguments and results,
    redacted. Call ids are ``<prefix>-<n>`` (a random prefix unless given) unless the
    caller brings its own (the call history's).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        include_arguments: bool = False,
        max_bytes: int = DEFAULT_AUDIT_MAX_BYTES,
        backups: int = DEFAULT_AUDIT_BACKUPS,
        prefix: str | None = None,
    ) -> None:
        if max_bytes < 0 or backups < 1:
            raise ValueError("max_bytes must be at least 0 and backups at least 1")
        self.path = Path(path)
        self.include_arguments = include_arguments
        self.max_bytes = max_bytes
        self.backups = backups
        self.prefix = secrets.token_hex(3) if prefix is None else prefix
        self._numbers = itertools.count(1)
        self._fd: int | None = None
        self._size = 0
        self._rotates = False
        self._pending: deque[bytes] = deque()
        self._failing = False
        self._written = 0
        self._dropped = 0
        self._rotations = 0

    @classmethod
    def from_settings(cls, settings: AuditSettings, base: Path | None = None) -> AuditLog:
        """The log a config's ``supervisor.audit`` describes; a relative ``path`` is
        relative to ``base`` (the config's directory), ``~`` expanded."""
        path = Path(settings.path).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        return cls(
            path,
            include_arguments=settings.include_arguments,
            max_bytes=settings.max_bytes,
            backups=settings.backups,
        )

    def __repr__(self) -> str:
        return f"<AuditLog {str(self.path)!r} {'open' if self._fd is not None else 'closed'}>"

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Open (and create, 0600, its directory 0700) the file; raises
        :class:`~supervisor.errors.AuditLogError` if it cannot be."""
        try:
            self._open()
        except OSError as exc:
            raise self._error("cannot be opened", exc) from exc

    def close(self) -> None:
        """Close the file (lines still kept back are lost, and logged as such)."""
        if self._pending:
            log.error(
                "audit log closed with lines unwritten",
                path=str(self.path),
                lines=len(self._pending),
            )
            self._pending.clear()
        self._close()

    def __enter__(self) -> AuditLog:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def statistics(self) -> AuditStatistics:
        return AuditStatistics(
            written=self._written,
            pending=len(self._pending),
            dropped=self._dropped,
            rotations=self._rotations,
            failing=self._failing,
        )

    # -- calls ----------------------------------------------------------------------------

    def watch(self, call: Call) -> CallWatch:
        """The log's watch of a call through the gate (a call observer,
        :mod:`supervisor.tools._observer`): it refuses the call while the log cannot be written
        (:meth:`check`) and writes the call's line when it ends (:meth:`end`), under the
        id an earlier observer gave the call, if one did."""
        entry = self.begin(call.tool, call.arguments, call.call_id)
        entry.caller = call.caller
        return _AuditWatch(self, entry)

    def begin(
        self, tool: str, arguments: Mapping[str, object] | None, call_id: str | None = None
    ) -> AuditCall:
        """A call of ``tool`` starts now (``call_id``: its id elsewhere, if it has one)."""
        return AuditCall(
            call_id=f"{self.prefix}-{next(self._numbers)}" if call_id is None else call_id,
            tool=tool,
            ts=time.time(),
            started=trio.current_time(),
            arguments=arguments if self.include_arguments else None,
        )

    def check(self) -> None:
        """Return if calls may go ahead: the log is writable (lines kept back after a
        failure are written now). Raise :class:`~supervisor.errors.AuditLogError` if not."""
        if not self._failing:
            return
        try:
            if self._fd is None:
                self._open()
            while self._pending:
                self._write(self._pending[0])
                self._pending.popleft()
        except OSError as exc:
            self._close()
            why = "cannot be written; tool calls are refused until it can"
            raise self._error(why, exc) from exc
        self._failing = False
        log.warning("audit log writable again", path=str(self.path))

    def end(
        self, call: AuditCall, exc: BaseException | None, result: ToolResult | None = None
    ) -> None:
        """``call`` ended, raising ``exc`` or returning ``result``: write its line. Never
        raises: a line that cannot be written is kept back and the log fails closed."""
        try:
            line = self._line(call, exc, result)
        except Exception:  # a bug here must not lose the call's line, nor fail the call
            log.exception("audit line could not be made; writing it without details")
            line = self._bare_line(call, exc)
        if self._failing:
            self._keep(line)
            return
        try:
            if self._fd is None:
                raise OSError(errno.EBADF, "the audit log is not open")
            self._write(line)
        except OSError as exc_:
            self._failing = True
            self._close()
            self._keep(line)
            log.error(
                "audit log cannot be written; tool calls are refused until it can",
                path=str(self.path),
                error=f"{type(exc_).__name__}: {exc_}",
            )

    # -- the line -------------------------------------------------------------------------

    def _line(self, call: AuditCall, exc: BaseException | None, result: ToolResult | None) -> bytes:
        outcome = audit_outcome(exc, sent=call.sent)
        approval = call.approval
        record: dict[str, object] = {
            **_ids(call),
            "approval": None
            if approval is None
            else {"decision": approval.answer, "by": str(approval.by), "reason": approval.reason},
            "outcome": outcome,
        }
        if exc is not None:
            record["error"] = {"type": type(exc).__name__, "message": self._message(exc)}
        record["duration_ms"] = round((trio.current_time() - call.started) * 1000, 3)
        if self.include_arguments:
            record["arguments"] = _mask(dict(call.arguments or {}))
            if result is None and isinstance(exc, ToolError) and isinstance(exc.result, ToolResult):
                result = exc.result
            if result is not None:
                record["result"] = _mask({"text": result.text, "structured": result.structured})
        redactor(None, "audit", record)
        try:
            return msgspec.json.encode(record, enc_hook=repr) + b"\n"
        except (TypeError, ValueError, OverflowError):  # arguments JSON cannot hold
            record["arguments"] = redactor.redact(repr(record.get("arguments")))
            record.pop("result", None)
            return msgspec.json.encode(record, enc_hook=repr) + b"\n"

    def _bare_line(self, call: AuditCall, exc: BaseException | None) -> bytes:
        """The line without approval, arguments, result or message: ids and outcome."""
        record: dict[str, object] = {**_ids(call), "outcome": audit_outcome(exc, sent=call.sent)}
        if exc is not None:
            record["error"] = {"type": type(exc).__name__, "message": ""}
        return msgspec.json.encode(redactor(None, "audit", record)) + b"\n"

    def _message(self, exc: BaseException) -> str:
        """``exc``'s message, without the arguments' or the result's text unless they are
        included."""
        if not self.include_arguments:
            if isinstance(exc, ToolError):
                return f"tool {exc.tool!r} reported an error (its text is not logged)"
            if isinstance(exc, ToolArgumentsInvalid | ToolOutputInvalid):
                paths = ", ".join(dict.fromkeys(path for path, _ in exc.errors)) or "(root)"
                what = "arguments" if isinstance(exc, ToolArgumentsInvalid) else "output"
                return f"tool {exc.tool!r}: invalid {what} at {paths}"
        return str(exc)

    # -- the file -------------------------------------------------------------------------

    def _open(self) -> None:
        parent = self.path.parent
        if not parent.exists():
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(parent, 0o700)  # whatever the umask
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o600)
        try:
            info = os.fstat(fd)
            self._rotates = stat.S_ISREG(info.st_mode)
            if self._rotates:
                if stat.S_IMODE(info.st_mode) != 0o600:
                    os.fchmod(fd, 0o600)  # created so whatever the umask; or was wider
                self._size = info.st_size
                if self._size and _last_byte(self.path) != b"\n":
                    os.write(fd, b"\n")  # a line cut short by a failed write ends here
                    self._size += 1
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            self._open()
        limit = self.max_bytes
        if self._rotates and limit and self._size and self._size + len(line) > limit:
            self._rotate()
        assert self._fd is not None
        written = os.write(self._fd, line)
        self._size += written
        if written != len(line):
            raise OSError(errno.ENOSPC, "a line was written only in part")
        self._written += 1

    def _rotate(self) -> None:
        """``path`` → ``path.1`` → … → ``path.N`` (the last one dropped); a new ``path``."""
        self._close()
        base = str(self.path)
        for n in range(self.backups - 1, 0, -1):
            older = f"{base}.{n}"
            if os.path.lexists(older):
                os.replace(older, f"{base}.{n + 1}")
        os.replace(base, f"{base}.1")
        self._rotations += 1
        self._open()

    def _keep(self, line: bytes) -> None:
        if len(self._pending) >= MAX_PENDING_LINES:
            self._pending.popleft()
            self._dropped += 1
        self._pending.append(line)

    def _error(self, what: str, exc: OSError) -> AuditLogError:
        reason = exc.strerror or str(exc)
        return AuditLogError(
            f"the audit log {str(self.path)!r} {what} ({reason}); fix supervisor.audit.path "
            "or make room for it",
            path=str(self.path),
        )


class _AuditWatch(CallWatch):
    """One call through the gate, written to ``log`` when it ends."""

    __slots__ = ("audit", "entry")

    def __init__(self, audit: AuditLog, entry: AuditCall) -> None:
        self.audit = audit
        self.entry = entry

    def admit(self, call: Call) -> None:
        self.audit.check()

    def answered(self, call: Call, result: ToolResult) -> None:
        self.audit.end(self._filled(call), None, result)

    def failed(self, call: Call, exc: BaseException) -> None:
        self.audit.end(self._filled(call), exc)

    def _filled(self, call: Call) -> AuditCall:
        entry = self.entry
        entry.server, entry.original = call.server, call.original
        entry.approval, entry.sent = call.approval, call.sent
        return entry


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1)


def _ids(call: AuditCall) -> dict[str, object]:
    """What every line of ``call`` begins with: when, its id, who it was for (when the
    team gateway knows), the server and the tool."""
    ids: dict[str, object] = {"ts": _iso(call.ts), "call_id": call.call_id}
    if call.caller is not None:
        ids["caller"] = call.caller
    ids.update(server=call.server, tool=call.tool, original_tool=call.original)
    return ids


def _iso(ts: float) -> str:
    when = datetime.datetime.fromtimestamp(ts, datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _mask(value: object) -> object:
    """``value`` with the value of every key that looks secret replaced by ``***``."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and _secretish(k) else _mask(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(v) for v in value]
    return value
