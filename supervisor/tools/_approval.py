"""The approval policy: which calls need the embedder's approval, and asking for it.

:func:`approval_reason` / :func:`needs_approval` apply a server's ``approve`` /
``autoApprove`` policy; :func:`check_approval` asks the embedder's callback and fails
closed without one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias

import attrs
import mcp_types as types

from ..config import ToolPolicy
from ..errors import ApprovalDenied, ApprovalRequired

#: Why a call needs approval, most serious first.
ApprovalReason: TypeAlias = Literal[
    "destructive annotation", "destructive name", "listed in approve", "not auto-approved"
]


class ToolPolicySource(Protocol):
    """What :func:`approval_reason` reads: a :class:`~supervisor.config.ServerConfig` fits."""

    @property
    def approve(self) -> ToolPolicy | None: ...

    @property
    def auto_approve(self) -> ToolPolicy | None: ...


#: Words that make a tool name look destructive (also with a trailing ``s``).
DESTRUCTIVE_WORDS = frozenset(
    {
        "delete", "del", "remove", "rm", "drop", "destroy", "deploy", "purge", "truncate",
        "kill", "erase", "wipe", "terminate", "uninstall", "revoke", "unlink", "shred",
        "reset", "overwrite", "rmdir", "nuke",
    }
)  # fmt: skip

_SEPARATORS = re.compile(r"[\s_.\-/:]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for part in _SEPARATORS.split(name) for w in _CAMEL.findall(part)]


def is_destructive_name(name: str) -> bool:
    """Whether a word of ``name`` is destructive (:data:`DESTRUCTIVE_WORDS`).

    Words are found by splitting on ``_ - . / :`` and whitespace and at camelCase humps,
    case-insensitively: ``delete_file``, ``deleteFile``, ``HTTPDelete``, ``files.remove``
    are destructive; ``undeleted_count`` and ``dropdown`` are not.
    """
    for word in _words(name):
        if word in DESTRUCTIVE_WORDS or (word.endswith("s") and word[:-1] in DESTRUCTIVE_WORDS):
            return True
    return False


def _matches(policy: ToolPolicy | None, names: tuple[str, ...]) -> bool:
    if policy is None or policy is False:
        return False
    if policy is True:
        return True
    return any(fnmatch.fnmatchcase(n, pattern) for pattern in policy for n in names)


def approval_reason(
    policy: ToolPolicySource, tool: types.Tool, original_name: str, merged_name: str | None = None
) -> ApprovalReason | None:
    """Why a call of ``tool`` needs approval under a server's policy, or ``None`` if not.

    In order: ``destructiveHint: true`` → ``"destructive annotation"``; a destructive word
    in the original or merged name (:func:`is_destructive_name`) → ``"destructive name"``;
    both ask even when the tool is auto-approved. Then a match in ``approve`` (``True``, or
    a name or :mod:`fnmatch` glob matching the original or merged name) →
    ``"listed in approve"``; a match in ``autoApprove`` → no approval; ``approve: false``
    → no approval; otherwise ``"not auto-approved"`` (the default is to ask). Other
    annotations (``readOnlyHint``, ``idempotentHint``…) never grant approval: servers do
    not get to vouch for themselves.
    """
    names = (original_name, tool.name if merged_name is None else merged_name)
    if tool.annotations is not None and tool.annotations.destructive_hint is True:
        return "destructive annotation"
    if any(map(is_destructive_name, names)):
        return "destructive name"
    if _matches(policy.approve, names):
        return "listed in approve"
    if _matches(policy.auto_approve, names) or policy.approve is False:
        return None
    return "not auto-approved"


def needs_approval(
    policy: ToolPolicySource, tool: types.Tool, original_name: str, merged_name: str | None = None
) -> bool:
    """Whether a call of ``tool`` needs approval; see :func:`approval_reason`."""
    return approval_reason(policy, tool, original_name, merged_name) is not None


def _frozen_mapping(value: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(value))


@attrs.frozen
class ApprovalRequest:
    """What the approval callback is asked about: one call, not yet sent."""

    #: the server's config name
    server: str
    #: the merged (namespaced) tool name
    tool: str
    #: the tool's name on its server
    original_name: str
    #: the call's arguments (read-only)
    arguments: Mapping[str, object] = attrs.field(converter=_frozen_mapping)
    #: why approval is needed
    reason: ApprovalReason


#: The embedder's approval callback: ``True`` approves the call; anything else refuses it.
ApprovalCallback: TypeAlias = Callable[[ApprovalRequest], Awaitable[bool]]


async def check_approval(
    needs: bool, callback: ApprovalCallback | None, request: ApprovalRequest
) -> None:
    """Return if the call may go ahead; raise if it may not.

    If ``needs`` is false this returns at once without calling ``callback``. Otherwise the
    callback decides: only ``True`` approves, any other answer raises
    :class:`~supervisor.errors.ApprovalDenied`, and an exception from the callback
    propagates (the call is not made either way). With no callback (headless) it raises
    :class:`~supervisor.errors.ApprovalRequired`, whose message says how to grant approval.
    """
    if not needs:
        return
    where = f"tool {request.tool!r} (server {request.server!r})"
    if callback is None:
        needs_it = f"{where} needs approval ({request.reason})"
        if request.reason in ("destructive annotation", "destructive name"):
            always = " (destructive tools always ask, even when listed in autoApprove)"
            how = f"pass an approval callback, or run the CLI with --yes{always}"
            cli_how = f"run with --yes{always}"
        else:
            config = f"add {request.original_name!r} to the server's autoApprove in the config"
            how = f"pass an approval callback, {config}, or run the CLI with --yes"
            cli_how = f"{config}, or run with --yes"
        raise ApprovalRequired(
            f"{needs_it} and there is no approval callback; the call was not made. "
            f"To allow it: {how}",
            server=request.server,
            tool=request.tool,
            reason=request.reason,
            cli_message=f"{needs_it} and no terminal to ask on; the call was not made. "
            f"To allow it: {cli_how}",
        )
    if await callback(request) is not True:
        raise ApprovalDenied(
            f"{where}: the approval callback refused the call ({request.reason}); it was not made",
            server=request.server,
            tool=request.tool,
            reason=request.reason,
        )
