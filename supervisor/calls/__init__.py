"""What a tool call is and how it ends: the outcome labels every part of the supervisor
shares (``classify``: ``ok``, ``fail``, ``info``), the ``_meta`` key a call's id travels
under (``CALL_ID_META``), and the one interface through which the call history, the audit
log, tracing and the dashboard see the gate's calls (``CallObserver``, ``CallWatch``,
``Call``).

Its Python names are private: users reach them through ``open_supervisor(history=...)``
and :mod:`supervisor.faults` (docs/faults.md). The rest of the package imports each from
its module.
"""
