"""A server's ``faults`` field: a fault plan to inject into its connection (docs/faults.md).

The value is a path to a JSON plan — relative to the config file's directory, like
``cwd`` — or the plan itself (an object ``{seed, rules}`` or a list of rules). It is read
with :func:`~supervisor.faults.load_plan`, whose errors are reported at the field's path:
``mcpServers.calc.faults.rules[0].when.nth: must be at least 1``. Whether the server's
transport can carry out every action (``http_status`` needs HTTP) is checked once its type
is known (:func:`check_plan`).

The plan is carried out by a fault injector the supervisor is given
(``open_supervisor(injector=supervisor.faults.Injector())``): a server with a plan in a
supervisor without one is a config error that says so (:func:`require_injector`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ..errors import ConfigError, FieldError
from ._fields import _kind
from ._model import IncludedFile, ServerType

if TYPE_CHECKING:
    from ._model import Config
    from ._plan import Plan, PlanError

#: Why a server's plan cannot be carried out by a supervisor given no injector, and how.
NO_INJECTOR = (
    "a fault plan needs a fault injector, and none was given: open the supervisor with "
    "open_supervisor(config, injector=supervisor.faults.Injector())"
)

#: How each transport is named in a plan's "cannot be injected here" errors.
_WHERE = {
    ServerType.STDIO: "a stdio server",
    ServerType.WS: "a WebSocket server",
    ServerType.HTTP: "an HTTP server",
    ServerType.SSE: "an SSE server",
    ServerType.MEMORY: "an in-process server",
}


def _at(path: str, sub: str) -> str:
    """``sub`` (a path inside the plan, ``""`` for the plan itself) under ``path``."""
    if not sub:
        return path
    return f"{path}{sub}" if sub.startswith("[") else f"{path}.{sub}"


def plan_errors(error: PlanError, path: str, file: str | None = None) -> list[FieldError]:
    """``error``'s problems at their paths under ``path`` (the ``faults`` field). A
    problem with the plan as a whole (a file unreadable or not JSON) is the field's own;
    with ``file`` (the plan file as the config names it), each message says which file."""
    out: list[FieldError] = []
    if file is not None and not file.isprintable():  # a line break would split the message
        file = json.dumps(file)
    for problem in error.errors:
        whole = problem.path == error.path if error.path is not None else problem.path == "plan"
        if whole:
            out.append(FieldError(path, problem.message + (f" ({file})" if file else "")))
        else:
            message = problem.message + (f" (in {file})" if file else "")
            out.append(FieldError(_at(path, problem.path), message))
    return out


def load_faults(
    value: object, path: str, base: str | os.PathLike[str] | None
) -> tuple[Plan | None, list[FieldError]]:
    """The plan a ``faults`` value at ``path`` gives, or the problems with it.

    A string is a path to a JSON file, relative to ``base`` (default: the current
    directory); a mapping or a list is the plan itself; a :class:`~supervisor.config._plan.Plan`
    is taken as it is.
    """
    plan, problems, _ = read_faults(value, path, base)
    return plan, problems


def read_faults(
    value: object, path: str, base: str | os.PathLike[str] | None
) -> tuple[Plan | None, list[FieldError], IncludedFile | None]:
    """:func:`load_faults`, and the plan file read (the SHA-256 of exactly the bytes the
    plan was made from), or ``None`` for a plan given in place. The file is read once:
    what is hashed is what is used."""
    from ._plan import Plan, PlanError, load_plan

    if isinstance(value, str | os.PathLike):
        file = os.fspath(value)
        if not file.strip():
            return None, [FieldError(path, "must not be empty")], None
        target = Path(base or os.getcwd()) / file
        try:
            data = target.read_bytes()
        except OSError as exc:
            problem = FieldError("plan", f"cannot read the fault plan: {exc.strerror or exc}")
            return None, plan_errors(PlanError([problem], path="plan"), path, file), None
        read = IncludedFile(
            field=path, name=file, path=target, sha256=hashlib.sha256(data).hexdigest()
        )
        try:
            document = json.loads(data.decode("utf-8"))
        except ValueError as exc:  # not UTF-8, or not JSON
            problem = FieldError("plan", f"not valid JSON: {exc}")
            return None, plan_errors(PlanError([problem], path="plan"), path, file), read
        if isinstance(document, str):  # load_plan would take it for a path
            problem = FieldError("", "a fault plan is an object {seed, rules} or a list of "
                                 f"rules, not {_kind(document)}")  # fmt: skip
            return None, plan_errors(PlanError([problem]), path, file), read
        try:
            plan = load_plan(document)
        except PlanError as exc:
            return None, plan_errors(exc, path, file), read
        return attrs.evolve(plan, source=os.fspath(target)), [], read
    if not isinstance(value, Plan | Mapping | list | tuple):
        return (
            None,
            [
                FieldError(
                    path,
                    "must be a path to a JSON fault plan, or the plan: an object "
                    '{"seed": N, "rules": [...]} or a list of rules',
                )
            ],
            None,
        )
    try:
        return load_plan(value), [], None
    except PlanError as exc:
        return None, plan_errors(exc, path), None


def check_plan(plan: Plan, type_: ServerType, path: str) -> list[FieldError]:
    """The rules of ``plan`` that a server of type ``type_`` cannot carry out, as problems
    at ``path`` (HTTP-only actions on a stdio or WebSocket server)."""
    from ._plan import PlanError

    try:
        plan.check_supported(_WHERE[type_], http=type_ in (ServerType.HTTP, ServerType.SSE))
    except PlanError as exc:
        return plan_errors(exc, path, plan.source)
    return []


def require_injector(config: Config, injector: object | None) -> None:
    """Raise :class:`~supervisor.errors.ConfigError` (:data:`NO_INJECTOR`, at each plan's
    field) when an enabled server of ``config`` has a ``faults`` plan and no ``injector``
    is given to carry it out."""
    if injector is not None:
        return
    problems = [
        FieldError(f"{server.path}.faults", NO_INJECTOR)
        for server in config.servers.values()
        if server.faults is not None and not server.disabled
    ]
    if problems:
        raise ConfigError(problems)
