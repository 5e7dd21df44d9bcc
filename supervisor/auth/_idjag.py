"""Enterprise-managed authorization (SEP-990, cross-app access): the enterprise side.

The MCP authorization server's half (the RFC 7523 jwt-bearer grant) is the SDK's
``IdentityAssertionOAuthProvider``; the SDK leaves obtaining the Identity Assertion JWT
Authorization Grant (ID-JAG) to the caller. This module does it: an RFC 8693 token
exchange at the enterprise IdP's token endpoint, trading the user's ID token for an
ID-JAG whose audience is the MCP authorization server and whose resource is the MCP
server. The IdP client's secret and the user's ID token come from a file or an
environment variable, never from the config itself, and both are registered with the log
redactor as soon as they are read. An IdP client without a secret is a public one: it
names itself by its ``client_id`` in the request (RFC 6749 §2.3, method ``none``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.auth.exceptions import OAuthTokenError
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_protected_resource_response,
)

from .._util._secrets import read_secret as _read_secret

__all__ = ["ID_JAG", "TOKEN_EXCHANGE", "discover_issuer", "fetch_id_jag", "read_secret"]

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


def read_secret(file: str | None, env: str | None, base_dir: Path | None, what: str) -> str:
    """:func:`supervisor._util._secrets.read_secret`, its failure an OAuth flow's error."""
    try:
        return _read_secret(file, env, base_dir, what)
    except ValueError as exc:
        raise OAuthTokenError(str(exc)) from None


async def discover_issuer(http: httpx2.AsyncClient, url: str, challenge: Any = None) -> str | None:
    """The first authorization server named by ``url``'s protected-resource metadata
    (RFC 9728: the challenge's ``resource_metadata`` hint, then the well-known URLs)."""
    hint = None
    if challenge is not None and challenge.www_authenticate:
        probe = httpx2.Response(401, headers={"www-authenticate": challenge.www_authenticate})
        hint = extract_resource_metadata_from_www_auth(probe)
    for candidate in build_protected_resource_metadata_discovery_urls(hint, url):
        response = await http.send(create_oauth_metadata_request(candidate))
        await response.aread()
        metadata = await handle_protected_resource_response(response)
        if metadata is not None and metadata.authorization_servers:
            return str(metadata.authorization_servers[0])
    return None


async def fetch_id_jag(
    idp: Any,  # supervisor.config.IdpConfig
    audience: str,
    resource: str,
    base_dir: Path | None,
    remember: Callable[[str], None],
) -> str:
    """Exchange the user's ID token at the IdP for an ID-JAG (RFC 8693, SEP-990)."""
    if idp is None:
        raise OAuthTokenError('the identity_assertion grant needs "idp" in the server\'s auth')
    secret = None  # a public client has none: it names itself by client_id alone
    if idp.client_secret_file or idp.client_secret_env:
        secret = read_secret(
            idp.client_secret_file, idp.client_secret_env, base_dir, "idp client secret"
        )
        remember(secret)
    id_token = read_secret(idp.id_token_file, idp.id_token_env, base_dir, "the user's ID token")
    remember(id_token)
    data = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN,
        "audience": audience,
        "resource": resource,
    }
    auth: tuple[str, str] | None = None
    if secret is None:
        data["client_id"] = idp.client_id
    elif idp.token_endpoint_auth_method == "client_secret_post":
        data |= {"client_id": idp.client_id, "client_secret": secret}
    else:
        auth = (idp.client_id, secret)
    async with httpx2.AsyncClient(timeout=30.0) as http:
        response = await http.post(
            idp.token_endpoint,
            data=data,
            auth=httpx2.USE_CLIENT_DEFAULT if auth is None else auth,  # the client's: none
        )
    if response.status_code != 200:
        raise OAuthTokenError(
            f"the identity provider refused the token exchange ({response.status_code}): "
            f"{response.text[:500]}"
        )
    try:
        body = response.json()
        token = body["access_token"]
    except (ValueError, KeyError, TypeError):
        raise OAuthTokenError("the identity provider's answer has no access_token") from None
    issued = body.get("issued_token_type")
    if issued != ID_JAG:
        raise OAuthTokenError(
            f"the identity provider issued a {issued!r} token, not an ID-JAG ({ID_JAG})"
        )
    remember(token)
    return str(token)
