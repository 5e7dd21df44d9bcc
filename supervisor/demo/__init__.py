"""The quick-start demo behind ``mcp-supervisor demo``: real MCP servers, a crash, a recovery.

It runs the example servers shipped in :mod:`supervisor.demo.servers` under
:func:`~supervisor.open_supervisor` — ``notes`` and ``calc`` over stdio, ``flaky`` over
Streamable HTTP in a process of its own — prints the status table, calls tools across
them, kills the calculator (``kill -9``) and then the flaky HTTP server, printing the
events of each recovery as they arrive and a call made during each outage being served
after it, then the table again and the session's summary. Nothing is scripted but the
faults: every figure is read from the running supervisor. No process is left behind.

Its Python names are private: the interface is ``mcp-supervisor demo``.
"""
