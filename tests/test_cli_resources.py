"""resources, read, prompts and prompt: the merged resources and prompts from the command
line, against the `rich` fixture server (run as a real process)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from supervisor.testing.servers import stdio_params


@pytest.fixture
def config(tmp_path: pathlib.Path) -> str:
    command, args = stdio_params("rich")
    path = tmp_path / "mcp.json"
    servers = {"rich": {"command": command, "args": args, "initTimeout": 120}}
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


def test_resources_lists_resources_and_templates(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resources lists each resource and template; piped, its lines are whole, however
    narrow ``$COLUMNS`` says the terminal is."""
    monkeypatch.setenv("COLUMNS", "30")
    done = run("resources", "--config", config, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [r["uri"] for r in document["resources"]] == ["notes://index", "notes://logo"]
    assert document["resources"][1]["mime_type"] == "image/png"
    assert [t["uri_template"] for t in document["templates"]] == ["note://{title}"]
    table = run("resources", "--config", config).stdout.splitlines()
    assert table[0].split() == ["uri", "server", "type", "description"]
    assert table[3] == "note://{title}  rich    text/plain  (template)"
    assert table[-1] == "2 resources and 1 template"


def test_read_prints_text_names_binary_and_refuses_the_unknown(config: str) -> None:
    assert run("read", "--config", config, "notes://index").stdout == "hello\ntodo\n"
    assert run("read", "note://trio", "--config", config).stdout == "note trio\n"  # template
    logo = run("read", "--config", config, "notes://logo")
    assert logo.stdout == "[image/png: 68 bytes from notes://logo]\n"
    blob = json.loads(run("read", "--config", config, "notes://logo", "--json").stdout)
    assert blob["contents"][0]["blob"] and blob["contents"][0]["mime_type"] == "image/png"
    unknown = run("read", "--config", config, "nope://x")
    assert unknown.returncode == 2
    assert "UnknownResource" in unknown.stderr and "give --server NAME" in unknown.stderr


def test_prompts_and_prompt(config: str) -> None:
    listed = json.loads(run("prompts", "--config", config, "--json").stdout)
    by_name = {p["name"]: p for p in listed["prompts"]}
    assert by_name["rich_summarize"]["arguments"] == [
        {"name": "title", "required": True, "description": None}
    ]
    assert by_name["rich_greet"]["arguments"] == []
    got = run("prompt", "--config", config, "rich_summarize", "title=trio")
    assert (got.returncode, got.stdout) == (0, "[user] Summarize note trio\n")
    missing = run("prompt", "--config", config, "rich_summarize")
    assert missing.returncode == 2 and "title: required argument missing" in missing.stderr
    bad = run("prompt", "--config", config, "rich_summarize", "title")
    assert bad.returncode == 2 and "arguments are NAME=VALUE" in bad.stderr


ONE_OF_EACH = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("single")


@app.resource("notes://only", name="only", mime_type="text/plain")
async def only() -> str:
    return "only"


@app.prompt()
async def ask() -> str:
    \"\"\"The one prompt.\"\"\"
    return "Ask."


app.run()
"""


def test_one_of_each_is_counted_in_the_singular(tmp_path: pathlib.Path) -> None:
    """A server with one resource, no template and one prompt: '1 resource and 0
    templates', '1 prompt' — not '1 resources', '1 prompts'."""
    script = tmp_path / "single.py"
    script.write_text(ONE_OF_EACH)
    path = tmp_path / "mcp.json"
    servers = {"single": {"command": sys.executable, "args": [str(script)], "initTimeout": 120}}
    path.write_text(json.dumps({"mcpServers": servers}))
    resources = run("resources", "--config", str(path))
    assert resources.returncode == 0, resources.stderr
    assert resources.stdout.splitlines()[-1] == "1 resource and 0 templates"
    prompts = run("prompts", "--config", str(path))
    assert prompts.returncode == 0, prompts.stderr
    assert prompts.stdout.splitlines()[-1] == "1 prompt (arguments marked ? are optional)"


TWO_IMAGES = """
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.types import ImageContent

app = MCPServer("pictures")


@app.prompt()
async def compare() -> list:
    \"\"\"Two pictures to compare.\"\"\"
    first = ImageContent(type="image", data="Zmlyc3Q=", mime_type="image/png")
    second = ImageContent(type="image", data="c2Vjb25k", mime_type="image/jpeg")
    return [UserMessage(content=first), AssistantMessage(content=second)]


app.run()
"""


def test_prompt_shows_each_non_text_message_as_itself(tmp_path: pathlib.Path) -> None:
    """A prompt of two images prints each message's own content, not the first's twice."""
    script = tmp_path / "pictures.py"
    script.write_text(TWO_IMAGES)
    path = tmp_path / "mcp.json"
    servers = {"pictures": {"command": sys.executable, "args": [str(script)], "initTimeout": 120}}
    path.write_text(json.dumps({"mcpServers": servers}))
    got = run("prompt", "--config", str(path), "pictures_compare")
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["[user]", "[assistant]"]
    assert '"Zmlyc3Q="' in lines[0] and '"c2Vjb25k"' in lines[1]
