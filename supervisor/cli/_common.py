"""What every subcommand shares: exit codes, config loading, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
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


class Parser(argparse.ArgumentParser):
    """A subcommand's parser: options are accepted anywhere, after positionals too
    (``call TOOL --json ARGS``), as ``parse_intermixed_args`` parses them."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_known_intermixed_args parses in two passes, each through this method.
        if self._intermixing or not self._get_positional_actions():
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


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


def print_json(document: object) -> None:
    """One JSON document on standard output, and a newline."""
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
