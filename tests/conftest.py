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
