"""Tool conversion and approval policy: pure functions, no I/O but the spill file.

A façade over one module per job:

* **Arguments** (``_validate``) — :func:`validate_arguments` checks a call's arguments
  against the tool's ``inputSchema`` (JSON Schema Draft 2020-12 unless the schema declares
  another ``$schema``) before anything is sent, and raises
  :class:`~supervisor.errors.ToolArgumentsInvalid` naming each bad path. Validators are
  compiled once per :func:`fingerprint` and kept in a bounded LRU cache
  (:class:`ArgumentValidator`).
* **Results** (``_results``) — :func:`normalize_result` turns a ``CallToolResult`` into a
  :class:`ToolResult`: joined text (a preview when long, the whole text spilled to a
  private file in a :class:`SpillDirectory`), images (those past the inline limits
  spilled too, each named in the text), audio, resources, and ``structuredContent``
  checked against the ``outputSchema`` and previewed within its limit.
* **Approval** (``_approval``) — :func:`policy_verdict` (:func:`approval_reason`,
  :func:`needs_approval`) applies a server's ``approve`` / ``autoApprove`` policy;
  :func:`decide_approval` asks the embedder's callback and fails closed without one,
  returning an :class:`ApprovalDecision` that names its :class:`Decider`;
  :func:`check_approval` raises on a refusal.
* **Parameters** (``_params``) — :func:`parameters` summarises an ``inputSchema`` for
  people: each :class:`Parameter`'s name, short type and whether it is required;
  :func:`signature` writes them on one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._approval import DESTRUCTIVE_WORDS as DESTRUCTIVE_WORDS
    from ._approval import ApprovalCallback as ApprovalCallback
    from ._approval import ApprovalDecision as ApprovalDecision
    from ._approval import ApprovalReason as ApprovalReason
    from ._approval import ApprovalRequest as ApprovalRequest
    from ._approval import Approver as Approver
    from ._approval import Decider as Decider
    from ._approval import ToolPolicySource as ToolPolicySource
    from ._approval import approval_reason as approval_reason
    from ._approval import check_approval as check_approval
    from ._approval import decide_approval as decide_approval
    from ._approval import is_destructive_name as is_destructive_name
    from ._approval import needs_approval as needs_approval
    from ._approval import policy_verdict as policy_verdict
    from ._params import Parameter as Parameter
    from ._params import parameters as parameters
    from ._params import signature as signature
    from ._results import DEFAULT_PREVIEW_BYTES as DEFAULT_PREVIEW_BYTES
    from ._results import MediaContent as MediaContent
    from ._results import ResourceContent as ResourceContent
    from ._results import SpillDirectory as SpillDirectory
    from ._results import ToolResult as ToolResult
    from ._results import normalize_result as normalize_result
    from ._validate import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
    from ._validate import ArgumentValidator as ArgumentValidator
    from ._validate import JSONSchema as JSONSchema
    from ._validate import ValidatorStatistics as ValidatorStatistics
    from ._validate import fingerprint as fingerprint
    from ._validate import invalid_output as invalid_output
    from ._validate import validate_arguments as validate_arguments

__getattr__, __dir__ = attach(__name__)
