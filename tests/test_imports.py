"""No import cycles inside the ``supervisor`` package.

The graph is read from the source with :mod:`ast`, not from a running interpreter: every
``import`` and ``from … import`` of a module of the package counts, wherever it stands —
at the top, inside a function, or under ``if TYPE_CHECKING:`` (a cycle hidden there is
still two modules that each need the other). Importing a module runs the ``__init__`` of
every package on its path first, so ``from .x.y import z`` depends on ``x`` and ``x.y``,
and on ``x.y.z`` too when ``z`` is a submodule. The packages a module lives in are already
being imported when it runs, so naming them is no edge — unless it reads a name from one
(``from . import helper``), which needs that ``__init__`` to have got that far.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import supervisor

Graph = Mapping[str, Iterable[str]]
Edge = tuple[str, str]

ROOT = Path(supervisor.__file__).parent


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (packages by their own)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def import_graph(root: Path) -> tuple[dict[str, set[str]], dict[Edge, list[str]]]:
    """The import graph of the package at ``root`` — module → modules of the package it
    imports — and, for each edge, where it is made (``path:line``, noting
    ``TYPE_CHECKING`` or a function)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    where: dict[Edge, list[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        notes = _contexts(tree)
        # A module's own packages are already being imported when it runs.
        running = set(_prefixes(name))
        for target, reads_names, node in _imports(tree, name, _is_package(path), modules):
            for prefix in _prefixes(target):
                if prefix not in modules or prefix == name:
                    continue
                if prefix in running and not (reads_names and prefix == target):
                    continue
                graph[name].add(prefix)
                where.setdefault((name, prefix), []).append(
                    f"{path.relative_to(root.parent)}:{node.lineno}{notes.get(node, '')}"
                )
    return graph, where


def _imports(
    tree: ast.Module, name: str, is_package: bool, modules: Iterable[str]
) -> Iterator[tuple[str, bool, ast.stmt]]:
    """Each module an import statement of module ``name`` names, absolute, with whether
    the statement reads names from it (``from x import attribute``) and the statement."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, False, node
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            named = [f"{target}.{alias.name}" for alias in node.names]
            yield target, any(n not in modules for n in named), node
            for submodule in named:
                if submodule in modules:
                    yield submodule, False, node


def _contexts(tree: ast.Module) -> dict[ast.AST, str]:
    """Import statements that stand under ``if TYPE_CHECKING:`` or in a function, noted."""
    notes: dict[ast.AST, str] = {}

    def visit(node: ast.AST, note: str) -> None:
        for child in ast.iter_child_nodes(node):
            child_note = note
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for grandchild in child.body:
                    visit_with(grandchild, " (TYPE_CHECKING)")
                for grandchild in child.orelse:
                    visit_with(grandchild, note)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                child_note = note or " (in a function)"
            visit_with(child, child_note)

    def visit_with(node: ast.AST, note: str) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom) and note:
            notes[node] = note
        visit(node, note)

    visit(tree, "")
    return notes


def find_cycles(graph: Graph, *, limit: int = 100) -> list[list[str]]:
    """Every elementary cycle of ``graph`` (at most ``limit``), each as ``[a, b, …, a]``
    starting at its least node, shortest first; ``[]`` for an acyclic graph."""
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    succ = {n: sorted(set(graph.get(n, ()))) for n in nodes}
    cycles: list[list[str]] = []

    def walk(path: list[str], component: set[str]) -> None:
        """Extend ``path`` by the component's nodes greater than its start; each cycle
        is found once, from its least node."""
        start = path[0]
        for nxt in succ[path[-1]]:
            if len(cycles) >= limit:
                return
            if nxt == start:
                cycles.append([*path, start])
            elif nxt in component and nxt > start and nxt not in path:
                walk([*path, nxt], component)

    for component in _components(nodes, succ):
        for start in sorted(component):
            walk([start], component)
    return sorted(cycles, key=lambda cycle: (len(cycle), cycle))


def _components(nodes: list[str], succ: Mapping[str, list[str]]) -> list[set[str]]:
    """The strongly connected components of the graph (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in succ[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: set[str] = set()
            while node not in component:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
            components.append(component)

    for node in nodes:
        if node not in index:
            connect(node)
    return components


def describe_cycle(cycle: list[str], where: Mapping[Edge, list[str]]) -> str:
    """A cycle as ``a -> b -> a``, then each of its edges with where it is made."""
    lines = [" -> ".join(cycle)]
    for edge in zip(cycle, cycle[1:], strict=False):
        lines.append(f"    {edge[0]} -> {edge[1]}: {', '.join(where.get(edge, ['?']))}")
    return "\n".join(lines)


# -- the finder itself -------------------------------------------------------------------


def test_find_cycles_finds_hand_made_cycles() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"], "f": ["a"]}
    assert find_cycles(graph) == [["e", "e"], ["a", "b", "c", "a"]]
    two = {"a": ["b", "c"], "b": ["a"], "c": ["d"], "d": ["a"]}
    assert find_cycles(two) == [["a", "b", "a"], ["a", "c", "d", "a"]]
    assert find_cycles({"a": ["b", "c"], "b": ["c"], "c": []}) == []


def test_import_graph_reads_every_kind_of_import(tmp_path: Path) -> None:
    """Relative and absolute imports, submodules named in ``from``, imports in functions
    and under TYPE_CHECKING; the packages a module lives in are no edge."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": (
            "from typing import TYPE_CHECKING\nfrom . import b\nimport pkg.sub.c\n"
            "if TYPE_CHECKING:\n    from .sub import d\nA = 1\n"
        ),
        "b.py": "def f():\n    from .a import A\n    return A\n",
        "sub/__init__.py": "",
        "sub/c.py": "from .. import b\nfrom . import d\nfrom .d import x\n",
        "sub/d.py": "from pkg import helper_name\nx = 1\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph, where = import_graph(pkg)
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b", "pkg.sub", "pkg.sub.c", "pkg.sub.d"},
        "pkg.b": {"pkg.a"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.b", "pkg.sub.d"},
        "pkg.sub.d": {"pkg"},  # reads a name from its package's __init__
    }
    assert where[("pkg.a", "pkg.sub.d")] == ["pkg/a.py:5 (TYPE_CHECKING)"]
    assert where[("pkg.b", "pkg.a")] == ["pkg/b.py:2 (in a function)"]
    assert find_cycles(graph) == [
        ["pkg.a", "pkg.b", "pkg.a"],
        ["pkg", "pkg.a", "pkg.sub.d", "pkg"],
        ["pkg.a", "pkg.sub.c", "pkg.b", "pkg.a"],
        ["pkg", "pkg.a", "pkg.sub.c", "pkg.sub.d", "pkg"],
    ]


# -- the package ---------------------------------------------------------------------------


def test_supervisor_has_no_import_cycles() -> None:
    graph, where = import_graph(ROOT)
    assert len(graph) > 50  # the walk found the package
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in supervisor/:\n" + "\n".join(
        describe_cycle(cycle, where) for cycle in cycles
    )
