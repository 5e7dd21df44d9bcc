"""``resources``, ``read``, ``prompts`` and ``prompt``: the merged resources and prompts
from the command line, one-shot like ``tools`` and ``call``. What a server sent is made
printable (:func:`supervisor._util._printable.printable`) before it is shown; ``--json`` prints
it escaped, as JSON does.

Like ``tools`` and ``call``, each first asks the gateway that ``serve`` runs for the
config (or ``--connect URL``: :mod:`._remote`), and starts the servers itself only when
there is none to ask. Both ways print with the same printer from the same document —
the listings' (:mod:`supervisor.monitor._document`, which a gateway serves at
``/resources`` and ``/prompts``), a read's contents and a prompt's messages as MCP sends
them — so that the output is the same whichever way the command got it.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._util._plural import plural
from .._util._printable import printable
from ..server._status import ServerStatus
from . import _remote as remote
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
from ._remote import add_gateway_options, cold_start, failed, find_gateway
from ._trust import add_config_options

if TYPE_CHECKING:
    from ..config import Config
    from ..runtime import SupervisorHandle
    from ..server import HealthRecord


def _cmd_resources(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None:
        got = remote.resources(gateway)
        if isinstance(got, dict):
            return print_resources(got, args.json)
        if got is not None:
            return got
    cold_start(args)
    return _one_shot(args, _resources, args.json)


async def _resources(config: Config, as_json: bool) -> int:
    from ..faults import Injector
    from ..monitor._document import resources_document
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        await sup.connect_all()
        resources = await sup.resources()
        templates = await sup.resource_templates()
        document = resources_document(resources, templates, _enabled(sup))
    return print_resources(document, as_json)


def print_resources(document: Mapping[str, Any], as_json: bool) -> int:
    """Print a ``resources`` document
    (:func:`~supervisor.monitor._document.resources_document`, which a gateway serves at
    ``/resources``): its resources and templates as a table, or as JSON; each server not
    connected said on stderr. Returns the exit code: 1 when no server is connected."""
    code = _say_down(document, "resources")
    resources = _entries(document, "resources")
    templates = _entries(document, "templates")
    if as_json:
        print_json({"resources": resources, "templates": templates})
    else:
        rows = [
            (_str(r.get("uri")), _str(r.get("server")), _str(r.get("mime_type")), _first(r))
            for r in resources
        ]
        rows += [
            (
                _str(t.get("uri_template")),
                _str(t.get("server")),
                _str(t.get("mime_type")),
                "(template) " + _first(t),
            )
            for t in templates
        ]
        _table(("uri", "server", "type", "description"), rows)
        print(f"{plural(len(resources), 'resource')} and {plural(len(templates), 'template')}")
    return code


def _cmd_read(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None:
        got = remote.read(gateway, args.uri, args.server, timeout=args.timeout)
        if isinstance(got, list):
            return print_read(args.uri, got, args.json)
        if got is not None:
            return got
    cold_start(args)
    return _one_shot(args, _read, args.uri, args.server, args.json, args.timeout)


async def _read(
    config: Config, uri: str, server: str | None, as_json: bool, timeout: float | None
) -> int:
    from ..errors import SupervisorError, UnknownResource, UnknownServer
    from ..faults import Injector
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        try:
            if server is None:
                await sup.connect_all()  # which server offers it is known once listed
            result = await sup.read_resource(uri, server=server, timeout=timeout)
        except (UnknownResource, UnknownServer) as exc:
            return failed("read", type(exc).__name__, said(exc), EXIT_USAGE)
        except SupervisorError as exc:
            return failed("read", type(exc).__name__, said(exc), EXIT_FAILURE)
    # as a gateway sends it: both ways print from the same JSON
    contents = result.model_dump(mode="json", by_alias=True, exclude_none=True)["contents"]
    return print_read(uri, contents, as_json)


def print_read(uri: str, contents: Sequence[Mapping[str, Any]], as_json: bool) -> int:
    """Print what a read of ``uri`` got, ``contents`` as MCP sends them (JSON): each text
    as it is, each binary content as one line naming its type and size; or as JSON, each
    content's ``uri``, ``mime_type`` and ``text`` or ``blob`` (base64)."""
    if as_json:
        print_json({"uri": uri, "contents": [_content(c) for c in contents]})
        return EXIT_OK
    for content in contents:
        text = content.get("text")
        if isinstance(text, str):
            shown = printable(text, keep_lines=True)
            sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
        else:
            blob = base64.b64decode(_str(content.get("blob")))
            kind = printable(_str(content.get("mimeType")) or "binary")
            print(f"[{kind}: {len(blob)} bytes from {printable(_str(content.get('uri')))}]")
    return EXIT_OK


def _content(content: Mapping[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {"uri": content.get("uri"), "mime_type": content.get("mimeType")}
    if isinstance(content.get("text"), str):
        out["text"] = content["text"]
    else:
        out["blob"] = content.get("blob")
    return out


def _cmd_prompts(args: argparse.Namespace) -> int:
    gateway = find_gateway(args)
    if gateway is not None:
        got = remote.prompts(gateway)
        if isinstance(got, dict):
            return print_prompts(got, args.json)
        if got is not None:
            return got
    cold_start(args)
    return _one_shot(args, _prompts, args.json)


async def _prompts(config: Config, as_json: bool) -> int:
    from ..faults import Injector
    from ..monitor._document import prompts_document
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        await sup.connect_all()
        document = prompts_document(await sup.prompts(), _enabled(sup))
    return print_prompts(document, as_json)


def print_prompts(document: Mapping[str, Any], as_json: bool) -> int:
    """Print a ``prompts`` document (:func:`~supervisor.monitor._document.prompts_document`,
    which a gateway serves at ``/prompts``) as :func:`print_resources` prints resources."""
    code = _say_down(document, "prompts")
    prompts = _entries(document, "prompts")
    if as_json:
        print_json({"prompts": prompts})
    else:
        rows = [
            (
                _str(p.get("name")),
                _str(p.get("server")),
                " ".join(
                    _str(a.get("name")) + ("" if a.get("required") else "?")
                    for a in _entries(p, "arguments")
                ),
                _first(p),
            )
            for p in prompts
        ]
        _table(("name", "server", "arguments", "description"), rows)
        print(f"{plural(len(prompts), 'prompt')} (arguments marked ? are optional)")
    return code


def _cmd_prompt(args: argparse.Namespace) -> int:
    arguments: dict[str, str] = {}
    for item in args.arguments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"mcp-supervisor prompt: arguments are NAME=VALUE, not {item!r}", file=sys.stderr)
            return EXIT_USAGE
        arguments[key] = value
    gateway = find_gateway(args)
    if gateway is not None:
        got = remote.prompt(gateway, args.name, arguments, timeout=args.timeout)
        if isinstance(got, dict):
            messages = prompt_messages(got["messages"])
            return print_prompt(args.name, got.get("description"), messages, args.json)
        if got is not None:
            return got
    cold_start(args)
    return _one_shot(args, _prompt, args.name, arguments, args.json, args.timeout)


async def _prompt(
    config: Config, name: str, arguments: dict[str, str], as_json: bool, timeout: float | None
) -> int:
    from ..errors import PromptArgumentsInvalid, SupervisorError, UnknownPrompt
    from ..faults import Injector
    from ..runtime import open_supervisor

    async with open_supervisor(config, retries=False, injector=Injector()) as sup:
        try:
            try:
                result = await sup.get_prompt(name, arguments, timeout=timeout)
            except UnknownPrompt:  # a lazy server's prompts are known once it is connected
                await sup.connect_all()
                result = await sup.get_prompt(name, arguments, timeout=timeout)
        except (UnknownPrompt, PromptArgumentsInvalid) as exc:
            return failed("prompt", type(exc).__name__, said(exc), EXIT_USAGE)
        except SupervisorError as exc:
            return failed("prompt", type(exc).__name__, said(exc), EXIT_FAILURE)
    messages = [
        {"role": m.role, "content": m.content.model_dump(mode="json", exclude_none=True)}
        for m in result.messages
    ]
    return print_prompt(name, result.description, messages, as_json)


def print_prompt(
    name: str, description: object, messages: Sequence[Mapping[str, Any]], as_json: bool
) -> int:
    """Print a prompt's ``messages`` (each its ``role`` and ``content``, the content as the
    SDK's model dumps it: :func:`prompt_messages` makes them of a gateway's answer): one
    ``[role] text`` line each, a content other than text as its JSON; or as JSON."""
    if as_json:
        print_json({"name": name, "description": description, "messages": list(messages)})
        return EXIT_OK
    for message in messages:
        content = message.get("content")
        text = None
        if isinstance(content, Mapping) and content.get("type") == "text":
            text = content.get("text")
        shown = text if isinstance(text, str) else json.dumps(content)
        print(f"[{printable(_str(message.get('role')))}] {printable(shown, keep_lines=True)}")
    return EXIT_OK


def prompt_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, object]]:
    """A gateway's ``prompts/get`` messages (MCP's JSON) as :func:`print_prompt` takes
    them: a text content is the same either way; any other is read with the SDK's models
    (loaded only then) and dumped as a command that got it itself dumps it."""
    if all(_plain_text(m) for m in messages):  # in the model's order of fields
        return [
            {"role": m["role"], "content": {"type": "text", "text": m["content"]["text"]}}
            for m in messages
        ]
    import mcp_types as types

    read = [types.PromptMessage.model_validate(m) for m in messages]
    return [
        {"role": m.role, "content": m.content.model_dump(mode="json", exclude_none=True)}
        for m in read
    ]


def _plain_text(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (
        isinstance(content, Mapping)
        and set(content) == {"type", "text"}
        and content["type"] == "text"
        and isinstance(content["text"], str)
        and isinstance(message.get("role"), str)
    )


def _one_shot(
    args: argparse.Namespace, command: Callable[..., Awaitable[int]], *rest: object
) -> int:
    """Load the config, then run ``command(config, *rest)`` as a one-shot command."""
    config = load(args)
    if config is None:
        return EXIT_USAGE
    one_shot(args)
    return run(command, config, *rest)


def _enabled(sup: SupervisorHandle) -> dict[str, HealthRecord]:
    """The records of the servers a listing is of: disabled ones never start, and are
    not missed."""
    return {n: r for n, r in sup.status().items() if r.status != ServerStatus.DISABLED}


def _say_down(document: Mapping[str, Any], command: str) -> int:
    """Name on stderr the servers of ``document`` that are not connected; the exit code:
    1 when none is."""
    servers = [s for s in document.get("servers") or () if isinstance(s, Mapping)]
    down = 0
    for server in servers:
        if server.get("status") != ServerStatus.CONNECTED:
            down += 1
            why = _str(server.get("error")) or "not connected"
            line = f"server {_str(server.get('name'))!r} is {_str(server.get('status'))}: {why}"
            print(f"mcp-supervisor {command}: {printable(line, keep_lines=True)}", file=sys.stderr)
    return EXIT_FAILURE if servers and down == len(servers) else EXIT_OK


def _entries(document: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return [entry for entry in document.get(key) or () if isinstance(entry, Mapping)]


def _str(value: object) -> str:
    """A field of a document, as text (``""`` for none)."""
    return "" if value is None else str(value)


def _first(entry: Mapping[str, Any]) -> str:
    return _first_line(_str(entry.get("description")))


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    from ._render import stdout_width

    width = stdout_width()
    all_rows = [header, *(tuple(map(printable, row)) for row in rows)]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(header) - 1)]
    for row in all_rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        line = (line + "  " + row[-1]).rstrip()
        print(line if width is None or len(line) <= width else line[: width - 1] + "…")


def _timeout_option(parser: argparse.ArgumentParser) -> None:
    from ._tools import _seconds

    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="give up after S seconds (default: the server's timeout); waiting for the "
        "server to start counts. Through a gateway, S goes to it, which bounds the request "
        "with it",
    )


def register(commands: Commands, parents: Parents) -> None:
    """Add ``resources``, ``read``, ``prompts`` and ``prompt`` to the subcommands."""
    codes = (
        "Exit 0 ok; 1 a server failure (or no server could be connected); "
        "2 a usage or config error."
    )
    listed = codes + (
        " A running gateway of the config (serve), or the one at --connect URL, is asked "
        "instead of starting the servers, and the output is the same."
    )
    handed = (
        " A running gateway of the config (serve), or the one at --connect URL, is asked "
        "instead, and the output is the same; once handed to it, the request is never "
        "sent another way (no answer: exit 1)."
    )
    resources = commands.add_parser(
        "resources",
        parents=parents,
        help="connect every enabled server and list their resources and templates",
        description="Connect every enabled server (one attempt each) and list the merged "
        "resources and resource templates: uri, server, MIME type, description. " + listed,
    )
    add_config_options(resources)
    add_gateway_options(resources)
    resources.add_argument("--json", action="store_true", help="one JSON document on stdout")
    resources.set_defaults(handler=_cmd_resources)

    read = commands.add_parser(
        "read",
        parents=parents,
        help="read one resource and print its contents",
        description="Read URI from the server that lists it (or matches it with a "
        "template), or from --server. Text is printed as it is; binary contents as one "
        "line naming its type and size (--json has them, base64). Exit 0 ok; 1 a server "
        "failure; 2 no server offers URI, or a usage or config error." + handed,
    )
    add_config_options(read)
    add_gateway_options(read)
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
        "prompts with their arguments. " + listed,
    )
    add_config_options(prompts)
    add_gateway_options(prompts)
    prompts.add_argument("--json", action="store_true", help="one JSON document on stdout")
    prompts.set_defaults(handler=_cmd_prompts)

    prompt = commands.add_parser(
        "prompt",
        parents=parents,
        help="get one prompt and print its messages",
        description="Get the prompt NAME (its merged name, as 'prompts' lists it) with "
        "arguments NAME=VALUE and print its messages, one '[role] text' line each. Exit 0 "
        "ok; 1 a server failure; 2 an unknown prompt, missing arguments, or a usage or "
        "config error." + handed,
    )
    add_config_options(prompt)
    add_gateway_options(prompt)
    prompt.add_argument("name", metavar="NAME", help="the prompt's merged name")
    prompt.add_argument("arguments", nargs="*", metavar="ARG=VALUE", help="its arguments")
    prompt.add_argument("--json", action="store_true", help="one JSON document on stdout")
    _timeout_option(prompt)
    prompt.set_defaults(handler=_cmd_prompt)
