"""The web dashboard: one page, live over a WebSocket, with restart and stop buttons.

::

    async with open_supervisor("mcp.json") as sup, trio.open_nursery() as nursery:
        info = await nursery.start(serve_dashboard, sup, "127.0.0.1", 8080)
        print("dashboard at", info.url, "- log in to act at", info.login_url)

:func:`serve_dashboard` serves, on one listener: the page (``/``, ``/app.js``,
``/app.css``, ``/timeline.css``: no external resources, no build step), served with the
state it starts from (so that its first render needs no feed), its feed (``/ws``: a
snapshot of every server's health record, its strip and the recent events on connect,
then an update for each burst of events, fed by the event bus and never slowing it),
the login (``/login``), the actions (``POST /api/servers/NAME/restart`` and
``.../stop``), ``/metrics`` (Prometheus text) and ``/healthz`` (JSON; 503 when no server
is connected or idle).

Each server's strip (``_strips``) is its last minutes — states, restarts, calls by
outcome — drawn by :mod:`supervisor.timeline`, the fault report's drawing, from what the
dashboard sees: the servers' statuses, the bus's events, and the calls of a
``SupervisorHandle.recent_calls`` window it keeps open while it serves.

It is a plain ASGI application (``_app``; no web framework) served by hypercorn's trio
worker, in the caller's trio run: every connection and request is a task in a nursery,
and it starts no thread of its own. The feed is the same app's ASGI ``websocket`` scope
(``_live`` says why).

Security model — who can read, who can act:

* **Reading** (the page, its feed, ``/metrics``, ``/healthz``, ``/readyz``): on a loopback
  host, whoever reaches the port (every user and process of this machine; no web page of
  another origin, see below). Beyond loopback, or with ``login_to_read``, only a
  logged-in browser or a script with the token (``401`` otherwise).
* **Acting** (``POST /api/servers/NAME/restart`` and ``.../stop``): only with the
  login, wherever it listens: the session cookie of a browser that visited the login
  URL, or ``Authorization: Bearer TOKEN`` (the scheme in any case); else ``401`` with
  a ``WWW-Authenticate`` challenge. Nothing the unauthenticated page holds lets anyone
  act: the page carries no secret.
* **Token.** The caller's ``token=``, or one made per call (``secrets.token_urlsafe(32)``),
  compared in constant time. A host beyond loopback without a chosen token is refused
  (``ValueError``) before anything listens. The token is registered with the log
  redactor while the dashboard serves; only the login URL (:attr:`DashboardInfo.login_url`)
  carries it, for the caller to hand to its user.
* **Login.** ``GET /login?token=TOKEN`` sets a session cookie (``HttpOnly``,
  ``SameSite=Strict``, ``Path=/``, named after the port, since cookies do not tell
  ports apart; its value is derived from the token, never the token) and answers ``303``
  to ``/``; a wrong token gets ``403``.
* **Origin.** Actions and the WebSocket upgrade must carry an ``Origin`` header equal to
  the dashboard's own origin (``http://`` + the request's ``Host``), else ``403``;
  browsers always send it on both, and a page cannot forge it, so another site's page
  (a local one on another port included, which is same-site and so gets the cookie)
  cannot act with the user's login. A request with the bearer token may come without
  an ``Origin`` (no other site's page can add that header). Actions are ``POST`` only
  (``405`` otherwise).
* **No CORS.** No response carries ``Access-Control-*`` headers, so a page of another
  origin can neither read the page nor the feed, nor send the ``Authorization`` header
  (its preflight gets ``405``).
* **Host.** Every route answers only when ``Host`` is an IP address, ``localhost`` or
  the host the dashboard was started with, with its port (``421`` otherwise): a
  DNS-rebinding page never becomes same-origin with it, nor reads its metrics.
* **Headers.** Every response has a Content-Security-Policy allowing only the page's
  own script, style sheet and connections (no inline code), ``nosniff``,
  ``Referrer-Policy: no-referrer``, ``Cache-Control: no-store``, ``frame-ancestors
  'none'``. Bad requests get a 4xx JSON error, never a traceback (a request too
  malformed to parse, or with a head over 16 KiB, gets hypercorn's empty ``400`` or
  ``431``; so does a WebSocket handshake that is not version 13 with a key).
* **Loopback by default.** It listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._server import DashboardInfo as DashboardInfo
    from ._server import serve_dashboard as serve_dashboard

__getattr__, __dir__ = attach(__name__)
