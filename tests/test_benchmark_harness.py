"""The performance harness runs: its quick mode end to end (in CI's slow step), so that a
change of an interface it times cannot break it unnoticed again (its timing wrapper still
called ``renderer.render(camera, instance=...)`` after the render-by-modes change)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_harness_quick_mode_writes_a_complete_report(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(_ROOT / "benchmarks" / "run.py"), "--out", str(out)]
    cmd += ["--steps", "3", "--quick", "--hssd-objects", "5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["schema"] == "humanclaw_benchmark_v1"
    for section in (
        "decision_step",
        "parts",
        "physics_backends",
        "direct_backends",
        "raw_pybullet",
        "reset_same_scene",
        "render",
        "obs_render",
        "metrics_overhead",
        "memory",
        "scene_dataset",
        "targets",
    ):
        assert section in report, section
    assert report["decision_step"]["n"] == 3
    assert set(report["parts"]) == {"motion", "physics", "render"}  # the timing wrappers ran
    assert all(report["parts"][k]["n"] > 0 for k in report["parts"])
    assert "synthetic" in report["scene_dataset"], report["scene_dataset"]
    assert report["targets"] and all(isinstance(v, bool) for v in report["targets"].values())
    assert "wrappers" not in report and "vector" not in report  # --quick leaves them out
