"""The last step of loading one server: its draft's templates expanded, into a
:class:`~supervisor.config.ServerConfig`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import msgspec

from .._util._files import SECRETS_DIR
from .._util._secrets import read_secret
from ..actors import GiveUp, Restart
from ..errors import FieldError
from ._expand import _Expander, _keys, _read_env_file
from ._model import AuthConfig, IncludedFile, SandboxConfig, ServerConfig, Settings
from ._server import SANDBOX_PATHS, _Draft
from ._validate import _join, _url_problem


def _build_server(
    draft: _Draft, settings: Settings, expander: _Expander, base: Path, limit: int
) -> ServerConfig:
    """The final :class:`ServerConfig` of a structurally valid server: templates expanded,
    the ``envFile`` read (and recorded with the draft's fault plan file in ``included``),
    paths resolved against ``base``, defaults from ``settings``."""
    v = draft.values
    # the same, to hand on: each value as _Draft parsed it, of its field's type (or absent)
    parsed = cast("Mapping[str, Any]", v)
    problems: list[FieldError] = []
    secrets: list[str] = []  # what secret-named ${VAR} references expanded to

    def expand(attribute: str) -> list[str]:
        opencode = draft.style == "mcp"
        return [
            expander.expand(t, p, problems, opencode, secrets)
            for p, t in draft.templates(attribute)
        ]

    def expanded(attribute: str) -> str | None:
        """The one string of a field, or ``None`` if absent or not expandable."""
        if attribute not in v:
            return None
        before = len(problems)
        (text,) = expand(attribute)
        return text if len(problems) == before else None

    command_words = expand("command")
    args = tuple(command_words[1:] + expand("args"))
    env: dict[str, str] = {}
    included = list(draft.included)
    env_file = expanded("env_file")
    if env_file is not None:
        field = draft.key_path("env_file")
        read, sha256 = _read_env_file(base / env_file, field, limit, problems)
        env.update(read)
        if (base / env_file).parent.name == SECRETS_DIR:  # what `add --env KEY` asked for
            secrets += read.values()
        included.append(
            IncludedFile(field=field, name=env_file, path=base / env_file, sha256=sha256)
        )
    env.update(zip(_keys(v.get("env")), expand("env"), strict=True))
    headers = dict(zip(_keys(v.get("headers")), expand("headers"), strict=True))
    for name, value in headers.items():
        if any(c in value for c in "\r\n\x00"):
            problem = "header value contains a line break or NUL"
            problems.append(FieldError(_join(draft.key_path("headers"), name), problem))
    cwd = expanded("cwd")
    if cwd is None and "cwd" in v:
        cwd = str(v["cwd"])  # not expandable: keep the template
    url = expanded("url")
    if url is not None:
        problem = _url_problem(url, draft.type)
        if problem:
            problems.append(FieldError(draft.key_path("url"), problem))
    elif "url" in v:
        url = str(v["url"])

    auth: AuthConfig | None = parsed.get("auth")
    if isinstance(auth, AuthConfig) and (auth.client_secret_file or auth.client_secret_env):
        key = "clientSecretFile" if auth.client_secret_file else "clientSecretEnv"
        try:
            secret = read_secret(
                auth.client_secret_file,
                auth.client_secret_env,
                base,
                "the client secret",
                environ=expander.environ,
            )
        except ValueError as exc:
            problems.append(FieldError(_join(draft.key_path("auth"), key), str(exc)))
        else:
            auth = msgspec.structs.replace(auth, client_secret=secret)

    return ServerConfig(
        name=draft.name,
        path=draft.path,
        type=draft.type,
        remote_fallback=draft.remote_fallback,
        command=command_words[0] if command_words else None,
        args=args,
        env=MappingProxyType(env),
        cwd=None if cwd is None else base / cwd,
        inherit_env=bool(v.get("inherit_env", False)),
        url=url,
        headers=MappingProxyType(headers),
        auth=auth,
        protocol=parsed.get("protocol", "auto"),
        prefix=str(v.get("prefix", draft.name)),
        description=parsed.get("description"),
        disabled=bool(v.get("disabled", False)),
        lazy=bool(v.get("lazy", True)),
        required=bool(v.get("required", False)),
        timeout=float(parsed.get("timeout", settings.request_timeout)),
        init_timeout=float(parsed.get("init_timeout", settings.init_timeout)),
        ping_interval=float(parsed.get("ping_interval", settings.ping_interval)),
        degraded_after=int(parsed.get("degraded_after", 3)),
        backoff=draft.backoff,
        max_attempts=draft.max_attempts,
        restart=parsed.get("restart", Restart.PERMANENT),
        give_up=parsed.get("give_up", GiveUp.MARK_UNAVAILABLE),
        shutdown_timeout=float(parsed.get("shutdown_timeout", 10.0)),
        max_concurrent_calls=parsed.get("max_concurrent_calls"),
        rate_limit=parsed.get("rate_limit"),
        approve=parsed.get("approve"),
        auto_approve=parsed.get("auto_approve"),
        faults=parsed.get("faults"),
        resources=parsed.get("resources"),
        sandbox=_sandbox(draft, expander, base, problems, secrets),
        included=tuple(included),
        secret_values=tuple(dict.fromkeys(s for s in secrets if s)),
        errors=tuple(problems),
    )


def _sandbox(
    draft: _Draft, expander: _Expander, base: Path, problems: list[FieldError], secrets: list[str]
) -> SandboxConfig | None:
    """The server's sandbox, when ``sandboxEnabled`` is true (as in VS Code, ``sandbox``
    applies only then): its paths expanded (``${workspaceFolder}``, ``${userHome}``,
    ``${VAR}``; a leading ``~``) and resolved against ``base``; ``None`` otherwise."""
    v = draft.values
    if v.get("sandbox_enabled") is not True:
        return None
    raw = v.get("sandbox") or {}
    assert isinstance(raw, dict)
    where = _join(draft.key_path("sandbox"), "filesystem")
    paths: dict[str, tuple[Path, ...]] = {}
    for key in SANDBOX_PATHS:
        found: list[Path] = []
        for i, template in enumerate(raw.get(key, ())):
            before = len(problems)
            text = expander.expand(
                template, _join(_join(where, key), i), problems, draft.style == "mcp", secrets
            )
            if len(problems) != before:
                continue  # reported: the server is invalid
            if text == "~" or text.startswith("~/"):
                text = str(Path.home()) + text[1:]
            found.append(Path(os.path.normpath(base / text)))
        paths[key] = tuple(dict.fromkeys(found))
    return SandboxConfig(
        allow_write=paths["allowWrite"],
        deny_read=paths["denyRead"],
        deny_write=paths["denyWrite"],
        allowed_domains=tuple(dict.fromkeys(d.lower() for d in raw.get("allowedDomains", ()))),
        denied_domains=tuple(dict.fromkeys(d.lower() for d in raw.get("deniedDomains", ()))),
    )
