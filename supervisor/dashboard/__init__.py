"""The web dashboard: one page, live over a WebSocket, with restart and stop buttons.

::

    async with open_supervisor("mcp.json") as sup, trio.open_nursery() as nursery:
        info = await nursery.start(serve_dashboard, sup, "127.0.0.1", 8080)
        print("dashboard at", info.url)

:func:`serve_dashboard` serves, on one listener: the page (``/``, ``/app.js``,
``/app.css``, ``/timeline.css``: no external resources, no build step), served with the
state it starts from (so that its first render needs no feed), its feed (``/ws``: a
snapshot of every server's health record, its strip and the recent events on connect,
then an update for each burst of events, fed by the event bus and never slowing it),
the actions (``POST /api/servers/NAME/restart`` and ``.../stop``), ``/metrics``
(Prometheus text) and ``/healthz`` (JSON; 503 when no server is connected or idle).

Each server's strip (``_strips``) is its last minutes — states, restarts, calls by
outcome — drawn by :mod:`supervisor.timeline`, the fault report's drawing, from what the
dashboard sees: the servers' statuses, the bus's events, and the calls of a
``SupervisorHandle.recent_calls`` window it keeps open while it serves.

It is a plain ASGI application (``_app``; no web framework) served by hypercorn's trio
worker, in the caller's trio run: every connection and request is a task in a nursery,
and it starts no thread of its own. The feed is the same app's ASGI ``websocket`` scope
(``_live`` says why).

Security model — the actions change what runs, so they are kept from other origins:

* **Token.** Each :func:`serve_dashboard` call makes a random token
  (``secrets.token_urlsafe(32)``), embeds it in the page it serves (a ``<meta>`` tag),
  and requires it in the ``X-Dashboard-Token`` header of every action (compared in
  constant time); without it, or with a wrong one: ``403``. It is never logged (it is
  registered with the log redactor) and never part of a URL.
* **No CORS.** No response carries ``Access-Control-*`` headers, so a page of another
  origin can neither read the page (and the token in it), nor the feed, nor send an
  action with the custom header (its preflight gets ``405``).
* **Origin.** Actions and the WebSocket upgrade must carry an ``Origin`` header equal to
  the dashboard's own origin (``http://`` + the request's ``Host``), else ``403``;
  browsers always send it on both. Actions are ``POST`` only (``405`` otherwise).
* **Host.** The page, the feed and the actions answer only when ``Host`` is an IP
  address, ``localhost`` or the host the dashboard was started with, with its port
  (``421`` otherwise): a DNS-rebinding page never becomes same-origin with it.
  ``/metrics`` and ``/healthz`` answer for any Host (read-only, no token).
* **Headers.** Every response has a Content-Security-Policy allowing only the page's
  own script, style sheet and connections (no inline code), ``nosniff``,
  ``Referrer-Policy: no-referrer``, ``Cache-Control: no-store``, ``frame-ancestors
  'none'``. Bad requests get a 4xx JSON error, never a traceback (a request too
  malformed to parse, or with a head over 16 KiB, gets hypercorn's empty ``400`` or
  ``431``; so does a WebSocket handshake that is not version 13 with a key).
* **Loopback by default.** It listens on 127.0.0.1 unless told otherwise; anyone who
  can reach the port can read the status (not act), so bind other addresses with care.
"""

from __future__ import annotations

from ._address import parse_address as parse_address
from ._security import TOKEN_HEADER as TOKEN_HEADER
from ._server import DashboardInfo as DashboardInfo
from ._server import serve_dashboard as serve_dashboard

__all__ = ["TOKEN_HEADER", "DashboardInfo", "parse_address", "serve_dashboard"]
