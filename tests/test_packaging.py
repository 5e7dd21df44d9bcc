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


def build_wheel(deadline: Deadline, tmp_path: Path) -> Path:
    """A wheel of this tree, built offline from a clean copy of it: the build backend and
    the dependencies are the ones installed here."""
    source = shutil.copytree(ROOT, tmp_path / "source", ignore=LEFT_OUT)
    deadline.run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "-w", tmp_path / "dist", source, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("mcp_supervisor-*.whl")
    return wheel


def fresh_venv(deadline: Deadline, venv: Path) -> Path:
    """A new venv at ``venv`` that has nothing installed of its own; its python."""
    deadline.run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    python = venv / "bin" / "python"
    purelib = deadline.run(
        python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=venv.parent
    ).stdout.strip()
    # The venv sees this interpreter's site directories (the dependencies, and pip), after
    # its own: like --system-site-packages, but also when the tests themselves run in a venv.
    sites = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        sites.append(site.getusersitepackages())
    (Path(purelib) / "dependencies.pth").write_text("".join(f"{s}\n" for s in sites))
    return python


def install(deadline: Deadline, python: Path, wheel: Path) -> None:
    """``wheel`` installed into ``python``'s venv alone (--ignore-installed: a
    mcp-supervisor installed here is neither uninstalled nor reused)."""
    deadline.run(
        python, "-m", "pip", "install", "--no-deps", "--ignore-installed", wheel, cwd=wheel.parent
    )


def test_an_installed_wheel_runs_the_demo_from_any_directory(tmp_path: Path) -> None:
    """A wheel built from this tree ships the demo's servers and ``py.typed``: installed in
    a fresh venv, `mcp-supervisor demo` run from an unrelated directory uses the installed
    package, runs the servers it ships, recovers both of them and exits 0."""
    deadline = Deadline(TIMEOUT)
    wheel = build_wheel(deadline, tmp_path)
    venv = tmp_path / "venv"
    python = fresh_venv(deadline, venv)
    install(deadline, python, wheel)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = "import supervisor; print(supervisor.__file__)"
    imported = deadline.run(python, "-c", where, cwd=elsewhere).stdout.strip()
    package = Path(imported).parent
    assert package.is_relative_to(venv), package
    assert (package / "py.typed").is_file()  # typed, for the users' checkers
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


#: supervisord, from PyPI: the other distribution whose package is named ``supervisor``.
SUPERVISORD = "supervisor==4.3.0"
#: What the lines about it say to do.
ADVICE = (
    "install mcp-supervisor in an environment of its own: pipx install mcp-supervisor, or a venv"
)


def test_supervisord_in_the_same_environment_is_said_in_one_line(tmp_path: Path) -> None:
    """supervisord's package is also ``supervisor``: with both installed in one venv, in
    either order, ``mcp-supervisor --help`` still runs and says in one line on stderr what
    happened and what to do; with ours installed last, so does ``import supervisor`` (once
    per process, the command line included). With supervisord installed last, its
    ``__init__.py`` has replaced ours: nothing of ours runs on ``import supervisor``, and
    the library's names are not there. Uninstalling supervisord then removes that file,
    which the command line says too. (A wheel build, a download of supervisord's from
    PyPI and two venvs: some seconds.)"""
    deadline = Deadline(TIMEOUT)
    ours = build_wheel(deadline, tmp_path)
    deadline.env.pop("PIP_NO_INDEX")  # supervisord comes from PyPI
    download = ("pip", "download", "--no-deps", "-d", tmp_path / "dist", SUPERVISORD)
    deadline.run(sys.executable, "-m", *download, cwd=tmp_path)
    (theirs,) = (tmp_path / "dist").glob("supervisor-*.whl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def installed(name: str, *wheels: Path) -> tuple[Path, Path]:
        """A venv ``name`` with ``wheels`` installed in that order: its python, and its
        package ``supervisor``'s folder."""
        python = fresh_venv(deadline, tmp_path / name)
        for wheel in wheels:
            install(deadline, python, wheel)
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        purelib = deadline.run(python, "-c", where, cwd=elsewhere).stdout.strip()
        return python, Path(purelib) / "supervisor"

    def stderr(python: Path, *command: str) -> list[str]:
        return deadline.run(python, *command, cwd=elsewhere).stderr.splitlines()

    def supervisord_said(package: Path) -> str:
        return (
            f"mcp-supervisor: supervisord is installed in this environment too "
            f"({package / 'supervisord.py'}): both import as 'supervisor' and overwrite each "
            f"other's files, so either may break; {ADVICE}"
        )

    python, package = installed("ours-last", theirs, ours)  # our __init__.py is there
    help_ = str(python.parent / "mcp-supervisor"), "--help"
    assert stderr(python, *help_) == [supervisord_said(package)]
    assert stderr(python, "-c", "import supervisor") == [supervisord_said(package)]

    python, package = installed("theirs-last", ours, theirs)  # their __init__.py is there
    help_ = str(python.parent / "mcp-supervisor"), "--help"
    helped = deadline.run(python, *help_, cwd=elsewhere)
    assert helped.stdout.startswith("usage: mcp-supervisor")
    assert helped.stderr.splitlines() == [supervisord_said(package)]
    assert stderr(python, "-c", "import supervisor") == []
    assert stderr(python, "-c", "import supervisor.supervisord") == []  # theirs works
    missing = "import supervisor; assert not hasattr(supervisor, 'open_supervisor')"
    deadline.run(python, "-c", missing, cwd=elsewhere)

    deadline.run(python, "-m", "pip", "uninstall", "-y", "supervisor", cwd=elsewhere)
    assert stderr(python, *help_) == [
        f"mcp-supervisor: {package / '__init__.py'} is missing (another package that imports "
        "as 'supervisor', such as supervisord, replaced or removed it), so 'import supervisor' "
        f"does not give this library; {ADVICE}"
    ]
