"""``python -m supervisor``: the ``mcp-supervisor`` command line."""

from .cli import main

raise SystemExit(main())
