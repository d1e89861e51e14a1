"""What produced a result: interpreter, package versions and the source revision.

Recorded in every ``metrics_summary.json`` (key ``environment``) so a figure can be traced
to the code and the dependency versions that made it, and compared with a rerun. Nothing
here imports the packages it reports on (versions come from their metadata), except numpy,
a core dependency, for the SIMD instruction sets its ufuncs dispatch to.

The CPU record matters for comparisons: numpy picks its sine, cosine, exponent and similar
kernels by instruction set (AVX-512 machines use other kernels, with other last bits, than
AVX2 machines), OpenBLAS picks its matrix-product kernels by processor (``SkylakeX``,
``Haswell``, ...), and half-physics rollouts amplify a last-bit difference into a different
trajectory. Same record, same bits; see ``docs/baselines.md`` ("Across machines").
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["REPORTED_PACKAGES", "cpu_record", "git_revision", "run_environment"]

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


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _numpy_blas() -> dict[str, Any] | None:
    """numpy's BLAS library and the kernel set it chose at load time (``OPENBLAS_CORETYPE``
    overrides the choice)."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    for info in threadpoolctl.threadpool_info():
        if info.get("user_api") == "blas" and "numpy" in str(info.get("filepath", "")):
            return {
                "api": info.get("internal_api"),
                "architecture": info.get("architecture"),
                "version": info.get("version"),
            }
    return None


def cpu_record() -> dict[str, Any]:
    """The processor, the numpy SIMD targets and numpy's BLAS kernels in use.

    Returns:
        ``{"model": "AMD EPYC" or None, "machine": "x86_64", "numpy_simd": ["X86_V3", ...],
        "blas": {"api": "openblas", "architecture": "Haswell", "version": ...} or None}``;
        ``numpy_simd`` lists the dispatch targets numpy found and enabled on this CPU (after
        ``NPY_DISABLE_CPU_FEATURES``), None when numpy does not expose them.
    """
    import numpy  # noqa: F401  (loads the BLAS library that is reported)

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        simd: list[str] | None = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    except ImportError:  # another numpy layout: report what is known
        simd = None
    return {
        "model": _cpu_model(),
        "machine": platform.machine(),
        "numpy_simd": simd,
        "blas": _numpy_blas(),
    }


def run_environment() -> dict[str, Any]:
    """The record stored as ``environment`` in run summaries.

    Returns:
        ``{"python": "3.11.7", "platform": ..., "cpu": cpu_record(), "packages": {dist:
        version or None}, "git": {"commit", "dirty"} or None}``.
    """
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_record(),
        "packages": {name: _version(name) for name in REPORTED_PACKAGES},
        "git": git_revision(),
    }
