"""``status``, ``tools``, ``call``, ``events``, ``resources``, ``read``, ``prompts`` and
``prompt`` through a running gateway: a round trip instead of a start-up
(docs/gateway.md#the-cli-uses-a-running-gateway).

:func:`find_gateway` says which gateway to ask: ``--connect URL`` (token from
``$MCP_SUPERVISOR_GATEWAY_TOKEN``), else the one ``serve`` runs for the same config file
on this machine (its Unix socket), else none — and the command starts the servers itself,
as always (``--no-gateway`` asks for that). These paths load neither the MCP SDK nor trio
(but for a prompt whose messages are not all text): what they print is rendered from the
gateway's JSON answer, the way the command prints what it got itself.

The listings (``status``, ``tools``, ``resources``, ``prompts``, ``events``) only read: a
local gateway that does not answer them is passed over, and the command starts the
servers itself. A call, a read or a prompt handed to a gateway is never sent another
way: a server may count reads, or change on them, as on a call. Only a gateway that could
not be reached (nothing sent) lets the command start the servers itself.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, configure_cli_logging

__all__ = [
    "add_gateway_options",
    "call",
    "cold_start",
    "events",
    "failed",
    "find_gateway",
    "prompt",
    "prompts",
    "read",
    "resources",
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
    """The gateway to ask (a :class:`~supervisor.gateway._local.GatewayClient`), or ``None``."""
    from ..gateway._local import GatewayClient

    if args.connect is not None:
        token = os.environ.get("MCP_SUPERVISOR_GATEWAY_TOKEN") or None
        return GatewayClient(url=args.connect, token=token)
    if args.no_gateway:
        return None
    from ._trust import DEFAULT_CONFIG

    path = args.config if args.config is not None else DEFAULT_CONFIG
    if not os.path.exists(path):
        return None
    return GatewayClient.find(path)


def _fail(command: str, message: str, code: int = EXIT_FAILURE) -> int:
    from .._util._printable import printable

    shown = printable(message, keep_lines=True)  # it may quote the gateway's answer
    print(f"mcp-supervisor {command}: {shown}", file=sys.stderr)
    return code


# -- call ------------------------------------------------------------------------------------

#: Seconds ``status``, ``tools``, ``resources`` and ``prompts`` wait for a gateway's
#: answer; then a local one is passed over (they only list: the command starts the
#: servers itself).
READ_TIMEOUT = 30.0
#: Seconds ``call --timeout S`` (``read``, ``prompt``) waits for a gateway's answer
#: beyond ``S``: the gateway bounds the request itself by ``S``, and this is for its
#: answer to arrive.
ANSWER_MARGIN = 2.0


def call(
    client: Any,
    name: str,
    arguments: Mapping[str, object],
    as_json: bool,
    *,
    timeout: float | None = None,
    yes: bool = False,
) -> int | None:
    """Call ``name`` through the gateway and print the result as ``call`` does; the exit
    code, or ``None`` when the gateway could not be reached (nothing was sent: the caller
    starts the servers itself).

    Once the request is on its way the call belongs to the gateway: it is never sent
    another way. ``timeout`` goes to the gateway, which bounds the call with it; this
    waits that long and :data:`ANSWER_MARGIN` more, then says the call may have taken
    effect, as it does when the connection breaks before the answer."""
    from ..gateway._local import (
        GatewayNoAnswer,
        GatewayRefused,
        GatewayRequestError,
        GatewayUnreachable,
    )
    from ..tools._error_meta import error_in
    from ._render import call_error, report_call

    meta: dict[str, object] = {"mcp-supervisor/limits": True}
    if timeout is not None:
        meta["mcp-supervisor/timeout"] = timeout
        client.timeout = timeout + ANSWER_MARGIN
    if yes:
        meta["mcp-supervisor/approve"] = True
    # On a terminal the person is asked, as without a gateway: it asks for the approval
    # in a round trip of its own (an input_required answer), answered here.
    ask = not yes and os.isatty(0) and os.isatty(2)
    capabilities = {"elicitation": {"form": {}}} if ask else {}
    params: dict[str, object] = {"name": name, "arguments": dict(arguments)}
    try:
        with _stopped_by_signals():
            result = client.request("tools/call", params, meta=meta, capabilities=capabilities)
        if ask and result.get("resultType") == "input_required":
            try:
                answer = _approval_answer(result)
            except KeyboardInterrupt:  # Ctrl-C at the question: nothing more is sent
                sys.stderr.write("\n")
                message = f"interrupted at the approval question; the call of {name!r} was not made"
                call_error(name, "ApprovalDenied", message, as_json, effect="not executed")
                return 128 + 2
            if answer is None:
                message = (
                    "the gateway asked for input the command line cannot give; the call of "
                    f"{name!r} was not made"
                )
                call_error(name, "GatewayRefused", message, as_json, effect="not executed")
                return EXIT_FAILURE
            retry = {**params, "inputResponses": answer, "requestState": result["requestState"]}
            with _stopped_by_signals():
                result = client.request("tools/call", retry, meta=meta, capabilities=capabilities)
    except GatewayRequestError as exc:
        unknown = exc.code == -32602
        kind = "UnknownTool" if unknown else "ServerRequestError"
        # refused as a request (parse, method, params) before any tool ran; any other
        # error answer may have come after the call was made
        effect = "not executed" if exc.code in _REFUSED else "may have taken effect"
        call_error(name, kind, exc.message, as_json, server=None, effect=effect)
        return EXIT_USAGE if unknown else EXIT_FAILURE
    except GatewayUnreachable as exc:
        if client.url is None:
            return None  # nothing was sent: the command starts the servers itself
        message = f"{exc}; the call of {name!r} was not sent"
        call_error(name, "GatewayUnreachable", message, as_json, effect="not executed")
        return EXIT_FAILURE
    except GatewayRefused as exc:
        message = f"{exc}; the call of {name!r} was not made"
        call_error(name, "GatewayRefused", message, as_json, effect="not executed")
        return EXIT_FAILURE
    except (GatewayNoAnswer, _Stopped) as exc:
        what = str(exc) if isinstance(exc, GatewayNoAnswer) else exc.said(client.where)
        message = (
            f"{what}: the call of {name!r} was handed to it and may have taken effect; it "
            "was not sent again. Check whether it ran before calling it again"
        )
        call_error(name, "CallMayHaveTakenEffect", message, as_json, effect="may have taken effect")
        return exc.code if isinstance(exc, _Stopped) else EXIT_FAILURE
    meta_out = result.get("_meta") or {}
    error = error_in(meta_out)
    if error is not None:
        kind = str(error.get("type", "SupervisorError"))
        text = "\n".join(
            str(block.get("text", ""))
            for block in result.get("content") or ()
            if isinstance(block, dict) and block.get("type") == "text"
        )
        extra = {k: v for k, v in error.items() if k != "type"}
        if yes and kind == "ApprovalRequired":
            text += _YES_THROUGH_HTTP
        call_error(name, kind, text, as_json, **extra)
        return EXIT_USAGE if kind in _USAGE_ERRORS else EXIT_FAILURE
    limits = meta_out.get("mcp-supervisor/limits")
    return report_call(
        name,
        meta_out.get("mcp-supervisor/server"),
        result,
        limits=limits if isinstance(limits, dict) else None,
        as_json=as_json,
    )


def _approval_answer(result: Mapping[str, Any]) -> dict[str, object] | None:
    """Ask on the terminal the approval a gateway's ``input_required`` answer holds: the
    input responses to call again with, or ``None`` when it asks for anything else."""
    from ..gateway._local import APPROVAL_KEY

    requests = result.get("inputRequests")
    if not isinstance(requests, dict) or set(requests) != {APPROVAL_KEY}:
        return None
    if not isinstance(result.get("requestState"), str):
        return None
    asked = requests[APPROVAL_KEY]
    message = asked.get("params", {}).get("message") if isinstance(asked, dict) else None
    if not isinstance(message, str):
        return None
    from .._util._printable import printable

    sys.stderr.write(f"{printable(message)} [y/N] ")
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line.endswith("\n"):
        sys.stderr.write("\n")
    action = "accept" if line.strip().lower() in ("y", "yes") else "decline"
    return {APPROVAL_KEY: {"action": action}}


#: JSON-RPC error codes that refuse a request as such: parse error, invalid request,
#: method not found, invalid params.
_REFUSED = frozenset({-32700, -32600, -32601, -32602})

#: Said when ``call --yes`` met a gateway that would not take it (over ``--connect``).
_YES_THROUGH_HTTP = (
    " (call --yes approves through the gateway of this config on this machine only, over "
    "its local socket; over --connect, allow the tool in the gateway's config or start "
    "it with --yes — or run the call here with --no-gateway --yes)"
)


class _Stopped(Exception):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) ended the wait for the gateway's answer."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.code = 128 + signum

    def said(self, where: str | None) -> str:
        import signal

        name = signal.Signals(self.code - 128).name
        return f"{name} stopped the wait for the gateway at {where}"


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`_Stopped` while the block waits, so that
    a call handed to the gateway is reported for what it is (it may have taken effect)
    before the command exits ``128 +`` the signal's number. A signal that lands between
    two waits still ends the next one (:func:`~supervisor.gateway._local.signals_wake`)."""
    import signal

    from ..gateway._local import signals_wake

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {signum: signal.signal(signum, stop) for signum in stops}
    try:
        with signals_wake():
            yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


# -- tools, status, events ---------------------------------------------------------------------


def tools(client: Any, as_json: bool, search: str | None, limit: int) -> int | None:
    """The gateway's tools, printed as ``tools`` prints them (the gateway builds the same
    document at ``/tools``); ``None`` when a local gateway could not be asked."""
    from urllib.parse import urlencode

    from ..gateway._local import GatewayError
    from ._render import print_tools

    query = "" if search is None else "?" + urlencode({"search": search, "limit": limit})
    client.timeout = READ_TIMEOUT
    try:
        document = client.get("/tools" + query)
    except GatewayError as exc:
        return None if client.url is None else _fail("tools", str(exc))
    return print_tools(document, as_json)


def status(client: Any, as_json: bool) -> int | None:
    """The gateway's status table (or document); ``None`` when a local gateway could
    not be asked."""
    from ..gateway._local import GatewayError

    client.timeout = READ_TIMEOUT
    try:
        document = client.get("/status")
    except GatewayError as exc:
        return None if client.url is None else _fail("status", str(exc))
    import msgspec

    from ..server import HealthRecord
    from ._render import print_status

    records = {s["server"]: msgspec.convert(s, HealthRecord) for s in document["servers"]}
    return print_status(records, document if as_json else None)


def events(client: Any, pattern: str, duration: float | None) -> int | None:
    """The gateway's events as JSON lines, for ``duration`` seconds or until it stops
    (or a signal), each made printable as JSON
    (:func:`~supervisor._util._printable.printable_json`); ``None`` when a local gateway
    could not be asked."""
    from urllib.parse import quote

    from .._util._printable import printable_json
    from ..gateway._local import GatewayError

    out = sys.stdout.buffer
    try:
        for line in client.stream(f"/events?filter={quote(pattern)}", duration=duration):
            out.write(printable_json(line.decode("utf-8", "replace")).encode())
            out.flush()
    except GatewayError as exc:
        return None if client.url is None else _fail("events", str(exc))
    return EXIT_OK


# -- resources, read, prompts, prompt ----------------------------------------------------------
#
# These only ask: the commands print what they get (:mod:`._resources`), with the printer
# they print their own servers' answers with. Each returns the gateway's answer; or the
# exit code, once it said on stderr why there is none; or ``None`` when the local gateway
# could not be asked (the command starts the servers itself).


def resources(client: Any) -> dict[str, Any] | int | None:
    """The gateway's ``resources`` document (``/resources``)."""
    return _listing(client, "resources")


def prompts(client: Any) -> dict[str, Any] | int | None:
    """The gateway's ``prompts`` document (``/prompts``)."""
    return _listing(client, "prompts")


def _listing(client: Any, command: str) -> dict[str, Any] | int | None:
    from ..gateway._local import GatewayError

    client.timeout = READ_TIMEOUT
    try:
        document = client.get(f"/{command}")
    except GatewayError as exc:
        return None if client.url is None else _fail(command, str(exc))
    if not isinstance(document, dict):
        return _fail(command, f"the gateway at {client.where} answered no {command} document")
    return document


def read(
    client: Any, uri: str, server: str | None, *, timeout: float | None = None
) -> list[dict[str, Any]] | int | None:
    """The contents of ``uri`` (from ``server``, if given), read through the gateway as
    MCP sends them. Once sent, the read is never sent another way (:func:`_handed`)."""
    meta: dict[str, object] = {} if server is None else {"mcp-supervisor/server": server}
    answer = _handed(
        client, "read", f"the read of {uri!r}", "resources/read", {"uri": uri}, meta, timeout
    )
    if not isinstance(answer, dict):
        return answer
    contents = answer.get("contents")
    if not isinstance(contents, list) or not all(isinstance(c, dict) for c in contents):
        return _fail("read", f"the gateway at {client.where} answered no contents")
    return contents


def prompt(
    client: Any, name: str, arguments: Mapping[str, str], *, timeout: float | None = None
) -> dict[str, Any] | int | None:
    """The prompt ``name`` with ``arguments``, got through the gateway: MCP's
    ``GetPromptResult`` as JSON (its ``messages`` a list of objects). Once sent, it is
    never sent another way (:func:`_handed`)."""
    params = {"name": name, "arguments": dict(arguments)}
    what = f"the prompt {name!r}"
    answer = _handed(client, "prompt", what, "prompts/get", params, {}, timeout)
    if not isinstance(answer, dict):
        return answer
    messages = answer.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return _fail("prompt", f"the gateway at {client.where} answered no messages")
    return answer


def failed(command: str, kind: str, message: str, code: int) -> int:
    """Say on stderr why ``command`` failed (the error's ``kind`` and ``message``, in the
    command line's words), as it says it whether a gateway answered or its own servers
    did; return ``code``."""
    from .._util._printable import printable

    if kind in ("UnknownResource", "UnknownServer"):
        message = message.replace("pass server= to read", "give --server NAME to read")
    shown = printable(message, keep_lines=True)
    print(f"mcp-supervisor {command}: {printable(kind)}: {shown}", file=sys.stderr)
    return code


#: What a gateway refuses for a read or a prompt, the same way on every try: usage errors.
_ASKED_WRONG = frozenset(
    {"UnknownResource", "UnknownServer", "UnknownPrompt", "PromptArgumentsInvalid"}
)
#: JSON-RPC error code for a resource not found (the MCP specification's).
_RESOURCE_NOT_FOUND = -32002


def _handed(
    client: Any,
    command: str,
    what: str,
    method: str,
    params: Mapping[str, object],
    meta: dict[str, object],
    timeout: float | None,
) -> dict[str, Any] | int | None:
    """Send one request the way ``call`` sends a call: its result; or, said on stderr as
    the command says it, the exit code (2 for what is asked wrongly: an unknown resource,
    server or prompt, a missing argument); or ``None`` when the local gateway could not be
    reached (nothing was sent). Once the request is on its way it belongs to the gateway:
    a missing answer (the connection closed, no answer within ``timeout`` and
    :data:`ANSWER_MARGIN`, a signal) is exit 1 (``128 +`` the signal's number), saying
    that it was not sent again."""
    from ..gateway._local import (
        GatewayNoAnswer,
        GatewayRefused,
        GatewayRequestError,
        GatewayUnreachable,
    )

    if timeout is not None:
        meta["mcp-supervisor/timeout"] = timeout
        client.timeout = timeout + ANSWER_MARGIN
    try:
        with _stopped_by_signals():
            return client.request(method, params, meta=meta)
    except GatewayRequestError as exc:
        kind = exc.kind
        if kind is None:  # refused as asked (not found, not served) or failed on the way
            asked = exc.code in (_RESOURCE_NOT_FOUND, -32602)
            unknown = "UnknownResource" if method == "resources/read" else "UnknownPrompt"
            kind = unknown if asked else "ServerRequestError"
        code = EXIT_USAGE if kind in _ASKED_WRONG else EXIT_FAILURE
        return failed(command, kind, exc.message, code)
    except GatewayUnreachable as exc:
        if client.url is None:
            return None  # nothing was sent: the command starts the servers itself
        return _fail(command, f"GatewayUnreachable: {exc}; {what} was not sent")
    except GatewayRefused as exc:
        return _fail(command, f"GatewayRefused: {exc}; {what} was not made")
    except (GatewayNoAnswer, _Stopped) as exc:
        said = str(exc) if isinstance(exc, GatewayNoAnswer) else exc.said(client.where)
        message = (
            f"GatewayNoAnswer: {said}: {what} was handed to it and may have been made; it "
            "was not sent again"
        )
        return _fail(command, message, exc.code if isinstance(exc, _Stopped) else EXIT_FAILURE)
