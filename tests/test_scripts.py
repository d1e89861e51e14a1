"""Smoke tests: the example scripts run as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_custom_planner_script_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "custom_planner.py"), "--episodes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "after" in out.stdout and "steps" in out.stdout


def test_torch_policy_example_runs():
    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "torch_policy_example.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "steps" in out.stdout


def test_render_demo_script_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render_demo.py"), "--frames", "1",
         "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )  # fmt: skip
    assert "scene render_demo:" in out.stdout and "ego 448x448" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir())[:2] in (
        ["moderngl_ego.png", "moderngl_exo.png"],
        ["tiny_ego.png", "tiny_exo.png"],
    )


def test_cli_help_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for cmd in (
        "run",
        "rollout",
        "metrics",
        "render",
        "report",
        "serve",
        "doctor",
        "episodes",
        "scenes",
    ):
        assert cmd in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--episodes" in out.stdout and "--resume" in out.stdout


def test_cli_unknown_command_exits_2():
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "frobnicate"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "unknown command" in out.stderr


def test_check_final_positions_reports_an_agent_that_ends_away_from_its_target(tmp_path):
    """The reach-and-sight check of scripts/check_final_positions.py fails a run whose agent
    stopped 2 m from the chair (random agent, 2 decisions), naming the episode; missing
    bundles are an error, not a pass. (The oracle passing it: tests/test_oracle.py.)"""
    listing = tmp_path / "one.json"
    listing.write_text('["hc_val_028_001"]')
    out = tmp_path / "run"
    subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", "--episodes", str(listing), "--agent",
         "random", "--seed", "0", "--max-steps", "2", "--quiet", "--output", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    script = ROOT / "scripts" / "check_final_positions.py"
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "hc_val_028_001" in done.stdout and "not within reach and sight" in done.stdout
    empty = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "nothing")], capture_output=True, text=True
    )
    assert empty.returncode != 0 and "no replay bundles" in empty.stderr
