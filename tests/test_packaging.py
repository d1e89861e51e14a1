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
