"""Who may read the page and act: the Host, Origin and token checks, and the headers
every response of the dashboard carries (the rules are in the package docstring).

A :class:`Guard` belongs to one :func:`~supervisor.dashboard.serve_dashboard` call: it
knows the host the dashboard was started with, the port it got and its action token.
Its checks take a request's headers (lower-case names) and never raise.
"""

from __future__ import annotations

import hmac
import ipaddress
import urllib.parse
from collections.abc import Mapping

__all__ = ["SECURITY_HEADERS", "TOKEN_HEADER", "Guard"]

#: The request header that carries the action token.
TOKEN_HEADER = "X-Dashboard-Token"

#: Every response carries these. The page loads only its own script and style sheet
#: (no inline code, so no nonce is needed) and talks only to its own origin.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)


class Guard:
    """The security checks of one dashboard: its Host, its origin, its token."""

    def __init__(self, token: str, host: str, port: int) -> None:
        self._token = token.encode("ascii")
        self._host = host.lower()
        self._port = port

    def host_allowed(self, headers: Mapping[str, str]) -> bool:
        """The Host header names this listener: an IP address, ``localhost`` or the host
        it was started with, and its port. A DNS-rebinding page (an attacker's name
        pointing at 127.0.0.1) is refused here, so it never sees the page or its token."""
        hostname, port = authority(headers.get("host", ""))
        if hostname is None or port != self._port:
            return False
        if hostname in ("localhost", self._host):
            return True
        try:
            ipaddress.ip_address(hostname)
        except ValueError:
            return False
        return True

    def origin_allowed(self, headers: Mapping[str, str]) -> bool:
        """The Origin header is the dashboard's own origin (the one its Host names)."""
        origin = headers.get("origin")
        if origin is None:
            return False
        try:
            parts = urllib.parse.urlsplit(origin)
            origin_port = parts.port or 80
        except ValueError:
            return False
        if parts.scheme != "http" or parts.path or parts.username is not None:
            return False
        hostname, port = authority(headers.get("host", ""))
        return hostname is not None and (parts.hostname, origin_port) == (hostname, port)

    def token_ok(self, headers: Mapping[str, str]) -> bool:
        """The request carries this dashboard's token (compared in constant time)."""
        offered = headers.get(TOKEN_HEADER.lower(), "").encode("latin-1")
        return hmac.compare_digest(offered, self._token)


def authority(host_header: str) -> tuple[str | None, int | None]:
    """``(hostname, port)`` of a Host header (port 80 when absent); ``(None, None)`` if bad."""
    if not host_header or any(c in host_header for c in "@/?#\\ "):
        return None, None
    try:
        parts = urllib.parse.urlsplit("//" + host_header)
        return parts.hostname, parts.port or 80
    except ValueError:
        return None, None
