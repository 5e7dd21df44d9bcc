"""What a local server's stderr and command say about why it failed.

:func:`error_line` picks, from a process's last stderr lines, the one that says what went
wrong — not merely the last: Node prints its version (``Node.js v20.20.2``) after an
uncaught error's stack, npm a log file's path after its error, Python a traceback's
exception last but a logging handler may write more after it. It is the last line that
looks like an error:

- an exception line: ``Error: …``, ``TypeError [ERR_X]: …``, ``ModuleNotFoundError: …``,
  ``java.lang.IllegalStateException: …``, ``Exception in thread …``, ``Caused by: …``;
- a line that starts with a level: ``error: …``, ``error[E0432]: …``, ``fatal: …``,
  ``panic: …``, ``ERROR:root:…``; or carries one: ``ERROR``, ``FATAL`` or ``CRITICAL`` as
  a word, ``[error]``, ``level=error``, ``"level": "error"``; a Rust ``… panicked at …``;
- for an npm error (``npm ERR! …``, ``npm error …``), the first line of its block that
  says something: past ``code``, ``path``, ``errno``, ``syscall``, ``command`` … and
  never the log file's path (a block of only those is passed over);
- under ``Traceback (most recent call last):`` with nothing that looks like an error
  after it, the traceback's own last line (its first line that is not indented).

With no such line it is the last line, as it was. :func:`downloader` says whether a
command is a launcher that fetches the package it runs on a first run (``npx``, ``uvx``,
``pipx run`` …), which a handshake timeout then mentions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

_EXCEPTION = re.compile(
    r"^(?:Uncaught\s+)?(?:[\w$]+(?:\.|::))*[\w$]*(?:Error|Exception)(?:\s*\[[^\]]*\])?(?::|$)"
    r"|^(?:Exception in thread|Caused by:)\s"
)
_LEVEL_FIRST = re.compile(r"^(?:error|fatal|panic|critical)(?:\[[^\]]*\])?:", re.IGNORECASE)
_LEVEL_ANYWHERE = re.compile(
    r"\b(?:ERROR|FATAL|CRITICAL)\b|\bpanicked at\b"
    r"|(?i:\[(?:error|fatal|critical)\]|\blevel=\"?(?:error|fatal|critical)\b"
    r"|\"level\"\s*:\s*\"(?:error|fatal|critical)\")"
)
_NPM = re.compile(r"^npm (?:ERR!|error)(?:\s|$)")
#: npm's lines that only name a field of the error, or where its log went.
_NPM_QUIET = re.compile(
    r"^(?:(?:code|errno|syscall|path|dest|command|cwd|signal|A complete log)\b|[/\\~.]|\d+\s*$|$)"
)
_TRACEBACK = "Traceback (most recent call last):"

#: Launchers that fetch the package they run when it is not cached yet: the program
#: (without directory or ``.cmd``/``.exe``) and the subcommand that does it.
_DOWNLOADERS: dict[str, tuple[str, ...]] = {
    "npx": (),
    "pnpx": (),
    "bunx": (),
    "uvx": (),
    "pipx": ("run",),
    "pnpm": ("dlx",),
    "yarn": ("dlx",),
    "npm": ("exec",),
    "bun": ("x",),
    "uv": ("tool", "run"),
}


def error_line(lines: Sequence[str]) -> str | None:
    """The line of ``lines`` (a process's last stderr lines, oldest first) that says what
    went wrong, stripped: the last that looks like an error (see the module's docstring),
    else the last line as it is; ``None`` for no lines."""
    i = len(lines) - 1
    while i >= 0:
        line = lines[i].strip()
        if _NPM.match(line):
            start = i
            while start > 0 and _NPM.match(lines[start - 1].strip()):
                start -= 1
            for candidate in lines[start : i + 1]:
                said = _NPM.sub("", candidate.strip(), count=1).strip()
                if not _NPM_QUIET.match(said):
                    return candidate.strip()
            i = start - 1
            continue
        if _EXCEPTION.match(line) or _LEVEL_FIRST.match(line) or _LEVEL_ANYWHERE.search(line):
            return line
        if line == _TRACEBACK:
            for after in lines[i + 1 :]:
                if after.strip() and not after[:1].isspace():
                    return after.strip()
        i -= 1
    return lines[-1] if lines else None


def downloader(command: str, args: Sequence[str]) -> str | None:
    """The launcher ``command`` with ``args`` is, when it is one that fetches the package
    it runs on a first run (``npx``, ``bunx``, ``uvx``, ``pipx run``, ``pnpm dlx``,
    ``yarn dlx``, ``npm exec``, ``bun x``, ``uv tool run``): its words; else ``None``."""
    program = os.path.basename(command.replace("\\", "/")).lower()
    for suffix in (".cmd", ".exe", ".ps1", ".bat"):
        program = program.removesuffix(suffix)
    if program not in _DOWNLOADERS:
        return None
    words = _DOWNLOADERS[program]
    positional = [arg for arg in args if not arg.startswith("-")]
    if tuple(positional[: len(words)]) != words:
        return None
    return " ".join((program, *words))
