"""A server's refusal of a token, and what the broker hands the SDK's provider of it.

The provider is shown the server's real challenge (its ``WWW-Authenticate``) as the
answer to a probe request, with the scopes the broker wants added to it; these read and
write such challenges, and a request's bearer token, and name the OAuth error a failed
flow reports.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth


@attrs.frozen
class Challenge:
    """A server's refusal of a token: its status and ``WWW-Authenticate``."""

    status: int
    www_authenticate: str | None

    @classmethod
    def of(cls, response: httpx2.Response) -> Challenge:
        return cls(response.status_code, response.headers.get("www-authenticate"))

    @property
    def step_up(self) -> bool:
        return self.status == 403


def bearer(request: httpx2.Request) -> str | None:
    """The token ``request`` carries in ``Authorization: Bearer`` (``None``: none)."""
    value = request.headers.get("authorization", "")
    return value[7:] if value[:7].lower() == "bearer " else None


def challenge_header(challenge: Challenge | None, scopes: Sequence[str]) -> dict[str, str]:
    """The ``WWW-Authenticate`` given to the provider: the server's own, with the
    configured scopes added to (or put in) its ``scope``."""
    header = challenge.www_authenticate if challenge is not None else None
    if not scopes:
        return {"www-authenticate": header} if header else {}
    if header is None:
        return {"www-authenticate": f'Bearer scope="{" ".join(scopes)}"'}
    probe = httpx2.Response(401, headers={"www-authenticate": header})
    had = (extract_field_from_www_auth(probe, "scope") or "").split()
    merged = " ".join(dict.fromkeys([*had, *scopes]))
    params = [p for p in _params(header) if not p.lower().startswith("scope=")]
    return {"www-authenticate": "Bearer " + ", ".join([*params, f'scope="{merged}"'])}


def _params(header: str) -> list[str]:
    """The ``key=value`` parameters of a challenge, ``Bearer`` or ``DPoP`` (quoted
    values kept whole)."""
    scheme, _, rest = header.partition(" ")
    body = rest if scheme and "=" not in scheme else header
    out, current, quoted = [], "", False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            if current.strip():
                out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def oauth_error(exc: BaseException) -> str | None:
    """The OAuth error code (RFC 6749 §5.2) a failed flow's exception names, if any."""
    text = str(exc)
    for code in (
        "invalid_grant",
        "invalid_client",
        "unauthorized_client",
        "access_denied",
        "invalid_scope",
        "unsupported_grant_type",
        "invalid_request",
        "server_error",
        "temporarily_unavailable",
    ):
        if code in text:
            return code
    return getattr(exc, "error", None)
