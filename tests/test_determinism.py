"""Two fresh processes with the same settings produce byte-identical results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(out: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "humanclaw_gym", "run", "--episodes", "val100", "--limit", "3"]
    cmd += ["--max-steps", "6", "--metrics", "--quiet", "--output", str(out), *extra]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)


def test_two_fresh_processes_give_identical_metrics_and_trajectories(tmp_path):
    _run(tmp_path / "a", "--agent", "oracle")
    _run(tmp_path / "b", "--agent", "oracle")
    files = sorted((tmp_path / "a").rglob("metrics.json"))
    assert len(files) == 3
    for path in files:
        twin = tmp_path / "b" / path.relative_to(tmp_path / "a")
        assert path.read_bytes() == twin.read_bytes(), path
    cmp = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "compare_runs.py"),
            str(tmp_path / "a"),
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cmp.returncode == 0 and "identical: 3 rollouts" in cmp.stdout, cmp.stdout + cmp.stderr


def test_compare_runs_reports_a_difference(tmp_path):
    _run(tmp_path / "a", "--agent", "random", "--seed", "1")
    _run(tmp_path / "b", "--agent", "random", "--seed", "2")
    cmp = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "compare_runs.py"),
            str(tmp_path / "a"),
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cmp.returncode == 1 and "differ" in cmp.stdout
