"""The gate: every tool call, resource read and prompt routed to its server, checked and
observed on the way.

A tool call passes one :class:`~supervisor.calls._gate.Gate` (``_gate``): its merged name
resolved by the catalog, its arguments validated, its approval decided, its limits
applied, then sent through its server's handle and its outcome shown to the call's
observers. A read or a prompt is routed the same way (``_resources``: to the server that
lists the URI or prompt, or whose template matches). What a call *is* — the call value
and its outcome, validation, approval, results, limits and the observers it is shown to —
is :mod:`supervisor.tools`, below the servers; the gate sits above them, beside the
catalog (:mod:`supervisor.registry`) it reads.

Its Python names are private: users reach the gate through ``SupervisorHandle.call``,
``read_resource`` and ``get_prompt``.
"""
