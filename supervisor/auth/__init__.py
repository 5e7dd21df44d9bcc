"""OAuth for remote MCP servers: the SDK's providers, one token broker per resource ×
account, private storage, browser logins through one loopback listener (docs/auth.md).

- ``LocalStore`` / ``Credentials`` — ``~/.mcp-supervisor/auth/tokens.db`` (0600 in a 0700
  directory), tokens and client registrations apart; ``AuthStore`` — the files earlier
  versions kept there, taken in at the first start;
- ``TokenBroker`` — tokens for the connections, renewed once for everyone who
  waits, refreshed before expiry, a failed refresh leading to a new authorization;
- ``Logins`` — the loopback callback listener, routing answers by ``state``;
- ``AuthService`` — the brokers of one supervisor, made from its config;
- ``PostgresStore`` / ``SQLiteStore`` / ``FileStore`` — where the brokers keep tokens: a
  database replicas share (``supervisor.tokenStore``), values sealed at rest, one
  refresh at a time per account (``_backends``); the files, for an embedder's own;
- ``UserLogins`` — each team-gateway caller's own logins to the ``perUser`` servers, and
  their tokens traded by token exchange (``_users``).

Its Python names are private: docs/auth.md documents the ``auth`` config and the
``mcp-supervisor auth`` commands. The supervisor imports each from its module (``_store``,
``_broker``, ``_login``, ``_service``, ``_backends``, ``_users``).
"""
