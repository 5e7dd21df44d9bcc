"""A serving process's start-up heap, kept out of the cyclic garbage collector's way.

Before a gateway serves its first request it has imported over a thousand modules and
built its servers' state: some 125,000 objects that live as long as the process, which
the cyclic collector walks again at each full collection — 50 ms each, every few
thousand calls, on a small machine: a tenth of the process's time per call. :func:`settle`
moves them to the permanent generation (:func:`gc.freeze`) once start-up is over, the
young garbage of start-up collected first, so that later collections walk only what was
made since. What is frozen is still freed when nothing refers to it; only a reference
cycle among frozen objects, once garbage, stays. For a process the command line runs
(``serve``), not a program's own: its heap is its own to decide on.
"""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> None:
    """Collect start-up's young garbage, then freeze every object the process holds."""
    gc.collect(1)
    gc.freeze()
