"""Each class one job: the classes split along their seams stay under a size budget.

A class that has grown past its budget has taken on another job: split it along the
seam its methods already have — a group of methods sharing a few attributes, which the
rest reach through a handful of calls — into a small class in a module of its own in
the same folder, which the original holds and delegates to (and names in its
docstring). Raising a budget instead needs a reason a reviewer accepts.

Read from the source with :mod:`ast`: nothing of the package is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "supervisor"

#: (module, class) -> (most lines, most methods): the class statement's lines, with its
#: docstrings and comments; its methods, properties counted.
BUDGETS: dict[tuple[str, str], tuple[int, int]] = {
    # the token broker and its parts (supervisor/auth)
    ("auth/_broker.py", "TokenBroker"): (420, 36),
    ("auth/_authorize.py", "Authorization"): (260, 12),
    ("auth/_providers.py", "Providers"): (220, 10),
    ("auth/_discovery.py", "Discovery"): (100, 5),
    ("auth/_held.py", "HeldToken"): (100, 8),
    ("auth/_proofs.py", "Proofs"): (120, 8),
    # the supervisor node and its parts (supervisor/actors)
    ("actors/_tree.py", "Tree"): (320, 26),
    ("actors/_children.py", "Children"): (140, 16),
    ("actors/_incarnations.py", "Incarnations"): (190, 10),
    ("actors/_restarts.py", "Restarts"): (300, 10),
    ("actors/_operations.py", "Operations"): (170, 15),
}

#: No module holding one of these classes grows past this many lines.
MODULE_LINES = 600


def _class(module: str, name: str) -> ast.ClassDef:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"supervisor/{module} has no class {name}")


def _size(node: ast.ClassDef) -> tuple[int, int]:
    """A class's lines and methods (``def`` and ``async def`` in its body)."""
    assert node.end_lineno is not None
    methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return node.end_lineno - node.lineno + 1, len(methods)


@pytest.mark.parametrize(("module", "name"), sorted(BUDGETS), ids=lambda x: x)
def test_a_split_class_stays_within_its_budget(module: str, name: str) -> None:
    most_lines, most_methods = BUDGETS[module, name]
    lines, methods = _size(_class(module, name))
    assert lines <= most_lines and methods <= most_methods, (
        f"{name} (supervisor/{module}) is {lines} lines / {methods} methods, over its "
        f"budget of {most_lines} / {most_methods}: it has taken on another job. Split it "
        "along a seam (methods that share a few attributes become a small class in a "
        "module of its own, which it holds and delegates to) rather than raise the budget."
    )


def test_their_modules_stay_small() -> None:
    sizes = {
        module: len((PACKAGE / module).read_text(encoding="utf-8").splitlines())
        for module, _ in BUDGETS
    }
    big = {module: n for module, n in sizes.items() if n > MODULE_LINES}
    assert not big, (
        f"modules over {MODULE_LINES} lines: {big}; move a part of theirs into a module of "
        "its own in the same folder"
    )


def test_the_budget_reads_what_it_says() -> None:
    """The measure itself: lines from ``class`` to its last line, methods of any kind."""
    source = (
        "class A:\n"
        '    """doc"""\n'
        "    x = 1\n"
        "    def f(self): ...\n"
        "    async def g(self): ...\n"
        "    @property\n"
        "    def h(self): ...\n"
    )
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    assert _size(node) == (7, 3)


# -- the server actor and its parts --

ACTOR_ROOT = Path(__file__).resolve().parent.parent / "supervisor"

#: The server actor and its parts: (module, class) -> (most lines, most methods).
SERVER_ACTOR = {
    ("server/_actor.py", "ServerActor"): (200, 15),
    ("server/_connect.py", "Connector"): (220, 10),
    ("server/_link.py", "Link"): (90, 8),
    ("server/_login.py", "Login"): (75, 5),
    ("server/_requests.py", "Requests"): (180, 6),
    ("server/_direct.py", "DirectCalls"): (80, 6),
    ("server/_reports.py", "Reports"): (125, 8),
}
#: Lines a module holding one of these classes may have at most.
ACTOR_MODULE_LINES = 350


def _actor_class(module: str, name: str) -> ast.ClassDef:
    tree = ast.parse((ACTOR_ROOT / module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"supervisor/{module} has no class {name}")


@pytest.mark.parametrize(("module", "name"), sorted(SERVER_ACTOR))
def test_a_server_actor_part_stays_within_its_budget(module: str, name: str) -> None:
    most_lines, most_methods = SERVER_ACTOR[module, name]
    node = _actor_class(module, name)
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    advice = (
        "split it along a seam: a group of its methods that share a few attributes becomes "
        "a class of its own in a module of its own in supervisor/server/, held by the actor "
        "and named in supervisor/server/_actor.py's docstring"
    )
    assert lines <= most_lines, (
        f"{name} (supervisor/{module}) has {lines} lines, over its {most_lines}: {advice}"
    )
    assert len(methods) <= most_methods, (
        f"{name} (supervisor/{module}) has {len(methods)} methods, over its {most_methods}: "
        + advice
    )
    total = len((ACTOR_ROOT / module).read_text(encoding="utf-8").splitlines())
    assert total <= ACTOR_MODULE_LINES, (
        f"supervisor/{module} has {total} lines, over {ACTOR_MODULE_LINES}: {advice}"
    )


def test_the_server_actor_names_its_parts() -> None:
    """The actor's module docstring lists each of its parts, so a reader starts there."""
    tree = ast.parse((ACTOR_ROOT / "server/_actor.py").read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree) or ""
    missing = [
        name for module, name in SERVER_ACTOR if name != "ServerActor" and name not in docstring
    ]
    assert not missing, f"supervisor/server/_actor.py's docstring does not name {missing}"
