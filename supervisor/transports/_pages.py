"""The catalog limits on a listing page as the server wrote it, before any model is built.

A ``tools/list`` page under ``maxMessageBytes`` can still hold hundreds of thousands of
tools; parsed into the SDK's models it costs some eighty times its size. So a transport
that reads the server's raw messages shows each one answering a listing
(``tools/list``, ``resources/list``, ``resources/templates/list``, ``prompts/list``) to
:class:`PageGuard` first: msgspec finds the page's items without building them (one
small object per item, the items themselves skipped) and measures them as the server
wrote them. A page over ``max_tools`` items, or over ``max_catalog_bytes``, is replaced
by a JSON-RPC error for that request (code :data:`CATALOG_TOO_LARGE`, its ``data`` the
counts), which the listing raises as :class:`~supervisor.errors.CatalogTooLarge` naming
the limits; the page's bytes are dropped then and there.

The listing counts its pages together again once they are models (the limits hold for
the whole listing, over every page); this check only keeps one page from costing more
than its own bytes. The transports that read raw messages (stdio, WebSocket) use it;
:func:`refusal` is the message each hands its session instead of a refused page.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.message import SessionMessage

from ..log import get_logger

log = get_logger(__name__)

#: The JSON-RPC error code a listing request gets when its page was over the catalog
#: limits and was dropped (in the range JSON-RPC leaves to implementations).
CATALOG_TOO_LARGE = -32098

#: The listing requests, and the field of their result that holds the page's items.
LISTINGS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


_NONE = msgspec.Raw(b"")


class _Items(msgspec.Struct):
    """A listing result's items as the bytes the server wrote (empty: not there)."""

    tools: msgspec.Raw = _NONE
    resources: msgspec.Raw = _NONE
    resourceTemplates: msgspec.Raw = _NONE  # noqa: N815 - the wire's name
    prompts: msgspec.Raw = _NONE


class _Answer(msgspec.Struct):
    """A response's id and, if it is a listing's result, its items (unparsed); a
    request from the server has a ``method``."""

    id: int | str | None = None
    method: str | None = None
    result: _Items | None = None


class _Item(msgspec.Struct, gc=False):
    """One item of a page, counted: its fields are skipped."""


_answer = msgspec.json.Decoder(_Answer)
_count = msgspec.json.Decoder(list[_Item])


def _key(request_id: object) -> object:
    """The id as the SDK correlates it: ``"7"`` and ``7`` are one."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id


class PageGuard:
    """Checks the pages answering one connection's listing requests against the limits.

    ``sent`` is shown every request going to the server, ``check`` every message coming
    back (its raw bytes, or a WebSocket text frame's text), before it is parsed: for a
    page over the limits it returns the request's id and the error to hand the session
    instead (a JSON-RPC error object, as a dict), else ``None``. Costs nothing while no
    listing is waiting for its answer.
    """

    def __init__(self, *, max_items: int, max_bytes: int) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._waiting: dict[object, str] = {}  # request id -> the result field of its items

    def sent(self, method: str, request_id: object) -> None:
        field = LISTINGS.get(method)
        if field is not None:
            self._waiting[_key(request_id)] = field

    def check(self, raw: bytes | str) -> tuple[int | str, dict[str, Any]] | None:
        if not self._waiting:
            return None
        try:
            answer = _answer.decode(raw)
        except msgspec.DecodeError:
            return None  # not a listing's answer of the usual shape: the parser says why
        request_id = answer.id
        if request_id is None or answer.method is not None:
            return None  # a notification, or a request from the server
        field = self._waiting.pop(_key(request_id), None)
        if field is None or answer.result is None:
            return None
        items = getattr(answer.result, field)
        if not items:
            return None
        try:
            count = len(_count.decode(items))
        except msgspec.DecodeError:
            return None  # items that are not objects: the SDK's validation refuses them
        # The items' own bytes: the array less its brackets and the commas between items.
        size = max(len(items) - count - 1, 0)
        del answer, items
        if count <= self.max_items and size <= self.max_bytes:
            return None
        return request_id, {
            "code": CATALOG_TOO_LARGE,
            "message": f"the page listed {count} items ({size} bytes), over the catalog "
            f"limits ({self.max_items} items, {self.max_bytes} bytes); it was dropped",
            "data": {"count": count, "size": size},
        }


def refusal(refused: tuple[int | str, dict[str, Any]], *, server: str) -> SessionMessage:
    """The message a transport hands *server*'s session instead of a refused page (what
    :meth:`PageGuard.check` returned): the error for its request, logged."""
    request_id, error = refused
    log.warning(
        "listing page over the catalog limits dropped",
        server=server,
        request_id=request_id,
        **error["data"],
    )
    message = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(**error))
    return SessionMessage(message)
