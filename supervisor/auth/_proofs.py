"""DPoP on one broker's requests: each signed with the key its tokens are bound to.

When the server's ``auth`` asks for DPoP (:mod:`._dpop`), every token request the
provider makes and every request of the connections carries a proof made with the key
kept with the tokens, with the latest nonce the endpoint gave; the key's private half is
held by the log redactor before a proof is made with it. A token request refused for
want of a nonce (400 ``use_dpop_nonce``, RFC 9449 §8) is sent once more with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2

from ._dpop import Nonces, nonce_asked
from ._store import Credentials


class Proofs:
    """The DPoP proofs of the requests made with ``credentials``' tokens; ``remember``
    registers a secret with the log redactor."""

    __slots__ = ("_credentials", "_nonces", "_remember", "_secret")

    def __init__(self, credentials: Credentials, remember: Callable[[str], None]) -> None:
        self._credentials = credentials
        self._remember = remember
        #: the latest DPoP nonce of each endpoint (the token endpoint's, the server's)
        self._nonces = Nonces()
        #: the DPoP key secret last registered with the redactor
        self._secret: str | None = None

    def presenting(self, method: str, url: httpx2.URL, token: str) -> dict[str, str]:
        """The headers that present ``token`` on a request to the server: ``Authorization:
        Bearer``, or for a DPoP-bound token ``Authorization: DPoP`` and a fresh proof of
        this request (with the server's latest nonce)."""
        if not self._credentials.dpop_bound:
            return {"Authorization": f"Bearer {token}"}
        return {
            "Authorization": f"DPoP {token}",
            "DPoP": self.proof(method, url, access_token=token),
        }

    def nonce_asked(self, url: httpx2.URL, response: httpx2.Response) -> bool:
        """Note the DPoP nonce the server's answer gives; whether the answer refuses the
        request for want of one (401 ``use_dpop_nonce``, RFC 9449 §9)."""
        if self._credentials.dpop_key is None:
            return False
        self._nonces.heard(url, response)
        return response.status_code == 401 and nonce_asked(response)

    def proof(self, method: str, url: httpx2.URL, *, access_token: str | None = None) -> str:
        """A DPoP proof with the key the tokens are bound to (its private half held by
        the redactor first), with the endpoint's latest nonce."""
        key = self._credentials.dpop_key
        assert key is not None
        secret = key.secret
        if secret != self._secret:
            self._remember(secret)
            self._secret = secret
        return key.proof(method, url, access_token=access_token, nonce=self._nonces.get(url))

    async def send(self, http: httpx2.AsyncClient, outgoing: httpx2.Request) -> httpx2.Response:
        """Send one of the provider's requests, read. A DPoP client's token request
        carries a proof (with the token endpoint's latest nonce) and is sent once more
        with the nonce its refusal asks for; a DPoP-bound token in the answer is noted
        bound and handed to the provider as a Bearer one (the only ``token_type`` the
        SDK reads)."""
        content = outgoing.content or b""
        token_request = outgoing.method == "POST" and b"grant_type=" in content
        if self._credentials.dpop_key is None or not token_request:
            response = await http.send(outgoing)
            await response.aread()
            return response
        attempt = 0
        while True:  # twice at most: once more with the nonce a refusal asks for
            outgoing.headers["DPoP"] = self.proof("POST", outgoing.url)
            response = await http.send(outgoing)
            await response.aread()
            self._nonces.heard(outgoing.url, response)
            if attempt or not nonce_asked(response):
                break
            attempt += 1
        if response.status_code != 200:
            return response
        try:
            answer = json.loads(response.content)
        except ValueError:
            return response  # the provider reports it
        if not isinstance(answer, dict) or not isinstance(answer.get("token_type"), str):
            return response
        bound = answer["token_type"].lower() == "dpop"
        self._credentials.dpop_bound = bound
        if not bound:
            return response  # a Bearer token after all: presented as one
        answer["token_type"] = "Bearer"
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        ]
        return httpx2.Response(200, headers=headers, json=answer, request=outgoing)
