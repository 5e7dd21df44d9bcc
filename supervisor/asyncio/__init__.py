"""The supervisor in an asyncio program: the same runtime, run as a guest of the running
asyncio loop (trio's guest mode), with an asyncio face.

::

    import asyncio
    from supervisor.asyncio import open_supervisor

    async def main() -> None:
        async with open_supervisor("mcp.json") as sup:
            result = await sup.call("notes_add", {"title": "t", "body": "b"})
            print(result.text)

    asyncio.run(main())

The runtime stays trio: :func:`open_supervisor` starts ``trio.lowlevel.start_guest_run``
on the asyncio loop of the task that enters it, in the same thread — trio's tasks run
between the loop's callbacks (trio itself waits for I/O in a helper thread of its own,
which is how guest mode works). Each call of the handle runs in a trio task of that run
and hands its outcome back to the asyncio task awaiting it; nothing else is threaded.

* Cancelling the asyncio task that awaits a call cancels the call (the server gets
  ``notifications/cancelled``) before the cancellation goes on.
* Events (:meth:`AsyncSupervisor.subscribe`) come as an async iterator, within an
  ``async with`` as on trio.
* The supervisor's end — its block left, or the runtime failing (every server stopped) —
  surfaces at the ``async with``, with the runtime's error if it failed.
* Works on any asyncio loop with ``call_soon_threadsafe`` (``uvloop`` too).

Callbacks given to :func:`open_supervisor` (``approve``, the OAuth handlers, and the SDK
client's ``elicitation_callback``, ``sampling_callback``, ``list_roots_callback``,
``logging_callback``, ``message_handler``) and to a verb (a call's ``progress`` and
``approve``, ``login``'s ``redirect_handler``) may be asyncio coroutine functions: each
is run as an asyncio task, its trio caller waiting for it.

:func:`open_supervisor` and :func:`start_supervisor` take the trio ``open_supervisor``'s
parameters, and :class:`AsyncSupervisor` has the trio handle's verbs with their
parameters: :mod:`supervisor.asyncio._verbs` lists which, and how each crosses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._handle import AsyncSupervisor as AsyncSupervisor
    from ._handle import open_supervisor as open_supervisor
    from ._handle import start_supervisor as start_supervisor


__getattr__, __dir__ = attach(__name__)
