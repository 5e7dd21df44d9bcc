"""Which config file a command uses, and whether the person running it trusts that file.

``--config F`` chooses a file and trusts it: the person typed its name. Without it, a
command reads ``.mcp.json`` in the working directory — only there: no search of the
parent directories, no global file merged in. A config file can start any program as the
user, and a ``.mcp.json`` arrives with every repository cloned, so before a command starts
anything from that default file it must be trusted:

- on a terminal (standard input and standard error both one), the command shows the
  servers it would start — each one's command line or URL — and asks; only ``y`` or
  ``yes`` trusts it, anything else ends the command with exit 2;
- without a terminal it refuses (exit 2), saying how to trust the file: ``--trust-config``,
  or ``--config .mcp.json``;
- ``--trust-config`` trusts it without asking.

A trusted file's SHA-256 is remembered in ``trusted-configs.json`` in the state directory
(``~/.mcp-supervisor``, or ``$MCP_SUPERVISOR_STATE_DIR``; the directory 0700, the file
0600), keyed by the file's real path: the same content is not asked about again, a changed
file is. ``check``, ``list``, ``add`` and ``remove`` start nothing from the file (``add``
starts only the server just typed), so they read the default file without asking.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .._files import FILE_MODE, locked, private_dir, write_atomic
from .._printable import printable

if TYPE_CHECKING:
    from ..config import Config

#: the config file a command reads when no ``--config`` is given (working directory only)
DEFAULT_CONFIG = ".mcp.json"
#: The environment variable that moves the state directory.
ENV_STATE_DIR = "MCP_SUPERVISOR_STATE_DIR"
_TRUST_FILE = "trusted-configs.json"


def default_state_dir() -> Path:
    """``$MCP_SUPERVISOR_STATE_DIR``, else ``~/.mcp-supervisor``."""
    given = os.environ.get(ENV_STATE_DIR)
    return Path(given).expanduser() if given else Path.home() / ".mcp-supervisor"


def add_config_options(parser: argparse.ArgumentParser, *, trust: bool = True) -> None:
    """``--config F`` (default ``./.mcp.json``) and, for a command that starts servers,
    ``--trust-config``."""
    parser.add_argument(
        "--config",
        metavar="F",
        default=None,
        help="the config file (JSON); default: ./.mcp.json"
        + (", which must be trusted first (--trust-config)" if trust else ""),
    )
    if trust:
        parser.add_argument(
            "--trust-config",
            action="store_true",
            help="trust ./.mcp.json without asking (remembered until the file changes)",
        )


def config_path(args: argparse.Namespace) -> str | None:
    """The config file ``args`` names, or the default one if it exists: ``args.config`` is
    set to it. ``None`` (said on stderr) when there is neither."""
    if args.config is not None:
        return str(args.config)
    if not os.path.exists(DEFAULT_CONFIG):
        _say(
            f"mcp-supervisor {args.command}: no config file: pass --config F, or create "
            f"{DEFAULT_CONFIG} here (`mcp-supervisor add NAME -- COMMAND ARGS...` creates it)"
        )
        return None
    args.config = DEFAULT_CONFIG
    return DEFAULT_CONFIG


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of the file's bytes; ``None`` if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


class TrustStore:
    """The remembered trusted files: real path -> SHA-256 of the content trusted."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_state_dir()

    @property
    def path(self) -> Path:
        return self.root / _TRUST_FILE

    def _files(self) -> dict[str, str]:
        """What is remembered; a damaged file counts as empty (the next write replaces it)."""
        try:
            document = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        files = document.get("files") if isinstance(document, dict) else None
        if not isinstance(files, dict):
            return {}
        return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}

    def trusted(self, config: str | os.PathLike[str], sha256: str) -> bool | None:
        """``True`` if this content of ``config`` is trusted, ``False`` if another
        content of it was (it changed since), ``None`` if it never was."""
        remembered = self._files().get(os.path.realpath(config))
        return None if remembered is None else remembered == sha256

    def remember(self, config: str | os.PathLike[str], sha256: str) -> None:
        """Trust this content of ``config`` (forgetting any other content of it). Other
        processes remembering at the same moment wait their turn: no entry is lost."""
        private_dir(self.root)
        with locked(self.path):
            files = self._files()
            files[os.path.realpath(config)] = sha256
            data = json.dumps({"files": files}, indent=2, sort_keys=True).encode() + b"\n"
            write_atomic(self.path, data, FILE_MODE)


def trust_default(args: argparse.Namespace, config: Config, sha256: str) -> bool:
    """Whether the command may use the default config file ``args.config`` (loaded as
    ``config``, its content's hash ``sha256``): remembered, ``--trust-config``, or asked on
    the terminal. A refusal is said on stderr."""
    store = TrustStore()
    path = args.config
    known = store.trusted(path, sha256)
    if known:
        return True
    if getattr(args, "trust_config", False):
        store.remember(path, sha256)
        return True
    prefix = f"mcp-supervisor {args.command}"
    if sys.stdin.isatty() and sys.stderr.isatty():
        if ask(path, config, changed=known is False, stdin=sys.stdin, stderr=sys.stderr):
            store.remember(path, sha256)
            return True
        _say(f"{prefix}: {path} not trusted; nothing was started")
        return False
    what = "has changed since it was trusted" if known is False else "is not trusted yet"
    _say(
        f"{prefix}: {path} {what}, and a config file can start any program "
        f"({_summary(config)}). Without a terminal to ask on, it is not used: pass "
        f"--trust-config to trust it, or --config {path} to choose it"
    )
    return False


def ask(path: str, config: Config, *, changed: bool, stdin: TextIO, stderr: TextIO) -> bool:
    """Show what ``config`` would start, ask whether to trust ``path``; only ``y`` or
    ``yes`` (any case) answers yes, an empty line or end of input no."""
    what = "has changed since you trusted it" if changed else "is not trusted yet"
    lines = [f"{path} {what}. It can start these servers:"]
    lines += [f"  {line}" for line in launches(config)] or ["  (none)"]
    lines.append("A config file can run any program as you.")
    stderr.write("\n".join(lines) + f"\nTrust {path} (asked again if it changes)? [y/N] ")
    stderr.flush()
    answer = stdin.readline()
    if not answer.endswith("\n"):
        stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")


def launches(config: Config) -> list[str]:
    """One line per server: its name, transport and command line or URL (secret-looking
    values masked), made printable (an escape sequence in the file cannot hide what it
    starts); a disabled server is said to start nothing."""
    from ..config import command_line, masked_url

    servers = list(config.servers.values())
    width = max((len(s.name) for s in servers), default=0)
    lines = []
    for s in servers:
        kind = "remote" if s.remote_fallback else s.type.value
        target = masked_url(s.url) if s.url else command_line(s)
        note = "  (disabled: not started)" if s.disabled else ""
        lines.append(printable(f"{s.name:<{width}}  {kind:<6}  {target}{note}"))
    return lines


def _summary(config: Config) -> str:
    """The enabled servers' commands and URLs, on one line."""
    from ..config import command_line, masked_url

    shown = [
        f"{s.name}: {masked_url(s.url) if s.url else command_line(s)}"
        for s in config.servers.values()
        if not s.disabled
    ]
    if not shown:
        return "this one starts none"
    more = f", and {len(shown) - 3} more" if len(shown) > 3 else ""
    return printable("here " + "; ".join(shown[:3]) + more)
