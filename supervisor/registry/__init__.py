"""The merged tool catalog: naming, merging, diffing and lazy exposure (pure, no I/O).

:func:`merge` turns each server's ``tools/list`` result, in config order, into one
:class:`Catalog` whose names are unique and accepted by model APIs
(``^[A-Za-z0-9_-]{1,64}$``). ``diff`` compares two catalogs for the
``tools.registered|deregistered|updated`` events; :attr:`Catalog.conflicts` feeds
``tools.conflict``. :meth:`Catalog.list`, :meth:`Catalog.search` and :meth:`Catalog.load`
expose a large catalog a little at a time.

Naming, in order:

1. Each part (``{prefix}``, ``{server}``, ``{tool}``) is normalised on its own: accents are
   dropped (``café`` → ``cafe``; a tool's own name has none, see below), every run of
   other characters becomes one ``_``, and ``_`` is stripped from the ends of a part that
   needed it. A part left empty becomes ``t`` plus a short hash. With an empty prefix,
   ``{prefix}`` disappears with the separator next to it (``{prefix}_{tool}`` → ``{tool}``).
2. A name longer than 64 characters keeps a readable head and ends in ``_`` plus 8 hex
   digits hashed from the server and original name, so distinct long names stay distinct.
3. A name equal to a built-in (registered by the embedder) never replaces it. The MCP tool
   keeps a *prefixed* name: if its prefix was empty it is named as if the prefix were the
   server's name (``search`` → ``web_search``); otherwise, or if that is taken too, the clash
   policy applies. Either way a :class:`Conflict` with ``builtin=True`` is recorded (the
   caller publishes it as a warning).
4. A name already taken by an earlier tool (earlier server in config order, or earlier in
   the same server's list) follows :attr:`NamingPolicy.clash`: ``"suffix"`` appends ``_2``,
   ``_3`` …; ``"hash"`` appends ``_`` plus 6 hex digits hashed from the server and original
   name (stable across restarts and reorderings); ``"error"`` raises
   :class:`~supervisor.errors.ToolNameConflict`. A :class:`Conflict` naming every server
   involved is recorded for ``suffix`` and ``hash``.

Invalid tools — a name that is not 1 to 128 characters of ``[A-Za-z0-9_.-]`` (MCP's rule),
a description that is not a string, an input schema that is not an object with ``"type":
"object"`` or is not valid JSON Schema, an input or output schema larger than the limit
(:class:`~supervisor.config._limits.Limits`), declaring a ``$schema`` other than 2020-12 or
draft-07 or with a ``$ref`` outside itself, or an original name the server already
listed — are skipped, counted in :attr:`Catalog.unsupported` and explained in
:attr:`Catalog.invalid`; the server's other tools are unaffected. A description longer
than the limit is cut to it with a marker saying so (``Listing.notes``). A tool
listed without a description (missing, null, empty or only whitespace) is valid: its
entry's description is ``Tool '{name}' from MCP server '{server}'``
(``default_description``), which search leaves out. Every entry says where it comes
from (:attr:`Entry.provenance`: merged name, ``source`` ``"mcp"``, server and original
name).

Schemas are checked for the shape JSON Schema 2020-12 gives the keywords that decide
validation (``type``, ``properties``, ``items``, ``additionalProperties``, ``required``,
``enum``, ``anyOf``/``oneOf``/``allOf``/``not``, ``$ref``, ``$defs``/``definitions``,
numeric and length bounds, ``title``/``description``), recursively, in C (msgspec), about a
microsecond a tool. A schema failing that check which declares another ``$schema`` dialect
gets the full metaschema check of its draft before it is rejected. Subtler faults (an
invalid ``pattern`` regex, say) pass here and are reported as
:class:`~supervisor.errors.ToolSchemaInvalid` when the tool is called.

Costs: every tool is checked once per list a server sends — a ``Listing`` is one
checked list, and :func:`merge` checks any other sequence it is given — so merging again
when some server changed only names. A merge hashes nothing: :attr:`Entry.fingerprint` is
computed when read, and ``diff`` compares the listed ``Tool`` objects first (a server
whose list was not fetched again keeps the very same objects), so only tools that were
listed anew are hashed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._catalog import Catalog as Catalog
    from ._catalog import Conflict as Conflict
    from ._catalog import Entry as Entry
    from ._catalog import Provenance as Provenance
    from ._catalog import Summary as Summary
    from ._merge import merge as merge
    from ._naming import NamingPolicy as NamingPolicy
    from ._resources import MergedPrompt as MergedPrompt
    from ._resources import MergedResource as MergedResource
    from ._resources import MergedResourceTemplate as MergedResourceTemplate

__getattr__, __dir__ = attach(__name__)
