"""Browser logins: the one loopback callback listener of a supervisor, and the ways a
person is shown the authorization URL.

A login (the OAuth authorization-code flow) sends the user's browser to the authorization
server with a ``redirect_uri`` on 127.0.0.1; the server sends it back there with a code.
:class:`Logins` owns that loopback listener for the whole supervisor:

* It listens only while a login is pending, on ``callbackPort`` (default 9876), trying the
  next five ports when one is busy; the ``redirect_uri`` each login sends names the port
  actually bound (:meth:`Logins.redirect_uri`), and dynamic registrations list all six so
  a later login on another port still matches.
* Every pending login is keyed by its ``state``: a callback goes to the login whose state
  it carries, so concurrent logins to several servers share the one port without racing.
  With a single login pending, a callback with an unknown state goes to it anyway, and
  the SDK refuses it as a state mismatch (a login waiting forever helps nobody).
* The browser gets a short page saying whether it worked; the code never appears on it.
* The redirected URL may also be pasted back on a terminal (:meth:`Logins.deliver`), for a
  browser on another machine.
"""

from __future__ import annotations

import html
import math
import os
import socket
import subprocess
import sys
import webbrowser
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import parse_qs, urlsplit

import attrs
import trio
from mcp.shared.auth import AuthorizationCodeResult

from .._util._printable import printable
from ..errors import LoginCancelled as LoginCancelled
from ..log import get_logger

__all__ = [
    "CALLBACK_PATH",
    "DEFAULT_CALLBACK_PORT",
    "LOGIN_TIMEOUT",
    "CallbackHandler",
    "LoginCancelled",
    "Logins",
    "RedirectHandler",
    "browser_command",
    "default_redirect_handler",
]

log = get_logger("supervisor.auth")

#: The first loopback port tried for the callback; the next :data:`EXTRA_PORTS` follow.
DEFAULT_CALLBACK_PORT = 9876
EXTRA_PORTS = 5
CALLBACK_PATH = "/callback"
#: How long a login waits for the browser's answer (seconds).
LOGIN_TIMEOUT = 300.0

#: Shows a person the authorization URL (opens a browser, prints it, or both).
RedirectHandler = Callable[[str], Awaitable[None]]
#: Waits for the authorization server's answer (replaces the loopback listener).
CallbackHandler = Callable[[], Awaitable[AuthorizationCodeResult]]


@attrs.define
class _Pending:
    state: str
    done: trio.Event = attrs.Factory(trio.Event)
    result: AuthorizationCodeResult | None = None
    error: LoginCancelled | None = None


def _answer(query: str) -> tuple[str | None, AuthorizationCodeResult | LoginCancelled | None]:
    """``(state, result)`` from a callback's query string; result ``None`` if it is not
    an authorization response at all."""
    params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
    state = params.get("state")
    if "error" in params:
        return state, LoginCancelled(params["error"], params.get("error_description"))
    code = params.get("code")
    if not code:
        return state, None
    return state, AuthorizationCodeResult(code=code, state=state, iss=params.get("iss"))


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;margin:4em auto;max-width:32em;color:#222}}
h1{{font-size:1.3em}}</style></head><body><h1>{title}</h1><p>{text}</p></body></html>"""


def _page(ok: bool, text: str) -> bytes:
    title = "Logged in" if ok else "Login failed"
    return _PAGE.format(title=title, text=html.escape(text)).encode()


class Logins:
    """The pending browser logins of one supervisor and their callback listener."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        timeout: float = LOGIN_TIMEOUT,
    ) -> None:
        self.host = host
        self.timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self._port: int | None = None
        self._ports: tuple[int, ...] = ()
        self._stop: trio.CancelScope | None = None
        self._stopped: trio.Event | None = None
        self._lock = trio.Lock()
        self._users = 0
        self._idle = trio.Event()  # set (and replaced) each time the listener stops
        #: where the listener and browser commands run: the supervisor's auth actor sets it
        self.nursery: trio.Nursery | None = None

    @property
    def port(self) -> int | None:
        """The port the listener is bound to now, ``None`` while it is not listening."""
        return self._port

    def redirect_uri(self, port: int, path: str = CALLBACK_PATH) -> str:
        return f"http://{self.host}:{port}{path}"

    # -- the listener's life: open while any login needs it ------------------------------

    async def acquire(self, ports: Sequence[int]) -> int:
        """Make sure the listener is up (on the first free one of ``ports`` when it
        starts); return its port. Pair with :meth:`release`. A login whose ports do not
        include the one the listener is on waits for the logins using it to finish.
        Raises :class:`OSError` when every one of ``ports`` is busy."""
        from .._serving import bind_first  # hypercorn: loaded for the first login only

        nursery = self.nursery
        if nursery is None:
            raise RuntimeError("the OAuth callback listener is not running (no supervisor)")
        while True:
            async with self._lock:
                if self._port is None:
                    sock, port = await bind_first(self.host, ports)
                    scope = trio.CancelScope()
                    stopped = trio.Event()
                    nursery.start_soon(self._serve, sock, scope, stopped)
                    self._port, self._ports = port, tuple(ports)
                    self._stop, self._stopped = scope, stopped
                    log.info("OAuth callback listener started", port=port)
                if self._port in ports:
                    self._users += 1
                    return self._port
                idle = self._idle  # on another port: wait until its logins are done
            await idle.wait()

    async def release(self) -> None:
        async with self._lock:
            self._users -= 1
            if self._users > 0 or self._stop is None:
                return
            scope, stopped = self._stop, self._stopped
            self._stop = self._stopped = None
            self._port = None
            scope.cancel()
            assert stopped is not None
            with trio.CancelScope(shield=True):
                await stopped.wait()
            log.info("OAuth callback listener stopped")
            self._idle.set()
            self._idle = trio.Event()

    async def _serve(
        self, sock: socket.socket, scope: trio.CancelScope, stopped: trio.Event
    ) -> None:
        from .._serving import serve_sockets

        try:
            with scope:
                await serve_sockets(
                    self._app,
                    [sock],
                    logger_name="supervisor.auth.http",
                    graceful_timeout=0.5,
                    idle_timeout=10.0,
                    max_head=16 * 1024,
                )
        finally:
            sock.close()
            stopped.set()

    async def _app(self, scope: dict, receive: Callable, send: Callable) -> None:  # noqa: C901
        if scope["type"] == "lifespan":
            from .._serving import lifespan

            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        status, body = 404, _page(False, "Nothing is here.")
        if scope["method"] == "GET" and scope["path"] != "/favicon.ico":
            query = scope.get("query_string", b"").decode("latin-1")
            status, body = self._route(query)
        from .._serving import respond

        no_cache = [(b"cache-control", b"no-store"), (b"referrer-policy", b"no-referrer")]
        await respond(send, status, body, b"text/html; charset=utf-8", no_cache)

    def _route(self, query: str) -> tuple[int, bytes]:
        state, result = _answer(query)
        if result is None:
            return 400, _page(False, "This is not an answer from an authorization server.")
        pending = self._pending.get(state or "")
        if pending is None and len(self._pending) == 1:
            pending = next(iter(self._pending.values()))  # the SDK refuses the mismatch
        if pending is None or pending.done.is_set():
            return 400, _page(False, "No login is waiting for this answer.")
        if isinstance(result, LoginCancelled):
            pending.error = result
        else:
            pending.result = result
        pending.done.set()
        if isinstance(result, LoginCancelled):
            return 200, _page(False, f"{result} You can close this window.")
        return 200, _page(True, "You can close this window and return to mcp-supervisor.")

    # -- logins ------------------------------------------------------------------------

    def expect(self, state: str) -> None:
        """A login sent the browser off with ``state``: route its answer here."""
        self._pending[state] = _Pending(state)

    def forget(self, state: str) -> None:
        """The login sent off with ``state`` will not wait for its answer after all."""
        self._pending.pop(state, None)

    def deliver(self, url: str) -> bool:
        """Take an authorization answer pasted by hand (the redirected URL, or just its
        query string); whether a login was waiting for it."""
        text = url.strip()
        query = urlsplit(text).query if "://" in text else text.lstrip("?")
        status, _ = self._route(query)
        return status == 200

    async def wait(self, state: str) -> AuthorizationCodeResult:
        """The answer for the login sent off with ``state`` (within :attr:`timeout`)."""
        pending = self._pending.get(state)
        if pending is None:
            raise RuntimeError(f"no login is waiting for state {state!r}")
        try:
            with trio.move_on_after(self.timeout if self.timeout > 0 else math.inf):
                await pending.done.wait()
        finally:
            self._pending.pop(state, None)
        if pending.error is not None:
            raise pending.error
        if pending.result is None:
            raise TimeoutError(
                f"no answer from the browser within {self.timeout:g} s; run the login again"
            )
        return pending.result


def browser_command(url: str) -> list[str] | None:
    """The command line that opens ``url`` in the browser Python's ``webbrowser`` module
    picks (``$BROWSER`` honoured, ``%s`` replaced by the URL), when that browser is a
    plain command; ``None`` when there is none, or it is one the module
    drives itself."""
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return None
    if isinstance(browser, webbrowser.GenericBrowser):  # what its open() would run
        return [browser.name, *(arg.replace("%s", url) for arg in browser.args)]
    return None


def default_redirect_handler(nursery: trio.Nursery, *, quiet: bool = False) -> RedirectHandler:
    """Show the authorization URL to the person at the terminal: print ``Open this URL to
    authorize: …`` on stderr (all a machine without a browser, over SSH or in a container,
    gets) and open it in the browser Python's ``webbrowser`` module picks, ``$BROWSER``
    honoured. A browser command runs as a child task of ``nursery`` (never blocking the
    supervisor, stopped with it); ``MCP_SUPERVISOR_NO_BROWSER=1`` only prints."""

    async def redirect(url: str) -> None:
        if not quiet:
            shown = printable(url)  # built from what the authorization server said
            print(f"Open this URL to authorize: {shown}", file=sys.stderr, flush=True)
        if os.environ.get("MCP_SUPERVISOR_NO_BROWSER"):
            return
        command = browser_command(url)
        if command is not None:
            nursery.start_soon(_run_browser, command)
            return
        try:
            browser = webbrowser.get()
        except webbrowser.Error:
            return  # no browser here: the printed URL is the way
        try:
            browser.open(url)  # a desktop browser the module launches in the background
        except OSError as exc:
            log.warning("could not open a browser", error=str(exc))

    return redirect


async def _run_browser(command: list[str]) -> None:
    """Start the user's browser, detached: it is theirs, not a server of ours — a login
    that ends (or a supervisor that stops) leaves it open, as Python's ``webbrowser``
    does. Reaped here if it exits while the supervisor runs."""
    try:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:  # a $BROWSER that cannot be run
        log.warning("could not open a browser", command=command[0], error=str(exc))
        return
    await process.wait()
