"""Config: one JSON file (or mapping) describing the MCP servers and the supervisor.

:func:`load_config` reads the file, validates every field in one pass, expands ``${VAR}``
references and returns a frozen :class:`Config`. The formats other tools write are read as
they are, detected by their top-level key:

- ``mcpServers`` — Claude Code (``.mcp.json``), Cursor (``.cursor/mcp.json``), Claude
  Desktop and most clients;
- ``mcp`` — OpenCode (``opencode.json``): ``type: local|remote``, ``command`` as an array,
  ``environment``, ``enabled``, ``timeout`` in milliseconds; also the nested
  ``mcp.servers`` form (OpenCode v2, VS Code ``settings.json``);
- ``servers`` — VS Code (``.vscode/mcp.json``), whose top-level ``inputs`` are ignored;

plus our own ``supervisor`` section. Several server sections in one file are merged; a
name defined twice is an error naming both places. A client's other top-level keys
(Claude Desktop's ``preferences``, say) are its own and are ignored; unknown keys inside a
server entry or the ``supervisor`` section are errors, suggesting a close known name.

Two kinds of problem are told apart:

- **structural** ones (unknown fields, wrong types, bad values, malformed ``${...}``) make
  :func:`load_config` raise :class:`~supervisor.errors.ConfigError` listing all of them
  (``_load.inspect_config`` returns them instead, beside the servers without one, loaded:
  what ``check`` reports);
- **environmental** ones (an environment variable that is not set, a VS Code
  ``${input:...}``, an ``envFile`` that cannot be read, a URL that only turns bad once
  expanded) make *that server* invalid: it is still in :attr:`Config.servers`, with
  :attr:`ServerConfig.errors` saying why, and the other servers are unaffected.

No error message ever contains the value of a variable, an ``env`` entry or a header.
Values that look secret are listed by :meth:`Config.secrets`: a supervisor running the config
holds them with :func:`supervisor.log.redacting` while it runs, so logs never show them, and
``repr()`` of a config masks them.

docs/config.md describes every field.

This package is a façade over focused private modules:

- ``_model`` — the frozen values: :class:`Config`, :class:`ServerConfig`, ``Settings``,
  ``AuthConfig``, :class:`ServerType` and the sections' own;
- ``_limits`` — the bounds on what a config and its servers may hold, and their
  defaults (``Limits``, read as ``config.settings.limits``);
- ``_load`` — :func:`load_config`: reading the file (size limit, JSONC), the two phases;
- ``_formats`` — the top level: which client format, where the servers are;
- ``_server`` — one server entry, field by field, before expansion;
- ``_build`` — the last step of one server: its templates expanded, its
  :class:`ServerConfig` made;
- ``_auth`` — a server's ``auth`` (``oauth``) object;
- ``_faults`` — a server's ``faults`` plan;
- ``_plan`` — the fault plan language: a plan parsed and checked, ``PlanError``;
- ``_apps`` — in-process servers (``open_supervisor(apps=...)``) as ``memory`` servers;
- ``_settings`` — the ``supervisor`` section and backoff fields;
- ``_gateway`` — the ``supervisor.gateway`` section (a team's resource server, its policy);
- ``_rates`` — a rate as the config writes it (``"10/s"``);
- ``_validate`` — a config's field checks and error collection;
- ``_fields`` — the single-field checks and field paths the config and the fault plans
  share;
- ``_expand`` — ``${VAR}`` expansion, ``envFile`` files;
- ``_secrets`` — what counts as secret, and masked display (``masked_url``,
  ``command_line``);
- ``_diff`` — two configs compared: what a reconfiguration has to do, server by server;
- ``_edit`` — a config file's text edited in place (``add``, ``remove``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ..errors import ConfigError as ConfigError
    from ..errors import FieldError as FieldError
    from ._load import load_config as load_config
    from ._model import Config as Config
    from ._model import ServerConfig as ServerConfig
    from ._model import ServerType as ServerType

__getattr__, __dir__ = attach(__name__)
