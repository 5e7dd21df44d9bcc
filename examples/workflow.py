"""A scripted workflow across supervised MCP servers: read, transform, write, and cope.

Run it::

    python examples/workflow.py             # in a temporary directory, removed at the end
    python examples/workflow.py --dir out   # keep the config and the notes files in out/

It writes a config for three local servers (the example servers next to this file, run
by this interpreter), then works through a small inbox:

- ``inbox`` — a notes server (``examples/servers/notes.py``) whose file is reset to a few
  sample notes; reading is auto-approved;
- ``text`` — the text server (``examples/servers/text.py``): ``summarize`` and
  ``word_count``; every tool auto-approved (it only computes);
- ``archive`` — a second notes server with its own, empty file; reading is
  auto-approved, writing asks.

Each inbox note is summarised by the text server and written to the archive. Along the
way it shows the errors a workflow has to handle, each in the place a real script would
handle it:

- ``ToolError`` — a note that is not in the inbox (the tool reports ``isError``);
- ``ToolArgumentsInvalid`` — arguments that do not fit the tool's schema are refused
  before anything is sent, naming each bad field;
- ``ApprovalDenied`` — the approval callback allows writes but refuses anything
  destructive, so tidying the inbox (``delete_note``) is refused and the note is kept;
- ``ServerUnavailable`` — once the text server is stopped, summaries are made locally.

Exit status 0; the supervisor's own log lines (errors only) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import trio

from supervisor import (
    ApprovalDenied,
    ApprovalRequest,
    ServerUnavailable,
    SupervisorHandle,
    ToolArgumentsInvalid,
    ToolError,
    configure_logging,
    open_supervisor,
)

SERVERS = Path(__file__).resolve().parent / "servers"

#: What the inbox holds at the start: title -> body.
INBOX = {
    "standup": "Alice finished the retry logic for the uploader. Bob is still chasing the "
    "flaky integration test on the build farm and will pair with Carol tomorrow.",
    "release": "Version 2.4 ships on Thursday once the changelog is reviewed and the "
    "migration guide covers the renamed configuration keys.",
    "ideas": "Cache the parsed schema per tool. Show restart counts in the status table.",
}

#: A note that arrives once the text server is gone.
LATE = (
    "retro",
    "The outage review went well: alerts fired on time, but the runbook was out of date "
    "and two people restarted the same service.",
)

SUMMARY_WORDS = 8


def say(line: str) -> None:
    print(line, flush=True)


def write_config(directory: Path) -> Path:
    """Reset the inbox and archive files in ``directory`` and write a config using them."""
    inbox, archive = directory / "inbox.json", directory / "archive.json"
    inbox.write_text(json.dumps(INBOX, indent=2) + "\n")
    archive.unlink(missing_ok=True)
    notes = [str(SERVERS / "notes.py")]
    config = {
        "mcpServers": {
            "inbox": {
                "command": sys.executable,
                "args": notes,
                "env": {"NOTES_FILE": str(inbox)},
                "autoApprove": ["list_notes", "get_note"],
            },
            "text": {
                "command": sys.executable,
                "args": [str(SERVERS / "text.py")],
                "autoApprove": True,
            },
            "archive": {
                "command": sys.executable,
                "args": notes,
                "env": {"NOTES_FILE": str(archive)},
                "autoApprove": ["list_notes", "get_note"],
            },
        }
    }
    path = directory / "mcp.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


async def approve(request: ApprovalRequest) -> bool:
    """The approval callback: writes are fine, anything destructive is not."""
    if request.reason in ("destructive annotation", "destructive name"):
        say(f"  approval: refused {request.tool} ({request.reason})")
        return False
    say(f"  approval: allowed {request.tool} ({request.reason})")
    return True


def summarize_locally(text: str, max_words: int) -> str:
    """The same summary as the text server's, for when it is unavailable."""
    words = text.split()
    head = " ".join(words[:max_words])
    return head + " …" if len(words) > max_words else head


async def summarize(sup: SupervisorHandle, body: str) -> tuple[str, str]:
    """A short summary and word count of ``body``, and who made them."""
    try:
        summary = await sup.call("text_summarize", {"text": body, "max_words": SUMMARY_WORDS})
        count = await sup.call("text_word_count", {"text": body})
    except ServerUnavailable as exc:
        # Failed or stopped: the call was never sent. Do the work here instead.
        say(f"  text server unavailable ({type(exc).__name__}): summarising locally")
        words = len(body.split())
        return f"{summarize_locally(body, SUMMARY_WORDS)} [{words} words]", "locally"
    # word_count declares an output schema: its structured content was checked against it.
    words = count.structured["result"]  # type: ignore[index]
    return f"{summary.text} [{words} words]", "by the text server"


async def archive(sup: SupervisorHandle, title: str) -> None:
    """Read one inbox note, summarise it, write the summary to the archive."""
    body = (await sup.call("inbox_get_note", {"title": title})).text
    summary, how = await summarize(sup, body)
    saved = await sup.call("archive_add_note", {"title": title, "body": summary})
    say(f"{title}: summarised {how}; archive says: {saved.text}")


async def run(config: Path) -> int:
    async with open_supervisor(config, approve=approve) as sup:
        catalog = await sup.tools()  # connect every server, to see what they offer
        offered = ", ".join(
            f"{server} {len(entries)} tools" for server, entries in catalog.by_server.items()
        )
        say(f"servers: {offered}")

        # 1. Read the inbox and archive a summary of every note.
        titles = (await sup.call("inbox_list_notes")).text.splitlines()
        say(f"inbox: {', '.join(titles)}")
        for title in titles:
            await archive(sup, title)

        # 2. A note that is not there: the tool reports an error, which is raised.
        try:
            await sup.call("inbox_get_note", {"title": "groceries"})
        except ToolError as exc:
            say(f"groceries: not archived: {exc.server} said {exc.text!r}")

        # 3. Arguments that cannot be right are refused before anything is sent.
        try:
            await sup.call("archive_add_note", {"title": 7})
        except ToolArgumentsInvalid as exc:
            problems = "; ".join(f"{path}: {message}" for path, message in exc.errors)
            say(f"bad note refused before sending: {problems}")

        # 4. Tidy the inbox: deleting is destructive, and the callback refuses it.
        for title in titles:
            try:
                await sup.call("inbox_delete_note", {"title": title})
            except ApprovalDenied as exc:
                say(f"inbox: kept {title!r}: {exc.tool} needs a person's approval")
                break  # the others would be refused the same way

        # 5. The text server goes away; a late note is summarised without it.
        await sup.stop("text")
        say(f"text server: {sup.status()['text'].status}")
        await sup.call("inbox_add_note", {"title": LATE[0], "body": LATE[1]})
        await archive(sup, LATE[0])

        # 6. What the archive holds now.
        archived = (await sup.call("archive_list_notes")).text.splitlines()
        say(f"archive: {len(archived)} notes")
        for title in archived:
            body = (await sup.call("archive_get_note", {"title": title})).text
            say(f"  {title}: {body}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--dir", type=Path, metavar="PATH", help="keep the config and notes files in PATH"
    )
    args = parser.parse_args(argv)
    configure_logging(level="error")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return trio.run(run, write_config(args.dir.resolve()))
    with tempfile.TemporaryDirectory(prefix="mcp-workflow-") as directory:
        return trio.run(run, write_config(Path(directory)))


if __name__ == "__main__":
    sys.exit(main())
