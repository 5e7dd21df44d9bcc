"""A per-user login's answer handed from the browser that brings it to the login that
waits for it — in this process, or on another replica through the token store.

A login waiting here says so in the store (:meth:`Handover.expect`: its ``state``'s row,
``waiting``). The authorization server's answer, brought by the browser to any replica,
is handed to the login waiting in that process if it is there, else written to the row
for the replica that started it, which looks for it every :data:`POLL_SECONDS`; only an
awaited login is answered. The login's end (:meth:`Handover.landed`) is told back the
same way, so that the page the browser sees says how it ended.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import attrs
import trio
from mcp.shared.auth import AuthorizationCodeResult

from ._backends import TokenStore
from ._binding import state_key
from ._login import LOGIN_TIMEOUT, LoginCancelled, _page

__all__ = ["DONE_TIMEOUT", "POLL_SECONDS", "Handover"]

#: How often a login waiting for its callback looks for one another replica took.
POLL_SECONDS = 0.5
#: How long the callback page waits for its login to end (the token request).
DONE_TIMEOUT = 60.0


@attrs.define(eq=False)
class _Flight:
    """A login waiting for, then served with, its authorization server's answer."""

    answered: trio.Event = attrs.Factory(trio.Event)
    answer: Any = None
    via_store: bool = False
    done: trio.Event = attrs.Factory(trio.Event)
    error: str | None = None


class Handover:
    """The logins waiting in this process for their answers, by ``state``, handed
    between replicas through ``rows``."""

    __slots__ = ("_flights", "_rows")

    def __init__(self, rows: TokenStore) -> None:
        self._rows = rows
        self._flights: dict[str, _Flight] = {}

    async def hand_over(self, state: str, answer: Any) -> tuple[int, bytes]:  # noqa: ANN401
        """Hand ``answer`` to the login ``state``, here or on the replica it waits on;
        the status and page to answer the browser with, once that login has ended."""
        key = state_key(state)
        flight = self._flights.get(state)
        outcome: dict[str, Any] | None = None
        if flight is not None and flight.answer is None:
            flight.answer = answer
            flight.answered.set()
            with trio.move_on_after(DONE_TIMEOUT):
                await flight.done.wait()
                outcome = {"error": flight.error}
        else:
            row = await self._rows.read("logins", key)
            if row is None or not row.get("waiting"):
                return 400, _page(False, "No login is waiting for this answer (it timed out?).")
            await self._rows.write("logins", key, {"answer": _row_of(answer)})
            with trio.move_on_after(DONE_TIMEOUT):
                while outcome is None:
                    await trio.sleep(POLL_SECONDS)
                    row = await self._rows.read("logins", key)
                    if row is None or "done" in row:
                        outcome = row or {"error": "the login was abandoned"}
            await self._rows.delete("logins", key)
        if outcome is None:
            return 504, _page(False, "The login is taking long: call the tool again shortly.")
        if outcome.get("error"):
            return 502, _page(False, f"The login failed: {outcome['error']}")
        return 200, _page(True, "You are logged in. Go back to your client and call again.")

    async def wait(self, state: str) -> Any:  # noqa: ANN401 - AuthorizationCodeResult
        """Wait for the answer to the login ``state`` (:data:`LOGIN_TIMEOUT`), brought
        here or to another replica (then through the store)."""
        rows, key = self._rows, state_key(state)
        flight = self._flights.get(state) or await self.expect(state)
        with trio.fail_after(LOGIN_TIMEOUT):
            while flight.answer is None:
                with trio.move_on_after(POLL_SECONDS):
                    await flight.answered.wait()
                if flight.answer is None:
                    row = await rows.read("logins", key)
                    if row is not None and isinstance(row.get("answer"), dict):
                        flight.answer = _answer_of(row["answer"])
                        flight.via_store = True
        if isinstance(flight.answer, LoginCancelled):
            raise flight.answer
        return flight.answer

    async def expect(self, state: str) -> _Flight:
        """Wait here for the answer to the login ``state``; say so in the store, for the
        replica the browser brings it to."""
        flight = self._flights[state] = _Flight()
        row = {"waiting": True, "until": time.time() + LOGIN_TIMEOUT}
        await self._rows.write("logins", state_key(state), row)
        return flight

    async def landed(self, state: str | None, error: str | None) -> None:
        """The login of ``state`` ended (``error``: how it failed): tell its callback,
        here or on the replica it reached; forget it."""
        if state is None:
            return
        flight = self._flights.pop(state, None)
        if flight is None:
            return
        flight.error = error
        flight.done.set()
        key = state_key(state)
        if flight.via_store:
            await self._rows.write("logins", key, {"done": True, "error": error})
        elif flight.answer is None:  # no answer came: nobody will take the row
            await self._rows.delete("logins", key)


def _row_of(answer: Any) -> dict[str, Any]:  # noqa: ANN401 - either answer
    if isinstance(answer, LoginCancelled):
        return {"error": answer.error, "description": answer.description}
    return {"code": answer.code, "state": answer.state, "iss": answer.iss}


def _answer_of(row: Mapping[str, Any]) -> Any:  # noqa: ANN401 - either answer
    if "error" in row:
        return LoginCancelled(str(row["error"]), row.get("description"))
    return AuthorizationCodeResult(
        code=str(row["code"]), state=row.get("state"), iss=row.get("iss")
    )
