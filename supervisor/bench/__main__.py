"""``python -m supervisor.bench rss N``: the fresh-process RSS probe."""

import sys

from ._memory import _main

raise SystemExit(_main(sys.argv[1:]))
