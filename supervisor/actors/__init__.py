"""A generic actor runtime with OTP supervision, built on trio. Knows nothing of MCP.

- an :class:`Address` is a bounded mailbox that outlives the actor incarnations serving it
  (a :class:`CastAddress` takes casts only, dropping its oldest or coalescing by key);
- an :class:`Actor` serves its address, one request at a time or concurrently;
- a :class:`Tree` (a supervisor node) starts children in order, restarts them by OTP's
  rules with backoff, and stops them; :func:`open_tree` runs a root one. It alone decides
  restarts, and reports each decision (``Decision``) through its ``notify`` hook.

``Supervisor`` is the old name of :class:`Tree` (deprecated: it warns once);
``supervisor.Supervisor`` is the blocking handle of the whole supervisor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import attach
from .._util._renamed import renamed

if TYPE_CHECKING:
    from ._actor import Actor as Actor
    from ._actor import actor_spec as actor_spec
    from ._actor import before_effect as before_effect
    from ._decisions import GaveUp as GaveUp
    from ._decisions import NotRestarted as NotRestarted
    from ._decisions import Restarted as Restarted
    from ._decisions import RestartScheduled as RestartScheduled
    from ._decisions import StartedOver as StartedOver
    from ._decisions import Terminated as Terminated
    from ._errors import ActorStopped as ActorStopped
    from ._errors import ActorUnavailable as ActorUnavailable
    from ._errors import CallTimeout as CallTimeout
    from ._errors import MailboxFull as MailboxFull
    from ._errors import NoSuchChild as NoSuchChild
    from ._errors import RequestAborted as RequestAborted
    from ._errors import StartFailed as StartFailed
    from ._errors import SupervisorError as SupervisorError
    from ._errors import SupervisorGaveUp as SupervisorGaveUp
    from ._errors import SupervisorNotRunning as SupervisorNotRunning
    from ._mailbox import Address as Address
    from ._mailbox import CastAddress as CastAddress
    from ._root import open_tree as open_tree
    from ._root import supervisor_spec as supervisor_spec
    from ._rules import should_restart as should_restart
    from ._spec import Backoff as Backoff
    from ._spec import Child as Child
    from ._spec import ChildSpec as ChildSpec
    from ._spec import Crashed as Crashed
    from ._spec import GiveUp as GiveUp
    from ._spec import Intensity as Intensity
    from ._spec import Normal as Normal
    from ._spec import Restart as Restart
    from ._spec import Shutdown as Shutdown
    from ._spec import Strategy as Strategy
    from ._stats import ChildState as ChildState
    from ._stats import ChildStatistics as ChildStatistics
    from ._tree import Tree as Tree


_getattr, __dir__ = attach(__name__)


def __getattr__(name: str) -> Any:
    if name == "Supervisor":  # the old name, kept working
        renamed("supervisor.actors.Supervisor", "supervisor.actors.Tree", stacklevel=3)
        return _getattr("Tree")
    return _getattr(name)
