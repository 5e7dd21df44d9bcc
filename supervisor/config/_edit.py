"""Editing a config file's text in place: add, replace or remove one server entry.

The file belongs to the user, often written by another client (Claude Code, Cursor, VS
Code, OpenCode) and kept in version control, so an edit changes the entry's own text and
nothing else: the other keys, their order, the indentation, the line endings and the
comments (the file may be JSONC) stay as they are, byte for byte. Neither :mod:`json` nor
msgspec keep layout or comments when writing, and no dependency of ours edits JSON text in
place, so this module scans the text for where each value starts and ends (a small JSONC
scanner) and splices the edit in; the new entry is laid out in the file's own indentation
(its unit: so many spaces, or a tab).

An entry is written in the format of the section that gets it — ``mcpServers``, OpenCode's
``mcp`` (``type: local|remote``, the command as one array, ``environment``) or VS Code's
``servers`` (``type`` always given) — see :func:`server_entry`. A new entry goes to the
first server section in the file, or to a new ``mcpServers`` section when there is none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

import attrs

from ..errors import ConfigError, FieldError
from ._formats import _SERVER_SECTIONS

__all__ = ["NEW_FILE", "add_entry", "entries", "remove_entry", "server_entry"]

#: A new config file's text: ``add`` creates this, then adds to it.
NEW_FILE = '{\n  "mcpServers": {}\n}\n'

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_SCALAR = re.compile(r"-?[0-9][0-9eE.+-]*|true|false|null")
_BLANK = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)


@attrs.define
class _Value:
    """A JSON value's span in the text; an object's members in order."""

    start: int
    end: int
    members: list[_Member] | None = None  # None: not an object


@attrs.define
class _Member:
    key: str
    key_start: int
    value: _Value
    comma: int | None  # where the comma after the value is, if there is one


class _Scanner:
    """Spans of the values of a JSONC text the loader has already accepted."""

    def __init__(self, text: str) -> None:
        self.text = text

    def blank(self, i: int) -> int:
        m = _BLANK.match(self.text, i)
        assert m is not None
        return m.end()

    def value(self, i: int) -> _Value:
        i = self.blank(i)
        c = self.text[i : i + 1]
        if c == "{":
            return self.container(i, "}")
        if c == "[":
            return self.container(i, "]")
        m = (_STRING if c == '"' else _SCALAR).match(self.text, i)
        if m is None:
            raise ValueError(f"unexpected text at offset {i}")
        return _Value(i, m.end())

    def container(self, start: int, close: str) -> _Value:
        members: list[_Member] = []
        i = self.blank(start + 1)
        while self.text[i : i + 1] != close:
            if close == "}":
                m = _STRING.match(self.text, i)
                if m is None:
                    raise ValueError(f"expected a key at offset {i}")
                key = json.loads(m.group())
                i = self.blank(m.end())
                if self.text[i : i + 1] != ":":
                    raise ValueError(f"expected ':' at offset {i}")
                value = self.value(i + 1)
                member = _Member(key, m.start(), value, None)
                members.append(member)
            else:
                value = self.value(i)
            i = self.blank(value.end)
            if self.text[i : i + 1] == ",":
                if close == "}":
                    members[-1].comma = i
                i = self.blank(i + 1)
            elif self.text[i : i + 1] != close:
                raise ValueError(f"expected ',' or {close!r} at offset {i}")
        return _Value(start, i + 1, members if close == "}" else None)


def _scan(text: str, label: str) -> _Value:
    """The top-level object's span; :class:`ConfigError` if the text is not JSON(C) or
    not an object."""
    from ._load import _Object, _strip_jsonc

    try:
        json.loads(_strip_jsonc(text), object_pairs_hook=_Object)
    except json.JSONDecodeError as exc:
        raise _error(
            label, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    try:
        root = _Scanner(text).value(0)
    except (ValueError, IndexError, RecursionError):
        raise _error(label, "cannot be edited: its JSON is not understood") from None
    if root.members is None:
        raise _error(label, "must be a JSON object")
    return root


def _error(path: str, message: str) -> ConfigError:
    return ConfigError([FieldError(path, message)], path=path)


def _last(members: Sequence[_Member], key: str) -> _Member | None:
    """The member named ``key`` (the last one, as a JSON parser reads duplicates)."""
    found = [m for m in members if m.key == key]
    return found[-1] if found else None


def _sections(text: str, root: _Value) -> list[tuple[str, str, _Value]]:
    """``(style, path, object)`` of each server section, in file order (the loader's)."""
    out = []
    assert root.members is not None
    keys = dict.fromkeys(m.key for m in root.members if m.key in _SERVER_SECTIONS)
    for key in keys:  # in file order; a key given twice is read as its last value
        member = _last(root.members, key)
        assert member is not None
        value, path = member.value, member.key
        if value.members is None:
            continue  # not an object: the loader says so
        if member.key == "mcp":
            servers = _last(value.members, "servers")
            if (
                servers is not None
                and servers.value.members is not None
                and not any(k.key in ("type", "command", "url") for k in servers.value.members)
            ):
                value, path = servers.value, "mcp.servers"
        out.append((member.key, path, value))
    return out


def entries(text: str, label: str) -> dict[str, tuple[str, object]]:
    """Each server entry of the file: name -> (section path, the entry as parsed)."""
    from ._load import _strip_jsonc

    root = _scan(text, label)
    found: dict[str, tuple[str, object]] = {}
    for _, path, section in _sections(text, root):
        assert section.members is not None
        for member in section.members:
            raw = _strip_jsonc(text[member.value.start : member.value.end])
            found.setdefault(member.key, (path, json.loads(raw)))
    return found


# -- layout --------------------------------------------------------------------------------


class _Layout:
    """The file's indentation unit and line ending."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newline = "\r\n" if "\r\n" in text else "\n"
        m = re.search(r"\n([ \t]+)\S", text)
        self.unit = "  " if m is None else ("\t" if m.group(1)[0] == "\t" else m.group(1))

    def line_start(self, i: int) -> int:
        return self.text.rfind("\n", 0, i) + 1

    def indent_at(self, i: int) -> str | None:
        """The indentation of the line ``i`` is on, if only blanks precede ``i`` there."""
        before = self.text[self.line_start(i) : i]
        return before if before.strip(" \t") == "" else None

    def line_rest_end(self, i: int) -> int | None:
        """Where the line ``i`` is on ends (its newline), if only blanks or a ``//``
        comment follow ``i`` there."""
        m = re.compile(r"[ \t]*(?://[^\n]*)?(?=\r?\n|\Z)").match(self.text, i)
        if m is None:
            return None
        end = m.end()
        return end - 1 if self.text[end - 1 : end] == "\r" else end

    def render(self, value: object, indent: str, inline: bool) -> str:
        if inline:
            return json.dumps(value, ensure_ascii=False)
        text = json.dumps(value, ensure_ascii=False, indent=self.unit)
        return text.replace("\n", self.newline + indent)


def _splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping edits ``(start, end, new)``; insertions at one place end up
    in the order listed."""
    order = sorted(range(len(edits)), key=lambda i: (edits[i][0], i), reverse=True)
    for start, end, new in (edits[i] for i in order):
        text = text[:start] + new + text[end:]
    return text


def _member_indent(layout: _Layout, obj: _Value) -> str:
    """The indentation of the object's members: that of the first on a line of its own."""
    assert obj.members is not None
    for m in obj.members:
        indent = layout.indent_at(m.key_start)
        if indent is not None:
            return indent
    return _opening_indent(layout, obj) + layout.unit


def _opening_indent(layout: _Layout, obj: _Value) -> str:
    line = layout.text[layout.line_start(obj.start) : obj.start]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _insert(text: str, obj: _Value, key: str, value: object) -> str:
    """``text`` with ``"key": value`` added as the last member of ``obj``."""
    layout = _Layout(text)
    assert obj.members is not None
    inline = "\n" not in text[obj.start : obj.end] and bool(obj.members)
    if not obj.members:
        indent = _opening_indent(layout, obj) + layout.unit
        member = f"{json.dumps(key)}: {layout.render(value, indent, False)}"
        close = obj.end - 1
        closing_indent = layout.indent_at(close)
        if closing_indent is not None and text[obj.start + 1 : close].strip():
            # comments inside: the entry goes on its own line, before the closing brace
            start = layout.line_start(close)
            return _splice(text, [(start, start, indent + member + layout.newline)])
        interior = text[obj.start + 1 : close]
        keep = interior if interior.strip() else ""
        new = keep + layout.newline + indent + member + layout.newline
        return _splice(text, [(obj.start + 1, close, new + _opening_indent(layout, obj))])
    last = obj.members[-1]
    if inline:
        member = f"{json.dumps(key)}: {layout.render(value, '', True)}"
        if last.comma is not None:
            return _splice(text, [(last.comma + 1, last.comma + 1, f" {member},")])
        return _splice(text, [(last.value.end, last.value.end, f", {member}")])
    indent = _member_indent(layout, obj)
    member = f"{json.dumps(key)}: {layout.render(value, indent, False)}"
    after = last.comma + 1 if last.comma is not None else last.value.end
    comma = "," if last.comma is not None else ""
    line_end = layout.line_rest_end(after)
    edits = [] if last.comma is not None else [(last.value.end, last.value.end, ",")]
    if line_end is None:
        edits.append((after, after, layout.newline + indent + member + comma))
    else:
        edits.append((line_end, line_end, layout.newline + indent + member + comma))
    return _splice(text, edits)


def _replace(text: str, member: _Member, value: object) -> str:
    layout = _Layout(text)
    inline = "\n" not in text[member.value.start : member.value.end]
    indent = layout.indent_at(member.key_start) or ""
    rendered = layout.render(value, indent, inline)
    return _splice(text, [(member.value.start, member.value.end, rendered)])


def _remove(text: str, obj: _Value, index: int) -> str:
    layout = _Layout(text)
    assert obj.members is not None
    members = obj.members
    m = members[index]
    end = m.comma + 1 if m.comma is not None else m.value.end
    line_end = layout.line_rest_end(end)
    prev = members[index - 1] if index > 0 else None
    if layout.indent_at(m.key_start) is not None and line_end is not None:
        # on lines of its own: remove those lines, and the previous member's comma if
        # this one was the last (and had none)
        stop = line_end + len(layout.newline) if line_end < len(text) else line_end
        edits = [(layout.line_start(m.key_start), stop, "")]
        if m.comma is None and prev is not None and prev.comma is not None:
            edits.append((prev.comma, prev.comma + 1, ""))
    else:
        # within a line: the member and its comma go, with the blanks after them; the
        # comments around stay where they are
        after = re.compile(r"[ \t]*").match(text, end)
        assert after is not None
        edits = [(m.key_start, after.end() if m.comma is not None else end, "")]
        if m.comma is None and prev is not None and prev.comma is not None:
            between = text[prev.comma + 1 : m.key_start]
            if between.strip(" \t"):
                edits.append((prev.comma, prev.comma + 1, ""))
            else:
                edits = [(prev.comma, end, "")]
    text = _splice(text, edits)
    # an object left with nothing but blanks inside becomes {}
    if len(members) == 1:
        shift = sum(len(new) - (e - s) for s, e, new in edits)
        close = obj.end - 1 + shift
        if not text[obj.start + 1 : close].strip():
            text = _splice(text, [(obj.start + 1, close, "")])
    return text


# -- the operations ------------------------------------------------------------------------


def add_entry(
    text: str,
    label: str,
    name: str,
    entry: Callable[[str], Mapping[str, object]],
    *,
    replace: bool = False,
) -> tuple[str, str, bool]:
    """Add server ``name`` to the config ``text`` (of the file ``label``): the entry is
    ``entry(style)`` for the style of the section that gets it. Returns the new text, the
    section's path, and whether an entry of that name was replaced (only with
    ``replace``; otherwise an existing name is a :class:`ConfigError`)."""
    root = _scan(text, label)
    sections = _sections(text, root)
    for style, path, section in sections:
        assert section.members is not None
        existing = _last(section.members, name)
        if existing is None:
            continue
        if not replace:
            raise _error(
                f"{path}.{name}",
                "a server of this name is already configured; remove it first, or give "
                "--force to replace it",
            )
        return _replace(text, existing, dict(entry(style))), path, True
    if sections:
        style, path, section = sections[0]
        return _insert(text, section, name, dict(entry(style))), path, False
    return _insert(text, root, "mcpServers", {name: dict(entry("mcpServers"))}), "mcpServers", False


def remove_entry(text: str, label: str, name: str) -> tuple[str, str, object]:
    """Remove server ``name`` from the config ``text``: the new text, the path it was at,
    and the entry as it was. :class:`ConfigError` if there is no such server."""
    from ._load import _strip_jsonc

    removed: tuple[str, object] | None = None
    while True:  # a name defined twice in a section: every copy goes
        root = _scan(text, label)
        sections = _sections(text, root)
        at = [
            (path, section, i)
            for _, path, section in sections
            for i, m in enumerate(section.members or ())
            if m.key == name
        ]
        if not at:
            break
        path, section, index = at[-1]
        assert section.members is not None
        if removed is None:
            value = section.members[index].value
            removed = (f"{path}.{name}", json.loads(_strip_jsonc(text[value.start : value.end])))
        text = _remove(text, section, index)
    if removed is None:
        known = [m.key for _, _, s in sections for m in s.members or ()]
        raise _error(
            label,
            f"no server named {json.dumps(name)} (configured: {', '.join(known) or 'none'})",
        )
    return text, *removed


def server_entry(
    style: str,
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    env_file: str | None = None,
    url: str | None = None,
    transport: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A server entry as the section ``style`` writes it. A remote server's ``type`` is
    ``transport``, by default ``ws`` for a ``ws://``/``wss://`` URL and ``http`` otherwise
    (OpenCode's ``remote``)."""
    entry: dict[str, object] = {}
    if url is not None:
        default = "ws" if url.lower().startswith(("ws://", "wss://")) else "http"
        if style == "mcp" and transport is None and default == "http":
            default = "remote"
        entry["type"] = transport or default
        entry["url"] = url
        if headers:
            entry["headers"] = dict(headers)
        return entry
    assert command is not None
    if style == "mcp":
        entry["type"] = "local"
        entry["command"] = [command, *args]
    else:
        if style == "servers":
            entry["type"] = "stdio"
        entry["command"] = command
        if args:
            entry["args"] = list(args)
    if env:
        entry["environment" if style == "mcp" else "env"] = dict(env)
    if env_file is not None:
        entry["envFile"] = env_file
    return entry
