"""Merged names stay within 64 characters, with stable hashes that tell servers apart."""

from __future__ import annotations

import re

import pytest
from mcp_types import Tool

from supervisor import ApprovalRequest, ApprovalRequired
from supervisor.registry import NamingPolicy, merge
from supervisor.registry._naming import MAX_NAME, _short_hash
from supervisor.tools._approval import check_approval


def tools(*names: str) -> list[Tool]:
    return [Tool(name=n, input_schema={"type": "object"}) for n in names]


def names(catalog) -> list[str]:  # noqa: ANN001
    return list(catalog)


def test_a_name_of_exactly_64_characters_is_kept_as_it_is() -> None:
    """64 characters fit: no hash is added."""
    name = "n" * MAX_NAME
    assert names(merge([("a", "", tools(name))])) == [name]


def test_a_longer_name_is_cut_to_64_with_a_hash_and_no_doubled_separator() -> None:
    """A name over 64 characters keeps 55, drops a trailing '_' or '-' there, and ends
    with '_' and 8 hex digits of a hash of the server and the name."""
    long = "a" * 54 + "__" + "b" * 20  # characters 55 and 56 are '_'
    (merged,) = names(merge([("srv", "", tools(long))]))
    assert len(merged) <= MAX_NAME
    assert re.fullmatch(r"a{54}_[0-9a-f]{8}", merged), merged
    assert merged.endswith(_short_hash("srv", long))


def test_only_separators_are_dropped_at_the_cut() -> None:
    """Letters at the cut stay, whatever they are: only '_' and '-' are dropped."""
    long = "a" * 53 + "XX" + "b" * 20  # characters 54 and 55 are 'X'
    (merged,) = names(merge([("srv", "", tools(long))]))
    assert merged == "a" * 53 + "XX_" + _short_hash("srv", long)


def test_the_same_long_name_on_two_servers_gets_two_hashes_not_a_clash() -> None:
    """The hash covers the server: two servers' identical long names differ by it,
    without a clash suffix."""
    long = "t" * 80
    first, second = names(merge([("a", "", tools(long)), ("b", "", tools(long))]))
    assert first != second
    assert not first.endswith("_2") and not second.endswith("_2")
    assert len(first) == len(second) == MAX_NAME


def test_two_clashing_64_character_names_stay_within_64() -> None:
    """The clash suffix replaces the end of a full-length name: still 64 characters."""
    name = "c" * MAX_NAME
    first, second = names(merge([("a", "", tools(name)), ("b", "", tools(name))]))
    assert first == name
    assert second == "c" * (MAX_NAME - 2) + "_2"


def test_short_hashes_are_stable_and_take_any_string() -> None:
    """Eight hex digits, the same for the same parts, and a lone surrogate is no error."""
    assert _short_hash("a", "b") == _short_hash("a", "b") != _short_hash("a", "c")
    assert re.fullmatch(r"[0-9a-f]{8}", _short_hash("a", "\ud800"))
    assert _short_hash("ab", "") != _short_hash("a", "b")  # the parts are separated


def request(reason: str) -> ApprovalRequest:
    return ApprovalRequest(
        server="files", tool="files_wipe", original_name="wipe", arguments={}, reason=reason
    )


@pytest.mark.parametrize(
    ("reason", "advice"),
    [
        ("destructive annotation", "add its exact name 'wipe' to the server's autoApprove"),
        ("destructive name", "globs do not cover destructive tools"),
        ("approve policy", "add 'wipe' to the server's autoApprove"),
    ],
)
async def test_without_a_callback_the_refusal_names_the_tool_and_the_way_out(
    reason: str, advice: str
) -> None:
    """Fail-closed: ApprovalRequired names the tool, the server, the reason and what to
    do — for a destructive tool only its exact name in autoApprove helps, and it says so."""
    with pytest.raises(ApprovalRequired) as info:
        await check_approval(True, None, request(reason))
    message = str(info.value)
    assert "tool 'files_wipe' (server 'files')" in message and f"({reason})" in message
    assert advice in message
    assert "run the CLI with --yes" in message
    assert (info.value.server, info.value.tool, info.value.reason) == (
        "files", "files_wipe", reason
    )
    if reason.startswith("destructive"):
        assert "autoApprove in the config" not in message


def test_the_default_template_drops_an_empty_prefix_with_its_separator() -> None:
    """An empty prefix leaves the bare tool name; parse() finds it the same way."""
    policy = NamingPolicy()
    assert policy.affixes("s", "") == ("", "")
    assert policy.affixes("s", "p") == ("p_", "")


def test_a_64_character_name_normalised_from_other_characters_is_not_cut() -> None:
    """A name that needs normalising (here a dot) and then fits keeps all 64."""
    (merged,) = names(merge([("s", "", tools("a" * 31 + "." + "b" * 32))]))
    assert merged == "a" * 31 + "_" + "b" * 32


def test_hashes_are_pinned() -> None:
    """Hashed names must not change between releases: users' scripts call them."""
    assert _short_hash("a", "b") == "ffc15117"
    assert _short_hash("srv", "xxx") == "4300a43f"


def test_parse_handles_templates_with_a_tail() -> None:
    """Affixes after {tool} are matched and cut too; a name that is only affixes is no
    tool."""
    policy = NamingPolicy("{tool}__{server}")
    assert policy.parse("search__web", [("web", "web"), ("docs", "docs")]) == ("web", "search")
    assert policy.parse("__web", [("web", "web")]) is None
    assert NamingPolicy("mcp__{server}__{tool}").parse("mcp__gh__", [("gh", "gh")]) is None


async def test_a_refusal_by_the_callback_names_the_tool() -> None:
    """ApprovalDenied carries the server, the tool and the reason."""
    from supervisor import ApprovalDenied

    async def no(_: ApprovalRequest) -> bool:
        return False

    with pytest.raises(ApprovalDenied, match="the approval callback refused the call") as info:
        await check_approval(True, no, request("destructive name"))
    assert (info.value.server, info.value.tool, info.value.reason) == (
        "files", "files_wipe", "destructive name"
    )
    assert not isinstance(info.value, ApprovalRequired)
    await check_approval(False, None, request("destructive name"))  # not needed: no ask


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{prefix}_{tool}", "echo"),
        ("{tool}_{prefix}", "echo"),
        ("{prefix}-{tool}", "echo"),
        ("{tool}-{prefix}", "echo"),
        ("{prefix}{tool}", "echo"),
        ("mcp__{server}__{prefix}_{tool}", "mcp__srv__echo"),
    ],
)
def test_an_empty_prefix_takes_its_separator_with_it(template: str, expected: str) -> None:
    """A server without a prefix: the template's {prefix} goes, and the '_' or '-' next
    to it too, wherever it stands."""
    policy = NamingPolicy(template)
    head, tail = policy.affixes("srv", "")
    assert head + "echo" + tail == expected
