"""Tool conversion and approval policy: pure functions, no I/O but the spill file.

* **Arguments** — :func:`validate_arguments` checks a call's arguments against the tool's
  ``inputSchema`` (JSON Schema Draft 2020-12 unless the schema declares another ``$schema``)
  before anything is sent, and raises :class:`~supervisor.errors.ToolArgumentsInvalid`
  naming each bad path. Validators are compiled once per :func:`fingerprint` and kept in a
  bounded LRU cache (:class:`ArgumentValidator`).
* **Results** — :func:`normalize_result` turns a ``CallToolResult`` into a
  :class:`ToolResult`: joined text (a preview when large, the whole text spilled to a
  private file), images, audio, resources, and ``structuredContent`` checked against the
  ``outputSchema``.
* **Approval** — :func:`approval_reason` / :func:`needs_approval` apply a server's
  ``approve`` / ``autoApprove`` policy; :func:`check_approval` asks the embedder's callback
  and fails closed without one.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias

import attrs
import jsonschema
import mcp_types as types
import msgspec
import referencing.exceptions

from ._quickcheck import quick_check
from .config import ToolPolicy
from .errors import (
    ApprovalDenied,
    ApprovalRequired,
    ToolArgumentsInvalid,
    ToolError,
    ToolOutputInvalid,
    ToolSchemaInvalid,
)

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_PREVIEW_BYTES",
    "DESTRUCTIVE_WORDS",
    "ApprovalCallback",
    "ApprovalReason",
    "ApprovalRequest",
    "ArgumentValidator",
    "MediaContent",
    "ResourceContent",
    "ToolPolicySource",
    "ToolResult",
    "ValidatorStatistics",
    "approval_reason",
    "check_approval",
    "fingerprint",
    "invalid_output",
    "is_destructive_name",
    "needs_approval",
    "normalize_result",
    "validate_arguments",
]

#: Largest text kept in memory in a :class:`ToolResult`; more is spilled to a file (24 KiB).
DEFAULT_PREVIEW_BYTES = 24 * 1024

#: How many compiled validators an :class:`ArgumentValidator` keeps by default.
DEFAULT_CACHE_SIZE = 4096

#: Longest single validation message kept (values in messages can be huge).
_MAX_MESSAGE = 300

JSONSchema: TypeAlias = Mapping[str, object]


# -- fingerprints and validators ------------------------------------------------------


def _digest(kind: str, name: str, schema: object) -> str:
    payload = msgspec.json.encode([kind, name, schema], order="sorted")
    return hashlib.sha256(payload).hexdigest()


def fingerprint(tool: types.Tool) -> str:
    """A stable hex digest (SHA-256) of the tool's name and ``inputSchema``.

    Key order in the schema does not matter; any other change to the name or the schema
    gives a different fingerprint. Description, annotations and ``outputSchema`` are not
    part of it.
    """
    return _digest("input", tool.name, tool.input_schema)


@attrs.frozen
class ValidatorStatistics:
    """What :meth:`ArgumentValidator.statistics` reports."""

    #: validators currently cached
    size: int
    #: the cache's bound
    maxsize: int
    #: lookups answered from the cache
    hits: int
    #: schemas compiled (each was a cache miss)
    compilations: int


class ArgumentValidator:
    """Validates tool arguments and structured outputs, compiling each schema once.

    Compiled validators are cached by fingerprint, least recently used evicted first once
    ``maxsize`` are held. A schema that is itself invalid raises
    :class:`~supervisor.errors.ToolSchemaInvalid` each time it is used (it is not cached).
    Not thread-safe; meant to be owned by one actor (or used from one trio thread).
    """

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._maxsize = maxsize
        self._cache: OrderedDict[str, jsonschema.protocols.Validator] = OrderedDict()
        # Quick accepts for flat input schemas (see supervisor._quickcheck), by fingerprint;
        # None where the schema needs the full validator.
        self._quick: dict[str, Callable[[object], bool] | None] = {}
        # The same, by tool object (id → the tool, kept alive, and its quick check).
        self._seen: dict[int, tuple[types.Tool, Callable[[object], bool] | None]] = {}
        self._hits = 0
        self._compilations = 0

    def statistics(self) -> ValidatorStatistics:
        """Cache size, bound, hits and compilations so far."""
        return ValidatorStatistics(
            size=len(self._cache),
            maxsize=self._maxsize,
            hits=self._hits,
            compilations=self._compilations,
        )

    def check_schema(self, tool: types.Tool) -> None:
        """Compile the tool's input schema (and output schema, if any) now, raising
        :class:`~supervisor.errors.ToolSchemaInvalid` if either is not a valid schema."""
        self._validator(fingerprint(tool), tool.name, tool.input_schema, "inputSchema")
        if tool.output_schema is not None:
            self._output_validator(tool.name, tool.output_schema)

    def validate(self, tool: types.Tool, arguments: Mapping[str, object]) -> None:
        """Raise :class:`~supervisor.errors.ToolArgumentsInvalid` listing every error if
        ``arguments`` does not match the tool's ``inputSchema``; return ``None`` if it does.
        """
        instance = dict(arguments) if isinstance(arguments, Mapping) else arguments
        # The call path: a tool object seen before (a listed tool is never changed in
        # place) with a quick check that accepts these arguments costs no hashing at all.
        seen = self._seen.get(id(tool))
        if seen is not None and seen[0] is tool and seen[1] is not None and seen[1](instance):
            return
        key = fingerprint(tool)
        validator = self._validator(key, tool.name, tool.input_schema, "inputSchema")
        try:
            quick = self._quick[key]
        except KeyError:
            quick = self._quick[key] = quick_check(tool.input_schema)
        if len(self._seen) >= self._maxsize:
            self._seen.clear()  # rebuilt as tools are used again
        self._seen[id(tool)] = (tool, quick)
        if quick is not None and quick(instance):
            return  # valid: the full validator would find nothing
        errors = _errors(validator, instance, tool.name, "inputSchema")
        if errors:
            raise ToolArgumentsInvalid(tool.name, errors)

    def validate_output(self, tool: str, schema: JSONSchema, structured: object) -> None:
        """Raise :class:`~supervisor.errors.ToolOutputInvalid` if ``structured`` does not
        match ``schema`` (the tool's ``outputSchema``)."""
        errors = _errors(self._output_validator(tool, schema), structured, tool, "outputSchema")
        if errors:
            raise ToolOutputInvalid(tool, errors)

    def _output_validator(self, tool: str, schema: JSONSchema) -> jsonschema.protocols.Validator:
        return self._validator(_digest("output", tool, schema), tool, schema, "outputSchema")

    def _validator(
        self, key: str, tool: str, schema: object, what: str
    ) -> jsonschema.protocols.Validator:
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self._hits += 1
            return cached
        validator = _compile(tool, schema, what)
        self._compilations += 1
        self._cache[key] = validator
        if len(self._cache) > self._maxsize:
            evicted, _ = self._cache.popitem(last=False)
            self._quick.pop(evicted, None)
        return validator


def _compile(tool: str, schema: object, what: str) -> jsonschema.protocols.Validator:
    if not isinstance(schema, Mapping):
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} is not a JSON object (got {type(schema).__name__})",
            tool=tool,
        )
    schema = dict(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} is not a valid JSON Schema: "
            f"at {where}: {_short(exc.message)}",
            tool=tool,
        ) from exc
    return cls(schema)


def _errors(
    validator: jsonschema.protocols.Validator, instance: object, tool: str, what: str
) -> list[tuple[str, str]]:
    try:
        found = [
            (_path(e.absolute_path), _short(e.message)) for e in validator.iter_errors(instance)
        ]
    except referencing.exceptions.Unresolvable as exc:
        raise ToolSchemaInvalid(
            f"tool {tool!r}: its {what} has a $ref that cannot be resolved: {exc}", tool=tool
        ) from exc
    return sorted(dict.fromkeys(found))


def invalid_output(tool: str, error: RuntimeError) -> ToolOutputInvalid | None:
    """The SDK client's own check of a result against the tool's ``outputSchema`` (it
    raises a bare ``RuntimeError``) as :class:`~supervisor.errors.ToolOutputInvalid`
    naming the path; ``None`` for any other ``RuntimeError``."""
    cause = error.__cause__
    if isinstance(cause, jsonschema.ValidationError):
        return ToolOutputInvalid(tool, [(_path(cause.absolute_path), _short(cause.message))])
    said = str(error)
    if said.endswith("has an output schema but did not return structured content"):
        return ToolOutputInvalid(
            tool, [("(root)", "no structuredContent, but the tool declares an outputSchema")]
        )
    if said.startswith("Invalid schema for tool"):
        return ToolOutputInvalid(tool, [("(root)", f"the outputSchema is unusable: {said}")])
    return None


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(root)"


def _short(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


_default_validator = ArgumentValidator()


def validate_arguments(tool: types.Tool, arguments: Mapping[str, object]) -> None:
    """Check ``arguments`` against ``tool.input_schema`` with the process-wide
    :class:`ArgumentValidator`; see :meth:`ArgumentValidator.validate`."""
    _default_validator.validate(tool, arguments)


# -- results --------------------------------------------------------------------------


@attrs.frozen
class MediaContent:
    """An image or audio block: base64 ``data``, its ``mime_type``, ``size`` in bytes
    once decoded."""

    data: str
    mime_type: str
    size: int


@attrs.frozen
class ResourceContent:
    """A resource in a result: ``kind`` is ``"embedded"`` (its contents are here: ``text``,
    or ``blob`` in base64) or ``"link"`` (only a reference; ``name``, and ``size`` if the
    server said). ``size`` is in bytes: UTF-8 text, decoded blob."""

    kind: Literal["embedded", "link"]
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    size: int | None = None
    name: str | None = None


@attrs.frozen
class ToolResult:
    """A normalised tool result.

    ``text`` is the result's text blocks joined with newlines — or, when that is larger than
    the preview limit, its first bytes followed by a line naming ``spilled_to``, the file
    holding the whole text. ``structured`` is ``structuredContent`` (validated against the
    ``outputSchema`` when the tool has one). ``is_error`` means the tool reported failure:
    :meth:`raise_for_error` turns it into :class:`~supervisor.errors.ToolError`.
    """

    tool: str
    text: str
    images: tuple[MediaContent, ...] = ()
    audio: tuple[MediaContent, ...] = ()
    resources: tuple[ResourceContent, ...] = ()
    structured: object | None = None
    is_error: bool = False
    spilled_to: Path | None = None
    #: the result exactly as the server sent it
    raw: types.CallToolResult | None = attrs.field(default=None, eq=False, repr=False)

    def raise_for_error(self, *, server: str | None = None) -> None:
        """Raise :class:`~supervisor.errors.ToolError` with the tool's text if ``is_error``;
        do nothing otherwise."""
        if self.is_error:
            said = self.text.strip() or "(no message)"
            raise ToolError(
                f"tool {self.tool!r} reported an error: {said}",
                tool=self.tool,
                text=self.text,
                server=server,
                result=self,
            )


def normalize_result(
    result: types.CallToolResult,
    *,
    tool: types.Tool | str,
    output_schema: JSONSchema | None = None,
    preview_bytes: int = DEFAULT_PREVIEW_BYTES,
    spill_dir: str | os.PathLike[str] | None = None,
    validator: ArgumentValidator | None = None,
) -> ToolResult:
    """Normalise a tool's result into a :class:`ToolResult`.

    ``tool`` is the tool (or its name, used in messages and the spill file's name); its
    ``output_schema`` applies unless ``output_schema`` is given. When the result is not an
    error and there is an output schema, ``structuredContent`` must be present and match it,
    or :class:`~supervisor.errors.ToolOutputInvalid` is raised naming the path. An error
    result is never validated (it need not conform).

    Text longer than ``preview_bytes`` (UTF-8) is written whole to a new file of mode 0600,
    in ``spill_dir`` (created with mode 0700 if missing) or else in a private per-process
    directory of mode 0700 created on first use; ``text`` is then the preview, cut at a
    character boundary, and a last line saying where the whole output is.
    """
    name = tool if isinstance(tool, str) else tool.name
    if output_schema is None and not isinstance(tool, str):
        output_schema = tool.output_schema

    texts: list[str] = []
    images: list[MediaContent] = []
    audio: list[MediaContent] = []
    resources: list[ResourceContent] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            images.append(MediaContent(block.data, block.mime_type, _b64_size(block.data)))
        elif isinstance(block, types.AudioContent):
            audio.append(MediaContent(block.data, block.mime_type, _b64_size(block.data)))
        elif isinstance(block, types.EmbeddedResource):
            resources.append(_embedded(block.resource))
        elif isinstance(block, types.ResourceLink):
            resources.append(
                ResourceContent(
                    "link", str(block.uri), block.mime_type, size=block.size, name=block.name
                )
            )

    structured = result.structured_content
    if output_schema is not None and not result.is_error:
        if structured is None:
            raise ToolOutputInvalid(
                name, [("(root)", "no structuredContent, but the tool declares an outputSchema")]
            )
        (validator or _default_validator).validate_output(name, output_schema, structured)

    text = "\n".join(texts)
    spilled_to = None
    encoded = text.encode("utf-8", "replace")
    if len(encoded) > preview_bytes:
        spilled_to = _spill(encoded, name, spill_dir)
        preview = encoded[:preview_bytes].decode("utf-8", "ignore")
        text = (
            f"{preview}\n[output truncated at {len(preview.encode())} of {len(encoded)} bytes;"
            f" the full output is at {spilled_to}]"
        )
    return ToolResult(
        tool=name,
        text=text,
        images=tuple(images),
        audio=tuple(audio),
        resources=tuple(resources),
        structured=structured,
        is_error=bool(result.is_error),
        spilled_to=spilled_to,
        raw=result,
    )


def _b64_size(data: str) -> int:
    body = "".join(data.split()).rstrip("=")
    return len(body) * 3 // 4


def _embedded(
    contents: types.TextResourceContents | types.BlobResourceContents,
) -> ResourceContent:
    uri = str(contents.uri)
    if isinstance(contents, types.TextResourceContents):
        size = len(contents.text.encode("utf-8", "replace"))
        return ResourceContent("embedded", uri, contents.mime_type, text=contents.text, size=size)
    return ResourceContent(
        "embedded", uri, contents.mime_type, blob=contents.blob, size=_b64_size(contents.blob)
    )


_spill_root: tuple[int, Path] | None = None
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _spill_directory(spill_dir: str | os.PathLike[str] | None) -> Path:
    global _spill_root
    if spill_dir is not None:
        path = Path(spill_dir)
        if not path.exists():
            path.mkdir(mode=0o700, parents=True)
            path.chmod(0o700)  # whatever the umask
        return path
    if _spill_root is None or _spill_root[0] != os.getpid() or not _spill_root[1].is_dir():
        _spill_root = (os.getpid(), Path(tempfile.mkdtemp(prefix="mcp-supervisor-")))
    return _spill_root[1]


def _spill(data: bytes, tool: str, spill_dir: str | os.PathLike[str] | None) -> Path:
    directory = _spill_directory(spill_dir)
    prefix = (_UNSAFE.sub("_", tool)[:64] or "tool") + "-"
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".txt", dir=directory)  # mode 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


# -- approval ---------------------------------------------------------------------------

#: Why a call needs approval, most serious first.
ApprovalReason: TypeAlias = Literal[
    "destructive annotation", "destructive name", "listed in approve", "not auto-approved"
]


class ToolPolicySource(Protocol):
    """What :func:`approval_reason` reads: a :class:`~supervisor.config.ServerConfig` fits."""

    @property
    def approve(self) -> ToolPolicy | None: ...

    @property
    def auto_approve(self) -> ToolPolicy | None: ...


#: Words that make a tool name look destructive (also with a trailing ``s``).
DESTRUCTIVE_WORDS = frozenset(
    {
        "delete", "del", "remove", "rm", "drop", "destroy", "deploy", "purge", "truncate",
        "kill", "erase", "wipe", "terminate", "uninstall", "revoke", "unlink", "shred",
        "reset", "overwrite", "rmdir", "nuke",
    }
)  # fmt: skip

_SEPARATORS = re.compile(r"[\s_.\-/:]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for part in _SEPARATORS.split(name) for w in _CAMEL.findall(part)]


def is_destructive_name(name: str) -> bool:
    """Whether a word of ``name`` is destructive (:data:`DESTRUCTIVE_WORDS`).

    Words are found by splitting on ``_ - . / :`` and whitespace and at camelCase humps,
    case-insensitively: ``delete_file``, ``deleteFile``, ``HTTPDelete``, ``files.remove``
    are destructive; ``undeleted_count`` and ``dropdown`` are not.
    """
    for word in _words(name):
        if word in DESTRUCTIVE_WORDS or (word.endswith("s") and word[:-1] in DESTRUCTIVE_WORDS):
            return True
    return False


def _matches(policy: ToolPolicy | None, names: tuple[str, ...]) -> bool:
    if policy is None or policy is False:
        return False
    if policy is True:
        return True
    return any(fnmatch.fnmatchcase(n, pattern) for pattern in policy for n in names)


def approval_reason(
    policy: ToolPolicySource, tool: types.Tool, original_name: str
) -> ApprovalReason | None:
    """Why a call of ``tool`` needs approval under a server's policy, or ``None`` if not.

    In order: ``destructiveHint: true`` → ``"destructive annotation"``; a destructive word
    in the original or merged name (:func:`is_destructive_name`) → ``"destructive name"``;
    both ask even when the tool is auto-approved. Then a match in ``approve`` (``True``, or
    a name or :mod:`fnmatch` glob matching the original or merged name) →
    ``"listed in approve"``; a match in ``autoApprove`` → no approval; ``approve: false``
    → no approval; otherwise ``"not auto-approved"`` (the default is to ask). Other
    annotations (``readOnlyHint``, ``idempotentHint``…) never grant approval: servers do
    not get to vouch for themselves.
    """
    names = (original_name, tool.name)
    if tool.annotations is not None and tool.annotations.destructive_hint is True:
        return "destructive annotation"
    if any(map(is_destructive_name, names)):
        return "destructive name"
    if _matches(policy.approve, names):
        return "listed in approve"
    if _matches(policy.auto_approve, names) or policy.approve is False:
        return None
    return "not auto-approved"


def needs_approval(policy: ToolPolicySource, tool: types.Tool, original_name: str) -> bool:
    """Whether a call of ``tool`` needs approval; see :func:`approval_reason`."""
    return approval_reason(policy, tool, original_name) is not None


def _frozen_mapping(value: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(value))


@attrs.frozen
class ApprovalRequest:
    """What the approval callback is asked about: one call, not yet sent."""

    #: the server's config name
    server: str
    #: the merged (namespaced) tool name
    tool: str
    #: the tool's name on its server
    original_name: str
    #: the call's arguments (read-only)
    arguments: Mapping[str, object] = attrs.field(converter=_frozen_mapping)
    #: why approval is needed
    reason: ApprovalReason


#: The embedder's approval callback: ``True`` approves the call; anything else refuses it.
ApprovalCallback: TypeAlias = Callable[[ApprovalRequest], Awaitable[bool]]


async def check_approval(
    needs: bool, callback: ApprovalCallback | None, request: ApprovalRequest
) -> None:
    """Return if the call may go ahead; raise if it may not.

    If ``needs`` is false this returns at once without calling ``callback``. Otherwise the
    callback decides: only ``True`` approves, any other answer raises
    :class:`~supervisor.errors.ApprovalDenied`, and an exception from the callback
    propagates (the call is not made either way). With no callback (headless) it raises
    :class:`~supervisor.errors.ApprovalRequired`, whose message says how to grant approval.
    """
    if not needs:
        return
    where = f"tool {request.tool!r} (server {request.server!r})"
    if callback is None:
        if request.reason in ("destructive annotation", "destructive name"):
            how = (
                "pass an approval callback, or run the CLI with --yes "
                "(destructive tools always ask, even when listed in autoApprove)"
            )
        else:
            how = (
                f"pass an approval callback, add {request.original_name!r} to the server's "
                "autoApprove in the config, or run the CLI with --yes"
            )
        raise ApprovalRequired(
            f"{where} needs approval ({request.reason}) and there is no approval callback;"
            f" the call was not made. To allow it: {how}",
            server=request.server,
            tool=request.tool,
            reason=request.reason,
        )
    if await callback(request) is not True:
        raise ApprovalDenied(
            f"{where}: the approval callback refused the call ({request.reason}); it was not made",
            server=request.server,
            tool=request.tool,
            reason=request.reason,
        )
