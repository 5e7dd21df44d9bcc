"""Fault injection into a supervised server's connection: what a server's config
``faults`` field needs (docs/config.md, "Fault injection"; the plan language in
docs/faults.md). The toolkit above the core (:mod:`supervisor.faults`: the call history,
the checker, its reports and the ``chaos`` proxies) re-exports these names.

- ``load_plan`` reads a plan (JSON file, text, mapping or list of rules) into a
  ``Plan``; ``PlanError`` names each wrong field's path.
- ``FaultEngine`` decides, message by message, which rules fire; every injected
  fault is an ``Injected`` in its ``log`` (``faults_json`` writes it).
- ``Link`` carries a message stream through an engine (supervised stdio servers,
  the stdio proxy); ``FaultyTransport`` wraps the message-level transports
  (in-memory, WebSocket); ``FaultyHTTPTransport`` carries Streamable HTTP exchanges
  through an engine (an ``httpx2`` transport).

Its Python names are private here; the public ones are re-exported, and documented,
by :mod:`supervisor.faults`.
"""

from __future__ import annotations
