"""The access token a broker holds, with its expiry, its secrets held by the log redactor.

A token is handed out while it is good for a while yet: until a margin before its
expiry — a tenth of its lifetime, between 1 and 60 seconds — so that a request never
leaves with a token about to run out. Each token (and its refresh token) is registered
with the redactor before anything can print it, and released two generations later: a
log line about the previous token may still be on its way, and a broker running for
months holds four secrets, not thousands.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.shared.auth import OAuthToken

from ._store import StoredTokens

#: token generations a broker keeps redacted: the current one and the one it replaced
_TOKEN_GENERATIONS = 2


class HeldToken:
    """The access token held now (``token``, ``None``: none), as of the stored tokens
    last read; ``remember`` and ``forget`` are the log redactor's."""

    __slots__ = ("_forget", "_generations", "_remember", "expires_at", "lifetime", "token")

    def __init__(self, remember: Callable[[str], None], forget: Callable[[str], None]) -> None:
        self._remember = remember
        self._forget = forget
        self.token: str | None = None
        #: Unix time it expires at (``None``: not said)
        self.expires_at: float | None = None
        #: seconds it was good for when stored (``None``: not said)
        self.lifetime: float | None = None
        #: the token generations held by the redactor, oldest first
        self._generations: list[tuple[str, ...]] = []

    def current(self, clock: Callable[[], float]) -> str | None:
        """The held token if it is good for a while yet (Unix time read off ``clock``),
        else ``None``."""
        if self.token is None:
            return None
        if self.expires_at is not None:
            lifetime = self.lifetime or 0.0
            margin = min(60.0, max(1.0, 0.1 * lifetime))
            if clock() >= self.expires_at - margin:
                return None
        return self.token

    def hold(self, stored: StoredTokens | None) -> None:
        """Hold the stored tokens (``None``: none are stored)."""
        if stored is None:
            self.clear()
            return
        self.remember(stored.token)
        self.token = stored.token.access_token
        self.expires_at = stored.expires_at
        self.lifetime = (
            None if stored.expires_at is None else max(stored.expires_at - stored.saved_at, 0.0)
        )

    def clear(self) -> None:
        """Hold no token."""
        self.token = self.expires_at = self.lifetime = None

    def remember(self, tokens: OAuthToken) -> None:
        """Hold these tokens' secrets with the redactor, and let go of those two
        generations old (a log line about the previous token may still be on its way)."""
        generation = (tokens.access_token, *filter(None, [tokens.refresh_token]))
        for secret in generation:
            self._remember(secret)
        if generation in self._generations:
            return
        self._generations.append(generation)
        if len(self._generations) > _TOKEN_GENERATIONS:
            old = self._generations.pop(0)
            kept = {secret for held in self._generations for secret in held}
            for secret in old:
                if secret not in kept:  # an unrotated refresh token is still in use
                    self._forget(secret)
