"""Expansion: ``${VAR}`` references, ``envFile`` files, and a validated server made final.

Templates are the strings of ``command``, ``args``, ``env``, ``envFile``, ``cwd``, ``url``,
``headers`` and the paths of ``sandbox.filesystem``; in them ``${NAME}``,
``${NAME:-default}``, ``${env:NAME}``, the built-ins ``${PROJECT_ROOT}``,
``${workspaceFolder}`` and ``${userHome}``, and (in OpenCode's ``mcp`` section)
``{env:NAME}`` are replaced; ``$${`` is a literal ``${``. A malformed reference is
a structural error (:func:`_parse_template` raises); a variable that is not set is an
environmental one: :func:`~._build._build_server` records it in
:attr:`~supervisor.config.ServerConfig.errors` and leaves that field unexpanded. What a
reference to a variable whose name looks secret (``${GITHUB_TOKEN}``, ``${DB_PASSWORD}``)
expanded to is recorded too, wherever it went
(:attr:`~supervisor.config.ServerConfig.secret_values`): it is a secret.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..errors import FieldError
from ._secrets import _secretish
from ._validate import _Bad

_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
#: OpenCode's own syntax, read in the ``mcp`` section: ``{env:NAME}`` (and ``{file:...}``).
_OPENCODE_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{|\{env:([^{}]*)\}|\{file:[^{}]*\}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BUILTINS = ("PROJECT_ROOT", "workspaceFolder", "userHome")
_ESCAPE = re.compile(r'\\([n"\\])')


class _Var(msgspec.Struct, frozen=True):
    name: str
    default: str | None = None
    builtin: bool = False
    input: bool = False


def _parse_template(template: str, opencode: bool = False) -> list[str | _Var]:
    """Split a template into literal text and variable references; ``_Bad`` if malformed.

    ``opencode`` also reads OpenCode's ``{env:NAME}``.
    """
    parts: list[str | _Var] = []
    end = 0
    for m in (_OPENCODE_REFERENCE if opencode else _REFERENCE).finditer(template):
        parts.append(template[end : m.start()])
        end = m.end()
        if m.group() == "$${":
            parts.append("${")
            continue
        if m.group().startswith("{file:"):
            raise _Bad("OpenCode's {file:...} is not supported; use ${NAME} instead")
        if m.group().startswith("{env:"):
            parts.append(_parse_reference("env:" + m.group(2)))
            continue
        inner = m.group(1)
        if inner is None:
            raise _Bad("unterminated or nested ${...}; write $${ for a literal ${")
        parts.append(_parse_reference(inner))
    parts.append(template[end:])
    return [p for p in parts if p != ""]


def _parse_reference(inner: str) -> _Var:
    if inner.startswith("input:"):
        return _Var(inner[len("input:") :], input=True)
    namespaced = inner.startswith("env:")
    if namespaced:
        inner = inner[len("env:") :]
    name, sep, default = inner.partition(":-")
    if not _VARIABLE.match(name):
        raise _Bad(
            "unsupported ${...}: use ${NAME}, ${NAME:-default}, ${env:NAME}, "
            "${PROJECT_ROOT}, ${workspaceFolder} or ${userHome}"
        )
    builtin = not namespaced and name in _BUILTINS
    return _Var(name, default if sep else None, builtin=builtin)


def _is_literal(template: str, opencode: bool) -> bool:
    """Whether a (well-formed) template contains no variable references."""
    try:
        return all(isinstance(part, str) for part in _parse_template(template, opencode))
    except _Bad:
        return False


class _Expander:
    def __init__(self, environ: Mapping[str, str], root: Path, workspace: Path) -> None:
        self.environ = environ
        self.builtins = {
            "PROJECT_ROOT": str(root),
            "workspaceFolder": str(workspace),
            "userHome": str(Path.home()),
        }

    def expand(
        self,
        template: str,
        path: str,
        problems: list[FieldError],
        opencode: bool = False,
        secrets: list[str] | None = None,
    ) -> str:
        """``template`` expanded; on a missing variable, a problem is recorded and the
        template is returned unexpanded. What each variable whose name looks secret
        expanded to (its value, or its default) is appended to ``secrets``."""
        out: list[str] = []
        ok = True
        for part in _parse_template(template, opencode):
            if isinstance(part, str):
                out.append(part)
            elif part.input:
                problems.append(
                    FieldError(
                        path,
                        f"VS Code input variable ${{input:{part.name}}} is not supported "
                        "(it is prompted for interactively); set an environment variable "
                        "and write ${NAME} instead",
                    )
                )
                ok = False
            elif part.builtin:
                out.append(self.builtins[part.name])
            else:
                value = self.environ.get(part.name)
                if not value and part.default is not None:
                    value = part.default
                if value is None:
                    problems.append(
                        FieldError(path, f"environment variable {part.name} is not set")
                    )
                    ok = False
                else:
                    out.append(value)
                    if secrets is not None and _secretish(part.name):
                        secrets.append(value)
        return "".join(out) if ok else template


def _read_env_file(
    path: Path, field: str, limit: int, problems: list[FieldError]
) -> tuple[dict[str, str], str | None]:
    """Parse a dotenv file: ``KEY=VALUE`` lines, ``export``, quotes, ``#`` comments; and
    the SHA-256 of the bytes read (``None`` if none could be).

    Values are taken literally (no ``${...}`` expansion inside the file).
    """
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        problems.append(FieldError(field, "env file not found"))
        return {}, None
    except OSError as exc:
        problems.append(FieldError(field, f"cannot read env file: {exc.strerror or exc}"))
        return {}, None
    return _parse_env_file(data, field, limit, problems), hashlib.sha256(data).hexdigest()


def _parse_env_file(
    data: bytes, field: str, limit: int, problems: list[FieldError]
) -> dict[str, str]:
    if len(data) > limit:
        problems.append(FieldError(field, f"env file is larger than {limit} bytes"))
        return {}
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        problems.append(FieldError(field, "env file is not UTF-8 text"))
        return {}
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _VARIABLE.match(key):
            problems.append(FieldError(field, f"env file line {number}: expected NAME=VALUE"))
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            quote, value = value[0], value[1:-1]
            if quote == '"':  # \n, \" and \\ are escapes, read in one pass
                value = _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], value)
        else:
            value = re.sub(r"\s+#.*\Z", "", value)
        env[key] = value
    return env


def _workspace_folder(path: Path | None, root: Path) -> Path:
    """``${workspaceFolder}``: the project root, or its parent for ``.vscode/``, ``.cursor/``."""
    if path is not None and root == path.parent and root.name in (".vscode", ".cursor"):
        return root.parent
    return root


def _keys(value: object) -> list[str]:
    return list(value) if isinstance(value, dict) else []
