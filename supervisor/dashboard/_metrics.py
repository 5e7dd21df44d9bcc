"""``GET /metrics``: the monitor's Prometheus exposition of ``SupervisorHandle.metrics()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..monitor import prometheus_text

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["CONTENT_TYPE", "render_metrics"]

#: The Prometheus text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render_metrics(sup: SupervisorHandle) -> str:
    """Every server's metrics (see docs/monitoring.md for the families)."""
    return prometheus_text(sup.metrics())
