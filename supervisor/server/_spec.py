"""One server's place in the supervision tree: the child spec its config calls for.

The spec's attempt budget is the config's ``max_attempts`` restarts in a row (the count
starts over once the server stayed up ``backoff.stable_after``), then ``give_up``; a
supervisor opened with ``retries=False`` never restarts it. A probed remote server that
went down is watched for its return: once its port, found closed, opens again, its
restart does not wait out the rest of its backoff (``ChildSpec.hurry``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from ..actors import ChildSpec, Intensity, Restart, actor_spec
from ..transports._watch import RETURN_EVERY, port_reopened, watched_address
from ._actor import ServerActor

if TYPE_CHECKING:
    from ..actors import Address
    from ..config._model import ServerConfig

#: Calls that may wait in one server's mailbox.
MAILBOX = 4096


class Handle(Protocol):
    """What making the spec reads of the server's handle (not imported here: the handle
    imports this)."""

    name: str
    config: ServerConfig
    retries: bool
    ping_timeout: float


def child_spec(server: Handle, address: Address | None) -> ChildSpec:
    """``server``'s child spec under its config, serving ``address`` (else a new mailbox
    of :data:`MAILBOX` calls); each incarnation is a :class:`~._actor.ServerActor`."""
    config = server.config

    async def returned() -> None:
        """Return once the down server's port, found closed, opens again."""
        watched = _returns_to(server.config)
        assert watched is not None
        host, port = watched
        await port_reopened(host, port, every=RETURN_EVERY, connect_timeout=server.ping_timeout)

    return actor_spec(
        server.name,
        lambda: ServerActor(server),
        mailbox=MAILBOX,
        restart=config.restart if server.retries else Restart.TEMPORARY,
        give_up=config.give_up,
        intensity=Intensity(max_restarts=config.max_attempts, within_seconds=math.inf),
        backoff=config.backoff,
        shutdown_timeout=config.shutdown_timeout,
        hurry=returned if _returns_to(config) is not None else None,
        address=address,
    )


def _returns_to(config: ServerConfig) -> tuple[str, int] | None:
    """The host and port a down remote server's return is looked for at (while it is
    probed: ``pingInterval`` is not 0), if any."""
    if config.type in ("stdio", "memory") or config.url is None or config.ping_interval <= 0:
        return None
    return watched_address(config.url)
