"""The bounds on what a config and its servers may hold, and their defaults: each defined
once here.

:class:`Limits` is the config's ``supervisor.limits`` section (``Settings.limits``) and
what the running supervisor reads: the config loader (file size, server count), the
server actors (listings), the registry (tool definitions) and result normalisation get
the one value the config holds. Imports nothing of the package but
:mod:`supervisor._util._previews` (the standard library only), so every layer may
import it.
"""

from __future__ import annotations

import attrs

from .._util._previews import DEFAULT_MAX_SPILL_BYTES as DEFAULT_MAX_SPILL_BYTES
from .._util._previews import DEFAULT_MAX_SPILL_FILES as DEFAULT_MAX_SPILL_FILES
from .._util._previews import size_text as size_text

#: The size limit a config file is checked against before it is parsed (256 KiB).
DEFAULT_MAX_CONFIG_BYTES = 262_144
#: Most servers one config may hold.
DEFAULT_MAX_SERVERS = 32
#: Seconds a gateway's HTTP session may go without a request before it is closed
#: (``serve --session-idle``): the SDK's default, half an hour.
DEFAULT_SESSION_IDLE = 30 * 60.0
#: Sessions a gateway keeps open over HTTP (``serve --max-sessions``). Each costs some tens
#: of kilobytes while it lives, so the bound keeps abandoned ones to tens of megabytes.
DEFAULT_MAX_SESSIONS = 1000
#: Most tools one server may list.
DEFAULT_MAX_TOOLS_PER_SERVER = 1000
#: Largest catalog (tools, resources and prompts, as JSON) one server may list (2 MiB).
DEFAULT_MAX_CATALOG_BYTES = 2 * 2**20
#: Largest single JSON-RPC message accepted from a server (16 MiB).
DEFAULT_MAX_MESSAGE_BYTES = 16 * 2**20
#: Most ``*/list`` requests one listing may take (pages, the first included).
DEFAULT_MAX_LIST_PAGES = 100
#: Longest tool description kept whole (UTF-8 bytes, 16 KiB); a longer one is cut.
DEFAULT_MAX_DESCRIPTION_BYTES = 16 * 1024
#: Largest input or output schema of a tool (compact JSON bytes, 64 KiB).
DEFAULT_MAX_SCHEMA_BYTES = 64 * 1024
#: Most images of one result kept inline.
DEFAULT_MAX_INLINE_IMAGES = 4
#: Largest image kept inline (decoded bytes, 4 MiB).
DEFAULT_MAX_IMAGE_BYTES = 4 * 2**20
#: Largest preview of a result's structured content (JSON bytes, 16 KiB).
DEFAULT_MAX_STRUCTURED_PREVIEW_BYTES = 16 * 1024
#: Largest text preview of a result (UTF-8 bytes, 24 KiB); more is spilled to a file.
DEFAULT_MAX_PREVIEW_BYTES = 24 * 1024
#: Most lines of a result's text preview; more is spilled to a file.
DEFAULT_MAX_PREVIEW_LINES = 1000


@attrs.frozen(kw_only=True)
class Limits:
    """Size limits that protect the supervisor from oversized input (bytes or counts): on
    the config itself, on what one server may send, and on the previews of its results."""

    #: largest config file read; see :func:`~supervisor.config.load_config` for when a
    #: change takes effect
    max_config_bytes: int = DEFAULT_MAX_CONFIG_BYTES
    #: most servers one config may hold
    max_servers: int = DEFAULT_MAX_SERVERS
    #: most tools one server may list
    max_tools_per_server: int = DEFAULT_MAX_TOOLS_PER_SERVER
    #: largest tool catalog (tools, resources, prompts as JSON) one server may list
    max_catalog_bytes: int = DEFAULT_MAX_CATALOG_BYTES
    #: largest single JSON-RPC message accepted from a server
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: most requests (pages) one listing may take
    max_list_pages: int = DEFAULT_MAX_LIST_PAGES
    #: longest tool description kept whole (a longer one is cut, saying so)
    max_description_bytes: int = DEFAULT_MAX_DESCRIPTION_BYTES
    #: largest input or output schema of a tool (a larger one: the tool is unsupported)
    max_schema_bytes: int = DEFAULT_MAX_SCHEMA_BYTES
    #: images of one result kept inline, and the largest one kept
    max_inline_images: int = DEFAULT_MAX_INLINE_IMAGES
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES
    #: largest preview of a result's structured content
    max_structured_preview_bytes: int = DEFAULT_MAX_STRUCTURED_PREVIEW_BYTES
    #: a result's text preview: at most this many bytes and lines
    max_preview_bytes: int = DEFAULT_MAX_PREVIEW_BYTES
    max_preview_lines: int = DEFAULT_MAX_PREVIEW_LINES
    #: the files a session's spill directory keeps (the newest), and their bytes together
    max_spill_files: int = DEFAULT_MAX_SPILL_FILES
    max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES
