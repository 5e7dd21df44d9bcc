"""A stand-in for the user's web browser in OAuth tests: set it as ``$BROWSER``.

``webbrowser.open(url)`` runs ``$BROWSER`` with the URL substituted for ``%s`` (or, without
``%s``, treats the whole value as one program name): use ``command()``, which gives
``<python> <this file> %s``. Run as a file it imports nothing but the standard library, so
it starts fast. Note that ``webbrowser.open`` waits for the command to
exit, and this "browser" needs the client's loopback callback listener to answer meanwhile:
call it off the event loop (a thread), or use ``command(background=True)`` (a trailing
``&``, which ``webbrowser`` runs without waiting).

What it does with the authorization URL: GET it without following the redirect, take the
``Location`` (the client's loopback callback with ``code``, ``state`` and ``iss``), GET that
without following anything either, and exit 0 whatever the callback answers. It talks only
to ``127.0.0.1``, ``::1`` and ``localhost`` (anything else: exit 2, nothing sent) and never
through a proxy. Exit 1 when the authorization endpoint does not redirect or a request fails.

Environment:

``MCP_TEST_BROWSER_LOG=path``
    Append the authorization URL as one line per invocation (refused ones too), so a test
    can tell whether, and how often, the browser was opened.
``MCP_TEST_BROWSER_TAMPER=state|iss``
    Replace that parameter's value in the callback URL before requesting it (added when
    absent): ``state`` becomes ``tampered-<state>``, ``iss`` ``https://tampered.invalid``.
"""

from __future__ import annotations

import os
import shlex
import sys
import urllib.error
import urllib.request
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

LOG_ENV = "MCP_TEST_BROWSER_LOG"
TAMPER_ENV = "MCP_TEST_BROWSER_TAMPER"
TAMPERED_ISS = "https://tampered.invalid"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
TIMEOUT = 10.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def command(*, background: bool = False) -> str:
    """The ``$BROWSER`` value that runs this file with the current interpreter."""
    line = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} %s"
    return line + " &" if background else line


def is_loopback(url: str) -> bool:
    """Whether `url` is http(s) to 127.0.0.1, ::1 or localhost."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host in LOOPBACK_HOSTS


def tamper(url: str, param: str) -> str:
    """`url` with query parameter `param` changed (see the module docstring)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    old = next((value for name, value in query if name == param), None)
    new = TAMPERED_ISS if param == "iss" else f"tampered-{old or ''}"
    if old is None:
        query.append((param, new))
    else:
        query = [(name, new if name == param else value) for name, value in query]
    return urlunsplit(parts._replace(query=urlencode(query)))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _get(url: str) -> tuple[int, str | None]:
    """GET `url` with no proxy and no redirect: the status and the ``Location``."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    try:
        with opener.open(url, timeout=TIMEOUT) as response:
            return response.status, response.headers.get("Location")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers.get("Location")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: oauth_browser.py AUTHORIZATION_URL", file=sys.stderr)
        return 2
    url = args[0]
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(url + "\n")
    if not is_loopback(url):
        print(f"oauth_browser: refusing a non-loopback URL: {url}", file=sys.stderr)
        return 2
    try:
        status, location = _get(url)
        if status not in _REDIRECTS or not location:
            print(f"oauth_browser: {url} answered {status}, no redirect", file=sys.stderr)
            return 1
        callback = urljoin(url, location)
        if not is_loopback(callback):
            print(f"oauth_browser: refusing a non-loopback redirect: {callback}", file=sys.stderr)
            return 2
        param = os.environ.get(TAMPER_ENV)
        if param:
            callback = tamper(callback, param)
        _get(callback)
    except OSError as error:  # URLError, timeouts, refused connections
        print(f"oauth_browser: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
