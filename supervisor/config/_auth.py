"""A remote server's ``auth`` object (``oauth`` as Claude Code and OpenCode spell it).

Its field names are the union of what the clients write (``clientId``, Cursor's
``CLIENT_ID``, OpenCode v2's ``client_id``, ``scope`` or ``scopes``); two spellings of
one field in the same object are an error. ``${...}`` is not expanded here.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ._model import AuthConfig, IdpConfig
from ._validate import (
    _as_fields,
    _Bad,
    _bool,
    _choice,
    _Errors,
    _fields,
    _int,
    _join,
    _nonempty,
    _object,
    _split_url,
    _str,
    _unknown_field,
    _want,
)

_GRANTS = ("authorization_code", "client_credentials", "identity_assertion", "workload_identity")
_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _scopes(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    _want(value, (list, tuple), "a string or an array of strings")
    assert isinstance(value, list | tuple)
    for item in value:
        if not isinstance(item, str) or not item or any(c.isspace() for c in item):
            raise _Bad("must be scopes without spaces")
    return tuple(value)


def _loopback_http(value: object) -> str:
    url = _str(value)
    parts = _split_url(url)
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK_HOSTS:
        raise _Bad("must be an http:// URL on a loopback host (127.0.0.1, localhost or [::1])")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise _Bad("has an invalid port") from None
    return url


def _metadata_url(value: object) -> str:
    url = _str(value)
    parts = _split_url(url)
    loopback = parts.hostname in _LOOPBACK_HOSTS
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
        raise _Bad("must be an https:// URL")
    return url


def _per_user(value: object) -> str | None:
    """``true`` (each user logs in), ``"token_exchange"`` (each user's token to the
    gateway traded for one of theirs, RFC 8693) or ``false``."""
    if value is True:
        return "login"
    if value is False:
        return None
    if value in ("token_exchange", "tokenExchange"):
        return "token_exchange"
    raise _Bad('must be true, false or "token_exchange"')


def _port(value: object) -> int:
    port = _int(value, minimum=1)
    if port > 65535:
        raise _Bad("must be a port number, 1-65535")
    return port


_AUTH_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "grant": ("grant", lambda v: _choice(v, _GRANTS)),
    "clientId": ("client_id", _nonempty),
    "CLIENT_ID": ("client_id", _nonempty),  # Cursor
    "client_id": ("client_id", _nonempty),  # OpenCode v2
    "clientSecret": ("client_secret", _nonempty),
    "CLIENT_SECRET": ("client_secret", _nonempty),
    "client_secret": ("client_secret", _nonempty),
    "clientSecretFile": ("client_secret_file", _nonempty),
    "clientSecretEnv": ("client_secret_env", _nonempty),
    "scopes": ("scopes", _scopes),
    "scope": ("scopes", _scopes),  # OpenCode
    "redirectUri": ("redirect_uri", _loopback_http),
    "callbackPort": ("callback_port", _port),
    "tokenEndpointAuthMethod": (
        "token_endpoint_auth_method",
        lambda v: _choice(v, _AUTH_METHODS),
    ),
    "authServerMetadataUrl": ("auth_server_metadata_url", _metadata_url),
    "clientName": ("client_name", _nonempty),
    "clientMetadataUrl": ("client_metadata_url", lambda v: _client_metadata_url(v)),
    "privateKeyFile": ("private_key_file", _nonempty),
    "signingAlgorithm": ("signing_algorithm", lambda v: _choice(v, _ALGORITHMS)),
    "account": ("account", _nonempty),
    "perUser": ("per_user", lambda v: _per_user(v)),
    "issuer": ("issuer", _metadata_url),
    "idp": ("idp", lambda v: v),  # an object, parsed by _parse_idp
    "dpop": ("dpop", _bool),
    "assertionFile": ("assertion_file", _nonempty),
    "assertionEnv": ("assertion_env", _nonempty),
}

_IDP_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "tokenEndpoint": ("token_endpoint", _metadata_url),
    "clientId": ("client_id", _nonempty),
    "clientSecretFile": ("client_secret_file", _nonempty),
    "clientSecretEnv": ("client_secret_env", _nonempty),
    "idTokenFile": ("id_token_file", _nonempty),
    "idTokenEnv": ("id_token_env", _nonempty),
    "tokenEndpointAuthMethod": (
        "token_endpoint_auth_method",
        lambda v: _choice(v, ("none", "client_secret_basic", "client_secret_post")),
    ),
}


def _client_metadata_url(value: object) -> str:
    url = _str(value)
    parts = _split_url(url)
    if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
        raise _Bad("must be an https:// URL with a path (a client ID metadata document)")
    return url


def _parse_idp(errors: _Errors, value: object, path: str) -> IdpConfig | None:
    mapping = _object(value, "an object")
    got: dict[str, object] = {}
    for key, item, p in _fields(errors, mapping, path):
        spec = _IDP_KEYS.get(key)
        if spec is None:
            if key in ("clientSecret", "idToken"):
                errors.add(
                    p,
                    f"is never written in the config: use {key}File or {key}Env (a file or "
                    "an environment variable that holds it)",
                )
            else:
                errors.add(p, _unknown_field(key, _IDP_KEYS))
            continue
        try:
            got[spec[0]] = spec[1](item)
        except _Bad as exc:
            errors.add(p, str(exc))
    present = set(mapping)
    missing = [k for k in ("tokenEndpoint", "clientId") if k not in present]
    for key in missing:
        errors.add(path, f'needs "{key}"')
    if sum(a in got for a in ("id_token_file", "id_token_env")) != 1 and not missing:
        errors.add(path, 'needs exactly one of "idTokenFile" and "idTokenEnv"')
    secrets = sum(a in got for a in ("client_secret_file", "client_secret_env"))
    method = got.get("token_endpoint_auth_method")
    if secrets > 1:
        errors.add(path, 'needs at most one of "clientSecretFile" and "clientSecretEnv"')
    elif secrets and method == "none":
        errors.add(
            path,
            'has a client secret, and tokenEndpointAuthMethod "none" (a public '
            "client, which has none): drop one of them",
        )
    elif not secrets and method not in (None, "none"):
        errors.add(
            path,
            f'tokenEndpointAuthMethod "{method}" needs "clientSecretFile" or '
            '"clientSecretEnv" (without them the client is a public one: "none")',
        )
    if missing or not {"token_endpoint", "client_id"} <= set(got):
        return None
    return IdpConfig(**_as_fields(got))


#: where a server's client secret may be given: one of them at most
_SECRET_SOURCES = ("client_secret", "client_secret_file", "client_secret_env")


def _parse_auth(errors: _Errors, value: object, path: str) -> AuthConfig | None:
    if isinstance(value, bool):
        return AuthConfig(enabled=value)
    mapping = _object(value, "true, false or an object")
    got: dict[str, object] = {}
    given: dict[str, str] = {}
    for key, item, p in _fields(errors, mapping, path):
        spec = _AUTH_KEYS.get(key)
        if spec is None:
            errors.add(p, _unknown_field(key, _AUTH_KEYS))
            continue
        attribute, parse = spec
        if attribute in given:
            errors.add(p, f'duplicates "{given[attribute]}"; set only one of them')
            continue
        given[attribute] = key
        if attribute != "idp" and isinstance(item, str) and ("${" in item or "{env:" in item):
            hint = " — name the variable: clientSecretEnv" if attribute == "client_secret" else ""
            errors.add(
                p,
                "${...} is not expanded here (only in command, args, env, envFile, cwd, url "
                f"and headers){hint}",
            )
            continue
        if attribute == "idp":
            try:
                idp = _parse_idp(errors, item, p)
            except _Bad as exc:
                errors.add(p, str(exc))
                continue
            if idp is not None:
                got["idp"] = idp
            continue
        try:
            got[attribute] = parse(item)
        except _Bad as exc:
            errors.add(p, str(exc))
    auth = AuthConfig(**_as_fields(got))
    secrets = [given[a] for a in _SECRET_SOURCES if a in given]
    if len(secrets) > 1:
        errors.add(path, f"sets {' and '.join(secrets)}: the client secret is given once")
    secret = bool(secrets)  # read once the config has loaded (see _build)
    if auth.grant == "client_credentials" and not (
        auth.client_id and (secret or auth.private_key_file)
    ):
        errors.add(
            path,
            "the client_credentials grant needs clientId, and clientSecret (or "
            "clientSecretFile, clientSecretEnv) or privateKeyFile",
        )
    if auth.grant == "identity_assertion":
        if not (auth.client_id and secret):
            errors.add(
                path,
                "the identity_assertion grant needs clientId and clientSecret (or "
                "clientSecretFile, clientSecretEnv)",
            )
        if "idp" not in given:
            errors.add(path, 'the identity_assertion grant needs "idp" (the identity provider)')
    if auth.private_key_file and secret:
        errors.add(
            _join(path, given["private_key_file"]),
            "is an alternative to clientSecret; set only one of them",
        )
    if auth.signing_algorithm and not auth.private_key_file:
        errors.add(_join(path, given["signing_algorithm"]), "needs privateKeyFile")
    _workload_rules(errors, auth, given, path, secret)
    if auth.per_user and auth.grant == "identity_assertion":
        errors.add(
            _join(path, given["per_user"]),
            "does not go with the identity_assertion grant (its tokens are those of the "
            "one user whose ID token it is given)",
        )
    if auth.per_user == "token_exchange" and not auth.client_id:
        errors.add(
            _join(path, given["per_user"]),
            '"token_exchange" needs clientId (and clientSecret for a confidential client): '
            "the gateway's client at the server's authorization server, which trades each "
            "caller's token for one of theirs",
        )
    if auth.dpop and auth.per_user == "token_exchange":
        errors.add(
            _join(path, given["dpop"]),
            'does not go with "perUser": "token_exchange" (the tokens it trades for are '
            "Bearer ones)",
        )
    if auth.redirect_uri and auth.callback_port:
        port = urlsplit(auth.redirect_uri).port
        if port is not None and port != auth.callback_port:
            errors.add(_join(path, given["callback_port"]), "does not match redirectUri's port")
    return auth


def _workload_rules(
    errors: _Errors, auth: AuthConfig, given: dict[str, str], path: str, secret: bool
) -> None:
    """The ``workload_identity`` grant (SEP-1933): ``clientId``, and the workload's JWT
    from exactly one of ``assertionFile`` and ``assertionEnv`` — which no other grant
    takes; a client secret may authenticate the client, a private key may not."""
    sources = [given[a] for a in ("assertion_file", "assertion_env") if a in given]
    if auth.grant != "workload_identity":
        for key in sources:
            errors.add(
                _join(path, key),
                'is for the workload_identity grant only ("grant": "workload_identity")',
            )
        return
    if not auth.client_id:
        errors.add(
            path,
            "the workload_identity grant needs clientId (the client the "
            "authorization server knows the workload as)",
        )
    if not sources:
        errors.add(
            path,
            "the workload_identity grant needs assertionFile or assertionEnv "
            "(where the workload's JWT is)",
        )
    elif len(sources) > 1:
        errors.add(
            path, "sets assertionFile and assertionEnv: the workload's JWT is read from one of them"
        )
    for attribute in ("private_key_file", "idp", "per_user"):
        if attribute in given:
            errors.add(_join(path, given[attribute]), _NOT_WITH_WORKLOAD[attribute])
    if secret and auth.token_endpoint_auth_method == "none":
        errors.add(
            _join(path, given["token_endpoint_auth_method"]),
            'is "none" (a public client), and a client secret is given: drop one of them',
        )


_NOT_WITH_WORKLOAD = {
    "private_key_file": "does not go with the workload_identity grant (the workload's JWT "
    "is the grant; a client secret, if the authorization server wants one, authenticates "
    "the client)",
    "idp": "is for the identity_assertion grant; the workload_identity grant needs no "
    "identity provider (the workload's own JWT is the grant)",
    "per_user": "does not go with the workload_identity grant (its tokens are the "
    "workload's own, not each caller's)",
}
