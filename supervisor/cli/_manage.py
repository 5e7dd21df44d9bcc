"""``add``, ``remove`` and ``list``: the servers of a config file, managed from the command
line.

They edit (or read) the file given by ``--config``, by default ``./.mcp.json`` (which
``add`` creates), in the format it already has, changing nothing but the entry
(:mod:`supervisor.config._edit`); the file is replaced atomically and keeps its mode. No
trust question is asked: ``list`` and ``remove`` start nothing, and ``add`` starts only
the server just typed, applying the file's ``supervisor`` section only if the file is
trusted (so an untrusted file's audit log or auth directory is never created, opened or
chmodded). Editing a file that was trusted (:mod:`._trust`) keeps it trusted,
and a file ``add`` creates is trusted: what is in it was typed here.

An ``--env KEY`` given without a value is asked for without echo and kept in the server's
``envFile``, ``.mcp-supervisor/NAME.env`` beside the config (0600, in a 0700 directory
holding a ``.gitignore`` of ``*`` so that git never commits it); the config refers to the
file, never holds the secret. ``--env KEY=VALUE`` is stored in the entry's ``env`` as
typed (a value typed on the command line is already in the shell's history).

When a ``mcp-supervisor serve`` of the file runs on this machine, ``add`` and ``remove``
then ask it to apply the file at once (:mod:`._reload`) and say what it did: the server
added to it (connected, with its tools) or removed from it. ``add`` then starts no server
of its own: the gateway's is the one. Without a gateway, ``add`` starts the new server
alone, once, to list its tools.

``list`` imports no MCP machinery: it reads the file and prints.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .._util._files import FILE_MODE, SECRETS_DIR, private_dir, write_atomic
from .._util._plural import plural
from .._util._printable import printable
from ..server._status import ServerStatus
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Commands, Parents, Parser, say
from ._reload import Answer, ask_gateway, refusal
from ._trust import DEFAULT_CONFIG, Trusted, TrustStore, add_config_options, digest, trusted_now

if TYPE_CHECKING:
    from ..config import Config

#: the directory beside the config that holds the env files ``add`` writes
ENV_DIR = SECRETS_DIR
_TRANSPORTS = ("http", "sse", "ws")


class _CommandLineParser(Parser):
    """``add``'s parser: what follows ``--`` is the server's command line, its options
    the server's own (``args.command_line``)."""

    def _parse_known(
        self, args: Iterable[str] | None, namespace: object
    ) -> tuple[object, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        tail: list[str] | None = None
        if not self._intermixing and "--" in words:
            i = words.index("--")
            words, tail = words[:i], words[i + 1 :]
        # argparse fills the namespace it is given, and the command line gives none: a Namespace
        parsed, extras = cast(
            "tuple[argparse.Namespace, list[str]]", super()._parse_known(words, namespace)
        )
        if tail is not None or not hasattr(parsed, "command_line"):
            parsed.command_line = tail or []
        return parsed, extras


def _path(args: argparse.Namespace) -> Path:
    return Path(args.config if args.config is not None else DEFAULT_CONFIG)


def _read(path: Path) -> tuple[str, bool] | None:
    """The file's text, and whether it starts with a byte-order mark; ``None`` if there
    is no file. Raises :class:`OSError` and :class:`UnicodeDecodeError`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    bom = data.startswith(b"\xef\xbb\xbf")
    return data.decode("utf-8-sig"), bom


def _write(
    path: Path, text: str, bom: bool, *, created: bool, env_file: Path | None = None
) -> None:
    """Write the edited config; a file trusted as it was before the edit (its bytes and
    included files) or created by it stays trusted, with ``env_file`` (written by this
    command) trusted along with it."""
    kept = None if created else trusted_now(path)
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    write_atomic(path, data)
    after = digest(path)
    if after is None or (kept is None and not created):
        return
    files = dict(kept.files) if kept is not None else {}
    if env_file is not None:
        files[str(env_file)] = digest(env_file)
    TrustStore().remember(path, Trusted(after, files))


# -- add -------------------------------------------------------------------------------------


def _cmd_add(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config
    from ..config._edit import NEW_FILE, add_entry, server_entry
    from ..config._server import _NAME

    prefix = "mcp-supervisor add"
    command: list[str] = args.command_line
    if (args.url is None) == (not command):
        say(
            f"{prefix}: give the server's command after -- (add NAME -- COMMAND ARGS...) "
            "or its URL (add NAME --url URL), one of the two"
        )
        return EXIT_USAGE
    if args.url is not None and args.env:
        say(
            f"{prefix}: --env applies to a local server (a command); a remote server gets "
            "its credentials in a header: --header 'Authorization: Bearer ${TOKEN}'"
        )
        return EXIT_USAGE
    if args.url is None and (args.header or args.transport):
        option = "--header" if args.header else "--transport"
        say(f"{prefix}: {option} applies to a remote server (--url URL)")
        return EXIT_USAGE
    if not _NAME.match(args.name):
        say(
            f"{prefix}: invalid server name {args.name!r}: use 1-64 letters, digits, '_', "
            "'-' or '.', starting with a letter or digit"
        )
        return EXIT_USAGE
    headers = {}
    for header in args.header:
        key, sep, value = header.partition(":")
        if not sep or not key.strip():
            say(f"{prefix}: --header {header!r} is not 'NAME: VALUE'")
            return EXIT_USAGE
        headers[key.strip()] = value.strip()
    inline: dict[str, str] = {}
    asked: list[str] = []
    for item in args.env:
        key, sep, value = item.partition("=")
        if sep:
            inline[key] = value
        else:
            asked.append(key)

    path = _path(args)
    label = str(path)
    try:
        found = _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        say(f"{prefix}: cannot read {label}: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_USAGE
    created = found is None
    text, bom = found if found is not None else (NEW_FILE, False)

    env_file = f"{ENV_DIR}/{args.name}.env" if asked else None
    entry = partial(
        server_entry,
        command=command[0] if command else None,
        args=command[1:],
        env=inline,
        env_file=env_file,
        url=args.url,
        transport=args.transport,
        headers=headers,
    )
    try:
        new_text, section, replaced = add_entry(text, label, args.name, entry, replace=args.force)
        # The entry alone, as the loader reads it where it goes: a bad URL, a bad
        # variable reference or env name is refused before anything is written.
        style = section.split(".")[0]
        servers: dict[str, object] = {args.name: entry(style)}
        alone: dict[str, object] = (
            {"mcp": {"servers": servers}} if section == "mcp.servers" else {style: servers}
        )
        load_config(alone, project_root=path.absolute().parent)
    except ConfigError as exc:
        for error in exc.errors:
            say(str(error))
        return EXIT_USAGE

    secrets = _ask_secrets(args.name, asked)
    if secrets is None:
        return EXIT_USAGE
    try:
        written = None
        if secrets:
            written = _write_env_file(path.absolute().parent, args.name, secrets)
        _write(path, new_text, bom, created=created, env_file=written)
    except OSError as exc:
        say(f"{prefix}: cannot write {exc.filename or label}: {exc.strerror or exc}")
        return EXIT_FAILURE
    what = "replaced" if replaced else "added"
    print(f"{what} {args.name} in {label} ({section})")
    if secrets and env_file is not None:  # secrets asked for: env_file is set
        print(f"  {', '.join(secrets)} kept in {path.parent / env_file} (0600), not in the config")
    for key in inline:
        from ..config._secrets import _secretish

        if _secretish(key):
            say(
                f"{prefix}: note: {key} is stored in {label} as typed; `--env {key}` "
                "(no value) asks for it and keeps it in an env file instead"
            )
    answer = ask_gateway(label, [args.name])
    if answer is not None:  # a serve of this file runs: it starts the server itself
        return _added_to_gateway(args.name, answer, replaced=replaced)
    if args.no_connect:
        return EXIT_OK
    return _connect_once(args, label, alone)


def _added_to_gateway(name: str, answer: Answer, *, replaced: bool) -> int:
    """Say what the running gateway did with the server ``add`` wrote: started it (its
    tools), or why not. Exit 0 once it runs it (or it is disabled); 1 it did not start; 2
    the gateway refused the file."""
    prefix = "mcp-supervisor add"
    if not answer.applied:
        code = refusal(answer, prefix)
        say(f"{prefix}: {name} is in the file, not in the running gateway")
        return code
    assert answer.document is not None
    server = (answer.document.get("servers") or {}).get(name) or {}
    where = "in" if replaced else "to"
    done = f"{name}: {'replaced' if replaced else 'added'} {where} the running gateway"
    if not server.get("configured"):
        say(f"{prefix}: the running gateway reloaded without {name}: is it still in the file?")
        return EXIT_FAILURE
    status = server.get("status")
    tools = [t for t in server.get("tools") or () if isinstance(t, dict)]
    if status == ServerStatus.DISABLED:
        print(f"{done}, disabled: not started")
        return EXIT_OK
    if status != ServerStatus.CONNECTED:
        why = server.get("error") or status
        print(f"{done}, which could not start it")
        say(f"{prefix}: {name} did not start: {why}")
        return EXIT_FAILURE
    print(f"{done}, {plural(len(tools), 'tool')}")
    width = max((len(str(t.get("name", ""))) for t in tools), default=0)
    for t in tools:
        tool, first = printable(str(t.get("name", ""))), printable(str(t.get("description", "")))
        print(f"  {tool:<{width}}  {first}".rstrip())
    return EXIT_OK


def _ask_secrets(name: str, keys: Sequence[str]) -> dict[str, str] | None:
    """The values of ``keys``, asked on the terminal without echo; ``None`` (said on
    stderr) without a terminal or for an empty answer."""
    import getpass

    prefix = "mcp-supervisor add"
    if keys and not sys.stdin.isatty():
        say(
            f"{prefix}: --env {keys[0]} has no value and there is no terminal to ask for it "
            f"on: give --env {keys[0]}=VALUE, or set it in {ENV_DIR}/{name}.env "
            "(NAME=value lines) and refer to that file as the server's envFile"
        )
        return None
    values: dict[str, str] = {}
    for key in keys:
        value = getpass.getpass(f"{key} for {name} (not echoed): ", stream=sys.stderr)
        if not value:
            say(f"{prefix}: no value given for {key}; nothing was written")
            return None
        values[key] = value
    return values


def _write_env_file(base: Path, name: str, values: dict[str, str]) -> Path:
    """``base/.mcp-supervisor/NAME.env``, 0600, in a 0700 directory git ignores; its
    path. A ``.mcp-supervisor`` that is a symbolic link (a cloned repository can hold
    one, pointing anywhere) is refused: nothing is chmodded or written where it points."""
    directory = base / ENV_DIR
    if directory.is_symlink():
        raise OSError(
            errno.ELOOP,
            "it is a symbolic link: secrets are written only to a real directory; remove the link",
            str(directory),
        )
    private_dir(directory)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, b"# secrets written by mcp-supervisor add: never committed\n*\n")
    lines = []
    for key, value in values.items():
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'{key}="{escaped}"\n')
    written = directory / f"{name}.env"
    write_atomic(written, "".join(lines).encode(), FILE_MODE)
    return written


def _connect_once(args: argparse.Namespace, label: str, alone: dict[str, object]) -> int:
    """Start the new server alone, once, and print its tools, or why it failed.

    The file's settings (its ``supervisor`` section: an audit log, an auth directory,
    limits, timeouts) are used only when the file is trusted — chosen with ``--config``,
    or trusted as it is now (:mod:`._trust`); otherwise the entry ``alone`` is started
    with the default settings, so an untrusted file makes this command create, open or
    chmod nothing of its own choosing."""
    import msgspec

    from ..config import ConfigError, load_config
    from ..config._model import Settings
    from ._common import one_shot, run

    fix = (
        f"{args.name} stays in {label}: fix it there or with `mcp-supervisor add {args.name} "
        f"--force ...`, or take it out with `mcp-supervisor remove {args.name}`"
    )
    try:
        config = load_config(label)
    except ConfigError as exc:
        for error in exc.errors:
            say(str(error))
        say(f"mcp-supervisor add: {label} does not load, so {args.name} was not started; {fix}")
        return EXIT_USAGE
    args.secrets.add(*config.secrets())
    if args.config is None and trusted_now(label) is None:
        if config.settings != Settings():
            say(
                f"mcp-supervisor add: {label} is not trusted, so its supervisor section is "
                f"not applied here: {args.name} is started with the default settings"
            )
        config = load_config(alone, project_root=Path(label).absolute().parent)
    server = config.servers[args.name]
    if server.errors:
        for error in server.errors:
            say(str(error))
        say(f"mcp-supervisor add: {args.name} cannot start; {fix}")
        return EXIT_FAILURE
    one_shot(args)
    only = msgspec.structs.replace(config, servers={args.name: server})
    return run(_list_tools, only, args.name, fix)


async def _list_tools(config: Config, name: str, fix: str) -> int:
    from ..faults import Injector
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        catalog = await sup.tools()
        record = sup.status()[name]
    if record.status != ServerStatus.CONNECTED:
        why = record.last_error or record.status
        say(f"mcp-supervisor add: {name} did not start: {why}")
        say(f"mcp-supervisor add: {fix}")
        return EXIT_FAILURE
    entries = catalog.by_server.get(name, ())
    print(f"{name}: connected, {plural(len(entries), 'tool')}")
    width = max((len(e.name) for e in entries), default=0)
    for e in entries:
        first = (e.description or "").strip().splitlines()
        print(f"  {printable(e.name):<{width}}  {printable(first[0]) if first else ''}".rstrip())
    return EXIT_OK


# -- remove ----------------------------------------------------------------------------------


def _cmd_remove(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..config._edit import entries, remove_entry

    prefix = "mcp-supervisor remove"
    path = _path(args)
    label = str(path)
    try:
        found = _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        say(f"{prefix}: cannot read {label}: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_USAGE
    if found is None:
        say(f"{prefix}: no config file {label}; pass --config F")
        return EXIT_USAGE
    text, bom = found
    try:
        new_text, where, raw = remove_entry(text, label, args.name)
    except ConfigError as exc:
        for error in exc.errors:
            say(str(error))
        return EXIT_USAGE
    try:
        _write(path, new_text, bom, created=False)
    except OSError as exc:
        say(f"{prefix}: cannot write {label}: {exc.strerror or exc}")
        return EXIT_FAILURE
    print(f"removed {args.name} from {label} ({where})")
    env_file = raw.get("envFile") if isinstance(raw, dict) else None
    if isinstance(env_file, str):
        ours = env_file == f"{ENV_DIR}/{args.name}.env"
        still = [
            n
            for n, (_, e) in entries(new_text, label).items()
            if isinstance(e, dict) and e.get("envFile") == env_file
        ]
        secret = path.absolute().parent / env_file
        if ours and not still and secret.is_file() and not secret.parent.is_symlink():
            secret.unlink()
            print(f"  deleted its env file {path.parent / env_file}")
        elif secret.is_file():
            print(f"  its env file {path.parent / env_file} is left as it is")
    answer = ask_gateway(label, [args.name])
    if answer is None:  # no serve of this file runs
        return EXIT_OK
    if not answer.applied:
        code = refusal(answer, prefix)
        say(f"{prefix}: {args.name} is out of the file, still in the running gateway")
        return code
    assert answer.document is not None
    server = (answer.document.get("servers") or {}).get(args.name) or {}
    if server.get("configured"):
        say(f"{prefix}: the running gateway still runs {args.name}: is it back in the file?")
        return EXIT_FAILURE
    print(f"{args.name}: removed from the running gateway")
    return EXIT_OK


# -- list ------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config
    from ..config._secrets import command_line, masked_url
    from ..log import redact

    path = _path(args)
    if args.config is None and not path.exists():
        say(
            f"mcp-supervisor list: no config file: {DEFAULT_CONFIG} is not here; "
            "`mcp-supervisor add NAME -- COMMAND ARGS...` creates it, or pass --config F"
        )
        return EXIT_USAGE
    try:
        config = load_config(path)
    except ConfigError as exc:
        for error in exc.errors:
            say(str(error))
        return EXIT_USAGE
    args.secrets.add(*config.secrets())
    rows = []
    for s in config.servers.values():
        kind = "remote" if s.remote_fallback else s.type.value
        target = redact(masked_url(s.url) if s.url else command_line(s))
        rows.append({"name": s.name, "type": kind, "target": target,
                     "disabled": s.disabled, "lazy": s.lazy})  # fmt: skip
    if args.json:
        print(json.dumps({"path": str(path), "servers": rows}))
        return EXIT_OK
    if not rows:
        print(f"{path}: no servers")
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        flags = "".join(f"  ({f})" for f in ("disabled", "lazy") if r[f])
        name, target = printable(str(r["name"])), printable(str(r["target"]))
        print(f"{name:<{width}}  {r['type']:<6}  {target}{flags}")
    return EXIT_OK


def register(commands: Commands, parents: Parents) -> None:
    """Add ``add``, ``remove`` and ``list`` to the subcommands."""
    add = commands.add_parser(
        "add",
        parents=parents,
        help="add a server to the config file, then connect to it once and list its tools",
        usage="%(prog)s NAME [--env KEY[=VALUE]]... -- COMMAND ARGS...\n"
        "       %(prog)s NAME --url URL [--transport {http,sse,ws}] [--header 'K: V']...",
        description="Add server NAME to the config file (default ./.mcp.json, created if "
        "missing) in the file's own format (mcpServers, OpenCode's mcp, VS Code's "
        "servers), changing nothing else in it; then start that server alone, once, and "
        "print its tools, or the error and how to fix it; when a `mcp-supervisor serve` "
        "of the file runs, it is asked to apply the file at once, and it starts the server "
        "(its tools are printed) in place of a start here. --env KEY without a value asks "
        "for it without echo and keeps it in .mcp-supervisor/NAME.env beside the config "
        "(0600, ignored by git), which the entry names as its envFile. Exit 0 connected; "
        "1 the server did not start (the entry stays added); 2 a usage error, a name "
        "already configured (without --force), or an entry the config would refuse.",
    )
    add.__class__ = _CommandLineParser
    add.add_argument("name", metavar="NAME", help="the server's name")
    add_config_options(add, trust=False)
    add.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help="an environment variable of a local server; without =VALUE, asked for "
        "without echo and kept in an env file (repeatable)",
    )
    add.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'K: V'",
        help="an HTTP header of a remote server (repeatable); ${VAR} is expanded when "
        "the config is loaded",
    )
    add.add_argument("--url", metavar="URL", help="a remote server's URL")
    add.add_argument(
        "--transport",
        choices=_TRANSPORTS,
        help="a remote server's transport (default: ws for ws:// URLs, else http)",
    )
    add.add_argument(
        "--force", action="store_true", help="replace a server already configured as NAME"
    )
    add.add_argument(
        "--no-connect",
        action="store_true",
        help="only edit the file: do not start the server here (a running serve of the "
        "file still applies it)",
    )
    add.set_defaults(handler=_cmd_add)

    remove = commands.add_parser(
        "remove",
        parents=parents,
        help="remove a server from the config file",
        description="Remove server NAME from the config file (default ./.mcp.json), "
        "changing nothing else in it, and the env file add made for it. When a "
        "`mcp-supervisor serve` of the file runs, it is asked to apply the file at once: "
        "it stops the server and its tools leave its catalog. Exit 0; 1 the running "
        "gateway could not be asked; 2 if there is no such server, or the running "
        "gateway refused the file.",
    )
    remove.add_argument("name", metavar="NAME", help="the server's name")
    add_config_options(remove, trust=False)
    remove.set_defaults(handler=_cmd_remove)

    listing = commands.add_parser(
        "list",
        parents=parents,
        help="list the configured servers without connecting",
        description="Print each server of the config file (default ./.mcp.json): name, "
        "type, command line or URL (secret-looking values masked), disabled or lazy. "
        "Nothing is started. Exit 0; 2 if the file does not load.",
    )
    add_config_options(listing, trust=False)
    listing.add_argument("--json", action="store_true", help="one JSON document on stdout")
    listing.set_defaults(handler=_cmd_list, light=True)
