"""``HOST:PORT`` as the command line takes it, IPv6 in brackets (``[::1]:8080``)."""

from __future__ import annotations

import ipaddress

__all__ = ["format_host", "is_loopback", "parse_address"]


def parse_address(text: str, *, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """Split ``HOST:PORT`` into ``(host, port)``.

    Accepted forms: ``127.0.0.1:8080``, ``localhost:8080``, ``[::1]:8080`` (an IPv6
    address must be in brackets), ``:8080`` and ``8080`` (host *default_host*). Port 0
    means "any free port". Raises :class:`ValueError` with a message that says what is
    wrong and shows the expected form.
    """
    original = text
    text = text.strip()
    if not text:
        raise ValueError("empty address: expected HOST:PORT, e.g. 127.0.0.1:8080")
    if text.isdigit():
        return default_host, _port(text, original)
    if text.startswith("["):
        close = text.find("]")
        if close == -1:
            raise ValueError(f"{original!r}: missing ']' after the IPv6 address, e.g. [::1]:8080")
        host, rest = text[1:close], text[close + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f"{original!r}: expected ':PORT' after ']', e.g. [::1]:8080")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{original!r}: {host!r} is not an IPv6 address") from None
        return host, _port(rest[1:], original)
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"{original!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    if ":" in host:
        raise ValueError(f"{original!r}: put an IPv6 address in brackets, e.g. [::1]:8080")
    return host or default_host, _port(port, original)


def _port(text: str, original: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{original!r}: the port must be a number from 0 to 65535")
    port = int(text)
    if port > 65535:
        raise ValueError(f"{original!r}: the port must be a number from 0 to 65535")
    return port


def format_host(host: str) -> str:
    """*host* as it appears in a URL: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    """Whether *host* names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
