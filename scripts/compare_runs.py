"""Compare two ``humanclaw run`` output directories episode by episode.

Used to prove that a change that should not alter results (a refactor, a speed-up) does
not: every episode's ``metrics.json`` must be byte-identical, its trajectories
(``trajectory_before.npz`` / ``trajectory_after.npz``) array-identical, and its
``episode_result.json`` identical apart from the wall-clock time. NPZ files are compared
by content, not by bytes, because the zip container stamps the write time.

Usage::

    python scripts/compare_runs.py outputs/before outputs/after
    python scripts/compare_runs.py A B --json      # machine-readable report

Exit status 0 when both directories hold the same episodes with identical results, 1
otherwise (each difference is listed).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

_VOLATILE_RESULT_KEYS = ("wall_time_s",)


@dataclass
class Args:
    """Compare two run directories (see the module docstring)."""

    before: tyro.conf.Positional[Path]
    """the reference run directory"""
    after: tyro.conf.Positional[Path]
    """the run directory to check against it"""
    json: bool = False
    """print the report as JSON"""


def _rollouts(root: Path) -> dict[str, Path]:
    """``episode dir name/rollout_NN`` -> path, for every rollout with a result."""
    out = {}
    for result in sorted(root.rglob("episode_result.json")):
        out[result.parent.relative_to(root).as_posix()] = result.parent
    return out


def _npz_differences(a: Path, b: Path) -> list[str]:
    with np.load(a, allow_pickle=False) as za, np.load(b, allow_pickle=False) as zb:
        if sorted(za.files) != sorted(zb.files):
            return [f"members {sorted(za.files)} != {sorted(zb.files)}"]
        problems = []
        for name in za.files:
            x, y = za[name], zb[name]
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
                problems.append(f"array {name!r} differs")
        return problems


def _result(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in _VOLATILE_RESULT_KEYS:
        data.pop(key, None)
    return data


def compare(before: Path, after: Path) -> dict[str, list[str]]:
    """Differences per rollout (empty lists are left out); ``"*"`` holds set differences."""
    a, b = _rollouts(before), _rollouts(after)
    report: dict[str, list[str]] = {}
    missing = sorted(set(a) - set(b))
    extra = sorted(set(b) - set(a))
    if missing or extra or not a:
        report["*"] = [f"only in before: {m}" for m in missing] + [
            f"only in after: {e}" for e in extra
        ]
        if not a:
            report["*"].append(f"no rollout under {before}")
    for key in sorted(set(a) & set(b)):
        problems: list[str] = []
        for name in ("metrics.json",):
            pa, pb = a[key] / name, b[key] / name
            if pa.is_file() != pb.is_file():
                problems.append(f"{name} present in only one run")
            elif pa.is_file() and pa.read_bytes() != pb.read_bytes():
                problems.append(f"{name} bytes differ")
        for name in ("trajectory_before.npz", "trajectory_after.npz"):
            pa, pb = a[key] / name, b[key] / name
            if pa.is_file() != pb.is_file():
                problems.append(f"{name} present in only one run")
            elif pa.is_file():
                problems += [f"{name}: {p}" for p in _npz_differences(pa, pb)]
        if _result(a[key] / "episode_result.json") != _result(b[key] / "episode_result.json"):
            problems.append("episode_result.json differs (wall time ignored)")
        if problems:
            report[key] = problems
    return report


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="compare_runs.py")
    report = compare(args.before, args.after)
    count = len(_rollouts(args.before))
    if args.json:
        print(json.dumps({"rollouts": count, "differences": report}, indent=2))
    elif report:
        print(f"{len(report)} rollout(s) differ out of {count}:")
        for key, problems in report.items():
            for p in problems:
                print(f"  {key}: {p}")
    else:
        print(f"identical: {count} rollouts (metrics.json bytes, trajectories, results)")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
