from __future__ import annotations

import pytest

from .probes import Journal


@pytest.fixture
def journal() -> Journal:
    return Journal()
