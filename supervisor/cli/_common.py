"""What every subcommand shares: exit codes, config loading, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TypeAlias

from ..log import get_logger

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

#: ``parser.add_subparsers()``'s result, to which each module adds its commands
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: the parent parsers every subcommand takes (``-v``)
Parents: TypeAlias = "list[argparse.ArgumentParser]"

log = get_logger("supervisor.cli")


def load(args: argparse.Namespace) -> Any:  # noqa: ANN401 - a Config, or None after errors
    """Load ``args.config``; its secrets are redacted for the rest of the command (they join
    ``args.secrets``, the command's :class:`~supervisor.log.RedactionScope`)."""
    from ..config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return None
    args.secrets.add(*config.secrets())
    return config


def one_shot(args: argparse.Namespace) -> None:
    """A one-shot command (``status``, ``tools``, ``call``) gives each server one attempt
    and reports every outcome itself: the supervisor's own warnings (a server failed,
    would be restarted) would only repeat its output, so only errors are logged unless
    ``-v`` asked for more."""
    if not getattr(args, "verbose", 0):
        from ..log import configure_logging

        configure_logging(level="error", stream=sys.stderr, force=True)


#: what a one-shot command says about servers it tried once and found failing
ONE_ATTEMPT_NOTE = (
    "tried once, as every one-shot command does; a long-running supervisor "
    "(`mcp-supervisor serve`, `status --watch`) retries a failed server with backoff"
)


def print_json(document: object) -> None:
    """One JSON document on standard output, and a newline."""
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
