"""OAuth for remote MCP servers: the SDK's providers, one token broker per resource ×
account, private storage, browser logins through one loopback listener (docs/auth.md).

- :class:`AuthStore` / :class:`Credentials` — ``~/.mcp-supervisor/auth``: 0700
  directories, 0600 files written atomically, tokens and client registrations apart;
- :class:`TokenBroker` — tokens for the connections, renewed once for everyone who
  waits, refreshed before expiry, a failed refresh leading to a new authorization;
- :class:`Logins` — the loopback callback listener, routing answers by ``state``;
- :class:`AuthService` — the brokers of one supervisor, made from its config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._broker import AuthProblem as AuthProblem
    from ._broker import BrokerAuth as BrokerAuth
    from ._broker import BrokerInfo as BrokerInfo
    from ._broker import TokenBroker as TokenBroker
    from ._login import DEFAULT_CALLBACK_PORT as DEFAULT_CALLBACK_PORT
    from ._login import CallbackHandler as CallbackHandler
    from ._login import Logins as Logins
    from ._login import RedirectHandler as RedirectHandler
    from ._login import default_redirect_handler as default_redirect_handler
    from ._service import AuthService as AuthService
    from ._service import uses_oauth as uses_oauth
    from ._store import ENV_AUTH_DIR as ENV_AUTH_DIR
    from ._store import AuthStore as AuthStore
    from ._store import Credentials as Credentials
    from ._store import default_auth_dir as default_auth_dir

__getattr__, __dir__ = attach(__name__)
