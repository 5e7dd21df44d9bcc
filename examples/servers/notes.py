"""A small notes MCP server (stdio): titled notes kept in a JSON file.

The server ships with the package as ``supervisor/demo/servers/notes.py``, which
``mcp-supervisor demo`` runs and whose docstring lists its tools; this script runs that
file of the checkout it sits in::

    NOTES_FILE=notes.json python examples/servers/notes.py   # notes kept in notes.json
    python examples/servers/notes.py                         # notes kept in memory
"""

import runpy
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    runpy.run_path(
        str(CHECKOUT / "supervisor" / "demo" / "servers" / "notes.py"), run_name="__main__"
    )
