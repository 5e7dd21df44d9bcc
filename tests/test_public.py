"""The public surface: each public name declared once, in one table per package, and
every name the docs (docs/*.md, README.md) give a user importable from where they say.

A package's ``__init__.py`` is either a façade — its one ``if TYPE_CHECKING:`` block of
``from .x import y as y`` re-exports, from which ``supervisor._lazy`` derives
``__all__`` — or a module of its own whose ``__all__`` lists only what it defines. What
the docs refer to as ``supervisor.x.Name``, or import in a code block with
``from supervisor.x import Name``, is in ``supervisor.x.__all__`` and importable.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import supervisor
from supervisor._lazy import table
from supervisor.events._catalog import EVENT_TYPES

from .extras import require_module

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(supervisor.__file__).parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
#: The runnable examples: what they import from the package is public too.
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

#: Dotted words of the docs that start like a module's name but are config key paths of
#: the ``supervisor`` section (docs/config.md), not Python names.
CONFIG_PATHS = {"supervisor.audit.path"}

INITS = sorted(PACKAGE.rglob("__init__.py"))


def _module_name(path: Path) -> str:
    return ".".join(path.parent.relative_to(PACKAGE.parent).parts)


def _assigned_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))  # type: ignore[union-attr]
    return None


def _is_facade(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING" for node in tree.body
    )


@pytest.mark.parametrize("path", INITS, ids=_module_name)
def test_each_public_name_is_declared_once(path: Path) -> None:
    """A façade names each public name once, in its table, and keeps no list beside it
    (no ``__all__``, no re-export outside the table); a package that is no façade has an
    ``__all__`` of names it defines itself, none re-exported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = _module_name(path)
    outside = [
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level > 0
        for alias in node.names
        if alias.asname == alias.name
    ]
    assert outside == [], f"{name} re-exports {outside} outside its table"
    if _is_facade(tree):
        assert _assigned_all(tree) is None, f"{name} lists its names twice"
        assert "_SOURCES" not in {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in ast.walk(n.targets[0])
            if isinstance(t, ast.Name)
        }
        sources = table(importlib.import_module(name).__name__)
        assert importlib.import_module(name).__all__ == sorted(sources)
        return
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    } | {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert set(_assigned_all(tree) or []) <= defined, name


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def documented() -> dict[tuple[str, str], set[str]]:
    """Every (module, name) the docs refer to, with the pages that do."""
    found: dict[tuple[str, str], set[str]] = {}
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        for block in _code_blocks(text):
            block = re.sub(r"#[^\n]*", "", block)
            for module, names in re.findall(
                r"^\s*from\s+(supervisor(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n]*)",
                block,
                flags=re.MULTILINE,
            ):
                for item in names.strip("()").split(","):
                    if item.strip():
                        found.setdefault((module, item.split()[0]), set()).add(page.name)
        for dotted in re.findall(r"\bsupervisor(?:\.[A-Za-z_]\w*)+", text):
            module, _, name = dotted.rpartition(".")
            if module == "supervisor":
                continue  # config keys (``supervisor.intensity``), events, spans: the
                # top level's names are documented by the code blocks' imports
            if dotted in CONFIG_PATHS or dotted in EVENT_TYPES:
                continue  # a config key, or an event's kind (``supervisor.config.reloaded``)
            if _is_module(dotted) or not _is_module(module):
                continue  # a module itself, or no Python name (an event, a config key)
            found.setdefault((module, name), set()).add(page.name)
    return found


def test_the_docs_refer_to_names() -> None:
    """The scan of the docs finds their imports and dotted names (it cannot pass empty)."""
    found = documented()
    assert ("supervisor", "open_supervisor") in found
    assert ("supervisor.faults", "CallHistory") in found
    assert ("supervisor.monitor", "CallWindow") in found
    assert not any(module == "supervisor.child" for module, _ in found)  # event kinds


@pytest.mark.parametrize(
    ("module", "name"), sorted(documented()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_documented_name_is_public_and_importable(module: str, name: str) -> None:
    """A name the docs give as ``module.name`` is in that module's ``__all__`` (or is a
    public submodule of it) and imports from there."""
    require_module(module)  # the agent frameworks' modules need their extra
    imported = importlib.import_module(module)
    if _is_module(f"{module}.{name}"):
        assert not name.startswith("_")
        return
    assert name in getattr(imported, "__all__", ()), f"{module}.{name} is not public"
    namespace: dict[str, object] = {}
    exec(f"from {module} import {name}", namespace)  # noqa: S102 - a name of the docs
    assert namespace[name] is getattr(imported, name)


#: Public though no page names them: the version, and the type of what
#: ``open_supervisor`` yields (the examples annotate with it).
UNDOCUMENTED_PUBLIC = {"supervisor": {"__version__", "SupervisorHandle"}}
#: Façades whose packages are being rebuilt; their tables are trimmed once they are.
NOT_YET_TRIMMED: set[str] = set()


def _code_words() -> set[str]:
    """The identifiers in the docs' code: code blocks and inline code."""
    words: set[str] = set()
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        spans = _code_blocks(text)
        prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
        spans += re.findall(r"`([^`\n]+)`", prose)
        for span in spans:
            words.update(re.findall(r"[A-Za-z_]\w*", span))
    words.update(name for _, name in _example_imports())
    return words


def _example_imports() -> list[tuple[str, str]]:
    """Each (module, name) an example imports from the package."""
    found = []
    for path in EXAMPLES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("supervisor"):
                found += [(node.module, alias.name) for alias in node.names]
    return found


def test_an_example_imports_only_public_names() -> None:
    """An example is what a user copies: it imports public names only, from where the
    façades export them (no private module, no private name)."""
    private = [
        f"{module}.{name}"
        for module, name in _example_imports()
        if any(part.startswith("_") for part in f"{module}.{name}".split("."))
        or name not in getattr(importlib.import_module(module), "__all__", ())
    ]
    assert _example_imports() and private == []


FACADES = [
    _module_name(path)
    for path in INITS
    if _is_facade(ast.parse(path.read_text(encoding="utf-8")))
    and _module_name(path) not in NOT_YET_TRIMMED
]


@pytest.mark.parametrize("name", FACADES)
def test_a_facade_exports_only_what_the_docs_name(name: str) -> None:
    """Every name of a façade's table appears in the docs' code (its other names are
    private, imported from the module that defines them)."""
    undocumented = set(table(importlib.import_module(name).__name__)) - _code_words()
    assert undocumented <= UNDOCUMENTED_PUBLIC.get(name, set())
