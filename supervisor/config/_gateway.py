"""The ``supervisor.gateway`` section: the HTTP gateway as a team's OAuth resource server
(``auth``) and who may use what through it (``policy``); docs/gateway.md, "A gateway for a
team". And ``supervisor.tokenStore``, where the credentials replicas share are kept."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import cast

from ._auth import _metadata_url, _scopes
from ._model import (
    GatewayAuth,
    GatewaySettings,
    IntrospectionSettings,
    PolicyRule,
    SignInSettings,
    TokenStoreSettings,
)
from ._rates import parse_rate
from ._secrets import database_url_secrets
from ._validate import (
    _as_fields,
    _Bad,
    _Errors,
    _join,
    _nonempty,
    _number,
    _parse_object,
    _split_url,
    _want,
)


def _id(value: object) -> object:
    return value


def _resource(value: object) -> str:
    """The gateway's resource URL: an https:// URL (http:// on a loopback host), no
    fragment, no query (RFC 8707 §2)."""
    url = _metadata_url(value)
    parts = _split_url(url)
    if parts.fragment or parts.query:
        raise _Bad("must have no query and no fragment (RFC 8707)")
    return url


def _names(value: object) -> tuple[str, ...]:
    _want(value, list, "an array of strings")
    assert isinstance(value, list)
    if not all(isinstance(item, str) and item for item in value):
        raise _Bad("must be an array of non-empty strings")
    return tuple(value)


def _claim(value: object) -> str:
    text = _nonempty(value)
    assert isinstance(text, str)
    return text


def _parse_gateway(errors: _Errors, value: object, path: str) -> GatewaySettings | None:
    got = _parse_object(
        errors,
        value,
        path,
        {"auth": _id, "policy": _id, "keyFile": _nonempty, "keyEnv": _nonempty},
    )
    if got is None:
        return None
    if "keyFile" in got and "keyEnv" in got:
        errors.add(path, 'needs at most one of "keyFile" and "keyEnv"')
    auth = _parse_gateway_auth(errors, got["auth"], _join(path, "auth")) if "auth" in got else None
    policy = None
    if "policy" in got:
        policy = _parse_policy(errors, got["policy"], _join(path, "policy"))
        if auth is None and "auth" not in got:
            errors.add(
                _join(path, "policy"),
                'needs "auth" beside it: a policy is by caller, and without OAuth every '
                "caller of the gateway is the one holder of its token",
            )
    return GatewaySettings(
        auth=auth,
        policy=policy,
        key_file=cast("str | None", got.get("keyFile")),  # _nonempty's
        key_env=cast("str | None", got.get("keyEnv")),
    )


_AUTH_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "issuer": ("issuer", _metadata_url),
    "resource": ("resource", _resource),
    "jwksUrl": ("jwks_url", _metadata_url),
    "scopes": ("scopes", _scopes),
    "groupsClaim": ("groups_claim", _claim),
    "introspection": ("introspection", _id),
    "signIn": ("sign_in", _id),
}


def _keyed(
    errors: _Errors,
    value: object,
    path: str,
    keys: dict[str, tuple[str, Callable[[object], object]]],
    never: str | None = None,
) -> tuple[Mapping[str, object], dict[str, object]] | None:
    """The object ``value`` (``None`` if it is not one) and its fields parsed by ``keys``
    (config name → attribute, parser) with :func:`_parse_object`, under their
    attributes' names; ``never``: a field that must not be written in a config (a
    secret: its file or variable is)."""
    parsers = {name: parse for name, (_, parse) in keys.items()}
    if never is not None:
        parsers[never] = partial(_never, never)
    got = _parse_object(errors, value, path, parsers)
    if got is None:
        return None
    assert isinstance(value, Mapping)
    return value, {keys[name][0]: item for name, item in got.items()}


def _never(name: str, value: object) -> object:
    raise _Bad(
        f"is never written in the config: use {name}File or {name}Env (a file or an "
        "environment variable that holds it)"
    )


def _parse_gateway_auth(errors: _Errors, value: object, path: str) -> GatewayAuth | None:
    parsed = _keyed(errors, value, path, _AUTH_KEYS)
    if parsed is None:
        return None
    mapping, got = parsed
    for key in ("issuer", "resource"):
        if key not in mapping:
            what = (
                "the authorization server whose access tokens the gateway takes"
                if key == "issuer"
                else "the MCP endpoint's URL as the gateway's clients reach it (the "
                "tokens' audience)"
            )
            errors.add(path, f'needs "{key}": {what}')
    if "introspection" in got and "jwks_url" in got:
        errors.add(path, 'has "jwksUrl" and "introspection": tokens are checked one way')
    for attribute, name, parse in (
        ("introspection", "introspection", _parse_introspection),
        ("sign_in", "signIn", _parse_sign_in),
    ):
        if attribute in got:  # an object of its own, parsed by its own keys
            inner = parse(errors, got[attribute], _join(path, name))
            if inner is None:
                del got[attribute]
            else:
                got[attribute] = inner
    if not {"issuer", "resource"} <= set(got):
        return None
    return GatewayAuth(**_as_fields(got))


_SIGN_IN_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "clientId": ("client_id", _nonempty),
    "clientSecretFile": ("client_secret_file", _nonempty),
    "clientSecretEnv": ("client_secret_env", _nonempty),
}


def _parse_sign_in(errors: _Errors, value: object, path: str) -> SignInSettings | None:
    parsed = _keyed(errors, value, path, _SIGN_IN_KEYS, never="clientSecret")
    if parsed is None:
        return None
    mapping, got = parsed
    if "clientId" not in mapping:
        errors.add(
            path, "needs \"clientId\": the gateway's client at the team's authorization server"
        )
    if sum(k in mapping for k in ("clientSecretFile", "clientSecretEnv")) > 1:
        errors.add(path, 'needs at most one of "clientSecretFile" and "clientSecretEnv"')
    if "client_id" not in got:
        return None
    return SignInSettings(**_as_fields(got))


_INTROSPECTION_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "endpoint": ("endpoint", _metadata_url),
    "clientId": ("client_id", _nonempty),
    "clientSecretFile": ("client_secret_file", _nonempty),
    "clientSecretEnv": ("client_secret_env", _nonempty),
    "cacheSeconds": ("cache_seconds", lambda v: _number(v, inclusive=True)),
}


def _parse_introspection(errors: _Errors, value: object, path: str) -> IntrospectionSettings | None:
    parsed = _keyed(errors, value, path, _INTROSPECTION_KEYS, never="clientSecret")
    if parsed is None:
        return None
    mapping, got = parsed
    missing = [k for k in ("endpoint", "clientId") if k not in mapping]
    for key in missing:
        errors.add(path, f'needs "{key}"')
    if sum(k in mapping for k in ("clientSecretFile", "clientSecretEnv")) != 1:
        errors.add(
            path,
            'needs exactly one of "clientSecretFile" and "clientSecretEnv": the gateway '
            "authenticates at the introspection endpoint",
        )
    if not {"endpoint", "client_id"} <= set(got):
        return None
    return IntrospectionSettings(**_as_fields(got))


def _rate(value: object) -> str:
    try:
        return parse_rate(value).text
    except ValueError as exc:
        raise _Bad(str(exc)) from None


_RULE_KEYS = {
    "subjects": _names,
    "groups": _names,
    "servers": _names,
    "tools": _names,
    "rateLimit": _rate,
}


def _parse_policy(errors: _Errors, value: object, path: str) -> tuple[PolicyRule, ...] | None:
    if not isinstance(value, list):
        errors.add(
            path, "must be an array of rules ({subjects, groups, servers, tools, rateLimit})"
        )
        return None
    rules: list[PolicyRule] = []
    for index, item in enumerate(value):
        got = _parse_object(errors, item, _join(path, index), _RULE_KEYS)
        if got is not None:
            if "rateLimit" in got:
                got["rate_limit"] = got.pop("rateLimit")
            rules.append(PolicyRule(**_as_fields(got)))
    return tuple(rules)


def _database_url(value: object) -> str:
    url = _nonempty(value)
    assert isinstance(url, str)
    parts = _split_url(url)
    if parts.scheme == "sqlite":
        if not sqlite_path(url):
            raise _Bad("names no file: sqlite:///absolute/path or sqlite:relative/path")
        return url
    if parts.scheme not in ("postgresql", "postgres"):
        raise _Bad("must be a postgresql:// URL, or sqlite: and a file's path")
    # as libpq reads it: a password in the user-info, or in the query (percent-escaped too)
    secrets = database_url_secrets(url)
    if parts.password is not None or {"user-info", "password"} & set(secrets):
        which = "" if parts.password is not None or "user-info" in secrets else " (password=)"
        raise _Bad(
            f"has a password in it{which}: give it in $PGPASSWORD or ~/.pgpass, where "
            "libpq finds it, not in the config"
        )
    if "sslpassword" in secrets:
        raise _Bad(
            "has a password in it (sslpassword=, the client key's): give it in a "
            "connection service file (~/.pg_service.conf, named by service= in the URL), "
            "where libpq finds it, not in the config"
        )
    return url


_STORE_KEYS: dict[str, tuple[str, Callable[[object], object]]] = {
    "url": ("url", _database_url),
    "keyFile": ("key_file", _nonempty),
    "keyEnv": ("key_env", _nonempty),
}


def _parse_token_store(errors: _Errors, value: object, path: str) -> TokenStoreSettings | None:
    """``supervisor.tokenStore``: a PostgreSQL URL (or a SQLite file's) and the key
    values are sealed with (optional for SQLite)."""
    parsed = _keyed(errors, value, path, _STORE_KEYS)
    if parsed is None:
        return None
    mapping, got = parsed
    if "url" not in mapping:
        errors.add(path, 'needs "url": the PostgreSQL database the credentials are kept in')
    keys = sum(k in mapping for k in ("keyFile", "keyEnv"))
    sqlite = str(got.get("url", "")).startswith("sqlite:")
    if keys > 1 or (keys == 0 and not sqlite):
        errors.add(
            path,
            f'needs {"at most" if sqlite else "exactly"} one of "keyFile" and "keyEnv": '
            "the key the credentials are sealed with in the database",
        )
    if "url" not in got:
        return None
    return TokenStoreSettings(**_as_fields(got))


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:`` URL: ``sqlite:///abs/path`` or ``sqlite:rel/path``."""
    rest = url.removeprefix("sqlite:")
    return "/" + rest[3:].lstrip("/") if rest.startswith("///") else rest.removeprefix("//")
