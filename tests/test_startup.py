"""Start-up: ``import supervisor``, every ``--help``, ``check`` and ``list`` load only what
they need (no MCP SDK, HTTP stack, trio or structlog); the lazy façades still give every
public name.

What is loaded is checked, not how long it takes: the time is the bench's
``cli_help_ms``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
from importlib.util import resolve_name
from pathlib import Path
from types import ModuleType

import pytest

import supervisor
import supervisor.actors
import supervisor.calls
import supervisor.faults
import supervisor.faults._inject
import supervisor.gateway
import supervisor.testing
from supervisor._lazy import table
from supervisor.cli import _command_of, build_parser
from supervisor.transports._programs import exec_path
from supervisor.transports._stdio import child_environment

PACKAGE = Path(supervisor.__file__).parent

#: Top-level packages a command that starts no server must not load.
HEAVY = sorted(
    {
        "anyio", "h11", "h2", "httpx", "httpx2", "hypercorn", "jsonschema", "jwt", "mcp",
        "mcp_types", "pydantic", "rich", "structlog", "trio", "trio_websocket",
    }
)  # fmt: skip

# Runs in a fresh interpreter: what `import supervisor`, each command's --help, `check`
# and `check -vv` load, as JSON.
PROBE = r"""
import argparse, contextlib, io, json, sys

heavy_names, config = set(json.loads(sys.argv[1])), sys.argv[2]


def heavy():
    return sorted({m.partition(".")[0] for m in sys.modules} & heavy_names)


import supervisor

found = {"import": sorted(m for m in sys.modules if m.startswith("supervisor."))}

from supervisor.cli import build_parser, main


def commands(parser, line=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*line, name)
                yield from commands(sub, (*line, name))


found["commands"] = [" ".join(line) for line in commands(build_parser())]
for line in [(), *commands(build_parser())]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        main([*line, "--help"])
    assert out.getvalue().startswith("usage: mcp-supervisor"), line
found["help"] = heavy()
with contextlib.redirect_stdout(io.StringIO()) as out:
    found["check"] = [main(["check", "--config", config]), out.getvalue(), heavy()]
with contextlib.redirect_stdout(io.StringIO()) as out:
    found["list"] = [main(["list", "--config", config]), out.getvalue(), heavy()]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
    found["check -vv"] = [main(["check", "-vv", "--config", config]), err.getvalue()]
print(json.dumps(found))
"""


def test_help_and_check_load_no_heavy_package(tmp_path: Path) -> None:
    """``import supervisor`` loads none of its modules but the façade's helper; every
    command's ``--help``, ``check`` and ``list`` of a valid config load no SDK, HTTP stack, trio or
    structlog; ``check -vv`` still configures logging and shows its debug lines."""
    config = tmp_path / "mcp.json"
    servers = {"local": {"command": sys.executable}, "web": {"url": "http://127.0.0.1:9/mcp"}}
    config.write_text(json.dumps({"mcpServers": servers, "preferences": {}}))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["import"] == ["supervisor._lazy"]
    assert {"check", "tools", "call", "serve", "chaos", "auth", "bench"} <= {
        line.split()[0] for line in found["commands"]
    }
    assert found["help"] == []
    code, out, loaded = found["check"]
    assert (code, out.splitlines()[0], loaded) == (0, f"{config}: 2 servers", [])
    code, out, loaded = found["list"]
    assert (code, loaded) == (0, []) and "local" in out and "http://127.0.0.1:9/mcp" in out
    code, err = found["check -vv"]
    assert code == 0 and "ignored the client's own top-level keys" in err


#: Every package whose ``__init__.py`` is a lazy façade (has a table).
FACADES = [
    importlib.import_module(".".join(path.parent.relative_to(PACKAGE.parent).parts))
    for path in sorted(PACKAGE.rglob("__init__.py"))
    if "\nif TYPE_CHECKING:\n" in path.read_text(encoding="utf-8")
]


@pytest.mark.parametrize("module", FACADES, ids=lambda m: m.__name__)
def test_a_lazy_facade_gives_every_public_name(module: ModuleType) -> None:
    """A lazy façade's ``__all__`` is its table's names, sorted; each name resolves to
    its module's object and is listed by ``dir()``; an unknown name is an AttributeError
    naming the package."""
    sources = table(module.__name__)
    assert module.__all__ == sorted(sources)
    listed = dir(module)
    for name, source in sources.items():
        assert name in listed
        value = getattr(module, name)
        assert value is getattr(sys.modules[resolve_name(source, module.__name__)], name), name
    with pytest.raises(AttributeError, match=f"module '{module.__name__}' has no attribute"):
        module.NoSuchName  # noqa: B018 - the lookup is what is tested


def test_star_import_and_submodules_through_the_facade() -> None:
    """``from supervisor import *`` binds every public name, and a submodule is still
    imported by name (``from supervisor import events``) past the lazy ``__getattr__``."""
    namespace: dict[str, object] = {}
    exec("from supervisor import *", namespace)  # noqa: S102 - a fixed statement
    assert set(supervisor.__all__) <= set(namespace)
    assert namespace["ConfigError"] is sys.modules["supervisor.errors"].ConfigError
    exec("from supervisor import events", namespace)  # noqa: S102 - a fixed statement
    assert namespace["events"] is sys.modules["supervisor.events"]
    assert isinstance(supervisor.__version__, str) and supervisor.__version__


@pytest.mark.parametrize("inherit_env", [False, True])
@pytest.mark.parametrize(
    "env", [None, {}, {"OTHER": "1"}, {"PATH": "/opt/x/bin:/opt/y/bin"}], ids=repr
)
def test_check_looks_programs_up_where_the_transport_starts_them(
    env: dict[str, str] | None, inherit_env: bool
) -> None:
    """``check`` finds a program on the same PATH as the environment the stdio transport
    gives the server process (its own env PATH, else ours), without loading the SDK."""
    assert exec_path(env) == os.get_exec_path(child_environment(env, inherit_env=inherit_env))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_each_command_s_own_parser_is_the_one_the_whole_parser_has() -> None:
    """``main`` builds only the parser of the command it runs (the others cost start-up
    time): for every command it has the same help, and parses a command line alike; a
    name that is no command gets the whole parser, whose error lists them all."""
    whole = _subcommands(build_parser())
    for name, full in whole.items():
        only = _subcommands(build_parser(only=name))
        assert list(only) == [name]
        assert only[name].format_help() == full.format_help(), name
        if name == "auth":
            assert _subcommands(only[name]).keys() == _subcommands(full).keys()
    lines = [
        ["-v", "call", "--config", "f.json", "echo_echo", '{"text": "x"}', "--json"],
        ["tools", "--config", "f.json", "--json"],
        ["add", "x", "--env", "K", "--", "npx", "-y", "server", "--flag"],
        ["auth", "login", "remote", "--config", "f.json"],
        ["serve", "--http", "127.0.0.1:0", "--tool-search", "-y"],
        ["bench", "--quick", "--only", "gateway_*"],
    ]
    for argv in lines:
        assert _command_of(argv) == argv[argv[0] == "-v"]
        assert vars(build_parser(only=_command_of(argv)).parse_args(argv)) == vars(
            build_parser().parse_args(argv)
        ), argv
    assert [_command_of(a) for a in (["--help"], [], ["-vv"], ["-x", "call"])] == [None] * 4
    assert list(_subcommands(build_parser(only="frobnicate"))) == list(whole)
    for argv in (["status", "--bogus"], ["auth", "logout", "--jsn"], ["auth", "lgout"]):
        assert _mistake(build_parser(only=argv[0]), argv) == _mistake(build_parser(), argv)


def _mistake(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """What ``parser`` says on stderr of the mistaken command line ``argv`` (it exits 2)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    return err.getvalue()
