"""Façades that import on first use: a package's public names, each loaded from its
module when it is first read (PEP 562's module ``__getattr__`` and ``__dir__``).

``import supervisor`` then costs almost nothing, and a command that needs only the
config loader (``mcp-supervisor check``) never loads the MCP SDK, HTTP stacks or trio.
A façade keeps its sorted ``__all__`` and, under ``if TYPE_CHECKING:``, the same
``from .x import y as y`` lines an eager one has, for type checkers and readers;
:func:`attach` is given where each name lives, and tests check the two agree.

Importing a façade runs nothing else: no registry is filled and no module is loaded as
a side effect, so loading a name later behaves exactly as the eager import did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any

__all__ = ["attach"]


def attach(
    package: str, sources: Mapping[str, str], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package named ``package``: ``sources``
    maps each public name to the module (relative to the package, ``._x``) that defines
    it; ``names`` is the package's ``__all__``.

    A name is imported once, on first read, then stored in the package's namespace, so
    later reads are plain attribute lookups. A name not in ``sources`` raises
    :class:`AttributeError`, as for any module — which is also what lets
    ``from package import submodule`` fall back to importing the submodule.
    """
    missing = sorted(set(names) - set(sources))
    if missing:
        raise RuntimeError(f"{package}.__all__ names {missing} without a source module")

    def __getattr__(name: str) -> Any:
        try:
            source = sources[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        namespace = import_module(package).__dict__
        value = getattr(import_module(source, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*import_module(package).__dict__, *names})

    return __getattr__, __dir__
