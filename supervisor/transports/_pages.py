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
the limits; the page's bytes are dropped then and there. A listing's answer that msgspec
cannot read — ``NaN`` or ``Infinity``, which JSON does not allow but the SDK's parser
takes, or nesting too deep — cannot be measured, so it is refused too (a JSON-RPC parse
error for that request, :data:`UNREADABLE`). One that is not JSON at all is left to the
SDK's parser, which refuses it as what it is: not a JSON-RPC message.

The listing counts its pages together again once they are models (the limits hold for
the whole listing, over every page); this check only keeps one page from costing more
than its own bytes. Every transport that reads raw messages uses it (stdio, WebSocket,
and the bodies and events of Streamable HTTP and SSE); :func:`refusal` is the message
each hands its session instead of a refused page (:func:`refusal_json`, as JSON).
"""

from __future__ import annotations

from typing import Any, cast

import mcp_types as types
import msgspec
from mcp.shared.message import SessionMessage

from ..log import get_logger
from ._oversize import Skipped

log = get_logger(__name__)

#: The JSON-RPC error code a listing request gets when its page was over the catalog
#: limits and was dropped (in the range JSON-RPC leaves to implementations).
CATALOG_TOO_LARGE = -32098

#: What a listing's answer that could not be measured is refused with.
UNREADABLE = {
    "code": types.PARSE_ERROR,
    "message": "the page could not be read as JSON to be measured against the catalog "
    "limits (it holds NaN or Infinity, say, or nests too deep); it was dropped",
    "data": {},
}

#: The listing requests, and the field of their result that holds the page's items.
LISTINGS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


_NONE = msgspec.Raw(b"")

#: ``answering`` for :meth:`PageGuard.check`: a response answers whichever listing is
#: waiting (its id is not the one the client will see).
ANY = object()


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
    listing is waiting for its answer (:attr:`waiting`).

    A response is taken as the answer to the request its id names, unless ``answering``
    says otherwise: a request's id, for a message the client will take as that request's
    answer whatever id it names (the SDK's Streamable HTTP client puts the request's own
    id on the response that comes on the request's event stream), or :data:`ANY` for one
    that may answer any listing waiting (a stream resumed after it broke off: the SDK puts
    the id of the request it resumes on it).
    """

    def __init__(self, *, max_items: int, max_bytes: int) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._waiting: dict[object, str] = {}  # request id -> the result field of its items

    def sent(self, method: str, request_id: object) -> None:
        field = LISTINGS.get(method)
        if field is not None:
            self._waiting[_key(request_id)] = field

    @property
    def waiting(self) -> bool:
        """Whether a listing's answer is awaited (else :meth:`check` has nothing to do)."""
        return bool(self._waiting)

    def check(
        self, raw: bytes | bytearray | memoryview | str, *, answering: object = None
    ) -> tuple[int | str | None, dict[str, Any]] | None:
        if not self._waiting:
            return None
        try:
            answer = _answer.decode(raw)
        except msgspec.ValidationError:
            return None  # not a listing's answer of the usual shape: the parser says why
        except msgspec.DecodeError:
            if not _json_but_for_nan(raw):
                return None  # not JSON the SDK's parser takes either: it says what is wrong
            return self._unreadable(raw, answering)
        except RecursionError:
            return self._unreadable(raw, answering)
        request_id = answer.id
        if answer.method is not None or (request_id is None and answering is None):
            return None  # a notification, or a request from the server
        if answering is ANY:  # the first field of a waiting listing that it holds
            waited = set(self._waiting.values())
            field = next(
                (f for f in LISTINGS.values() if f in waited and getattr(answer.result, f, None)),
                None,
            )
        else:
            if answering is not None:
                request_id = cast("int | str", answering)  # a request's id
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
        return request_id, {  # ANY's may have no id
            "code": CATALOG_TOO_LARGE,
            "message": f"the page listed {count} items ({size} bytes), over the catalog "
            f"limits ({self.max_items} items, {self.max_bytes} bytes); it was dropped",
            "data": {"count": count, "size": size},
        }

    def _unreadable(
        self, raw: bytes | bytearray | memoryview | str, answering: object
    ) -> tuple[int | str | None, dict[str, Any]] | None:
        """A message msgspec cannot read (not JSON, or JSON it refuses): refused if it is
        a waiting listing's answer — its id read from either end, as for a message over
        the size limit, or ``answering``'s."""
        ends = Skipped(raw.encode(errors="replace") if isinstance(raw, str) else raw)
        request_id = ends.response_id()
        if answering is ANY:
            return (request_id, UNREADABLE) if self._waiting else None
        if answering is not None:
            request_id = cast("int | str", answering)  # a request's id
        if request_id is None or self._waiting.pop(_key(request_id), None) is None:
            return None  # not a listing's answer: the parser says what is wrong with it
        return request_id, UNREADABLE


_skip = msgspec.json.Decoder(msgspec.Raw)


def _json_but_for_nan(raw: bytes | bytearray | memoryview | str) -> bool:
    """Whether ``raw``, which msgspec could not read, is JSON but for ``NaN`` or
    ``Infinity`` — which the SDK's parser takes. Any other line msgspec refuses (a
    stray byte before the message, say) the SDK's parser refuses too, and says why. The
    tokens are read as numbers and the rest checked without building it."""
    data = raw.encode(errors="replace") if isinstance(raw, str) else bytes(raw)
    if b"NaN" not in data and b"Infinity" not in data:
        return False
    try:
        _skip.decode(data.replace(b"NaN", b"0").replace(b"Infinity", b"0"))
    except msgspec.DecodeError:
        return False
    except RecursionError:
        return True  # (nested too deep to be measured, as well)
    return True


def refusal(refused: tuple[int | str | None, dict[str, Any]], *, server: str) -> SessionMessage:
    """The message a transport hands *server*'s session instead of a refused page (what
    :meth:`PageGuard.check` returned): the error for its request, logged."""
    request_id, error = refused
    _logged(refused, server)
    message = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(**error))
    return SessionMessage(message)


def refusal_json(refused: tuple[int | str | None, dict[str, Any]], *, server: str) -> bytes:
    """:func:`refusal` as the JSON-RPC message's bytes, for a transport whose client
    parses what it is handed (HTTP)."""
    request_id, error = refused
    _logged(refused, server)
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "error": error})


def _logged(refused: tuple[int | str | None, dict[str, Any]], server: str) -> None:
    request_id, error = refused
    log.warning(
        "listing page over the catalog limits dropped"
        if error["code"] == CATALOG_TOO_LARGE
        else "listing page that could not be measured dropped",
        server=server,
        request_id=request_id,
        **error["data"],
    )
