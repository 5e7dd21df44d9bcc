"""A small MCP server over Streamable HTTP that is expected to go away now and then.

The server ships with the package as ``supervisor/demo/servers/flaky.py``, which
``mcp-supervisor demo`` runs and whose docstring lists its tools; this script runs that
file of the checkout it sits in::

    python examples/servers/flaky.py --port 0 --fail-every 3   # prints the URL it serves
"""

import runpy
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    runpy.run_path(
        str(CHECKOUT / "supervisor" / "demo" / "servers" / "flaky.py"), run_name="__main__"
    )
