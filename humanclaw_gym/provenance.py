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
A batch run therefore records, in every episode folder, the CPU of the node that ran the
episode (``node.json``, :func:`write_node_record`), and its summary says when one run's
episodes ran on CPUs with different records (:func:`episode_cpu_groups`).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "NODE_FILE",
    "NODE_SCHEMA",
    "REPORTED_PACKAGES",
    "cpu_record",
    "cpu_record_differences",
    "describe_cpu",
    "episode_cpu_groups",
    "git_revision",
    "node_record_problem",
    "read_node_record",
    "run_environment",
    "write_node_record",
]

NODE_FILE = "node.json"
"""The file in an episode folder that records the CPU of the node that ran the episode."""
NODE_SCHEMA = "humanclaw_node_v1"
_NODE_RECORD_MAX_BYTES = 1 << 20  # a record is a few hundred bytes

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


def write_node_record(directory: str | os.PathLike[str]) -> None:
    """Write ``node.json`` into an episode folder: ``{"schema": "humanclaw_node_v1",
    "cpu": cpu_record()}`` of this process (the node that runs the episode). Only the CPU
    is recorded, no host name, so that a folder is the same on any node of one CPU record."""
    from humanclaw_gym.fileio import write_json_record

    write_json_record(Path(directory) / NODE_FILE, {"schema": NODE_SCHEMA, "cpu": cpu_record()})


def read_node_record(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``cpu`` record of an episode folder's ``node.json``; None when the file is
    missing, unreadable or not a well-formed ``humanclaw_node_v1`` record (folders of older
    versions, a damaged or foreign file: nested too deeply for the decoder, other fields,
    other types); see :func:`node_record_problem`."""
    data, _ = _load_node_record(Path(directory) / NODE_FILE)
    return data


def node_record_problem(directory: str | os.PathLike[str]) -> str | None:
    """Why an episode folder's ``node.json`` is not a well-formed record (one line); None
    when it is, or when there is none (folders of older versions have none)."""
    path = Path(directory) / NODE_FILE
    if not path.exists():
        return None
    return _load_node_record(path)[1]


_CPU_TEXT_FIELDS = ("model", "machine")
_BLAS_FIELDS = ("api", "architecture", "version")


def _load_node_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        if path.stat().st_size > _NODE_RECORD_MAX_BYTES:
            return None, f"{path}: larger than {_NODE_RECORD_MAX_BYTES} bytes"
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"{path}: missing"
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        return None, f"{path}: not readable JSON ({type(exc).__name__})"
    if not isinstance(data, dict) or data.get("schema") != NODE_SCHEMA:
        return None, f"{path}: not a {NODE_SCHEMA} record"
    cpu = data.get("cpu")
    problem = _cpu_record_problem(cpu)
    if problem is not None:
        return None, f"{path}: field 'cpu' {problem}"
    return cpu, None


def _cpu_record_problem(cpu: Any) -> str | None:
    """What makes ``cpu`` differ from the shape :func:`cpu_record` writes; None if nothing."""
    fields = (*_CPU_TEXT_FIELDS, "numpy_simd", "blas")
    if not isinstance(cpu, dict) or set(cpu) != set(fields):
        return f"must be an object with the fields {', '.join(fields)}"
    for name in _CPU_TEXT_FIELDS:
        if cpu[name] is not None and not isinstance(cpu[name], str):
            return f"field {name!r} must be a string or null"
    simd = cpu["numpy_simd"]
    if simd is not None and (
        not isinstance(simd, list) or not all(isinstance(x, str) for x in simd)
    ):
        return "field 'numpy_simd' must be a list of strings or null"
    blas = cpu["blas"]
    if blas is not None and (
        not isinstance(blas, dict)
        or set(blas) != set(_BLAS_FIELDS)
        or not all(v is None or isinstance(v, str) for v in blas.values())
    ):
        return f"field 'blas' must be null or an object of strings {', '.join(_BLAS_FIELDS)}"
    return None


def episode_cpu_groups(directories: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """The episodes of ``directories`` grouped by the CPU record of the node that ran them.

    Folders that do not exist (episodes that never ran) are not counted; folders without a
    record form the group ``"cpu": None``.

    Returns:
        ``[{"cpu": record or None, "episodes": n}, ...]``, largest group first; more than
        one group with a record means the run mixed CPUs whose figures can differ in the
        last bits (and then in whole trajectories).
    """
    counts: dict[str, int] = {}
    records: dict[str, dict[str, Any] | None] = {}
    for directory in directories:
        if not Path(directory).is_dir():
            continue
        cpu = read_node_record(directory)
        key = json.dumps(cpu, sort_keys=True)
        records[key] = cpu
        counts[key] = counts.get(key, 0) + 1
    order = sorted(counts, key=lambda key: (-counts[key], key))
    return [{"cpu": records[key], "episodes": counts[key]} for key in order]


def describe_cpu(cpu: dict[str, Any] | None) -> str:
    """One line naming a CPU record: model, machine, numpy SIMD targets, BLAS kernels."""
    if cpu is None:
        return "not recorded"
    simd = " ".join(cpu.get("numpy_simd") or []) or "none"
    blas = cpu.get("blas") or {}
    kernels = " ".join(str(v) for v in (blas.get("api"), blas.get("architecture")) if v)
    return (
        f"{cpu.get('model') or 'unknown CPU'} ({cpu.get('machine') or '?'}), "
        f"numpy SIMD {simd}, BLAS {kernels or 'unknown'}"
    )


def cpu_record_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """What differs between two CPU records, in words (``"BLAS kernel"``, ...); empty when
    they are equal; ``["record"]`` when one of them is missing."""
    if a is None or b is None:
        return [] if a is b else ["record"]
    blas_a, blas_b = a.get("blas") or {}, b.get("blas") or {}
    checks = (
        ("CPU model", a.get("model"), b.get("model")),
        ("machine", a.get("machine"), b.get("machine")),
        ("numpy SIMD", a.get("numpy_simd"), b.get("numpy_simd")),
        ("BLAS library", blas_a.get("api"), blas_b.get("api")),
        ("BLAS kernel", blas_a.get("architecture"), blas_b.get("architecture")),
        ("BLAS version", blas_a.get("version"), blas_b.get("version")),
    )
    return [name for name, x, y in checks if x != y]
