"""A tiny Chrome DevTools Protocol driver, for end-to-end tests in headless Chromium.

::

    async with open_browser() as browser:
        page = await browser.new_page()
        await page.navigate("http://127.0.0.1:8080/")
        await page.wait_for("document.querySelectorAll('tr').length > 1")
        await page.click("button#go")
        await page.screenshot("shot.png")

It starts Debian's ``/usr/bin/chromium`` (or *executable*, or ``$CHROMIUM``) headless, as
root-safe as this machine needs (``--no-sandbox``), with a fresh temporary profile and
without any background networking, reads the DevTools address it prints, and speaks CDP
JSON over one WebSocket (trio-websocket): a page target per :meth:`Browser.new_page`,
attached in flat session mode. No new dependency, no threads.

Chromium runs in its own process group; leaving the block closes it (``Browser.close``,
bounded), then kills the whole group and removes the profile, so nothing is left behind,
whatever happened inside.

Errors: :class:`BrowserNotFound` when the executable is missing (its message says how to
install one; this project's own browser tests skip on it unless
``$MCP_SUPERVISOR_REQUIRE_BROWSER`` is set, as CI sets it); :class:`BrowserError` when
Chromium does not start or a command fails; :class:`JavaScriptError` when evaluated code
throws; ``trio.TooSlowError`` when a wait runs out.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio_websocket

from supervisor.actors._errors import collapsing

__all__ = [
    "CHROMIUM_FLAGS",
    "Browser",
    "BrowserError",
    "BrowserNotFound",
    "JavaScriptError",
    "Page",
    "find_chromium",
    "open_browser",
]

#: How Chromium runs here: headless, as root, with nothing phoning home.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
)

_DEVTOOLS_LINE = re.compile(rb"DevTools listening on (ws://\S+)")
_MAX_MESSAGE = 256 * 2**20  # screenshots arrive as one base64 message


class BrowserError(Exception):
    """Chromium could not be started, or a DevTools command failed."""


class BrowserNotFound(BrowserError):
    """No Chromium executable where we looked."""


class JavaScriptError(BrowserError):
    """Code run with :meth:`Page.evaluate` threw; the message is the exception's text."""


def find_chromium(executable: str | None = None) -> str:
    """The Chromium to run: *executable*, else ``$CHROMIUM``, else ``/usr/bin/chromium``.

    Raises :class:`BrowserNotFound` saying how to install it.
    """
    candidate = executable or os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    path = shutil.which(candidate)
    if path is None:
        raise BrowserNotFound(
            f"Chromium not found at {candidate!r}: install Debian's chromium "
            "(apt-get install -y --no-install-recommends chromium), or set $CHROMIUM"
        )
    return path


#: Set (CI sets it to 1) when the Chromium tests must run: without Chromium they then fail
#: instead of being skipped.
REQUIRE_BROWSER = "MCP_SUPERVISOR_REQUIRE_BROWSER"


def chromium_or_skip(executable: str | None = None) -> str:
    """The Chromium a browser test runs (:func:`find_chromium`). Without one the test is
    skipped, saying how to install it; with ``$MCP_SUPERVISOR_REQUIRE_BROWSER`` set (not
    ``0``) it fails instead."""
    import pytest

    try:
        return find_chromium(executable)
    except BrowserNotFound as exc:
        if os.environ.get(REQUIRE_BROWSER, "") not in ("", "0"):
            pytest.fail(f"{exc}; ${REQUIRE_BROWSER} is set: the browser tests must run")
        pytest.skip(str(exc))


@asynccontextmanager
async def open_browser(
    executable: str | None = None,
    *,
    width: int = 1280,
    height: int = 800,
    start_timeout: float = 30.0,
) -> AsyncIterator[Browser]:
    """Run a headless Chromium for the duration of the block; see the module docstring."""
    path = find_chromium(executable)
    profile = tempfile.mkdtemp(prefix="mcp-supervisor-chromium-")
    args = [
        path,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    process = await trio.lowlevel.open_process(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: killed as one at the end
    )
    stderr_tail: deque[str] = deque(maxlen=40)
    try:
        assert process.stderr is not None
        url = await _devtools_url(process, process.stderr, stderr_tail, start_timeout)
        with collapsing():  # the block's own error comes out bare, not in a group
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stderr, stderr_tail)
                async with trio_websocket.open_websocket_url(
                    url, max_message_size=_MAX_MESSAGE
                ) as ws:
                    browser = Browser(ws, process, profile, width, height)
                    nursery.start_soon(browser._read)
                    try:
                        yield browser
                    finally:
                        with trio.CancelScope(shield=True), trio.move_on_after(3):
                            await browser._send_nowait_reply("Browser.close")
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(5):
                await process.wait()
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            await process.wait()
            shutil.rmtree(profile, ignore_errors=True)


async def _devtools_url(
    process: trio.Process,
    stderr: trio.abc.ReceiveStream,
    tail: deque[str],
    timeout: float,
) -> str:
    buffer = b""
    with trio.move_on_after(timeout):
        while True:
            chunk = await stderr.receive_some(4096)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                tail.append(line.decode(errors="replace"))
                match = _DEVTOOLS_LINE.search(line)
                if match:
                    return match.group(1).decode()
    said = "\n".join(tail) or "(nothing on stderr)"
    state = f"exited with code {process.returncode}" if process.poll() is not None else "running"
    raise BrowserError(
        f"Chromium did not print its DevTools address within {timeout:g} s ({state}):\n{said}"
    )


async def _drain(stderr: trio.abc.ReceiveStream, tail: deque[str]) -> None:
    """Keep reading Chromium's stderr, so it never blocks on a full pipe."""
    buffer = b""
    while chunk := await stderr.receive_some(4096):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        tail.extend(line.decode(errors="replace") for line in lines)


class Browser:
    """A running headless Chromium: make pages, send raw CDP commands."""

    def __init__(
        self,
        ws: trio_websocket.WebSocketConnection,
        process: trio.Process,
        profile: str,
        width: int,
        height: int,
    ) -> None:
        self._ws = ws
        self.process = process
        #: the temporary profile directory (``--user-data-dir``)
        self.profile = profile
        self._size = (width, height)
        self._ids = itertools.count(1)
        self._replies: dict[int, _Slot] = {}
        self._pages: dict[str, Page] = {}
        self._closed = False

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(
        self,
        method: str,
        params: dict[str, object] | None = None,
        *,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, object]:
        """Send one CDP command and return its ``result``; :class:`BrowserError` on error."""
        if self._closed:
            raise BrowserError(f"cannot send {method}: the DevTools connection is closed")
        slot = _Slot()
        message_id = next(self._ids)
        self._replies[message_id] = slot
        message: dict[str, object] = {"id": message_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            await self._ws.send_message(json.dumps(message))
            with trio.fail_after(timeout):
                await slot.done.wait()
        finally:
            self._replies.pop(message_id, None)
        if slot.value is None:
            raise BrowserError(f"{method}: the DevTools connection closed before the answer")
        if "error" in slot.value:
            raise BrowserError(f"{method} failed: {slot.value['error']}")
        result = slot.value.get("result", {})
        assert isinstance(result, dict)
        return result

    async def _send_nowait_reply(self, method: str) -> None:
        try:
            await self._ws.send_message(json.dumps({"id": next(self._ids), "method": method}))
        except trio_websocket.ConnectionClosed:
            pass

    async def new_page(self) -> Page:
        """Open a new tab (about:blank), attached and ready for commands."""
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        target_id = str(target["targetId"])
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}
        )
        page = Page(self, target_id, str(attached["sessionId"]))
        self._pages[page.session] = page
        width, height = self._size
        for method, params in (
            ("Page.enable", {}),
            ("Runtime.enable", {}),
            ("Log.enable", {}),
            (
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            ),
        ):
            await page.send(method, params)
        return page

    async def _read(self) -> None:
        """Route answers to their callers and events to their pages, until closed."""
        try:
            while True:
                message = json.loads(await self._ws.get_message())
                if "id" in message:
                    slot = self._replies.get(message["id"])
                    if slot is not None:
                        slot.value = message
                        slot.done.set()
                    continue
                page = self._pages.get(message.get("sessionId", ""))
                if page is not None:
                    page._event(message.get("method", ""), message.get("params", {}))
        except trio_websocket.ConnectionClosed:
            pass
        finally:
            self._closed = True
            for slot in self._replies.values():
                slot.done.set()


class _Slot:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: dict[str, object] | None = None


class Page:
    """One tab. ``console`` collects console messages, uncaught exceptions and browser log
    entries (CSP violations among them) as ``"level: text"`` lines."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session
        self.console: list[str] = []
        self._loaded = trio.Event()

    async def send(
        self, method: str, params: dict[str, object] | None = None, *, timeout: float = 30.0
    ) -> dict[str, object]:
        """Send a CDP command to this page's session."""
        return await self.browser.send(method, params, session=self.session, timeout=timeout)

    def _event(self, method: str, params: dict[str, object]) -> None:
        if method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Runtime.consoleAPICalled":
            args = params.get("args") or []
            text = " ".join(
                str(a.get("value", a.get("description", "")))
                for a in args  # type: ignore[union-attr]
            )
            self.console.append(f"console.{params.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            exception = details.get("exception") or {}  # type: ignore[union-attr]
            self.console.append(
                f"exception: {exception.get('description') or details.get('text')}"  # type: ignore[union-attr]
            )
        elif method == "Log.entryAdded":
            entry = params.get("entry") or {}
            self.console.append(f"{entry.get('level')}: {entry.get('text')}")  # type: ignore[union-attr]

    async def navigate(self, url: str, *, timeout: float = 30.0) -> None:
        """Load *url* and wait for its ``load`` event."""
        self._loaded = trio.Event()
        result = await self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise BrowserError(f"cannot load {url}: {result['errorText']}")
        with trio.fail_after(timeout):
            await self._loaded.wait()

    async def evaluate(self, expression: str, *, timeout: float = 30.0) -> object:
        """The value of a JavaScript expression (awaited if it is a promise), as JSON data.

        Raises :class:`JavaScriptError` when it throws or its promise rejects.
        """
        result = await self.send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "awaitPromise": True,
                "returnByValue": True,
                "userGesture": True,
            },
            timeout=timeout,
        )
        details = result.get("exceptionDetails")
        if details:
            exception = details.get("exception") or {}  # type: ignore[union-attr]
            text = exception.get("description") or details.get("text")  # type: ignore[union-attr]
            raise JavaScriptError(f"{text} (evaluating {expression[:200]!r})")
        value = result.get("result") or {}
        return value.get("value")  # type: ignore[union-attr]

    async def wait_for(self, expression: str, *, timeout: float = 10.0) -> object:
        """Wait until *expression* is truthy in the page, and return its value.

        The page checks it on every DOM change and every animation frame; the wait fails
        with ``trio.TooSlowError`` (quoting the expression) after *timeout* seconds.
        """
        script = f"""new Promise((resolve) => {{
            const check = () => {{
                try {{ return ({expression}); }} catch (e) {{ return false; }}
            }};
            const done = (value) => {{
                observer.disconnect(); clearInterval(timer); resolve(value);
            }};
            const observer = new MutationObserver(() => {{ const v = check(); if (v) done(v); }});
            const timer = setInterval(() => {{ const v = check(); if (v) done(v); }}, 25);
            observer.observe(document, {{subtree: true, childList: true, attributes: true,
                                         characterData: true}});
            const first = check(); if (first) done(first);
        }})"""
        try:
            with trio.fail_after(timeout):
                return await self.evaluate(script, timeout=timeout + 5)
        except trio.TooSlowError:
            raise trio.TooSlowError(
                f"page condition not met within {timeout:g} s: {expression}"
            ) from None

    async def click(self, selector: str) -> None:
        """Click the element matching *selector* with the mouse, as a user would."""
        box = await self.evaluate(
            f"""(() => {{
                const el = document.querySelector({json.dumps(selector)});
                if (!el) return null;
                el.scrollIntoView({{block: "center"}});
                const r = el.getBoundingClientRect();
                return {{x: r.x + r.width / 2, y: r.y + r.height / 2}};
            }})()"""
        )
        if not isinstance(box, dict):
            raise BrowserError(f"no element matches {selector!r}")
        for kind, button in (
            ("mouseMoved", "none"),
            ("mousePressed", "left"),
            ("mouseReleased", "left"),
        ):
            await self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": button, "clickCount": 1},
            )

    async def screenshot(self, path: str | os.PathLike[str]) -> Path:
        """Save a PNG of the page (its full height) to *path*; return the path."""
        result = await self.send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )
        target = Path(path)
        # A small local file, written at once: not worth a worker thread.
        target.parent.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240
        target.write_bytes(base64.b64decode(str(result["data"])))  # noqa: ASYNC240
        return target
