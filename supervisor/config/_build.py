"""The last step of loading one server: its draft's templates expanded, into a
:class:`~supervisor.config.ServerConfig`."""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType

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

    auth = v.get("auth")
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
        auth=auth,  # type: ignore[arg-type]
        protocol=v.get("protocol", "auto"),  # type: ignore[arg-type]
        prefix=str(v.get("prefix", draft.name)),
        description=v.get("description"),  # type: ignore[arg-type]
        disabled=bool(v.get("disabled", False)),
        lazy=bool(v.get("lazy", True)),
        required=bool(v.get("required", False)),
        timeout=float(v.get("timeout", settings.request_timeout)),  # type: ignore[arg-type]
        init_timeout=float(v.get("init_timeout", settings.init_timeout)),  # type: ignore[arg-type]
        ping_interval=float(v.get("ping_interval", settings.ping_interval)),  # type: ignore[arg-type]
        degraded_after=int(v.get("degraded_after", 3)),  # type: ignore[call-overload]
        backoff=draft.backoff,
        max_attempts=draft.max_attempts,
        restart=v.get("restart", Restart.PERMANENT),  # type: ignore[arg-type]
        give_up=v.get("give_up", GiveUp.MARK_UNAVAILABLE),  # type: ignore[arg-type]
        shutdown_timeout=float(v.get("shutdown_timeout", 10.0)),  # type: ignore[arg-type]
        max_concurrent_calls=v.get("max_concurrent_calls"),  # type: ignore[arg-type]
        rate_limit=v.get("rate_limit"),  # type: ignore[arg-type]
        approve=v.get("approve"),  # type: ignore[arg-type]
        auto_approve=v.get("auto_approve"),  # type: ignore[arg-type]
        faults=v.get("faults"),  # type: ignore[arg-type]
        resources=v.get("resources"),  # type: ignore[arg-type]
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
