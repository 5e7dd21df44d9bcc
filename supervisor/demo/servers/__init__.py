"""The example MCP servers the demo runs, shipped with the package so that an installed
``mcp-supervisor demo`` has them too.

- ``notes`` (stdio): titled notes in a JSON file (``NOTES_FILE``) or in memory;
- ``calc`` (stdio): a calculator whose bad inputs are tool errors;
- ``flaky`` (Streamable HTTP): a remote service that goes away now and then.

Each is a script that imports only the MCP SDK (not this package): the demo runs it by its
file path with the demo's own interpreter (:data:`DIRECTORY`), and anyone can with
``python -m supervisor.demo.servers.NAME``. A source checkout's ``examples/servers/`` runs
the same files.
"""

from __future__ import annotations

from pathlib import Path

#: The directory holding the servers' scripts.
DIRECTORY = Path(__file__).resolve().parent
