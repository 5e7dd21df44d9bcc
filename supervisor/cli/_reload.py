"""A running ``serve`` takes its changed config file live: ``reload``, the file watch, and
``add`` / ``remove`` telling the gateway of the file they edited.

**In serve.** :class:`Reloader` applies the config file ``serve`` was started with to its
supervisor (``await sup.reconfigure(...)``), one reload at a time, when the file (or a
file it pulls in: an ``envFile``, a fault plan) has changed and settled
(:func:`~._watch.watch_files`), and when ``mcp-supervisor reload`` asks on the gateway's
local socket (``POST /reload``, which only that socket serves). Each reload that changed
something, and each refusal, is said in one line on stderr; a refusal changes nothing and
never stops ``serve``. Added and replaced servers are connected before the answer, as
``serve`` connects every server when it starts. A ``./.mcp.json`` that ``serve`` found
by itself (no ``--config``) is applied only while it is trusted as it is now
(:mod:`._trust`: its bytes and the files it pulls in): a change leaves the running config
as it is until ``mcp-supervisor reload --trust-config`` (or the question on a terminal)
trusts it. A file named by ``--config`` was chosen: it is applied as it is.

**The command.** ``reload`` asks the gateway of its config (``--config F``, else
``./.mcp.json``) and prints what changed; ``add`` and ``remove`` ask it after editing
the file (:func:`ask_gateway`). Like the other commands that find a running gateway
(:mod:`._remote`), this path loads neither trio nor the MCP SDK.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util._printable import printable
from ..log import get_logger
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Commands, Parents, print_json, say
from ._trust import DEFAULT_CONFIG, Trusted, TrustStore, add_config_options, ask, digest

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["Reloader", "ask_gateway", "register", "shown_field"]

log = get_logger("supervisor.cli")

#: ``ConfigChange``'s fields whose config spelling is not their name in camelCase.
_SPELLED = {
    "remote_fallback": "type",
    "max_attempts": "maxRestarts",
    "local_backoff": "backoff.local",
    "local_max_attempts": "backoff.local",
    "remote_backoff": "backoff.remote",
    "remote_max_attempts": "backoff.remote",
    "tool_name_template": "toolNames.template",
    "tool_clash": "toolNames.clash",
}


def shown_field(name: str) -> str:
    """A server field or ``supervisor`` setting, by its model name (``auth_dir``), as the
    config file spells it (``authDir``)."""
    if name in _SPELLED:
        return _SPELLED[name]
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def change_lines(change: Mapping[str, Any]) -> list[str]:
    """What a reload changed (a ``ConfigChange`` as JSON), one line per kind, in the config
    file's spelling; ``["no change"]`` when nothing did."""

    def fields(names: Sequence[str]) -> str:
        return ", ".join(dict.fromkeys(shown_field(n) for n in names))

    def servers(found: Mapping[str, Sequence[str]]) -> str:
        return ", ".join(f"{name} ({fields(names)})" for name, names in found.items())

    lines = []
    if change.get("added"):
        lines.append(f"added: {', '.join(change['added'])}")
    if change.get("removed"):
        lines.append(f"removed: {', '.join(change['removed'])}")
    if change.get("replaced"):
        lines.append(f"replaced: {servers(change['replaced'])}")
    if change.get("changed"):
        lines.append(f"changed in place: {servers(change['changed'])}")
    if change.get("settings"):
        lines.append(f"settings applied: {fields(change['settings'])}")
    if change.get("needs_restart"):
        lines.append(f"needs a restart of serve: {fields(change['needs_restart'])}")
    return [printable(line) for line in lines] or ["no change"]


# -- in serve ----------------------------------------------------------------------------------


class _Untrusted(Exception):
    """The default config file is not trusted as it is now: not applied."""


class Reloader:
    """Applies ``path`` — the config file ``serve`` runs, ``chosen`` with ``--config`` or
    found as ``./.mcp.json`` (then applied only while trusted) — to ``sup``; see the
    module's docstring. ``secrets`` (the command's redaction scope) is given each applied
    config's secrets."""

    def __init__(
        self, sup: Any, path: str, *, chosen: bool, secrets: Any = None, gateway: Any = None
    ) -> None:
        import trio

        self.sup = sup
        #: the gateway whose ``gateway.policy`` a reload applies to the next request
        self.gateway = gateway
        self.path = path
        self.chosen = chosen
        self._secrets = secrets
        self._lock = trio.Lock()

    def watched(self) -> list[Path]:
        """The files a change of which is applied: the config first, then each file its
        servers pull in (as the running config has them)."""
        config = self.sup.config
        return [Path(self.path), *(f.path for f in config.included)]

    async def file_changed(self) -> None:
        """The watched files changed and settled: apply them."""
        await self.apply(trigger="the file changed")

    async def answer(self, request: Mapping[str, Any]) -> tuple[int, object]:
        """``POST /reload``: apply the file now; the answer's status and document (also
        describing the servers the request names in ``servers``)."""
        asked = request.get("servers")
        names = [n for n in asked if isinstance(n, str)] if isinstance(asked, list) else []
        return await self.apply(trigger="mcp-supervisor reload", servers=names)

    async def apply(self, *, trigger: str, servers: Sequence[str] = ()) -> tuple[int, object]:
        """Apply the config file now: ``(200, {"applied": true, "change", "servers"})``,
        or a refusal — ``(422, {"applied": false, "refused": "config", "errors"})`` for a
        config that does not load or cannot be applied, ``(409, {..., "refused":
        "trust", "message"})`` for a default file not trusted as it is now."""
        from ..config import ConfigError

        label = self.path
        async with self._lock:
            before = self.sup.config.settings.gateway
            try:
                change = await self.sup.reconfigure(self._checked())
            except ConfigError as exc:
                errors = [str(e) for e in exc.errors] or [str(exc)]
                _said(f"{label} not applied ({trigger}): {'; '.join(errors)}")
                document = [{"path": e.path, "message": e.message} for e in exc.errors]
                if not document:
                    document = [{"path": label, "message": str(exc)}]
                return 422, {"applied": False, "refused": "config", "errors": document}
            except _Untrusted as exc:
                message = str(exc)
                _said(message)
                self._rejected([message])
                return 409, {"applied": False, "refused": "trust", "message": message}
            except Exception as exc:  # a fault of its own: said, and serve goes on
                log.error("reload failed", config=label, exc_info=True)
                message = f"{label} not applied ({trigger}): {type(exc).__name__}: {exc}"
                _said(message)
                return 500, {"applied": False, "refused": "error", "message": message}
        if self._secrets is not None:
            self._secrets.add(*self.sup.config.secrets())
        import msgspec

        document = msgspec.to_builtins(change)
        document["needs_restart"] = [*document["needs_restart"], *self._gateway_changed(before)]
        if not change.empty:
            said = "; ".join(change_lines(document))
            _said(f"{label} reloaded ({trigger}): {said}")
        started = [*change.added, *change.replaced]
        if started or servers:  # serve connects every server, as it did those it started
            await self.sup.connect_all()  # with (one a reload before this one started too)
        described = {name: self._described(name) for name in dict.fromkeys([*started, *servers])}
        return 200, {"applied": True, "config": label, "change": document, "servers": described}

    def _gateway_changed(self, before: Any) -> list[str]:
        """Apply a changed ``gateway.policy`` to the next request; the parts of the
        ``gateway`` settings that take a restart of serve (its callers' authentication,
        the key replicas share) that changed."""
        after = self.sup.config.settings.gateway

        def old(field: str) -> object:
            return None if before is None else getattr(before, field)

        def new(field: str) -> object:
            return None if after is None else getattr(after, field)

        if self.gateway is not None and old("policy") != new("policy"):
            from ..gateway._policy import Policy

            self.gateway.set_policy(Policy(None if after is None else after.policy))
        restart = (("auth", "auth"), ("keyFile", "key_file"), ("keyEnv", "key_env"))
        return [f"gateway.{name}" for name, field in restart if old(field) != new(field)]

    def _checked(self) -> str | Config:
        """What to apply: the chosen file's path (the supervisor reads it), or the default
        file as loaded here once it is found trusted as it is (what was checked is what
        is applied). Raises ``ConfigError`` and :class:`_Untrusted`."""
        if self.chosen:
            return self.path
        from ..config import ConfigError, load_config

        label = self.path
        before = digest(label)
        try:
            config = load_config(label)
        except ConfigError as exc:  # refused here: the supervisor is not asked to read it
            self._rejected([str(e) for e in exc.errors] or [str(exc)])
            raise
        if before is None or digest(label) != before:
            raise _Untrusted(f"{label} changed while it was read: not applied; it is read again")
        known = TrustStore().get(label)
        changed = ["it was never trusted"] if known is None else known.changes(before, config)
        if changed:
            raise _Untrusted(
                f"{label} changed ({'; '.join(changed)}) and is not applied: it is not trusted "
                "as it is now (a config file can start any program). `mcp-supervisor reload "
                "--trust-config` here trusts it and applies it"
            )
        return config

    def _rejected(self, errors: list[str]) -> None:
        """Say on the bus that a config was refused before the supervisor was asked."""
        from ..events._catalog import ConfigRejected

        self.sup.bus.publish(ConfigRejected(errors=errors))

    def _described(self, name: str) -> dict[str, object]:
        """Server ``name`` in the running config, for ``add``'s and ``reload``'s output:
        whether it is configured, its status and error, its tools (as the gateway names
        them, each with its description's first line)."""
        config = self.sup.config.servers.get(name)
        if config is None:
            return {"configured": False}
        record = self.sup.status().get(name)
        entries = self.sup.catalog.by_server.get(name, ())
        tools = []
        for entry in entries:
            first = (entry.description or "").strip().splitlines()
            tools.append({"name": entry.name, "description": first[0] if first else ""})
        return {
            "configured": True,
            "status": None if record is None else str(record.status),
            "error": None if record is None else record.last_error,
            "lazy": config.lazy,
            "tools": tools,
        }


def _said(line: str) -> None:
    """One line of ``serve``'s on stderr, the running config's secrets redacted."""
    from ..log import redact

    say(f"mcp-supervisor serve: {redact(line)}")


# -- asking a running gateway ------------------------------------------------------------------


class Answer:
    """A gateway's answer to ``POST /reload``: ``document`` as it came, or, when there was
    none to be had, ``code`` and the ``message`` said (``None``: no gateway runs)."""

    def __init__(
        self, document: Mapping[str, Any] | None, *, code: int = EXIT_OK, message: str = ""
    ) -> None:
        self.document = document
        self.code = code
        self.message = message

    @property
    def applied(self) -> bool:
        return self.document is not None and self.document.get("applied") is True


def ask_gateway(path: str, servers: Sequence[str] = (), *, client: Any = None) -> Answer | None:
    """Ask the gateway serving the config file ``path`` on this machine to apply it now;
    ``None`` when none runs (or its socket answers nothing: nothing was sent)."""
    from ..gateway._local import GatewayClient, GatewayNoAnswer, GatewayUnreachable
    from ._remote import _Stopped, _stopped_by_signals

    if client is None:
        client = GatewayClient.find(path)
    if client is None:
        return None
    try:
        with _stopped_by_signals():
            status, document = client.post("/reload", {"servers": list(servers)})
    except GatewayUnreachable:
        return None
    except (GatewayNoAnswer, _Stopped) as exc:
        said = str(exc) if isinstance(exc, GatewayNoAnswer) else exc.said(client.where)
        code = exc.code if isinstance(exc, _Stopped) else EXIT_FAILURE
        return Answer(None, code=code, message=f"{said}: the reload may have been applied")
    if not isinstance(document, dict) or "applied" not in document:
        message = f"the gateway at {client.where} answered HTTP {status}: {document!r}"[:300]
        return Answer(None, code=EXIT_FAILURE, message=message)
    return Answer(document)


def refusal(answer: Answer, prefix: str) -> int:
    """Say on stderr why the gateway applied nothing; the exit code: 2 for a config it
    refused or does not trust, else 1."""
    document = answer.document
    if document is None:
        say(f"{prefix}: {answer.message}")
        return answer.code
    if document.get("refused") == "config":
        for error in document.get("errors") or ():
            if isinstance(error, dict):
                path, message = error.get("path"), error.get("message")
                say(f"{path}: {message}" if path else str(message))
        say(f"{prefix}: the running gateway refused the file: nothing was changed")
        return EXIT_USAGE
    say(f"{prefix}: {document.get('message', 'the running gateway applied nothing')}")
    return EXIT_USAGE if document.get("refused") == "trust" else EXIT_FAILURE


# -- reload ------------------------------------------------------------------------------------


def _cmd_reload(args: argparse.Namespace) -> int:
    from ..gateway._local import GatewayClient

    prefix = "mcp-supervisor reload"
    chosen = args.config is not None
    path = str(args.config) if chosen else DEFAULT_CONFIG
    if not chosen and not os.path.exists(path):
        say(f"{prefix}: no config file: pass --config F, or run it where {DEFAULT_CONFIG} is")
        return EXIT_USAGE
    client = GatewayClient.find(path)
    if client is None:
        started = f"mcp-supervisor serve --config {path}" if chosen else "mcp-supervisor serve"
        say(
            f"{prefix}: no gateway of {path} runs on this machine: nothing to reload. "
            f"`{started}` starts one (it applies the file whenever it changes)"
        )
        return EXIT_FAILURE
    client.timeout = None  # removing and starting servers takes what it takes
    if args.trust_config:
        _trust(args, path, asking=False)
    answer = ask_gateway(path, client=client)
    if answer is None:
        say(f"{prefix}: the gateway of {path} went away: nothing was reloaded")
        return EXIT_FAILURE
    document = answer.document
    untrusted = document is not None and document.get("refused") == "trust"
    if untrusted and not args.trust_config and sys.stdin.isatty() and sys.stderr.isatty():
        trusted = _trust(args, path, asking=True)
        if trusted is not None:
            return trusted
        answer = ask_gateway(path, client=client) or answer
        document = answer.document
        untrusted = document is not None and document.get("refused") == "trust"
    if not answer.applied:
        code = refusal(answer, prefix)
        if untrusted:
            say(f"{prefix}: pass --trust-config to trust {path} as it is now, and apply it")
        if args.json and document is not None:
            print_json({"config": path, **document})
        return code
    assert document is not None
    change = document.get("change") or {}
    if args.json:
        print_json({"config": path, "applied": True, **change})
        return EXIT_OK
    for line in change_lines(change):
        print(line)
    return EXIT_OK


def _trust(args: argparse.Namespace, path: str, *, asking: bool) -> int | None:
    """Trust the config file ``path`` as it is now (its bytes and the files it pulls in):
    at once, or ``asking`` on the terminal. ``None`` when done (or the file does not
    load: the gateway says why); else the exit code, said why."""
    from ..config import ConfigError, load_config

    before = digest(path)
    try:
        config = load_config(path)
    except ConfigError:
        return None
    args.secrets.add(*config.secrets())
    if before is None or digest(path) != before:
        say(f"mcp-supervisor reload: {path} changed while it was read; try again")
        return EXIT_FAILURE
    store = TrustStore()
    known = store.get(path)
    changed = None if known is None else known.changes(before, config)
    if asking and not ask(path, config, changed=changed, stdin=sys.stdin, stderr=sys.stderr):
        say(f"mcp-supervisor reload: {path} not trusted; nothing was applied")
        return EXIT_USAGE
    store.remember(path, Trusted.of(before, config))
    return None


def register(commands: Commands, parents: Parents) -> None:
    """Add ``reload`` to the subcommands."""
    reload = commands.add_parser(
        "reload",
        parents=parents,
        help="have the running gateway (serve) of the config file apply it now",
        description="Ask the `mcp-supervisor serve` of the config file (default "
        "./.mcp.json), over its local socket, to apply the file now, and print what "
        "changed: servers added, removed, replaced (restarted with their new command, "
        "env, URL...), changed in place, settings applied, and settings that need serve "
        "restarted. serve also applies the file by itself when it changes. A ./.mcp.json "
        "serve found by itself is applied only once trusted as it is now: asked on a "
        "terminal, or --trust-config. Exit 0 applied (or nothing to change); 1 no gateway "
        "of that file runs; 2 the file was refused (its errors on stderr; nothing "
        "changed) or is not trusted.",
    )
    add_config_options(reload)
    reload.add_argument("--json", action="store_true", help="one JSON document on stdout")
    reload.set_defaults(handler=_cmd_reload, light=True)
