"""What a tool call is and how it ends: the call as one value and its typed outcome
(``ToolCall``; a result, a round, a task or a failure), the outcome labels every part of
the supervisor shares (``classify``: ``ok``, ``fail``, ``info``), the ``_meta`` keys a
call's id and a failure's data travel under (``CALL_ID_META``, ``ERROR_META``), and the
one interface through which the call history, the audit log, tracing and the dashboard
see the gate's calls (``CallObserver``, ``CallWatch``, ``Call``).

Its Python names are private: users reach them through ``open_supervisor(history=...)``
and :mod:`supervisor.faults` (docs/faults.md). The rest of the package imports each from
its module.
"""
