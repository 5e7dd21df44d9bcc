"""DPoP (RFC 9449, SEP-1932): sender-constrained tokens, the client's side.

A server whose ``auth`` sets ``"dpop": true`` gets its tokens bound to a key pair of its
broker's (ES256, P-256): every token request (authorization code, refresh, client
credentials, the jwt-bearer grants) carries a proof of that key in its ``DPoP`` header,
so the authorization server binds the token (and a public client's refresh token) to it;
every request to the server then presents the token as ``Authorization: DPoP <token>``
with a fresh proof (``htm``, ``htu`` without query or fragment, ``iat``, a unique
``jti``, ``ath``: the token's SHA-256, and the server's nonce when it gave one).

The key is made when the first token is asked for and kept with the tokens, in their row
of the token store (so a restart, or ``auth login`` in another process, uses the key the
stored tokens are bound to); its private half is registered with the log redactor and
never printed (:class:`DpopKey`'s ``repr`` shows its thumbprint). A server's or an
authorization server's ``DPoP-Nonce`` is remembered, per endpoint, and put in the next
proof sent there; a refusal asking for one (``use_dpop_nonce``) is answered by sending
the request once more with it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

__all__ = ["ALGORITHM", "DpopKey", "Nonces", "htu", "nonce_asked", "proof_thumbprint"]

#: The one signing algorithm used (RFC 9449 §4.1 expects every party to support it).
ALGORITHM = "ES256"
_COORDINATE = 32  # bytes of a P-256 coordinate, and of each half of an ES256 signature


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int_b64(value: int) -> str:
    return _b64(value.to_bytes(_COORDINATE, "big"))


def htu(url: str | httpx2.URL) -> str:
    """A request's URL as a proof's ``htu``: without its query and fragment (§4.2)."""
    parts = urlsplit(str(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def proof_thumbprint(jwk: dict[str, Any]) -> str:
    """The JWK SHA-256 thumbprint (RFC 7638) of an EC public key: a token's ``cnf.jkt``."""
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    return _b64(hashlib.sha256(canonical).digest())


class DpopKey:
    """One DPoP key pair (ES256): it signs proofs; :meth:`to_jwk` is what is stored."""

    def __init__(self, private: ec.EllipticCurvePrivateKey) -> None:
        if not isinstance(private.curve, ec.SECP256R1):
            raise ValueError("a DPoP key is a P-256 key")
        self._private = private
        numbers = private.public_key().public_numbers()
        #: the public key as the ``jwk`` header of each proof (no private member)
        self.public_jwk: dict[str, str] = {
            "kty": "EC",
            "crv": "P-256",
            "x": _int_b64(numbers.x),
            "y": _int_b64(numbers.y),
        }
        #: RFC 7638 thumbprint: what an authorization server binds tokens to
        self.thumbprint = proof_thumbprint(self.public_jwk)

    @classmethod
    def generate(cls) -> DpopKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_jwk(cls, data: object) -> DpopKey | None:
        """The key stored as ``data`` (:meth:`to_jwk`), ``None`` when it is not one."""
        if not isinstance(data, dict) or data.get("kty") != "EC" or data.get("crv") != "P-256":
            return None
        try:
            d = int.from_bytes(_unb64(str(data["d"])), "big")
            key = ec.derive_private_key(d, ec.SECP256R1())
        except (KeyError, ValueError, TypeError):
            return None
        made = cls(key)
        if made.public_jwk["x"] != data.get("x") or made.public_jwk["y"] != data.get("y"):
            return None
        return made

    def to_jwk(self) -> dict[str, str]:
        """The key pair as a private JWK, for the token store only."""
        return {**self.public_jwk, "d": self.secret}

    @property
    def secret(self) -> str:
        """The private key's ``d``, as the JWK writes it: for the log redactor."""
        return _int_b64(self._private.private_numbers().private_value)

    def proof(
        self,
        method: str,
        url: str | httpx2.URL,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
        now: float | None = None,
    ) -> str:
        """A fresh proof (a ``dpop+jwt``) for one request: its method and URL, a new
        ``jti``; ``ath`` with the access token it is sent with, ``nonce`` when given."""
        header = {"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.public_jwk}
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time() if now is None else now),
        }
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.encode("ascii")).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        signing_input = (
            _b64(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64(json.dumps(claims, separators=(",", ":")).encode())
        )
        der = self._private.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(_COORDINATE, "big") + s.to_bytes(_COORDINATE, "big")
        return signing_input + "." + _b64(signature)

    def __repr__(self) -> str:
        return f"<DpopKey ES256 jkt={self.thumbprint}>"


class Nonces:
    """The latest ``DPoP-Nonce`` each endpoint gave (keyed by ``htu``): an authorization
    server's token endpoint, a server's MCP endpoint."""

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}

    def get(self, url: str | httpx2.URL) -> str | None:
        return self._latest.get(htu(url))

    def heard(self, url: str | httpx2.URL, response: httpx2.Response) -> str | None:
        """Remember the nonce ``response`` gives (RFC 9449 §8, §9: any answer may carry
        a new one); the nonce, if it gave one."""
        nonce = response.headers.get("dpop-nonce")
        if nonce and nonce.isprintable() and len(nonce) <= 1024:
            self._latest[htu(url)] = nonce
            return nonce
        return None


def nonce_asked(response: httpx2.Response) -> bool:
    """Whether ``response`` refuses a request for want of a nonce: a resource server's
    401 with ``WWW-Authenticate: DPoP error="use_dpop_nonce"`` (§9), or an authorization
    server's 400 ``{"error": "use_dpop_nonce"}`` (§8) — with a ``DPoP-Nonce`` to use."""
    if not response.headers.get("dpop-nonce"):
        return False
    if response.status_code == 401:
        return "use_dpop_nonce" in response.headers.get("www-authenticate", "")
    if response.status_code == 400:
        try:
            said = json.loads(response.content)
        except ValueError:
            return False
        return isinstance(said, dict) and said.get("error") == "use_dpop_nonce"
    return False
