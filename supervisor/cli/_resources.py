"""``resources``, ``read``, ``prompts`` and ``prompt``: the merged resources and prompts
from the command line, one-shot like ``tools`` and ``call``. What a server sent is made
printable (:func:`supervisor._printable.printable`) before it is shown; ``--json`` prints
it escaped, as JSON does."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._util._plural import plural
from .._util._printable import printable
from ..server._status import ServerStatus
from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Commands,
    Parents,
    load,
    one_shot,
    print_json,
    run,
    said,
)
from ._trust import add_config_options

if TYPE_CHECKING:
    import mcp_types as types

    from ..runtime import SupervisorHandle


def _cmd_resources(args: argparse.Namespace) -> int:
    return _one_shot(args, _resources, args.json)


async def _resources(config: object, as_json: bool) -> int:
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False) as sup:  # type: ignore[arg-type]
        await sup.connect_all()
        resources = await sup.resources()
        templates = await sup.resource_templates()
        down = _report_down(sup, "resources")
    if as_json:
        print_json(
            {
                "resources": [
                    {
                        "uri": r.uri,
                        "name": r.name,
                        "server": r.server,
                        "description": r.description,
                        "mime_type": r.mime_type,
                        "size": r.size,
                    }
                    for r in resources
                ],
                "templates": [
                    {
                        "uri_template": t.uri_template,
                        "name": t.name,
                        "server": t.server,
                        "description": t.description,
                        "mime_type": t.mime_type,
                    }
                    for t in templates
                ],
            }
        )
    else:
        rows = [(r.uri, r.server, r.mime_type or "", _first_line(r.description)) for r in resources]
        rows += [
            (
                t.uri_template,
                t.server,
                t.mime_type or "",
                "(template) " + _first_line(t.description),
            )
            for t in templates
        ]
        _table(("uri", "server", "type", "description"), rows)
        print(f"{plural(len(resources), 'resource')} and {plural(len(templates), 'template')}")
    return EXIT_FAILURE if down == len(sup.status()) and down else EXIT_OK


def _cmd_read(args: argparse.Namespace) -> int:
    return _one_shot(args, _read, args.uri, args.server, args.json, args.timeout)


async def _read(
    config: object, uri: str, server: str | None, as_json: bool, timeout: float | None
) -> int:
    from ..errors import SupervisorError, UnknownResource, UnknownServer
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False) as sup:  # type: ignore[arg-type]
        try:
            if server is None:
                await sup.connect_all()  # which server offers it is known once listed
            result = await sup.read_resource(uri, server=server, timeout=timeout)
        except (UnknownResource, UnknownServer) as exc:
            text = said(exc).replace("pass server= to read", "give --server NAME to read")
            return _failed("read", exc, EXIT_USAGE, text)
        except SupervisorError as exc:
            return _failed("read", exc, EXIT_FAILURE)
    if as_json:
        print_json({"uri": uri, "contents": [_content(c) for c in result.contents]})
        return EXIT_OK
    for content in result.contents:
        text = getattr(content, "text", None)
        if text is not None:
            shown = printable(text, keep_lines=True)
            sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
        else:
            blob = base64.b64decode(getattr(content, "blob", "") or "")
            kind, uri = printable(content.mime_type or "binary"), printable(str(content.uri))
            print(f"[{kind}: {len(blob)} bytes from {uri}]")
    return EXIT_OK


def _content(content: types.TextResourceContents | types.BlobResourceContents) -> dict:
    out: dict[str, object] = {"uri": str(content.uri), "mime_type": content.mime_type}
    if getattr(content, "text", None) is not None:
        out["text"] = content.text  # type: ignore[union-attr]
    else:
        out["blob"] = content.blob  # type: ignore[union-attr]
    return out


def _cmd_prompts(args: argparse.Namespace) -> int:
    return _one_shot(args, _prompts, args.json)


async def _prompts(config: object, as_json: bool) -> int:
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False) as sup:  # type: ignore[arg-type]
        await sup.connect_all()
        prompts = await sup.prompts()
        down = _report_down(sup, "prompts")
    if as_json:
        print_json(
            {
                "prompts": [
                    {
                        "name": p.name,
                        "server": p.server,
                        "original_name": p.original_name,
                        "description": p.description,
                        "arguments": [
                            {
                                "name": a.name,
                                "required": bool(a.required),
                                "description": a.description,
                            }
                            for a in p.arguments
                        ],
                    }
                    for p in prompts
                ]
            }
        )
    else:
        rows = [
            (
                p.name,
                p.server,
                " ".join(a.name + ("" if a.required else "?") for a in p.arguments),
                _first_line(p.description),
            )
            for p in prompts
        ]
        _table(("name", "server", "arguments", "description"), rows)
        print(f"{plural(len(prompts), 'prompt')} (arguments marked ? are optional)")
    return EXIT_FAILURE if down == len(sup.status()) and down else EXIT_OK


def _cmd_prompt(args: argparse.Namespace) -> int:
    arguments: dict[str, str] = {}
    for item in args.arguments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"mcp-supervisor prompt: arguments are NAME=VALUE, not {item!r}", file=sys.stderr)
            return EXIT_USAGE
        arguments[key] = value
    return _one_shot(args, _prompt, args.name, arguments, args.json, args.timeout)


async def _prompt(
    config: object, name: str, arguments: dict[str, str], as_json: bool, timeout: float | None
) -> int:
    from ..errors import PromptArgumentsInvalid, SupervisorError, UnknownPrompt
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False) as sup:  # type: ignore[arg-type]
        try:
            try:
                result = await sup.get_prompt(name, arguments, timeout=timeout)
            except UnknownPrompt:  # a lazy server's prompts are known once it is connected
                await sup.connect_all()
                result = await sup.get_prompt(name, arguments, timeout=timeout)
        except (UnknownPrompt, PromptArgumentsInvalid) as exc:
            return _failed("prompt", exc, EXIT_USAGE)
        except SupervisorError as exc:
            return _failed("prompt", exc, EXIT_FAILURE)
    messages = [
        {"role": m.role, "content": m.content.model_dump(mode="json", exclude_none=True)}
        for m in result.messages
    ]
    if as_json:
        print_json({"name": name, "description": result.description, "messages": messages})
        return EXIT_OK
    for message, dumped in zip(result.messages, messages, strict=True):
        text = getattr(message.content, "text", None)
        shown = text if text is not None else json.dumps(dumped["content"])
        print(f"[{printable(message.role)}] {printable(shown, keep_lines=True)}")
    return EXIT_OK


def _one_shot(
    args: argparse.Namespace, command: Callable[..., Awaitable[int]], *rest: object
) -> int:
    """Load the config, then run ``command(config, *rest)`` as a one-shot command."""
    config = load(args)
    if config is None:
        return EXIT_USAGE
    one_shot(args)
    return run(command, config, *rest)


def _failed(command: str, exc: BaseException, code: int, text: str | None = None) -> int:
    """Say on stderr why ``command`` failed (in the command line's words); return ``code``."""
    shown = said(exc) if text is None else text
    shown = printable(shown, keep_lines=True)
    print(f"mcp-supervisor {command}: {type(exc).__name__}: {shown}", file=sys.stderr)
    return code


def _report_down(sup: SupervisorHandle, command: str) -> int:
    """Name on stderr the servers that could not be connected; how many."""
    down = 0
    for name, record in sup.status().items():
        if record.status != ServerStatus.CONNECTED:
            down += 1
            why = printable(record.last_error or "not connected", keep_lines=True)
            print(
                f"mcp-supervisor {command}: server {name!r} is {record.status}: {why}",
                file=sys.stderr,
            )
    return down


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    import shutil

    width = shutil.get_terminal_size((120, 24)).columns
    all_rows = [header, *(tuple(map(printable, row)) for row in rows)]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(header) - 1)]
    for row in all_rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        line = (line + "  " + row[-1]).rstrip()
        print(line if len(line) <= width else line[: width - 1] + "…")


def _timeout_option(parser: argparse.ArgumentParser) -> None:
    from ._tools import _seconds

    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="give up after S seconds (default: the server's timeout); waiting for the "
        "server to start counts",
    )


def register(commands: Commands, parents: Parents) -> None:
    """Add ``resources``, ``read``, ``prompts`` and ``prompt`` to the subcommands."""
    codes = (
        "Exit 0 ok; 1 a server failure (or no server could be connected); "
        "2 a usage or config error."
    )
    resources = commands.add_parser(
        "resources",
        parents=parents,
        help="connect every enabled server and list their resources and templates",
        description="Connect every enabled server (one attempt each) and list the merged "
        "resources and resource templates: uri, server, MIME type, description. " + codes,
    )
    add_config_options(resources)
    resources.add_argument("--json", action="store_true", help="one JSON document on stdout")
    resources.set_defaults(handler=_cmd_resources)

    read = commands.add_parser(
        "read",
        parents=parents,
        help="read one resource and print its contents",
        description="Read URI from the server that lists it (or matches it with a "
        "template), or from --server. Text is printed as it is; binary contents as one "
        "line naming its type and size (--json has them, base64). Exit 0 ok; 1 a server "
        "failure; 2 no server offers URI, or a usage or config error.",
    )
    add_config_options(read)
    read.add_argument("uri", metavar="URI", help="the resource, e.g. notes://index")
    read.add_argument("--server", metavar="NAME", help="read it from this server")
    read.add_argument("--json", action="store_true", help="one JSON document on stdout")
    _timeout_option(read)
    read.set_defaults(handler=_cmd_read)

    prompts = commands.add_parser(
        "prompts",
        parents=parents,
        help="connect every enabled server and list their prompts",
        description="Connect every enabled server (one attempt each) and list the merged "
        "prompts with their arguments. " + codes,
    )
    add_config_options(prompts)
    prompts.add_argument("--json", action="store_true", help="one JSON document on stdout")
    prompts.set_defaults(handler=_cmd_prompts)

    prompt = commands.add_parser(
        "prompt",
        parents=parents,
        help="get one prompt and print its messages",
        description="Get the prompt NAME (its merged name, as 'prompts' lists it) with "
        "arguments NAME=VALUE and print its messages, one '[role] text' line each. Exit 0 "
        "ok; 1 a server failure; 2 an unknown prompt, missing arguments, or a usage or "
        "config error.",
    )
    add_config_options(prompt)
    prompt.add_argument("name", metavar="NAME", help="the prompt's merged name")
    prompt.add_argument("arguments", nargs="*", metavar="ARG=VALUE", help="its arguments")
    prompt.add_argument("--json", action="store_true", help="one JSON document on stdout")
    _timeout_option(prompt)
    prompt.set_defaults(handler=_cmd_prompt)
