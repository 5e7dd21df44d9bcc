"""In-process servers (``open_supervisor(apps=...)``) as configured servers of type
``memory``: each gets a local server's defaults from the config's ``supervisor`` section.

They are never read from a config file (``"type": "memory"`` is refused there): the
server object lives in the embedder's process, and the supervisor connects to it through
the SDK's in-memory transport — a fresh connection to the same object on each restart.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ..errors import ConfigError, FieldError
from ._model import Config, ServerConfig, ServerType, Settings
from ._server import _NAME


def app_name(app: object) -> str:
    """What an in-process server calls itself (its ``name``), else its class's name."""
    name = getattr(app, "name", None)
    return name if isinstance(name, str) and name else type(app).__name__


def app_server(name: str, app: object, settings: Settings) -> ServerConfig:
    """The config of the in-process server ``app`` supervised as ``name``: a local
    server's defaults (timeouts, pings, backoff, attempts) from ``settings``, the prefix
    ``name``, and its tools auto-approved — it is the embedder's own code (a tool that
    looks destructive still asks, as for every server)."""
    return ServerConfig(
        name=name,
        path=f"apps.{name}",
        type=ServerType.MEMORY,
        prefix=name,
        timeout=settings.request_timeout,
        init_timeout=settings.init_timeout,
        ping_interval=settings.ping_interval,
        backoff=settings.local_backoff,
        max_attempts=settings.local_max_attempts,
        auto_approve=True,
        app=app,
    )


def with_apps(config: Config, apps: Mapping[str, object]) -> Config:
    """``config`` with the in-process servers ``apps`` added after its own servers.

    Raises :class:`~supervisor.errors.ConfigError` naming ``apps.<name>`` for a name that
    is not a valid server name or that a configured server has already, and
    :class:`TypeError` for a value that is not an MCP server
    (:class:`mcp.server.mcpserver.MCPServer` or a low-level :class:`mcp.server.Server`).
    """
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    servers = dict(config.servers)
    problems: list[FieldError] = []
    for name, app in apps.items():
        path = f"apps.{name}"
        if not isinstance(app, MCPServer | Server):
            raise TypeError(
                f"{path}: an in-process server must be an mcp.server.mcpserver.MCPServer or "
                f"a low-level mcp.server.Server, not {type(app).__name__}"
            )
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(
                FieldError(
                    path,
                    "invalid server name: use 1-64 letters, digits, '_', '-' or '.', "
                    "starting with a letter or digit",
                )
            )
        elif name in servers:
            problems.append(
                FieldError(
                    path,
                    f"the config has a server named {name!r} already ({servers[name].path}); "
                    "give the in-process server another name",
                )
            )
        else:
            servers[name] = app_server(name, app, config.settings)
    if problems:
        raise ConfigError(problems)
    return msgspec.structs.replace(config, servers=servers)
