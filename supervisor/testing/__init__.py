"""Test helpers shipped with mcp-supervisor for users' own tests.

- :mod:`supervisor.testing.servers` — fixture MCP servers (echo, crash, exit-on-start,
  hang-init, garbage, changing, slow), runnable over stdio, Streamable HTTP and SSE, in a
  subprocess or in-process under trio, plus helpers to spawn them and count executions.

Importing this package is cheap: nothing here imports the ``mcp`` SDK until it is used.
"""
