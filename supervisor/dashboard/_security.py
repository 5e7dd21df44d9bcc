"""Who may read the page and who may act: the Host, Origin and login checks, and the
headers every response of the dashboard carries (the rules are in the package docstring).

A :class:`Guard` belongs to one :func:`~supervisor.dashboard.serve_dashboard` call: it
knows the host the dashboard was started with, the port it got, its token and whether
reading needs the login too. Its checks take a request's headers (lower-case names) and
never raise. Every secret is compared in constant time.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import urllib.parse
from collections.abc import Mapping

from ._address import is_loopback

__all__ = ["SECURITY_HEADERS", "Guard", "Login", "MIN_TOKEN_LENGTH", "check_token", "exposure"]

#: The shortest token the dashboard takes when one is given (a generated one is 43).
MIN_TOKEN_LENGTH = 16

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

# What the session cookie holds is derived from the token, never the token itself: a
# configured token keeps its logins across restarts, and the cookie gives nothing else.
_SESSION_LABEL = b"mcp-supervisor dashboard session"


class Login(enum.Enum):
    """What a request proves: nothing, the session cookie, or the bearer token."""

    NONE = "none"
    WRONG = "wrong"  # a bearer token or a cookie that is not this dashboard's
    COOKIE = "cookie"
    BEARER = "bearer"


def check_token(token: str) -> str | None:
    """Why *token* cannot be a dashboard token (``None`` when it can): it goes in a URL and
    a header, so it is printable ASCII without spaces, and at least
    :data:`MIN_TOKEN_LENGTH` characters long."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} characters, and at least {MIN_TOKEN_LENGTH} are needed"
    if not all("!" <= c <= "~" for c in token):
        return "it must be printable ASCII without spaces"
    return None


def exposure(host: str, token: str | None) -> str | None:
    """Why a dashboard on *host* without a chosen *token* is refused (``None`` when it is
    not): beyond loopback, a generated token would be known only to the process, and
    reading must not be open to the network."""
    if token is None and not is_loopback(host):
        return (
            f"the dashboard would listen on {host}, beyond this machine, and there reading "
            "and acting need a token you choose"
        )
    return None


class Guard:
    """The security checks of one dashboard: its Host, its origin, its login."""

    def __init__(self, token: str, host: str, port: int, *, login_to_read: bool) -> None:
        self._token = token.encode("ascii")
        self._session = hmac.new(self._token, _SESSION_LABEL, hashlib.sha256).hexdigest()
        self._host = host.lower()
        self._port = port
        #: Whether reading (the page, the feed, metrics, health) needs the login too.
        self.login_to_read = login_to_read
        #: The session cookie's name: cookies do not tell ports apart, so each
        #: dashboard's is its own.
        self.cookie_name = f"mcp-supervisor-dashboard-{port}"

    def host_allowed(self, headers: Mapping[str, str]) -> bool:
        """The Host header names this listener: an IP address, ``localhost`` or the host
        it was started with, and its port. A DNS-rebinding page (an attacker's name
        pointing at 127.0.0.1) is refused here, so it never reads anything."""
        return names_listener(headers.get("host", ""), self._host, self._port)

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

    def login(self, headers: Mapping[str, str]) -> Login:
        """What the request proves: ``Authorization: Bearer TOKEN`` (the scheme in any
        case) with this dashboard's token, or its session cookie. A bearer header, when
        sent, decides: a wrong one is :attr:`Login.WRONG` whatever cookie comes along."""
        authorization = headers.get("authorization")
        if authorization is not None:
            offered = bearer(authorization)
            if offered is not None and _same(offered, self._token):
                return Login.BEARER
            return Login.WRONG
        cookie = self._cookie(headers.get("cookie", ""))
        if cookie is None:
            return Login.NONE
        return Login.COOKIE if _same(cookie, self._session.encode()) else Login.WRONG

    def token_ok(self, offered: str) -> bool:
        """*offered* (the login URL's ``token``) is this dashboard's token."""
        return _same(offered, self._token)

    def session_cookie(self) -> str:
        """The ``Set-Cookie`` value a login sets: the page's scripts cannot read it
        (``HttpOnly``), and no other site's request carries it (``SameSite=Strict``)."""
        return f"{self.cookie_name}={self._session}; Path=/; HttpOnly; SameSite=Strict"

    def _cookie(self, header: str) -> str | None:
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name == self.cookie_name:
                return value.strip()
        return None


def _same(offered: str, expected: bytes) -> bool:
    try:
        data = offered.encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(data, expected)


def bearer(authorization: str) -> str | None:
    """The credentials of an ``Authorization: Bearer CREDENTIALS`` header value, the
    scheme in any case (RFC 7235); ``None`` for another scheme or none."""
    scheme, _, offered = authorization.strip().partition(" ")
    return offered.strip() if scheme.lower() == "bearer" else None


def names_listener(host_header: str, host: str, port: int | None) -> bool:
    """Whether a Host header names the listener started on ``host``:``port``: an IP
    address, ``localhost`` or ``host``, with that port (any port for ``None``: a proxy
    on the same machine sends its own). A DNS-rebinding page (an attacker's name
    pointing at 127.0.0.1) names neither, so it is refused."""
    hostname, given_port = authority(host_header)
    if hostname is None or (port is not None and given_port != port):
        return False
    if hostname in ("localhost", host.lower()):
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


def authority(host_header: str) -> tuple[str | None, int | None]:
    """``(hostname, port)`` of a Host header (port 80 when absent); ``(None, None)`` if bad."""
    if not host_header or any(c in host_header for c in "@/?#\\ "):
        return None, None
    try:
        parts = urllib.parse.urlsplit("//" + host_header)
        return parts.hostname, parts.port or 80
    except ValueError:
        return None, None
