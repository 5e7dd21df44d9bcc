"""``supervisor.__version__``: the installed distribution's version, read when first asked
for (reading package metadata costs a command's start-up tens of milliseconds)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcp-supervisor")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
