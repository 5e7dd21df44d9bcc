"""Fixture MCP servers for tests: well-behaved, crashing, hanging, garbling, changing, slow.

Run one with ``python -m supervisor.testing.servers KIND [--transport stdio|http|sse]
[--host H] [--port N] [--crash-after N] [--count-file PATH] [--stderr-line TEXT]
[--garbage MODE] [--exit-code N] [--hold-lists PATH]``, or in-process under trio with
``make_server`` and ``serve_http``. The kinds:

``echo``
    Tools ``echo(text)`` (annotated read-only, idempotent), ``add(a, b)`` (integers, not
    annotated) and ``count()`` (tool executions this process did, ``count`` excluded).
``crash``
    ``echo``'s tools; the ``--crash-after N``-th tool call (default 1) is executed and
    recorded, then the process ends with ``os._exit(exit code)`` without answering it,
    after a ``fixture crashing after N tool calls ...`` line on stderr.
``exit-on-start``
    Writes the ``--stderr-line`` text (if any) and ``fixture exit-on-start exiting with
    code C pid=P`` on stderr, then exits with ``--exit-code`` (default 1) before reading
    anything and without importing the SDK; over HTTP it never listens.
``hang-init``
    Never answers anything, the first message (``server/discover`` from a default
    ``mcp.Client``; ``initialize`` in legacy mode) included. Over stdio it reads stdin
    until EOF and reports the first message's method on stderr
    (``fixture hang-init received server/discover; never answering``); over HTTP every
    request is accepted and never gets even a status line.
``garbage``
    Non-JSON lines on stdout (``garbage line N: this is not JSON-RPC ...``), by
    ``--garbage`` mode: ``only`` (default) — one at start and one per line read, never a
    valid message; ``before`` — three garbage lines, then a working ``echo`` server;
    ``after-first`` — an ``echo`` server whose first message (the answer to discover or
    initialize) is sent and every later one replaced by a garbage line. Over HTTP (``only``):
    every POST gets ``200 application/json`` with a garbage body, every GET one garbage
    SSE event (no ``endpoint`` event, so an SSE client never gets connected).
``changing``
    ``echo``'s tools plus ``add_tool(name)`` / ``remove_tool(name)``, which change the tool
    list and announce it: ``notifications/tools/list_changed`` for handshake-era clients,
    a ``subscriptions/listen`` event for 2026-07-28 clients; ``tools.listChanged`` is
    advertised in both eras (see ``make_server``).
``slow``
    ``echo``'s tools plus ``sleep(seconds)``, answered after sleeping; ``busy(seconds)``,
    held that long, and ``peak()``, the most ``busy`` calls it had in flight at once.
``rich``
    ``echo``'s tools plus one of each content and result kind: ``image()`` (a 1×1 PNG
    ``ImageContent`` and the text ``an image``), ``audio()`` (an ``audio/wav``
    ``AudioContent``), ``big_text(kib)`` (exactly ``kib`` × 1024 ASCII bytes of ``line N``
    lines), ``structured_ok()`` / ``structured_bad()`` (both declare the output schema
    ``{"count": integer}``; they return ``{"count": 3}`` and ``{"count": "three"}``, sent
    unvalidated), ``fail(message)`` (``isError`` with ``message``), ``delete_note(title)``
    (destructive by name only) and ``wipe()`` (annotated ``destructiveHint``), both
    answering ``ok``, ``embedded()`` (an ``EmbeddedResource`` ``note://hello`` and a
    ``ResourceLink`` to ``notes://index``), and ``add_note(title)``, which adds the resource
    ``notes://<title>`` and announces ``resources/list_changed`` both ways ``changing`` does.
    Resources ``notes://index`` (text, the note titles, one a line) and ``notes://logo``
    (``image/png`` blob), the template ``note://{title}`` (``note <title>``; each read is
    recorded as the execution ``note``, so ``--crash-after`` can crash a read); prompts
    ``summarize(title)`` (a user message ``Summarize note <title>``) and ``greet()``.
    Its handshake advertises ``resources.listChanged`` and ``prompts.listChanged``. With
    ``--hold-lists PATH`` its resource, template and prompt listings are answered only
    once no file is at ``PATH``: a listing a test holds as long as it wants.
``big``
    A low-level ``Server`` (stdio or Streamable HTTP) listing ``--tools N`` numbered tools
    ``tool_0000`` … (default 1000; ``x: integer``) in pages of ``--page-size`` (100), each
    ``--extra-tool NAME`` (``NAME(text)``), ``burst(n)`` (changes the list n times, sending
    ``list_changed`` after each, back to back, then answers; a ``tools/list`` arriving
    meanwhile is answered after the last one), ``change_during(name)`` (adds a tool
    ``name`` and announces it, then answers only once a ``tools/list`` fetch has served the
    new list), ``list_count()`` (fetches and pages served, as JSON), a marker
    ``generation_<g>`` counting the bursts' changes, and ``--invalid K`` bad definitions
    (invalid property schemas, a duplicate name, an empty name). With ``--count-file`` each
    fetch (a ``tools/list`` without cursor) is also recorded, as the line ``tools/list``.
    Changes are announced both ways ``changing`` does.

Every other process writes ``fixture KIND ready pid=P transport=T`` on stderr once serving
(HTTP: once bound, with ``url=``), then the ``--stderr-line`` text if given — a stand-in
for a secret a supervisor must redact. HTTP fixtures then write ``LISTENING <url>`` on
stderr and on stdout. With ``--count-file`` (or ``$MCP_FIXTURE_COUNT_FILE``) every tool
execution appends the tool's name as a line *before* answering: ``count_executions``
tells what ran, crashes included. When the request's ``_meta`` carries a call id
(``"mcp-supervisor/call-id"``, sent by a supervisor that records a call history) the line
is ``tool<TAB>call id``, and ``executions_by_call`` counts executions per call: a call
that ran twice shows.

In-process under trio: ``make_server(kind, ...)`` builds the ``MCPServer``;
``serve_http`` serves it (or a bare ASGI app such as ``hang_app``/``garbage_app``) with
hypercorn until cancelled, and ``start_http`` starts that in a nursery and returns a handle
whose ``stop()`` frees the port for a restart. ``stdio_params``/``stdio_server_parameters``
give the subprocess command line; ``spawn_http``/``open_http_fixture`` run an HTTP fixture
in a subprocess.

OAuth (``_oauth``): ``open_oauth_server(**knobs)`` serves an OAuth-protected MCP server
(the SDK's authorization server and bearer-protected ``/mcp``, tools ``whoami`` and
``echo``) in-process, with ``TestAuthProvider`` (in-memory provider, counters),
``OAuthConfig`` (knobs), ``TestIdP`` (an enterprise IdP issuing ID-JAGs by token
exchange), ``make_oauth_server`` and ``generate_key_pair``. A program logging in to it
plays the person at the browser itself (docs/auth.md, "In a program").

``tiny`` (:mod:`supervisor.testing.servers.tiny`) is a stdio server of the standard
library alone — ``echo`` and ``add``, started in a few tens of milliseconds — for tests
that start many servers: ``tiny_server()`` gives its config entry, and with ``log=`` its
processes record how many were starting at once (``max_overlap``).

``contained`` (:mod:`supervisor.testing.servers.contained`), standard library alone too,
tries what a sandbox refuses — ``read_file``, ``write_file``, ``connect`` and ``fetch``
(through the proxy the environment names) — and answers what happened:
``contained_server(**entry)`` gives its config entry.

Importing this package does not import the ``mcp`` SDK; ``make_server``, ``serve_http``,
``start_http``, ``HttpServer`` and the OAuth names load it on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

if TYPE_CHECKING:
    from ._counting import count_executions as count_executions
    from ._counting import executions_by_call as executions_by_call
    from ._http import serve_http as serve_http
    from ._http import start_http as start_http
    from ._kinds import make_server as make_server
    from ._oauth import open_oauth_server as open_oauth_server
    from ._procs import stdio_params as stdio_params

__getattr__, __dir__ = attach(__name__)
