"""A per-user login bound to the browser that signed in for it (RFC 9700 §4.7).

The redirect to the backing server's authorization server sets a cookie
(:meth:`BrowserBinding.binding`) whose value is the gateway key's HMAC of the login's
``state``, and the login's answer is taken only from a browser that brings it back
(:meth:`BrowserBinding.bound`). An authorization URL forwarded to someone else — who is
logged in at that server as themselves — thus cannot make their account stand for the
link's caller: their browser has no such cookie. Replicas share the key, so any of them
checks the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs, urlsplit

from ._login import LOGIN_TIMEOUT
from ._tickets import b64

__all__ = ["BROWSER_COOKIE", "BrowserBinding", "state_key", "state_of"]

#: The cookie binding a login to the browser that signed in for it (one per login, its
#: name ending in a digest of the login's ``state``): ``__Host-`` prefixed and
#: ``Secure`` when the gateway's public URL is https. Over plain http (a gateway on
#: loopback) a browser takes no ``__Host-`` or ``Secure`` cookie: it is set without them.
BROWSER_COOKIE = "mcp-supervisor-login-"


class BrowserBinding:
    """The cookies binding logins to their browsers, sealed with ``key``, for the
    gateway at ``base_url`` (either ``None``: no gateway serves logins)."""

    __slots__ = ("base_url", "key")

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.base_url: str | None = None

    def binding(self, url: str) -> bytes:
        """The ``Set-Cookie`` header value that binds the login whose authorization URL
        is ``url`` to the browser sent there (:data:`BROWSER_COOKIE`): HttpOnly,
        SameSite=Lax (the authorization server's redirect back is a top-level GET, which
        takes it along), for as long as the login waits."""
        name, value = self._cookie(state_of(url))
        attributes = f"Path=/; Max-Age={int(LOGIN_TIMEOUT)}; HttpOnly; SameSite=Lax"
        if name.startswith("__Host-"):
            attributes += "; Secure"
        return f"{name}={value}; {attributes}".encode()

    def cleared(self, state: str) -> bytes:
        """The ``Set-Cookie`` header value that removes the login ``state``'s cookie."""
        name, _ = self._cookie(state)
        secure = "; Secure" if name.startswith("__Host-") else ""
        return f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax{secure}".encode()

    def _cookie(self, state: str) -> tuple[str, str]:
        """The name and value of the cookie binding the login ``state`` to its browser."""
        assert self.key is not None and self.base_url is not None
        secure = self.base_url.startswith("https://")
        name = ("__Host-" if secure else "") + BROWSER_COOKIE + state_key(state)[6:22]
        said = b"mcp-supervisor login browser\n" + state.encode()
        mac = hmac.new(self.key, said, hashlib.sha256)
        return name, b64(mac.digest())

    def bound(self, state: str, cookies: str | None) -> bool:
        """Whether the ``Cookie`` header ``cookies`` holds the login ``state``'s cookie."""
        if self.key is None or self.base_url is None or not cookies:
            return False
        name, value = self._cookie(state)
        for pair in cookies.split(";"):
            given_name, _, given = pair.strip().partition("=")
            if given_name == name and hmac.compare_digest(given.encode(), value.encode()):
                return True
        return False


def state_key(state: str) -> str:
    """The token store's row of the login ``state`` (a digest: never the state)."""
    return "login-" + hashlib.sha256(state.encode()).hexdigest()[:40]


def state_of(url: str) -> str:
    """The ``state`` of the authorization URL ``url``."""
    return parse_qs(urlsplit(url).query).get("state", [""])[0]
