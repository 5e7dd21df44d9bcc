"""A small calculator MCP server (stdio): arithmetic on numbers, no state.

The server ships with the package as ``supervisor/demo/servers/calc.py``, which
``mcp-supervisor demo`` runs and whose docstring lists its tools; this script runs that
file of the checkout it sits in::

    python examples/servers/calc.py
"""

import runpy
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    runpy.run_path(
        str(CHECKOUT / "supervisor" / "demo" / "servers" / "calc.py"), run_name="__main__"
    )
