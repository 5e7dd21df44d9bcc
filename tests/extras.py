"""Tests that need an optional extra (the agent frameworks): skipped, saying which extra to
install, where it is not installed — the README's ``pip install -e '.[dev]'`` does not
bring them — and failed instead where ``$MCP_SUPERVISOR_REQUIRE_INTEROP`` is set.

CI runs the README's test command as written first, where these tests skip; each skip
appends the test's node id to the file ``$MCP_SUPERVISOR_EXTRAS_SKIPPED`` names, if set.
CI then installs the extra and runs exactly those tests again with
``$MCP_SUPERVISOR_REQUIRE_INTEROP`` set, so that a test that needs an extra cannot go
unrun without anyone listing it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

#: Set (CI sets it) when the extras are installed and their tests must run.
REQUIRE = "MCP_SUPERVISOR_REQUIRE_INTEROP"
#: Where a skip for a missing extra is recorded (one node id a line), when set.
SKIPPED_LOG = "MCP_SUPERVISOR_EXTRAS_SKIPPED"

#: The package's modules that import an optional extra: what they import, which extra.
OPTIONAL_MODULES = {
    "supervisor.frameworks.langchain": ("langchain_core", "langchain"),
    "supervisor.frameworks.openai_agents": ("agents", "openai-agents"),
    "supervisor.frameworks.pydantic_ai": ("pydantic_ai", "pydantic-ai"),
}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _record_skip() -> None:
    """Note the current test in ``$MCP_SUPERVISOR_EXTRAS_SKIPPED``'s file, if set."""
    log = os.environ.get(SKIPPED_LOG)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" ")[0]
    if log and test:
        with open(log, "a", encoding="utf-8") as file:  # one short append per skip
            file.write(test + "\n")


def require(module: str, extra: str) -> None:
    """Skip the test when ``module`` is not installed (saying ``pip install -e
    '.[extra]'``) — fail it instead when ``$MCP_SUPERVISOR_REQUIRE_INTEROP`` is set."""
    if installed(module):
        return
    message = f"{module} is not installed (pip install -e '.[{extra}]')"
    if os.environ.get(REQUIRE):
        pytest.fail(f"{message}, and ${REQUIRE} is set")
    _record_skip()
    pytest.skip(message)


def require_module(name: str) -> None:
    """:func:`require` the extra that the package's module ``name`` imports, if any."""
    for optional, (module, extra) in OPTIONAL_MODULES.items():
        if name == optional or name.startswith(optional + "."):
            require(module, extra)


def missing_modules() -> set[str]:
    """Those of :data:`OPTIONAL_MODULES` that cannot be imported here, for a test that
    checks every module of the package: it checks the others, and is noted (as a skip
    is) to be run again once the extras are installed — or fails where they must be."""
    missing = {name for name, (module, _) in OPTIONAL_MODULES.items() if not installed(module)}
    if missing and os.environ.get(REQUIRE):
        pytest.fail(f"{', '.join(sorted(missing))} cannot be imported, and ${REQUIRE} is set")
    if missing:
        _record_skip()
    return missing
