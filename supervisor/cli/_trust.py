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

What is trusted is everything loading the file reads: its own bytes, and each file its
servers pull in (:attr:`~supervisor.config.Config.included`) — an ``envFile`` (it can set
``PYTHONPATH`` or ``LD_PRELOAD`` as well as a command line can) and a ``faults`` plan file
(it can kill, duplicate or drop calls). Their SHA-256 digests, never their content, are
remembered in ``trusted-configs.json`` in the state directory (``~/.mcp-supervisor``, or
``$MCP_SUPERVISOR_STATE_DIR``; the directory 0700, the file 0600), keyed by the config
file's real path. The same config and included files are not asked about again; once any
of them changes it is, naming which. An included file that was missing when trusted is
remembered as missing: one that appears later is a change too. Files read only later, when
a server authenticates (``privateKeyFile``, ``assertionFile``, an ``idp``'s
``clientSecretFile`` and ``idTokenFile``), are credentials, not instructions: they say who
the supervisor is, not what it runs, and are rotated by their owners, so they are not part
of it (their paths, in the config, are). Nor are the programs a server runs, or the files
those read.

``check``, ``list``, ``add`` and ``remove`` start nothing from the file (``add`` starts
only the server just typed, with default settings unless the file is trusted), so they
read the default file without asking.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import attrs

from .._util._files import FILE_MODE, locked, private_dir, write_atomic
from .._util._printable import printable

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


@attrs.frozen
class Trusted:
    """What trusting a config file remembers: the SHA-256 of its bytes, and of each file
    its servers pull in (:attr:`~supervisor.config.Config.included`: an ``envFile``, a
    fault plan), by the path it was read at; ``None`` for one that was missing."""

    sha256: str
    files: Mapping[str, str | None] = attrs.field(factory=dict)

    @classmethod
    def of(cls, sha256: str, config: Config) -> Trusted:
        """What trusting ``config`` (its file's bytes hashing to ``sha256``) remembers."""
        return cls(sha256, {str(f.path): f.sha256 for f in config.included})

    def changes(self, sha256: str, config: Config) -> list[str]:
        """What differs between this and ``config`` as loaded now (its file's bytes
        hashing to ``sha256``), one phrase each, naming the file; ``[]``: nothing."""
        found = [] if sha256 == self.sha256 else ["its own content changed"]
        for f in config.included:
            name = f"{_shown(f.name)} ({f.field})"
            if str(f.path) not in self.files:
                found.append(f"{name} is new: it was not part of what was trusted")
                continue
            then = self.files[str(f.path)]
            if then == f.sha256:
                continue
            if then is None:
                found.append(f"{name} was missing then and exists now")
            elif f.sha256 is None:
                found.append(f"{name} is missing now")
            else:
                found.append(f"{name} changed")
        return list(dict.fromkeys(found))

    def to_json(self) -> dict[str, object]:
        return {"sha256": self.sha256, "included": dict(self.files)}

    @classmethod
    def from_json(cls, value: object) -> Trusted | None:
        """An entry as stored; a bare digest is an entry of an earlier version, which
        covered the file's own bytes only. ``None`` for anything else."""
        if isinstance(value, str):
            return cls(value)
        if not isinstance(value, dict) or not isinstance(value.get("sha256"), str):
            return None
        files = value.get("included")
        if not isinstance(files, dict):
            return None
        kept = {k: v for k, v in files.items() if isinstance(v, str | None)}
        return cls(value["sha256"], kept)


def _shown(name: str) -> str:
    """A file name as the config gives it, quoted if it holds a control character (a
    line break or an escape would reach the terminal)."""
    return name if name.isprintable() else json.dumps(name)


class TrustStore:
    """The remembered trusted files: real path -> what was trusted (:class:`Trusted`)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_state_dir()

    @property
    def path(self) -> Path:
        return self.root / _TRUST_FILE

    def _files(self) -> dict[str, object]:
        """What is remembered; a damaged file counts as empty (the next write replaces it)."""
        try:
            document = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        files = document.get("files") if isinstance(document, dict) else None
        if not isinstance(files, dict):
            return {}
        return {k: v for k, v in files.items() if isinstance(k, str)}

    def get(self, config: str | os.PathLike[str]) -> Trusted | None:
        """What was trusted of ``config``; ``None`` if it never was."""
        return Trusted.from_json(self._files().get(os.path.realpath(config)))

    def remember(self, config: str | os.PathLike[str], trusted: Trusted) -> None:
        """Trust ``trusted`` of ``config`` (forgetting any other content of it). Other
        processes remembering at the same moment wait their turn: no entry is lost."""
        private_dir(self.root)
        with locked(self.path):
            files = self._files()
            files[os.path.realpath(config)] = trusted.to_json()
            data = json.dumps({"files": files}, indent=2, sort_keys=True).encode() + b"\n"
            write_atomic(self.path, data, FILE_MODE)


def trusted_now(path: str | os.PathLike[str]) -> Trusted | None:
    """What was trusted of the config file ``path``, if that is what it is now — its bytes
    and every file it pulls in — else ``None`` (also when it does not load)."""
    from ..config import ConfigError, load_config

    sha256 = digest(path)
    known = TrustStore().get(path)
    if sha256 is None or known is None:
        return None
    try:
        config = load_config(path)
    except ConfigError:
        return None
    if digest(path) != sha256 or known.changes(sha256, config):
        return None
    return known


def trust_default(args: argparse.Namespace, config: Config, sha256: str) -> bool:
    """Whether the command may use the default config file ``args.config`` (loaded as
    ``config``, its content's hash ``sha256``): what was trusted of it is what it is now
    (its bytes and its included files), ``--trust-config``, or asked on the terminal. A
    refusal is said on stderr, naming what changed."""
    store = TrustStore()
    path = args.config
    known = store.get(path)
    changed = None if known is None else known.changes(sha256, config)
    if changed == []:
        return True
    now = Trusted.of(sha256, config)
    if getattr(args, "trust_config", False):
        store.remember(path, now)
        return True
    prefix = f"mcp-supervisor {args.command}"
    if sys.stdin.isatty() and sys.stderr.isatty():
        if ask(path, config, changed=changed, stdin=sys.stdin, stderr=sys.stderr):
            store.remember(path, now)
            return True
        _say(f"{prefix}: {path} not trusted; nothing was started")
        return False
    what = (
        f"has changed since it was trusted: {'; '.join(changed)}"
        if changed
        else ("is not trusted yet")
    )
    _say(
        f"{prefix}: {path} {what}, and a config file can start any program "
        f"({_summary(config)}). Without a terminal to ask on, it is not used: pass "
        f"--trust-config to trust it, or --config {path} to choose it"
    )
    return False


def ask(
    path: str, config: Config, *, changed: Sequence[str] | None, stdin: TextIO, stderr: TextIO
) -> bool:
    """Show what ``config`` would start and the files it pulls in, and what ``changed``
    since it was trusted (``None``: it never was); ask whether to trust ``path``. Only
    ``y`` or ``yes`` (any case) answers yes, an empty line or end of input no."""
    if changed:
        lines = [f"{path} has changed since you trusted it: {'; '.join(changed)}."]
        lines.append("It can start these servers:")
    else:
        lines = [f"{path} is not trusted yet. It can start these servers:"]
    lines += [f"  {line}" for line in launches(config)] or ["  (none)"]
    if config.included:
        lines.append("and pulls in these files, trusted with it (a change to one asks again):")
        lines += [f"  {_shown(f.name)}  ({f.field})" for f in config.included]
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
    from ..config._secrets import command_line, masked_url

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
    from ..config._secrets import command_line, masked_url

    shown = [
        f"{s.name}: {masked_url(s.url) if s.url else command_line(s)}"
        for s in config.servers.values()
        if not s.disabled
    ]
    if not shown:
        return "this one starts none"
    more = f", and {len(shown) - 3} more" if len(shown) > 3 else ""
    return printable("here " + "; ".join(shown[:3]) + more)
