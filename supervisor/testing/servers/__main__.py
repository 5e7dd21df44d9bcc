"""``python -m supervisor.testing.servers KIND [options]`` — see ``_main``."""

import sys

from ._main import main

sys.exit(main())
