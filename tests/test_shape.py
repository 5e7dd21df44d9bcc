"""Each class one job: the classes split along their seams stay split.

Each class below is held under a budget of lines and methods, and each module holding
one under a budget of lines; each owner's module names its parts, so a reader starts
there. A class over its budget has most likely taken on a second job. The fix is not a
larger budget: split the class along the seam its methods already have — a group of
methods that share a few attributes and that the rest reach through a handful of calls —
into a small class of its own, in a module of its own in the same folder with a
docstring that says its one job, held by the original and named in its docstring (see
how ``server/_managed.py``'s ``ServerHandle`` holds its parts). Raise a budget only for
growth within the class's one job, and say why in the commit.

Read from the source with :mod:`ast`: nothing of the package is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "supervisor"

#: Each owner, (module, class), and its parts, (module, class) -> (at most so many lines,
#: at most so many methods): the class statement's lines with its docstrings and
#: comments; its ``def`` and ``async def`` (properties included).
OWNERS: dict[tuple[str, str], dict[tuple[str, str], tuple[int, int]]] = {
    # the server's handle: a façade over its parts, with its config, child spec,
    # read-only views of its state and its reports
    ("server/_managed.py", "ServerHandle"): {
        ("server/_managed.py", "ServerHandle"): (500, 56),
        ("server/_admission.py", "Admission"): (150, 8),
        ("server/_calling.py", "ToolCalls"): (150, 5),
        ("server/_failing.py", "Failing"): (250, 10),
        ("server/_injection.py", "FaultInjection"): (120, 8),
        ("server/_reading.py", "Reading"): (200, 15),
        ("server/_reads.py", "Reads"): (150, 10),
        ("server/_tasks_made.py", "TasksMade"): (60, 5),
    },
    # the server's actor: its mailbox, the loop of its sessions, its probes
    ("server/_actor.py", "ServerActor"): {
        ("server/_actor.py", "ServerActor"): (200, 15),
        ("server/_connect.py", "Connector"): (220, 10),
        ("server/_link.py", "Link"): (90, 8),
        ("server/_login.py", "Login"): (75, 5),
        ("server/_requests.py", "Requests"): (180, 6),
        ("server/_direct.py", "DirectCalls"): (80, 6),
        ("server/_reports.py", "Reports"): (125, 8),
    },
    # the token broker: tokens handed out, renewals and logins served one at a time by
    # what it is given (a per-user broker is given its own), and its state
    ("auth/_broker.py", "TokenBroker"): {
        ("auth/_broker.py", "TokenBroker"): (310, 30),
        ("auth/_status.py", "Status"): (70, 5),
        ("auth/_renewal.py", "Renewals"): (160, 7),
        ("auth/_exchange.py", "Exchange"): (190, 7),
        ("auth/_authorize.py", "Authorization"): (260, 12),
        ("auth/_providers.py", "Providers"): (220, 10),
        ("auth/_discovery.py", "Discovery"): (100, 5),
        ("auth/_held.py", "HeldToken"): (100, 8),
        ("auth/_proofs.py", "Proofs"): (120, 8),
    },
    # each team-gateway caller's own logins to the perUser servers
    ("auth/_users.py", "UserLogins"): {
        ("auth/_users.py", "UserLogins"): (210, 14),
        ("auth/_user_brokers.py", "UserBrokers"): (140, 7),
        ("auth/_tickets.py", "Tickets"): (70, 5),
        ("auth/_binding.py", "BrowserBinding"): (60, 5),
        ("auth/_handover.py", "Handover"): (95, 5),
    },
    # a supervisor node of the tree (OTP's supervisor)
    ("actors/_tree.py", "Tree"): {
        ("actors/_tree.py", "Tree"): (320, 26),
        ("actors/_children.py", "Children"): (140, 16),
        ("actors/_incarnations.py", "Incarnations"): (190, 10),
        ("actors/_restarts.py", "Restarts"): (300, 10),
        ("actors/_operations.py", "Operations"): (170, 15),
    },
    # the stdio transport, the child spawner: one connection, and how it ended
    ("transports/_stdio.py", "StdioTransport"): {
        ("transports/_stdio.py", "StdioTransport"): (300, 14),
        ("transports/_spawn.py", "Spawner"): (130, 6),
        ("transports/_stdout.py", "StdoutReader"): (95, 4),
        ("transports/_conversation.py", "Conversation"): (70, 4),
        ("transports/_stdin.py", "StdinWriter"): (135, 5),
        ("transports/_intake.py", "Intake"): (90, 4),
        ("transports/_forward.py", "Forwarding"): (210, 13),
        ("transports/_capture.py", "StderrCapture"): (100, 8),
        ("transports/_bounded.py", "BoundsWatch"): (80, 4),
        ("transports/_group.py", "ProcessGroup"): (110, 6),
        ("transports/_fault_point.py", "FaultPoint"): (115, 9),
    },
    # the gateway: a thin owner of its parts
    ("gateway/_core.py", "Gateway"): {
        ("gateway/_core.py", "Gateway"): (260, 18),
        ("gateway/_served.py", "Served"): (150, 12),
        ("gateway/_access.py", "Access"): (100, 10),
        ("gateway/_asking.py", "Asking"): (100, 6),
        ("gateway/_announce.py", "Announcer"): (90, 7),
        ("gateway/_tool_requests.py", "ToolRequests"): (150, 6),
        ("gateway/_call_answers.py", "CallAnswers"): (130, 6),
        ("gateway/_resource_requests.py", "ResourceRequests"): (160, 8),
        ("gateway/_prompt_requests.py", "PromptRequests"): (110, 6),
        ("gateway/_documents.py", "Documents"): (80, 6),
        ("gateway/_server.py", "GatewayServer"): (70, 3),
    },
}
BUDGETS = {part: budget for parts in OWNERS.values() for part, budget in parts.items()}

#: The most lines a module holding one of these classes may have ...
MODULE_LINES = 360
#: ... but for these, which hold more beside it: the broker's account of how it works
#: and its actor, the handle's typed overloads of its requests.
LARGER_MODULES = {"auth/_broker.py": 400, "server/_managed.py": 600}


def class_size(path: Path, name: str) -> tuple[int, int]:
    """The lines and the methods (``def``, ``async def``, properties included) of the
    class ``name`` in the module at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            assert node.end_lineno is not None
            methods = [
                item
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            return node.end_lineno - node.lineno + 1, len(methods)
    raise AssertionError(f"no class {name} in {path}: update the budgets")


@pytest.mark.parametrize(("module", "name"), sorted(BUDGETS), ids=lambda x: x)
def test_each_class_stays_within_its_budget(module: str, name: str) -> None:
    lines, methods = class_size(PACKAGE / module, name)
    most_lines, most_methods = BUDGETS[module, name]
    assert lines <= most_lines and methods <= most_methods, (
        f"{name} (supervisor/{module}) has {lines} lines and {methods} methods, over its "
        f"budget of {most_lines} lines and {most_methods} methods: it has likely taken on "
        "another job. Split it along a seam (methods that share a few attributes) into a "
        "class of its own, in a module of its own that it holds; see this file's docstring"
    )


@pytest.mark.parametrize("module", sorted({module for module, _name in BUDGETS}))
def test_each_module_holding_one_stays_small(module: str) -> None:
    lines = len((PACKAGE / module).read_text(encoding="utf-8").splitlines())
    most = LARGER_MODULES.get(module, MODULE_LINES)
    assert lines <= most, (
        f"supervisor/{module} has {lines} lines, over its {most}: move a part of it into a "
        "module of its own in the same folder"
    )


@pytest.mark.parametrize(("module", "name"), sorted(OWNERS), ids=lambda x: x)
def test_each_owner_names_its_parts(module: str, name: str) -> None:
    """The owner's module (its docstring or its class's) names each part, so a reader
    looking for what it does starts there."""
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    said = ast.get_docstring(tree) or ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            said += ast.get_docstring(node) or ""
    missing = [part for _m, part in OWNERS[module, name] if part != name and part not in said]
    assert not missing, f"supervisor/{module} does not name {name}'s parts {missing}"


def test_a_class_size_counts_its_lines_and_methods(tmp_path: Path) -> None:
    """The check itself: a class's lines run from ``class`` to its last line, and every
    ``def`` and ``async def`` directly in it is a method (nested ones are not)."""
    source = (
        "class A:\n"
        "    x = 1\n"
        "\n"
        "    @property\n"
        "    def a(self):\n"
        "        def inner():\n"
        "            pass\n"
        "\n"
        "    async def b(self):\n"
        "        pass\n"
    )
    module = tmp_path / "m.py"
    module.write_text(source)
    assert class_size(module, "A") == (10, 2)
    with pytest.raises(AssertionError, match="no class B"):
        class_size(module, "B")
