"""The loopback listener's routing and waiting, without a network: answers go to their
login by ``state``; an error answer, a timeout and the browser command are said clearly."""

from __future__ import annotations

import webbrowser

import pytest
import trio
import trio.lowlevel

from supervisor import open_supervisor
from supervisor.auth._login import LOGIN_TIMEOUT, LoginCancelled, Logins, browser_command
from supervisor.errors import AuthorizationFailed
from supervisor.testing.servers import make_server, start_http


async def test_answers_go_to_their_login_by_state() -> None:
    logins = Logins()
    logins.expect("state-a")
    logins.expect("state-b")
    assert not logins.deliver("http://127.0.0.1:9876/callback?code=x&state=unknown")
    assert logins.deliver("http://127.0.0.1:9876/callback?code=code-b&state=state-b&iss=i")
    result = await logins.wait("state-b")
    assert (result.code, result.state, result.iss) == ("code-b", "state-b", "i")
    assert logins.deliver("?code=code-a&state=state-a")  # a pasted query string also works
    assert (await logins.wait("state-a")).code == "code-a"


async def test_with_one_login_pending_a_wrong_state_reaches_it() -> None:
    """So that the SDK refuses it as a mismatch at once, instead of a wait to the end."""
    logins = Logins()
    logins.expect("the-real-one")
    assert logins.deliver("http://127.0.0.1/callback?code=c&state=forged")
    assert (await logins.wait("the-real-one")).state == "forged"


async def test_an_error_answer_fails_the_login() -> None:
    logins = Logins()
    logins.expect("s")
    logins.deliver("?error=access_denied&error_description=the+user+said+no&state=s")
    with pytest.raises(LoginCancelled, match="access_denied: the user said no"):
        await logins.wait("s")


async def test_a_login_waits_300_s_for_the_browser(autojump_clock: trio.abc.Clock) -> None:
    assert LOGIN_TIMEOUT == 300
    logins = Logins()
    logins.expect("s")
    start = trio.current_time()
    with pytest.raises(TimeoutError, match="no answer from the browser within 300 s"):
        await logins.wait("s")
    assert trio.current_time() - start == pytest.approx(300)
    assert not logins.deliver("?code=late&state=s")  # forgotten: a late answer is refused


def test_the_browser_command_follows_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER", "my-browser --new-tab %s")
    # webbrowser reads $BROWSER once per process: make this test's process read it again
    monkeypatch.setattr(webbrowser, "_tryorder", None)
    monkeypatch.setattr(webbrowser, "_browsers", {})
    url = "http://127.0.0.1:5/authorize?a=1&b=2"
    assert browser_command(url) == ["my-browser", "--new-tab", url]


async def test_login_to_a_server_without_oauth_says_so(tmp_path: object) -> None:
    async with trio.open_nursery() as nursery:
        plain = await start_http(nursery, make_server("echo"))
        config = {"mcpServers": {"plain": {"type": "http", "url": plain.url}}}
        async with open_supervisor(config, auth_dir=str(tmp_path)) as sup:
            opened: list[str] = []

            async def browser(url: str) -> None:
                opened.append(url)

            with pytest.raises(AuthorizationFailed, match="offers no OAuth login"):
                await sup.login("plain", browser)
            assert opened == []
        nursery.cancel_scope.cancel()
