"""A small calculator MCP server (stdio): arithmetic on numbers, no state, no side effects.

Run it with ``python -m supervisor.demo.servers.calc`` (in a checkout, also
``python examples/servers/calc.py``), or point a config at it::

    {"mcpServers": {"calc": {"command": "python3",
                             "args": ["-m", "supervisor.demo.servers.calc"],
                             "approve": false}}}

Tools (all annotated read-only; each answers with the number as text, and as structured
content ``{"result": number}``):

- ``add(a, b)`` — ``a + b``;
- ``multiply(a, b)`` — ``a × b``;
- ``divide(a, b)`` — ``a / b``; dividing by zero is a tool error (``isError``), not a
  protocol error: the model reads the message and can try something else;
- ``sqrt(x)`` — the square root; a negative ``x`` is a tool error.

Whole results are given as integers (``add(2, 3)`` is ``5``, not ``5.0``).
"""

from __future__ import annotations

import math

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

PURE = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

#: A result: an ``int`` when it is a whole number, else a ``float``.
Number = int | float


def tidy(value: float) -> Number:
    """``value`` as an ``int`` when it is a whole number that fits a float exactly."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return int(value)
    return value


def make_server() -> MCPServer:
    """The calculator server."""
    server: MCPServer = MCPServer(
        "calc",
        instructions="Arithmetic on numbers: add, multiply, divide, sqrt.",
        log_level="WARNING",
    )

    @server.tool(annotations=PURE)
    def add(a: float, b: float) -> Number:
        """Add two numbers."""
        return tidy(a + b)

    @server.tool(annotations=PURE)
    def multiply(a: float, b: float) -> Number:
        """Multiply two numbers."""
        return tidy(a * b)

    @server.tool(annotations=PURE)
    def divide(a: float, b: float) -> Number:
        """Divide a by b; b must not be zero."""
        if b == 0:
            raise ToolError(f"cannot divide {tidy(a)} by zero")
        return tidy(a / b)

    @server.tool(annotations=PURE)
    def sqrt(x: float) -> Number:
        """The square root of x; x must not be negative."""
        if x < 0:
            raise ToolError(f"cannot take the square root of a negative number ({tidy(x)})")
        return tidy(math.sqrt(x))

    return server


if __name__ == "__main__":
    make_server().run()
