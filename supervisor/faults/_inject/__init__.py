"""Fault injection into a supervised server's connection: the engine that carries out a
server's ``faults`` plan (docs/config.md, "Fault injection"; the plan language, in
:mod:`supervisor.config._plan`, is in docs/faults.md) and its injection points. It is
the toolkit's, above the core: the core's transports know only the interface it offers
them (:mod:`supervisor.transports._faults`), and are given it by the
:class:`~supervisor.faults.Injector` a supervisor is opened with.

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
