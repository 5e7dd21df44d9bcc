"""The SDK's OAuth provider for a broker's grant, made from the server's ``auth``.

``authorization_code`` (a browser login) gets the SDK's ``OAuthClientProvider``
(:class:`CodeGrantProvider`), with the loopback listener's redirect URIs;
``client_credentials`` the client-credentials provider, or the private-key-JWT one with
a ``privateKeyFile``; ``identity_assertion`` the SDK's SEP-990 provider once its
authorization server's issuer is known; ``workload_identity`` the jwt-bearer grant with
the workload's own JWT (:mod:`._workload`). Each reads and writes the broker's
credentials (:class:`~._store.Credentials`) as its token storage.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl

from .._sdk import OAuthProvider
from ._discovery import SecretMethod
from ._idjag import fetch_id_jag, read_secret
from ._login import CALLBACK_PATH, DEFAULT_CALLBACK_PORT, EXTRA_PORTS, Logins
from ._store import Credentials


class CodeGrantProvider(OAuthProvider):
    """The SDK's provider, told what a 2025-03-26 server's origin declares: the issuer
    expected of the authorization-server metadata found there is the one it names (the
    SDK expects the origin itself, and refuses an issuer under a path)."""

    legacy_issuer: str | None = None

    def expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self.legacy_issuer:
            return self.legacy_issuer
        return super().expected_issuer()


class Providers:
    """Makes the OAuth provider of one broker (for the server at ``url``, its tokens in
    ``credentials``); ``remember`` and ``forget`` are the log redactor's, ``base_dir``
    where relative key and assertion files are found."""

    __slots__ = ("_assertions", "base_dir", "credentials", "forget", "logins", "remember", "url")

    def __init__(
        self,
        url: str,
        credentials: Credentials,
        logins: Logins,
        *,
        remember: Callable[[str], None],
        forget: Callable[[str], None],
        base_dir: Path | None,
    ) -> None:
        self.url = url
        self.credentials = credentials
        self.logins = logins
        self.remember = remember
        self.forget = forget
        self.base_dir = base_dir
        #: where the ``workload_identity`` grant's JWT is (made with its first provider)
        self._assertions: Any = None

    def make(
        self,
        auth: Any,  # supervisor.config.AuthConfig
        grant: str,
        secret_method: SecretMethod | None,
        *,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[Any]],
    ) -> httpx2.Auth | None:
        """The provider for ``grant`` (``None``: an identity assertion's issuer is not
        known yet); ``secret_method`` is how the authorization server wants a secret."""
        a = auth
        scope = " ".join(a.scopes) or None
        if grant == "client_credentials":
            return self._machine_provider(a, scope, secret_method)
        if grant == "identity_assertion":
            return self._identity_assertion(a, scope, secret_method)
        if grant == "workload_identity":
            return self._workload_identity(a, scope, secret_method)
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(u) for u in self.redirect_uris(a)],
            client_name=a.client_name or "mcp-supervisor",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=(
                a.token_endpoint_auth_method
                or ((secret_method or "client_secret_basic") if a.client_secret else "none")
            ),
            scope=scope,
        )
        if a.client_id:
            self.credentials.fixed_client = OAuthClientInformationFull(
                client_id=a.client_id,
                client_secret=a.client_secret,
                redirect_uris=[AnyUrl(u) for u in self.redirect_uris(a)],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method=metadata.token_endpoint_auth_method,
            )
        return CodeGrantProvider(
            self.url,
            metadata,
            self.credentials,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=a.client_metadata_url,
        )

    def ports(self, auth: Any) -> list[int]:
        """The loopback ports a browser login's listener may take, in order."""
        if auth.redirect_uri:
            return [urlsplit(auth.redirect_uri).port or 80]
        base = auth.callback_port or DEFAULT_CALLBACK_PORT
        return [p for p in range(base, base + 1 + EXTRA_PORTS) if p <= 65535]

    def redirect_uris(self, auth: Any, first: int | None = None) -> list[str]:
        """The redirect URIs a browser login registers, the one on port ``first`` first."""
        if auth.redirect_uri:
            return [auth.redirect_uri]
        ports = self.ports(auth)
        if first is not None:
            ports = [first, *(p for p in ports if p != first)]
        return [self.logins.redirect_uri(p, CALLBACK_PATH) for p in ports]

    def point(self, provider: CodeGrantProvider, auth: Any, port: int) -> None:
        """Have a browser login's ``provider`` send the person back to ``port`` first."""
        uris = self.redirect_uris(auth, port)
        provider.context.client_metadata.redirect_uris = [AnyUrl(u) for u in uris]

    def _machine_provider(
        self, a: Any, scope: str | None, secret_method: SecretMethod | None
    ) -> httpx2.Auth:
        """The SDK's client-credentials provider: with the client secret, or signing a
        private-key JWT with the key read when an assertion is made (a missing key file
        fails that server's authorization, saying which file)."""
        # Loaded only for the servers that use them (PyJWT): every command imports this.
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # no issuer configured
            if not a.private_key_file:
                return ClientCredentialsOAuthProvider(
                    self.url,
                    self.credentials,
                    a.client_id,
                    a.client_secret,
                    token_endpoint_auth_method=a.token_endpoint_auth_method
                    or secret_method
                    or "client_secret_basic",
                    scope=scope,
                    issuer=a.issuer,
                )
            base_dir = self.base_dir

            async def assertion(audience: str) -> str:
                key = read_secret(a.private_key_file, None, base_dir, "privateKeyFile")
                sign = SignedJWTParameters(
                    issuer=a.client_id,
                    subject=a.client_id,
                    signing_key=key,
                    signing_algorithm=a.signing_algorithm or "RS256",
                ).create_assertion_provider()
                return await sign(audience)

            return PrivateKeyJWTOAuthProvider(
                self.url, self.credentials, a.client_id, assertion, scope=scope, issuer=a.issuer
            )

    def _identity_assertion(
        self, a: Any, scope: str | None, secret_method: SecretMethod | None
    ) -> httpx2.Auth | None:
        """The SDK's SEP-990 provider, once its authorization server's issuer is known
        (configured, or discovered from the resource's metadata); ``None`` until then."""
        from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

        issuer = a.issuer or self.credentials.issuer
        if not issuer:
            return None
        base_dir, remember = self.base_dir, self.remember

        async def assertion(audience: str, resource: str) -> str:
            jag = await fetch_id_jag(a.idp, audience, resource, base_dir, remember)
            return jag

        self.credentials.issuer = issuer
        return IdentityAssertionOAuthProvider(
            self.url,
            self.credentials,
            a.client_id,
            a.client_secret,
            issuer,
            assertion,
            scope=scope,
            token_endpoint_auth_method=(
                a.token_endpoint_auth_method or secret_method or "client_secret_post"
            ),
        )

    def _workload_identity(
        self, a: Any, scope: str | None, secret_method: SecretMethod | None
    ) -> httpx2.Auth:
        """The jwt-bearer grant with the workload's own JWT (SEP-1933,
        :mod:`._workload`), read from its file or variable at each token request."""
        # Loaded only for the servers that use it (PyJWT): every command imports this.
        from ._workload import AssertionSource, WorkloadIdentityOAuthProvider

        if self._assertions is None:
            self._assertions = AssertionSource(
                a.assertion_file,
                a.assertion_env,
                self.base_dir,
                remember=self.remember,
                forget=self.forget,
            )
        secret = a.client_secret
        return WorkloadIdentityOAuthProvider(
            self.url,
            self.credentials,
            a.client_id,
            self._assertions,
            client_secret=secret,
            token_endpoint_auth_method=a.token_endpoint_auth_method
            or ((secret_method or "client_secret_basic") if secret else "none"),
            scope=scope,
            issuer=a.issuer,
        )
