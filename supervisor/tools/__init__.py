"""One tool call: what it is, what is checked of it, how it ends, and who sees it.

Everything a call is made of, below the servers that carry it and the gate that routes it
(:mod:`supervisor.calls`): a server's handle, the gate and every front end share these.
A façade over one module per job:

* **The call** (``_request``) — a :class:`~supervisor.tools._request.ToolCall` is one
  call as a door built it; its outcome is a ``ToolResult``, a relayed round or task, or a
  failure. ``_outcome`` labels every outcome ``ok``, ``fail`` or ``info`` (``classify``)
  and names the ``_meta`` keys a call's id and a failure's data travel under
  (``_call_id``, ``_error_meta``).
* **Observers** (``_observer``) — the one interface through which the call history, the
  audit log (``_audit``), the trace span (``_tracing``) and the dashboard see a call.
* **Limits** (``_limits``) — a server's ``rateLimit`` and ``maxConcurrentCalls``, and a
  team gateway caller's own limits.
* **Arguments** (``_validate``) — ``validate_arguments`` checks a call's arguments
  against the tool's ``inputSchema`` (JSON Schema Draft 2020-12 unless the schema declares
  another ``$schema``) before anything is sent, and raises
  :class:`~supervisor.errors.ToolArgumentsInvalid` naming each bad path. Validators are
  compiled once per ``fingerprint`` and kept in a bounded LRU cache
  (``ArgumentValidator``); the commonest schemas (a flat object of named, typed
  parameters) are accepted by a quick check first (``_quickcheck``), ``jsonschema``
  deciding the rest.
* **Results** (``_results``) — ``normalize_result`` turns a ``CallToolResult`` into a
  :class:`ToolResult`: joined text (a preview when long, the whole text spilled to a
  private file in a ``SpillDirectory``), images (those past the inline limits
  spilled too, each named in the text), audio, resources, and ``structuredContent``
  checked against the ``outputSchema`` and previewed within its limit. A plain result a
  gateway forwards comes as a ``Forwarded`` (``_forwarded``), its JSON kept to pass on.
* **Approval** (``_approval``) — ``policy_verdict`` (``approval_reason``,
  ``needs_approval``) applies a server's ``approve`` / ``autoApprove`` policy;
  ``decide_approval`` asks the embedder's callback and fails closed without one,
  returning an ``ApprovalDecision`` that names its :class:`Decider`;
  ``check_approval`` raises on a refusal.
* **Parameters** (``_params``) — :func:`parameters` summarises an ``inputSchema`` for
  people: each ``Parameter``'s name, short type and whether it is required;
  ``signature`` writes them on one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._approval import ApprovalCallback as ApprovalCallback
    from ._approval import ApprovalRequest as ApprovalRequest
    from ._approval import Approver as Approver
    from ._approval import Decider as Decider
    from ._params import parameters as parameters
    from ._results import MediaContent as MediaContent
    from ._results import ResourceContent as ResourceContent
    from ._results import ToolResult as ToolResult

__getattr__, __dir__ = attach(__name__)
