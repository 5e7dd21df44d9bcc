"""The error hierarchy of the whole package starts here.

::

    SupervisorError                 root: catch this to catch everything we raise
    ├── ActorError                  a request to an actor did not produce a reply
    │   ├── CallTimeout             the caller's deadline passed first
    │   ├── MailboxFull             a cast found the mailbox full
    │   ├── ActorUnavailable        the child gave up restarting; calls fail fast
    │   ├── ActorStopped            the child was terminated (or never started)
    │   └── RequestAborted          the incarnation died while handling the request
    ├── SupervisorGaveUp            restart intensity exceeded; the supervisor stopped
    ├── StartFailed                 a child raised before it was ready
    ├── NoSuchChild                 no child of that id in this supervisor
    └── SupervisorNotRunning        a request to a supervisor that is not running

Errors raised *by* an actor's handler are delivered to the caller unchanged; these
classes only describe what happened *around* a request. Later layers (MCP servers,
config, tools) add their own subclasses of :class:`SupervisorError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class SupervisorError(Exception):
    """Root of every error this package raises."""


class ActorError(SupervisorError):
    """A request to an actor did not produce a reply.

    ``actor`` names the address the request was sent to.
    """

    def __init__(self, message: str, *, actor: str) -> None:
        super().__init__(message)
        self.actor = actor


class CallTimeout(ActorError, TimeoutError):
    """The caller's deadline passed before a reply arrived.

    The request is abandoned: if it was still queued it is never handled, and if it was
    being handled its handler is cancelled.
    """

    def __init__(self, message: str, *, actor: str, timeout: float | None) -> None:
        super().__init__(message, actor=actor)
        self.timeout = timeout


class MailboxFull(ActorError):
    """``cast`` found the bounded mailbox full; the message was not queued."""


class ActorUnavailable(ActorError):
    """The child exceeded its restart intensity and was marked unavailable.

    Calls fail fast until the child is restarted explicitly (``restart_child``).
    ``last_error`` describes the exit that made the supervisor give up and
    ``attempts`` how many restarts were tried.
    """

    def __init__(self, message: str, *, actor: str, last_error: str | None, attempts: int) -> None:
        super().__init__(message, actor=actor)
        self.last_error = last_error
        self.attempts = attempts


class ActorStopped(ActorError):
    """The child is not running and will not be restarted (terminated, or shut down)."""


class RequestAborted(ActorError):
    """The incarnation that was handling the request exited before replying.

    The request had already been taken from the mailbox, so it may have taken effect;
    it is never re-sent automatically. ``__cause__`` is the incarnation's exit error,
    when it crashed.
    """


class SupervisorGaveUp(SupervisorError):
    """Restart intensity was exceeded: the supervisor stopped its children and failed.

    Its parent handles this exit like any other crash, by its own strategy.
    """

    def __init__(self, message: str, *, supervisor: str, child: str, restarts: int) -> None:
        super().__init__(message)
        self.supervisor = supervisor
        self.child = child
        self.restarts = restarts


class StartFailed(SupervisorError):
    """A child raised before it was ready; ``__cause__`` is its error."""

    def __init__(self, message: str, *, child: str) -> None:
        super().__init__(message)
        self.child = child


class NoSuchChild(SupervisorError, LookupError):
    """The supervisor has no child with that id."""


class SupervisorNotRunning(SupervisorError):
    """A request reached a supervisor that has not started or has already stopped."""


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, in order; ``[exc]`` for a bare one."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for e in exc.exceptions for leaf in leaves(e)]


def collapse(exc: BaseException) -> BaseException:
    """The one error worth reporting inside nested exception groups.

    A group whose leaves are one exception (plus any number of ``Cancelled`` that it
    caused) collapses to that exception; anything else is returned as it is.
    """
    import trio  # local: keep this module free of runtime imports for error users

    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves_ = leaves(exc)
    real = [e for e in leaves_ if not isinstance(e, trio.Cancelled)]
    if len(real) == 1:
        return real[0]
    if not real and leaves_:
        return leaves_[0]
    return exc


@contextlib.contextmanager
def collapsing() -> Iterator[None]:
    """Around a nursery of our own: its one error comes out bare, as if there were none.

    An exception group leaving the block that :func:`collapse` reduces to one error is
    raised as that error, its ``__cause__`` kept; any other group is re-raised unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        error = collapse(group)
        if error is group:
            raise
        raise error from error.__cause__
