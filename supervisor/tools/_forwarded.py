"""A tool's result as its server sent it, JSON — for a gateway that passes it on as JSON.

A call the gateway forwards (:attr:`~supervisor.tools._request.ToolCall.forward`) is
answered, when the answer is *plain*, with a :class:`Forwarded`: the SDK's
``CallToolResult``, made without reading the answer again (its text blocks,
``structuredContent``, ``isError`` and ``_meta`` taken as they came), which keeps the
answer's JSON for the gateway to pass on as it is. Plain is a shape the SDK's models
read without changing a thing, so that the JSON says exactly what the model says: an
object of ``content`` (text blocks of ``type`` and ``text`` alone), ``structuredContent``
(an object), ``isError`` (a boolean), ``_meta`` (an object) and, from a server that
speaks 2026-07-28, ``resultType`` (``"complete"``), each but ``content`` optional, and
nothing else. Any other answer is read by the SDK, as every answer was before
(:mod:`supervisor.server._wire`).

A copy of a :class:`Forwarded` made with ``model_copy`` is a plain ``CallToolResult``
(the JSON would no longer say what it says); :meth:`Forwarded.with_meta` makes one
with another ``_meta`` that keeps it.

The models are made by :func:`constructed`, which is pydantic's ``model_construct`` at
about a quarter of its cost: a call through the gateway makes four.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import mcp_types as types
from pydantic import BaseModel, PrivateAttr

__all__ = ["Forwarded", "constructed", "plain"]

_M = TypeVar("_M", bound=BaseModel)

_KEYS = frozenset({"content", "structuredContent", "isError", "_meta"})
_MODERN_KEYS = _KEYS | {"resultType"}
_TEXT_KEYS = frozenset({"type", "text"})


def plain(result: Mapping[str, Any], modern: bool) -> bool:
    """Whether ``result`` (a ``tools/call`` answer's result, JSON, from a server that
    speaks 2026-07-28 if ``modern``) is plain: see the module docstring."""
    if not result.keys() <= (_MODERN_KEYS if modern else _KEYS):
        return False
    content = result.get("content")
    if type(content) is not list:
        return False
    for block in content:
        if (
            type(block) is not dict
            or block.get("type") != "text"
            or type(block.get("text")) is not str
            or not block.keys() <= _TEXT_KEYS
        ):
            return False
    if "structuredContent" in result and type(result["structuredContent"]) is not dict:
        return False
    if "isError" in result and type(result["isError"]) is not bool:
        return False
    if "_meta" in result and type(result["_meta"]) is not dict:
        return False
    return result.get("resultType", "complete") == "complete"


class Forwarded(types.CallToolResult):
    """A plain result (:func:`plain`) as a ``CallToolResult``, its JSON kept: :attr:`sent`."""

    _json: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, json: dict[str, Any]) -> Forwarded:
        """The plain result ``json``, as the model the SDK would have read it into."""
        return _made(json)

    @property
    def sent(self) -> dict[str, Any]:
        """The result's JSON, as its server sent it (less what :meth:`with_meta` changed)."""
        private = self.__pydantic_private__  # (self._json, without pydantic's lookup)
        return private["_json"] if private is not None else self._json

    def with_meta(self, meta: dict[str, Any] | None) -> Forwarded:
        """This result with ``meta`` for its ``_meta`` (``None``: none): what
        :func:`constructed` makes of its fields set, ``meta`` for ``meta`` — made from this
        one's own fields (its blocks are this one's: none change)."""
        json = dict(self.sent)
        json.pop("_meta", None)
        values = dict(self.__dict__)
        values["meta"] = meta
        fields = set(self.__pydantic_fields_set__)
        if meta is None:
            fields.discard("meta")
        else:
            json["_meta"] = meta
            fields.add("meta")
        made = Forwarded.__new__(Forwarded)
        extra = self.__pydantic_extra__
        _set(made, "__dict__", values)
        _set(made, "__pydantic_extra__", None if extra is None else dict(extra))
        _set(made, "__pydantic_fields_set__", fields)
        _set(made, "__pydantic_private__", {"_json": json})
        return made

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> types.CallToolResult:
        """A copy, as a plain ``CallToolResult`` (see the module docstring)."""
        fields = {name: getattr(self, name) for name in self.model_fields_set}
        copied = types.CallToolResult.model_construct(
            _fields_set=set(self.model_fields_set), **fields
        )
        return copied.model_copy(update=update, deep=deep)


def constructed(template: _M, fields: dict[str, Any], private: dict[str, Any] | None = None) -> _M:
    """``type(template).model_construct(**fields)``, for ``fields`` of the model's own
    names, made from ``template``: a model of that class made by ``model_construct``
    with its required fields alone, whose other fields hold their (immutable) defaults.
    The new model holds what pydantic's ``__copy__`` of ``template`` would — its fields,
    extra and private attributes — with ``fields`` over them, and they are its fields set;
    ``private``, if given, its private attributes (all of them)."""
    cls = type(template)
    made = cls.__new__(cls)
    extra = template.__pydantic_extra__
    if private is None and (private := template.__pydantic_private__) is not None:
        private = dict(private)
    _set(made, "__dict__", {**vars(template), **fields})
    _set(made, "__pydantic_extra__", None if extra is None else dict(extra))
    _set(made, "__pydantic_fields_set__", set(fields))
    _set(made, "__pydantic_private__", private)
    return made


_set = object.__setattr__


_TEXT = types.TextContent.model_construct(type="text", text="")


def _made(json: dict[str, Any]) -> Forwarded:
    """The plain result ``json`` as a :class:`Forwarded`."""
    content = [constructed(_TEXT, {"type": "text", "text": b["text"]}) for b in json["content"]]
    fields: dict[str, Any] = {"content": content}
    if "structuredContent" in json:
        fields["structured_content"] = json["structuredContent"]
    if "isError" in json:
        fields["is_error"] = json["isError"]
    if "_meta" in json:
        fields["meta"] = json["_meta"]
    if "resultType" in json:
        fields["result_type"] = json["resultType"]
    return constructed(_FORWARDED, fields, {"_json": json})


_FORWARDED = Forwarded.model_construct(content=[])
