"""A team gateway's login links' tickets: each names a server and a subject, is sealed
with the gateway's key, and is good once, for :data:`TICKET_SECONDS`.

A ticket's use is recorded in the token store when it is one of :mod:`._backends` —
the one replicas share — so that of all the replicas, one takes it; else in this
process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Container

from ._backends import TokenStore, _Rows

__all__ = ["TICKET_SECONDS", "Tickets"]

#: How long a login link is good for (seconds); it is good once.
TICKET_SECONDS = 600.0


class _BadTicket(Exception):
    """A login link that is not (or no longer) good."""


class Tickets:
    """The tickets sealed with ``key`` (``None``: no gateway serves logins), their uses
    recorded in ``rows``."""

    __slots__ = ("_rows", "_used", "key")

    def __init__(self, rows: TokenStore) -> None:
        self._rows = rows
        self.key: bytes | None = None
        #: ticket nonces taken, with their expiry (a store of its own: see :meth:`_take`)
        self._used: dict[str, float] = {}

    def make(self, server: str, subject: str) -> str:
        """A new ticket for ``subject``'s login to ``server`` (there is a :attr:`key`)."""
        expires = int(time.time() + TICKET_SECONDS)
        body = json.dumps([server, subject, expires, secrets.token_urlsafe(12)]).encode()
        return b64(body) + "." + b64(self._mac(body))

    def _mac(self, body: bytes) -> bytes:
        assert self.key is not None
        return hmac.new(self.key, b"mcp-supervisor user login\n" + body, hashlib.sha256).digest()

    async def open(self, ticket: str, servers: Container[str]) -> tuple[str, str]:
        """The server (one of ``servers``) and subject of a good ``ticket``, taken: it is
        good once (:meth:`_take`); :class:`_BadTicket` saying why not."""
        if self.key is None:
            raise _BadTicket("this gateway serves no logins")
        server = subject = expires = nonce = None  # until the ticket reads as one
        try:
            body_text, mac_text = ticket.split(".", 1)
            body = unb64(body_text)
            good = hmac.compare_digest(unb64(mac_text), self._mac(body))
            server, subject, expires, nonce = json.loads(body) if good else (0, 0, 0, 0)
        except (ValueError, TypeError):
            good = False
        if not good or not isinstance(server, str) or not isinstance(subject, str):
            raise _BadTicket("this login link is not one of this gateway's")
        now = time.time()
        if not isinstance(expires, int) or expires < now:
            raise _BadTicket("this login link has expired: call the tool again for a new one")
        if server not in servers:
            raise _BadTicket("this gateway no longer serves that server per user")
        if not await self._take(str(nonce), expires):
            raise _BadTicket("this login link was used already: call the tool again for a new one")
        return server, subject

    async def _take(self, nonce: str, expires: int) -> bool:
        """Whether the ticket ``nonce`` is taken now (``False``: it was before). In a
        token store of :mod:`._backends` — the one replicas share — its row records it
        until the ticket expires, taken by one replica of all at once
        (:meth:`~._backends._Rows.claim`); else in this process (:attr:`_used`)."""
        if isinstance(self._rows, _Rows):
            return await self._rows.claim("tickets", _ticket_key(nonce), float(expires))
        now = time.time()
        self._used = {n: e for n, e in self._used.items() if e >= now}
        if nonce in self._used:
            return False
        self._used[nonce] = expires
        return True


def _ticket_key(nonce: str) -> str:
    return "ticket-" + hashlib.sha256(nonce.encode()).hexdigest()[:40]


def b64(data: bytes) -> str:
    """``data`` in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    """What :func:`b64` made ``text`` of."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
