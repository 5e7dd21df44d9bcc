"""The package ships typed and its type checking means something: ``py.typed`` is in the
package (and in the wheel's package data); no ``# type: ignore`` (which pyright, the
checker CI runs, is told to disregard); and each ``# pyright: ignore[rule]`` names its
rule and says why (after it, or in the comment line above), so that none silences more
than it meant to and pyright flags one that no longer silences anything."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import supervisor

PACKAGE = Path(supervisor.__file__).parent
ROOT = PACKAGE.parent
IGNORE = re.compile(r"#\s*pyright:\s*ignore(\[[^\]]*\])?(.*)$")


def test_the_package_ships_py_typed() -> None:
    assert (PACKAGE / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["supervisor"]
    pyright = project["tool"]["pyright"]
    assert pyright["enableTypeIgnoreComments"] is False
    assert pyright["reportUnnecessaryTypeIgnoreComment"] == "error"


def test_every_ignore_names_its_rule_and_says_why() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            if re.search(r"#\s*type:\s*ignore", line):
                found.append(f"{where}: '# type: ignore' (pyright disregards it): {line.strip()}")
                continue
            ignore = IGNORE.search(line)
            if ignore is None:
                continue
            rules, after = ignore.group(1), ignore.group(2).strip(" #—-:")
            above = lines[number - 2].strip() if number > 1 else ""
            if not rules:
                found.append(f"{where}: names no rule: {line.strip()}")
            elif not after and not above.startswith("#"):
                found.append(f"{where}: says not why: {line.strip()}")
    assert not found, f"{len(found)} ignores to fix:\n" + "\n".join(found)
