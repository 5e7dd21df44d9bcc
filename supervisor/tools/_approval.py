"""The approval policy: which calls need the embedder's approval, and asking for it.

:func:`policy_verdict` applies a server's ``approve`` / ``autoApprove`` policy (and
:func:`approval_reason` / :func:`needs_approval` say the same more briefly);
:func:`decide_approval` asks the embedder's callback and fails closed without one, and
:func:`check_approval` raises when the answer is no. Each decision is an
:class:`ApprovalDecision` naming who took it (a :class:`Decider`): the audit log records it.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias

import attrs
import mcp_types as types

from ..config._model import ToolPolicy
from ..errors import ApprovalDenied, ApprovalRequired

#: Why a call needs approval, most serious first.
ApprovalReason: TypeAlias = Literal[
    "destructive annotation", "destructive name", "listed in approve", "not auto-approved"
]


class Decider(enum.StrEnum):
    """Who decided whether a call may go ahead (a string enum, as the audit log writes it)."""

    #: the server's ``autoApprove`` policy let it go ahead without asking
    AUTO_APPROVE = "autoApprove"
    #: the server's ``"approve": false`` let it go ahead without asking
    APPROVE_FALSE = "approve:false"
    #: it needed approval and there was no callback to ask: refused (fails closed)
    NO_CALLBACK = "no callback"
    #: the embedder's approval callback
    CALLBACK = "callback"
    #: the command line's ``--yes``
    CLI_YES = "cli --yes"
    #: the person at the command line's prompt
    CLI_PROMPT = "cli prompt"
    #: the gateway's client, asked through elicitation
    CLIENT = "client"


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


def _named(policy: ToolPolicy | None, names: tuple[str, ...]) -> bool:
    """Whether ``policy`` (a list) writes one of ``names`` out exactly, not as a glob."""
    if policy is None or isinstance(policy, bool):
        return False
    return any(entry in names for entry in policy)


def policy_verdict(
    policy: ToolPolicySource, tool: types.Tool, original_name: str, merged_name: str | None = None
) -> ApprovalReason | Decider:
    """What a server's policy says of a call of ``tool``: why it needs approval (an
    :data:`ApprovalReason`), or the rule that lets it go ahead without asking
    (:attr:`Decider.AUTO_APPROVE` or :attr:`Decider.APPROVE_FALSE`).

    In order: a match in ``approve`` (``True``, or a name or :mod:`fnmatch` glob matching
    the original or merged name) → ``"listed in approve"``, always asked; the tool's
    name (original or merged) written out exactly in ``autoApprove`` → no approval, even
    for a destructive tool: the user reviewed that one. Then ``destructiveHint: true`` →
    ``"destructive annotation"``, and a destructive word in either name
    (:func:`is_destructive_name`) → ``"destructive name"``: both ask even when
    ``autoApprove`` is ``true`` or a glob matches (dangerous operations ask unless named).
    Then a match in ``autoApprove`` → no approval; ``approve: false`` → no approval;
    otherwise ``"not auto-approved"`` (the default is to ask). Other annotations
    (``readOnlyHint``, ``idempotentHint``…) never grant approval: servers do not get to
    vouch for themselves.
    """
    names = (original_name, tool.name if merged_name is None else merged_name)
    if _matches(policy.approve, names):
        return "listed in approve"
    if _named(policy.auto_approve, names):
        return Decider.AUTO_APPROVE
    if tool.annotations is not None and tool.annotations.destructive_hint is True:
        return "destructive annotation"
    if any(map(is_destructive_name, names)):
        return "destructive name"
    if _matches(policy.auto_approve, names):
        return Decider.AUTO_APPROVE
    if policy.approve is False:
        return Decider.APPROVE_FALSE
    return "not auto-approved"


def approval_reason(
    policy: ToolPolicySource, tool: types.Tool, original_name: str, merged_name: str | None = None
) -> ApprovalReason | None:
    """Why a call of ``tool`` needs approval under a server's policy, or ``None`` if not;
    see :func:`policy_verdict`."""
    verdict = policy_verdict(policy, tool, original_name, merged_name)
    return None if isinstance(verdict, Decider) else verdict


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


@attrs.frozen
class Approver:
    """An approval callback that says who answers it, for the audit log: ``by`` is
    :attr:`Decider.CALLBACK` unless the front end knows better (the command line's
    ``--yes`` is :attr:`Decider.CLI_YES`). Called like the callback it wraps."""

    callback: ApprovalCallback
    by: Decider = Decider.CALLBACK

    async def __call__(self, request: ApprovalRequest) -> bool:
        return await self.callback(request)


@attrs.frozen
class ApprovalDecision:
    """Whether a call may go ahead, who decided, and why it was asked about at all."""

    #: the call may be sent
    approved: bool
    #: who decided: the server's policy, the callback, the command line …
    by: Decider
    #: why approval was needed (``None``: it was not: the policy let it go ahead)
    reason: ApprovalReason | None = None

    @property
    def answer(self) -> Literal["approved", "refused", "not required"]:
        """The decision in one word, as the audit log writes it."""
        if self.reason is None:
            return "not required"
        return "approved" if self.approved else "refused"

    def check(self, request: ApprovalRequest) -> None:
        """Raise the error a refusal of ``request`` is
        (:class:`~supervisor.errors.ApprovalRequired` without a callback, else
        :class:`~supervisor.errors.ApprovalDenied`); return if approved."""
        if self.approved:
            return
        where = f"tool {request.tool!r} (server {request.server!r})"
        if self.by is not Decider.NO_CALLBACK:
            raise ApprovalDenied(
                f"{where}: the approval callback refused the call ({request.reason}); "
                "it was not made",
                server=request.server,
                tool=request.tool,
                reason=request.reason,
            )
        needs_it = f"{where} needs approval ({request.reason})"
        allow = allowed_by(request)
        if allow is None:
            how = "pass an approval callback, or run the CLI with --yes (it is in approve)"
            cli_how = "run with --yes (it is listed in the server's approve)"
        else:
            how = f"pass an approval callback, {allow}, or run the CLI with --yes"
            cli_how = f"{allow}, or run with --yes"
        raise ApprovalRequired(
            f"{needs_it} and there is no approval callback; the call was not made. "
            f"To allow it: {how}",
            server=request.server,
            tool=request.tool,
            reason=request.reason,
            cli_message=f"{needs_it} and no terminal to ask on; the call was not made. "
            f"To allow it: {cli_how}",
            allow=allow,
        )


def allowed_by(request: ApprovalRequest) -> str | None:
    """The change to the server's config that lets ``request``'s call go ahead without
    asking (:attr:`ApprovalRequired.allow <supervisor.errors.ApprovalRequired>`);
    ``None`` when none does: the tool is listed in the server's ``approve``."""
    if request.reason == "listed in approve":
        return None
    if request.reason in ("destructive annotation", "destructive name"):
        return (
            f"add its exact name {request.original_name!r} to the server's autoApprove "
            "(autoApprove: true and globs do not cover destructive tools)"
        )
    return f"add {request.original_name!r} to the server's autoApprove in the config"


async def decide_approval(
    callback: ApprovalCallback | None, request: ApprovalRequest
) -> ApprovalDecision:
    """Ask ``callback`` about ``request`` (a call that needs approval) and return the
    decision: only ``True`` approves. With no callback (headless) the call is refused
    (:attr:`Decider.NO_CALLBACK`: it fails closed). An exception from the callback
    propagates. The decider is the :class:`Approver`'s ``by``, else
    :attr:`Decider.CALLBACK`."""
    if callback is None:
        return ApprovalDecision(False, Decider.NO_CALLBACK, request.reason)
    by = callback.by if isinstance(callback, Approver) else Decider.CALLBACK
    return ApprovalDecision(await callback(request) is True, by, request.reason)


async def check_approval(
    needs: bool, callback: ApprovalCallback | None, request: ApprovalRequest
) -> None:
    """Return if the call may go ahead; raise if it may not.

    If ``needs`` is false this returns at once without calling ``callback``. Otherwise the
    callback decides (:func:`decide_approval`): only ``True`` approves, any other answer
    raises :class:`~supervisor.errors.ApprovalDenied`, and an exception from the callback
    propagates (the call is not made either way). With no callback (headless) it raises
    :class:`~supervisor.errors.ApprovalRequired`, whose message says how to grant approval.
    """
    if needs:
        (await decide_approval(callback, request)).check(request)
