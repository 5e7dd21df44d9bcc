"""MCP Apps through the gateway: two servers whose tools name the same ``ui://``
resource each get their own, under a URI naming the server, and a client reads each
tool's UI from the server whose tool it is — one backing server over stdio, one over
Streamable HTTP, clients of either era."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from supervisor.testing.servers import start_http
from tests.reference_server import build_apps
from tests.test_gateway import http_client, text
from tests.test_gateway_fidelity import REFERENCE, gateway_url

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@asynccontextmanager
async def two_clocks(mode: str) -> AsyncIterator[Client]:
    """A client (of ``mode``) of a gateway in front of two Apps servers with the same
    UI URI: ``one`` over stdio, ``two`` over HTTP."""
    async with trio.open_nursery() as nursery:
        two = await start_http(nursery, build_apps("two").streamable_http_app())
        servers = {
            "one": {
                "command": sys.executable,
                "args": [str(REFERENCE), "apps", "one"],
                "autoApprove": ["clock"],
            },
            "two": {"type": "http", "url": two.url, "autoApprove": ["clock"]},
        }
        async with gateway_url(servers, "auto") as url, http_client(url, mode=mode) as client:
            yield client
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_tool_s_ui_is_read_from_its_own_server(mode: str) -> None:
    """The tools' ``_meta.ui.resourceUri`` name the server (``ui://one/clock/app.html``),
    the resources are listed under the same URIs with their MIME type, and a read of
    each gives that server's page under the URI asked for; the tools still run."""
    async with two_clocks(mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        pages = {}
        for server in ("one", "two"):
            meta = tools[f"{server}_clock"].meta or {}
            uri = meta["ui"]["resourceUri"]
            assert uri == f"ui://{server}/clock/app.html"
            assert resources[uri].mime_type == APP_MIME_TYPE
            [content] = (await client.read_resource(uri)).contents
            assert str(content.uri) == uri
            assert isinstance(content, types.TextResourceContents)
            pages[server] = content.text
            assert text(await client.call_tool(f"{server}_clock", {})) == "noon"
    assert "clock of one" in pages["one"] and "clock of two" in pages["two"]


async def test_the_gateway_declares_apps_when_a_server_does() -> None:
    """To a 2026-07-28 client (the era whose capabilities name extensions) a gateway in
    front of an Apps server declares the extension; one in front of the reference
    server (no Apps) does not, and its resources keep their URIs."""
    async with two_clocks("auto") as client:
        assert EXTENSION_ID in (client.server_capabilities.extensions or {})
    plain = {"ref": {"command": sys.executable, "args": [str(REFERENCE)]}}
    async with gateway_url(plain, "auto") as url, http_client(url, mode="auto") as client:
        assert EXTENSION_ID not in (client.server_capabilities.extensions or {})
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert uris == ["note:///news"]
