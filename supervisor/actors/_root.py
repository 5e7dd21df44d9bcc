"""Running supervisors: the root of a tree, or one nested as a child of another."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from ._decisions import Notify
from ._errors import collapsing
from ._spec import Backoff, ChildSpec, GiveUp, Intensity, Restart, Strategy
from ._tree import Tree


def supervisor_spec(
    id: str,
    children: Sequence[ChildSpec],
    *,
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    intensity: Intensity | None = None,
    backoff: Backoff | None = None,
    notify: Notify | None = None,
    rng: random.Random | None = None,
    restart: Restart = Restart.PERMANENT,
    shutdown_timeout: float = math.inf,
    give_up: GiveUp = GiveUp.ESCALATE,
    child_intensity: Intensity | None = None,
    child_backoff: Backoff | None = None,
    ordered_shutdown: bool = False,
) -> ChildSpec:
    """A child spec for a nested supervisor with these children.

    Each (re)start makes a fresh :class:`Tree` from the same child specs, so
    children added later with ``start_child`` do not survive its restart (as in OTP).
    ``child_intensity``/``child_backoff`` are the spec's own limits as a child of its
    parent; ``intensity``/``backoff`` are what it applies to its children. Without
    ``notify`` it reports through its parent's hook, without ``rng`` it draws jitter
    from its parent's generator. Its ``shutdown_timeout``
    defaults to infinity, as OTP's does for supervisors: its own children's timeouts
    bound it.
    """
    children = tuple(children)

    def start() -> Tree:
        return Tree(
            children,
            name=id,
            strategy=strategy,
            intensity=intensity,
            backoff=backoff,
            notify=notify,
            rng=rng,
            ordered_shutdown=ordered_shutdown,
        )

    return ChildSpec(
        id=id,
        start=start,
        restart=restart,
        shutdown_timeout=shutdown_timeout,
        give_up=give_up,
        intensity=child_intensity,
        backoff=child_backoff,
        addresses=tuple(a for c in children for a in c.addresses),
    )


@asynccontextmanager
async def open_tree(
    children: Sequence[ChildSpec] = (),
    *,
    name: str = "root",
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    intensity: Intensity | None = None,
    backoff: Backoff | None = None,
    notify: Notify | None = None,
    rng: random.Random | None = None,
    ordered_shutdown: bool = False,
) -> AsyncIterator[Tree]:
    """Run a root supervisor for the duration of the ``async with`` block.

    Children are started (in order) before the block is entered; leaving the block
    stops them (see :class:`Tree`), and closes every address so no call can wait forever.
    If the root gives up, the block is cancelled and :class:`~supervisor.actors.SupervisorGaveUp` is
    raised out of it. A single error is raised as it is, not inside an exception group.
    """
    root = Tree(
        children,
        name=name,
        strategy=strategy,
        intensity=intensity,
        backoff=backoff,
        notify=notify,
        rng=rng,
        close_on_exit=True,
        ordered_shutdown=ordered_shutdown,
    )
    # The nursery is ours, not the caller's: one error (the root's failure or the
    # block's own) comes out bare, as if there were no nursery.
    with collapsing():
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            try:
                yield root
            finally:
                root.request_stop()
