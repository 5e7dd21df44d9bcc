"""Structural checks of single fields, and how their errors are collected — shared by the
config (:mod:`supervisor.config`) and the fault plans (:mod:`supervisor.faults`).

Every check either returns the value, typed, or raises :class:`_Bad` with a message that
says what is wrong without quoting the value (it may be a secret). :class:`_Errors`
collects :class:`~supervisor.errors.FieldError` s so one pass reports every problem;
:func:`_join` builds their dotted paths (``mcpServers.github.env.TOKEN``, ``args[2]``).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import UnionType

from ..errors import FieldError

#: Timeouts in seconds above this look like milliseconds copied from another tool.
_MAX_TIMEOUT_SECONDS = 3600.0
#: How alike (difflib's ratio, ignoring case) an unknown name must be to a known one to be
#: suggested as its probable spelling.
_CLOSE_ENOUGH = 0.75


class _Errors:
    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))


class _Bad(Exception):
    """A value is unusable; the message says why (never quoting the value)."""


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.$-]+\Z")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    part = key if _PLAIN_KEY.match(key) else json.dumps(key)
    return f"{path}.{part}" if path else part


def _within(path: str, prefix: str) -> bool:
    """Whether the field ``path`` is ``prefix`` or inside it (``prefix.x``, ``prefix[0]``)."""
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _want(value: object, kind: type | UnionType | tuple[type, ...], noun: str) -> None:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _Bad(f"must be {noun}, not a boolean")
    if not isinstance(value, kind):
        raise _Bad(f"must be {noun}, not {_kind(value)}")


def _str(value: object) -> str:
    _want(value, str, "a string")
    assert isinstance(value, str)
    return value


def _bool(value: object) -> bool:
    _want(value, bool, "true or false")
    assert isinstance(value, bool)
    return value


def _number(value: object, *, minimum: float = 0.0, inclusive: bool = False) -> float:
    _want(value, int | float, "a number")
    assert isinstance(value, int | float)
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        raise _Bad("is too large a number") from None
    if not math.isfinite(number):
        raise _Bad("must be a finite number")
    if number < minimum or (number == minimum and not inclusive):
        raise _Bad(f"must be {'at least' if inclusive else 'greater than'} {minimum:g}")
    return number


def _int(value: object, *, minimum: int = 0) -> int:
    _want(value, int, "a whole number")
    assert isinstance(value, int)
    if value < minimum:
        raise _Bad(f"must be at least {minimum}")
    return value


def _seconds(value: object) -> float:
    seconds = _number(value)
    if seconds > _MAX_TIMEOUT_SECONDS:
        raise _Bad(
            f"is in seconds and {seconds:g} s is more than an hour; for milliseconds use timeoutMs"
        )
    return seconds


def _choice(value: object, choices: Sequence[str]) -> str:
    text = _str(value)
    if text not in choices:
        raise _Bad("must be one of " + ", ".join(json.dumps(c) for c in choices))
    return text


def _object(value: object, noun: str = "an object") -> Mapping[str, object]:
    _want(value, Mapping, noun)
    assert isinstance(value, Mapping)
    return value


def _fields(
    errors: _Errors, value: Mapping[str, object], path: str
) -> Iterator[tuple[str, object, str]]:
    """Each (key, value, path) of an object; reports keys given twice in the JSON."""
    for key in getattr(value, "duplicates", ()):
        errors.add(_join(path, key), "given more than once")
    for key, item in value.items():
        if not isinstance(key, str):
            errors.add(path, f"keys must be strings, not {_kind(key)}")
            continue
        yield key, item, _join(path, key)


def _closest(name: str, known: Iterable[str]) -> str | None:
    """The known name that ``name`` is most probably a misspelling of, ignoring case: the
    most alike by difflib's ratio, else — for a name of three letters or more, where one
    slip weighs too much in that ratio (``evn``, ``emv``) — one a single slip away."""
    by_lower: dict[str, str] = {}
    for candidate in known:
        by_lower.setdefault(candidate.lower(), candidate)
    lower = name.lower()
    close = difflib.get_close_matches(lower, by_lower, n=1, cutoff=_CLOSE_ENOUGH)
    if not close and len(lower) >= _SLIP_MIN:
        close = [c for c in by_lower if _one_slip(lower, c)][:1]
    return by_lower[close[0]] if close else None


#: The shortest name a single slip is suggested for.
_SLIP_MIN = 3


def _one_slip(typed: str, meant: str) -> bool:
    """Whether ``typed`` is ``meant`` with one letter wrong, added or missing, or two
    neighbours swapped."""
    if len(typed) == len(meant):
        diff = [i for i, (a, b) in enumerate(zip(typed, meant, strict=True)) if a != b]
        if len(diff) == 1:
            return True
        if len(diff) != 2 or diff[1] != diff[0] + 1:
            return False
        i, j = diff
        return typed[i] == meant[j] and typed[j] == meant[i]
    if abs(len(typed) - len(meant)) != 1:
        return False
    short, long = sorted((typed, meant), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _unknown_field(key: str, known: Iterable[str]) -> str:
    """The error for a key that is not one of ``known``: ``unknown field``, followed by
    ``; did you mean "X"?`` when a known name is close (``comand`` -> ``command``)."""
    close = _closest(key, known)
    return f'unknown field; did you mean "{close}"?' if close else "unknown field"


def _parse_object(
    errors: _Errors,
    value: object,
    path: str,
    parsers: Mapping[str, Callable[[object], object]],
) -> dict[str, object] | None:
    """Parse a small settings object field by field; unknown keys are errors."""
    try:
        mapping = _object(value)
    except _Bad as exc:
        errors.add(path, str(exc))
        return None
    out: dict[str, object] = {}
    for key, item, p in _fields(errors, mapping, path):
        parse = parsers.get(key)
        if parse is None:
            errors.add(p, _unknown_field(key, parsers))
            continue
        try:
            out[key] = parse(item)
        except _Bad as exc:
            errors.add(p, str(exc))
    return out


def _fraction(value: object) -> float:
    number = _number(value, inclusive=True)
    if number > 1:
        raise _Bad("must be between 0 and 1")
    return number


def _nonempty(value: object) -> str:
    """A string that is not blank."""
    text = _str(value)
    if not text.strip():
        raise _Bad("must not be empty")
    return text


def _str_list(errors: _Errors, value: Sequence[object], path: str) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            out.append(item)
        else:
            errors.add(_join(path, i), f"must be a string, not {_kind(item)}")
    return out
