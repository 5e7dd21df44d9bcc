"""Health that cannot lie: one test per row of the health truth table, both ways.

Each failure — a process killed, a port closed, a host unreachable, a server hung, its
login lost, a server that does not answer ``ping`` — is shown within its bound (no false
green), and its healthy or merely slow counterpart is not shown down nor restarted (no
false red). Real processes and real HTTP servers on 127.0.0.1; an unreachable host is
played by a TCP relay in front of the server that stops relaying and accepting. Probes
run with small ``pingInterval``/``pingTimeout`` settings, and bounds are expressed from
them with slack for a busy machine.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor import open_supervisor
from supervisor.testing import capture_events
from supervisor.testing.servers import make_server, open_oauth_server, start_http, stdio_params
from supervisor.testing.servers._procs import open_http_fixture
from supervisor.testing.servers.tiny import tiny_server

from .probes import until

#: Seconds of slack on every bound: a busy 2-core machine runs several suites at once.
SLACK = 3.0
#: The bound on a dead remote server being shown down with the default settings.
DEAD_BOUND = 5.0
#: Small probe settings, to keep the tests fast.
INTERVAL = 0.5
TIMEOUT = 1.5
#: From a server's last word to its being shown down by probes: its silence, then two
#: probes unanswered.
PROBE_BOUND = INTERVAL + 2 * TIMEOUT + SLACK
RECONNECT = {"initial": 0.1, "max": 0.5, "maxAttempts": 1000}


def remote(url: str, **options: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "url": url,
        "approve": False,
        "lazy": False,
        "reconnect": RECONNECT,
        **options,
    }


def stdio(kind: str, **options: Any) -> dict[str, Any]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, "lazy": False, **options}


def probed(servers: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
    """A config of ``servers`` probed every ``INTERVAL`` s of silence, ``timeout`` s each."""
    servers = {name: {"pingInterval": INTERVAL, **entry} for name, entry in servers.items()}
    return {"mcpServers": servers, "supervisor": {"pingTimeout": timeout}}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


#: A server shown down: its connection lost, and being made again (a new connection to a
#: host that does not answer hangs in ``connecting`` until its ``initTimeout``).
DOWN = ("disconnected", "connecting")


async def shown(sup: Any, name: str, *status: str, by: float) -> None:
    """Wait until ``name`` shows one of ``status``; fail if not by ``by`` (trio time)."""
    await until(lambda: sup.status()[name].status in status, by - trio.current_time())


# -- a TCP relay that can play an unreachable host ---------------------------------------


class Relay:
    """Relays 127.0.0.1:``port`` to the upstream port; :meth:`black_hole` stops relaying
    in both directions and accepting, closing nothing — and fills the listen backlog, so
    that a new connection hangs as one to an unreachable host does."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.holed = trio.Event()
        self._accepting = trio.CancelScope()
        self._held: list[Any] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.socket()
        self._held.append(listener)
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        self.port = listener.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started()
            with self._accepting:
                while True:
                    sock, _ = await listener.accept()
                    nursery.start_soon(self._pair, trio.SocketStream(sock))
            await trio.sleep_forever()  # black-holed: the listener stays open, unaccepting

    async def _pair(self, downstream: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        except OSError:
            await downstream.aclose()  # nothing behind: as the closed port, at once
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, downstream, upstream, nursery.cancel_scope)
            nursery.start_soon(self._pump, upstream, downstream, nursery.cancel_scope)
        await upstream.aclose()
        await downstream.aclose()

    async def _pump(
        self, source: trio.SocketStream, sink: trio.SocketStream, both: trio.CancelScope
    ) -> None:
        try:
            while True:
                data = await source.receive_some(65536)
                if self.holed.is_set():
                    self._held.append((source, sink))  # never closed
                    await trio.sleep_forever()
                if not data:
                    break
                await sink.send_all(data)
        except trio.BrokenResourceError:
            pass
        both.cancel()

    async def black_hole(self) -> None:
        self.holed.set()
        self._accepting.cancel()
        # Fill the backlog: once full, a new connection's SYN is dropped, and it hangs.
        while True:
            sock = socket.socket()
            sock.setblocking(False)
            self._held.append(sock)
            try:
                sock.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            with trio.move_on_after(0.5) as waited:
                await trio.lowlevel.wait_writable(sock)
            if waited.cancelled_caught:
                return  # this one hangs: so will the next

    def close(self) -> None:
        for held in self._held:
            for sock in held if isinstance(held, tuple) else (held,):
                try:
                    sock.close() if not isinstance(sock, trio.SocketStream) else sock.socket.close()
                except OSError:
                    pass


@asynccontextmanager
async def relay_to(port: int) -> AsyncIterator[Relay]:
    relay = Relay(port)
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.run)
        try:
            yield relay
        finally:
            nursery.cancel_scope.cancel()
            relay.close()


# -- 1. process killed ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_killed_remote_server_is_shown_disconnected_within_5_s(mode: str) -> None:
    """kill -9 of an idle Streamable HTTP server, default probe settings: shown
    ``disconnected`` (``mcp.health.down``, found by the port watch) within 5 s, in either
    protocol era; back on the same port, shown connected again."""
    async with open_http_fixture("echo") as first:
        config = {"mcpServers": {"web": remote(first.url)}}
        async with open_supervisor(config, mode=mode) as sup:
            await sup.connect_all()
            assert sup.status()["web"].status == "connected"
            await until(lambda: sup.status()["web"].watched, 5)  # (begins just after)
            modern = sup.status()["web"].protocol_version == "2026-07-28"
            assert modern is (mode == "auto")
            async with capture_events(sup, "mcp.*") as seen:
                first.kill()
                killed = trio.current_time()
                down = await seen.wait_for("mcp.health.down", server="web", timeout=DEAD_BOUND)
                await shown(sup, "web", "disconnected", by=killed + DEAD_BOUND)
                assert down.found_by == "watch"
                async with open_http_fixture("echo", port=port_of(first.url)):
                    await seen.wait_for("mcp.connected", server="web", timeout=20)
                    assert sup.status()["web"].status == "connected"
                    assert (await sup.call("web_echo", {"text": "back"})).text == "back"


async def test_a_killed_stdio_server_is_seen_at_once() -> None:
    """kill -9 of an idle stdio server: its pipe closes, and it is restarted at once (no
    probe needed)."""
    async with open_supervisor(probed({"local": stdio("echo", pingInterval=0)})) as sup:
        await sup.connect_all()
        pid = sup.status()["local"].pid
        async with capture_events(sup, "mcp.*") as seen:
            os.kill(pid, signal.SIGKILL)
            await seen.wait_for("mcp.connected", server="local", timeout=DEAD_BOUND)
        record = sup.status()["local"]
        assert record.pid != pid and record.restarts == 1


# -- 2. port closed ---------------------------------------------------------------------------


async def test_a_closed_port_is_shown_disconnected_within_5_s() -> None:
    """The HTTP server stopped (its process lives on: here, this one), default probe
    settings: shown ``disconnected`` within 5 s, found by the port watch."""
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        async with open_supervisor({"mcpServers": {"web": remote(web.url)}}) as sup:
            await sup.connect_all()
            async with capture_events(sup, "mcp.*") as seen:
                await web.stop()
                stopped = trio.current_time()
                down = await seen.wait_for("mcp.health.down", server="web", timeout=DEAD_BOUND)
                await shown(sup, "web", "disconnected", by=stopped + DEAD_BOUND)
                assert down.found_by == "watch"
        nursery.cancel_scope.cancel()


async def test_a_connection_reset_as_the_port_closes_is_looked_at_again_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener closed with the watch's new connection in its queue resets it — a race
    seen when an HTTP server stops: the watch looks again at its usual pace, and finds
    the port closed, rather than doubting and waiting out a connect timeout. (The reset
    is injected once, in front of real connections to a real port.)"""
    from supervisor.transports import _watch

    real = _watch._connect
    tries: list[int] = []

    async def reset_once(host: str, port: int) -> Any:  # noqa: ANN401
        tries.append(port)
        if len(tries) == 2:  # the first connection made again, as the port closes
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        return await real(host, port)

    monkeypatch.setattr(_watch, "_connect", reset_once)
    gone, holding, doubts = trio.Event(), trio.Event(), []
    watch = _watch.Watch(gone=lambda why: gone.set(), doubt=doubts.append, holding=holding.set)
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        nursery.start_soon(
            partial(_watch.watch_port, "127.0.0.1", web.port, watch, connect_timeout=30)
        )
        await holding.wait()
        await web.stop()
        with trio.fail_after(2 * _watch.REOPEN_EVERY + SLACK):
            await gone.wait()
        assert len(tries) == 3 and doubts == []
        nursery.cancel_scope.cancel()


# -- 3. host unreachable ---------------------------------------------------------------------


async def test_an_unreachable_host_is_degraded_then_disconnected_by_probes() -> None:
    """The relay in front of the server black-holed (nothing relayed, nothing accepted,
    nothing closed): one probe unanswered shows it ``degraded``, the next ``disconnected``
    (found by a probe), within its silence and two probe timeouts."""
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        async with relay_to(web.port) as relay:
            async with open_supervisor(probed({"web": remote(relay.url)})) as sup:
                await sup.connect_all()
                async with capture_events(sup, "mcp.*") as seen:
                    await relay.black_hole()
                    holed = trio.current_time()
                    await seen.wait_for("mcp.health.stale", server="web", timeout=PROBE_BOUND)
                    assert sup.status()["web"].status == "degraded"
                    down = await seen.wait_for("mcp.health.down", server="web", timeout=PROBE_BOUND)
                    assert trio.current_time() - holed < PROBE_BOUND
                    assert down.found_by == "probe"
                    await shown(sup, "web", *DOWN, by=holed + PROBE_BOUND)
        nursery.cancel_scope.cancel()


# -- 4. hung -----------------------------------------------------------------------------------


async def test_a_hung_remote_server_is_degraded_then_disconnected_by_probes() -> None:
    """SIGSTOP of a Streamable HTTP server's process: its kernel still accepts
    connections, so only the probes can tell — degraded, then down, within the bound."""
    async with open_http_fixture("echo") as web:
        async with open_supervisor(probed({"web": remote(web.url)})) as sup:
            await sup.connect_all()
            async with capture_events(sup, "mcp.*") as seen:
                os.killpg(web.pid, signal.SIGSTOP)
                try:
                    stopped = trio.current_time()
                    await seen.wait_for("mcp.health.stale", server="web", timeout=PROBE_BOUND)
                    down = await seen.wait_for("mcp.health.down", server="web", timeout=PROBE_BOUND)
                    assert trio.current_time() - stopped < PROBE_BOUND
                    assert down.found_by == "probe"
                    await shown(sup, "web", *DOWN, by=stopped + PROBE_BOUND)
                finally:
                    os.killpg(web.pid, signal.SIGCONT)


async def test_a_hung_stdio_server_is_degraded_then_restarted_by_probes() -> None:
    """SIGSTOP of a stdio server: degraded, then down (found by a probe) within the
    bound, and restarted."""
    async with open_supervisor(probed({"local": stdio("echo")})) as sup:
        await sup.connect_all()
        pid = sup.status()["local"].pid
        async with capture_events(sup, "mcp.*") as seen:
            os.kill(pid, signal.SIGSTOP)
            stopped = trio.current_time()
            await seen.wait_for("mcp.health.stale", server="local", timeout=PROBE_BOUND)
            down = await seen.wait_for("mcp.health.down", server="local", timeout=PROBE_BOUND)
            assert trio.current_time() - stopped < PROBE_BOUND
            assert down.found_by == "probe"
            await seen.wait_for("mcp.connected", server="local", timeout=20)
        record = sup.status()["local"]
        assert record.pid != pid and record.restarts == 1


# -- 5. slow but alive -------------------------------------------------------------------------


async def test_a_server_slow_once_is_degraded_then_recovered_not_restarted() -> None:
    """A server whose answer to one probe takes longer than pingTimeout (stopped until
    the miss is seen, then continued): ``degraded``, then ``connected`` again
    (``mcp.health.recovered``) — the same process, never restarted."""
    async with open_supervisor(probed({"local": stdio("echo")})) as sup:
        await sup.connect_all()
        before = sup.status()["local"]
        async with capture_events(sup, "mcp.*") as seen:
            os.kill(before.pid, signal.SIGSTOP)
            try:
                await seen.wait_for("mcp.health.stale", server="local", timeout=PROBE_BOUND)
                assert sup.status()["local"].status == "degraded"
            finally:
                os.kill(before.pid, signal.SIGCONT)
            await seen.wait_for("mcp.health.recovered", server="local", timeout=TIMEOUT + SLACK)
            assert sup.status()["local"].status == "connected"
            assert "mcp.health.down" not in seen.kinds()
        after = sup.status()["local"]
        assert (after.pid, after.restarts) == (before.pid, 0)
        assert after.connected_since == before.connected_since


async def test_a_server_kept_busy_with_calls_is_never_probed() -> None:
    """Calls are heartbeats: while they flow faster than pingInterval, no probe is sent."""
    async with open_supervisor(probed({"local": stdio("echo")})) as sup:
        await sup.connect_all()
        assert sup.status()["local"].probes == 0
        end = trio.current_time() + 6 * INTERVAL
        while trio.current_time() < end:
            assert (await sup.call("local_echo", {"text": "beat"})).text == "beat"
            await trio.sleep(INTERVAL / 5)  # the pace of the calls, not a wait for an outcome
        assert sup.status()["local"].probes == 0
        # The counterpart: left idle, it is probed.
        await until(lambda: sup.status()["local"].probes > 0, INTERVAL + TIMEOUT + SLACK)


# -- 6. auth expired -------------------------------------------------------------------------


async def test_a_lost_login_is_found_by_a_probe_as_needs_auth(tmp_path: Path) -> None:
    """A remote server's access and refresh tokens both revoked while it is connected
    and idle: the next probe is refused, the refresh fails, and it is shown
    ``needs_auth`` — not disconnected nor failed, and no restart loop."""
    from tests.test_auth import Browser, entry

    async with open_oauth_server() as fx:
        config = probed({"remote": entry(fx.url)})
        async with open_supervisor(config, auth_dir=tmp_path) as sup:
            async with capture_events(sup, "mcp.connected") as seen:
                await sup.login("remote", Browser())
                await seen.wait_for("mcp.connected", timeout=20)
            async with capture_events(sup, "mcp.*") as seen:
                fx.provider.revoke_all_refresh_tokens()
                fx.provider.expire_access_tokens()
                await shown(sup, "remote", "needs_auth", by=trio.current_time() + PROBE_BOUND)
                record = sup.status()["remote"]
                assert record.restarts == 0 and record.retry_attempt == 0
                assert fx.provider.token_requests["refresh_token"] == 1
                # It waits for a login: nothing more is tried meanwhile.
                await trio.sleep(2 * (INTERVAL + TIMEOUT))  # (a span to see nothing happen in)
                assert sup.status()["remote"].status == "needs_auth"
                assert fx.provider.token_requests["refresh_token"] == 1
                # Its connection ended once (to wait for the login), and that is all.
                assert seen.kinds() == ["mcp.disconnected"]


async def test_an_expired_access_token_is_refreshed_by_a_probe(tmp_path: Path) -> None:
    """The counterpart: only the access token expired, the refresh token works — the
    probe is refused, the token refreshed, the probe answered: still connected, the
    same connection."""
    from tests.test_auth import Browser, entry

    async with open_oauth_server() as fx:
        config = probed({"remote": entry(fx.url)})
        async with open_supervisor(config, auth_dir=tmp_path) as sup:
            async with capture_events(sup, "mcp.connected") as seen:
                await sup.login("remote", Browser())
                await seen.wait_for("mcp.connected", timeout=20)
            before = sup.status()["remote"]
            async with capture_events(sup, "mcp.*") as seen:
                fx.provider.expire_access_tokens()
                await seen.wait_for("mcp.auth.refreshed", timeout=PROBE_BOUND)
                probes = sup.status()["remote"].probes
                await until(
                    lambda: sup.status()["remote"].probes > probes, INTERVAL + TIMEOUT + SLACK
                )  # and probed since, answered
                after = sup.status()["remote"]
                assert after.status == "connected" and after.probes_missed == 0
                assert (after.restarts, after.connected_since) == (0, before.connected_since)
                assert not seen.matching("mcp.health.*")


# -- 7. ping unsupported ---------------------------------------------------------------------


async def test_a_server_answering_ping_method_not_found_is_probed_with_tools_list() -> None:
    """A server that answers ``ping`` "method not found": alive all the same, never
    degraded; ``mcp.health.probe_changed`` once, and tools/list is its probe from then."""
    config = probed({"tiny": tiny_server(ping="unsupported")})
    async with open_supervisor(config) as sup:
        async with capture_events(sup, "mcp.*") as seen:
            await sup.connect_all()
            changed = await seen.wait_for("mcp.health.probe_changed", timeout=PROBE_BOUND)
            assert changed.method == "tools/list"
            await until(
                lambda: sup.status()["tiny"].probes >= 3, 3 * INTERVAL + SLACK
            )  # more probes, by tools/list
            record = sup.status()["tiny"]
            assert record.probe_method == "tools/list" and record.probes_missed == 0
            assert record.status == "connected" and record.restarts == 0
            assert seen.kinds().count("mcp.health.probe_changed") == 1
            assert not seen.matching("mcp.health.stale") + seen.matching("mcp.health.down")


async def test_a_server_ignoring_ping_is_latched_to_tools_list_not_restarted() -> None:
    """A server that lets ``ping`` go unanswered but answers tools/list: at most one
    ``degraded``, then latched to tools/list (probe_changed), connected again, the same
    process."""
    config = probed({"tiny": tiny_server(ping="ignore")})
    async with open_supervisor(config) as sup:
        async with capture_events(sup, "mcp.*") as seen:
            await sup.connect_all()
            pid = sup.status()["tiny"].pid
            changed = await seen.wait_for("mcp.health.probe_changed", timeout=PROBE_BOUND)
            assert changed.method == "tools/list"
            missed = sup.status()["tiny"].probes_missed
            await until(lambda: sup.status()["tiny"].probes >= missed + 3, 3 * INTERVAL + SLACK)
            record = sup.status()["tiny"]
            assert record.status == "connected" and record.probe_method == "tools/list"
            assert (record.pid, record.restarts, record.probes_missed) == (pid, 0, missed)
            stale = seen.kinds().count("mcp.health.stale")
            assert stale <= 1 and seen.kinds().count("mcp.health.recovered") == stale
            assert seen.kinds().count("mcp.health.probe_changed") == 1
            assert "mcp.health.down" not in seen.kinds()


async def test_a_server_answering_no_probe_is_down() -> None:
    """The counterpart: a server that answers neither ``ping`` nor tools/list (its calls
    still would be) is down, found by a probe, and restarted."""
    config = probed({"tiny": tiny_server(ping="mute")})
    async with open_supervisor(config) as sup:
        async with capture_events(sup, "mcp.*") as seen:
            await sup.connect_all()
            pid = sup.status()["tiny"].pid
            down = await seen.wait_for("mcp.health.down", timeout=PROBE_BOUND)
            assert down.found_by == "probe"
            assert "mcp.health.probe_changed" not in seen.kinds()
            await seen.wait_for("mcp.connected", timeout=20)
            record = sup.status()["tiny"]
            assert record.pid != pid and record.restarts == 1


# -- 8. unverified -------------------------------------------------------------------------


async def test_a_server_not_probed_is_never_unverified() -> None:
    """``pingInterval: 0``: a connected server silent for longer than any window is still
    shown connected (it is not probed, so nothing is expected of it)."""
    config = probed({"local": stdio("echo", pingInterval=0)}, timeout=0.5)
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        assert sup._servers["local"].window() is None
        # Silent longer than the window it would have with any interval up to 1 s.
        await trio.sleep(1 + 2 * 0.5 + 1 + 0.5)  # (a span to see nothing happen in)
        assert sup.status()["local"].status == "connected"
        assert sup.status()["local"].probes == 0


def probes_dropped(app: Any) -> Any:  # noqa: ANN401 - an ASGI app
    """``app`` behind a broken front that answers every ``ping`` POSTed with an event
    stream ended at once, empty (as a proxy that cuts streams may): the client gives the
    probe up unanswered, on a connection that lives on, while everything else works."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:  # noqa: ANN401
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"method":"ping"' in body.replace(b" ", b""):
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        sent = False

        async def replay() -> Any:  # noqa: ANN401
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


async def test_a_ping_whose_answer_is_cut_off_is_a_miss_and_ping_is_given_up() -> None:
    """A server behind a front that cuts every ``ping``'s answer stream empty, on a
    connection that lives on: the probe is a miss (degraded once), not a connection lost
    nor a probe answered; the ``tools/list`` sent after it is answered, so the server is
    probed that way from then on, back to connected, not restarted."""
    app = probes_dropped(make_server("echo").streamable_http_app(host="127.0.0.1"))
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, app)
        async with open_supervisor(probed({"web": remote(web.url)}), mode="legacy") as sup:
            await sup.connect_all()
            async with capture_events(sup, "mcp.*") as seen:
                await until(lambda: "mcp.health.probe_changed" in seen.kinds(), 4 * PROBE_BOUND)
                await until(lambda: sup.status()["web"].status == "connected", PROBE_BOUND)
                probes = sup.status()["web"].probes
                await until(lambda: sup.status()["web"].probes >= probes + 3, 4 * PROBE_BOUND)
            record = sup.status()["web"]
            assert record.status == "connected" and record.probe_method == "tools/list"
            assert record.restarts == 0 and record.probes_missed == 1
            assert seen.kinds().count("mcp.health.stale") == 1
            assert "mcp.health.down" not in seen.kinds()
            assert "mcp.disconnected" not in seen.kinds()
        nursery.cancel_scope.cancel()


async def test_a_connected_server_not_heard_from_past_its_window_is_unverified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window is a safety net under the probes: while they work, a silent server is
    degraded or down sooner. With its prober stuck (here: never probing), a connected
    server silent past its window (pingInterval + 2 × pingTimeout + 1 s) since it was
    last heard from is shown ``unverified``, not ``connected``; a call answered (proof
    of life) shows it connected again."""
    import supervisor.server._connect as connect

    async def stuck(*_args: object) -> None:
        await trio.sleep_forever()

    monkeypatch.setattr(connect, "keep_probing", stuck)
    async with open_supervisor(probed({"echo": stdio("echo")})) as sup:
        await sup.connect_all()
        window = sup._servers["echo"].window()
        assert window == INTERVAL + 2 * TIMEOUT + 1
        heard = sup.status()["echo"].last_heard
        assert heard is not None
        await until(lambda: sup.status()["echo"].status != "connected", window + SLACK)
        record = sup.status()["echo"]
        assert record.status == "unverified"
        assert time.time() - heard >= window  # not before its window
        assert record.restarts == 0
        assert (await sup.call("echo_echo", {"text": "alive"})).text == "alive"
        assert sup.status()["echo"].status == "connected"


# -- 9. a probe never re-initialises a session -------------------------------------------------


async def test_a_probe_does_not_renew_a_session_its_server_forgot() -> None:
    """A legacy (session-era) Streamable HTTP server restarted behind the same address
    (a relay keeps the port open, so the watch sees nothing) while idle: its probes are
    refused (unknown session) — an answer, so it stays connected — and none starts a
    session: no ``initialize``, no ``mcp.connected``, until a call needs one."""
    server = make_server("echo")
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, server)
        async with relay_to(web.port) as relay:
            config = probed({"web": remote(relay.url)})
            async with open_supervisor(config, mode="legacy") as sup:
                await sup.connect_all()
                before = sup.status()["web"]
                async with capture_events(sup, "mcp.*") as seen:
                    await web.stop()
                    web = await start_http(nursery, server, port=web.port)
                    probes = sup.status()["web"].probes
                    await until(
                        lambda: sup.status()["web"].probes >= probes + 3,
                        3 * (INTERVAL + TIMEOUT) + SLACK,
                    )
                    record = sup.status()["web"]
                    assert record.status == "connected"
                    assert record.connected_since == before.connected_since
                    assert "mcp.connected" not in seen.kinds()
                    assert not seen.matching("mcp.health.*")
                    # A call renews the session, transparently.
                    assert (await sup.call("web_echo", {"text": "hi"})).text == "hi"
                    assert sup.status()["web"].restarts == 0
        nursery.cancel_scope.cancel()
