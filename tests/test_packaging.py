"""The package as users get it: a wheel built from this tree, installed in a fresh venv."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

from .test_startup import HEAVY

ROOT = Path(__file__).resolve().parent.parent
#: Seconds for the whole test: copy, build, install and a demo, on a loaded 2-core machine.
TIMEOUT = 300.0
#: What a build leaves in a source tree, and what is not the package's source.
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "mutants", "test-artifacts",
)  # fmt: skip


class Deadline:
    """Runs commands, each within what is left of one overall time budget."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        # No code from this tree (PYTHONPATH), no index (no network), no pip self-check.
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.env |= {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def run(self, *command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(c) for c in command],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=self.env,
            timeout=max(self.end - time.monotonic(), 1.0),
            check=False,
        )
        assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr}"
        return done


def test_an_installed_wheel_runs_the_demo_from_any_directory(tmp_path: Path) -> None:
    """A wheel built from this tree ships the demo's servers: installed in a fresh venv,
    `mcp-supervisor demo` run from an unrelated directory uses the installed package, runs
    the servers it ships, recovers both of them and exits 0."""
    deadline = Deadline(TIMEOUT)
    source = shutil.copytree(ROOT, tmp_path / "source", ignore=LEFT_OUT)  # a clean build
    # Offline: the build backend and the dependencies are the ones installed here.
    deadline.run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "-w", tmp_path / "dist", source, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("mcp_supervisor-*.whl")

    venv = tmp_path / "venv"
    deadline.run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = deadline.run(
        python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path
    ).stdout.strip()
    # The venv sees this interpreter's site directories (the dependencies, and pip), after
    # its own: like --system-site-packages, but also when the tests themselves run in a venv.
    sites = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        sites.append(site.getusersitepackages())
    (Path(purelib) / "dependencies.pth").write_text("".join(f"{s}\n" for s in sites))
    # --ignore-installed: a mcp-supervisor installed here is neither uninstalled nor reused.
    deadline.run(
        python, "-m", "pip", "install", "--no-deps", "--ignore-installed", wheel, cwd=tmp_path
    )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = "import supervisor; print(supervisor.__file__)"
    imported = deadline.run(python, "-c", where, cwd=elsewhere).stdout.strip()
    package = Path(imported).parent
    assert package.is_relative_to(venv), package
    demo = deadline.run(venv / "bin" / "mcp-supervisor", "demo", cwd=elsewhere)
    out = demo.stdout
    assert out.startswith("mcp-supervisor demo: three example MCP servers under supervision\n")
    assert f"  notes  stdio  {package / 'demo' / 'servers' / 'notes.py'}\n" in out
    assert f"  calc   stdio  {package / 'demo' / 'servers' / 'calc.py'}\n" in out
    assert "calc_add(a=2, b=40), sent during the outage -> 42" in out
    assert "flaky_fetch(key='exchange-rate'), sent during the outage -> exchange-rate = " in out
    assert "total: 3 servers, 3 connected" in out
    assert out.rstrip().endswith("all servers stopped.")
    assert "Traceback" not in demo.stderr

    # The installed entry point's --help loads no MCP SDK, HTTP stack, trio or structlog.
    script = venv / "bin" / "mcp-supervisor"
    helped = deadline.run(python, "-X", "importtime", script, "--help", cwd=elsewhere)
    assert helped.stdout.startswith("usage: mcp-supervisor")
    loaded = {line.split("|")[-1].strip() for line in helped.stderr.splitlines()}
    assert "supervisor.cli" in loaded
    assert not {m.partition(".")[0] for m in loaded} & set(HEAVY)
