"""What produced a result: interpreter, package versions and the source revision.

Recorded in every ``metrics_summary.json`` (key ``environment``) so a figure can be traced
to the code and the dependency versions that made it, and compared with a rerun. Nothing
here imports the packages it reports on (versions come from their metadata).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["REPORTED_PACKAGES", "git_revision", "run_environment"]

REPORTED_PACKAGES: tuple[str, ...] = (
    "humanclaw-gym",
    "numpy",
    "scipy",
    "gymnasium",
    "pybullet",
    "moderngl",
    "glcontext",
    "torch",
    "mujoco",
    "pillow",
    "imageio-ffmpeg",
)
"""Distributions whose versions can change a figure (None when not installed)."""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_revision(path: str | Path | None = None) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git checkout holding ``path`` (default:
    this package), or None when it is not a checkout or git is unavailable."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if len(commit) != 40:
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


def run_environment() -> dict[str, Any]:
    """The record stored as ``environment`` in run summaries.

    Returns:
        ``{"python": "3.11.7", "platform": ..., "packages": {dist: version or None},
        "git": {"commit", "dirty"} or None}``.
    """
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in REPORTED_PACKAGES},
        "git": git_revision(),
    }
