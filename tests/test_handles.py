"""The three handles agree: the trio ``SupervisorHandle``, the asyncio ``AsyncSupervisor``
and the blocking ``supervisor.Supervisor`` offer the verbs ``supervisor.asyncio._verbs``
lists, each with the trio one's parameters (names, kinds, defaults, annotations),
overloads and result, crossing as the table says; every other public name of the trio
handle is listed there as not offered, with why; ``open_supervisor`` takes the same
parameters on all three. Then the renamed verbs through both handles against a real
fixture server, their old names (they work and warn once), and the blocking handle's
events."""

from __future__ import annotations

import asyncio
import inspect
import typing
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from supervisor import Supervisor
from supervisor._util import _renamed
from supervisor.asyncio import AsyncSupervisor, open_supervisor, start_supervisor
from supervisor.asyncio._verbs import NOT_OFFERED, RENAMED, VERBS, Crossing
from supervisor.runtime import SupervisorHandle
from supervisor.runtime import open_supervisor as open_trio
from supervisor.testing.servers import stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

WAIT = 30.0

#: What each handle's class has of its own, beside the verbs: how it starts and ends, and
#: (blocking) the asyncio handle below it.
OWN = {AsyncSupervisor: {"aclose"}, Supervisor: {"start", "close", "handle"}}


def public(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")}


def parameters(function: Callable[..., Any], *, drop_self: bool = True) -> list[tuple[Any, ...]]:
    """``function``'s parameters as (name, kind, default, annotation as written)."""
    found = [
        (p.name, p.kind.name, p.default, p.annotation)
        for p in inspect.signature(function).parameters.values()
    ]
    return found[1:] if drop_self else found


def returns(function: Callable[..., Any]) -> object:
    return inspect.signature(function).return_annotation


def test_every_public_name_of_the_trio_handle_is_a_verb_or_listed_as_not_offered() -> None:
    """A name added to the trio handle fails here until it is offered (in ``VERBS``, and
    on both handles) or listed in ``NOT_OFFERED`` with why; a handle offers no verb the
    table does not list (beside its old names and what it has of its own)."""
    trio_names = public(SupervisorHandle)
    assert not VERBS.keys() & NOT_OFFERED.keys()
    assert trio_names == VERBS.keys() | NOT_OFFERED.keys()
    assert all(why.strip() for why in NOT_OFFERED.values())
    for handle, own in OWN.items():
        assert public(handle) == VERBS.keys() | RENAMED.keys() | own, handle.__name__


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("handle", [AsyncSupervisor, Supervisor], ids=lambda h: h.__name__)
def test_each_verb_has_the_trio_handle_s_parameters_and_result(verb: str, handle: type) -> None:
    """The verb on the asyncio and the blocking handle: the trio one's parameters,
    overloads and result type, and the crossing its table entry says — an ``async``
    method (asyncio) or a plain one (blocking) for ``AWAITED`` and ``RUN``, a property
    for ``READ``, an ``async with`` (asyncio) or a ``with`` (blocking) for ``EVENTS``."""
    crossing = VERBS[verb]
    on_trio, here = vars(SupervisorHandle)[verb], vars(handle)[verb]
    on_asyncio = handle is AsyncSupervisor
    if crossing is Crossing.READ:
        assert isinstance(on_trio, property) and isinstance(here, property)
        assert returns(here.fget) == returns(on_trio.fget)
        return
    assert parameters(here) == parameters(on_trio)
    if crossing is Crossing.EVENTS:
        body = here.__wrapped__
        kind = inspect.isasyncgenfunction if on_asyncio else inspect.isgeneratorfunction
        assert kind(body)
        return
    assert inspect.iscoroutinefunction(here) is on_asyncio
    assert returns(here) == returns(on_trio)
    overloads = typing.get_overloads(on_trio)
    assert [(parameters(o), returns(o)) for o in typing.get_overloads(here)] == [
        (parameters(o), returns(o)) for o in overloads
    ]


@pytest.mark.parametrize(
    "opener",
    [open_supervisor, start_supervisor, Supervisor.__init__],
    ids=["asyncio.open_supervisor", "asyncio.start_supervisor", "Supervisor"],
)
def test_each_handle_opens_with_the_trio_open_supervisor_s_parameters(
    opener: Callable[..., Any],
) -> None:
    expected = parameters(open_trio, drop_self=False)
    assert parameters(opener, drop_self=opener is Supervisor.__init__) == expected


# -- behaviour -----------------------------------------------------------------------------


def rich() -> dict[str, object]:
    command, args = stdio_params("rich")
    return {"mcpServers": {"rich": {"command": command, "args": args, "approve": False}}}


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every old name warns again, as in a new process."""
    monkeypatch.setattr(_renamed, "_warned", set())


def test_the_asyncio_handle_reads_resources_and_gets_prompts_and_the_old_names_warn_once(
    fresh_warnings: None,
) -> None:
    """``read_resource``, ``get_prompt`` and the others of resources and prompts, awaited;
    ``read`` and ``prompt`` still do the same, the first use of each warning once."""

    async def main() -> dict[str, Any]:
        async with open_supervisor(rich()) as sup:
            await sup.connect_all()
            [summarize] = [p.name for p in await sup.prompts() if p.name.endswith("summarize")]
            got: dict[str, Any] = {
                "read": await sup.read_resource("notes://index"),
                "from": await sup.read_resource("note://x", server="rich"),
                "prompt": await sup.get_prompt(summarize, {"title": "gateway"}),
                "templates": [t.template.uri_template for t in await sup.resource_templates()],
                "catalog": sorted(sup.catalog),
                "resolve": await sup.resolve(next(iter(sup.catalog))),
            }
            with pytest.warns(DeprecationWarning, match=r"AsyncSupervisor\.read_resource"):
                got["old read"] = await sup.read("notes://index")
            with pytest.warns(DeprecationWarning, match=r"AsyncSupervisor\.get_prompt"):
                got["old prompt"] = await sup.prompt(summarize, {"title": "old"})
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got["again"] = await sup.read("notes://index")
                await sup.prompt(summarize, {"title": "again"})
        return got

    with asyncio.Runner() as runner:
        got = runner.run(asyncio.wait_for(main(), WAIT))
    index = got["read"].contents[0]
    assert index.uri == "notes://index" and index.text
    assert got["from"].contents[0].text == "note x"
    assert got["prompt"].messages[0].content.text == "Summarize note gateway"
    assert got["templates"] == ["note://{title}"]
    assert got["resolve"][0] == "rich"
    assert got["old read"] == got["again"] == got["read"]
    assert got["old prompt"].messages[0].content.text == "Summarize note old"


def test_the_blocking_handle_reads_resources_gets_prompts_and_follows_events(
    fresh_warnings: None,
) -> None:
    """The same verbs blocking, the old names warning once; and ``subscribe`` as a
    ``with`` block whose iterator waits for each event, the supervisor running
    meanwhile (a restart's events)."""
    with Supervisor(rich()) as sup:
        sup.connect_all()
        [summarize] = [p.name for p in sup.prompts() if p.name.endswith("summarize")]
        read = sup.read_resource("notes://index")
        prompt = sup.get_prompt(summarize, {"title": "gateway"})
        with pytest.warns(DeprecationWarning, match=r"Supervisor\.read_resource"):
            assert sup.read("notes://index") == read
        with pytest.warns(DeprecationWarning, match=r"Supervisor\.get_prompt"):
            old = sup.prompt(summarize, {"title": "old"})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sup.read("notes://index") == read
        with sup.subscribe("mcp.connected") as events:
            sup.restart("rich")
            sup.connect_all()  # (a lazy server connects now; its events wait meanwhile)
            event = next(events)
        summary = sup.summary()
    assert read.contents[0].uri == "notes://index"
    assert prompt.messages[0].content.text == "Summarize note gateway"
    assert old.messages[0].content.text == "Summarize note old"
    assert (event.kind, getattr(event, "server", None)) == ("mcp.connected", "rich")
    assert "rich" in summary.servers
