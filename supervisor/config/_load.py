""":func:`load_config`: read a config file (size-limited, JSONC), validate it, expand it.

Loading runs in two phases. The structural one (:mod:`._formats`, :mod:`._server`,
:mod:`._settings`) checks the whole document and raises one :class:`ConfigError` listing
every problem; the environmental one (:mod:`._expand`) expands each server on its own and
records what is missing in that server's :attr:`ServerConfig.errors`. It runs for the
structurally sound servers even when the first phase failed, and :func:`inspect_config`
returns both (``check`` reports them together), so one server's structural error does
not hide another's unset variable.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import attrs

from ..errors import ConfigError, FieldError
from ._build import _build_server
from ._expand import _Expander, _workspace_folder
from ._formats import _Document
from ._model import DEFAULT_MAX_CONFIG_BYTES, Config, ServerConfig
from ._validate import _Errors, _within


def load_config(
    source: str | os.PathLike[str] | Mapping[str, object],
    *,
    environ: Mapping[str, str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    max_config_bytes: int | None = None,
) -> Config:
    """Load, validate and normalise a config: a JSON file's path, or the parsed mapping.

    ``${VAR}`` references are expanded from ``environ`` (default :data:`os.environ`);
    ``${PROJECT_ROOT}`` is ``project_root``, by default the config file's directory (the
    current directory for a mapping). Relative ``cwd`` and ``envFile`` paths are resolved
    against the config file's directory (``project_root`` for a mapping), and so is a
    server's ``faults`` plan file, which is read while loading. The file may use
    comments and trailing commas (JSONC), as VS Code and OpenCode allow.

    The file's size is checked *before* it is parsed, against ``max_config_bytes``
    (default :data:`DEFAULT_MAX_CONFIG_BYTES`, 256 KiB), so the file's own
    ``supervisor.limits.maxConfigBytes`` cannot raise the limit for itself; a smaller
    value there is enforced after parsing. To read a larger file, pass the limit here
    (for instance a reload passing the running config's ``settings.limits``).

    Raises :class:`ConfigError` for a missing, unreadable, oversized or malformed file and
    for every structural error, all listed at once. A server that is invalid only because
    of its environment (an unset variable, say) does not raise: see
    :attr:`ServerConfig.errors`.

    Loading registers nothing with the log redactor: the secrets
    (:meth:`Config.secrets`) belong to whoever uses the config —
    :func:`~supervisor.open_supervisor` holds them for its block; elsewhere use
    ``with supervisor.log.redacting(config.secrets()):``.
    """
    found = inspect_config(
        source, environ=environ, project_root=project_root, max_config_bytes=max_config_bytes
    )
    if found.config is None:
        raise ConfigError(found.errors, path=found.label, servers=found.entries)
    return found.config


@attrs.frozen
class Inspection:
    """What :func:`inspect_config` found in a config whose file could be read.

    ``errors`` are the structural errors, in file order; ``entries`` maps each server
    entry found to where it is defined (``mcpServers.github``). ``config`` is the loaded
    config when there is no structural error, else ``None``. ``servers`` holds every server
    entry without a structural error of its own, loaded (its environment's problems in its
    :attr:`ServerConfig.errors`) — all of them when ``config`` is not ``None``, the sound
    ones beside another's error otherwise, so that one error does not hide the rest.
    """

    errors: list[FieldError]
    entries: dict[str, str]
    servers: dict[str, ServerConfig]
    config: Config | None
    #: the config file as named, or ``None`` for a mapping
    label: str | None


def inspect_config(
    source: str | os.PathLike[str] | Mapping[str, object],
    *,
    environ: Mapping[str, str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    max_config_bytes: int | None = None,
) -> Inspection:
    """Validate a config as :func:`load_config` does (same arguments), without raising
    for its structural errors: they are in the :class:`Inspection`, beside every server
    that has none of its own, loaded. A file that cannot be read or parsed still raises
    :class:`ConfigError`; so does a ``source`` of another type (:class:`TypeError`).
    """
    env = os.environ if environ is None else environ
    limit = DEFAULT_MAX_CONFIG_BYTES if max_config_bytes is None else max_config_bytes
    size: int | None = None
    if isinstance(source, Mapping):
        path: Path | None = None
        base = Path(project_root if project_root is not None else os.getcwd()).absolute()
        root_label = "<config>"
        document: object = source
    elif isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source)).absolute()
        base = path.parent
        root_label = os.fspath(source)
        document, size = _read_document(path, root_label, limit)
    else:
        raise TypeError(f"load_config() takes a path or a mapping, not {type(source).__name__}")
    root = Path(project_root).absolute() if project_root is not None else base

    errors = _Errors()
    parsed = _Document(errors, root_label, base)
    settings, drafts = parsed.parse(document)
    if (
        size is not None
        and _sets_config_limit(document)
        and size > settings.limits.max_config_bytes
    ):
        errors.add(
            "supervisor.limits.maxConfigBytes",
            f"the file is {size} bytes, more than this limit of "
            f"{settings.limits.max_config_bytes} bytes",
        )
    _check_server_count(errors, parsed.servers, settings.limits.max_servers)
    wrong = [e.path for e in errors.items]
    sound = [d for d in drafts if not any(_within(where, d.path) for where in wrong)]
    expander = _Expander(env, root, _workspace_folder(path, root))
    servers = {d.name: _build_server(d, settings, expander, base, limit) for d in sound}
    config = None
    if not errors.items:
        config = Config(servers=servers, settings=settings, path=path, project_root=root)
    return Inspection(
        errors=errors.items,
        entries=parsed.servers,
        servers=servers,
        config=config,
        label=None if path is None else root_label,
    )


def _check_server_count(errors: _Errors, servers: Mapping[str, str], limit: int) -> None:
    """More servers than ``supervisor.limits.maxServers`` (disabled ones count too) is an
    error at the section holding the first one past the limit."""
    if len(servers) <= limit:
        return
    where = list(servers.values())[limit].split(".", 1)[0]
    errors.add(
        where,
        f"has {len(servers)} servers, more than the limit of {limit}; remove some, or raise "
        "supervisor.limits.maxServers",
    )


def _sets_config_limit(document: object) -> bool:
    supervisor = document.get("supervisor") if isinstance(document, Mapping) else None
    limits = supervisor.get("limits") if isinstance(supervisor, Mapping) else None
    return isinstance(limits, Mapping) and "maxConfigBytes" in limits


def _read_document(path: Path, label: str, limit: int) -> tuple[object, int]:
    """Read and parse the file, refusing it before parsing if it is larger than ``limit``."""

    def fail(message: str) -> ConfigError:
        return ConfigError([FieldError(label, message)], path=label)

    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise fail(_too_large(size, limit))
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise fail("no such file") from None
    except IsADirectoryError:
        raise fail("is a directory, not a config file") from None
    except OSError as exc:
        raise fail(f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise fail(_too_large(len(data), limit))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text (byte {exc.start})") from None
    try:
        document = json.loads(_strip_jsonc(text), object_pairs_hook=_Object)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise fail("invalid JSON: arrays or objects nested too deeply") from None
    except ValueError:  # int(): more digits than sys.get_int_max_str_digits()
        raise fail("invalid JSON: a number with too many digits") from None
    return document, len(data)


def _too_large(size: int, limit: int) -> str:
    return (
        f"the file is {size} bytes, more than the {limit}-byte limit (checked before "
        "parsing, so supervisor.limits.maxConfigBytes in the file cannot raise it)"
    )


class _Object(dict[str, object]):
    """A parsed JSON object that remembers the keys it saw more than once."""

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        super().__init__(pairs)
        counts = Counter(key for key, _ in pairs)
        self.duplicates = [key for key, n in counts.items() if n > 1]


# A string or a /* comment left open runs to the end of the text: matched once, so that an
# unterminated one is not scanned again from each later quote (quadratic in the file size).
_STRING = r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)'
_COMMENTS = re.compile(_STRING + r"|//[^\n]*|/\*(?:.*?\*/|.*)", re.S)
_TRAILING_COMMAS = re.compile(_STRING + r"|,(?=\s*[}\]])", re.S)


def _strip_jsonc(text: str) -> str:
    """Blank out comments, then trailing commas, keeping every line and column in place."""

    def blank(m: re.Match[str]) -> str:
        s = m.group()
        if s.startswith('"') or (s.startswith("/*") and (len(s) < 4 or not s.endswith("*/"))):
            return s  # a string, or an unterminated comment: left to the JSON parser
        if s == ",":
            before = m.start() - 1
            while before >= 0 and m.string[before].isspace():
                before -= 1
            if before < 0 or m.string[before] in "{[,":
                return s  # not a trailing comma: leave the error to the JSON parser
        return re.sub(r"[^\n]", " ", s)

    return _TRAILING_COMMAS.sub(blank, _COMMENTS.sub(blank, text))
