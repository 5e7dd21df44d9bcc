"""The rule for a URL the supervisor is told by a server rather than by its config — an
authorization server's metadata names its keys (``jwks_uri``) and its endpoints: it is held
to the rule the config's own URLs of that kind meet, ``https://``, or ``http://`` on a
loopback host only (``127.0.0.1``, ``localhost``, ``[::1]``). Keys fetched, a code or a
token posted, or a browser sent over plain HTTP beyond this machine would be a man in the
middle's to read or replace.

The standard library only, and nothing of the package: every layer may import it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["LOOPBACK_HOSTS", "SECURE_URL", "is_secure_url"]

#: The host names taken as this machine for an ``http://`` URL.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

#: What :func:`is_secure_url` takes, for messages.
SECURE_URL = "an https:// URL (http:// on a loopback host only)"


def is_secure_url(url: str) -> bool:
    """Whether ``url`` is an ``https://`` URL with a host, or an ``http://`` one on a
    loopback host (:data:`LOOPBACK_HOSTS`)."""
    if not isinstance(url, str) or any(c.isspace() or ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is no number: not a URL to use
    except ValueError:
        return False
    if not host:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS)
