"""A secret the config names by where it is — a file or an environment variable — read
when it is needed, never from the config itself."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["read_secret"]


def read_secret(
    file: str | None,
    env: str | None,
    base_dir: Path | None,
    what: str,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The secret in ``file`` (``~`` expanded; relative to ``base_dir``, the config's
    directory) or in the environment variable ``env`` (of ``environ``, default the
    process's), stripped; :class:`ValueError` naming ``what`` and where it looked (never
    the secret) when it cannot be read or is empty."""
    if file:
        path = Path(file).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            value = path.read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read {what} from {path}: {exc.strerror}") from None
        if not value:
            raise ValueError(f"{what} file {path} is empty")
        return value
    if env:
        value = (os.environ if environ is None else environ).get(env, "").strip()
        if not value:
            raise ValueError(f"{what}: environment variable {env} is not set")
        return value
    raise ValueError(f"no {what} configured")
