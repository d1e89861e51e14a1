"""Packaging: every package directory is installed, and importing the library stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(data["tool"]["setuptools"]["packages"])
    found = set()
    for init in (ROOT / "humanclaw_gym").rglob("__init__.py"):
        found.add(".".join(init.parent.relative_to(ROOT).parts))
    for init in (ROOT / "agents").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT / "agents").parts
        found.add(".".join(("humanclaw_agents", *rel)))
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert listed <= found, (
        f"pyproject.toml lists packages that do not exist: {sorted(listed - found)}"
    )


def test_import_is_cheap_and_registers_the_env():
    code = (
        "import sys, humanclaw_gym, gymnasium as gym;"
        "assert 'HumanClawFindNavInteract-v0' in gym.registry;"
        "heavy = [m for m in ('pybullet', 'torch', 'moderngl', 'openai', 'ray', 'viser', 'imageio_ffmpeg') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _pinned() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[name.lower().replace("_", "-")] = version
    return out


def test_constraints_pin_every_dependency_of_the_readme_installs():
    """The README installs with -c constraints.txt: every requirement of the core and of
    the extras it names is pinned to one version, and torch to the CPU wheel's 2.13.0."""
    import re

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    wanted = list(project["dependencies"])
    for extra in ("render", "test"):
        wanted += project["optional-dependencies"][extra]
    pinned = _pinned()
    names = {
        re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower().replace("_", "-") for req in wanted
    }
    missing = sorted(n for n in names if n not in pinned)
    assert not missing, f"constraints.txt does not pin {missing}"
    assert pinned["torch"] == "2.13.0"
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme.count("-c constraints.txt") >= 2 and "-c constraints.txt" in ci
