"""The SDK boundary (:mod:`supervisor._sdk`): each use of the ``mcp`` SDK's non-public
surface it lists still exists as it was in the installed SDK, and no other module of the
package reaches past the SDK's public API. Each failure names the installed SDK version
and what changed, so an SDK release that moves a touchpoint fails here first, not
silently in a session eviction, a task or a login.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import pkgutil
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from mcp.client.auth import OAuthClientProvider

from supervisor import _sdk
from supervisor.auth._workload import WorkloadIdentityOAuthProvider

SDK = version("mcp")
PACKAGE = Path(_sdk.__file__).parent
SDK_ROOT = Path(importlib.import_module("mcp").__file__ or "").parent


def _owner(touch: _sdk.Touchpoint) -> object:
    module, _, name = touch.owner.partition(":")
    found: object = importlib.import_module(module)
    return getattr(found, name) if name else found


@pytest.mark.parametrize("touch", _sdk.TOUCHPOINTS, ids=lambda t: f"{t.owner}.{t.name}")
def test_each_touchpoint_is_still_there(touch: _sdk.Touchpoint) -> None:
    said = f"mcp {SDK}: {touch.owner} no longer has {touch.name} ({touch.kind})"
    why = f"; supervisor/_sdk.py uses it for {touch.why}"
    try:
        owner = _owner(touch)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"mcp {SDK}: {touch.owner} is gone ({exc}){why}")
    if touch.kind == "module":
        assert hasattr(owner, touch.name), said + why
    elif touch.kind == "method":
        assert callable(getattr(owner, touch.name, None)), said + why
    else:  # an instance attribute: set in the class's own code
        assert isinstance(owner, type)
        classes = [cls for cls in owner.__mro__ if cls.__module__.split(".")[0] == "mcp"]
        source = "".join(inspect.getsource(cls) for cls in classes)
        assert re.search(rf"self\.{touch.name}\s*[:=]", source), said + why


#: The ``OAuthClientProvider`` hooks :class:`supervisor._sdk.OAuthProvider` hands to its
#: public names, with the parameters each takes: renamed or gone, a grant would silently
#: become the SDK's default authorization-code flow.
PROVIDER_HOOKS = {
    "_initialize": ["self"],
    "_expected_issuer": ["self"],
    "_select_authorization_server": ["self", "advertised"],
    "_perform_authorization": ["self"],
    "_handle_token_response": ["self", "response"],
}


@pytest.mark.parametrize("hook", sorted(PROVIDER_HOOKS))
def test_the_provider_hooks_take_what_they_took(hook: str) -> None:
    found = getattr(OAuthClientProvider, hook)
    params = list(inspect.signature(found).parameters)
    assert params == PROVIDER_HOOKS[hook], (
        f"mcp {SDK}: OAuthClientProvider.{hook}{inspect.signature(found)} changed; "
        f"supervisor/_sdk.py overrides it as {hook}({', '.join(PROVIDER_HOOKS[hook])})"
    )
    assert getattr(_sdk.OAuthProvider, hook) is not found
    assert getattr(WorkloadIdentityOAuthProvider, hook) is getattr(_sdk.OAuthProvider, hook)


def test_the_provider_s_flow_still_goes_through_its_hooks() -> None:
    """The SDK's flow (``_auth_flow``, which ``async_auth_flow`` drives) calls
    ``_initialize``, ``_perform_authorization`` (the grant's token request) and
    ``_handle_token_response``: a flow that stopped calling them would skip the grant."""
    flow = inspect.getsource(OAuthClientProvider._auth_flow)
    for hook in ("_initialize", "_perform_authorization", "_handle_token_response"):
        assert hook in flow, f"mcp {SDK}: OAuthClientProvider._auth_flow no longer calls {hook}"


# -- nothing else reaches past the public API -------------------------------------------


def _sdk_private_names() -> set[str]:
    """Every ``_name`` the SDK's source defines or sets (``def _x``, ``self._x``)."""
    found: set[str] = set()
    for path in SDK_ROOT.rglob("*.py"):
        found |= set(re.findall(r"(?:def |self\.)(_[a-z][a-z0-9_]*)", path.read_text()))
    return found


def _ours() -> tuple[dict[Path, ast.Module], set[str]]:
    """Each module of the package, parsed; and every ``_name`` the package itself
    defines (a function, a class, an attribute set on ``self`` or ``cls``)."""
    trees = {path: ast.parse(path.read_text()) for path in PACKAGE.rglob("*.py")}
    defined: set[str] = set()
    for path, tree in trees.items():
        if path.name == "_sdk.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                defined.add(node.attr)
    return trees, defined


def test_no_module_but_the_boundary_reaches_past_the_sdk_s_public_api() -> None:
    """Outside ``supervisor/_sdk.py``: no import of a private ``mcp`` module (or of a
    private name from one), and no attribute of the SDK's that the package does not
    define itself read or set on another object (``getattr`` with its name included)."""
    private = _sdk_private_names()
    trees, ours = _ours()
    found = []
    for path, tree in sorted(trees.items()):
        if path.name == "_sdk.py":
            continue
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                modules = [node.module] if isinstance(node, ast.ImportFrom) else []
                modules += [] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for module in filter(None, modules):
                    if module.split(".")[0] != "mcp":
                        continue
                    if any(part.startswith("_") for part in module.split(".")):
                        found.append(f"{where}:{node.lineno} imports {module}")
                    if isinstance(node, ast.ImportFrom):
                        found += [
                            f"{where}:{node.lineno} imports {module}.{a.name}"
                            for a in node.names
                            if a.name.startswith("_")
                        ]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in private - ours
            ):
                found.append(f"{where}:{node.lineno} uses .{node.args[1].value}")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr in private
                and node.attr not in ours
            ):
                found.append(f"{where}:{node.lineno} uses .{node.attr}")
    assert not found, "the SDK's private surface outside supervisor/_sdk.py:\n" + "\n".join(found)


def test_every_touchpoint_is_used_by_the_boundary() -> None:
    """What :data:`~supervisor._sdk.TOUCHPOINTS` lists is what the module touches: no
    entry left behind once its use is gone."""
    source = Path(_sdk.__file__).read_text()
    start = source.index("TOUCHPOINTS = (")
    code = source[:start] + source[source.index("\n)\n", start) :]
    for touch in _sdk.TOUCHPOINTS:
        used = touch.name in code
        assert used, f"supervisor/_sdk.py lists {touch.owner}.{touch.name} but does not use it"


def test_no_subclass_but_the_boundary_s_overrides_the_sdk_s_private_methods() -> None:
    """Every class of the package that derives from one of the SDK's (each module
    imported) overrides none of its private methods but in ``supervisor/_sdk.py``: a
    subclass hook is taken under the boundary's public name for it."""
    found = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "supervisor."):
        if info.name.endswith("__main__"):
            continue  # runs the command line
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed (a framework's bridge)
            continue
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            if module.__name__ == "supervisor._sdk":
                continue
            sdk_bases = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] == "mcp"]
            found += [
                f"{module.__name__}.{cls.__name__} overrides {base.__name__}.{name}"
                for name in vars(cls)
                if name.startswith("_") and not name.startswith(("__", "_abc_"))
                for base in sdk_bases
                if name in vars(base)
            ]
    assert not found, "SDK private methods overridden outside supervisor/_sdk.py:\n" + "\n".join(
        found
    )


@pytest.mark.parametrize("level", [None, "debug"])
def test_the_stamp_s_envelope_is_the_same_for_every_tools_call(level: str | None) -> None:
    """:func:`supervisor._sdk.stamp` learns what a session's stamp adds to a
    ``tools/call`` once and writes it itself: the request it makes is the stamp's own,
    key for key and in order, whatever ``_meta`` the request brings (a log level of its
    own comes first) — for a 2026-07-28 session's stamp and the session-based one's."""
    from mcp.client.session import _make_handshake_stamp, _make_modern_stamp

    def headers(name: str, arguments: object) -> dict[str, str]:
        return {"Mcp-Param-X": name}

    info, capabilities = {"name": "supervisor", "version": "1"}, {"roots": {}}
    stamps = [
        _make_modern_stamp("2026-07-28", info, capabilities, headers, log_level=level),  # type: ignore[arg-type]
        _make_handshake_stamp("2025-11-25"),
    ]
    requests: list[dict[str, object]] = [
        {"name": "echo", "arguments": {"text": "hi"}},
        {"name": "echo", "arguments": {}, "_meta": {"supervisor/callId": "c1"}},
        {"name": "other", "_meta": {"io.modelcontextprotocol/logLevel": "error", "a": 1}},
    ]
    for made in stamps:

        class Session:
            _stamp = staticmethod(made)

        for _ in range(2):  # learnt, then as learnt
            for params in requests:
                theirs = {"method": "tools/call", "params": copy.deepcopy(params)}
                made(theirs, {})
                ours = {"method": "tools/call", "params": copy.deepcopy(params)}
                _sdk.stamp(Session(), ours)  # type: ignore[arg-type]
                assert json.dumps(ours) == json.dumps(theirs), (made, params)


def test_the_stamp_gives_a_remote_request_its_headers() -> None:
    """:func:`supervisor._sdk.stamped` runs a session's stamp on a ``tools/call`` and
    returns the headers it gives the request (a forwarded call to a remote server sends
    them): the protocol version, and under 2026-07-28 the method, the name and the
    ``Mcp-Param-*`` headers the listed schema names."""
    from mcp.client.session import _make_handshake_stamp, _make_modern_stamp

    def param_headers(name: str, arguments: dict[str, object]) -> dict[str, str]:
        return {"Mcp-Param-Region": str(arguments["region"])}

    modern = _make_modern_stamp("2026-07-28", {"name": "s", "version": "1"}, {}, param_headers)  # type: ignore[arg-type]
    for made, expected in [
        (
            modern,
            {
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "where",
                "mcp-param-region": "eu",
            },
        ),
        (_make_handshake_stamp("2025-11-25"), {"mcp-protocol-version": "2025-11-25"}),
    ]:

        class Session:
            _stamp = staticmethod(made)

        request = {
            "method": "tools/call",
            "params": {"name": "where", "arguments": {"region": "eu"}},
        }
        headers = _sdk.stamped(Session(), request)  # type: ignore[arg-type]
        assert {k.lower(): v for k, v in headers.items()} == expected, made
