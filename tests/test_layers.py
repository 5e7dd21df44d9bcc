"""The package's layers: the core, the toolkit above it, the command line on top.

- the **toolkit** is ``supervisor.faults`` (with the fault injector,
  ``supervisor.faults._inject``), ``supervisor.testing``, ``supervisor.bench`` and
  ``supervisor.demo``: tools to test and measure supervised servers, built on the core;
- the **top** is ``supervisor.cli`` and ``supervisor.__main__``: it may import anything;
- the **core** is every other module.

Imports point down only: the core imports neither the toolkit nor the top, the toolkit does
not import the top. What the core needs of a tool (an outcome label, the interface a fault
injector offers the transports) is the core's own, and the toolkit implements or
re-exports it; the injector is given to the core from above (``open_supervisor(injector=...)``).

The imports are read from the source with :mod:`ast` (the same reading as the cycle test):
every ``import`` and ``from … import`` counts, at the top, in a function or under
``if TYPE_CHECKING:``, relative or absolute; type stubs (``.pyi``) count too. A lazy
façade's names are read through the imports it declares for type checkers (its
``TYPE_CHECKING`` block or its stub), which tests/test_startup.py holds equal to what it
loads.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import supervisor

from .test_imports import _contexts, _imports, _prefixes, import_graph

ROOT = Path(supervisor.__file__).parent

TOOLKIT = ("faults", "testing", "bench", "demo")
TOP = ("cli", "__main__")
#: which layers each layer may not import
FORBIDDEN = {"core": {"toolkit", "top"}, "toolkit": {"top"}, "top": set()}


def layer(module: str) -> str:
    """``core``, ``toolkit`` or ``top``: the layer a dotted module name of the package is in."""
    parts = module.split(".")
    first = parts[1] if len(parts) > 1 else ""
    if first in TOOLKIT:
        return "toolkit"
    if first in TOP:
        return "top"
    return "core"


def _modules(root: Path) -> dict[str, list[Path]]:
    """Every module of the package at ``root`` by dotted name, with its source and stub."""
    found: dict[str, list[Path]] = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyi")]):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.setdefault(".".join(parts), []).append(path)
    return found


def layer_violations(root: Path) -> list[str]:
    """Each import of the package at ``root`` that points up a layer, as
    ``path:line (note): importer (layer) -> imported (layer)``, sorted."""
    modules = _modules(root)
    package = root.name
    found: set[str] = set()
    for name, paths in modules.items():
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            notes = _contexts(tree)
            is_package = path.stem == "__init__"
            for target, _reads, node in _imports(tree, name, is_package, modules):
                if target.split(".")[0] != package:
                    continue
                for prefix in _prefixes(target)[1:2]:
                    if layer(prefix) in FORBIDDEN[layer(name)]:
                        found.add(
                            f"{path.relative_to(root.parent)}:{node.lineno}"
                            f"{notes.get(node, '')}: {name} ({layer(name)}) -> "
                            f"{target} ({layer(prefix)})"
                        )
    return sorted(found)


# -- the scan itself -------------------------------------------------------------------------


def test_layer_of_each_kind_of_module() -> None:
    assert layer("supervisor") == "core"
    assert layer("supervisor.gate") == "core"
    assert layer("supervisor.faults._inject._engine") == "toolkit"
    assert layer("supervisor.transports._faults") == "core"
    assert layer("supervisor.config._plan") == "core"
    assert layer("supervisor.faults") == "toolkit"
    assert layer("supervisor.testing.servers.tiny") == "toolkit"
    assert layer("supervisor.cli._chaos") == "top"
    assert layer("supervisor.__main__") == "top"


def test_scan_finds_every_kind_of_upward_import(tmp_path: Path) -> None:
    """Relative and absolute, in a function, under TYPE_CHECKING and in a stub: each
    upward import is found; downward ones and imports outside the package are not."""
    pkg = tmp_path / "supervisor"
    for folder in ("faults", "cli", "calls", "testing"):
        (pkg / folder).mkdir(parents=True)
    files = {
        "__init__.py": "",
        "gate.py": (
            "from typing import TYPE_CHECKING\nimport os\nfrom .calls import x\n"
            "if TYPE_CHECKING:\n    from .faults import CallHistory\n"
        ),
        "runtime.py": "def f():\n    import supervisor.testing.plugin\n",
        "calls/__init__.py": "x = 1\n",
        "calls/__init__.pyi": "from ..bench import y as y\n",
        "faults/__init__.py": "from ..calls import x\nfrom ..cli import main\n",
        "testing/__init__.py": "",
        "testing/plugin.py": "from .. import faults\n",
        "cli/__init__.py": "from ..faults import z\nfrom .. import gate\n",
        "__main__.py": "from .cli import main\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert layer_violations(pkg) == [
        "supervisor/calls/__init__.pyi:1: supervisor.calls (core) -> supervisor.bench (toolkit)",
        "supervisor/faults/__init__.py:2: supervisor.faults (toolkit) -> supervisor.cli (top)",
        "supervisor/gate.py:5 (TYPE_CHECKING): supervisor.gate (core) -> supervisor.faults "
        "(toolkit)",
        "supervisor/runtime.py:2 (in a function): supervisor.runtime (core) -> "
        "supervisor.testing.plugin (toolkit)",
    ]


# -- the package -----------------------------------------------------------------------------


def test_supervisor_imports_point_down_the_layers() -> None:
    """The core imports neither the toolkit nor the command line; the toolkit does not
    import the command line."""
    assert len(_modules(ROOT)) > 50  # the walk found the package
    violations = layer_violations(ROOT)
    assert not violations, "imports up a layer in supervisor/:\n" + "\n".join(violations)


def test_the_fault_injector_is_above_the_core_and_the_core_knows_its_interface() -> None:
    """The fault engine and every injection point (the stdio link, the HTTP and the
    message-level wrappers) are the toolkit's; the core's transports, server handle,
    runtime and gate import the interface they are given (``transports._faults``), and
    the record of an injected fault is the core's, the toolkit's the same class."""
    from supervisor.faults import Injector
    from supervisor.faults._inject import _engine, _http, _link, _points, _session
    from supervisor.transports import _faults

    for module in (_engine, _http, _link, _points, _session, sys.modules[Injector.__module__]):
        assert layer(module.__name__) == "toolkit", module.__name__
    assert not (ROOT / "injection").exists()
    assert _engine.Injected is _faults.Injected and _link.Target is _faults.FaultTarget
    modules = _modules(ROOT)
    for user in (
        "supervisor.transports._stdio",
        "supervisor.transports._http",
        "supervisor.transports._open",
        "supervisor.server._managed",
        "supervisor.runtime",
        "supervisor.calls._gate",
    ):
        (path,) = modules[user]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {t for t, _r, _n in _imports(tree, user, False, modules)}
        assert "supervisor.transports._faults" in targets, user
        assert not [t for t in targets if layer(t) != "core"], user


# -- the drawing in docs/supervision.md ------------------------------------------------------

DRAWING_PAGE = ROOT.parent / "docs" / "supervision.md"


def drawn_layout(text: str) -> dict[str, set[str]]:
    """The package's entries by layer, as the page's "How the package is laid out" block
    draws them: folders (``name/``) and modules (``name.py``) at the start of its
    entries, under the heading line of their layer (``supervisor/`` is the core)."""
    section = text.split("## How the package is laid out", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    found: dict[str, set[str]] = {}
    current = ""
    for line in block.splitlines():
        if not line.startswith(" "):
            current = {"supervisor/": "core"}.get(line.split()[0], line.split()[0])
            found.setdefault(current, set())
            continue
        head = line.strip().split("  ")[0]
        for entry in head.split(", "):
            if entry.endswith(("/", ".py")):
                found[current].add(entry.rstrip("/"))
    return found


def actual_layout(root: Path) -> dict[str, set[str]]:
    """The package's top-level folders and modules by layer."""
    found: dict[str, set[str]] = {"core": set(), "toolkit": set(), "top": set()}
    for path in root.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            found[layer(f"{root.name}.{path.name}")].add(path.name)
        elif path.suffix == ".py":
            found[layer(f"{root.name}.{path.stem}")].add(path.name)
    return found


def test_the_drawing_reads_folders_modules_and_layers() -> None:
    text = (
        "## How the package is laid out\n\n```text\nsupervisor/   core\n"
        "  a.py    one\n  b/      two (with c/ in the words)\n  _x.py, _y.py   both\n"
        "toolkit   above\n  t/   tools\ntop    on top\n  __main__.py   main\n```\n"
    )
    assert drawn_layout(text) == {
        "core": {"a.py", "b", "_x.py", "_y.py"},
        "toolkit": {"t"},
        "top": {"__main__.py"},
    }


def test_the_documented_layout_is_the_package_s() -> None:
    """docs/supervision.md draws every top-level folder and module of the package, each
    in its layer, and nothing that is not there."""
    assert drawn_layout(DRAWING_PAGE.read_text(encoding="utf-8")) == actual_layout(ROOT)


def test_the_shared_helpers_import_nothing_else_of_the_package() -> None:
    """``supervisor._util`` is the bottom: every part may use it, and it uses none of
    them (a helper that needs the log or the errors lives above it)."""
    up = []
    for name, paths in _modules(ROOT).items():
        if not name.startswith("supervisor._util"):
            continue
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for target, _reads, node in _imports(
                tree, name, path.stem == "__init__", _modules(ROOT)
            ):
                if target.startswith("supervisor.") and not target.startswith("supervisor._util"):
                    up.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {target}")
    assert not up, "supervisor._util imports above it:\n" + "\n".join(up)




def folder_pairs(root: Path) -> set[frozenset[str]]:
    """The pairs of the package's top-level folders (and modules) at ``root`` that each
    import the other, read as the cycle test reads imports."""
    graph, _where = import_graph(root)

    def top(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""

    edges = {
        (top(a), top(b))
        for a, targets in graph.items()
        for b in targets
        if top(a) and top(b) and top(a) != top(b)
    }
    return {frozenset(edge) for edge in edges if (edge[1], edge[0]) in edges}


def test_no_two_folders_import_each_other() -> None:
    """Each folder of the package sits above or below another, never both."""
    found = folder_pairs(ROOT)
    assert found == set(), f"folders importing each other: {found}"


# -- the core's tiers ------------------------------------------------------------------------


def drawn_tiers(text: str) -> list[tuple[str, set[str]]]:
    """The core's tiers as the page's drawing has them, the base first: each tier's name
    (a line indented by one space under ``supervisor/``) with the folders and modules
    drawn under it."""
    section = text.split("## How the package is laid out", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    tiers: list[tuple[str, set[str]]] = []
    in_core = False
    for line in block.splitlines():
        if not line.startswith(" "):
            in_core = line.split()[0] == "supervisor/"
        elif in_core and not line.startswith("  "):
            tiers.append((line.strip().split("  ")[0], set()))
        elif in_core and tiers:
            head = line.strip().split("  ")[0]
            tiers[-1][1].update(
                e.rstrip("/") for e in head.split(", ") if e.endswith(("/", ".py"))
            )
    return tiers


def tier_violations(root: Path, tiers: list[tuple[str, set[str]]]) -> list[str]:
    """Each import of a core folder or module of the package at ``root`` from a tier
    drawn after its own (an import up the tiers), as ``path:line: importer (tier) ->
    imported (tier)``, sorted; an entry of the core in no tier is one too."""
    graph, where = import_graph(root)
    tier_of = {entry: name for name, entries in tiers for entry in entries}
    order = [name for name, _entries in tiers]

    def entry(module: str) -> str:
        parts = module.split(".")
        if len(parts) == 1:
            return "__init__.py"
        return parts[1] if (root / parts[1]).is_dir() else f"{parts[1]}.py"

    found: set[str] = set()
    for importer, targets in graph.items():
        if layer(importer) != "core":
            continue
        here = entry(importer)
        if here not in tier_of:
            found.add(f"{here}: drawn in no tier")
            continue
        for target in targets:
            there = entry(target)
            if layer(target) != "core" or there == here:
                continue
            if there not in tier_of:
                found.add(f"{there}: drawn in no tier")
            elif order.index(tier_of[there]) > order.index(tier_of[here]):
                for place in where[(importer, target)]:
                    found.add(
                        f"{place}: {importer} ({tier_of[here]}) -> {target} ({tier_of[there]})"
                    )
    return sorted(found)


def test_the_tier_scan_finds_an_import_up_the_tiers(tmp_path: Path) -> None:
    pkg = tmp_path / "supervisor"
    for folder in ("base", "server", "gate"):
        (pkg / folder).mkdir(parents=True)
    files = {
        "__init__.py": "",
        "base/__init__.py": "",
        "base/_x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ..gate import g\n",
        "server/__init__.py": "from ..base import _x\n",
        "gate/__init__.py": "from ..server import s\nfrom .. import runtime\n",
        "runtime.py": "def f():\n    from .server import s\n",
        "loose.py": "",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    text = (
        "## How the package is laid out\n\n```text\nsupervisor/   core\n the base\n"
        "  base/   one\n                 base/ in the words\n one server   words\n  server/\n"
        " the gate\n  gate/, runtime.py\n  __init__.py\ntoolkit\n  faults/\n```\n"
    )
    tiers = drawn_tiers(text)
    assert tiers == [
        ("the base", {"base"}),
        ("one server", {"server"}),
        ("the gate", {"gate", "runtime.py", "__init__.py"}),
    ]
    assert tier_violations(pkg, tiers) == [
        "loose.py: drawn in no tier",
        "supervisor/base/_x.py:3 (TYPE_CHECKING): supervisor.base._x (the base) -> "
        "supervisor.gate (the gate)",
    ]


def test_the_core_imports_point_down_its_tiers() -> None:
    """docs/supervision.md draws the core in tiers, the base first; each folder and
    module imports only from its own tier and those drawn before it."""
    tiers = drawn_tiers(DRAWING_PAGE.read_text(encoding="utf-8"))
    assert len(tiers) >= 5 and {e for _n, es in tiers for e in es} == actual_layout(ROOT)["core"]
    violations = tier_violations(ROOT, tiers)
    assert not violations, (
        "imports up the core's tiers (move the module, or redraw the tiers in "
        "docs/supervision.md):\n" + "\n".join(violations)
    )
