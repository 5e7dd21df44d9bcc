"""Every Python example in the README and docs/ runs as written."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    pytest.param(code, id=f"{page.name}#{n}")
    for page in PAGES
    for n, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S), 1)
]


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code: str) -> None:
    """The example exits 0 and prints something, as the page says it does."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


# -- the commands and options the pages mention exist ------------------------------------

#: Words that mark a sentence as about what is planned, not what is there.
_PLANNED = ("still to come", "not yet", "planned", "will ")


def _parsers() -> dict[str, set[str]]:
    """Each subcommand of the CLI and the option strings it takes."""
    import argparse

    from supervisor.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    from supervisor.cli._chaos import _soak_parser

    found = {
        name: {o for action in sub._actions for o in action.option_strings}
        for name, sub in commands.choices.items()
    }
    found["chaos soak"] = {o for action in _soak_parser()._actions for o in action.option_strings}
    for name, sub in commands.choices.items():  # commands with actions: `auth login`
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, parser in action.choices.items():
                    found[f"{name} {verb}"] = {o for a in parser._actions for o in a.option_strings}
    return found


def _mentions(text: str) -> list[tuple[str, str]]:
    """``(sentence, command line)`` for every ``mcp-supervisor …`` in inline code or a
    code block, and every inline code span that starts with a subcommand's name."""
    found = []
    for language, block in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if language not in ("", "sh", "bash", "text", "console"):
            continue
        for line in block.splitlines():
            line = line.lstrip("$ ").strip()
            if line.startswith("mcp-supervisor ") and not line.startswith("mcp-supervisor: "):
                found.append((line, line))
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", re.sub(r"```.*?```", "", text, flags=re.S)):
        for span in re.findall(r"`([^`\n]+)`", sentence):
            found.append((sentence, span))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_mention_only_commands_and_options_the_cli_has(page: pathlib.Path) -> None:
    """A command line in the README or docs/ names an existing subcommand and only its
    options (what is planned is said so, and then skipped)."""
    assert _wrong_mentions(page.read_text()) == []


def test_the_mention_check_finds_what_does_not_exist() -> None:
    """Unknown commands and options are found in code blocks and inline code; a sentence
    saying it is planned is skipped."""
    page = (
        "Run `mcp-supervisor frobnicate --config F`, or `status --shiny`.\n\n"
        "```sh\nmcp-supervisor tools --config F --colour\n```\n\n"
        "Still to come: `serve --stdio`. And `status --json` works.\n\n"
        '```json\n{"a": 1}\n```\n\nProse between blocks.\n\n'
        "```sh\nmcp-supervisor chaos soak --servers 2 --shiny\n"
        "mcp-supervisor chaos --plan p.json -- server --its-own-option\n```\n"
    )
    assert _wrong_mentions(page) == [
        "tools has no option --colour ('mcp-supervisor tools --config F --colour')",
        "chaos soak has no option --shiny ('mcp-supervisor chaos soak --servers 2 --shiny')",
        "unknown command in 'mcp-supervisor frobnicate --config F'",
        "status has no option --shiny ('status --shiny')",
    ]


def _wrong_mentions(text: str) -> list[str]:
    parsers = _parsers()
    wrong = []
    for sentence, span in _mentions(text):
        if any(word in sentence.lower() for word in _PLANNED):
            continue
        words = span.split()
        if words and words[0] == "mcp-supervisor":
            words = words[1:]
            if not words or words[0].startswith("-") or words[0].isupper():
                continue  # the program itself, its own --help / -v, or a placeholder
            if words[0].rstrip(":") not in parsers:
                wrong.append(f"unknown command in {span!r}")
                continue
        elif not words or words[0] not in parsers or len(words) == 1:
            continue  # prose that happens to be a command's name ("status")
        command, rest = words[0].rstrip(":"), words[1:]
        if rest and f"{command} {rest[0]}" in parsers:  # `chaos soak`, `auth login`
            command, rest = f"{command} {rest[0]}", rest[1:]
        for word in rest:
            option = word.split("=", 1)[0].strip("[]|,.;)(")
            if option == "--":
                break  # what follows is the server's own command line
            if option.startswith("--") and option not in parsers[command]:
                wrong.append(f"{command} has no option {option} ({span!r})")
    return wrong
