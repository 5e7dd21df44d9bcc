"""The benchmark suite behind ``mcp-supervisor bench``.

Each measured key has one function: ``await fn(n)`` runs one round of ``n`` operations and
returns that round's figure. ``MEASUREMENTS`` lists them with their target and
round sizes; ``run_bench`` runs one untimed warm-up round of each, then the timed
rounds *interleaved* — round 1 of every measurement, then round 2 of every measurement …
— so machine noise hits all alike, and reports the median round of each.

Keys measured against real MCP servers share a ``Suite``: resources opened once for
all its rounds (a supervisor and a bare ``mcp.Client`` already connected to their fixture
servers), a round that measures each of its keys at once (a startup round gives
``startup_8_ratio`` *and* ``shutdown_8_ratio``), and its own round counts, since starting
processes is expensive. A ratio's two contenders — the supervisor and a bare SDK
``mcp.Client`` against the same kind of fixture process; or, in process, an actor call and
the bus against their raw trio equivalents (memory-channel request/reply; ``send_nowait``
fan-out) — are measured in the same round, alternately (ABBA), so noise hits both alike;
each round yields one ratio and the report holds the median ratio.

Add a measurement by writing ``async def my_key(n: int) -> float`` and appending a
``Measurement`` to ``MEASUREMENTS`` (or a ``Suite`` and its members, made
with ``Suite.measurement``). Benchmarks are not tests: they report figures and never
fail on a missed target.

Its Python names are private: the interface is ``mcp-supervisor bench`` and its keys
(README.md). The CLI and the tests import each from its module.
"""
