from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from supervisor import log

from .probes import Journal


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Iterator[object]:
    """A trio test skipped from inside (``pytest.skip(reason)`` in its body) is reported
    with its reason: pytest-trio 0.8 raises a bare ``pytest.skip()`` in its place, so the
    summary said only "Skipped", not what is missing and how to install it."""
    try:
        return (yield)
    except pytest.skip.Exception as exc:
        raise _said(exc) from None


def _said(skip: pytest.skip.Exception) -> BaseException:
    """The skip pytest-trio replaced ``skip`` for (found in the group ``skip`` was raised
    while handling), or ``skip`` itself."""
    group = skip.__context__
    if skip.msg or not isinstance(group, BaseExceptionGroup):
        return skip
    leaves: list[BaseException] = []
    queue: list[BaseException] = [group]
    while queue:
        error = queue.pop()
        if isinstance(error, BaseExceptionGroup):
            queue.extend(error.exceptions)
        else:
            leaves.append(error)
    if len(leaves) == 1 and isinstance(leaves[0], pytest.skip.Exception):
        return leaves[0]
    return skip


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """Each test leaves logging as it found it: a test running the CLI in process
    (``main([...])``) configures logging onto its own captured stderr, which pytest
    closes after the test; a later test logging there would fail on a closed file."""
    config = structlog.get_config()
    configured = log._configured
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    log._configured = configured
    root.handlers[:] = handlers
    root.setLevel(level)
