"""OAuth for remote MCP servers: the SDK's providers, one token broker per resource ×
account, private storage, browser logins through one loopback listener (docs/auth.md).

- ``AuthStore`` / ``Credentials`` — ``~/.mcp-supervisor/auth``: 0700
  directories, 0600 files written atomically, tokens and client registrations apart;
- ``TokenBroker`` — tokens for the connections, renewed once for everyone who
  waits, refreshed before expiry, a failed refresh leading to a new authorization;
- ``Logins`` — the loopback callback listener, routing answers by ``state``;
- ``AuthService`` — the brokers of one supervisor, made from its config;
- ``FileStore`` / ``PostgresStore`` / ``SQLiteStore`` — where the brokers keep tokens:
  the auth directory, or a database replicas share (``supervisor.tokenStore``), values
  sealed at rest, one refresh at a time per account (``_backends``).

Its Python names are private: docs/auth.md documents the ``auth`` config and the
``mcp-supervisor auth`` commands. The supervisor imports each from its module (``_store``,
``_broker``, ``_login``, ``_service``, ``_backends``).
"""
