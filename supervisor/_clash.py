"""The import name ``supervisor`` is supervisord's too: one environment cannot hold both.

supervisord (``pip install supervisor``) ships a package named ``supervisor``, as this
project does (the distribution is ``mcp-supervisor``). pip installs either over the other
without a word: installed last, supervisord's ``supervisor/__init__.py`` replaces ours, so
``from supervisor import open_supervisor`` raises an ``ImportError`` we have no say in;
installed first, it has ours in its place, and its own ``supervisor.events`` imports our
``events`` package. Uninstalling either removes the ``__init__.py`` both claim.

So ``import supervisor`` (when it is ours) looks for supervisord's ``supervisord.py``
beside it — one ``stat``, loading this module only when it is there — and the command
line does too, before anything else, and also notices a ``supervisor/__init__.py`` that is
not ours (supervisord's, or none at all). Either says it in one line on standard error,
once per process: what happened, and what to do.
"""

from __future__ import annotations

import os
import sys

__all__ = ["ADVICE", "check_command_line", "say_supervisord"]

#: What to do about it, said in every line about it.
ADVICE = (
    "install mcp-supervisor in an environment of its own: pipx install mcp-supervisor, or a venv"
)
#: supervisord's module that no other package named ``supervisor`` has.
SUPERVISORD = "supervisord.py"

_said = False


def say_supervisord(path: str) -> None:
    """Say on standard error (once) that supervisord's package, ``path`` its
    ``supervisord.py``, shares this package's folder."""
    _say(
        f"mcp-supervisor: supervisord is installed in this environment too ({path}): both "
        "import as 'supervisor' and overwrite each other's files, so either may break; " + ADVICE
    )


def check_command_line() -> None:
    """For the command line, before anything else: say (once) if supervisord shares the
    package's folder, or if ``supervisor/__init__.py`` is not ours — replaced or removed
    by another package that imports as ``supervisor``, so that the library does not
    import. The command then runs as it can."""
    if _said:  # ``import supervisor`` said it already
        return
    folder = os.path.dirname(os.path.abspath(__file__))
    supervisord = os.path.join(folder, SUPERVISORD)
    if os.path.exists(supervisord):
        say_supervisord(supervisord)
    elif not _ours(sys.modules.get("supervisor")):
        init = os.path.join(folder, "__init__.py")
        what = "is another package's" if os.path.exists(init) else "is missing"
        _say(
            f"mcp-supervisor: {init} {what} (another package that imports as 'supervisor', "
            "such as supervisord, replaced or removed it), so 'import supervisor' does not "
            "give this library; " + ADVICE
        )


def _ours(package: object) -> bool:
    """Whether ``package`` (the imported ``supervisor``) ran our ``__init__.py``: ours
    alone has the lazy façade's ``__getattr__``."""
    found = getattr(package, "__getattr__", None)
    return getattr(found, "__module__", None) == "supervisor._lazy"


def _say(line: str) -> None:
    global _said
    if not _said:
        _said = True
        print(line, file=sys.stderr)
