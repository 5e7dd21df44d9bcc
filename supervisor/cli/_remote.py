"""``status``, ``tools``, ``call`` and ``events`` through a running gateway: a round trip
instead of a start-up (docs/gateway.md#the-cli-uses-a-running-gateway).

:func:`find_gateway` says which gateway to ask: ``--connect URL`` (token from
``$MCP_SUPERVISOR_GATEWAY_TOKEN``), else the one ``serve`` runs for the same config file
on this machine (its Unix socket), else none — and the command starts the servers itself,
as always (``--no-gateway`` asks for that). The ``call`` path loads neither the MCP SDK
nor trio: what it prints is rendered here from the gateway's JSON answer, the way
``call`` prints a result it got itself.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, configure_cli_logging, print_json

__all__ = [
    "add_gateway_options",
    "call",
    "cold_start",
    "events",
    "find_gateway",
    "status",
    "tools",
]

#: The errors refused before anything was sent, the same way on every try: usage errors.
_USAGE_ERRORS = frozenset({"UnknownTool", "ToolArgumentsInvalid", "ApprovalRequired"})


def cold_start(args: argparse.Namespace) -> None:
    """No gateway to ask: the command starts the servers itself, with logging set up as
    for every command (a ``-v`` run has it already)."""
    if not getattr(args, "verbose", 0):
        configure_cli_logging(args)


def add_gateway_options(parser: argparse.ArgumentParser) -> None:
    """``--connect URL`` and ``--no-gateway`` (and, as the commands that take them first
    try a gateway, which needs no logging stack, ``light``)."""
    parser.set_defaults(light=True)
    parser.add_argument(
        "--connect",
        metavar="URL",
        default=None,
        help="ask the gateway at URL (http://HOST:PORT/mcp; token from "
        "$MCP_SUPERVISOR_GATEWAY_TOKEN) instead of starting the servers",
    )
    parser.add_argument(
        "--no-gateway",
        action="store_true",
        help="start the servers even when a gateway serves this config",
    )


def find_gateway(args: argparse.Namespace) -> Any:
    """The gateway to ask (a :class:`~supervisor.gateway.GatewayClient`), or ``None``."""
    from ..gateway._local import GatewayClient

    timeout = getattr(args, "timeout", None)
    timeout = None if timeout is None else timeout + 5.0  # the gateway's own timeout first
    if args.connect is not None:
        token = os.environ.get("MCP_SUPERVISOR_GATEWAY_TOKEN") or None
        return GatewayClient(url=args.connect, token=token, timeout=timeout)
    if args.no_gateway:
        return None
    from ._trust import DEFAULT_CONFIG

    path = args.config if args.config is not None else DEFAULT_CONFIG
    if not os.path.exists(path):
        return None
    return GatewayClient.find(path, timeout=timeout)


def _fail(command: str, message: str) -> int:
    print(f"mcp-supervisor {command}: {message}", file=sys.stderr)
    return EXIT_FAILURE


# -- call ------------------------------------------------------------------------------------


def call(client: Any, name: str, arguments: Mapping[str, object], as_json: bool) -> int | None:
    """Call ``name`` through the gateway and print the result as ``call`` does; the exit
    code, or ``None`` when the gateway could not be asked (a local one that went away:
    the caller starts the servers itself)."""
    from ..gateway._local import GatewayError, GatewayRequestError

    try:
        result = client.request("tools/call", {"name": name, "arguments": dict(arguments)})
    except GatewayRequestError as exc:
        kind = "UnknownTool" if exc.code == -32602 else "ServerRequestError"
        print(f"mcp-supervisor call: {kind}: {exc.message}", file=sys.stderr)
        if as_json:
            print_json({"tool": name, "error": {"type": kind, "message": exc.message}})
        return EXIT_USAGE if exc.code == -32602 else EXIT_FAILURE
    except GatewayError as exc:
        if client.url is None:
            return None
        return _fail("call", str(exc))
    meta = result.get("_meta") or {}
    text = _text(result)
    error = meta.get("mcp-supervisor/error")
    if isinstance(error, dict):
        kind = str(error.get("type", "SupervisorError"))
        print(f"mcp-supervisor call: {kind}: {text}", file=sys.stderr)
        if as_json:
            print_json({"tool": name, "error": {"type": kind, "message": text, **error}})
        return EXIT_USAGE if kind in _USAGE_ERRORS else EXIT_FAILURE
    document = _document(name, meta.get("mcp-supervisor/server"), result, text)
    if result.get("isError"):
        said = text.strip() or "(no message)"
        print(f"mcp-supervisor call: tool {name!r} reported an error: {said}", file=sys.stderr)
        if as_json:
            print_json(document)
        return EXIT_FAILURE
    if as_json:
        print_json(document)
    else:
        _print(document)
    return EXIT_OK


def _text(result: Mapping[str, Any]) -> str:
    return "\n".join(
        str(block.get("text", ""))
        for block in result.get("content") or ()
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _document(name: str, server: object, result: Mapping[str, Any], text: str) -> dict[str, object]:
    """The ``call --json`` document, as for a call the command made itself."""
    images: list[dict[str, object]] = []
    audio: list[dict[str, object]] = []
    resources: list[dict[str, object]] = []
    for block in result.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("image", "audio"):
            data = str(block.get("data", ""))
            media = {"mime_type": block.get("mimeType"), "size": _size(data), "data": data}
            (images if kind == "image" else audio).append(media)
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            inner = block["resource"]
            content = inner.get("text")
            blob = inner.get("blob")
            size = len(content.encode()) if isinstance(content, str) else None
            if isinstance(blob, str):
                size = _size(blob)
            resources.append(
                {
                    "kind": "embedded",
                    "uri": inner.get("uri"),
                    "mime_type": inner.get("mimeType"),
                    "name": None,
                    "size": size,
                    "text": content,
                    "blob": blob,
                }
            )
        elif kind == "resource_link":
            resources.append(
                {
                    "kind": "link",
                    "uri": block.get("uri"),
                    "mime_type": block.get("mimeType"),
                    "name": block.get("name"),
                    "size": block.get("size"),
                    "text": None,
                    "blob": None,
                }
            )
    return {
        "tool": name,
        "server": server,
        "text": text,
        "structured": result.get("structuredContent"),
        "is_error": bool(result.get("isError")),
        "images": images,
        "audio": audio,
        "resources": resources,
        "spilled_to": None,
    }


def _print(document: Mapping[str, Any]) -> None:
    """The text, else the structured content as JSON; then a line per image, audio clip
    and resource — as ``call`` prints a result."""
    if document["text"]:
        print(document["text"])
    elif document["structured"] is not None:
        print(json.dumps(document["structured"]))
    for kind in ("image", "audio"):
        for media in document["images" if kind == "image" else "audio"]:
            print(f"[{kind}: {media['mime_type']}, {media['size']} bytes]")
    for r in document["resources"]:
        parts = [
            r["mime_type"],
            None if r["size"] is None else f"{r['size']} bytes",
            None if r["name"] is None else f"name {r['name']!r}",
        ]
        details = ", ".join(p for p in parts if p)
        print(f"[resource ({r['kind']}): {r['uri']}{', ' + details if details else ''}]")


# -- tools, status, events ---------------------------------------------------------------------


def tools(client: Any, as_json: bool, search: str | None) -> int | None:
    """The gateway's tools: name and description, or ``--json``; ``None`` when a local
    gateway could not be asked."""
    from ..gateway._local import GatewayError

    try:
        listed = client.request("tools/list").get("tools", [])
    except GatewayError as exc:
        return None if client.url is None else _fail("tools", str(exc))
    if search:
        words = search.lower().split()
        listed = [
            t
            for t in listed
            if all(w in f"{t.get('name', '')} {t.get('description', '')}".lower() for w in words)
        ]
    if as_json:
        print_json({"tools": listed})
        return EXIT_OK
    width = max((len(t.get("name", "")) for t in listed), default=0)
    for tool in listed:
        summary = (tool.get("description") or "").strip().splitlines()
        print(f"{tool.get('name', ''):<{width}}  {summary[0] if summary else ''}".rstrip())
    print(f"{len(listed)} tools, through the gateway at {client.where}", file=sys.stderr)
    return EXIT_OK


def status(client: Any, as_json: bool) -> int | None:
    """The gateway's status table (or document); ``None`` when a local gateway could
    not be asked."""
    from ..gateway._local import GatewayError

    try:
        document = client.get("/status")
    except GatewayError as exc:
        return None if client.url is None else _fail("status", str(exc))
    servers = document.get("servers", [])
    if as_json:
        print(json.dumps(document), flush=True)
    else:
        import shutil

        import msgspec

        from ..monitor import status_table
        from ..server import HealthRecord

        records = {s["server"]: msgspec.convert(s, HealthRecord) for s in servers}
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 120
        print(status_table(records, color=False, width=width), flush=True)
    enabled = [s for s in servers if s.get("status") != "disabled"]
    return EXIT_OK if all(s.get("status") == "connected" for s in enabled) else EXIT_FAILURE


def events(client: Any, pattern: str, duration: float | None) -> int | None:
    """The gateway's events as JSON lines, for ``duration`` seconds or until it stops
    (or a signal); ``None`` when a local gateway could not be asked."""
    from urllib.parse import quote

    from ..gateway._local import GatewayError

    out = sys.stdout.buffer
    try:
        for line in client.stream(f"/events?filter={quote(pattern)}", duration=duration):
            out.write(line)
            out.flush()
    except GatewayError as exc:
        return None if client.url is None else _fail("events", str(exc))
    return EXIT_OK
