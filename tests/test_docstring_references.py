"""Every cross-reference in the package's docstrings (``:class:``, ``:mod:``, ``:func:``,
``:meth:``, ``:attr:``, ``:data:``, ``:exc:``, ``:obj:``) names something that exists:
resolved as Sphinx would — an absolute dotted name, a name relative to the module's
package (``.x``, ``..x``), or a name in the module (or, inside a class, the class) —
with the package's modules imported. A reference left pointing at a renamed or removed
thing sends a reader nowhere."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import supervisor

PACKAGE = Path(supervisor.__file__).parent
ROLE = re.compile(r":(class|mod|func|meth|attr|data|exc|obj):`([^`]+)`")


def _modules() -> dict[str, ModuleType]:
    found = {"supervisor": supervisor}
    for info in pkgutil.walk_packages([str(PACKAGE)], "supervisor."):
        if info.name.endswith("__main__"):
            continue  # runs the command line
        try:
            found[info.name] = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed
            continue
    return found


def _lookup(name: str) -> bool:
    """Whether the absolute dotted ``name`` is a module (one that needs an optional extra
    not installed included), or an attribute path in one."""
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):  # its parent is no package: an attribute path
        pass
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 — importing it failed otherwise: not found
            return False
        for part in parts[cut:]:
            if not _has(found, part):
                return False
            found = getattr(found, part, None)
        return True
    return False


def _has(owner: object, name: str) -> bool:
    if hasattr(owner, name):
        return True
    # a dataclass/attrs/msgspec field or an annotated attribute, set per instance
    annotations = {}
    for cls in getattr(owner, "__mro__", ()):
        annotations.update(getattr(cls, "__annotations__", {}))
    fields = getattr(owner, "__struct_fields__", ()) or ()
    slots = getattr(owner, "__slots__", ()) or ()
    return name in annotations or name in fields or name in slots


def _instance_attributes(tree: ast.ClassDef) -> set[str]:
    """What a class's own code sets on ``self``."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def _resolves(target: str, module: ModuleType, cls: ast.ClassDef | None) -> bool:
    target = " ".join(target.split())
    if "<" in target and target.endswith(">"):  # "title <target>"
        target = target[target.index("<") + 1 : -1]
    target = target.lstrip("~!").removesuffix("()")
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        package = module.__name__ if hasattr(module, "__path__") else module.__package__ or ""
        base = package.split(".")
        base = base[: len(base) - (dots - 1)] if dots > 1 else base
        return _lookup(".".join([*base, target[dots:]]))
    head, _, rest = target.partition(".")
    if cls is not None:
        owner = getattr(module, cls.name, None)
        if head in _instance_attributes(cls) and not rest:
            return True
        if owner is not None and _has(owner, head):
            found = getattr(owner, head, None)
            return not rest or all(_has(found, part) for part in rest.split(".")[:1])
    if hasattr(module, head):
        found = getattr(module, head)
        for part in rest.split(".") if rest else ():
            if not _has(found, part):
                return False
            found = getattr(found, part, None)
        return True
    if not rest and hasattr(builtins, head):
        return True
    return _lookup(target)


def _docstrings(tree: ast.Module) -> list[tuple[str, int, ast.ClassDef | None]]:
    """Each docstring of a module: its text, line, and the class it is in (if any)."""
    found: list[tuple[str, int, ast.ClassDef | None]] = []

    def visit(node: ast.AST, cls: ast.ClassDef | None) -> None:
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            first = body[0]
            if (
                isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                inside = node if isinstance(node, ast.ClassDef) else cls
                found.append((first.value.value, first.lineno, inside))
        for child in ast.iter_child_nodes(node):
            visit(child, node if isinstance(node, ast.ClassDef) else cls)

    visit(tree, None)
    return found


def test_every_docstring_reference_resolves() -> None:
    modules = _modules()
    broken = []
    for _, module in sorted(modules.items()):
        path = Path(module.__file__ or "")
        tree = ast.parse(path.read_text())
        for text, line, cls in _docstrings(tree):
            for role, target in ROLE.findall(text):
                if not _resolves(target, module, cls):
                    where = path.relative_to(PACKAGE.parent)
                    broken.append(f"{where}:{line} :{role}:`{target}`")
    assert not broken, f"{len(broken)} docstring references point nowhere:\n" + "\n".join(broken)


def test_a_facade_names_each_of_its_private_modules() -> None:
    """A package whose docstring says what each of its private modules does (``façade
    over``) names every one of them, so a module added or renamed is said there too."""
    checked = 0
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "façade over" not in doc:
            continue
        checked += 1
        private = sorted(p.stem for p in init.parent.glob("_*.py") if p.stem != "__init__")
        unnamed = [name for name in private if f"``{name}``" not in doc]
        assert not unnamed, f"{init.relative_to(PACKAGE.parent)} does not name {unnamed}"
    assert checked >= 2  # supervisor.config and supervisor.tools
