"""What JSON text cannot carry, found where it is: lone surrogates, named by their path.

JSON's grammar takes ``"\\ud800"`` — half of a UTF-16 surrogate pair, with no other half —
and Python's :func:`json.loads` makes it a ``str`` holding the lone surrogate U+D800. But
a JSON text on the wire is UTF-8, and UTF-8 has no encoding for a surrogate: such a
string, in a value or in a key, cannot be written out again. :func:`unencodable` finds
each one in a value about to be sent (a tool's arguments), as ``(path, message)`` pairs
in the form schema errors take (:func:`json_path`: ``title``, ``labels[0].name``,
``['a key']``, ``(root)``); a value without one costs one msgspec encode.

Imports nothing of the package, so every layer may import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import msgspec

__all__ = ["json_path", "unencodable"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_encode = msgspec.json.encode


def json_path(parts: Iterable[str | int]) -> str:
    """The path of a value inside a JSON document, from the keys and indexes that lead to
    it: ``labels[0].name``; a key that is not a plain name as its ``repr``
    (``['a key']``, which also writes a lone surrogate as ``\\ud800``); ``(root)`` for
    the document itself."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(root)"


def unencodable(value: object) -> list[tuple[str, str]]:
    """Each string of ``value`` — a value or a key, at any depth of its objects and
    arrays — that holds a lone surrogate, as ``(path, message)``; empty when none does.
    The message names the first surrogate (as ``\\udXXX``) and where it is, never the
    text around it."""
    try:
        _encode(value)
    except Exception:  # noqa: BLE001 — a surrogate, or a type msgspec has no JSON for: look
        found: list[tuple[str, str]] = []
        _walk(value, [], found)
        return found
    return []


def _walk(value: object, parts: list[str | int], found: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        said = _surrogate(value)
        if said is not None:
            found.append((json_path(parts), f"holds {said}"))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            part = key if isinstance(key, str | int) else repr(key)
            said = _surrogate(key) if isinstance(key, str) else None
            if said is not None:
                found.append((json_path([*parts, part]), f"this key holds {said}"))
            _walk(item, [*parts, part], found)
    elif isinstance(value, list | tuple | set | frozenset):  # (a set is sent as an array)
        for index, item in enumerate(value):
            _walk(item, [*parts, index], found)


def _surrogate(text: str) -> str | None:
    """What is wrong with ``text``, if it holds a lone surrogate."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return (
        f"a lone surrogate (\\u{ord(found.group()):04x} at character {found.start()}: half "
        "of a UTF-16 pair), which JSON text cannot carry"
    )
