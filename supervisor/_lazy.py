"""Façades that import on first use: a package's public names, each loaded from its
module when it is first read (PEP 562's module ``__getattr__`` and ``__dir__``).

``import supervisor`` then costs almost nothing, and a command that needs only the
config loader (``mcp-supervisor check``) never loads the MCP SDK, HTTP stacks or trio.

Each public name is declared once, in the one table a façade has: its
``if TYPE_CHECKING:`` block of re-exports, the lines an eager façade would have::

    from __future__ import annotations

    from typing import TYPE_CHECKING

    from .._lazy import attach

    if TYPE_CHECKING:
        from ._mailbox import Address as Address
        from ..errors import ConfigError as ConfigError

    __getattr__, __dir__ = attach(__name__)

Type checkers and readers read the block as it is; at run time :func:`attach` reads it
from the façade's source, once, when a name is first asked for, and derives from it where
each name lives, ``__all__`` (sorted) and ``dir()``. It is the pattern of scientific
Python's SPEC 1 (``lazy_loader.attach_stub``) with the table in the façade itself rather
than in an ``__init__.pyi`` beside it (a stub would hide the rest of ``__init__.py`` from
type checkers), and with imports from a parent package (``from ..errors import …``),
which ``lazy_loader`` refuses.

A façade's table is its package's public surface: what docs/ documents. The package's
other names are private: its own modules, the CLI and the tests import them from the
private module that defines them (``from .registry._live import Registry``).

Importing a façade runs nothing else: no registry is filled and no module is loaded as
a side effect, so loading a name later behaves exactly as the eager import did.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

__all__ = ["attach", "table"]


def table(package: str) -> dict[str, str]:
    """Each public name of the façade ``package`` with the module (relative to it:
    ``._x``, ``..errors``) it is re-exported from, as its ``if TYPE_CHECKING:`` block
    says, in the block's order.

    Raises :class:`RuntimeError` if the façade has no such block, if the block holds
    anything but relative ``from .x import y as y`` re-exports, or names a name twice.
    """
    import ast  # only when a façade is first read: ``import supervisor`` stays cheap

    path = sys.modules[package].__file__
    if path is None:
        raise RuntimeError(f"{package} has no source file to read its names from")
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read(), path)
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    if len(blocks) != 1:
        raise RuntimeError(f"{package} has {len(blocks)} `if TYPE_CHECKING:` blocks, not 1")
    found: dict[str, str] = {}
    for statement in blocks[0].body:
        if not isinstance(statement, ast.ImportFrom) or statement.level == 0:
            raise RuntimeError(
                f"{path}:{statement.lineno}: a façade's table holds only relative "
                "`from .x import y as y` re-exports"
            )
        for alias in statement.names:
            if alias.asname != alias.name:
                raise RuntimeError(
                    f"{path}:{statement.lineno}: re-export {alias.name!r} as itself "
                    f"(`import {alias.name} as {alias.name}`)"
                )
            if alias.name in found:
                raise RuntimeError(f"{path}:{statement.lineno}: {alias.name!r} declared twice")
            found[alias.name] = "." * statement.level + (statement.module or "")
    return found


def attach(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the façade named ``package``, from its
    table (:func:`table`), read when a name is first asked for.

    A name is imported once, on first read, then stored in the package's namespace, so
    later reads are plain attribute lookups; ``__all__`` is the table's names, sorted
    (what ``from package import *`` binds). A name not in the table raises
    :class:`AttributeError`, as for any module — which is also what lets
    ``from package import submodule`` fall back to importing the submodule.
    """
    sources: dict[str, str] = {}

    def names() -> dict[str, str]:
        if not sources:
            sources.update(table(package))
        return sources

    def __getattr__(name: str) -> Any:
        namespace = sys.modules[package].__dict__
        if name == "__all__":
            value: Any = sorted(names())
        else:
            try:
                source = names()[name]
            except KeyError:
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
            value = getattr(import_module(source, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*sys.modules[package].__dict__, *names()})

    return __getattr__, __dir__
