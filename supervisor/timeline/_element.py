"""A drawing as data: a tree of :class:`Element` values, written out as SVG (or HTML) text
by :func:`markup`, or sent as JSON to a page that builds the same elements itself.

An element is a tag, its attributes (in order; every value a string) and its children:
elements, or strings, which are text. Nothing in the tree is markup: :func:`markup`
escapes every attribute value and every text, and a page building the tree sets
attributes and text nodes one by one, never parsing any of it. So a name or an error
sent by a server can be anywhere in a drawing and never becomes markup.

Its JSON form (``msgspec.json.encode``) is an array per element:
``[tag, {name: value, ...}, [child, ...]]``, a child being such an array or a string.
"""

from __future__ import annotations

import html

import msgspec

__all__ = ["Element", "markup"]


class Element(msgspec.Struct, frozen=True, array_like=True):
    """One element of a drawing: ``tag``, its ``attrs`` in order, its ``children``
    (elements, or strings: text)."""

    tag: str
    attrs: dict[str, str] = {}
    children: list[Element | str] = []


def markup(node: Element | str) -> str:
    """*node* as SVG/HTML text, every attribute value and text escaped; an element
    without children is written self-closed (``<line .../>``)."""
    if isinstance(node, str):
        return html.escape(node, quote=True)
    attrs = "".join(
        f' {name}="{html.escape(value, quote=True)}"' for name, value in node.attrs.items()
    )
    if not node.children:
        return f"<{node.tag}{attrs}/>"
    inner = "".join(markup(child) for child in node.children)
    return f"<{node.tag}{attrs}>{inner}</{node.tag}>"
