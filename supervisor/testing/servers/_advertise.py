"""Declaring list changes in a fixture server's handshake: the SDK takes its
``NotificationOptions`` only as an argument of the low-level server's
``create_initialization_options()``, which every transport calls without arguments."""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

__all__ = ["advertise"]


def advertise(server: Server[Any], notifications: NotificationOptions) -> None:
    """Declare ``notifications`` (``listChanged``) in ``server``'s handshake: bound on this
    instance's ``create_initialization_options()``, which every transport calls without
    arguments."""
    create = server.create_initialization_options

    def create_initialization_options(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return create(notification_options or notifications, experimental_capabilities, extensions)

    server.create_initialization_options = create_initialization_options
