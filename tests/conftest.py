from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
import structlog

from supervisor import log

from .probes import STATE_VARIABLES, Journal

#: The state this test process keeps (made by :func:`pytest_configure`).
_STATE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """What ``serve``, the CLI and the token store keep — the CLI's sockets, the configs
    trusted, the tokens — goes to a directory of this test process's own (each xdist
    worker's), removed as it ends, not under the home directory of whoever runs the
    tests: a run of the suite left a hundred sockets there, and trusted each of its
    temporary configs for good. A test that needs a place of its own still sets one."""
    root = tempfile.mkdtemp(prefix="mcp-supervisor-tests-")
    _STATE.append(root)
    for name, folder in zip(STATE_VARIABLES, ("state", "auth", "run"), strict=True):
        path = os.path.join(root, folder)
        os.mkdir(path, 0o700)
        os.environ[name] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    while _STATE:
        shutil.rmtree(_STATE.pop(), ignore_errors=True)


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
